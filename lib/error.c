/*
 * lib/error.c - messages and names of the return codes, from one table.
 */
#include "internal.h"

const char *shl_strerror(int rc)
{
    switch (rc) {
#define SHL__ERR_MSG(name, code, msg)                                                              \
    case SHL_##name:                                                                               \
        return msg;
        SHL_ERRNO_MAP(SHL__ERR_MSG)
#undef SHL__ERR_MSG
    }
    return "unknown error";
}

const char *shl_errname(int rc)
{
    switch (rc) {
#define SHL__ERR_NAME(name, code, msg)                                                             \
    case SHL_##name:                                                                               \
        return "SHL_" #name;
        SHL_ERRNO_MAP(SHL__ERR_NAME)
#undef SHL__ERR_NAME
    }
    return "SHL_UNKNOWN";
}

const char *shl_version(void)
{
    return SHLEASE_VERSION_STRING;
}

int shl__from_shm(int rc)
{
    switch (rc) {
    case SHM_OK:
        return SHL_OK;
    case SHM_EINVAL:
        return SHL_EINVAL;
    case SHM_ENOENT:
        return SHL_ENOENT;
    case SHM_EEXIST:
        return SHL_EEXIST;
    case SHM_EPERM:
        return SHL_EPERM;
    case SHM_ECORRUPT:
        return SHL_ECORRUPT;
    case SHM_EVERSION:
        return SHL_EVERSION;
    case SHM_ENOSPC:
        return SHL_ENOSPC;
    case SHM_ENOMEM:
        return SHL_ENOMEM;
    case SHM_ETIMENS:
        return SHL_ETIMENS;
    case SHM_ETIMEDOUT:
        return SHL_ETIMEDOUT;
    case SHM_EBROKEN:
        return SHL_EBROKEN;
    default:
        return SHL_ESYS;
    }
}
