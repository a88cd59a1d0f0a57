/*
 * tests/test_etcd_tool.c - the shmlease tool on etcd tables: create, run
 * (across two "hosts": two processes through two members), ls, dump --json,
 * check, revoke, watch and rm, against a throwaway cluster.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;
static char url[256];

static void up(int members)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, members, 0), 0, "%s", CL.err);
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
}

/* Runs the tool; its exit status, and stdout+stderr in *out (freed by the
 * caller) when out != NULL. */
static int tool(char **out, const char *args)
{
    char *o = NULL;
    int st = t_tool_run(&o, "%s 2>&1", args);
    if (out)
        *out = o;
    else
        free(o);
    return st;
}

Test(etcd_tool, create_run_ls_dump_check_revoke_rm)
{
    up(1);
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "create '%s' --value-size 64", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    /* What applies to an etcd table: where it lives and its value size; no
     * slots, mode, segment size or clock of a segment. */
    char said[512];
    snprintf(said, sizeof said,
             "created table %s: etcd endpoints %s, key prefix \"jobs/\", value size 64, "
             "etcd's lease clock\n",
             url, CL.endpoints);
    cr_assert_str_eq(out, said);
    free(out);
    for (int i = 1; i <= 2; i++) {
        snprintf(cmd, sizeof cmd, "run '%s' nightly -- sh -c 'echo token=$SHMLEASE_TOKEN'", url);
        cr_assert_eq(tool(&out, cmd), 0, "%s", out);
        char want[32];
        snprintf(want, sizeof want, "token=%d", i);
        cr_assert(strstr(out, want), "run %d said: %s", i, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "ls '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "nightly") && strstr(out, "FREE"), "%s", out);
    free(out);
    /* dump's header says the same of the table as create, and nothing of a
     * segment (capacity, mode, bytes, policy, creator). */
    snprintf(cmd, sizeof cmd, "dump '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    snprintf(said, sizeof said,
             "table %s\n  etcd endpoints %s, key prefix \"jobs/\", value size 64, used 1, "
             "etcd's lease clock\n  tokens    no floor (from 1)\n  now       ",
             url, CL.endpoints);
    cr_assert(strncmp(out, said, strlen(said)) == 0, "header:\n%s\nwanted:\n%s", out, said);
    char *rest;
    cr_assert_gt(strtoull(out + strlen(said), &rest, 10), 0, "%s", out);
    const char *now_note = " (this host's monotonic clock, as the lease times)\n\nlease nightly";
    cr_assert(strncmp(rest, now_note, strlen(now_note)) == 0, "%s", out);
    /* The lease: no slot, pid, lock, intent, heartbeat or counters (there
     * are none on etcd); its holder, waiters and history. */
    const char *lease_head = "lease nightly: FREE\n  last held owner ";
    cr_assert(strstr(out, lease_head), "%s", out);
    cr_assert(strstr(out, "\n  waiters   0\n  history   "), "%s", out);
    static const char *const none[] = {"(slot",     "pid",        "  lock ",    "  intent ",
                                       "heartbeat", "death seen", "  counters "};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        cr_assert_null(strstr(out, none[i]), "dump on etcd prints \"%s\":\n%s", none[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "dump --json '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    cr_assert(strstr(out, "\"name\": \"nightly\"") && strstr(out, "\"token\": 2"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "check '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);

    shl_table *t;
    uint64_t a;
    cr_assert_eq(shl_open(url, NULL, &t), SHL_OK);
    cr_assert_eq(shl_acquire(t, "held", "me", 30 * SEC, &a), SHL_OK);
    snprintf(cmd, sizeof cmd, "revoke '%s' held", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);
    cr_assert_eq(shl_write(t, "held", "me", a, "x", 1), SHL_ELOST, "revoked by the tool");
    cr_assert_neq(tool(NULL, cmd), 0, "nothing left to revoke");

    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    etc_client *e;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    cr_assert_eq(etc_put(e, "jobs/h/held", 11, "garbage", 7, 0, NULL), ETC_OK);
    snprintf(cmd, sizeof cmd, "check '%s'", url);
    cr_assert_eq(tool(&out, cmd), 1, "%s", out);
    cr_assert(strstr(out, "lease held: holder record"), "%s", out);
    free(out);
    etc_close(e);
    shl_close(t);

    snprintf(cmd, sizeof cmd, "rm '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "ls '%s'", url);
    cr_assert_eq(tool(&out, cmd), 3, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "watch '%s' --count 1", url);
    cr_assert_eq(tool(&out, cmd), 3, "%s", out);
    free(out);
    etcd_cluster_stop(&CL);
}

/* The shape that dump --json reads the two dumps with: for each kind, the
 * keys of a lease, a shared holder and a history event, which of them are
 * null, and the types of those that only a segment keeps. */
static const char *const shape_py =
    "import json, sys\n"
    "e, s = (json.load(open(f)) for f in sys.argv[1:3])\n"
    "def lease(d, n): return next(l for l in d['leases'] if l['name'] == n)\n"
    "def nulls(o): return ' '.join(sorted(k for k, v in o.items() if v is None)) or '-'\n"
    "def types(o, ks): return ' '.join('%s=%s' % (k, type(o[k]).__name__) for k in ks)\n"
    "seg = ['slot', 'pid', 'since_ns', 'stable', 'lock', 'intent', 'heartbeat_ns',\n"
    "       'dead_seen_ns', 'counters']\n"
    "for kind, d in (('etcd', e), ('shm', s)):\n"
    "    x, r = lease(d, 'excl'), lease(d, 'rd')\n"
    "    h, ev = r['shared'][0], x['history'][0]\n"
    "    print(kind, 'lease', sorted(x) == sorted(lease(e, 'excl')) == sorted(r), nulls(x))\n"
    "    print(kind, 'shared', sorted(h) == sorted(lease(e, 'rd')['shared'][0]), nulls(h))\n"
    "    print(kind, 'event', sorted(ev) == sorted(lease(e, 'excl')['history'][0]), nulls(ev))\n"
    "    print(kind, types(x, seg), types(h, ['pid', 'since_ns']),\n"
    "          types(ev, ['time_ns', 'pid']))\n"
    "    print(kind, 'kept', x['state'], x['owner'], x['token'], x['waiters'], ev['op'],\n"
    "          h['owner'], h['token'], h['state'], x['token_last'])\n"
    "    tb = d['table']\n"
    "    print(kind, 'table', sorted(tb) == sorted(e['table']), nulls(tb), tb['value_size'],\n"
    "          tb['used'], tb['clock'], type(tb['now_ns']).__name__)\n";

/* dump --json prints the same keys on both kinds of table, and on etcd null
 * for each that etcd does not keep (no slot, pid, acquisition time, lock,
 * intent, heartbeat, death time, counter, snapshot under a lock, event time;
 * in the table part no capacity, mode, policy, size, creator, token floor,
 * pools, take-backs or history)
 * rather than a made-up 0; what etcd keeps keeps its value. */
Test(etcd_tool, dump_json_nulls_what_etcd_does_not_keep)
{
    up(1);
    shl_options o;
    shl_options_init(&o);
    shl_table *t, *m;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    char name[128], dir[64], cmd[2048], *out;
    m = t_create(t_name(name, sizeof name, "jsonshape"), 4, 16, SHL_CLOCK_MONOTONIC);
    shl_table *both[2] = {t, m};
    uint64_t w[2], r[2], g;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(shl_acquire(both[i], "excl", "writer-1", 60 * SEC, &w[i]), SHL_OK);
        cr_assert_eq(shl_acquire_shared(both[i], "rd", "reader-1", 60 * SEC, &r[i], &g), SHL_OK);
    }
    t_mkdtemp(dir, sizeof dir, "jsonshape");
    snprintf(cmd, sizeof cmd, "%s/shape.py", dir);
    FILE *f = fopen(cmd, "w");
    cr_assert(f);
    fputs(shape_py, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "'%s' dump --json '%s' > %s/etcd.json && '%s' dump --json '%s' > %s/shm.json && "
             "/usr/bin/python3 %s/shape.py %s/etcd.json %s/shm.json 2>&1",
             t_tool(), url, dir, t_tool(), name, dir, dir, dir, dir);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    char want[2048];
    snprintf(want, sizeof want,
             "etcd lease True counters dead_seen_ns heartbeat_ns intent lock pid since_ns slot "
             "stable\n"
             "etcd shared True pid since_ns\n"
             "etcd event True pid time_ns\n"
             "etcd slot=NoneType pid=NoneType since_ns=NoneType stable=NoneType lock=NoneType "
             "intent=NoneType heartbeat_ns=NoneType dead_seen_ns=NoneType counters=NoneType "
             "pid=NoneType since_ns=NoneType time_ns=NoneType pid=NoneType\n"
             "etcd kept HELD writer-1 %llu 0 acquire reader-1 %llu HELD %llu\n"
             "etcd table True allocated capacity creator_pid history max_shared max_waiters mode "
             "reclaim_delay_ms reclaim_orphans shared_taken shared_taken_back size spare_values "
             "spare_values_taken spare_values_taken_back token_floor waiters_taken "
             "waiters_taken_back 256 2 "
             "monotonic int\n"
             "shm lease True -\n"
             "shm shared True -\n"
             "shm event True -\n"
             "shm slot=int pid=int since_ns=int stable=bool lock=dict intent=dict "
             "heartbeat_ns=int dead_seen_ns=int counters=dict pid=int since_ns=int time_ns=int "
             "pid=int\n"
             "shm kept HELD writer-1 %llu 0 acquire reader-1 %llu HELD %llu\n"
             "shm table True - 16 2 monotonic int\n",
             (unsigned long long)w[0], (unsigned long long)r[0], (unsigned long long)w[0],
             (unsigned long long)w[1], (unsigned long long)r[1], (unsigned long long)w[1]);
    cr_assert_str_eq(out, want);
    free(out);
    t_rm_rf(dir);
    shl_close(m);
    shl_unlink(name);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

/* shmlease run across hosts: two runs through two members of a
 * three-member cluster take turns, with consecutive tokens. */
Test(etcd_tool, run_takes_turns_across_members)
{
    up(3);
    char u0[256], u1[256], dir[64], cmd[2048];
    snprintf(u0, sizeof u0, "etcd://%s/jobs", etcd_cluster_endpoint(&CL, 0));
    snprintf(u1, sizeof u1, "etcd://%s/jobs", etcd_cluster_endpoint(&CL, 1));
    t_mkdtemp(dir, sizeof dir, "etcdrun");
    const char *job = "sh -c 'echo start $SHMLEASE_TOKEN >> %s/log; sleep 1; "
                      "echo end $SHMLEASE_TOKEN >> %s/log'";
    char j[512];
    snprintf(j, sizeof j, job, dir, dir);
    snprintf(cmd, sizeof cmd,
             "'%s' create '%s' >/dev/null && "
             "('%s' run '%s' nightly --wait 20s -- %s & "
             "sleep 0.3; '%s' run '%s' nightly --wait 20s -- %s; wait) && cat %s/log",
             t_tool(), u0, t_tool(), u0, j, t_tool(), u1, j, dir);
    char *out = NULL;
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "start 1\nend 1\nstart 2\nend 2\n", "one at a time, tokens +1");
    free(out);
    t_rm_rf(dir);
    etcd_cluster_stop(&CL);
}

/* dump on an etcd table shows no acquisition time: etcd records none (a
 * holder record is "<token> <owner>"), so "since 0" would be made up. The
 * text leaves "since" out and JSON's since_ns is null, for the exclusive
 * holder and for each shared holder; owner and token are still shown. */
Test(etcd_tool, dump_shows_no_acquisition_time)
{
    up(1);
    shl_options o;
    shl_options_init(&o);
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    uint64_t w, r, g;
    cr_assert_eq(shl_acquire(t, "excl", "writer-1", 60 * SEC, &w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "rd", "reader-1", 60 * SEC, &r, &g), SHL_OK);
    char cmd[1024], want[128], *out;

    snprintf(cmd, sizeof cmd, "dump '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    cr_assert_null(strstr(out, "since"), "an acquisition time etcd does not have:\n%s", out);
    snprintf(want, sizeof want, "  holder    owner writer-1, token %llu\n  time      expiry ",
             (unsigned long long)w);
    cr_assert(strstr(out, want), "the holder, then its times:\n%s", out);
    snprintf(want, sizeof want, "    HELD     owner reader-1, token %llu, expiry ",
             (unsigned long long)r);
    cr_assert(strstr(out, want), "the shared holder:\n%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "dump --json '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    cr_assert_null(strstr(out, "\"since_ns\": 0"), "%s", out);
    snprintf(want, sizeof want,
             "\"owner\": \"writer-1\", \"pid\": null, \"token\": %llu, \"expiry_ns\": ",
             (unsigned long long)w);
    cr_assert(strstr(out, want), "the holder:\n%s", out);
    snprintf(want, sizeof want,
             "{\"owner\": \"reader-1\", \"pid\": null, \"token\": %llu, \"expiry_ns\": ",
             (unsigned long long)r);
    cr_assert(strstr(out, want), "the shared holder:\n%s", out);
    /* Every since_ns is null: one per lease (2) and one per shared holder (1). */
    int nulls = 0;
    for (const char *p = out; (p = strstr(p, "\"since_ns\": null")) != NULL; p++)
        nulls++;
    cr_assert_eq(nulls, 3, "%s", out);
    free(out);

    /* It is still JSON, and its since_ns is null everywhere. */
    snprintf(cmd, sizeof cmd,
             "'%s' dump --json '%s' | /usr/bin/python3 -c 'import json, sys\n"
             "d = json.load(sys.stdin)\n"
             "s = [l[\"since_ns\"] for l in d[\"leases\"]]\n"
             "s += [h[\"since_ns\"] for l in d[\"leases\"] for h in l[\"shared\"]]\n"
             "print(s)' 2>&1",
             t_tool(), url);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "[None, None, None]\n");
    free(out);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

/* No process runs "acquire URL ..." (the keeper is the forked acquire). The
 * pattern's "[a]" keeps the shell that runs pgrep from matching itself. */
static int no_keeper(void *arg)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "pgrep -f -- \"[a]cquire %s \" >/dev/null", (const char *)arg);
    return t_run(cmd, NULL) != 0;
}

/* The shell idiom on an etcd table: acquire prints the token and leaves a
 * keeper behind; renew, write, read and release take the token; a busy
 * lease names its holder; the release ends the keeper; the next acquire has
 * the next token. */
Test(etcd_tool, acquire_renew_write_read_release_across_commands)
{
    up(1);
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "create '%s'", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' acquire '%s' L --ttl 30s --owner script", t_tool(), url);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "1\n");
    free(out);
    cr_assert(!no_keeper(url), "no keeper left behind the acquire");
    snprintf(cmd, sizeof cmd, "acquire '%s' L -n -E 75 --owner other", url);
    int st = tool(&out, cmd);
    cr_assert_eq(st, 75, "exit %d: %s", st, out);
    cr_assert(strstr(out, "held by 'script'") && strstr(out, "token 1"), "%s", out);
    free(out);
    static const char *const ok[] = {"renew '%s' L --token 1 --ttl 30s --owner script",
                                     "write '%s' L --token 1 --owner script hello"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char fmt[256];
        snprintf(fmt, sizeof fmt, ok[i], url);
        cr_assert_eq(tool(&out, fmt), 0, "%s: %s", fmt, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "'%s' read '%s' L", t_tool(), url);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "hello");
    free(out);
    snprintf(cmd, sizeof cmd, "release '%s' L --token 1 --owner other", url);
    cr_assert_neq(tool(&out, cmd), 0, "another owner released the lease: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "release '%s' L --token 1 --owner script", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);
    cr_assert(t_until(no_keeper, url, 10 * SEC), "the keeper outlived the release");
    snprintf(cmd, sizeof cmd, "'%s' acquire '%s' L --ttl 30s --owner script", t_tool(), url);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "2\n");
    free(out);
    snprintf(cmd, sizeof cmd, "release '%s' L --token 2 --owner script", url);
    cr_assert_eq(tool(&out, cmd), 0, "%s", out);
    free(out);
    cr_assert(t_until(no_keeper, url, 10 * SEC), "the keeper outlived the release");
    etcd_cluster_stop(&CL);
}
