/*
 * tools/cluster/main.c - shmlease-cluster: runs a command beside a throwaway
 * etcd cluster (tools/etcd_cluster.c), for `make demo-etcd`. Not installed.
 *
 *   shmlease-cluster N -- COMMAND [ARG...]
 *
 * Starts N members (1-5) on free localhost ports in a private temporary
 * directory, replaces "@ENDPOINTS@" in the arguments by their endpoints
 * ("127.0.0.1:p1,127.0.0.1:p2,..."), runs the command, and stops the
 * members by pid when it ends (also when this program is killed: see
 * etcd_cluster.h). The command may ask for a fault: it finds a socket in
 * SHMLEASE_CLUSTER_FD, writes "kill-leader\n" to it and reads one line
 * back, which tells which member was killed and which one leads now.
 * Exit status: the command's, or 3 when the cluster could not be started.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../etcd_cluster.h"

static struct etcd_cluster cl;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Kills the leader; the answer line into buf. */
static void kill_leader(char *buf, size_t cap)
{
    int l = etcd_cluster_leader(&cl, 5000);
    if (l < 0) {
        snprintf(buf, cap, "no leader to kill: %.200s\n", cl.err);
        return;
    }
    pid_t pid = cl.m[l].pid;
    long t0 = now_ms();
    if (etcd_cluster_kill(&cl, l) != 0) {
        snprintf(buf, cap, "could not kill m%d: %.200s\n", l, cl.err);
        return;
    }
    int n = etcd_cluster_leader(&cl, 15000);
    if (n < 0)
        snprintf(buf, cap, "killed the leader m%d (pid %d, SIGKILL); no new leader yet\n", l,
                 (int)pid);
    else
        snprintf(buf, cap,
                 "killed the leader m%d (pid %d, SIGKILL); m%d leads now (elected within "
                 "%ld ms)\n",
                 l, (int)pid, n, now_ms() - t0);
}

/* Serves the command's requests until it exits; its wait status. */
static int serve(pid_t child, int sock)
{
    char req[64];
    size_t have = 0;
    for (;;) {
        int st;
        pid_t p = waitpid(child, &st, WNOHANG);
        if (p == child)
            return st;
        struct pollfd pf = {sock, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0 || !(pf.revents & POLLIN))
            continue;
        ssize_t r = read(sock, req + have, sizeof req - 1 - have);
        if (r <= 0) {
            if (waitpid(child, &st, 0) == child)
                return st;
            return 1 << 8;
        }
        have += (size_t)r;
        req[have] = 0;
        char *nl = strchr(req, '\n');
        if (!nl && have < sizeof req - 1)
            continue;
        char ans[512];
        if (nl && strncmp(req, "kill-leader\n", 12) == 0)
            kill_leader(ans, sizeof ans);
        else
            snprintf(ans, sizeof ans, "unknown request\n");
        have = 0;
        if (write(sock, ans, strlen(ans)) < 0)
            return 1 << 8;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[1]) : 0;
    if (n < 1 || n > ETCD_CLUSTER_MAX || strcmp(argv[2], "--") != 0 || argc < 4) {
        fprintf(stderr, "usage: shmlease-cluster N -- COMMAND [ARG...]   (N: 1-%d members)\n",
                ETCD_CLUSTER_MAX);
        return 2;
    }
    if (etcd_cluster_start(&cl, n, 0) != 0) {
        fprintf(stderr, "shmlease-cluster: cannot start etcd: %s\n", cl.err);
        return 3;
    }
    printf("shmlease-cluster: %d etcd member%s at %s (throwaway, --unsafe-no-fsync)\n", n,
           n > 1 ? "s" : "", cl.endpoints);
    fflush(stdout);
    char **args = calloc((size_t)argc, sizeof *args);
    int sv[2];
    if (!args || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        etcd_cluster_stop(&cl);
        return 3;
    }
    for (int i = 3; i < argc; i++) {
        const char *at = strstr(argv[i], "@ENDPOINTS@");
        if (!at) {
            args[i - 3] = argv[i];
            continue;
        }
        size_t len = strlen(argv[i]) + strlen(cl.endpoints) + 1;
        args[i - 3] = malloc(len);
        if (args[i - 3])
            snprintf(args[i - 3], len, "%.*s%s%s", (int)(at - argv[i]), argv[i], cl.endpoints,
                     at + 11);
    }
    signal(SIGPIPE, SIG_IGN);
    pid_t child = fork();
    if (child == 0) {
        char fd[16];
        int keep = dup(sv[1]); /* without close-on-exec */
        snprintf(fd, sizeof fd, "%d", keep);
        setenv("SHMLEASE_CLUSTER_FD", fd, 1);
        execvp(args[0], args);
        fprintf(stderr, "shmlease-cluster: cannot run %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    int st = child > 0 ? serve(child, sv[0]) : 1 << 8;
    for (int i = 3; i < argc; i++)
        if (args[i - 3] != argv[i])
            free(args[i - 3]);
    free(args);
    close(sv[0]);
    etcd_cluster_stop(&cl);
    printf("shmlease-cluster: members stopped, directory removed\n");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
