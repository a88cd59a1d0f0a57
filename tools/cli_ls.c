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
#include <stdlib.h>
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
    const char *v = cli_vis(in->owner);
    size_t n = strlen(v);
    if (n + 9 > cap)
        n = cap - 9;
    memcpy(buf, "(last: ", 7);
    memcpy(buf + 7, v, n);
    memcpy(buf + 7 + n, ")", 2);
    return buf;
}

static int width(const char *s, int w)
{
    int n = (int)strlen(s);
    return n > w ? n : w;
}

/* The listing is read in one pass over the table (a snapshot of a slot is
 * what costs, not the printing) and kept as text until the widths are
 * known: per line four strings, the first column, the state, the owner and
 * the rest of the line. A line with its columns is a few tens of bytes, so a
 * table of a million leases is listed from some tens of MB. */
struct lines {
    char *p;
    size_t len, cap;
    size_t n; /* lines */
    int nomem;
    struct widths w;
};

static void put(struct lines *l, const char *s)
{
    size_t n = strlen(s) + 1;
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1 << 16;
        while (cap < l->len + n)
            cap *= 2;
        char *p = realloc(l->p, cap);
        if (!p) {
            l->nomem = 1;
            return;
        }
        l->p = p;
        l->cap = cap;
    }
    memcpy(l->p + l->len, s, n);
    l->len += n;
}

static void add_line(struct lines *l, const char *col, const char *state, const char *owner,
                     const char *rest)
{
    l->w.name = width(col, l->w.name);
    l->w.owner = width(owner, l->w.owner);
    put(l, col);
    put(l, state);
    put(l, owner);
    put(l, rest);
    l->n++;
}

static int line_notes(char *buf, size_t cap, const shl_lease_detail *d)
{
    char note[96];
    int n = 0;
    if (cli_lock_note(d, note, sizeof note)[0])
        n += snprintf(buf + n, cap - (size_t)n, "  %s", note);
    if (d->renewer_stalled) {
        char age[32];
        uint64_t now = d->info.now_ns, beat = d->heartbeat_ns;
        n += snprintf(buf + n, cap - (size_t)n, "  renewer stalled: last beat %s ago",
                      cli_fmt_ns(now > beat ? now - beat : 0, age, sizeof age));
    }
    return n;
}

/* v in decimal, in buf (24 bytes). */
static const char *digits(uint64_t v, char *buf)
{
    char *p = buf + 23;
    *p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    return p;
}

/* Writes a space and s right-justified in w columns at p (NUL after);
 * returns the NUL's place. */
static char *right(char *p, const char *s, int w)
{
    int n = (int)strlen(s);
    *p++ = ' ';
    for (; w > n; w--)
        *p++ = ' ';
    memcpy(p, s, (size_t)n + 1);
    return p + n;
}

static int ls_line(void *arg, const shl_lease_detail *d)
{
    struct lines *l = arg;
    const shl_lease_info *in = &d->info;
    char rem[32] = "-", pid[16] = "-", owner[SHL_OWNER_MAX * 4 + 16], rest[256];
    if (in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED)
        cli_fmt_ns(in->remaining_ns, rem, sizeof rem);
    if (in->pid && held(in))
        snprintf(pid, sizeof pid, "%d", (int)in->pid);
    /* Held shared: the lease's state is theirs; each one follows on its own line. */
    const char *state = in->shared ? "SHARED" : shl_state_name(in->state);
    /* " %8s %8llu %10s %7u" of pid, token, rem, waiters: a million times. */
    char tok[24], wait[24], *p = rest;
    p = right(p, pid, 8);
    p = right(p, digits(in->token, tok), 8);
    p = right(p, rem, 10);
    p = right(p, digits(in->waiters, wait), 7);
    line_notes(p, sizeof rest - (size_t)(p - rest), d);
    add_line(l, cli_vis(d->name), state, owner_shown(in, owner, sizeof owner), rest);
    for (uint32_t i = 0; i < d->nshared; i++) {
        const shl_shared_holder *h = &d->shared[i];
        char hr[32] = "-";
        if (h->state == SHL_STATE_HELD || h->state == SHL_STATE_ORPHANED)
            cli_fmt_ns(h->remaining_ns, hr, sizeof hr);
        snprintf(rest, sizeof rest, " %8d %8llu %10s", (int)h->pid, (unsigned long long)h->token,
                 hr);
        add_line(l, "  (shared)", shl_state_name(h->state), cli_vis(h->owner), rest);
    }
    return l->nomem ? SHL_ENOMEM : 0;
}

/* Writes the string at p left-justified in w columns (w - 1 and a space:
 * pass the width + 1 for a column followed by one); returns the string
 * after it. */
static const char *put_col(FILE *f, const char *p, int w)
{
    static const char spaces[] = "                                                                ";
    int n = (int)strlen(p);
    fwrite(p, 1, (size_t)n, f);
    for (int pad = w - n; pad > 0; pad -= (int)sizeof spaces - 1)
        fwrite(spaces, 1, pad < (int)sizeof spaces - 1 ? (size_t)pad : sizeof spaces - 1, f);
    return p + n + 1;
}

int cli_ls_table(shl_table *t, FILE *f)
{
    struct lines l = {NULL, 0, 0, 0, 0, {(int)strlen("LEASE"), (int)strlen("OWNER")}};
    if (l.w.name < 10)
        l.w.name = 10; /* room for "  (shared)" */
    int rc = shl_foreach(t, ls_line, &l);
    if (rc == SHL_OK) {
        fprintf(f, "%-*s %-8s %-*s %8s %8s %10s %7s\n", l.w.name, "LEASE", "STATE", l.w.owner,
                "OWNER", "PID", "TOKEN", "REMAINING", "WAITERS");
        /* "%-*s %-8s %-*s%s\n" of the four strings, without printf's cost
         * per line. */
        const char *p = l.p;
        for (size_t i = 0; i < l.n; i++) {
            p = put_col(f, p, l.w.name + 1);
            p = put_col(f, p, 8 + 1);
            p = put_col(f, p, l.w.owner);
            size_t n = strlen(p);
            fwrite(p, 1, n, f);
            fputc('\n', f);
            p += n + 1;
        }
    }
    if (rc == SHL_ENOMEM)
        cli_err("ls", "out of memory for the listing (%zu lines kept)", l.n);
    free(l.p);
    return rc;
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
