/*
 * tools/bench/rows_alt.c - the kernel's own locks, for comparison: flock,
 * fcntl open-file-description locks, SysV semaphores with SEM_UNDO. None of
 * them has an expiry or a fencing token; they are what a lease replaces.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <unistd.h>

#include "bench.h"

static int lock_fd = -1;
static int sem_id = -1;

static const char *file_setup(struct bench_row *r)
{
    (void)r;
    if (lock_fd >= 0)
        return NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/lockfile", bench_dir);
    lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    return lock_fd < 0 ? "cannot create the lock file" : NULL;
}

static void file_teardown(struct bench_row *r)
{
    (void)r;
    if (lock_fd >= 0)
        close(lock_fd);
    lock_fd = -1;
}

static int run_flock(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    int bad = 0;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        bad |= flock(lock_fd, LOCK_EX);
        bad |= flock(lock_fd, LOCK_UN);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}

static int run_ofd(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    int bad = 0;
    struct flock lk, un;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    un = lk;
    un.l_type = F_UNLCK;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        bad |= fcntl(lock_fd, F_OFD_SETLK, &lk);
        bad |= fcntl(lock_fd, F_OFD_SETLK, &un);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}

static const char *sem_setup(struct bench_row *r)
{
    (void)r;
    sem_id = semget(IPC_PRIVATE, 1, 0600 | IPC_CREAT);
    if (sem_id < 0)
        return "semget failed";
    if (semctl(sem_id, 0, SETVAL, 1) != 0)
        return "semctl SETVAL failed";
    return NULL;
}

static void sem_teardown(struct bench_row *r)
{
    (void)r;
    if (sem_id >= 0)
        semctl(sem_id, 0, IPC_RMID);
    sem_id = -1;
}

static int run_sem(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    int bad = 0;
    struct sembuf down = {0, -1, SEM_UNDO}, up = {0, 1, SEM_UNDO};
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        bad |= semop(sem_id, &down, 1);
        bad |= semop(sem_id, &up, 1);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}

void rows_alt(void)
{
    bench_add("alt", "flock LOCK_EX+LOCK_UN", file_setup, run_flock, file_teardown);
    bench_add("alt", "fcntl F_OFD_SETLK lock+unlock", file_setup, run_ofd, file_teardown);
    bench_add("alt", "semop SEM_UNDO down+up", sem_setup, run_sem, sem_teardown);
}
