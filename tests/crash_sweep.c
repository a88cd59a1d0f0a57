/*
 * tests/crash_sweep.c - every API operation killed at its 1st, 2nd, ... Nth
 * system call, until it completes: the exhaustive complement to the random
 * stress campaign (make crash-sweep; make test runs it too: it takes
 * seconds, the library's lease operations making few system calls).
 *
 *   crash-sweep [--op NAME] [--verbose]
 *
 * For each operation and each N, a child process sets the operation up
 * (opens the table, takes the lease it needs, ...), then installs a seccomp
 * filter that hands every system call of its own to this program (user
 * notification) and runs the operation. This program lets calls 1 .. N-1
 * through and SIGKILLs the child at call N, before the kernel runs it: the
 * child dies there as a kill from outside would take it, its locks held or
 * not, its stores so far made. (The vDSO clock reads are not system calls
 * and are not counted.) A call of getppid() with a marker argument after
 * the operation ends the count; the sweep of the operation ends at the first
 * N that the operation passes whole.
 *
 * After each kill:
 *  - invariants: shl_check() on the table, at once and again at the end;
 *  - no token went down: every token issued after the kill is above every
 *    token issued before it (the lease's token counter, shl_inspect());
 *  - progress: a waiter (queued before the operation when the lease was
 *    held, so asleep during it; otherwise started after the kill) gets the
 *    lease within PROGRESS_NS, and then a plain shl_acquire() gets it at
 *    once. The table reclaims a dead holder's lease without delay, and the
 *    leases are held for HOLD_TTL (far longer than PROGRESS_NS), so a waiter
 *    that slept until an expiry, or a lease that stayed with a dead process,
 *    counts as stuck. A bystander process that holds the lease (revoke,
 *    repair and the waits need one) is killed after the kill: what it
 *    still holds is then reclaimable too.
 *
 * Prints one line per operation and the totals: operations, kill points,
 * invariant failures, stuck waiters. Exit 0 only when there were no
 * failures and no stuck waiters.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/kind_shm/crashpoint.h"
#include "run_mark.h"
#include "seccomp_kill.h"
#include "shmlease.h"

#define MS          UINT64_C(1000000)
#define SEC         UINT64_C(1000000000)
#define HOLD_TTL    (60 * SEC) /* every hold: relying on an expiry shows as stuck */
#define SHORT_TTL   (100 * MS) /* the bystander's hold that acquire_wait waits out */
#define PROGRESS_NS (5 * SEC)  /* a waiter must have the lease by then */
#define MARKER      0x5eedc0deUL
#define MAX_N       400 /* an operation with more calls than this is a failure */

enum op {
    OP_ACQUIRE,
    OP_ACQUIRE_RECLAIM,
    OP_ACQUIRE_WAIT,
    OP_SHARED_WAIT,
    OP_RENEW,
    OP_RELEASE,
    OP_WRITE,
    OP_READ,
    OP_GUARD,
    OP_SHARED_ACQUIRE,
    OP_SHARED_RECLAIM,
    OP_SHARED_RELEASE,
    OP_REVOKE,
    OP_REPAIR,
    OP_UNLINK,
    OP_OPEN,
    OP_CREATE,
    OP_CLOSE,
    OP_COUNT
};

static const char *const op_name[OP_COUNT] = {
    "acquire",        "acquire_reclaim", "acquire_wait", "shared_wait", "renew",
    "release",        "write",           "read",         "guard",       "shared_acquire",
    "shared_reclaim", "shared_release",  "revoke",       "repair",      "unlink",
    "open",           "create",          "close",
};

/* What the child holds before its operation, and who else is there. */
static int child_holds(enum op op)
{
    return op == OP_RENEW || op == OP_RELEASE || op == OP_WRITE || op == OP_READ ||
           op == OP_GUARD || op == OP_SHARED_RELEASE || op == OP_CLOSE;
}

static int bystander_holds(enum op op)
{
    return op == OP_ACQUIRE_WAIT || op == OP_SHARED_WAIT || op == OP_REVOKE || op == OP_REPAIR ||
           op == OP_ACQUIRE_RECLAIM || op == OP_SHARED_RECLAIM;
}

/* Ops on a table of their own, made anew for each N. */
static int own_table(enum op op)
{
    return op == OP_UNLINK || op == OP_CREATE;
}

