/*
 * tools/cmd_table.c - shmlease version, create, rm.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("shmlease %s (library %s)\n", SHLEASE_VERSION_STRING, shl_version());
    return 0;
}

static void create_usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease create NAME [--capacity N] [--value-size B] [--mode 0600|0660]\n"
            "                            [--manual-clock] [--reclaim-delay T | --no-reclaim]\n"
            "                            [--token-state FILE] [--max-shared N]\n"
            "                            [--max-waiters N] [--spare-values N] [--history N]\n"
            "Creates the table NAME (fails if it exists).\n"
            "  --capacity N       lease slots (default 1024, at most %u)\n"
            "  --value-size B     bytes of value per lease (default 256, at most %u)\n"
            "  --mode M           0600 (default) or 0660 to share with the group\n"
            "  --manual-clock     time moves only when set (for tests and simulations)\n"
            "  --reclaim-delay T  a lease whose holder is proven dead is taken over T after\n"
            "                     the death was first seen (default %ums)\n"
            "  --no-reclaim       keep a dead holder's lease until its expiry\n"
            "  --reclaim-orphans  reclaim at the first look after the death (no delay),\n"
            "                     unless --reclaim-delay is given\n"
            "  --token-state FILE keep a token epoch in FILE (on persistent storage) so that\n"
            "                     the new table's tokens are higher than those of every\n"
            "                     table created before with FILE, across rm and reboots\n"
            "  --max-shared N     shared holders of the whole table at once (default: half\n"
            "                     the capacity, at least %u; 0: no shared acquisition);\n"
            "                     more are refused (SHL_EFULL), never waited for\n"
            "  --max-waiters N    queued waiters of the whole table (default: the capacity,\n"
            "                     at least %u; 0: a wait on a held lease is refused)\n"
            "  --spare-values N   spare value buffers of the whole table, one kept by each\n"
            "                     lease written (default: a sixteenth of the capacity, at\n"
            "                     least %u, at most the capacity; 0: no lease can be\n"
            "                     written); past N written leases, a write takes one back\n"
            "                     from another lease, copying its value first\n"
            "  --history N        events kept per lease for dump (default and at most %u)\n",
            SHL_CAPACITY_MAX, SHL_VALUE_MAX, SHL_RECLAIM_DELAY_DEFAULT_MS, SHL_POOL_MIN,
            SHL_POOL_MIN, SHL_POOL_MIN, SHL_HISTORY_MAX);
}

/* An etcd table has no slots, mode, segment or clock of its own: where it
 * lives (its members and key prefix) and its value size. */
static void print_etcd_created(const char *name, const shl_table_info *ti)
{
    printf("created table %s: ", name);
    cli_etcd_where(stdout, name);
    printf(", value size %u, etcd's lease clock\n", ti->value_size);
}

/* A shared-memory table: its geometry, its size in words people read, the
 * memory it takes now, and a warning when it can take over a quarter of
 * what its file system had free
 * (the next table, or this one re-created while the old one is still
 * mapped, may then not fit), or when that file system is not tmpfs. */
/* A value buffer's bytes: a 16-byte header (the writer's token, the
 * length, the spare's owner) and the value, rounded up to 8 bytes. */
static uint64_t value_buffer(uint32_t value_size)
{
    return 16 + (((uint64_t)value_size + 7) & ~UINT64_C(7));
}

static void print_created(const char *name, const shl_table_info *ti, const shl_place *before)
{
    char size[32], free_[32], per[32], values[32], taken[32];
    /* What one lease costs: the whole segment (header and index included)
     * over the capacity, and of that its values: its own buffer and its
     * share of the spares. */
    uint64_t cap = ti->capacity ? ti->capacity : 1, vbuf = value_buffer(ti->value_size);
    printf("created table %s: capacity %u, value size %u, mode %04o, %s clock, %s (%llu bytes), "
           "%s B per lease (%s B of values)\n",
           name, ti->capacity, ti->value_size, (unsigned)ti->mode,
           ti->clock == SHL_CLOCK_MANUAL ? "manual" : "monotonic",
           cli_fmt_bytes(ti->size, size, sizeof size), (unsigned long long)ti->size,
           cli_fmt_count((ti->size + cap / 2) / cap, per, sizeof per),
           cli_fmt_count(vbuf + (ti->spare_values * vbuf + cap / 2) / cap, values, sizeof values));
    printf("pools: %u shared holders, %u queued waiters, %u spare value buffers; %u history "
           "events a lease\n",
           ti->max_shared, ti->max_waiters, ti->spare_values, ti->history);
    printf("memory: %s taken now, up to %s as names are added\n",
           cli_fmt_bytes(ti->allocated, taken, sizeof taken), size);
    if (!before)
        return;
    if (before->fs_size && ti->size > before->fs_free / 4)
        cli_err(
            "create",
            "warning: table '%s' can take %s, over a quarter of the %s that were free on the file "
            "system of %s: "
            "another table, or this one created again while the old one is still open, "
            "may not fit (see shmlease doctor)",
            cli_vis(name), size, cli_fmt_bytes(before->fs_free, free_, sizeof free_),
            cli_vis(before->path));
    cli_place_warn("create", name);
}

