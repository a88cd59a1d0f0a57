/*
 * tests/test_fence.c - the fence register: admits tokens that do not go
 * backwards, refuses older ones, stays monotonic under racing processes and
 * threads.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "common.h"

Test(fence, admits_equal_and_newer_refuses_older)
{
    shl_fence f;
    uint64_t v;
    cr_assert_eq(shl_fence_init(&f, 0), SHL_OK);
    cr_assert_eq(shl_fence_admit(&f, 1), SHL_OK);
    cr_assert_eq(shl_fence_admit(&f, 5), SHL_OK);
    cr_assert_eq(shl_fence_admit(&f, 5), SHL_OK, "the same holder's next request");
    cr_assert_eq(shl_fence_admit(&f, 4), SHL_ESTALE);
    cr_assert_eq(shl_fence_admit(&f, 1), SHL_ESTALE);
    cr_assert_eq(shl_fence_load(&f, &v), SHL_OK);
    cr_assert_eq(v, 5, "a refusal leaves the fence as it was");
    cr_assert_eq(shl_fence_admit(&f, UINT64_MAX), SHL_OK);
    cr_assert_eq(shl_fence_admit(&f, UINT64_MAX - 1), SHL_ESTALE);
}

Test(fence, zero_memory_is_an_open_fence)
{
    shl_fence f = {0};
    cr_assert_eq(shl_fence_admit(&f, 3), SHL_OK);
    cr_assert_eq(f.word, 3);
    cr_assert_eq(shl_fence_init(&f, 10), SHL_OK);
    cr_assert_eq(shl_fence_admit(&f, 9), SHL_ESTALE);
}

Test(fence, bad_arguments)
{
    uint64_t words[2] = {0, 0};
    shl_fence *odd = (shl_fence *)(void *)((char *)words + 4);
    uint64_t v;
    shl_fence f = {0};
    cr_assert_eq(shl_fence_admit(NULL, 1), SHL_EINVAL);
    cr_assert_eq(shl_fence_admit(&f, 0), SHL_EINVAL, "token 0 is never a real token");
    cr_assert_eq(shl_fence_admit(odd, 1), SHL_EINVAL);
    cr_assert_eq(shl_fence_init(odd, 1), SHL_EINVAL);
    cr_assert_eq(shl_fence_load(odd, &v), SHL_EINVAL);
    cr_assert_eq(shl_fence_load(&f, NULL), SHL_EINVAL);
    cr_assert_eq(words[0] | words[1], 0, "nothing written through a misaligned fence");
}

#define NPROC    4
#define PER_PROC 20000

struct race {
    shl_fence fence;
    _Atomic uint64_t admitted_max; /* the largest token any process was admitted with */
    _Atomic int violations;
};

static struct race *race;
static int child_id;

/* Child k admits k + 1, k + 1 + NPROC, ...: tokens interleave across
 * processes, so most admits race with a newer one from another process. */
static int admit_loop(void *arg)
{
    (void)arg;
    for (uint64_t tok = (uint64_t)child_id + 1; tok <= NPROC * PER_PROC; tok += NPROC) {
        int rc = shl_fence_admit(&race->fence, tok);
        uint64_t now;
        shl_fence_load(&race->fence, &now);
        if (rc == SHL_OK) {
            if (now < tok)
                atomic_fetch_add(&race->violations, 1); /* lowered after admit */
            uint64_t m = atomic_load(&race->admitted_max);
            while (m < tok && !atomic_compare_exchange_weak(&race->admitted_max, &m, tok))
                ;
        } else if (rc != SHL_ESTALE || now <= tok) {
            atomic_fetch_add(&race->violations, 1); /* refused without a newer token */
        }
    }
    return 0;
}

Test(fence, racing_processes_never_lower_it)
{
    race = mmap(NULL, sizeof *race, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(race != MAP_FAILED);
    pid_t p[NPROC];
    for (int i = 0; i < NPROC; i++) {
        child_id = i;
        p[i] = t_fork(admit_loop, NULL);
    }
    for (int i = 0; i < NPROC; i++)
        cr_assert_eq(t_wait(p[i]), 0);
    cr_assert_eq(atomic_load(&race->violations), 0);
    cr_assert_eq(race->fence.word, NPROC * PER_PROC, "the largest token wins");
    cr_assert_eq(atomic_load(&race->admitted_max), NPROC * PER_PROC);
    munmap(race, sizeof *race);
}

/* The threaded race (threads/fence_admit_race) is in tests/threads_fence.c, so
 * that it also runs under ThreadSanitizer. */
