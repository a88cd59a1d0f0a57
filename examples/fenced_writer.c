/*
 * examples/fenced_writer.c - a resource outside the segment protected by a
 * fence: a paused writer's late write is refused.
 *
 * The resource is a file whose header holds a shl_fence. Every write to it
 * goes "flock, admit the writer's token, write, unlock": the flock
 * serialises admit-then-write, the fence refuses a token older than one it
 * has already admitted.
 *
 * Writer A acquires the lease, writes once, and is then stopped (SIGSTOP)
 * just before its second write, for longer than its lease. B acquires the
 * expired lease with a newer token and writes. A is continued and tries its
 * write: the lease check it made before pausing is long out of date, but the
 * file refuses the stale token by itself.
 *
 * Run it twice on the same resource file: without a token state file the
 * second run's table starts its tokens over at 1 and the fence, which
 * remembers the first run's tokens, refuses even the new holder. With one
 * (the same STATE_FILE both times) every new token is above the old ones.
 *
 *   usage: fenced_writer TABLE RESOURCE_FILE [STATE_FILE]
 *   exit status 0 when A's late write was refused and B's data is in the file
 */
#define _GNU_SOURCE /* fork, kill, flock: POSIX and BSD beyond C11 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmlease.h>

#define MS    UINT64_C(1000000)
#define TTL   (300 * MS)
#define LEASE "resource"

/* The resource file: a fence, then the data it protects. */
struct resource {
    shl_fence fence;
    uint64_t token; /* token of the last accepted write */
    uint64_t len;
    char data[4096 - 24];
};

static struct resource *res;
static int res_fd;

/* The resource's write path: serialised, fenced. SHL_OK or SHL_ESTALE. */
static int resource_write(uint64_t token, const char *text)
{
    while (flock(res_fd, LOCK_EX) != 0 && errno == EINTR)
        ;
    int rc = shl_fence_admit(&res->fence, token);
    if (rc == SHL_OK) {
        size_t n = strlen(text) < sizeof res->data ? strlen(text) : sizeof res->data - 1;
        memcpy(res->data, text, n);
        res->data[n] = '\0';
        res->len = n;
        res->token = token;
        msync(res, sizeof *res, MS_SYNC);
    }
    flock(res_fd, LOCK_UN);
    return rc;
}

static int open_resource(const char *path)
{
    res_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (res_fd < 0 || ftruncate(res_fd, sizeof *res) != 0) /* zeroes: an open fence */
        return -1;
    res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED, res_fd, 0);
    return res == MAP_FAILED ? -1 : 0;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Writer A. Exit status: 0 its late write was refused, 1 it was accepted,
 * 2 something else went wrong. */
static int writer_a(const char *table, int ready_fd, int go_fd)
{
    shl_table *t;
    uint64_t token;
    if (shl_open(table, NULL, &t) != SHL_OK || shl_acquire(t, LEASE, "A", TTL, &token) != SHL_OK)
        return 2;
    int rc = resource_write(token, "A: first write");
    printf("A    token %" PRIu64 ": first write %s\n", token,
           rc == SHL_OK ? "admitted" : shl_strerror(rc));
    fflush(stdout);
    if (rc != SHL_OK)
        return 2;
    if (write(ready_fd, &token, sizeof token) != sizeof token)
        return 2;
    char go;
    if (read(go_fd, &go, 1) != 1) /* A is stopped here, past its expiry */
        return 2;
    rc = resource_write(token, "A: late write, after its lease expired");
    printf("A    token %" PRIu64 ": late write %s\n", token,
           rc == SHL_OK ? "ADMITTED" : "refused by the fence");
    fflush(stdout);
    shl_close(t);
    return rc == SHL_ESTALE ? 0 : rc == SHL_OK ? 1 : 2;
}

