/*
 * tools/bench/rows_redis.c - a Redis lease: SET key token NX PX ttl, and the
 * standard safe release, a script that deletes the key only if it still
 * holds our token. Spoken in RESP over the server's unix socket.
 */
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"

#define CAD_SCRIPT                                                                             \
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "         \
    "else return 0 end"

static int redis_pid;
static int rfd = -1;
static char sha[41];
static char buf[4096];

/* One RESP command from its arguments. */
static int send_cmd(int argc, const char **argv)
{
    char out[1024];
    int n = snprintf(out, sizeof out, "*%d\r\n", argc);
    for (int i = 0; i < argc && n < (int)sizeof out; i++)
        n += snprintf(out + n, sizeof out - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    if (n >= (int)sizeof out)
        return -1;
    return write(rfd, out, (size_t)n) == n ? 0 : -1;
}

/* Reads one reply (simple, error, integer or bulk string) into buf. */
static int read_reply(void)
{
    size_t len = 0;
    for (;;) {
        ssize_t k = read(rfd, buf + len, sizeof buf - 1 - len);
        if (k <= 0)
            return -1;
        len += (size_t)k;
        buf[len] = 0;
        char *eol = strstr(buf, "\r\n");
        if (!eol)
            continue;
        if (buf[0] != '$')
            return 0;
        long bl = atol(buf + 1);
        if (bl < 0 || len >= (size_t)(eol - buf) + 2 + (size_t)bl + 2)
            return 0;
    }
}

static const char *redis_setup(struct bench_row *r)
{
    (void)r;
    char sock[100];
    if (snprintf(sock, sizeof sock, "%s/redis.sock", bench_dir) >= (int)sizeof sock)
        return "temporary directory path too long for a unix socket";
    const char *why = bench_redis_start(sock, &redis_pid);
    if (why)
        return why;
    rfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    if (rfd < 0 || connect(rfd, (struct sockaddr *)&a, sizeof a) != 0)
        return "cannot connect to redis";
    const char *load[] = {"SCRIPT", "LOAD", CAD_SCRIPT};
    if (send_cmd(3, load) || read_reply() || buf[0] != '$')
        return "SCRIPT LOAD failed";
    char *p = strstr(buf, "\r\n");
    if (!p || strlen(p + 2) < 40)
        return "SCRIPT LOAD gave no sha";
    memcpy(sha, p + 2, 40);
    return NULL;
}

static void redis_teardown(struct bench_row *r)
{
    (void)r;
    if (rfd >= 0)
        close(rfd);
    rfd = -1;
    bench_server_stop(redis_pid, SIGTERM);
    redis_pid = 0;
}

static int run_redis(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    const char *set[] = {"SET", "bench:lease", "owner-1:token-000001", "NX", "PX", "10000"};
    const char *cad[] = {"EVALSHA", sha, "1", "bench:lease", "owner-1:token-000001"};
    int bad = 0;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n && !bad; i++) {
        bad |= send_cmd(6, set) || read_reply() || strncmp(buf, "+OK", 3) != 0;
        bad |= send_cmd(5, cad) || read_reply() || strncmp(buf, ":1", 2) != 0;
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}

void rows_redis(void)
{
    bench_add("alt", "redis SET NX PX + CAD script", redis_setup, run_redis, redis_teardown);
}