/* Shared with the children. */
struct box {
    _Atomic int ready; /* the child (or bystander) is set up: 1, or failed: -1 */
    _Atomic int go;
    _Atomic int rc; /* the operation's result, when it completed */
    _Atomic int bystander_ready;
    _Atomic int wdone; /* the waiter: done, its result and token */
    _Atomic int wrc;
    _Atomic uint64_t wtoken;
};

struct totals {
    unsigned ops;
    unsigned long kills, failures, stuck;
    unsigned long pending; /* problems shl_check() saw right after a kill (recoveries due) */
};

static struct box *box;
static int verbose;
static char table[128], lease[32];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / SEC), (long)(ns % SEC)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Polls *flag until it is non-zero or `ns` passed; its last value. */
static int until_set(_Atomic int *flag, uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    int v;
    while (!(v = atomic_load(flag)) && now_ns() < end)
        sleep_ns(MS);
    return v;
}

static void fail(unsigned long *failures, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(unsigned long *failures, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "crash-sweep: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    (*failures)++;
}

static pid_t fork_or_die(void)
{
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        perror("crash-sweep: fork");
        exit(2);
    }
    return p;
}

static int reap(pid_t p)
{
    int st;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* The sweep's tables: room for a lease per N (and a dead one per N for
 * repair), a dead holder reclaimed at once. */
static void table_options(shl_options *o, unsigned flags)
{
    shl_options_init(o);
    o->capacity = 2 * MAX_N;
    o->value_size = 64;
    o->policy = SHL_POLICY_RECLAIM_ORPHANS;
    o->reclaim_delay_ms = 0;
    o->flags = flags;
}

static int make_table(const char *name)
{
    shl_options o;
    table_options(&o, SHL_CREATE | SHL_EXCL);
    shl_table *t;
    int rc = shl_open(name, &o, &t);
    if (rc == SHL_OK)
        shl_close(t);
    return rc;
}

/* ------------------------------------------------------------ children */

/* The bystander: holds the lease (ttl given) until killed. */
static void bystander_main(uint64_t ttl)
{
    shl_table *t;
    uint64_t tok;
    if (shl_open(table, NULL, &t) != SHL_OK ||
        shl_acquire(t, lease, "bystander", ttl, &tok) != SHL_OK)
        _exit(2);
    atomic_store(&box->bystander_ready, 1);
    for (;;)
        pause();
}

/* The waiter: waits for the lease, releases it, exits. */
static void waiter_main(void)
{
    shl_table *t;
    uint64_t tok = 0;
    if (shl_open(table, NULL, &t) != SHL_OK)
        _exit(2);
    int rc = shl_acquire_wait(t, lease, "waiter", HOLD_TTL, 2 * PROGRESS_NS, &tok);
    atomic_store(&box->wtoken, tok);
    atomic_store(&box->wrc, rc);
    if (rc == SHL_OK && shl_release(t, lease, "waiter", tok) != SHL_OK)
        atomic_store(&box->wrc, SHL_ELOST); /* held, then not: the sweep says so */
    atomic_store(&box->wdone, 1);
    _exit(0);
}

static void guard_fn(void *arg)
{
    (void)arg;
}

static int run_op(enum op op, shl_table *t, uint64_t tok)
{
    uint64_t gen, token;
    char buf[64];
    size_t len;
    switch (op) {
    case OP_ACQUIRE:
    case OP_ACQUIRE_RECLAIM:
        return shl_acquire(t, lease, "child", HOLD_TTL, &token);
    case OP_ACQUIRE_WAIT:
        return shl_acquire_wait(t, lease, "child", HOLD_TTL, 10 * SEC, &token);
    case OP_SHARED_WAIT:
        return shl_acquire_shared_wait(t, lease, "child", HOLD_TTL, 10 * SEC, &token, &gen);
    case OP_RENEW:
        return shl_renew(t, lease, "child", tok, HOLD_TTL);
    case OP_RELEASE:
    case OP_SHARED_RELEASE:
        return shl_release(t, lease, "child", tok);
    case OP_WRITE:
        return shl_write(t, lease, "child", tok, "after", 5);
    case OP_READ:
        return shl_read(t, lease, buf, sizeof buf, &len, &token);
    case OP_GUARD:
        return shl_guard(t, lease, "child", tok, guard_fn, NULL);
    case OP_SHARED_ACQUIRE:
    case OP_SHARED_RECLAIM:
        return shl_acquire_shared(t, lease, "child", HOLD_TTL, &token, &gen);
    case OP_REVOKE:
        return shl_revoke(t, lease);
    case OP_REPAIR:
        return shl_repair(t, 0, NULL, NULL);
    case OP_UNLINK:
        return shl_unlink(table);
    case OP_CLOSE:
        return shl_close(t);
    default:
        return SHL_EINVAL;
    }
}

