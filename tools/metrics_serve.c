/*
 * tools/metrics_serve.c - shmlease metrics, served: a tiny blocking HTTP/1.1
 * server for /metrics (one request at a time, a fresh reading per request),
 * and node_exporter's textfile (a temporary file renamed over
 * DIR/shmlease.prom, so that the collector never reads half a file).
 *
 * Lease names are user data: by default only a loopback address is served;
 * another needs --listen-any.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "metrics.h"

#define REQUEST_MAX  8192
#define IO_TIMEOUT_S 5 /* a client that stalls cannot hold the server longer */
#define PROM_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define OM_MEDIA     "application/openmetrics-text"
#define OM_TYPE      OM_MEDIA "; version=1.0.0; charset=utf-8"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

/* SIGTERM and SIGINT end the loops. They are blocked but while the loop
 * waits (ppoll() with *orig, the mask before): one that comes while a
 * request is served or a file written ends the wait that follows, and none
 * is lost between a test of stop_signal and the wait. */
static void catch_stop(sigset_t *orig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, orig);
}

/* ---------------------------------------------------------------- HTTP */

static int loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (loopback) into host and port. */
static int split_listen(const char *spec, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = strrchr(spec, ':');
    if (!colon)
        return -1;
    const char *h = spec;
    size_t hn = (size_t)(colon - spec);
    if (hn && spec[0] == '[') {
        if (spec[hn - 1] != ']')
            return -1;
        h = spec + 1;
        hn -= 2;
    }
    size_t pn = strlen(colon + 1);
    uint64_t p;
    if (hn >= hcap || pn >= pcap || cli_u64(colon + 1, &p) || p > 65535)
        return -1;
    memcpy(host, h, hn);
    host[hn] = '\0';
    memcpy(port, colon + 1, pn + 1);
    if (!host[0])
        strcpy(host, "127.0.0.1");
    return 0;
}

/* A listening socket on o->listen, or -1 after a message (*status says
 * which exit). */
static int open_listener(const struct metrics_opts *o, int *status)
{
    char host[256], port[16];
    *status = EXIT_USAGE;
    if (split_listen(o->listen, host, sizeof host, port, sizeof port)) {
        cli_err("metrics",
                "--listen '%s': an address is HOST:PORT, [IPv6]:PORT or :PORT (loopback), "
                "PORT 0 to 65535",
                cli_vis(o->listen));
        return -1;
    }
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        cli_err("metrics", "--listen '%s': %s", cli_vis(o->listen), gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (!o->listen_any && !loopback(a->ai_addr)) {
            cli_err("metrics",
                    "--listen '%s': not a loopback address; lease and table names are "
                    "served to whoever connects: add --listen-any to serve it anyway",
                    cli_vis(o->listen));
            freeaddrinfo(res);
            return -1;
        }
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        /* Non-blocking: a connection reset between ppoll() and accept()
         * must not leave the server asleep in accept(). */
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 16)) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        cli_err("metrics", "--listen '%s': %s", cli_vis(o->listen), strerror(err));
        *status = EXIT_SYSTEM;
    }
    return fd;
}

/* "serving http://ADDR:PORT/metrics" on stderr, with the port bound (the
 * one the kernel chose for port 0). */
static void say_where(int fd)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
            port = ntohs(s6->sin6_port);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
            port = ntohs(s4->sin_port);
        }
    }
    int v6 = ss.ss_family == AF_INET6;
    fprintf(stderr, "shmlease metrics: serving http://%s%s%s:%u/metrics\n", v6 ? "[" : "", a,
            v6 ? "]" : "", port);
    fflush(stderr);
}

