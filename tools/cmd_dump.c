/*
 * tools/cmd_dump.c - shmlease dump: everything about a table, as text or JSON.
 *
 * The JSON shape (documented in the man page):
 *   { "table": { "name", "capacity", "value_size", "used", "mode", "clock",
 *                "reclaim_orphans", "reclaim_delay_ms", "size", "allocated",
 *                "creator_pid", "token_floor", "max_shared", "shared_taken", "max_waiters",
 *                "waiters_taken", "spare_values", "spare_values_taken", "history",
 *                "shared_taken_back", "waiters_taken_back",
 *                "spare_values_taken_back", "now_ns" },
 *     "leases": [ { "name", "slot", "state", "owner", "pid", "token",
 *                   "expiry_ns", "since_ns", "remaining_ns", "waiters",
 *                   "stable", "lock": { "state", "pid" },
 *                   "intent": { "armed", "op", "token" },
 *                   "heartbeat_ns", "dead_seen_ns",
 *                   "counters": { "acquire": N, ... },
 *                   "events_total", "history_partial",
 *                   "history": [ { "time_ns", "op", "token", "pid", "owner", "why",
 *                                  "revision" } ],
 *                   "value": { "len", "token", "preview_hex" },
 *                   "token_last", "shared": [ { "owner", "pid", "token", "expiry_ns",
 *                                  "since_ns", "remaining_ns", "state" } ] } ] }
 *
 * Both kinds of table print the same keys. What an etcd table does not keep
 * is null there, never a made-up 0 (the text leaves it out): in "table",
 * "capacity", "mode", "reclaim_orphans", "reclaim_delay_ms", "size",
 * "allocated", "creator_pid", "token_floor" and the pools' and history's sizes (no slots,
 * mode, policy, segment, creator, token floor or pools); in a lease, what its records lack. A
 * holder record is "<token> <owner>", so no "pid" or "since_ns" (of the lease, of each shared
 * holder; no "pid" or "time_ns" of a history event either, which has its "revision" instead); there
 * is no slot, so no "slot"; no lock, intent, heartbeat, death time or counter ("lock", "intent",
 * "heartbeat_ns", "dead_seen_ns", "counters"); and no snapshot of a segment taken under its lock
 * ("stable"). What etcd keeps is printed: state, owner, token, times left, waiters, history, value,
 * "token_last" and the shared holders.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dump_json.h"

const char *const dump_lock_names[] = {"free", "held", "dead", "broken"};

struct dump {
    FILE *f;
    int json;
    int n;
};

static void hex(FILE *f, const unsigned char *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%02x", p[i]);
}

/* Table clock time t as people read it next to now: "5.000s ago",
 * "in 40.000s", "now"; "never" for 0 (nothing recorded). */
static const char *rel(uint64_t now, uint64_t t, char *buf, unsigned cap)
{
    char d[32];
    if (t == 0)
        snprintf(buf, cap, "never");
    else if (t == now)
        snprintf(buf, cap, "now");
    else if (t < now)
        snprintf(buf, cap, "%s ago", cli_fmt_ns(now - t, d, sizeof d));
    else
        snprintf(buf, cap, "in %s", cli_fmt_ns(t - now, d, sizeof d));
    return buf;
}

/* Whether the value's bytes read as text: printable ASCII, tabs and line
 * ends (then shown quoted, with those escaped). */
