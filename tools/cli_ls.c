/*
 * tools/cli_ls.c - one line per lease (shmlease ls and watch), or the same
 * as JSON (ls --json).
 *
 * Columns are as wide as their widest entry, measured in a first pass, so
 * that a long lease name or owner moves the columns after it rather than
 * breaking them. Only a holder is shown as the owner: a lease that is free,
 * expired or revoked shows who held it last as "(last: OWNER)", and no pid.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct widths {
    int name, owner;
};

/* Whether the lease has a holder now (a dead one included). */
static int held(const shl_lease_info *in)
{
    return in->shared || in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED;
}

static const char *owner_shown(const shl_lease_info *in, char *buf, size_t cap)
{
    if (!in->owner[0])
        return "-";
    if (held(in))
        return cli_vis(in->owner);
    snprintf(buf, cap, "(last: %s)", cli_vis(in->owner));
    return buf;
}

static int width(const char *s, int w)
{
    int n = (int)strlen(s);
    return n > w ? n : w;
}

static int measure(void *arg, const shl_lease_detail *d)
{
    struct widths *w = arg;
    char buf[SHL_OWNER_MAX * 4 + 16];
    w->name = width(cli_vis(d->name), w->name);
    w->owner = width(owner_shown(&d->info, buf, sizeof buf), w->owner);
    for (uint32_t i = 0; i < d->nshared; i++)
        w->owner = width(cli_vis(d->shared[i].owner), w->owner);
    return 0;
}

struct lines {
    FILE *f;
    struct widths w;
};

static void line_notes(FILE *f, const shl_lease_detail *d)
{
    char note[96];
    if (cli_lock_note(d, note, sizeof note)[0])
        fprintf(f, "  %s", note);
    if (d->renewer_stalled) {
        char age[32];
        uint64_t now = d->info.now_ns, beat = d->heartbeat_ns;
        fprintf(f, "  renewer stalled: last beat %s ago",
                cli_fmt_ns(now > beat ? now - beat : 0, age, sizeof age));
    }
}

static int ls_line(void *arg, const shl_lease_detail *d)
{
    struct lines *l = arg;
    FILE *f = l->f;
    const shl_lease_info *in = &d->info;
    char rem[32] = "-", pid[16] = "-", owner[SHL_OWNER_MAX * 4 + 16];
    if (in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED)
        cli_fmt_ns(in->remaining_ns, rem, sizeof rem);
    if (in->pid && held(in))
        snprintf(pid, sizeof pid, "%d", (int)in->pid);
    /* Held shared: the lease's state is theirs; each one follows on its own line. */
    const char *state = in->shared ? "SHARED" : shl_state_name(in->state);
    fprintf(f, "%-*s %-8s %-*s %8s %8llu %10s %7u", l->w.name, cli_vis(d->name), state, l->w.owner,
            owner_shown(in, owner, sizeof owner), pid, (unsigned long long)in->token, rem,
            in->waiters);
    line_notes(f, d);
    fputc('\n', f);
    for (uint32_t i = 0; i < d->nshared; i++) {
        const shl_shared_holder *h = &d->shared[i];
        char hr[32] = "-";
        if (h->state == SHL_STATE_HELD || h->state == SHL_STATE_ORPHANED)
            cli_fmt_ns(h->remaining_ns, hr, sizeof hr);
        fprintf(f, "  %-*s %-8s %-*s %8d %8llu %10s\n", l->w.name - 2, "(shared)",
                shl_state_name(h->state), l->w.owner, cli_vis(h->owner), (int)h->pid,
                (unsigned long long)h->token, hr);
    }
    return 0;
}

int cli_ls_table(shl_table *t, FILE *f)
{
    struct lines l = {f, {(int)strlen("LEASE"), (int)strlen("OWNER")}};
    if (l.w.name < 10)
        l.w.name = 10; /* room for "  (shared)" */
    int rc = shl_foreach(t, measure, &l.w);
    if (rc != SHL_OK)
        return rc;
    fprintf(f, "%-*s %-8s %-*s %8s %8s %10s %7s\n", l.w.name, "LEASE", "STATE", l.w.owner, "OWNER",
            "PID", "TOKEN", "REMAINING", "WAITERS");
    return shl_foreach(t, ls_line, &l);
}

/* ---------------------------------------------------------------- JSON */

struct json {
    FILE *f;
    int etcd, n;
};

static void json_pid(FILE *f, int etcd, int32_t pid)
{
    if (etcd || !pid)
        fputs("null", f);
    else
        fprintf(f, "%d", (int)pid);
}

static int json_line(void *arg, const shl_lease_detail *d)
{
    struct json *j = arg;
    FILE *f = j->f;
    const shl_lease_info *in = &d->info;
    int h = held(in);
    fputs(j->n++ ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
    cli_json_str(f, d->name);
    fprintf(f,
            ", \"state\": \"%s\", \"owner\": ", in->shared ? "SHARED" : shl_state_name(in->state));
    if (h && in->owner[0])
        cli_json_str(f, in->owner);
    else
        fputs("null", f);
    fputs(", \"last_owner\": ", f);
    if (!h && in->owner[0])
        cli_json_str(f, in->owner);
    else
        fputs("null", f);
    fputs(", \"pid\": ", f);
    json_pid(f, j->etcd, h ? in->pid : 0);
    fprintf(f, ", \"token\": %llu, \"remaining_ns\": %llu, \"waiters\": %u, \"shared\": [",
            (unsigned long long)in->token, (unsigned long long)in->remaining_ns, in->waiters);
    for (uint32_t i = 0; i < d->nshared; i++) {
        const shl_shared_holder *s = &d->shared[i];
        fputs(i ? ", {\"owner\": " : "{\"owner\": ", f);
        cli_json_str(f, s->owner);
        fputs(", \"pid\": ", f);
        json_pid(f, j->etcd, s->pid);
        fprintf(f, ", \"token\": %llu, \"state\": \"%s\", \"remaining_ns\": %llu}",
                (unsigned long long)s->token, shl_state_name(s->state),
                (unsigned long long)s->remaining_ns);
    }
    fputs("]}", f);
    return 0;
}

int cli_ls_json(shl_table *t, const char *name, FILE *f)
{
    struct json j = {f, cli_etcd_name(name), 0};
    fputs("{\"table\": ", f);
    cli_json_str(f, name);
    fputs(", \"leases\": [", f);
    int rc = shl_foreach(t, json_line, &j);
    fputs(j.n ? "\n]}\n" : "]}\n", f);
    return rc;
}