static void send_all(int c, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(c, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int c, const char *status, const char *type, const char *extra,
                    const char *body, size_t len, int head)
{
    char h[512];
    int n = snprintf(h, sizeof h,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n",
                     status, type, len, extra);
    send_all(c, h, (size_t)n);
    if (!head)
        send_all(c, body, len);
}

/* Reads the request head (up to its blank line); 0 when whole. */
static int read_head(int c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    while (n + 1 < cap && !strstr(buf, "\r\n\r\n") && !strstr(buf, "\n\n")) {
        ssize_t r = recv(c, buf + n, cap - 1 - n, 0);
        if (r < 0 && errno == EINTR && !stop_signal)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = '\0';
    }
    return strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n") ? 0 : -1;
}

/* Whether the request's Accept header names OpenMetrics (Prometheus lists
 * it first, then the text format). */
static int wants_openmetrics(const char *req)
{
    for (const char *l = strchr(req, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        if (strncasecmp(l + 1, "Accept:", 7) != 0)
            continue;
        size_t n = strcspn(l + 1, "\r\n");
        const char *om = strstr(l + 1, OM_MEDIA);
        return om && om < l + 1 + n;
    }
    return 0;
}

static void serve_one(int c, const struct metrics_opts *o, int *was_up)
{
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    static char req[REQUEST_MAX];
    char method[16], path[1024], version[16];
    if (read_head(c, req, sizeof req) ||
        sscanf(req, "%15s %1023s %15s", method, path, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        static const char bad[] = "bad request\n";
        respond(c, "400 Bad Request", "text/plain", "", bad, sizeof bad - 1, 0);
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        static const char no[] = "only GET and HEAD\n";
        respond(c, "405 Method Not Allowed", "text/plain", "Allow: GET, HEAD\r\n", no,
                sizeof no - 1, 0);
        return;
    }
    path[strcspn(path, "?#")] = '\0';
    if (strcmp(path, "/metrics") != 0) {
        static const char nf[] = "not found: the metrics are at /metrics\n";
        respond(c, "404 Not Found", "text/plain", "", nf, sizeof nf - 1, head);
        return;
    }
    char *text;
    size_t len;
    int om = wants_openmetrics(req);
    if (metrics_render(o->tables, o->ntables, o->max_leases, was_up, om, &text, &len) < 0) {
        static const char oom[] = "out of memory\n";
        respond(c, "500 Internal Server Error", "text/plain", "", oom, sizeof oom - 1, head);
        return;
    }
    respond(c, "200 OK", om ? OM_TYPE : PROM_TYPE, "", text, len, head);
    free(text);
}

int metrics_listen(const struct metrics_opts *o)
{
    int status;
    int fd = open_listener(o, &status);
    if (fd < 0)
        return status;
    status = 0;
    int *was_up = calloc((size_t)o->ntables, sizeof *was_up);
    if (!was_up) {
        close(fd);
        cli_err("metrics", "out of memory");
        return EXIT_SYSTEM;
    }
    for (int i = 0; i < o->ntables; i++)
        was_up[i] = 1; /* say why a table is down at the first scrape that finds it so */
    sigset_t orig;
    catch_stop(&orig);
    say_where(fd);
    while (!stop_signal) {
        struct pollfd p = {fd, POLLIN, 0};
        if (ppoll(&p, 1, NULL, &orig) < 0)
            continue;                                  /* EINTR: stop_signal says whether to stop */
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC); /* a blocking socket */
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct timespec pause = {0, 100 * 1000 * 1000}; /* a passing shortage */
                nanosleep(&pause, NULL);
                continue;
            }
            cli_err("metrics", "accept: %s", strerror(errno));
            status = EXIT_SYSTEM;
            break;
        }
        serve_one(c, o, was_up);
        close(c);
    }
    if (stop_signal)
        status = 0;
    free(was_up);
    close(fd);
    return status;
}

/* ------------------------------------------------------------- textfile */

#define PROM_FILE   "shmlease.prom"
#define PROM_SUFFIX ".prom"
#define PATH_CAP    4096

/* Where the text goes: DIR/shmlease.prom, or FILE.prom itself; and the
 * temporary file's pattern beside it, ".NAME.XXXXXX" (node_exporter reads
 * *.prom only, and skips it). */