/* The child: sets up, hands its system calls over, runs the operation. */
static void child_main(enum op op, int sock)
{
    shl_table *t = NULL;
    uint64_t tok = 0, gen;
    int rc = SHL_OK;
    if (op != OP_CREATE)
        rc = shl_open(table, NULL, &t);
    if (rc == SHL_OK && child_holds(op))
        rc = op == OP_SHARED_RELEASE ? shl_acquire_shared(t, lease, "child", HOLD_TTL, &tok, &gen)
                                     : shl_acquire(t, lease, "child", HOLD_TTL, &tok);
    if (rc == SHL_OK && (op == OP_WRITE || op == OP_READ || op == OP_GUARD))
        rc = shl_write(t, lease, "child", tok, "before", 6);
    if (op == OP_OPEN && rc == SHL_OK)
        rc = shl_close(t);
    atomic_store(&box->ready, rc == SHL_OK ? 1 : -1);
    if (rc != SHL_OK)
        _exit(3);
    until_set(&box->go, 60 * SEC);
    int fd = sk_notify_all();
    if (fd < 0 || sk_send_fd(sock, fd) != 0)
        _exit(4);
    /* From here on every system call is counted. */
    if (op == OP_OPEN) {
        rc = shl_open(table, NULL, &t);
    } else if (op == OP_CREATE) {
        shl_options o;
        table_options(&o, SHL_CREATE | SHL_EXCL);
        rc = shl_open(table, &o, &t);
    } else {
        rc = run_op(op, t, tok);
    }
    atomic_store(&box->rc, rc);
    syscall(SYS_getppid, MARKER);
    _exit(0);
}

/* For repair: a process killed inside the critical section of lease
 * "D<n>" (mid value copy), so that repair has a lock to recover. */
static void die_in_lock(const char *what, struct totals *tot)
{
    pid_t p = fork_or_die();
    if (p == 0) {
        shl_table *t;
        uint64_t tok;
        char d[32];
        snprintf(d, sizeof d, "D%s", lease + 1);
        if (shl_open(table, NULL, &t) != SHL_OK || shl_acquire(t, d, "dier", HOLD_TTL, &tok))
            _exit(2);
        setenv("SHL_CRASHPOINT", "9", 1); /* SHL__CP_WRITE_COPY: spare buffer half copied */
        shl__crashpoint_reset();
        if (shl_write(t, d, "dier", tok, "half", 4) != SHL_OK) /* it dies inside */
            _exit(4);
        _exit(3);
    }
    if (reap(p) != 128 + SIGKILL)
        fail(&tot->failures, "%s: the process meant to die in a lock did not", what);
}

/* ------------------------------------------------------------ checks */

struct report {
    const char *when;
    int quiet;
    unsigned long n;
};

static void count_problem(void *arg, const char *problem)
{
    struct report *r = arg;
    if (!r->quiet)
        fprintf(stderr, "crash-sweep: %s: shl_check: %s\n", r->when, problem);
    r->n++;
}

/* shl_check() on the table: the number of problems it reported. Right
 * after a kill a lock whose holder died is reported until the next locker
 * recovers it: `quiet` then (the counting check comes after the waiter and
 * the new acquirer have been through). */
static unsigned long check_table(shl_table *t, const char *when, int quiet, unsigned long *failures)
{
    struct report r = {when, quiet, 0};
    int rc = shl_check(t, count_problem, &r);
    if (rc != SHL_OK && rc != SHL_ECORRUPT)
        fail(failures, "%s: shl_check: %s", when, shl_errname(rc));
    return r.n;
}

/* The lease's token counter (0 when the lease does not exist). */
static uint64_t token_last(shl_table *t)
{
    shl_lease_detail d;
    return shl_inspect(t, lease, &d) == SHL_OK ? d.token_last : 0;
}

static int waiters_asleep(shl_table *t, uint32_t n)
{
    shl_lease_info in;
    return shl_stat(t, lease, &in) == SHL_OK && in.waiters == n;
}