int cmd_create(int argc, char **argv)
{
    uint64_t capacity = UINT64_MAX, value_size = UINT64_MAX, delay = 0; /* MAX, 0: not given */
    uint64_t max_shared = UINT64_MAX, max_waiters = UINT64_MAX, history = UINT64_MAX;
    uint64_t spare_values = UINT64_MAX;
    int manual = 0, reclaim = 0, no_reclaim = 0;
    const char *mode = NULL, *state = NULL;
    const struct cli_opt opts[] = {
        {"--capacity", NULL, CLI_NUMBER, &capacity},
        {"--value-size", NULL, CLI_NUMBER, &value_size},
        {"--mode", NULL, CLI_STRING, &mode},
        {"--token-state", NULL, CLI_STRING, &state},
        {"--manual-clock", NULL, CLI_FLAG, &manual},
        {"--reclaim-orphans", NULL, CLI_FLAG, &reclaim},
        {"--reclaim-delay", NULL, CLI_DURATION, &delay},
        {"--no-reclaim", NULL, CLI_FLAG, &no_reclaim},
        {"--max-shared", NULL, CLI_NUMBER, &max_shared},
        {"--max-waiters", NULL, CLI_NUMBER, &max_waiters},
        {"--spare-values", NULL, CLI_NUMBER, &spare_values},
        {"--history", NULL, CLI_NUMBER, &history},
        {NULL, NULL, 0, NULL},
    };
    static const char *const names[] = {"NAME", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, create_usage, opts, names, 1, 0, &ops);
    if (ex)
        return ex < 0 ? 0 : ex;
    const char *name = ops.v[0];
    shl_options o;
    shl_options_init(&o);
    o.flags = SHL_CREATE | SHL_EXCL;
    if (capacity != UINT64_MAX) {
        if (capacity < 1 || capacity > SHL_CAPACITY_MAX) {
            cli_usage_err("create", "--capacity takes 1..%u, not %llu", SHL_CAPACITY_MAX,
                          (unsigned long long)capacity);
            return EXIT_USAGE;
        }
        o.capacity = (uint32_t)capacity;
    }
    if (value_size != UINT64_MAX) {
        if (value_size > SHL_VALUE_MAX) {
            cli_usage_err("create", "--value-size takes 0..%u, not %llu", SHL_VALUE_MAX,
                          (unsigned long long)value_size);
            return EXIT_USAGE;
        }
        o.value_size = (uint32_t)value_size;
    }
    /* Their bounds depend on the capacity: the library names them, all but
     * --spare-values's (the capacity itself), said below. */
    const struct {
        const char *opt;
        uint64_t v;
        uint32_t *to;
    } sizes[] = {{"--max-shared", max_shared, &o.max_shared},
                 {"--max-waiters", max_waiters, &o.max_waiters},
                 {"--spare-values", spare_values, &o.spare_values},
                 {"--history", history, &o.history}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].v == UINT64_MAX)
            continue;
        if (sizes[i].v >= UINT32_MAX) {
            cli_usage_err("create", "%s takes a number below %u, not %llu", sizes[i].opt,
                          UINT32_MAX, (unsigned long long)sizes[i].v);
            return EXIT_USAGE;
        }
        *sizes[i].to = (uint32_t)sizes[i].v;
    }
    if (spare_values != UINT64_MAX && spare_values > o.capacity) {
        cli_usage_err("create",
                      "--spare-values takes 0..%u, one per lease of a table of capacity %u, not "
                      "%llu",
                      o.capacity, o.capacity, (unsigned long long)spare_values);
        return EXIT_USAGE;
    }
    if (mode) {
        if (strcmp(mode, "0600") == 0 || strcmp(mode, "600") == 0)
            o.mode = 0600;
        else if (strcmp(mode, "0660") == 0 || strcmp(mode, "660") == 0)
            o.mode = 0660;
        else {
            cli_usage_err("create", "--mode takes 0600 or 0660, not '%s'", cli_vis(mode));
            return EXIT_USAGE;
        }
    }
    if (no_reclaim && (delay || reclaim)) {
        cli_usage_err("create", "--no-reclaim contradicts %s",
                      delay ? "--reclaim-delay" : "--reclaim-orphans");
        return EXIT_USAGE;
    }
    if (delay / 1000000 > UINT32_MAX) {
        cli_usage_err("create", "--reclaim-delay takes at most %llums",
                      (unsigned long long)UINT32_MAX);
        return EXIT_USAGE;
    }
    if (cli_table_name("create", name))
        return EXIT_USAGE;
    o.token_state_path = state;
    o.clock = manual ? SHL_CLOCK_MANUAL : o.clock;
    if (no_reclaim)
        o.policy = 0;
    if (delay || reclaim) /* --reclaim-orphans alone: no delay, as it always meant */
        o.reclaim_delay_ms = (uint32_t)(delay / 1000000);
    shl_table *t;
    shl_place before; /* the free space before this table took its share */
    int placed = !cli_etcd_name(name) && shl_place_get(name, &before) == SHL_OK;
    int rc = shl_open(name, &o, &t);
    if (rc != SHL_OK) {
        cli_err("create", "cannot create table '%s': %s (%s)", name, cli_table_strerror(name, rc),
                shl_errname(rc));
        cli_place_why("create", name, rc);
        if (o.token_state_path && rc != SHL_EEXIST)
            cli_err("create", "(the error may concern the token state file '%s')",
                    o.token_state_path);
        else if (!manual && !reclaim)
            cli_etcd_unsupported("create", name, rc);
        return rc == SHL_EINVAL ? EXIT_USAGE : EXIT_TABLE;
    }
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    if (cli_etcd_name(name))
        print_etcd_created(name, &ti);
    else
        print_created(name, &ti, placed ? &before : NULL);
    if (ti.token_floor)
        printf("token floor %llu (epoch %llu): every token is above it\n",
               (unsigned long long)ti.token_floor,
               (unsigned long long)(ti.token_floor >> SHL_TOKEN_EPOCH_BITS));
    shl_close(t);
    return 0;
}

