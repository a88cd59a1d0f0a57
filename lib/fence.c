/*
 * lib/fence.c - the fence register: a 64-bit word, in a resource's own
 * memory, that only ever rises to the largest token it admitted.
 *
 * The word lives outside the segment, in memory the library does not own
 * (often shared with other processes), so every access is an atomic builtin
 * on a plain uint64_t: the public type stays usable from C++ and from files
 * that were never touched by C11 atomics. Acquire/release ordering lets a
 * resource publish data after an admit and have the next admitter see it.
 */
#include "internal.h"

static int usable(const shl_fence *f)
{
    return f && ((uintptr_t)f % alignof(uint64_t)) == 0;
}

int shl_fence_init(shl_fence *f, uint64_t token)
{
    if (!usable(f))
        return SHL_EINVAL;
    __atomic_store_n(&f->word, token, __ATOMIC_RELEASE);
    return SHL_OK;
}

int shl_fence_admit(shl_fence *f, uint64_t token)
{
    if (!usable(f) || token == 0)
        return token == 0 ? shl__bad_token() : SHL_EINVAL;
    uint64_t cur = __atomic_load_n(&f->word, __ATOMIC_ACQUIRE);
    for (;;) {
        if (token < cur)
            return SHL_ESTALE;
        if (token == cur)
            return SHL_OK;
        /* On failure `cur` is reloaded: a racing admitter of a newer token
         * makes this one stale, an older one is simply overtaken. */
        if (__atomic_compare_exchange_n(&f->word, &cur, token, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return SHL_OK;
    }
}

int shl_fence_load(const shl_fence *f, uint64_t *token)
{
    if (!usable(f) || !token)
        return SHL_EINVAL;
    *token = __atomic_load_n(&f->word, __ATOMIC_ACQUIRE);
    return SHL_OK;
}

int shl_fence_admit_read(const shl_fence *f, uint64_t gen)
{
    if (!usable(f))
        return SHL_EINVAL;
    /* A load only: a reader never moves the fence, so readers never refuse
     * one another, and a writer's token is compared with writers' only. */
    return gen < __atomic_load_n(&f->word, __ATOMIC_ACQUIRE) ? SHL_ESTALE : SHL_OK;
}
