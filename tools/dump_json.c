/*
 * tools/dump_json.c - one lease of shmlease dump --json (the shape is in
 * cmd_dump.c), built in a buffer: numbers and constant text are copied,
 * not formatted through printf, and reach stdio in blocks.
 */
#include <string.h>

#include "dump_json.h"

void dump_flush(struct dump_out *o)
{
    if (o->n)
        fwrite(o->b, 1, o->n, o->f);
    o->n = 0;
}

void dump_put(struct dump_out *o, const char *s, size_t n)
{
    if (o->n + n > sizeof o->b) {
        dump_flush(o);
        if (n > sizeof o->b) {
            fwrite(s, 1, n, o->f);
            return;
        }
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

/* dump_put()'s common case, inline: most pieces are short and fit. */
static inline __attribute__((always_inline)) void put(struct dump_out *o, const char *s, size_t n)
{
    if (__builtin_expect(o->n + n <= sizeof o->b, 1)) {
        memcpy(o->b + o->n, s, n);
        o->n += n;
    } else {
        dump_put(o, s, n);
    }
}

/* Inline, so that a literal's length and copy are known when compiled. */
static inline __attribute__((always_inline)) void put_s(struct dump_out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void num(struct dump_out *o, uint64_t v)
{
    char b[20];
    int i = (int)sizeof b;
    do
        b[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    put(o, b + i, sizeof b - (size_t)i);
}

static void snum(struct dump_out *o, int64_t v)
{
    if (v < 0)
        put(o, "-", 1);
    num(o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

/* put_s(key); num(v): a key and its number. */
static inline __attribute__((always_inline)) void key_num(struct dump_out *o, const char *key,
                                                          uint64_t v)
{
    put_s(o, key);
    num(o, v);
}

/* A JSON string as cli_json_str() writes it: '"' and '\' escaped, bytes
 * outside printable ASCII as \u00XX. */
static void str(struct dump_out *o, const char *s)
{
    static const char digit[] = "0123456789abcdef";
    char b[2 * SHL_OWNER_MAX + 8 + 6];
    size_t n = 0;
    b[n++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (n + 8 > sizeof b) {
            put(o, b, n);
            n = 0;
        }
        if (c == '"' || c == '\\') {
            b[n++] = '\\';
            b[n++] = (char)c;
        } else if (c < ' ' || c > '~') {
            memcpy(b + n, "\\u00", 4);
            b[n + 4] = digit[c >> 4];
            b[n + 5] = digit[c & 15];
            n += 6;
        } else {
            b[n++] = (char)c;
        }
    }
    b[n++] = '"';
    put(o, b, n);
}

static void hex(struct dump_out *o, const unsigned char *p, uint32_t n)
{
    static const char digit[] = "0123456789abcdef";
    for (uint32_t i = 0; i < n; i++) {
        char b[2] = {digit[p[i] >> 4], digit[p[i] & 15]};
        put(o, b, 2);
    }
}

/* A number the table may not keep: null on an etcd table. */
static void u64_or_null(struct dump_out *o, int etcd, uint64_t v)
{
    if (etcd)
        put_s(o, "null");
    else
        num(o, v);
}

/* A pid: null on an etcd table, whose records keep none. */
static void pid_or_null(struct dump_out *o, int etcd, int32_t pid)
{
    if (etcd)
        put_s(o, "null");
    else
        snum(o, pid);
}

/* What only a segment has: the lock, the intent, heartbeat and death time,
 * and the counters; null each on an etcd table. */
static void segment(struct dump_out *o, int etcd, const shl_lease_detail *d)
{
    if (etcd) {
        put_s(o, "     \"lock\": null, \"intent\": null, \"heartbeat_ns\": null, "
                 "\"dead_seen_ns\": null,\n     \"counters\": null");
        return;
    }
    put_s(o, "     \"lock\": {\"state\": \"");
    put_s(o, dump_lock_names[d->lock & 3]);
    put_s(o, "\", \"pid\": ");
    snum(o, d->lock_pid);
    put_s(o, "}, \"intent\": {\"armed\": ");
    put_s(o, d->intent_armed ? "true" : "false");
    put_s(o, ", \"op\": \"");
    put_s(o, shl_op_name(d->intent_op));
    key_num(o, "\", \"token\": ", d->intent_token);
    key_num(o, "}, \"heartbeat_ns\": ", d->heartbeat_ns);
    key_num(o, ", \"dead_seen_ns\": ", d->dead_seen_ns);
    put_s(o, ",\n     \"counters\": {");
    for (int c = 0; c < SHL_COUNTER_COUNT; c++) {
        put_s(o, c ? ", \"" : "\"");
        put_s(o, shl_counter_name(c));
        key_num(o, "\": ", d->counters[c]);
    }
    put_s(o, "}");
}

static void history(struct dump_out *o, int etcd, const shl_lease_detail *d)
{
    for (uint32_t i = 0; i < d->nevents; i++) {
        const shl_event_info *e = &d->events[i];
        put_s(o, i ? ",\n       {\"time_ns\": " : "\n       {\"time_ns\": ");
        u64_or_null(o, etcd, e->time_ns);
        put_s(o, ", \"op\": \"");
        put_s(o, shl_op_name(e->op));
        key_num(o, "\", \"token\": ", e->token);
        put_s(o, ", \"pid\": ");
        pid_or_null(o, etcd, e->pid);
        put_s(o, ", \"owner\": ");
        str(o, e->owner);
        put_s(o, ", \"why\": \"");
        put_s(o, e->op == SHL_OP_REJECT ? shl_counter_name(e->why) : "");
        put_s(o, "\", \"revision\": ");
        snum(o, e->revision);
        put_s(o, "}");
    }
}

/* A holder's fields, the lease's or a shared holder's. */
static void holder(struct dump_out *o, int etcd, const char *owner, int32_t pid, uint64_t token,
                   uint64_t expiry, uint64_t since, uint64_t remaining)
{
    put_s(o, "\"owner\": ");
    str(o, owner);
    put_s(o, ", \"pid\": ");
    pid_or_null(o, etcd, pid);
    key_num(o, ", \"token\": ", token);
    key_num(o, ", \"expiry_ns\": ", expiry);
    put_s(o, ", \"since_ns\": ");
    u64_or_null(o, etcd, since);
    key_num(o, ", \"remaining_ns\": ", remaining);
}

static void shared(struct dump_out *o, int etcd, const shl_lease_detail *d)
{
    for (uint32_t i = 0; i < d->nshared; i++) {
        const shl_shared_holder *h = &d->shared[i];
        put_s(o, i ? ",\n       {" : "\n       {");
        holder(o, etcd, h->owner, h->pid, h->token, h->expiry_ns, h->since_ns, h->remaining_ns);
        put_s(o, ", \"state\": \"");
        put_s(o, shl_state_name(h->state));
        put_s(o, "\"}");
    }
}

void dump_json_lease(struct dump_out *o, int etcd, const shl_lease_detail *d)
{
    const shl_lease_info *in = &d->info;
    put_s(o, "    {\"name\": ");
    str(o, d->name);
    put_s(o, ", \"slot\": ");
    u64_or_null(o, etcd, d->slot);
    put_s(o, ", \"state\": \"");
    put_s(o, shl_state_name(in->state));
    put_s(o, "\", ");
    holder(o, etcd, in->owner, in->pid, in->token, in->expiry_ns, in->since_ns, in->remaining_ns);
    key_num(o, ", \"waiters\": ", in->waiters);
    /* etcd: no snapshot under a lock */
    put_s(o, etcd        ? ", \"stable\": null,\n"
             : d->stable ? ", \"stable\": true,\n"
                         : ", \"stable\": false,\n");
    segment(o, etcd, d);
    key_num(o, ",\n     \"events_total\": ", d->events_total);
    put_s(o, d->history_partial ? ", \"history_partial\": true, \"history\": ["
                                : ", \"history_partial\": false, \"history\": [");
    history(o, etcd, d);
    key_num(o, "],\n     \"value\": {\"len\": ", in->value_len);
    key_num(o, ", \"token\": ", in->value_token);
    put_s(o, ", \"preview_hex\": \"");
    hex(o, d->preview, d->preview_len);
    key_num(o, "\"},\n     \"token_last\": ", d->token_last);
    put_s(o, ", \"shared\": [");
    shared(o, etcd, d);
    put_s(o, "]}");
}