static void rm_usage(FILE *f)
{
    fputs("usage: shmlease rm NAME [--force]\n"
          "Removes the table's name. Processes that have it open keep it until they\n"
          "close it; a new open of NAME finds nothing (or creates a new table).\n"
          "A table with held leases is not removed (each is listed, exit 1) unless\n"
          "--force (-f) is given; a table too damaged to open is removed. The table is\n"
          "marked removed first: every process that has it open is told (SHL_EREMOVED)\n"
          "at its next call, and its waiters and renewers at once (shmlease run stops\n"
          "its command, exit 4). A file that is not a shmlease table (no table magic\n"
          "word) is kept (exit 1) unless --force is given.\n",
          f);
}

/* rm --force of a file that is not a table: shl_unlink() refuses it (it
 * removes tables only), so the tool removes the name itself, at the path
 * shl_open() gives the name: /dev/shm/NAME, a leading '/' dropped. */
/* The file the name stands for, as shl_open() resolves it (/dev/shm/NAME or
 * the path of a path table). */
static int force_unlink(const char *name)
{
    shl_place pl;
    int rc = shl_place_get(name, &pl);
    if (rc != SHL_OK) {
        cli_err("rm", "cannot remove '%s': %s (%s)", name, cli_table_strerror(name, rc),
                shl_errname(rc));
        return rc == SHL_EINVAL ? EXIT_USAGE : EXIT_TABLE;
    }
    if (unlink(pl.path) == 0)
        return 0;
    cli_err("rm", "cannot remove '%s': %s", pl.path, strerror(errno));
    return EXIT_TABLE;
}

static int held_line(void *arg, const shl_lease_detail *d)
{
    unsigned *n = arg;
    const shl_lease_info *in = &d->info;
    if (in->state != SHL_STATE_HELD)
        return 0;
    char left[32];
    cli_err("rm", "lease %s is held by owner %s (pid %d, token %llu, %s left)", cli_vis(d->name),
            cli_vis(in->owner), (int)in->pid, (unsigned long long)in->token,
            cli_fmt_ns(in->remaining_ns, left, sizeof left));
    ++*n;
    return 0;
}

/* EXIT_REFUSED when the table opens and has held leases (listed). */
static int refuse_held(const char *name)
{
    shl_table *t;
    if (shl_open(name, NULL, &t) != SHL_OK)
        return 0; /* shl_unlink() reports a missing table; a damaged one may go */
    unsigned n = 0;
    shl_foreach(t, held_line, &n);
    shl_close(t);
    if (n == 0)
        return 0;
    cli_err("rm", "table '%s' not removed: %u lease%s held (--force removes it anyway)", name, n,
            n == 1 ? " is" : "s are");
    return EXIT_REFUSED;
}

int cmd_rm(int argc, char **argv)
{
    int force = 0;
    const struct cli_opt opts[] = {{"--force", "-f", CLI_FLAG, &force}, {NULL, NULL, 0, NULL}};
    static const char *const names[] = {"NAME", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, rm_usage, opts, names, 1, 0, &ops);
    if (ex)
        return ex < 0 ? 0 : ex;
    const char *name = ops.v[0];
    if (cli_table_name("rm", name))
        return EXIT_USAGE;
    if (!force && (ex = refuse_held(name)) != 0)
        return ex;
    int rc = shl_unlink(name);
    if (rc == SHL_ECORRUPT && !cli_etcd_name(name)) {
        if (force)
            return force_unlink(name);
        cli_err("rm",
                "'%s' is not a shmlease table (no table magic word): kept (--force "
                "removes it anyway)",
                name);
        return EXIT_REFUSED;
    }
    if (rc != SHL_OK) {
        cli_err("rm", "cannot remove '%s': %s (%s)", name, cli_table_strerror(name, rc),
                shl_errname(rc));
        return rc == SHL_EINVAL ? EXIT_USAGE : EXIT_TABLE;
    }
    return 0;
}
