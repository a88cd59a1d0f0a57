/*
 * tools/bench/servers.c - throwaway Redis and PostgreSQL servers.
 *
 * Each runs from a private temporary directory, listens on a unix socket
 * only (no TCP port), is started by fork+exec so that its pid is known, and
 * is stopped by that pid. PostgreSQL refuses to run as root: as root, the
 * server runs as the `postgres` system user (or `nobody`) in a directory it
 * owns.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* The first of the directories that holds an executable `prog`. */
static int find_prog(const char *prog, const char *const *dirs, char *out, size_t cap)
{
    for (int i = 0; dirs[i]; i++) {
        snprintf(out, cap, "%s/%s", dirs[i], prog);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* fork + exec argv with output to log; as uid/gid when uid >= 0. */
static int spawn(char *const argv[], const char *log, int uid, int gid)
{
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0)
            dup2(nul, 0);
        if (uid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0 ||
                         setuid((uid_t)uid) != 0))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return (int)p;
}

/* Waits up to 10 s until something accepts on the unix socket `path`. */
static int wait_socket(const char *path, int pid)
{
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -1; /* the server exited */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return 0;
        usleep(10000);
    }
    return -1;
}

void bench_server_stop(int pid, int sig)
{
    if (pid <= 0)
        return;
    kill(pid, sig);
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

const char *bench_redis_start(const char *sock, int *pid)
{
    static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin", NULL};
    char prog[256], log[512];
    *pid = 0;
    if (find_prog("redis-server", dirs, prog, sizeof prog) != 0)
        return "redis-server is not installed (make bench-deps)";
    snprintf(log, sizeof log, "%s/redis.log", bench_dir);
    char *argv[] = {prog, "--port", "0", "--unixsocket", (char *)sock, "--unixsocketperm", "700",
                    "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", bench_dir,
                    NULL};
    int p = spawn(argv, log, -1, -1);
    if (p < 0)
        return "cannot fork";
    if (wait_socket(sock, p) != 0) {
        bench_server_stop(p, SIGKILL);
        return "redis-server did not start (see its log)";
    }
    *pid = p;
    return NULL;
}

/* The directory of initdb and postgres. */
static int pg_bindir(char *out, size_t cap)
{
    FILE *f = popen("pg_config --bindir 2>/dev/null", "r");
    if (f) {
        int ok = fgets(out, (int)cap, f) != NULL;
        pclose(f);
        if (ok) {
            out[strcspn(out, "\n")] = 0;
            char p[512];
            snprintf(p, sizeof p, "%s/postgres", out);
            if (access(p, X_OK) == 0)
                return 0;
        }
    }
    for (int v = 20; v >= 9; v--) {
        snprintf(out, cap, "/usr/lib/postgresql/%d/bin", v);
        char p[512];
        snprintf(p, sizeof p, "%s/postgres", out);
        if (access(p, X_OK) == 0)
            return 0;
    }
    return -1;
}

const char *bench_pg_start(const char *dir, int *pid)
{
    char bin[256], initdb[512], postgres[512], data[512], log[512];
    *pid = 0;
    if (pg_bindir(bin, sizeof bin) != 0)
        return "PostgreSQL server is not installed (make bench-deps)";
    int uid = -1, gid = -1;
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw)
            pw = getpwnam("nobody");
        if (!pw)
            return "running as root and no postgres or nobody user to run the server as";
        uid = (int)pw->pw_uid;
        gid = (int)pw->pw_gid;
        if (chown(dir, pw->pw_uid, pw->pw_gid) != 0)
            return "cannot give the server its directory";
    }
    snprintf(initdb, sizeof initdb, "%s/initdb", bin);
    snprintf(postgres, sizeof postgres, "%s/postgres", bin);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/pg.log", dir);
    char *iargv[] = {initdb, "-D", data, "-A", "trust", "-U", "bench", "--no-sync", "-E", "UTF8",
                     NULL};
    int p = spawn(iargv, log, uid, gid);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return "initdb failed (see pg.log)";
    char *sargv[] = {postgres, "-D", data, "-k", (char *)dir, "-c", "listen_addresses=",
                     "-p", "5432", "-c", "fsync=off", "-c", "synchronous_commit=off", NULL};
    p = spawn(sargv, log, uid, gid);
    if (p < 0)
        return "cannot fork";
    char sock[600];
    snprintf(sock, sizeof sock, "%s/.s.PGSQL.5432", dir);
    if (wait_socket(sock, p) != 0) {
        bench_server_stop(p, SIGKILL);
        return "postgres did not start (see pg.log)";
    }
    *pid = p;
    return NULL;
}
