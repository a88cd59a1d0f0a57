/*
 * tests/threads_fence.c - threads racing on one fence register. Plain C, no
 * criterion: a case of THREAD_CASES (tests/threads_cases.h), run by make test
 * and under ThreadSanitizer by make check.
 *
 * Four threads admit interleaved rising tokens, so most admits race with a
 * newer one; a watcher loads the word throughout. The word must only rise,
 * every refusal must be explained by a newer admitted token, and the largest
 * token must win.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "threads_cases.h"

#define ADMITTERS  4
#define LAST_TOKEN (ADMITTERS * 5000)

static shl_fence fence;
static atomic_int done, bad;

static void *admitter(void *arg)
{
    uint64_t k = (uint64_t)(uintptr_t)arg;
    for (uint64_t tok = k + 1; tok <= LAST_TOKEN; tok += ADMITTERS) {
        int rc = shl_fence_admit(&fence, tok);
        uint64_t v = 0;
        shl_fence_load(&fence, &v);
        if ((rc == SHL_OK && v < tok) || (rc == SHL_ESTALE && v <= tok) ||
            (rc != SHL_OK && rc != SHL_ESTALE))
            atomic_fetch_add(&bad, 1);
    }
    return NULL;
}

static void *watcher(void *arg)
{
    (void)arg;
    uint64_t last = 0, v = 0;
    while (!atomic_load(&done)) {
        shl_fence_load(&fence, &v);
        if (v < last)
            atomic_fetch_add(&bad, 1);
        last = v;
    }
    return NULL;
}

const char *tc_fence_admit_race(void)
{
    pthread_t th[ADMITTERS], w;
    shl_fence_init(&fence, 0);
    atomic_store(&done, 0);
    atomic_store(&bad, 0);
    if (pthread_create(&w, NULL, watcher, NULL) != 0)
        return "pthread_create";
    for (uintptr_t i = 0; i < ADMITTERS; i++)
        if (pthread_create(&th[i], NULL, admitter, (void *)i) != 0)
            return "pthread_create";
    for (int i = 0; i < ADMITTERS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&done, 1);
    pthread_join(w, NULL);
    uint64_t v = 0;
    shl_fence_load(&fence, &v);
    if (v != LAST_TOKEN)
        return "the largest token did not win";
    if (atomic_load(&bad))
        return "the fence went down, or refused without a newer token";
    return NULL;
}