struct textfile {
    char dst[PATH_CAP];
    char tmp[PATH_CAP];
};

/* 0, or EXIT_USAGE after a message. */
static int textfile_paths(const char *arg, struct textfile *tf)
{
    struct stat st;
    size_t n = strlen(arg), k = strlen(PROM_SUFFIX);
    const char *slash = strrchr(arg, '/');
    int dir = stat(arg, &st) == 0 && S_ISDIR(st.st_mode);
    int file = !dir && n > k && strcmp(arg + n - k, PROM_SUFFIX) == 0;
    int len = -1;
    if (dir) {
        snprintf(tf->dst, PATH_CAP, "%s/" PROM_FILE, arg);
        len = snprintf(tf->tmp, PATH_CAP, "%s/." PROM_FILE ".XXXXXX", arg);
    } else if (file) {
        snprintf(tf->dst, PATH_CAP, "%s", arg);
        len = snprintf(tf->tmp, PATH_CAP, "%.*s.%s.XXXXXX", slash ? (int)(slash - arg + 1) : 0, arg,
                       slash ? slash + 1 : arg);
    }
    if (len < 0 || len >= PATH_CAP) {
        cli_err("metrics",
                "--textfile '%s': not a directory, nor a file name ending in .prom "
                "(or too long a path)",
                cli_vis(arg));
        return EXIT_USAGE;
    }
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* tf->dst replaced by text in one rename; 0, or -1 after a message. */
static int replace_file(const struct textfile *tf, const char *text, size_t len)
{
    char tmp[PATH_CAP];
    memcpy(tmp, tf->tmp, sizeof tmp);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        cli_err("metrics", "--textfile: cannot create %s: %s", cli_vis(tmp), strerror(errno));
        return -1;
    }
    /* The collector runs as another user, often: readable by all, as
     * node_exporter's own example writes it. */
    if (write_all(fd, text, len) || fchmod(fd, 0644) || close(fd)) {
        cli_err("metrics", "--textfile: writing %s: %s", cli_vis(tmp), strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, tf->dst)) {
        cli_err("metrics", "--textfile: renaming %s to %s: %s", cli_vis(tmp), cli_vis(tf->dst),
                strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

#define NS_PER_S UINT64_C(1000000000)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Sleeps until the monotonic clock reads at (ns) or a stop signal comes. */
static void sleep_until(uint64_t at, const sigset_t *orig)
{
    for (uint64_t now; !stop_signal && (now = mono_ns()) < at;) {
        struct timespec rel = {(time_t)((at - now) / NS_PER_S), (long)((at - now) % NS_PER_S)};
        ppoll(NULL, 0, &rel, orig);
    }
}

int metrics_textfile(const struct metrics_opts *o)
{
    struct textfile tf;
    if (textfile_paths(o->textfile, &tf))
        return EXIT_USAGE;
    int *was_up = NULL;
    sigset_t orig;
    if (o->interval_ns) {
        catch_stop(&orig);
        if (!(was_up = calloc((size_t)o->ntables, sizeof *was_up))) {
            cli_err("metrics", "out of memory");
            return EXIT_SYSTEM;
        }
        for (int i = 0; i < o->ntables; i++)
            was_up[i] = 1;
    }
    uint64_t next = mono_ns();
    int status = 0;
    do {
        char *text;
        size_t len;
        int r = metrics_render(o->tables, o->ntables, o->max_leases, was_up, 0, &text, &len);
        if (r < 0) {
            status = EXIT_SYSTEM;
            break;
        }
        int w = replace_file(&tf, text, len);
        free(text);
        status = w ? EXIT_SYSTEM : r ? EXIT_TABLE : 0;
        if (!o->interval_ns)
            break;
        next += o->interval_ns;
        uint64_t now = mono_ns();
        if (next < now) /* fell behind (a slow table): no burst to catch up */
            next = now;
        sleep_until(next, &orig);
    } while (!stop_signal);
    if (stop_signal)
        status = 0;
    free(was_up);
    return status;
}