/* After the kill: the waiter and a new acquirer make progress, no token
 * goes down. `waiter`: the waiter's pid if it was started before. */
static void progress(shl_table *t, pid_t waiter, uint64_t before, const char *what,
                     struct totals *tot)
{
    if (waiter < 0 && (waiter = fork_or_die()) == 0)
        waiter_main();
    uint64_t t0 = now_ns();
    if (!until_set(&box->wdone, PROGRESS_NS) || atomic_load(&box->wrc) != SHL_OK) {
        fprintf(stderr, "crash-sweep: %s: stuck waiter (%s after %llu ms)\n", what,
                atomic_load(&box->wdone) ? shl_errname(atomic_load(&box->wrc)) : "still waiting",
                (unsigned long long)((now_ns() - t0) / MS));
        tot->stuck++;
        kill(waiter, SIGKILL);
        reap(waiter);
        return;
    }
    reap(waiter);
    uint64_t wtok = atomic_load(&box->wtoken), tok = 0;
    if (wtok <= before)
        fail(&tot->failures, "%s: the waiter got token %llu, not above %llu", what,
             (unsigned long long)wtok, (unsigned long long)before);
    int rc = shl_acquire(t, lease, "after", HOLD_TTL, &tok);
    if (rc != SHL_OK) {
        fail(&tot->failures, "%s: a new acquire after the waiter: %s", what, shl_errname(rc));
        return;
    }
    if (tok <= wtok)
        fail(&tot->failures, "%s: the new acquirer got token %llu, not above %llu", what,
             (unsigned long long)tok, (unsigned long long)wtok);
    if (shl_release(t, lease, "after", tok) != SHL_OK)
        fail(&tot->failures, "%s: the new acquirer could not release", what);
}

/* ------------------------------------------------------------ the sweep */

/* One run of `op` killed at its n-th system call. Returns the number of
 * calls the operation made when it completed, -1 when it was killed. */
static long one(enum op op, long n, shl_table **tp, struct totals *tot)
{
    memset(box, 0, sizeof *box);
    alarm(120); /* a hang fails the sweep rather than the machine's patience */
    snprintf(lease, sizeof lease, "L%ld", n);
    char what[96];
    snprintf(what, sizeof what, "%s killed at call %ld", op_name[op], n);
    if (op == OP_CREATE || op == OP_UNLINK) {
        snprintf(table + strlen(table) - 4, 5, "%04u", (unsigned)(n % 10000));
        shl_unlink(table);
        if (op == OP_UNLINK && make_table(table) != SHL_OK) {
            fail(&tot->failures, "%s: cannot make the table", what);
            return -1;
        }
    }
    shl_table *t = NULL;
    if (op != OP_CREATE && shl_open(table, NULL, &t) != SHL_OK) {
        fail(&tot->failures, "%s: cannot open the table", what);
        return -1;
    }
    pid_t bystander = -1, waiter = -1;
    if (bystander_holds(op)) {
        if ((bystander = fork_or_die()) == 0)
            bystander_main(op == OP_ACQUIRE_WAIT || op == OP_SHARED_WAIT ? SHORT_TTL : HOLD_TTL);
        if (until_set(&box->bystander_ready, 10 * SEC) != 1)
            fail(&tot->failures, "%s: the bystander did not take the lease", what);
        if (op == OP_ACQUIRE_RECLAIM || op == OP_SHARED_RECLAIM) { /* the op reclaims it */
            kill(bystander, SIGKILL);
            reap(bystander);
            bystander = -1;
        }
    }
    if (op == OP_REPAIR)
        die_in_lock(what, tot);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("crash-sweep: socketpair");
        exit(2);
    }
    pid_t child = fork_or_die();
    if (child == 0) {
        close(sv[0]);
        child_main(op, sv[1]);
    }
    close(sv[1]);
    if (until_set(&box->ready, 10 * SEC) != 1)
        fail(&tot->failures, "%s: the child could not set up", what);
    /* A waiter asleep on the held lease during the operation. */
    if (t && (child_holds(op) || op == OP_REVOKE || op == OP_REPAIR)) {
        if ((waiter = fork_or_die()) == 0)
            waiter_main();
        uint64_t end = now_ns() + 10 * SEC;
        while (!waiters_asleep(t, 1) && now_ns() < end)
            sleep_ns(MS);
        sleep_ns(5 * MS);
    }
    uint64_t before = t ? token_last(t) : 0;
    atomic_store(&box->go, 1);
    long calls = -1;
    int fd = sk_recv_fd(sv[0]);
    if (fd >= 0)
        calls = sk_supervise(fd, child, n, SYS_getppid, MARKER);
    close(sv[0]);
    int st = reap(child);
    if (calls >= 0)
        snprintf(what, sizeof what, "%s completed (%ld calls)", op_name[op], calls);
    if (calls >= 0 && st != 0)
        fail(&tot->failures, "%s: the child ended with %d after its operation", what, st);
    if (calls < 0 && st != 128 + SIGKILL)
        fail(&tot->failures, "%s: the child ended with %d, not killed", what, st);
    if (calls >= 0 && atomic_load(&box->rc) != SHL_OK && op != OP_READ)
        fail(&tot->failures, "%s: completed with %s", what, shl_errname(atomic_load(&box->rc)));
    if (calls < 0)
        tot->kills++;

    if (own_table(op)) {
        /* The name must be usable again: opened (made if gone) within the bound. */
        if (t)
            shl_close(t);
        t = NULL;
        shl_options o;
        table_options(&o, SHL_CREATE);
        int rc = SHL_EBUSY;
        for (uint64_t end = now_ns() + PROGRESS_NS; rc != SHL_OK && now_ns() < end; sleep_ns(MS))
            rc = shl_open(table, &o, &t);
        if (rc != SHL_OK) {
            fprintf(stderr, "crash-sweep: %s: the table cannot be opened: %s\n", what,
                    shl_errname(rc));
            tot->stuck++;
            shl_unlink(table);
            return calls;
        }
        before = 0;
    }
    unsigned long pending = check_table(t, what, !verbose, &tot->failures);
    if (bystander > 0) { /* what it still holds becomes reclaimable */
        kill(bystander, SIGKILL);
        reap(bystander);
    }
    progress(t, waiter, before, what, tot);
    /* The dead lock of repair's set-up is recovered by nobody but repair. */
    if (op == OP_REPAIR && calls < 0)
        shl_repair(t, 0, NULL, NULL);
    unsigned long left = check_table(t, what, 0, &tot->failures);
    tot->failures += left;
    tot->pending += pending;
    if (own_table(op)) {
        shl_close(t);
        shl_unlink(table);
    } else {
        *tp = t;
    }
    return calls;
}

