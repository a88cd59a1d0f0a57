/*
 * tools/bench/rows_scale.c - cost against fullness, and a big table.
 *
 * Rows: an acquire+release pair by name on tables 1 %, 50 % and 90 % full.
 * The pair cycles over 1024 leases. In the plain rows they are the first
 * 1024 names added, the same slots on every table, so the working set is
 * alike and what differs is the index: the load factor, the probe length,
 * the other names compared on the way. In the "spread" rows they are picked
 * evenly across all the filled names, so that a fuller table also means a
 * larger working set (cache and TLB misses: the memory, not the index).
 *
 * One-off: create a 1,000,000-lease table (three times, median), the
 * memory it takes then, posix_fallocate of its whole size (what creation
 * cost while it took every slot's pages), its bytes per lease (and those
 * of a table with no reader records and no history, once the options
 * exist), then fill every slot and time `shmlease ls` and `shmlease dump
 * --json` on it where the tool has those commands.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define WORKING 1024
#define TTL (UINT64_C(10) * 1000000000u)

struct fill_ctx {
    struct filled *f;
    char names[WORKING][24];
};

/* One table per fullness, shared by the plain and the spread row. */
struct filled {
    char table[96];
    shl_table *t;
    uint32_t n; /* names added */
    int users;
};

static struct filled filled[101];

static uint32_t scale_cap(void)
{
    return bench_quick ? 20000 : 200000;
}

static int add_names(shl_table *t, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        char name[24];
        shl_lease *l;
        snprintf(name, sizeof name, "lease-%07u", i);
        if (shl_lease_open(t, name, "filler", &l) != SHL_OK)
            return -1;
        shl_lease_close(l);
    }
    return 0;
}

static const char *fill_table(struct filled *f, int pct)
{
    if (f->users++ > 0)
        return NULL;
    char tag[16];
    snprintf(tag, sizeof tag, "fill%d", pct);
    shl_options o;
    shl_options_init(&o);
    o.capacity = scale_cap();
    o.value_size = 64;
    o.flags = SHL_CREATE | SHL_EXCL;
    int rc = shl_open(bench_table_name(f->table, sizeof f->table, tag), &o, &f->t);
    if (rc != SHL_OK)
        return shl_strerror(rc);
    f->n = (uint32_t)((uint64_t)o.capacity * (uint64_t)pct / 100);
    return add_names(f->t, 0, f->n) == 0 ? NULL : "filling failed";
}

static const char *fill_setup(struct bench_row *r)
{
    struct fill_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return "out of memory";
    r->ctx = c;
    int pct = r->arg & 0xff, spread = r->arg >> 8;
    c->f = &filled[pct];
    const char *why = fill_table(c->f, pct);
    if (why)
        return why;
    uint32_t n = c->f->n;
    for (uint32_t i = 0; i < WORKING; i++)
        snprintf(c->names[i], sizeof c->names[i], "lease-%07u",
                 spread ? (uint32_t)((uint64_t)i * n / WORKING) : i % n);
    return NULL;
}

static void fill_teardown(struct bench_row *r)
{
    struct fill_ctx *c = r->ctx;
    if (!c)
        return;
    if (--c->f->users == 0 && c->f->t) {
        shl_close(c->f->t);
        shl_unlink(c->f->table);
        c->f->t = NULL;
    }
    free(c);
}

