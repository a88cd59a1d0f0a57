/*
 * tools/bench/rows_pg.c - a PostgreSQL advisory lock: pg_try_advisory_lock
 * and pg_advisory_unlock, as prepared statements over the unix socket.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#ifdef BENCH_HAVE_PQ
#include <libpq-fe.h>

static int pg_pid;
static PGconn *conn;
static char pg_dir[64];

static const char *pg_setup(struct bench_row *r)
{
    (void)r;
    snprintf(pg_dir, sizeof pg_dir, "/tmp/shlbench-pg-XXXXXX");
    if (!mkdtemp(pg_dir))
        return "cannot make the server's directory";
    const char *why = bench_pg_start(pg_dir, &pg_pid);
    if (why)
        return why;
    char conninfo[256];
    snprintf(conninfo, sizeof conninfo, "host=%s port=5432 user=bench dbname=postgres", pg_dir);
    /* The socket accepts before the server does ("starting up"): retry. */
    for (int i = 0; i < 200; i++) {
        conn = PQconnectdb(conninfo);
        if (PQstatus(conn) == CONNECTION_OK)
            break;
        PQfinish(conn);
        conn = NULL;
        usleep(50000);
    }
    if (!conn)
        return "cannot connect to postgres";
    PGresult *a = PQprepare(conn, "lock", "SELECT pg_try_advisory_lock(42)", 0, NULL);
    PGresult *b = PQprepare(conn, "unlock", "SELECT pg_advisory_unlock(42)", 0, NULL);
    int ok = PQresultStatus(a) == PGRES_COMMAND_OK && PQresultStatus(b) == PGRES_COMMAND_OK;
    PQclear(a);
    PQclear(b);
    return ok ? NULL : "PREPARE failed";
}

static void pg_teardown(struct bench_row *r)
{
    (void)r;
    if (conn)
        PQfinish(conn);
    conn = NULL;
    bench_server_stop(pg_pid, SIGINT);
    pg_pid = 0;
    if (pg_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", pg_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench: could not remove %s\n", pg_dir);
    }
}

static int one(const char *stmt)
{
    PGresult *res = PQexecPrepared(conn, stmt, 0, NULL, NULL, NULL, 0);
    int ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
             strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return ok ? 0 : -1;
}

static int run_pg(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    int bad = 0;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n && !bad; i++) {
        bad |= one("lock");
        bad |= one("unlock");
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}
#else
static const char *pg_setup(struct bench_row *r)
{
    (void)r;
    return "built without libpq (make bench-deps, then rebuild)";
}
static int run_pg(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    (void)n;
    (void)o;
    return -1;
}
#define pg_teardown NULL
#endif

void rows_pg(void)
{
    bench_add("alt", "pg try_advisory_lock+unlock", pg_setup, run_pg, pg_teardown);
}