static int wait_expired(shl_table *t)
{
    for (int i = 0; i < 10000; i++) {
        shl_lease_info li;
        if (shl_stat(t, LEASE, &li) == SHL_OK && li.state == SHL_STATE_EXPIRED)
            return 0;
        sleep_ms(1);
    }
    return -1;
}

static uint64_t fence_value(void)
{
    uint64_t v = 0;
    shl_fence_load(&res->fence, &v);
    return v;
}

/* Ends A on an unexpected failure, so that no stopped child is left. */
static int give_up(pid_t a, const char *what, int rc)
{
    fprintf(stderr, "fenced_writer: %s: %s\n", what, shl_strerror(rc));
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    return 1;
}

static int run(const char *table, shl_table *t)
{
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0)
        return 1;
    fflush(stdout);
    pid_t a = fork();
    if (a == 0)
        _exit(writer_a(table, ready[1], go[0]));
    if (a < 0) {
        perror("fenced_writer: fork");
        return 1;
    }
    close(ready[1]); /* so that A's early exit ends the read below */
    close(go[0]);
    uint64_t ta;
    int st;
    if (read(ready[0], &ta, sizeof ta) != sizeof ta) {
        waitpid(a, &st, 0);
        fprintf(stderr, "fenced_writer: A could not write; is the fence ahead of this table's "
                        "tokens (a re-created table without a token state file)?\n");
        return 1;
    }
    kill(a, SIGSTOP);
    waitpid(a, &st, WUNTRACED); /* returns once A is really stopped */
    printf("--   A stopped (SIGSTOP) before its second write\n");
    if (wait_expired(t) != 0)
        return give_up(a, "A's lease did not expire", SHL_ETIMEDOUT);
    printf("--   A's lease expired while it was stopped\n");

    uint64_t tb;
    int rc = shl_acquire(t, LEASE, "B", TTL, &tb);
    if (rc != SHL_OK)
        return give_up(a, "B acquire", rc);
    rc = resource_write(tb, "B: written by the current holder");
    printf("B    token %" PRIu64 ": write %s\n", tb, rc == SHL_OK ? "admitted" : shl_strerror(rc));
    if (rc != SHL_OK)
        return give_up(a, "B write", rc);
    fflush(stdout);
    if (write(go[1], "g", 1) != 1)
        return give_up(a, "pipe", SHL_ESYS);
    kill(a, SIGCONT);
    printf("--   A continued (SIGCONT)\n");
    fflush(stdout);
    waitpid(a, &st, 0);
    int a_refused = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    int b_kept = res->token == tb && strncmp(res->data, "B:", 2) == 0;
    int rb = shl_release(t, LEASE, "B", tb);
    int released = rb == SHL_OK || rb == SHL_ELOST; /* SHL_ELOST: it expired meanwhile */
    printf("%s: file holds \"%s\" (token %" PRIu64 "), fence %" PRIu64 "\n",
           a_refused && b_kept ? "ok" : "FAIL", res->data, res->token, fence_value());
    if (!released)
        fprintf(stderr, "B could not release its lease\n");
    return a_refused && b_kept && released ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: fenced_writer TABLE RESOURCE_FILE [STATE_FILE]\n");
        return 2;
    }
    if (open_resource(argv[2]) != 0) {
        perror(argv[2]);
        return 1;
    }
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 0;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.token_state_path = argc > 3 ? argv[3] : NULL;
    /* A writer that died makes its pipe refuse writes: an error to report,
     * not a signal that would end this program before it removes its table. */
    signal(SIGPIPE, SIG_IGN);
    shl_table *t;
    int rc = shl_open(argv[1], &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "fenced_writer: create %s: %s\n", argv[1], shl_strerror(rc));
        return 1;
    }
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    printf("--   table %s, token floor %" PRIu64 ", file fence %" PRIu64 "\n", argv[1],
           ti.token_floor, fence_value());
    rc = run(argv[1], t);
    shl_close(t);
    shl_unlink(argv[1]); /* as `shmlease rm`: the next run creates it anew */
    return rc;
}
