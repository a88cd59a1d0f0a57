/*
 * etcd/curl_api.h - libcurl, loaded at run time (dlopen) on the first use of
 * the etcd client, so that a program using shared-memory tables only never
 * maps libcurl and its dependencies. The client calls libcurl through the
 * table etc_curl, filled by etc_curl_load(). Not installed.
 */
#ifndef SHL_ETCD_CURL_API_H
#define SHL_ETCD_CURL_API_H

#include <curl/curl.h>

#include "etcd.h"

/* The soname loaded: libcurl's ABI 4 (every libcurl 7.x and 8.x). */
#define ETC_CURL_SONAME "libcurl.so.4"

/* The libcurl functions the client (and tools/etcd_cluster.c) use. */
struct etc_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *h);
    const char *(*easy_strerror)(CURLcode rc);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *extra, unsigned n, int timeout_ms,
                            int *numfds);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    CURLMcode (*multi_cleanup)(CURLM *m);
};

/* Valid once etc_curl_load() returned ETC_OK. */
extern struct etc_curl_api etc_curl ETC_HIDDEN;

/*
 * Loads libcurl and initialises it (curl_global_init), once per process,
 * thread-safely; later calls return the first one's result. ETC_OK;
 * ETC_ENOTSUP when libcurl cannot be loaded or lacks a function used here
 * (etc_curl_error() says why); ETC_ENOMEM when curl_global_init fails.
 * The library is never unloaded (libcurl's global state is released when the
 * process exits: curl_global_cleanup is not safe against other users of curl
 * in the process).
 */
int etc_curl_load(void) ETC_HIDDEN;
/* Why the load failed ("" when it did not): the loader's message. */
const char *etc_curl_error(void) ETC_HIDDEN;

#endif
