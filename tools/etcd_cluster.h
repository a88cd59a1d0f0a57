/*
 * tools/etcd_cluster.h - throwaway etcd clusters for `shmlease stress
 * --etcd-cluster`, the etcd demo, the benchmark and the tests (which include
 * it through tests/etcd_cluster.h): 1 to ETCD_CLUSTER_MAX members of the `etcd` on PATH, on free
 * localhost ports, in a private temporary directory, stopped by pid.
 *
 * Variants: plain http; TLS (a CA, server and client certificates made with
 * the openssl command in the directory); TLS requiring client certificates;
 * etcd authentication on (user root with a password of its own).
 *
 * Nothing is left behind when the test process dies: each member is started
 * with PR_SET_PDEATHSIG (SIGKILL) from the thread that calls
 * etcd_cluster_start, and a reaper process, told every member's pid, kills
 * what is left and removes the directory when the test process is gone.
 * So: start, use and stop a cluster from one thread that outlives it.
 *
 * Members run with --unsafe-no-fsync (test data only), short heartbeat and
 * election timeouts (a new leader within about a second) and their logs in
 * <dir>/m<i>.log. Functions return 0 or -1 with cl->err set; none aborts,
 * so they can be used outside criterion.
 */
#ifndef SHL_TOOLS_ETCD_CLUSTER_H
#define SHL_TOOLS_ETCD_CLUSTER_H

#include <stddef.h>
#include <sys/types.h>

#define ETCD_CLUSTER_MAX 5

/* etcd_cluster_start flags */
#define ETCD_TLS         1 /* https clients (peers stay on http) */
#define ETCD_CLIENT_CERT 2 /* clients must present a certificate of the CA (implies TLS) */
#define ETCD_AUTH        4 /* etcd auth on: user "root", password cl->password */

/* With ETCD_AUTH: seconds an unused token lives (etcd's default is 300), so
 * that tests see tokens expire. */
#define ETCD_TOKEN_TTL "2"

struct etcd_member {
    pid_t pid; /* 0: not running */
    int client_port, peer_port;
    int paused;
};

struct etcd_cluster {
    int n, flags;
    char dir[128];
    struct etcd_member m[ETCD_CLUSTER_MAX];
    char endpoints[ETCD_CLUSTER_MAX * 24]; /* "127.0.0.1:p1,127.0.0.1:p2,..." */
    char token[64];                        /* --initial-cluster-token */
    /* TLS (ETCD_TLS, ETCD_CLIENT_CERT): PEM files in dir. */
    char ca[160], cert[160], key[160];                   /* the cluster's CA, a client's pair */
    char other_ca[160], other_cert[160], other_key[160]; /* another CA and a client of it */
    /* ETCD_AUTH */
    char user[16], password[40];
    pid_t reaper;
    int reaper_fd; /* write end of the reaper's pipe */
    char err[512];
};

/* Whether an etcd (and etcdctl) can be run: the etcd tests need them
 * (`make test` installs them; see the Makefile's deps). */
int etcd_cluster_available(void);

/* Starts n members (1..ETCD_CLUSTER_MAX) with `flags`, waits until they
 * are healthy with a leader (and auth is on). 0, or -1 and cl->err. */
int etcd_cluster_start(struct etcd_cluster *cl, int n, int flags);
/* Kills every member, waits for them, removes the directory, ends the
 * reaper. Idempotent. */
void etcd_cluster_stop(struct etcd_cluster *cl);

/* "127.0.0.1:<port>" of member i (a static buffer per i). */
const char *etcd_cluster_endpoint(const struct etcd_cluster *cl, int i);
/* "etcd://<endpoints>/<table>" ("etcds://" with TLS) into buf. */
const char *etcd_cluster_url(const struct etcd_cluster *cl, const char *table, char *buf,
                             size_t cap);

/* The member that leads (asked of each running, unpaused member until they
 * agree), waiting up to timeout_ms for one: its index, or -1. */
int etcd_cluster_leader(struct etcd_cluster *cl, int timeout_ms);
/* Waits up to timeout_ms until every running, unpaused member answers and
 * sees a leader. 0 or -1. */
int etcd_cluster_wait_healthy(struct etcd_cluster *cl, int timeout_ms);

/* SIGKILL member i and reap it. */
int etcd_cluster_kill(struct etcd_cluster *cl, int i);
/* SIGSTOP / SIGCONT member i (waits until it is stopped). */
int etcd_cluster_pause(struct etcd_cluster *cl, int i);
int etcd_cluster_resume(struct etcd_cluster *cl, int i);
/* Starts member i again (killed before) on its data directory and ports,
 * and waits until the cluster is healthy. */
int etcd_cluster_restart(struct etcd_cluster *cl, int i);
/* The same without waiting: for a caller with other work to do meanwhile. */
int etcd_cluster_respawn(struct etcd_cluster *cl, int i);
/* For a caller that reaps its children with waitpid(-1): whether `pid`,
 * just reaped, was a member (then the member is marked not running). */
int etcd_cluster_reaped(struct etcd_cluster *cl, pid_t pid);

/* Turns etcd auth on in a cluster started without ETCD_AUTH, as an admin
 * would: user "root" with the password in cl->password, or a fresh one
 * when it is empty (on no argv). 0 or -1. */
int etcd_cluster_enable_auth(struct etcd_cluster *cl);

/* Runs etcdctl against the cluster (with its TLS and auth settings) with
 * the arguments `args` (a shell fragment); 0 if it exited 0. */
int etcd_cluster_ctl(struct etcd_cluster *cl, const char *args);

#endif