static int text_value(const unsigned char *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if ((p[i] < ' ' || p[i] > '~') && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return 0;
    return 1;
}

static void quoted(FILE *f, const unsigned char *p, uint32_t n)
{
    fputc('"', f);
    for (uint32_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\')
            fprintf(f, "\\%c", p[i]);
        else if (p[i] == '\t' || p[i] == '\n' || p[i] == '\r')
            fprintf(f, "\\%c", p[i] == '\t' ? 't' : p[i] == '\n' ? 'n' : 'r');
        else
            fputc(p[i], f);
    }
    fputc('"', f);
}

/* A number the table may not keep: null on an etcd table, else the
 * number. */
static void json_u64(FILE *f, int etcd, uint64_t v)
{
    if (etcd)
        fputs("null", f);
    else
        fprintf(f, "%llu", (unsigned long long)v);
}

/* A pid: null on an etcd table, whose records keep none. */
static void json_pid(FILE *f, int etcd, int32_t pid)
{
    if (etcd)
        fputs("null", f);
    else
        fprintf(f, "%d", (int)pid);
}

/* What only a segment has: the lock, the intent, heartbeat and death
 * time, and the counters. */
static void segment_text(FILE *f, const shl_lease_detail *d)
{
    char b[32], note[96];
    fprintf(f, "  lock      %s%s%s%s\n", dump_lock_names[d->lock & 3],
            d->lock_pid ? " by pid " : "",
            d->lock_pid ? (snprintf(b, sizeof b, "%d", (int)d->lock_pid), b) : "",
            d->stable ? "" : " (snapshot taken mid-change)");
    if (cli_lock_note(d, note, sizeof note)[0])
        fprintf(f, "  note      %s\n", note);
    fprintf(f, "  intent    %s", d->intent_armed ? "armed" : "none");
    if (d->intent_armed)
        fprintf(f, ": %s token %llu", shl_op_name(d->intent_op),
                (unsigned long long)d->intent_token);
    char hb[48], ds[48];
    fprintf(f, "\n  waiters   %u, heartbeat %s, death seen %s\n", d->info.waiters,
            rel(d->info.now_ns, d->heartbeat_ns, hb, sizeof hb),
            rel(d->info.now_ns, d->dead_seen_ns, ds, sizeof ds));
    fputs("  counters ", f);
    for (int c = 0; c < SHL_COUNTER_COUNT; c++)
        fprintf(f, " %s=%llu", shl_counter_name(c), (unsigned long long)d->counters[c]);
    fputc('\n', f);
}

/* On an etcd table (etcd) there is no slot, pid, acquisition time, lock,
 * intent, heartbeat, death time or counter: none is printed. */
static void lease_text(FILE *f, int etcd, const shl_lease_detail *d)
{
    const shl_lease_info *in = &d->info;
    char a[32], pid[32] = "", since[80] = "", r1[48], r2[48];
    const uint64_t now = in->now_ns;
    if (etcd) {
        fprintf(f, "lease %s: %s\n", cli_vis(d->name), shl_state_name(in->state));
    } else {
        fprintf(f, "lease %s (slot %u): %s\n", cli_vis(d->name), d->slot,
                shl_state_name(in->state));
        snprintf(pid, sizeof pid, ", pid %d", (int)in->pid);
    }
    /* Only a holder is the holder: otherwise who held it last. */
    int held = in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED;
    fprintf(f, "  %s owner %s%s, token %llu\n", held ? "holder   " : "last held",
            in->owner[0] ? cli_vis(in->owner) : "-", pid, (unsigned long long)in->token);
    if (!etcd)
        snprintf(since, sizeof since, "since %llu (%s), ", (unsigned long long)in->since_ns,
                 rel(now, in->since_ns, r1, sizeof r1));
    fprintf(f, "  time      %sexpiry %llu (%s), remaining %s\n", since,
            (unsigned long long)in->expiry_ns, rel(now, in->expiry_ns, r2, sizeof r2),
            cli_fmt_ns(in->remaining_ns, a, sizeof a));
    if (d->nshared)
        fprintf(f, "  shared    %u valid of %u, last token %llu\n", in->shared, d->nshared,
                (unsigned long long)d->token_last);
    for (uint32_t i = 0; i < d->nshared; i++) {
        const shl_shared_holder *h = &d->shared[i];
        if (!etcd) {
            snprintf(pid, sizeof pid, ", pid %d", (int)h->pid);
            snprintf(since, sizeof since, ", since %llu", (unsigned long long)h->since_ns);
        }
        fprintf(f, "    %-8s owner %s%s, token %llu%s, expiry %llu, remaining %s\n",
                shl_state_name(h->state), cli_vis(h->owner), pid, (unsigned long long)h->token,
                since, (unsigned long long)h->expiry_ns, cli_fmt_ns(h->remaining_ns, a, sizeof a));
    }
    if (etcd)
        fprintf(f, "  waiters   %u\n", in->waiters);
    else
        segment_text(f, d);
    fprintf(f, "  history   %u of %llu events%s\n", d->nevents, (unsigned long long)d->events_total,
            d->history_partial ? " (partial: older revisions compacted or out of reach)" : "");
    for (uint32_t i = 0; i < d->nevents; i++) {
        const shl_event_info *e = &d->events[i];
        if (e->revision) /* etcd: no time, the revision */
            fprintf(f, "    rev %16lld  %-8s token %-6llu %s\n", (long long)e->revision,
                    shl_op_name(e->op), (unsigned long long)e->token, cli_vis(e->owner));
        else
            fprintf(f, "    %20llu %-16s %-8s token %-6llu pid %-8d %s%s%s\n",
                    (unsigned long long)e->time_ns, rel(now, e->time_ns, r1, sizeof r1),
                    shl_op_name(e->op), (unsigned long long)e->token, (int)e->pid,
                    cli_vis(e->owner), e->op == SHL_OP_REJECT ? " why " : "",
                    e->op == SHL_OP_REJECT ? shl_counter_name(e->why) : "");
    }
    fprintf(f, "  value     %u bytes by token %llu: ", in->value_len,
            (unsigned long long)in->value_token);
    if (d->preview_len && text_value(d->preview, d->preview_len))
        quoted(f, d->preview, d->preview_len);
    else
        hex(f, d->preview, d->preview_len);
    fputs(in->value_len > d->preview_len ? "...\n" : "\n", f);
}

static void table_part(FILE *f, shl_table *t, const char *name, int json)
{
    shl_table_info ti;
    uint64_t now = 0;
    shl_table_info_get(t, &ti);
    shl_now(t, &now);
    const char *clock = ti.clock == SHL_CLOCK_MANUAL ? "manual" : "monotonic";
    int reclaim = (ti.policy & SHL_POLICY_RECLAIM_ORPHANS) != 0;
    char size[32], allocated[32], delay[32];
    if (json) { /* an etcd table has no slots, mode, policy, segment, creator or floor */
        int etcd = cli_etcd_name(name);
        fputs("{\"table\": {\"name\": ", f);
        cli_json_str(f, name);
        fputs(", \"capacity\": ", f);
        json_u64(f, etcd, ti.capacity);
        fprintf(f, ", \"value_size\": %u, \"used\": %u, \"mode\": ", ti.value_size, ti.used);
        if (etcd)
            fputs("null", f);
        else
            fprintf(f, "\"%04o\"", (unsigned)ti.mode);
        fprintf(f, ", \"clock\": \"%s\",\n  \"reclaim_orphans\": %s, \"reclaim_delay_ms\": ", clock,
                etcd      ? "null"
                : reclaim ? "true"
                          : "false");
        json_u64(f, etcd, ti.reclaim_delay_ms);
        fputs(", \"size\": ", f);
        json_u64(f, etcd, ti.size);
        fputs(", \"allocated\": ", f);
        json_u64(f, etcd, ti.allocated);
        fputs(", \"creator_pid\": ", f);
        json_pid(f, etcd, ti.creator_pid);
        fputs(", \"token_floor\": ", f);
        json_u64(f, etcd, ti.token_floor);
        const struct {
            const char *key;
            uint64_t v;
        } pools[] = {{"max_shared", ti.max_shared},
                     {"shared_taken", ti.shared_taken},
                     {"max_waiters", ti.max_waiters},
                     {"waiters_taken", ti.waiters_taken},
                     {"spare_values", ti.spare_values},
                     {"spare_values_taken", ti.spare_values_taken},
                     {"history", ti.history},
                     {"shared_taken_back", ti.shared_taken_back},
                     {"waiters_taken_back", ti.waiters_taken_back},
                     {"spare_values_taken_back", ti.spare_values_taken_back}};
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
            fprintf(f, "%s\"%s\": ", i ? ", " : ",\n  ", pools[i].key);
            json_u64(f, etcd, pools[i].v);
        }
        fprintf(f, ", \"now_ns\": %llu},\n \"leases\": [\n", (unsigned long long)now);
        return;
    }
    if (cli_etcd_name(name)) {
        /* No slots, mode, segment, policy or creator: where the table lives,
         * as shmlease create says it. */
        fprintf(f, "table %s\n  ", name);
        cli_etcd_where(f, name);
        fprintf(f, ", value size %u, used %u, etcd's lease clock\n", ti.value_size, ti.used);
    } else {
        fprintf(f,
                "table %s\n  capacity %u, value size %u, used %u, mode %04o, %s clock, %llu "
                "bytes (%s)\n  memory    %llu bytes (%s) taken now: a slot is taken when its name "
                "is added\n  policy    reclaim orphans %s%s\n  creator   pid %d\n",
                name, ti.capacity, ti.value_size, ti.used, (unsigned)ti.mode, clock,
                (unsigned long long)ti.size, cli_fmt_bytes(ti.size, size, sizeof size),
                (unsigned long long)ti.allocated,
                cli_fmt_bytes(ti.allocated, allocated, sizeof allocated),
                reclaim ? "on, reclaim delay " : "off",
                reclaim ? cli_fmt_ns((uint64_t)ti.reclaim_delay_ms * 1000000, delay, sizeof delay)
                        : "",
                (int)ti.creator_pid);
        fprintf(f,
                "  pools     %u reader records (%u in groups taken), %u waiter entries (%u), "
                "%u spare value buffers (%u taken); %u history events a lease\n",
                ti.max_shared, ti.shared_taken, ti.max_waiters, ti.waiters_taken, ti.spare_values,
                ti.spare_values_taken, ti.history);
        fprintf(f,
                "            taken back from leases that kept them: %llu reader groups, %llu "
                "waiter groups, %llu spare value buffers\n",
                (unsigned long long)ti.shared_taken_back, (unsigned long long)ti.waiters_taken_back,
                (unsigned long long)ti.spare_values_taken_back);
    }
    if (ti.token_floor)
        fprintf(f, "  tokens    above the floor %llu (epoch %llu)\n",
                (unsigned long long)ti.token_floor,
                (unsigned long long)(ti.token_floor >> SHL_TOKEN_EPOCH_BITS));
    else
        fprintf(f, "  tokens    no floor (from 1)\n");
    fprintf(f, "  now       %llu%s\n\n", (unsigned long long)now,
            cli_etcd_name(name) ? " (this host's monotonic clock, as the lease times)" : "");
}

