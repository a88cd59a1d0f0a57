/*
 * tools/cmd_stress.c - shmlease stress: a forked-worker fault campaign that
 * proves no stale write lands.
 *
 * This file parses the options, sets up the table and the shared evidence
 * region, runs the campaign (stress_chaos.c), asks the checker for its
 * verdict (stress_check.c) and reports: a progress line once a second on a
 * terminal, a summary table or JSON at the end, and the exit status.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "etcd_cluster.h"
#include "stress.h"
#include "stress_etcd.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease stress [NAME] [--workers N] [--leases M] [--seconds S]\n"
            "                       [--ttl-ms T] [--kill-rate R] [--pause-rate R]\n"
            "                       [--readers N] [--revoke-rate R] [--repair-rate R]\n"
            "                       [--remove-rate R] [--token-state PATH] [--fail-fast]\n"
            "                       [--max-shared N] [--max-waiters N] [--spare-values N]\n"
            "                       [--seed X] [--json]\n"
            "                       [--etcd-cluster N [--member-chaos]] [--admin-chaos]\n"
            "Runs forked workers that acquire, write under the lease's check, renew and\n"
            "release, while a controller SIGKILLs them (also inside the critical section)\n"
            "and SIGSTOPs workers past their TTL (half of them inside a lease's lock).\n"
            "Every accepted guarded write is logged inside the guarded section, and every\n"
            "hold's sure interval by the holder's clock; the log is checked for stale or\n"
            "lost writes, the intervals for two holders at once.\n"
            "  NAME            table to use (created if missing, kept); default: a fresh\n"
            "                  private table, removed afterwards\n"
            "  --workers N     worker processes (default 8, at most %d)\n"
            "  --leases M      leases they compete for (default 4, at most %d)\n"
            "  --seconds S     campaign length (default 10)\n"
            "  --ttl-ms T      lease TTL in milliseconds (default 100)\n"
            "  --kill-rate R   kills per second (default 2; 0: none)\n"
            "  --pause-rate R  pauses per second (default 2; 0: none)\n"
            "  --readers N     processes reading values while they are written (default 2)\n"
            "  --revoke-rate R revokes per second (default 1; 0: none)\n"
            "  --repair-rate R shl_repair() and shl_check() per second on the live table\n"
            "                  (default 0: none)\n"
            "  --remove-rate R remove the table's name R times a second (default 0: never),\n"
            "                  half by shl_unlink(), half by a plain unlink(2) of its file;\n"
            "                  workers must notice and open it again, with tokens above the\n"
            "                  old table's (needs a token state file: one is made in a\n"
            "                  temporary directory when --token-state is not given)\n"
            "  --token-state PATH  create the table with this token floor file\n"
            "  --max-shared N  create the table with a reader pool of N records (default:\n"
            "                  what the readers can use at once); readers refused for a\n"
            "                  pool too small for them all (SHL_EFULL) are counted; a\n"
            "                  pool large enough that runs full is a leak, an error\n"
            "  --max-waiters N create the table with a waiter pool of N entries (default:\n"
            "                  the library's); waits refused for a pool too small for\n"
            "                  every worker's wait (SHL_EFULL) are counted; a pool large\n"
            "                  enough that runs full is a leak, an error\n"
            "  --spare-values N create the table with N spare value buffers (default: one\n"
            "                  fewer than --leases, at least 1); below --leases, writes take\n"
            "                  spares back from other leases, and those refused when every\n"
            "                  spare's lease is locked (SHL_EFULL) are counted; a pool with\n"
            "                  a spare for every lease that runs full is a leak, an error\n"
            "  --fail-fast     stop at the first violation\n"
            "  --seed X        replay a campaign's random choices (default: from the clock)\n"
            "  --json          print the summary as one JSON object\n"
            "  --etcd-cluster N  start a throwaway etcd cluster of N members (1-%d, on free\n"
            "                  localhost ports, stopped at the end) and run on a table in it\n"
            "  --member-chaos  also SIGKILL, SIGSTOP/SIGCONT and restart the cluster's\n"
            "                  members (the leader often) during the campaign\n"
            "  --admin-chaos   on an etcd table, also delete holder records under their\n"
            "                  holders (none may be told OK after that; twice a second) and\n"
            "                  token records (no token may be issued again; once a second)\n"
            "                  and the table's whole prefix, restoring the table after it\n"
            "                  (no stale handle may be told OK; every 4 s or so)\n"
            "On an etcd table (NAME etcd://HOST:PORT[,...]/TABLE, or --etcd-cluster) the\n"
            "log is etcd's history of the values; the TTL is at least 1000 ms (etcd's are\n"
            "whole seconds) and the default 1000 ms; what has no meaning there is left out\n"
            "and said in the summary (repair, the guarded section, late accepts).\n"
            "Exit: 0 no violation and every enabled fault happened; 1 a violation, a fault\n"
            "that never happened, or an error; 2 usage; 3 the table could not be made.\n",
            ST_WORKERS_MAX, ST_LEASES_MAX, ETCD_CLUSTER_MAX);
}

static int num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || !(v >= lo && v <= hi)) {
        cli_err("stress", "%s takes a number from %g to %g, not '%s'", opt, lo, hi, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* The options that take a value (num() has explained a bad one). */