static int fill_run(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    struct fill_ctx *c = r->ctx;
    int bad = 0;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        const char *name = c->names[i % WORKING];
        uint64_t tk;
        bad |= shl_acquire(c->f->t, name, "scaler", TTL, &tk);
        bad |= shl_release(c->f->t, name, "scaler", tk);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return bad ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Runs the tool with args; its output goes to /dev/null. Wall ns, or 0. */
static uint64_t time_tool(const char *a1, const char *a2, const char *a3, int *status)
{
    fflush(NULL);
    uint64_t t0 = bench_now();
    pid_t p = fork();
    if (p == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(bench_tool, bench_tool, a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p)
        return 0;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return bench_now() - t0;
}

static void inspector_note(const char *what, const char *cmd, const char *flag, const char *table,
                           uint32_t cap)
{
    char label[96];
    snprintf(label, sizeof label, "shmlease %s on a full %u-lease table", what, cap);
    int st = 0;
    time_tool(cmd, "--help", NULL, &st);
    if (st != 0) {
        bench_note(label, 0, "", "pending: the tool has no such command in this build");
        return;
    }
    uint64_t ns = flag ? time_tool(cmd, flag, table, &st) : time_tool(cmd, table, NULL, &st);
    if (st != 0 || ns == 0) {
        bench_note(label, 0, "", "the command failed");
        return;
    }
    bench_note(label, (double)ns / 1e6, "ms", NULL);
}

/* Bytes per lease of a table that keeps no reader record and no history:
 * what every lease needs and nothing else (the value buffers, the slot,
 * its index entries). Its options exist once the table has pools. */
static void lean_bytes_per_lease(void)
{
    const char *label = "bytes per lease, value size 256, max_shared 0, no history";
#ifdef BENCH_HAVE_POOLS
    char name[96];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 100000;
    o.value_size = 256;
    o.max_shared = 0;
    o.history = 0;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(bench_table_name(name, sizeof name, "lean"), &o, &t);
    if (rc != SHL_OK) {
        bench_note(label, 0, "", shl_strerror(rc));
        return;
    }
    shl_table_info info;
    shl_table_info_get(t, &info);
    bench_note(label, (double)info.size / o.capacity, "B", NULL);
    shl_close(t);
    shl_unlink(name);
#else
    bench_note(label, 0, "", "pending: this build's tables have no pools (max_shared, history)");
#endif
}

/* What creating a table of `size` bytes cost while creation took every
 * slot's pages: posix_fallocate of an unnamed file of that size in
 * /dev/shm (median of 3). Creation now takes the header, the index and the
 * pools, and a name its slot when it is added. */
static void fallocate_floor(uint64_t size)
{
    const char *label = "posix_fallocate of the whole size (creation taking every slot)";
    uint64_t ns[3];
    for (int i = 0; i < 3; i++) {
        int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) {
            bench_note(label, 0, "", "no O_TMPFILE in /dev/shm");
            return;
        }
        uint64_t t0 = bench_now();
        int rc = posix_fallocate(fd, 0, (off_t)size);
        ns[i] = bench_now() - t0;
        close(fd);
        if (rc != 0) {
            bench_note(label, 0, "", "posix_fallocate failed");
            return;
        }
    }
    qsort(ns, 3, sizeof ns[0], cmp_u64);
    bench_note(label, (double)ns[1] / 1e6, "ms", NULL);
}

static void big_table(void)
{
    uint32_t cap = bench_quick ? 100000 : 1000000;
    char name[96], label[96];
    bench_table_name(name, sizeof name, "big");
    shl_options o;
    shl_options_init(&o);
    o.capacity = cap;
    o.flags = SHL_CREATE | SHL_EXCL;
    uint64_t ns[3];
    shl_table *t = NULL;
    printf("creating a %u-lease table (3 times) ...\n", cap);
    for (int i = 0; i < 3; i++) {
        shl_unlink(name);
        uint64_t t0 = bench_now();
        int rc = shl_open(name, &o, &t);
        ns[i] = bench_now() - t0;
        if (rc != SHL_OK) {
            snprintf(label, sizeof label, "create %u-lease table", cap);
            bench_note(label, 0, "", shl_strerror(rc));
            return;
        }
        if (i < 2)
            shl_close(t);
    }
    qsort(ns, 3, sizeof ns[0], cmp_u64);
    snprintf(label, sizeof label, "create %u-lease table (median of 3; min %.0f, max %.0f)", cap,
             (double)ns[0] / 1e6, (double)ns[2] / 1e6);
    bench_note(label, (double)ns[1] / 1e6, "ms", NULL);
    shl_table_info info;
    shl_table_info_get(t, &info);
    snprintf(label, sizeof label, "bytes per lease (segment / capacity, value size %u)",
             info.value_size);
    bench_note(label, (double)info.size / cap, "B", NULL);
    bench_note("memory the new table takes (allocated)", (double)info.allocated / (1 << 20), "MiB",
               NULL);
    fallocate_floor(info.size);
    lean_bytes_per_lease();
    printf("filling it ...\n");
    uint64_t t0 = bench_now();
    if (add_names(t, 0, cap) != 0)
        bench_note("fill", 0, "", "filling failed");
    else
        bench_note("add every name (shl_lease_open), per lease", (double)(bench_now() - t0) / cap,
                   "ns", NULL);
    inspector_note("ls", "ls", NULL, name, cap);
    inspector_note("dump --json", "dump", "--json", name, cap);
    shl_close(t);
    shl_unlink(name);
}

void rows_scale(void)
{
    static const int pct[] = {1, 50, 90};
    for (int spread = 0; spread <= 1; spread++)
        for (size_t i = 0; i < sizeof pct / sizeof pct[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "acquire+release, %d%% full%s", pct[i],
                     spread ? ", spread" : "");
            bench_add("scale", name, fill_setup, fill_run, fill_teardown)->arg =
                pct[i] | spread << 8;
        }
    if (!bench_only || strstr(bench_only, "scale"))
        big_table();
}