static void sweep(enum op op, struct totals *tot)
{
    struct totals mine = {0};
    snprintf(table, sizeof table, "shlsweep-%d-%s%s-0000", (int)getpid(), t_run_mark(),
             op_name[op]);
    if (!own_table(op) && make_table(table) != SHL_OK) {
        fail(&tot->failures, "%s: cannot make the table", op_name[op]);
        return;
    }
    long done = -1, n;
    uint64_t t0 = now_ns();
    for (n = 1; n <= MAX_N && done < 0; n++) {
        shl_table *t = NULL;
        done = one(op, n, &t, &mine);
        if (t)
            shl_close(t);
    }
    if (done < 0)
        fail(&mine.failures, "%s: still killed at call %d", op_name[op], MAX_N);
    if (!own_table(op))
        shl_unlink(table);
    printf("%-15s %4ld calls, %4lu kill points, %lu invariant failures, %lu stuck waiters"
           " (%lu recoveries due after kills; %.1f s)\n",
           op_name[op], done, mine.kills, mine.failures, mine.stuck, mine.pending,
           (now_ns() - t0) / 1e9);
    fflush(stdout);
    tot->ops++;
    tot->kills += mine.kills;
    tot->failures += mine.failures;
    tot->stuck += mine.stuck;
    tot->pending += mine.pending;
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "--op") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: crash-sweep [--op NAME] [--verbose]\n");
            return 2;
        }
    }
    box = mmap(NULL, sizeof *box, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (box == MAP_FAILED) {
        perror("crash-sweep: mmap");
        return 2;
    }
    struct totals tot = {0};
    for (int op = 0; op < OP_COUNT; op++)
        if (!only || strcmp(only, op_name[op]) == 0)
            sweep((enum op)op, &tot);
    printf("crash-sweep: %u operations, %lu kill points, %lu invariant failures, %lu stuck "
           "waiters\n",
           tot.ops, tot.kills, tot.failures, tot.stuck);
    return tot.ops && !tot.failures && !tot.stuck ? 0 : 1;
}
