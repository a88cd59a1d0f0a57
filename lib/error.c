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
    case SHL__SHM_OK:
        return SHL_OK;
#define SHL__FROM_SHM(name, code)                                                                  \
    case SHL__SHM_##name:                                                                          \
        return SHL_##name;
        SHL__SHM_ERRORS(SHL__FROM_SHM)
#undef SHL__FROM_SHM
    }
    return SHL_ESYS;
}