static int known(const char *a)
{
    static const char *const opts[] = {
        "--workers",     "--leases",      "--seconds",     "--ttl-ms",
        "--kill-rate",   "--pause-rate",  "--readers",     "--revoke-rate",
        "--repair-rate", "--token-state", "--seed",        "--etcd-cluster",
        "--remove-rate", "--max-shared",  "--max-waiters", "--spare-values"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (strcmp(a, opts[i]) == 0)
            return 1;
    return 0;
}

static int parse(int argc, char **argv, struct st_config *c)
{
    double v;
    int seeded = 0, ttl_given = 0, repair_given = 0;
    *c = (struct st_config){.workers = 8,
                            .leases = 4,
                            .seconds = 10,
                            .ttl_ns = 100000000,
                            .kill_rate = 2,
                            .pause_rate = 2,
                            .readers = 2,
                            .max_shared = SHL_POOL_DEFAULT,
                            .max_waiters = SHL_POOL_DEFAULT,
                            .spare_values = SHL_POOL_DEFAULT,
                            .revoke_rate = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char opt[32]; /* "--seed=7": the option, and its value after '=' */
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof opt) {
            snprintf(opt, sizeof opt, "%.*s", (int)(eq - a), a);
            a = opt, val = eq + 1;
        } else {
            eq = NULL;
        }
        if (eq && !known(a)) {
            cli_err("stress", "unknown option or bad value: '%s'", argv[i]);
            return -1;
        }
        if (strcmp(a, "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (strcmp(a, "--fail-fast") == 0) {
            c->fail_fast = 1;
            continue;
        }
        if (strcmp(a, "--member-chaos") == 0) {
            c->member_chaos = 1;
            continue;
        }
        if (strcmp(a, "--admin-chaos") == 0) {
            c->admin_chaos = 1;
            continue;
        }
        if (a[0] != '-') {
            if (c->table) {
                cli_err("stress", "unexpected argument '%s'", a);
                return -1;
            }
            c->table = a;
            continue;
        }
        if (!eq)
            i++;
        if (strcmp(a, "--workers") == 0 && num(a, val, 1, ST_WORKERS_MAX, &v) == 0)
            c->workers = (unsigned)v;
        else if (strcmp(a, "--leases") == 0 && num(a, val, 1, ST_LEASES_MAX, &v) == 0)
            c->leases = (unsigned)v;
        else if (strcmp(a, "--seconds") == 0 && num(a, val, 0.1, 1e7, &v) == 0)
            c->seconds = v;
        else if (strcmp(a, "--ttl-ms") == 0 && num(a, val, 1, 1e6, &v) == 0)
            c->ttl_ns = (uint64_t)(v * 1e6), ttl_given = 1;
        else if (strcmp(a, "--etcd-cluster") == 0 && num(a, val, 1, ETCD_CLUSTER_MAX, &v) == 0)
            c->etcd_cluster = (unsigned)v;
        else if (strcmp(a, "--kill-rate") == 0 && num(a, val, 0, 1000, &v) == 0)
            c->kill_rate = v;
        else if (strcmp(a, "--pause-rate") == 0 && num(a, val, 0, 1000, &v) == 0)
            c->pause_rate = v;
        else if (strcmp(a, "--readers") == 0 && num(a, val, 0, ST_WORKERS_MAX, &v) == 0)
            c->readers = (unsigned)v;
        else if (strcmp(a, "--revoke-rate") == 0 && num(a, val, 0, 1000, &v) == 0)
            c->revoke_rate = v;
        else if (strcmp(a, "--repair-rate") == 0 && num(a, val, 0, 1000, &v) == 0)
            c->repair_rate = v, repair_given = v > 0;
        else if (strcmp(a, "--remove-rate") == 0 && num(a, val, 0, 100, &v) == 0)
            c->remove_rate = v;
        else if (strcmp(a, "--max-shared") == 0 && num(a, val, 0, 1e9, &v) == 0)
            c->max_shared = (uint32_t)v;
        else if (strcmp(a, "--max-waiters") == 0 && num(a, val, 0, 1e9, &v) == 0)
            c->max_waiters = (uint32_t)v;
        else if (strcmp(a, "--spare-values") == 0 && num(a, val, 0, 1e9, &v) == 0)
            c->spare_values = (uint32_t)v;
        else if (strcmp(a, "--token-state") == 0 && val)
            c->token_state = val;
        else if (strcmp(a, "--seed") == 0 && val && cli_x64(val, &c->seed) == 0)
            seeded = 1;
        else {
            if (!known(a) || strcmp(a, "--seed") == 0)
                cli_err("stress", "unknown option or bad value: '%s'", a);
            return -1;
        }
    }
    c->etcd = c->etcd_cluster > 0 || st_is_etcd(c->table);
    if (c->etcd_cluster && c->table) {
        cli_err("stress", "--etcd-cluster makes its own table: give no NAME");
        return -1;
    }
    if (c->member_chaos && !c->etcd_cluster) {
        cli_err("stress", "--member-chaos needs --etcd-cluster (members the tool started)");
        return -1;
    }
    if (c->admin_chaos && !c->etcd) {
        cli_err("stress", "--admin-chaos needs an etcd table");
        return -1;
    }
    if (c->etcd && !SHL_HAVE_ETCD) {
        cli_err("stress", "this build has no etcd support (make ETCD=0)");
        return -1;
    }
    if (c->etcd && (repair_given || c->token_state || c->remove_rate > 0)) {
        cli_err("stress", "%s has no meaning on an etcd table",
                repair_given     ? "--repair-rate"
                : c->token_state ? "--token-state"
                                 : "--remove-rate");
        return -1;
    }
    if (c->etcd && !ttl_given)
        c->ttl_ns = UINT64_C(1000000000);
    if (c->etcd && c->ttl_ns < UINT64_C(1000000000)) {
        cli_err("stress", "--ttl-ms below 1000 on etcd (its TTLs are whole seconds)");
        return -1;
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t s =
            (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48);
        c->seed = st_rand(&s);
    }
    return 0;
}

/* Sums of the workers' shared counters. */
static void sum(const struct st_shared *sh, uint64_t out[ST_C_COUNT])
{
    for (int i = 0; i < ST_C_COUNT; i++)
        out[i] = st_worker_count(sh, (enum st_wc)i);
}

struct report {
    const struct st_config *c;
    uint64_t floor;
    struct st_shared *sh;
    struct st_checker *ck;
    uint64_t last_ops;
    double last_s;
    /* The table at the end (with removals: since its last creation): value
     * spares taken back from the leases that kept them. */
    uint64_t values_taken_back;
};

static void progress(void *arg, const struct st_chaos_totals *tot)
{
    struct report *r = arg;
    uint64_t n[ST_C_COUNT];
    sum(r->sh, n);
    double dt = tot->elapsed_s - r->last_s;
    double rate = dt > 0 ? (double)(n[ST_C_OPS] - r->last_ops) / dt : 0;
    r->last_ops = n[ST_C_OPS];
    r->last_s = tot->elapsed_s;
    fprintf(stderr,
            "\r%5.0fs  ops/s %-8.0f acq %-7llu exp %-6llu kills %-5llu pauses %-5llu "
            "stale refused %-6llu violations %llu\033[K",
            tot->elapsed_s, rate, (unsigned long long)n[ST_C_ACQUIRED],
            (unsigned long long)n[ST_C_EXPIRED], (unsigned long long)tot->kills,
            (unsigned long long)tot->pauses, (unsigned long long)n[ST_C_STALE],
            (unsigned long long)st_violations_now(r->sh, r->ck, tot));
    fflush(stderr);
}

struct verdict {
    uint64_t n[ST_C_COUNT];
    struct st_check_totals ck;
    uint64_t violations;
    const char *why; /* NULL: pass */
};

static void judge(const struct report *r, const struct st_chaos_totals *tot, struct verdict *v)
{
    const struct st_config *c = r->c;
    sum(r->sh, v->n);
    st_checker_totals(r->ck, &v->ck);
    v->violations = st_violations_now(r->sh, r->ck, tot);
    v->why = NULL;
    if (v->violations)
        v->why = "violations found";
    else if (v->ck.overflow)
        v->why = "evidence incomplete: a log ring overflowed";
    else if (v->n[ST_C_ERRORS] || tot->worker_failures || atomic_load(&r->sh->reader_errors) ||
             tot->admin_errors)
        v->why = "workers hit unexpected errors";
    else if (tot->member_errors)
        v->why = "a member could not be killed, stopped or restarted";
    else if (tot->interrupted)
        v->why = "interrupted";
    else if (c->pause_rate > 0 && v->n[ST_C_STALE_PAUSED] == 0)
        v->why = "no paused holder's write was refused: the fault never happened";
    else if (c->pause_rate > 0 && !c->etcd && c->seconds >= 2 && tot->pauses_in_section == 0)
        v->why = "no worker was stopped inside a slot lock: the fault never happened";
    else if (c->kill_rate > 0 && tot->kills == 0)
        v->why = "no worker was killed: the fault never happened";
    else if (c->revoke_rate > 0 && tot->revokes == 0)
        v->why = "no lease was revoked: the fault never happened";
    else if (c->repair_rate > 0 && tot->repairs == 0)
        v->why = "no repair ran: the fault never happened";
    else if (c->readers > 0 && atomic_load(&r->sh->reads) == 0)
        v->why = "the readers read nothing";
    else if (c->readers > 0 && !c->etcd && c->seconds >= 10 && v->ck.guarded_reads == 0)
        v->why = "no reader read under a shared lease";
    else if (c->readers > 0 && c->etcd && c->seconds >= 10 && v->ck.guarded_reads == 0)
        v->why = "no reader's shared hold was confirmed by a renew: the check never ran";
    else if (c->remove_rate > 0 && atomic_load(&r->sh->removals) == 0)
        v->why = "the table was never removed by shl_unlink: the fault never happened";
    else if (c->remove_rate > 0 && c->seconds >= 2 && atomic_load(&r->sh->removals_plain) == 0)
        v->why = "the table's file was never unlinked: the fault never happened";
    else if (c->remove_rate > 0 && v->n[ST_C_REOPENS] == 0)
        v->why = "no worker opened the table again after a removal";
    else if (c->member_chaos && tot->member_kills == 0)
        v->why = "no member was killed: the fault never happened";
    else if (c->member_chaos && tot->member_pauses == 0)
        v->why = "no member was stopped: the fault never happened";
    else if (c->member_chaos && tot->member_long == 0)
        v->why = "no member was stopped past the ttl with waiters queued: the fault never happened";
    else if (c->member_chaos && tot->leader_hits == 0)
        v->why = "the leader was never hit: the fault never happened";
    else if (c->admin_chaos && atomic_load(&r->sh->admin_deletes) == 0)
        v->why = "no holder record was deleted: the fault never happened";
    else if (c->admin_chaos && atomic_load(&r->sh->token_deletes) == 0)
        v->why = "no token record was deleted: the fault never happened";
    else if (c->admin_chaos && atomic_load(&r->sh->wipes) == 0)
        v->why = "the table's prefix was never deleted: the fault never happened";
    else if (c->admin_chaos && v->n[ST_C_REOPENS] == 0)
        v->why = "no worker opened the table again after its prefix was deleted";
    else if (v->n[ST_C_ACKED] == 0)
        v->why = "no write was acknowledged";
}

/* A table name with a throwaway cluster's endpoints. */
#define ST_URL_MAX (16 + ETCD_CLUSTER_MAX * 24 + 64)

#define ROW(label, val) printf("  %-34s %llu\n", label, (unsigned long long)(val))

/* What the campaign leaves out on an etcd table, and why: said in every
 * summary, never silently. */
static const char *const etcd_left_out[] = {
    "repair and live check of segment internals (an etcd table has none)",
    "deaths inside the guarded section (shl_guard is SHL_ENOTSUP on etcd: kills land "
    "with a transaction in flight instead)",
    "the evidence log written under the lease's lock (etcd's history of the values is the "
    "log)",
    "late accepts on the worker's clock (etcd's lease clock is the leader's: a lease lives "
    "until its lessor revokes it, and a new leader extends every lease by its ttl)",
    "a manual clock and token floor files (refused on etcd), and so removals of the table "
    "(--remove-rate: a re-created table needs a floor)",
    "pauses inside a slot lock (there is none) and the holders' sure intervals (a holder's "
    "clock says nothing of the leader's lease clock)",
    "reads under shl_guard_shared (SHL_ENOTSUP on etcd): a reader's shared hold is checked "
    "by reads that a renew after them confirms instead"};

static void print_text(const struct report *r, const struct st_chaos_totals *t,
                       const struct verdict *v)
{
    const struct st_config *c = r->c;
    const uint64_t *n = v->n;
    printf("shmlease stress: %.1f s, %u workers, %u leases, ttl %.0f ms, kill rate %g/s, "
           "pause rate %g/s, seed 0x%llx\n",
           t->elapsed_s, c->workers, c->leases, (double)c->ttl_ns / 1e6, c->kill_rate,
           c->pause_rate, (unsigned long long)c->seed);
    printf("  %-34s %llu (%.0f/s)\n", "operations", (unsigned long long)n[ST_C_OPS],
           t->elapsed_s > 0 ? (double)n[ST_C_OPS] / t->elapsed_s : 0);
    ROW("acquisitions", n[ST_C_ACQUIRED]);
    ROW("busy (retried)", n[ST_C_BUSY]);
    ROW("renewals", n[ST_C_RENEWED]);
    ROW("releases", n[ST_C_RELEASED]);
    ROW("expiries", n[ST_C_EXPIRED]);
    ROW("guarded writes acknowledged", n[ST_C_ACKED]);
    ROW("value writes accepted", n[ST_C_VALUES]);
    ROW("acquisitions by shl_acquire_wait", n[ST_C_WAITS]);
    ROW("holds through a bound lease", n[ST_C_BOUND]);
    ROW("holds kept by a renewer", n[ST_C_RENEWERS]);
    ROW("values written by shl_update", n[ST_C_UPDATES]);
    ROW("stale writes refused", n[ST_C_STALE]);
    ROW("  ... by a paused holder", n[ST_C_STALE_PAUSED]);
    ROW("  ... by a revoked holder", n[ST_C_REVOKED]);
    ROW("stale-token retries refused", n[ST_C_STALE_RETRY]);
    ROW("values read during writes", atomic_load(&r->sh->reads));
    ROW("shared holds by readers", atomic_load(&r->sh->shared_holds));
    ROW("  ... refused (held, writer queued)", atomic_load(&r->sh->shared_busy));
    if (!c->etcd)
        ROW("  ... refused (reader pool full)", atomic_load(&r->sh->shared_full));
    if (!c->etcd)
        ROW("waits refused (waiter pool full)", atomic_load(&r->sh->waiters_full));
    if (!c->etcd)
        ROW("values refused (value pool full)", atomic_load(&r->sh->values_full));
    if (!c->etcd)
        ROW(atomic_load(&r->sh->gen) ? "spares taken back (last table)" : "spares taken back",
            r->values_taken_back);
    if (c->etcd) {
        ROW("  ... confirmed by a renew, checked", atomic_load(&r->sh->shared_checked));
        ROW("  ... lost before the renew", atomic_load(&r->sh->shared_lost));
        ROW("reads under confirmed holds, checked", v->ck.guarded_reads);
    } else {
        ROW("guarded reads under them, checked", v->ck.guarded_reads);
    }
    ROW("revokes", t->revokes);
    ROW("repairs on the live table", t->repairs);
    ROW("checks on the live table", t->checks);
    ROW("kills", t->kills);
    ROW("  ... inside a guarded write", t->kills_in_section);
    ROW("pauses past the TTL", t->pauses);
    if (!c->etcd) {
        ROW("  ... inside a slot lock", t->pauses_in_section);
        ROW("  ... of them landed there at random", t->pauses_landed_in_lock);
        ROW("  ... stopped late, in a lock or queued", t->pauses_late);
        ROW("sure hold intervals checked", v->ck.intervals);
    }
    ROW("respawns", t->respawns);
    if (c->remove_rate > 0) {
        ROW("table removals by shl_unlink", atomic_load(&r->sh->removals));
        ROW("table removals by unlink(2)", atomic_load(&r->sh->removals_plain));
        ROW("  ... seen by workers", n[ST_C_REMOVED_SEEN]);
        ROW("  ... workers' reopenings", n[ST_C_REOPENS]);
        ROW("  ... other reopenings", atomic_load(&r->sh->reopens_other));
    }
    ROW("evidence records checked", v->ck.records);
    ROW("logged, unacknowledged (killed)", v->ck.unacked);
    ROW("recoveries pending at the end", v->ck.settled);
    ROW("unexpected errors",
        n[ST_C_ERRORS] + t->worker_failures + atomic_load(&r->sh->reader_errors) + t->admin_errors);
    ROW("violations", v->violations);
    ROW("  token order / shared token", v->ck.order + v->ck.shared_token);
    ROW("  half-written record visible", v->ck.bad_seal);
    ROW("  acknowledged write lost", v->ck.lost);
    ROW("  accepted after expiry", n[ST_C_LATE_ACCEPT]);
    ROW("  judged after a stopped locker", n[ST_C_LATE_LOCKED]);
    ROW("  sure hold intervals overlap", v->ck.interval_overlap);
    ROW("    ... a reader beside a stopped writer", v->ck.interval_stopped);
    ROW("  value torn or out of order", n[ST_C_BAD_VALUE] + atomic_load(&r->sh->torn));
    ROW("  previous token accepted", n[ST_C_STALE_ACCEPT]);
    ROW("  refused while surely the holder", n[ST_C_LOST_EXCL]);
    ROW("  token granted twice", n[ST_C_TOKEN_REUSE]);
    ROW("  waiter asleep on a freed lease", n[ST_C_ASLEEP]);
    ROW("  accepted on a removed table", n[ST_C_REMOVED_ACCEPT]);
    ROW("  accepted after its record's delete", n[ST_C_GONE_ACCEPT]);
    ROW("  keys put under a deleted prefix", atomic_load(&r->sh->wipe_strays));
    ROW("  token at or below a removed one", atomic_load(&r->sh->token_below_removed));
    ROW("  reader saw a write newer than gen", v->ck.shared_newer);
    ROW("  write accepted under a reader", v->ck.shared_overlap);
    ROW("  live table check problems", t->check_problems);
    ROW("  table at the end", v->ck.table);
    printf("  %-34s %s\n", "table check (shl_check + own)",
           v->ck.table           ? "PROBLEMS"
           : v->ck.table_checked ? "clean"
                                 : "not run");
    for (unsigned i = 0; st_checker_problem(r->ck, i); i++)
        printf("  problem: %s\n", st_checker_problem(r->ck, i));
    if (c->etcd) {
        ROW("etcd: unanswered calls (EUNAVAIL)", n[ST_C_UNAVAIL] + atomic_load(&r->sh->unavail));
        ROW("  ... of which writes", n[ST_C_UNAVAIL_W]);
        ROW("etcd: lost early to a resumed leader", n[ST_C_EARLY_REVOKE]);
        ROW("etcd: renewals with a new ttl", n[ST_C_TTL_RENEWED]);
        if (c->admin_chaos) {
            ROW("etcd: holder records deleted", atomic_load(&r->sh->admin_deletes));
            ROW("etcd: token records deleted", atomic_load(&r->sh->token_deletes));
            ROW("  ... SHL_ECORRUPT meanwhile",
                n[ST_C_CORRUPT_SEEN] + atomic_load(&r->sh->corrupt_seen));
            ROW("etcd: prefixes deleted, table restored", atomic_load(&r->sh->wipes));
            ROW("  ... workers that opened it again", n[ST_C_REOPENS]);
        }
        if (c->etcd_cluster)
            printf("  %-34s %u\n", "etcd: members (throwaway)", c->etcd_cluster);
        if (c->member_chaos) {
            ROW("etcd: members killed", t->member_kills);
            ROW("etcd: members stopped", t->member_pauses);
            ROW("  ... past the ttl, waiters queued", t->member_long);
            ROW("etcd: members restarted", t->member_restarts);
            ROW("etcd: disturbances of the leader", t->leader_hits);
        }
        for (size_t i = 0; i < sizeof etcd_left_out / sizeof etcd_left_out[0]; i++)
            printf("  not on etcd: %s\n", etcd_left_out[i]);
    }
    printf("%s%s (replay: --seed 0x%llx)\n", v->why ? "FAIL: " : "PASS", v->why ? v->why : "",
           (unsigned long long)c->seed);
}

static void print_json(const struct report *r, const struct st_chaos_totals *t,
                       const struct verdict *v)
{
    const struct st_config *c = r->c;
    const uint64_t *n = v->n;
    printf("{\"seed\":\"0x%llx\",\"seconds\":%.3f,\"workers\":%u,\"leases\":%u,\"ttl_ms\":%.3f,"
           "\"kill_rate\":%g,\"pause_rate\":%g,",
           (unsigned long long)c->seed, t->elapsed_s, c->workers, c->leases,
           (double)c->ttl_ns / 1e6, c->kill_rate, c->pause_rate);
    static const struct {
        const char *k;
        int i;
    } keys[] = {{"ops", ST_C_OPS},
                {"acquisitions", ST_C_ACQUIRED},
                {"busy", ST_C_BUSY},
                {"renewals", ST_C_RENEWED},
                {"releases", ST_C_RELEASED},
                {"expiries", ST_C_EXPIRED},
                {"acked", ST_C_ACKED},
                {"values", ST_C_VALUES},
                {"stale_refused", ST_C_STALE},
                {"stale_refused_paused", ST_C_STALE_PAUSED},
                {"late_accept", ST_C_LATE_ACCEPT},
                {"bad_value", ST_C_BAD_VALUE},
                {"waits", ST_C_WAITS},
                {"bound_holds", ST_C_BOUND},
                {"renewer_holds", ST_C_RENEWERS},
                {"updates", ST_C_UPDATES},
                {"stale_token_retries", ST_C_STALE_RETRY},
                {"stale_refused_revoked", ST_C_REVOKED},
                {"stale_accepted", ST_C_STALE_ACCEPT},
                {"lost_exclusion", ST_C_LOST_EXCL},
                {"token_reuse", ST_C_TOKEN_REUSE},
                {"late_locked", ST_C_LATE_LOCKED},
                {"asleep_waiters", ST_C_ASLEEP},
                {"removed_seen", ST_C_REMOVED_SEEN},
                {"reopens", ST_C_REOPENS},
                {"removed_accepted", ST_C_REMOVED_ACCEPT},
                {"gone_accepted", ST_C_GONE_ACCEPT},
                {"ttl_renewals", ST_C_TTL_RENEWED},
                {"errors", ST_C_ERRORS}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        printf("\"%s\":%llu,", keys[i].k, (unsigned long long)n[keys[i].i]);
    printf("\"reader_errors\":%llu,\"admin_errors\":%llu,",
           (unsigned long long)atomic_load(&r->sh->reader_errors),
           (unsigned long long)t->admin_errors);
    printf(
        "\"reads\":%llu,\"torn\":%llu,\"revokes\":%llu,\"repairs\":%llu,\"checks\":%llu,"
        "\"check_problems\":%llu,\"token_floor\":%llu,\"shared_holds\":%llu,\"shared_full\":%llu,"
        "\"waiters_full\":%llu,\"values_full\":%llu,\"values_taken_back\":%llu,"
        "\"guarded_reads\":%llu,\"shared_newer\":%llu,\"shared_overlap\":%llu,",
        (unsigned long long)atomic_load(&r->sh->reads),
        (unsigned long long)atomic_load(&r->sh->torn), (unsigned long long)t->revokes,
        (unsigned long long)t->repairs, (unsigned long long)t->checks,
        (unsigned long long)t->check_problems, (unsigned long long)r->floor,
        (unsigned long long)atomic_load(&r->sh->shared_holds),
        (unsigned long long)atomic_load(&r->sh->shared_full),
        (unsigned long long)atomic_load(&r->sh->waiters_full),
        (unsigned long long)atomic_load(&r->sh->values_full),
        (unsigned long long)r->values_taken_back, (unsigned long long)v->ck.guarded_reads,
        (unsigned long long)v->ck.shared_newer, (unsigned long long)v->ck.shared_overlap);
    printf("\"remove_rate\":%g,\"removals\":%llu,\"removals_plain\":%llu,"
           "\"reopens_other\":%llu,\"token_below_removed\":%llu,",
           c->remove_rate, (unsigned long long)atomic_load(&r->sh->removals),
           (unsigned long long)atomic_load(&r->sh->removals_plain),
           (unsigned long long)atomic_load(&r->sh->reopens_other),
           (unsigned long long)atomic_load(&r->sh->token_below_removed));
    printf("\"pauses_in_section\":%llu,\"pauses_landed_in_lock\":%llu,"
           "\"pauses_late\":%llu,\"intervals\":%llu,"
           "\"interval_overlap\":%llu,\"interval_overlap_stopped\":%llu,",
           (unsigned long long)t->pauses_in_section, (unsigned long long)t->pauses_landed_in_lock,
           (unsigned long long)t->pauses_late, (unsigned long long)v->ck.intervals,
           (unsigned long long)v->ck.interval_overlap, (unsigned long long)v->ck.interval_stopped);
    printf(
        "\"kills\":%llu,\"kills_in_section\":%llu,\"pauses\":%llu,\"respawns\":%llu,"
        "\"worker_failures\":%llu,\"records\":%llu,\"unacked\":%llu,\"order\":%llu,"
        "\"shared_token\":%llu,\"bad_seal\":%llu,\"lost\":%llu,\"table_problems\":%llu,"
        "\"overflow\":%llu,\"settled\":%llu,\"table_checked\":%s,\"violations\":%llu,\"pass\":%s",
        (unsigned long long)t->kills, (unsigned long long)t->kills_in_section,
        (unsigned long long)t->pauses, (unsigned long long)t->respawns,
        (unsigned long long)t->worker_failures, (unsigned long long)v->ck.records,
        (unsigned long long)v->ck.unacked, (unsigned long long)v->ck.order,
        (unsigned long long)v->ck.shared_token, (unsigned long long)v->ck.bad_seal,
        (unsigned long long)v->ck.lost, (unsigned long long)v->ck.table,
        (unsigned long long)v->ck.overflow, (unsigned long long)v->ck.settled,
        v->ck.table_checked ? "true" : "false", (unsigned long long)v->violations,
        v->why ? "false" : "true");
    if (c->etcd) {
        printf(",\"etcd\":{\"members\":%u,\"member_chaos\":%s,\"unavailable\":%llu,"
               "\"unavailable_writes\":%llu,\"member_kills\":%llu,\"member_pauses\":%llu,"
               "\"member_long\":%llu,\"member_restarts\":%llu,\"leader_hits\":%llu,\"member_"
               "errors\":%llu,"
               "\"early_revokes\":%llu,\"shared_checked\":%llu,\"shared_lost\":%llu,"
               "\"shared_busy\":%llu,\"admin_deletes\":%llu,\"token_deletes\":%llu,"
               "\"corrupt_seen\":%llu,\"wipes\":%llu,\"wipe_strays\":%llu,\"left_out\":[",
               c->etcd_cluster, c->member_chaos ? "true" : "false",
               (unsigned long long)(n[ST_C_UNAVAIL] + atomic_load(&r->sh->unavail)),
               (unsigned long long)n[ST_C_UNAVAIL_W], (unsigned long long)t->member_kills,
               (unsigned long long)t->member_pauses, (unsigned long long)t->member_long,
               (unsigned long long)t->member_restarts, (unsigned long long)t->leader_hits,
               (unsigned long long)t->member_errors, (unsigned long long)n[ST_C_EARLY_REVOKE],
               (unsigned long long)atomic_load(&r->sh->shared_checked),
               (unsigned long long)atomic_load(&r->sh->shared_lost),
               (unsigned long long)atomic_load(&r->sh->shared_busy),
               (unsigned long long)atomic_load(&r->sh->admin_deletes),
               (unsigned long long)atomic_load(&r->sh->token_deletes),
               (unsigned long long)(n[ST_C_CORRUPT_SEEN] + atomic_load(&r->sh->corrupt_seen)),
               (unsigned long long)atomic_load(&r->sh->wipes),
               (unsigned long long)atomic_load(&r->sh->wipe_strays));
        for (size_t i = 0; i < sizeof etcd_left_out / sizeof etcd_left_out[0]; i++)
            printf("%s\"%s\"", i ? "," : "", etcd_left_out[i]);
        printf("]}");
    }
    if (v->why)
        printf(",\"fail\":\"%s\"", v->why);
    printf("}\n");
}

/* Why a table cannot carry the campaign, or NULL. Said before anything
 * runs: a manual clock never moves (every hold would last forever and every
 * check of time would be false), and a name the table has no slot for would
 * fail late, as a worker error. */
static const char *unfit(const struct st_config *c, shl_table *t)
{
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return "cannot be read";
    if (ti.value_size < ST_VALUE_MIN_WORDS * 8)
        return "has a value size below 64 bytes";
    if (ti.clock == SHL_CLOCK_MANUAL)
        return "has a manual clock: the campaign needs real time";
    if (c->etcd)
        return NULL; /* no slots to run out of */
    uint32_t need = 0;
    for (unsigned l = 0; l <= c->leases; l++) { /* and the checker's "stress-settle" */
        char name[ST_LEASE_NAME];
        shl_lease_info in;
        if (l < c->leases)
            st_lease_name(l, name);
        need += shl_stat(t, l < c->leases ? name : "stress-settle", &in) == SHL_ENOENT;
    }
    if (ti.used + need > ti.capacity)
        return "has too few free slots for --leases";
    return NULL;
}

/* Each lease's token before the campaign: every token granted is above it. */
static void token_bases(shl_table *t, struct st_shared *sh, uint64_t *floor)
{
    shl_table_info ti;
    *floor = shl_table_info_get(t, &ti) == SHL_OK ? ti.token_floor : 0;
    for (unsigned l = 0; l < sh->leases; l++) {
        char name[ST_LEASE_NAME];
        shl_lease_info in;
        st_lease_name(l, name);
        sh->token_base[l] = shl_stat(t, name, &in) == SHL_OK ? in.token : *floor;
    }
}

/* --remove-rate: what everyone opens the name again with (the table's own
 * geometry, SHL_CREATE, the token state file) and the file a plain unlink
 * removes; NULL, or why the table cannot be removed under the campaign. */
static const char *removal_setup(struct st_config *c, shl_table *t)
{
    shl_table_info ti;
    shl_place p;
    if (shl_table_info_get(t, &ti) != SHL_OK || shl_place_get(c->table, &p) != SHL_OK)
        return "cannot be read";
    if (!ti.token_floor)
        return "has no token floor (made without --token-state): a table made again under "
               "its name would give its tokens again";
    snprintf(c->path, sizeof c->path, "%s", p.path);
    shl_options_init(&c->reopen);
    c->reopen.capacity = ti.capacity;
    c->reopen.value_size = ti.value_size;
    c->reopen.mode = ti.mode;
    c->reopen.policy = ti.policy;
    c->reopen.reclaim_delay_ms = ti.reclaim_delay_ms;
    c->reopen.max_shared = ti.max_shared;
    c->reopen.max_waiters = ti.max_waiters;
    c->reopen.spare_values = ti.spare_values;
    c->reopen.history = ti.history;
    c->reopen.token_state_path = c->token_state;
    c->reopen.flags = SHL_CREATE;
    return NULL;
}

/* Reader records the campaign's readers can use at once: each holds one
 * lease at a time, so a lease has at most `readers` records in use (its
 * expired ones are reused first, the lowest first), which fit one group
 * up to SHL_SHARED_GROUP readers and, past that, may each be in a group of
 * its own; a lease keeps them while a reader is left to expire there. */
static uint32_t reader_pool_need(const struct st_config *c)
{
    uint32_t per = c->readers <= SHL_SHARED_GROUP ? (c->readers ? 1 : 0)
                   : c->readers < SHL_SHARED_MAX / SHL_SHARED_GROUP
                       ? c->readers
                       : SHL_SHARED_MAX / SHL_SHARED_GROUP;
    return c->leases * per * SHL_SHARED_GROUP;
}

/* The waiter entries the workers can use at once, in whole groups: a
 * lease's queue holds at most every worker, and a worker waits in one
 * queue at a time. */
static uint32_t waiter_pool_need(const struct st_config *c)
{
    uint32_t per = (c->workers + SHL_WAITER_GROUP - 1) / SHL_WAITER_GROUP;
    uint32_t groups = c->leases * per < c->workers ? c->leases * per : c->workers;
    return groups * SHL_WAITER_GROUP;
}

/* Creates or opens the campaign's table. */
static int open_table(struct st_config *c, char *buf, size_t cap, shl_table **t)
{
    if (!c->table && c->cluster) {
        snprintf(buf, cap, "etcd://%s/shlstress-%d-%llx", c->cluster->endpoints, (int)getpid(),
                 (unsigned long long)(c->seed & 0xffffff));
        c->table = buf;
        c->own_table = 1;
    } else if (!c->table) {
        snprintf(buf, cap, "shlstress-%d-%llx", (int)getpid(),
                 (unsigned long long)(c->seed & 0xffffff));
        c->table = buf;
        c->own_table = 1;
    }
    shl_options o;
    shl_options_init(&o);
    o.capacity = c->leases + 1 < 16 ? 16 : c->leases + 1; /* + the checker's name */
    o.token_state_path = c->token_state;
    /* The campaign's own table keeps killed holders' leases to expiry, as
     * its checker models them; a table given by name is used as it is. */
    o.policy = 0;
    /* On etcd every write carries the value over the network: the smallest. */
    o.value_size = c->etcd ? ST_VALUE_MIN_WORDS * 8 : ST_VALUE_WORDS * 8;
    o.flags = SHL_CREATE | (c->own_table ? SHL_EXCL : 0);
    /* Unless told otherwise: just what the readers can use at once, so
     * that a group not given back shows (a full pool is then an error). */
    o.max_shared = c->max_shared != SHL_POOL_DEFAULT ? c->max_shared : reader_pool_need(c);
    o.max_waiters = c->max_waiters;
    /* Unless told otherwise: one spare value buffer fewer than the leases,
     * so that writes take spares back from one another (a value moved
     * home under its lease's lock) all through the campaign. */
    o.spare_values = c->spare_values != SHL_POOL_DEFAULT ? c->spare_values
                     : c->leases > 1                     ? c->leases - 1
                                                         : 1;
    int rc = shl_open(c->table, &o, t);
    if (rc == SHL_EMISMATCH && !c->own_table)
        rc = shl_open(c->table, NULL, t); /* an existing table: use it if it fits */
    if (rc == SHL_OK) {
        const char *why = unfit(c, *t);
        if (!why && c->remove_rate > 0)
            why = removal_setup(c, *t);
        if (!why)
            return 0;
        cli_err("stress", "table '%s' %s", c->table, why);
        shl_close(*t);
        if (c->own_table)
            shl_unlink(c->table);
        return EXIT_TABLE;
    }
    cli_err("stress", "cannot open or create table '%s': %s (%s)", c->table, cli_strerror(rc),
            shl_errname(rc));
    return EXIT_TABLE;
}

/* The campaign on an open table: returns the exit status. */
static int campaign(struct st_config *c, shl_table **tp)
{
    shl_table *t = *tp;
    fprintf(stderr, "shmlease stress: table %s, %u workers, %u leases, %.1f s, seed 0x%llx\n",
            c->table, c->workers, c->leases, c->seconds, (unsigned long long)c->seed);
    struct st_shared *sh = st_shared_create(c);
    struct st_checker *ck = sh ? st_checker_new(sh) : NULL;
    if (!ck) {
        cli_err("stress", "cannot map the evidence region");
        st_shared_destroy(sh);
        return EXIT_REFUSED;
    }
    struct report r = {c, 0, sh, ck, 0, 0, 0};
    token_bases(t, sh, &r.floor);
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) == SHL_OK && ti.value_size / 8 < sh->value_words)
        sh->value_words = ti.value_size / 8;
    sh->pool_fits = !c->etcd && ti.max_shared >= reader_pool_need(c);
    sh->waiter_pool_fits = c->etcd || ti.max_waiters >= waiter_pool_need(c);
    sh->value_pool_fits = c->etcd || ti.spare_values >= c->leases;
#if SHL_HAVE_ETCD
    struct st_etcd_feed *feed = NULL;
    if (c->etcd) {
        const char *why;
        feed = st_etcd_feed_new(c->table, sh->value_words, sh, &why);
        if (!feed) {
            cli_err("stress", "cannot watch the table's history in etcd: %s", why);
            st_checker_free(ck);
            st_shared_destroy(sh);
            return EXIT_TABLE;
        }
        st_checker_set_feed(ck, st_etcd_feed, feed);
    }
#endif
    struct st_chaos_totals tot;
    st_chaos_run(c, sh, ck, &tot, isatty(STDERR_FILENO) ? progress : NULL, &r);
    if (isatty(STDERR_FILENO))
        fputc('\n', stderr);
    /* Writes that may be logged without an acknowledgement: one per kill,
     * and on etcd each write whose answer never came. */
    uint64_t n[ST_C_COUNT];
    sum(sh, n);
    if (atomic_load(&sh->gen) != 0) {
        /* Removed meanwhile: the checker looks at the table the name names
         * now (made again here if the last removal was the last word). */
        uint32_t g;
        shl_close(t);
        *tp = t = NULL;
        int rc = st_table_open(c, sh, &t, &g);
        if (rc != SHL_OK) {
            cli_err("stress", "cannot open the table again at the end: %s", cli_strerror(rc));
            st_checker_free(ck);
            st_shared_destroy(sh);
            return EXIT_REFUSED;
        }
        *tp = t;
    }
    st_checker_final(ck, t, tot.kills + n[ST_C_UNAVAIL_W]);
    if (shl_table_info_get(t, &ti) == SHL_OK)
        r.values_taken_back = ti.spare_values_taken_back;
    struct verdict v;
    judge(&r, &tot, &v);
    if (c->json)
        print_json(&r, &tot, &v);
    else
        print_text(&r, &tot, &v);
#if SHL_HAVE_ETCD
    st_etcd_feed_free(feed);
#endif
    st_checker_free(ck);
    st_shared_destroy(sh);
    return v.why ? EXIT_REFUSED : 0;
}

