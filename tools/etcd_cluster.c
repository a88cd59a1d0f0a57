/*
 * tools/etcd_cluster.c - throwaway etcd clusters (see etcd_cluster.h).
 *
 * Deliberately independent of the client under test: health and leader
 * are asked with plain libcurl (loaded as the library loads it, through
 * etcd/curl_api.h), users are made with etcdctl. Built with etcd support
 * only (it needs libcurl).
 */
#if SHL_HAVE_ETCD
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../etcd/curl_api.h"
#include "etcd_cluster.h"

#define START_TRIES    3     /* a port taken between choosing and binding: start again */
#define HEALTHY_MS     20000 /* a member's first start, on a busy machine */
#define STATUS_MAX     4096
#define REAPER_QUIT    (-1) /* a pid the reaper reads as: stop, all is done */
#define REAPER_WAIT_MS 3000 /* how long the reaper waits for killed members */

static int fail(struct etcd_cluster *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fail(struct etcd_cluster *cl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->err, sizeof cl->err, fmt, ap);
    va_end(ap);
    return -1;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[512];
    if (!path)
        return 0;
    while (*path) {
        const char *e = strchr(path, ':');
        size_t n = e ? (size_t)(e - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
        if (access(buf, X_OK) == 0)
            return 1;
        path += n + (e != NULL);
    }
    return 0;
}

int etcd_cluster_available(void)
{
    return on_path("etcd") && on_path("etcdctl") && on_path("openssl");
}

/* k distinct ports nobody listens on now (the kernel's picks): every socket
 * stays bound until all k are chosen, since the kernel may hand a port
 * just closed to the next bind. 0, or -1 when a socket fails. */
static int free_ports(int *port, int k)
{
    int fd[2 * ETCD_CLUSTER_MAX], rc = 0;
    for (int i = 0; i < k; i++) {
        fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        port[i] = -1;
        if (fd[i] >= 0 && bind(fd[i], (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd[i], (struct sockaddr *)&a, &len) == 0)
            port[i] = ntohs(a.sin_port);
        if (port[i] <= 0)
            rc = -1;
    }
    for (int i = 0; i < k; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    return rc;
}

const char *etcd_cluster_endpoint(const struct etcd_cluster *cl, int i)
{
    static char buf[ETCD_CLUSTER_MAX][24];
    snprintf(buf[i], sizeof buf[i], "127.0.0.1:%d", cl->m[i].client_port);
    return buf[i];
}

const char *etcd_cluster_url(const struct etcd_cluster *cl, const char *table, char *buf,
                             size_t cap)
{
    snprintf(buf, cap, "%s://%s/%s", cl->flags & (ETCD_TLS | ETCD_CLIENT_CERT) ? "etcds" : "etcd",
             cl->endpoints, table);
    return buf;
}

static int tls(const struct etcd_cluster *cl)
{
    return (cl->flags & (ETCD_TLS | ETCD_CLIENT_CERT)) != 0;
}

/* ---------------------------------------------------------------- reaper */

/* The reaper: reads member pids from the pipe until the test process
 * closes it (by dying) or says REAPER_QUIT; on death, kills the members
 * that are still etcd and removes the directory. */
static void reaper_main(int fd, const char *dir)
{
    pid_t pids[64];
    int n = 0;
    int32_t v;
    prctl(PR_SET_NAME, "etcd-reaper");
    for (;;) {
        ssize_t r = read(fd, &v, sizeof v);
        if (r == (ssize_t)sizeof v && v == REAPER_QUIT)
            _exit(0);
        if (r == (ssize_t)sizeof v) {
            if (n < 64)
                pids[n++] = (pid_t)v;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        break; /* EOF: the test process is gone */
    }
    for (int i = 0; i < n; i++) {
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        if (!strncmp(comm, "etcd", 4))
            kill(pids[i], SIGKILL);
    }
    long end = now_ms() + REAPER_WAIT_MS;
    for (int i = 0; i < n; i++)
        while (kill(pids[i], 0) == 0 && now_ms() < end)
            sleep_ms(10);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        _exit(1);
    _exit(0);
}

static int start_reaper(struct etcd_cluster *cl)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return fail(cl, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return fail(cl, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* Only the pipe: the reaper must not hold the test runner's pipes
         * open (it outlives the test process by design). */
        if (dup2(p[0], 3) != 3)
            _exit(1);
        closefrom(4);
        /* Its own process group: a terminal's ^C for the tests leaves it
         * to clean up after them. */
        setpgid(0, 0);
        reaper_main(3, cl->dir);
    }
    close(p[0]);
    cl->reaper = pid;
    cl->reaper_fd = p[1];
    return 0;
}

static void tell_reaper(struct etcd_cluster *cl, int32_t v)
{
    if (cl->reaper_fd >= 0 && write(cl->reaper_fd, &v, sizeof v) != (ssize_t)sizeof v)
        fail(cl, "reaper: %s", strerror(errno));
}

/* ---------------------------------------------------------------- certificates */

static int sh(struct etcd_cluster *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(struct etcd_cluster *cl, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st != 0)
        return fail(cl, "command failed (%d): %.400s", st, cmd);
    return 0;
}

/* A CA and a client certificate of it (and for the cluster's CA, the
 * members' server certificate), EC P-256, valid two days. */
static int make_ca(struct etcd_cluster *cl, const char *ca, const char *client)
{
    const char *newkey = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    return sh(cl,
              "cd '%s' && exec >>openssl.log 2>&1 && "
              "openssl req -x509 %s -keyout %s.key -out %s.crt -days 2 -subj /CN=%s && "
              "printf 'extendedKeyUsage=clientAuth\\n' > %s.ext && "
              "openssl req -new %s -keyout %s.key -out %s.csr -subj /CN=root && "
              "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -CAcreateserial "
              "-days 2 -out %s.crt -extfile %s.ext",
              cl->dir, newkey, ca, ca, ca, client, newkey, client, client, client, ca, ca, client,
              client);
}

static int make_certs(struct etcd_cluster *cl)
{
    const char *newkey = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    if (make_ca(cl, "ca", "client") || make_ca(cl, "other-ca", "other-client"))
        return -1;
    /* The members' certificate also serves as a client one: the gateway
     * inside each member dials the member's gRPC port with it. */
    if (sh(cl,
           "cd '%s' && exec >>openssl.log 2>&1 && "
           "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
           "extendedKeyUsage=serverAuth,clientAuth\\n' > server.ext && "
           "openssl req -new %s -keyout server.key -out server.csr -subj /CN=localhost && "
           "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
           "-days 2 -out server.crt -extfile server.ext",
           cl->dir, newkey))
        return -1;
    snprintf(cl->ca, sizeof cl->ca, "%s/ca.crt", cl->dir);
    snprintf(cl->cert, sizeof cl->cert, "%s/client.crt", cl->dir);
    snprintf(cl->key, sizeof cl->key, "%s/client.key", cl->dir);
    snprintf(cl->other_ca, sizeof cl->other_ca, "%s/other-ca.crt", cl->dir);
    snprintf(cl->other_cert, sizeof cl->other_cert, "%s/other-client.crt", cl->dir);
    snprintf(cl->other_key, sizeof cl->other_key, "%s/other-client.key", cl->dir);
    return 0;
}

/* ---------------------------------------------------------------- members */

static int spawn_member(struct etcd_cluster *cl, int i)
{
    char name[16], data[192], log[192], curl[64], purl[64], icluster[ETCD_CLUSTER_MAX * 48] = "";
    char cert[192], key[192], ca[192];
    const char *scheme = tls(cl) ? "https" : "http";
    snprintf(name, sizeof name, "m%d", i);
    snprintf(data, sizeof data, "%s/m%d.data", cl->dir, i);
    snprintf(log, sizeof log, "%s/m%d.log", cl->dir, i);
    snprintf(curl, sizeof curl, "%s://127.0.0.1:%d", scheme, cl->m[i].client_port);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", cl->m[i].peer_port);
    for (int k = 0; k < cl->n; k++) {
        size_t len = strlen(icluster);
        snprintf(icluster + len, sizeof icluster - len, "%sm%d=http://127.0.0.1:%d", k ? "," : "",
                 k, cl->m[k].peer_port);
    }
    snprintf(cert, sizeof cert, "%s/server.crt", cl->dir);
    snprintf(key, sizeof key, "%s/server.key", cl->dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", cl->dir);
    const char *argv[40];
    int a = 0;
    argv[a++] = "etcd";
    argv[a++] = "--name";
    argv[a++] = name;
    argv[a++] = "--data-dir";
    argv[a++] = data;
    argv[a++] = "--listen-client-urls";
    argv[a++] = curl;
    argv[a++] = "--advertise-client-urls";
    argv[a++] = curl;
    argv[a++] = "--listen-peer-urls";
    argv[a++] = purl;
    argv[a++] = "--initial-advertise-peer-urls";
    argv[a++] = purl;
    argv[a++] = "--initial-cluster";
    argv[a++] = icluster;
    argv[a++] = "--initial-cluster-token";
    argv[a++] = cl->token;
    argv[a++] = "--initial-cluster-state";
    argv[a++] = "new";
    argv[a++] = "--heartbeat-interval=50";
    argv[a++] = "--election-timeout=500";
    argv[a++] = "--unsafe-no-fsync";
    argv[a++] = "--logger=zap";
    argv[a++] = "--log-level=warn";
    if (cl->flags & ETCD_AUTH)
        argv[a++] = "--auth-token-ttl=" ETCD_TOKEN_TTL;
    if (tls(cl)) {
        argv[a++] = "--cert-file";
        argv[a++] = cert;
        argv[a++] = "--key-file";
        argv[a++] = key;
        argv[a++] = "--trusted-ca-file";
        argv[a++] = ca;
        if (cl->flags & ETCD_CLIENT_CERT)
            argv[a++] = "--client-cert-auth";
    }
    argv[a] = NULL;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return fail(cl, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0)
            dup2(nul, 0);
        closefrom(3); /* nothing of the test's: its pipes, the reaper's */
        execvp("etcd", (char *const *)argv);
        _exit(127);
    }
    cl->m[i].pid = pid;
    cl->m[i].paused = 0;
    tell_reaper(cl, (int32_t)pid);
    return 0;
}

/* ---------------------------------------------------------------- status */

struct sbuf {
    char p[STATUS_MAX];
    size_t n;
};

static size_t on_body(char *src, size_t size, size_t nmemb, void *arg)
{
    struct sbuf *b = arg;
    size_t n = size * nmemb;
    if (n > sizeof b->p - 1 - b->n)
        return 0;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* A decimal string field "name":"123" of a flat JSON text. */
static unsigned long long field(const char *s, const char *name)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":\"", name);
    const char *p = strstr(s, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* Member i's id and the leader it sees (0: none). 0, or -1. */
static int member_status(struct etcd_cluster *cl, int i, unsigned long long *id,
                         unsigned long long *leader)
{
    char url[96];
    struct sbuf b = {.n = 0};
    snprintf(url, sizeof url, "%s://%s/v3/maintenance/status", tls(cl) ? "https" : "http",
             etcd_cluster_endpoint(cl, i));
    CURL *h = etc_curl.easy_init();
    if (!h)
        return -1;
    etc_curl.easy_setopt(h, CURLOPT_URL, url);
    etc_curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    etc_curl.easy_setopt(h, CURLOPT_PROXY, ""); /* never the environment's */
    etc_curl.easy_setopt(h, CURLOPT_POSTFIELDS, "{}");
    etc_curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
    etc_curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    etc_curl.easy_setopt(h, CURLOPT_WRITEDATA, &b);
    if (tls(cl)) {
        etc_curl.easy_setopt(h, CURLOPT_CAINFO, cl->ca);
        etc_curl.easy_setopt(h, CURLOPT_SSLCERT, cl->cert);
        etc_curl.easy_setopt(h, CURLOPT_SSLKEY, cl->key);
    }
    CURLcode rc = etc_curl.easy_perform(h);
    etc_curl.easy_cleanup(h);
    if (rc != CURLE_OK)
        return -1;
    b.p[b.n] = '\0';
    *id = field(b.p, "member_id");
    *leader = field(b.p, "leader");
    return *id ? 0 : -1;
}

static int member_up(const struct etcd_cluster *cl, int i)
{
    return cl->m[i].pid > 0 && !cl->m[i].paused;
}

/* Every running, unpaused member answers and names the same leader, which
 * is one of them: its index; else -1. */
static int agreed_leader(struct etcd_cluster *cl)
{
    unsigned long long ids[ETCD_CLUSTER_MAX] = {0}, lead = 0;
    int any = 0;
    for (int i = 0; i < cl->n; i++) {
        unsigned long long id, l;
        if (!member_up(cl, i))
            continue;
        if (member_status(cl, i, &id, &l) || l == 0 || (any && l != lead))
            return -1;
        ids[i] = id;
        lead = l;
        any = 1;
    }
    for (int i = 0; any && i < cl->n; i++)
        if (ids[i] == lead)
            return i;
    return -1;
}

int etcd_cluster_leader(struct etcd_cluster *cl, int timeout_ms)
{
    long end = now_ms() + timeout_ms;
    for (;;) {
        int l = agreed_leader(cl);
        if (l >= 0 || now_ms() >= end)
            return l >= 0 ? l : fail(cl, "no agreed leader within %d ms", timeout_ms);
        sleep_ms(20);
    }
}

static int any_exited(struct etcd_cluster *cl)
{
    for (int i = 0; i < cl->n; i++) {
        int st;
        if (cl->m[i].pid > 0 && waitpid(cl->m[i].pid, &st, WNOHANG) == cl->m[i].pid) {
            cl->m[i].pid = 0;
            return fail(cl, "member m%d exited (status %d): see %s/m%d.log", i, st, cl->dir, i);
        }
    }
    return 0;
}

int etcd_cluster_wait_healthy(struct etcd_cluster *cl, int timeout_ms)
{
    long end = now_ms() + timeout_ms;
    for (;;) {
        if (any_exited(cl))
            return -1;
        if (agreed_leader(cl) >= 0)
            return 0;
        if (now_ms() >= end)
            return fail(cl, "not healthy within %d ms: see %s/m*.log", timeout_ms, cl->dir);
        sleep_ms(20);
    }
}

/* ---------------------------------------------------------------- control */

/* Runs the shell command cmd with the password (when there is one) in its
 * environment only: ETCDCTL_USER and ETCDCTL_PASSWORD for etcdctl, and
 * SHL_NEW_PASSWORD for `user add`, which reads it from stdin. Never on an
 * argv, where anyone on the host sees it (ps). */
static int sh_secret(struct etcd_cluster *cl, const char *cmd, int with_user)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    char user[64], pw[80], newpw[80];
    if (!env)
        return fail(cl, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ETCDCTL_", 8) && strncmp(environ[i], "SHL_NEW_PASSWORD=", 17))
            env[k++] = environ[i];
    snprintf(newpw, sizeof newpw, "SHL_NEW_PASSWORD=%s", cl->password);
    env[k++] = newpw;
    if (with_user) {
        snprintf(user, sizeof user, "ETCDCTL_USER=%s", cl->user);
        snprintf(pw, sizeof pw, "ETCDCTL_PASSWORD=%s", cl->password);
        env[k++] = user;
        env[k++] = pw;
    }
    env[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execle("/bin/sh", "sh", "-c", cmd, (char *)NULL, env);
        _exit(127);
    }
    free(env);
    int st = -1;
    if (pid < 0)
        return fail(cl, "fork: %s", strerror(errno));
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (st != 0)
        return fail(cl, "command failed (%d): %.400s", st, cmd);
    return 0;
}

static int ctl(struct etcd_cluster *cl, const char *args, const char *input)
{
    char tlsargs[600] = "", cmd[2048];
    if (tls(cl))
        snprintf(tlsargs, sizeof tlsargs, "--cacert='%s' --cert='%s' --key='%s'", cl->ca, cl->cert,
                 cl->key);
    snprintf(cmd, sizeof cmd,
             "%s%sETCDCTL_API=3 etcdctl --endpoints='%s' --dial-timeout=3s %s %s >>'%s/ctl.log' "
             "2>&1",
             input ? input : "", input ? " | " : "", cl->endpoints, tlsargs, args, cl->dir);
    return sh_secret(cl, cmd, (cl->flags & ETCD_AUTH) && cl->user[0]);
}

int etcd_cluster_ctl(struct etcd_cluster *cl, const char *args)
{
    return ctl(cl, args, NULL);
}

static int enable_auth(struct etcd_cluster *cl)
{
    unsigned seed = (unsigned)getpid() ^ (unsigned)now_ms();
    if (!cl->password[0]) /* else the one a caller chose */
        snprintf(cl->password, sizeof cl->password, "pw-%08x-%08x", rand_r(&seed), rand_r(&seed));
    /* printf is the shell's own: the password is on no argv. */
    if (ctl(cl, "user add root --interactive=false", "printf '%s\\n' \"$SHL_NEW_PASSWORD\"") ||
        etcd_cluster_ctl(cl, "auth enable"))
        return -1;
    /* From now on etcdctl needs the credentials. */
    snprintf(cl->user, sizeof cl->user, "root");
    return 0;
}

int etcd_cluster_enable_auth(struct etcd_cluster *cl)
{
    if (cl->flags & ETCD_AUTH)
        return fail(cl, "auth is on already");
    cl->flags |= ETCD_AUTH;
    return enable_auth(cl);
}

/* The end of member 0's log, appended to cl->err: why it did not start. */
static void add_log_tail(struct etcd_cluster *cl)
{
    char path[192], tail[240];
    snprintf(path, sizeof path, "%s/m0.log", cl->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = 0;
    if (fseek(f, -(long)(sizeof tail - 1), SEEK_END) != 0)
        rewind(f);
    n = fread(tail, 1, sizeof tail - 1, f);
    fclose(f);
    tail[n] = '\0';
    size_t len = strlen(cl->err);
    snprintf(cl->err + len, sizeof cl->err - len, " [m0.log: ...%s]", tail);
}

static int start_once(struct etcd_cluster *cl, int n, int flags, int attempt)
{
    static int seq;
    cl->n = n;
    cl->flags = flags;
    cl->user[0] = cl->password[0] = '\0';
    snprintf(cl->token, sizeof cl->token, "shltest-%d-%d-%d", (int)getpid(), seq++, attempt);
    cl->endpoints[0] = '\0';
    int port[2 * ETCD_CLUSTER_MAX];
    if (free_ports(port, 2 * n))
        return fail(cl, "no free port");
    for (int i = 0; i < n; i++) {
        cl->m[i].client_port = port[2 * i];
        cl->m[i].peer_port = port[2 * i + 1];
        size_t len = strlen(cl->endpoints);
        snprintf(cl->endpoints + len, sizeof cl->endpoints - len, "%s%s", i ? "," : "",
                 etcd_cluster_endpoint(cl, i));
    }
    for (int i = 0; i < n; i++)
        if (spawn_member(cl, i))
            return -1;
    if (etcd_cluster_wait_healthy(cl, HEALTHY_MS))
        return -1;
    return (flags & ETCD_AUTH) ? enable_auth(cl) : 0;
}

static void kill_members(struct etcd_cluster *cl)
{
    for (int i = 0; i < ETCD_CLUSTER_MAX; i++) {
        if (cl->m[i].pid > 0) {
            kill(cl->m[i].pid, SIGKILL);
            while (waitpid(cl->m[i].pid, NULL, 0) < 0 && errno == EINTR)
                ;
            cl->m[i].pid = 0;
        }
    }
}

int etcd_cluster_start(struct etcd_cluster *cl, int n, int flags)
{
    memset(cl, 0, sizeof *cl);
    cl->reaper_fd = -1;
    if (n < 1 || n > ETCD_CLUSTER_MAX)
        return fail(cl, "members: 1..%d", ETCD_CLUSTER_MAX);
    if (!etcd_cluster_available())
        return fail(cl, "etcd, etcdctl or openssl is not on PATH");
    if (flags & ETCD_CLIENT_CERT)
        flags |= ETCD_TLS;
    if (etc_curl_load() != ETC_OK) /* and curl_global_init, before any thread */
        return fail(cl, "libcurl: %s", etc_curl_error());
    snprintf(cl->dir, sizeof cl->dir, "%s/shletcd-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cl->dir))
        return fail(cl, "mkdtemp: %s", strerror(errno));
    if (start_reaper(cl)) {
        rmdir(cl->dir);
        return -1;
    }
    cl->flags = flags;
    if (tls(cl) && make_certs(cl)) {
        char why[sizeof cl->err];
        memcpy(why, cl->err, sizeof why);
        etcd_cluster_stop(cl);
        return fail(cl, "%s", why);
    }
    for (int attempt = 0;; attempt++) {
        if (start_once(cl, n, flags, attempt) == 0)
            return 0;
        add_log_tail(cl);
        kill_members(cl);
        if (attempt + 1 >= START_TRIES) {
            char why[sizeof cl->err];
            memcpy(why, cl->err, sizeof why);
            etcd_cluster_stop(cl);
            return fail(cl, "%s", why);
        }
        /* Fresh data directories for fresh ports. */
        sh(cl, "rm -rf '%s'/m*.data", cl->dir);
    }
}

void etcd_cluster_stop(struct etcd_cluster *cl)
{
    kill_members(cl);
    if (cl->dir[0]) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cl->dir);
        if (system(cmd) != 0)
            fail(cl, "rm -rf %s failed", cl->dir);
        cl->dir[0] = '\0';
    }
    if (cl->reaper > 0) {
        tell_reaper(cl, REAPER_QUIT);
        close(cl->reaper_fd);
        cl->reaper_fd = -1;
        while (waitpid(cl->reaper, NULL, 0) < 0 && errno == EINTR)
            ;
        cl->reaper = 0;
    }
}

int etcd_cluster_kill(struct etcd_cluster *cl, int i)
{
    if (i < 0 || i >= cl->n || cl->m[i].pid <= 0)
        return fail(cl, "member %d is not running", i);
    kill(cl->m[i].pid, SIGKILL);
    while (waitpid(cl->m[i].pid, NULL, 0) < 0 && errno == EINTR)
        ;
    cl->m[i].pid = 0;
    cl->m[i].paused = 0;
    return 0;
}

int etcd_cluster_pause(struct etcd_cluster *cl, int i)
{
    if (i < 0 || i >= cl->n || cl->m[i].pid <= 0)
        return fail(cl, "member %d is not running", i);
    if (kill(cl->m[i].pid, SIGSTOP))
        return fail(cl, "SIGSTOP: %s", strerror(errno));
    int st;
    if (waitpid(cl->m[i].pid, &st, WUNTRACED) != cl->m[i].pid || !WIFSTOPPED(st))
        return fail(cl, "member %d did not stop", i);
    cl->m[i].paused = 1;
    return 0;
}

int etcd_cluster_resume(struct etcd_cluster *cl, int i)
{
    if (i < 0 || i >= cl->n || cl->m[i].pid <= 0)
        return fail(cl, "member %d is not running", i);
    if (kill(cl->m[i].pid, SIGCONT))
        return fail(cl, "SIGCONT: %s", strerror(errno));
    cl->m[i].paused = 0;
    return 0;
}

int etcd_cluster_restart(struct etcd_cluster *cl, int i)
{
    if (i < 0 || i >= cl->n || cl->m[i].pid > 0)
        return fail(cl, "member %d is running", i);
    if (spawn_member(cl, i))
        return -1;
    return etcd_cluster_wait_healthy(cl, HEALTHY_MS);
}

int etcd_cluster_respawn(struct etcd_cluster *cl, int i)
{
    if (i < 0 || i >= cl->n || cl->m[i].pid > 0)
        return fail(cl, "member %d is running", i);
    return spawn_member(cl, i);
}

int etcd_cluster_reaped(struct etcd_cluster *cl, pid_t pid)
{
    for (int i = 0; i < cl->n; i++)
        if (pid > 0 && cl->m[i].pid == pid) {
            cl->m[i].pid = 0;
            cl->m[i].paused = 0;
            return 1;
        }
    return 0;
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int etcd_cluster_unused;
#endif