struct each {
    FILE *f;
    int etcd, json, n;
    struct dump_out *out; /* the JSON's, over f */
};

static int each_lease(void *arg, const shl_lease_detail *d)
{
    struct each *e = arg;
    if (e->json) {
        if (e->n)
            dump_put(e->out, ",\n", 2);
        dump_json_lease(e->out, e->etcd, d);
    } else {
        lease_text(e->f, e->etcd, d);
    }
    e->n++;
    return 0;
}

static void dump_usage(FILE *f)
{
    fputs("usage: shmlease dump NAME [LEASE] [--json]\n"
          "Prints everything about the table (or one lease): header fields and token\n"
          "floor, and for each lease its state, holder, lock, intent, counters, history\n"
          "(oldest first) and a value preview. --json prints one JSON object (shape in\n"
          "shmlease(1)). Never waits on a lock. Put \"--\" before a LEASE that starts\n"
          "with '-'. A table removed meanwhile (its name gone, or naming another file)\n"
          "is said so after the dump, exit 3.\n",
          f);
}

int cmd_dump(int argc, char **argv)
{
    int json = 0;
    const struct cli_opt opts[] = {{"--json", NULL, CLI_FLAG, &json}, {NULL, NULL, 0, NULL}};
    static const char *const names[] = {"NAME", "LEASE", NULL};
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, dump_usage, opts, names, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *name = ops.v[0], *lease = ops.v[1];
    if (lease && cli_lease_name("dump", lease))
        return EXIT_USAGE;
    shl_table *t;
    if ((rc = cli_open("dump", name, &t)) != 0)
        return rc;
    struct dump_out out = {stdout, 0, {0}};
    struct each e = {stdout, cli_etcd_name(name), json, 0, &out};
    if (lease) {
        shl_lease_detail d;
        rc = shl_inspect(t, lease, &d);
        if (rc != SHL_OK) {
            cli_err("dump", "lease '%s': %s", cli_vis(lease), cli_strerror(rc));
            shl_close(t);
            return cli_exit_of(rc);
        }
        table_part(stdout, t, name, json);
        each_lease(&e, &d);
    } else {
        table_part(stdout, t, name, json);
        shl_foreach(t, each_lease, &e);
    }
    dump_flush(&out);
    if (json)
        fputs("\n]}\n", stdout);
    rc = cli_removed("dump", name, t);
    shl_close(t);
    return rc;
}
