/*
 * etcd/error.c - the client's codes: messages and names, from the one table
 * in etcd.h (ETC_ERRORS).
 */
#include "etcd.h"

const char *etc_strerror(int rc)
{
    switch (rc) {
#define ETC__MSG(name, value, msg)                                                                 \
    case value:                                                                                    \
        return msg;
        ETC_ERRORS(ETC__MSG)
#undef ETC__MSG
    }
    return "unknown etcd client code";
}

const char *etc_errname(int rc)
{
    switch (rc) {
#define ETC__NAME(name, value, msg)                                                                \
    case value:                                                                                    \
        return #name;
        ETC_ERRORS(ETC__NAME)
#undef ETC__NAME
    }
    return "?";
}
