/*
 * etcd/curl_api.c - libcurl through dlopen (see curl_api.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "curl_api.h"

struct etc_curl_api etc_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[256];

/* Each entry: the symbol's name and where its address goes. */
#define ETC__CURL_SYMS(X)                                                                          \
    X(global_init, "curl_global_init")                                                             \
    X(easy_init, "curl_easy_init")                                                                 \
    X(easy_setopt, "curl_easy_setopt")                                                             \
    X(easy_perform, "curl_easy_perform")                                                           \
    X(easy_getinfo, "curl_easy_getinfo")                                                           \
    X(easy_cleanup, "curl_easy_cleanup")                                                           \
    X(easy_strerror, "curl_easy_strerror")                                                         \
    X(slist_append, "curl_slist_append")                                                           \
    X(slist_free_all, "curl_slist_free_all")                                                       \
    X(multi_init, "curl_multi_init")                                                               \
    X(multi_add_handle, "curl_multi_add_handle")                                                   \
    X(multi_remove_handle, "curl_multi_remove_handle")                                             \
    X(multi_perform, "curl_multi_perform")                                                         \
    X(multi_poll, "curl_multi_poll")                                                               \
    X(multi_info_read, "curl_multi_info_read")                                                     \
    X(multi_cleanup, "curl_multi_cleanup")

static void load(void)
{
    void *h = dlopen(ETC_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_err, sizeof load_err, "%s", e ? e : "dlopen " ETC_CURL_SONAME " failed");
        load_rc = ETC_ENOTSUP;
        return;
    }
    struct etc_curl_api api;
    void *p;
    /* A function pointer from dlsym's void * (POSIX guarantees the two
     * have one representation). */
#define ETC__CURL_SYM(field, name)                                                                 \
    if (!(p = dlsym(h, name))) {                                                                   \
        snprintf(load_err, sizeof load_err, "%s: no %s", ETC_CURL_SONAME, name);                   \
        dlclose(h);                                                                                \
        load_rc = ETC_ENOTSUP;                                                                     \
        return;                                                                                    \
    }                                                                                              \
    memcpy(&api.field, &p, sizeof p);
    ETC__CURL_SYMS(ETC__CURL_SYM)
#undef ETC__CURL_SYM
    if (api.global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
        snprintf(load_err, sizeof load_err, "curl_global_init failed");
        load_rc = ETC_ENOMEM;
        return; /* h stays loaded: libcurl may hold state */
    }
    etc_curl = api;
    load_rc = ETC_OK;
}

int etc_curl_load(void)
{
    pthread_once(&load_once, load);
    return load_rc;
}

const char *etc_curl_error(void)
{
    return load_err;
}