/* The temporary directory of a token state file made for the campaign. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[256];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
            unlink(p);
    if (d)
        closedir(d);
    rmdir(dir);
}

int cmd_stress(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    struct st_config c;
    if (parse(argc, argv, &c) != 0) {
        fputs("shmlease stress: see 'shmlease stress --help'\n", stderr);
        return EXIT_USAGE;
    }
#if SHL_HAVE_ETCD
    /* Static: large, and the members are tied to this thread's life. */
    static struct etcd_cluster cluster;
    if (c.etcd_cluster) {
        fprintf(stderr, "shmlease stress: starting a throwaway etcd cluster of %u member%s\n",
                c.etcd_cluster, c.etcd_cluster > 1 ? "s" : "");
        if (etcd_cluster_start(&cluster, (int)c.etcd_cluster, 0) != 0) {
            cli_err("stress", "cannot start etcd: %s", cluster.err);
            return EXIT_TABLE;
        }
        c.cluster = &cluster;
    }
#endif
    char namebuf[ST_URL_MAX];
    char tsdir[64] = "", tspath[96];
    if (c.remove_rate > 0 && !c.token_state) {
        if (c.table) {
            cli_err("stress", "--remove-rate on table '%s' needs its --token-state", c.table);
            return EXIT_USAGE;
        }
        snprintf(tsdir, sizeof tsdir, "/tmp/shlstress-tokens-XXXXXX");
        if (!mkdtemp(tsdir)) {
            cli_err("stress", "cannot make a directory for the token state file");
            return EXIT_TABLE;
        }
        snprintf(tspath, sizeof tspath, "%s/tokens", tsdir);
        c.token_state = tspath;
        fprintf(stderr,
                "shmlease stress: --remove-rate: the tables use the token state file %s "
                "(made for this campaign, removed afterwards)\n",
                tspath);
    }
    shl_table *t;
    int rc = open_table(&c, namebuf, sizeof namebuf, &t);
    if (rc == 0) {
        rc = campaign(&c, &t);
        shl_close(t);
        if (c.own_table)
            shl_unlink(c.table);
    }
    if (tsdir[0])
        remove_dir(tsdir);
#if SHL_HAVE_ETCD
    if (c.cluster)
        etcd_cluster_stop(&cluster);
#endif
    return rc;
}
