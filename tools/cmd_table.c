/*
 * tools/cmd_table.c - shmlease version, create, rm.
 */
#include <stdio.h>
#include <string.h>

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
            "                            [--manual-clock] [--reclaim-orphans [--reclaim-delay T]]\n"
            "                            [--token-state FILE]\n"
            "Creates the table NAME (fails if it exists).\n"
            "  --capacity N       lease slots (default 1024, at most %u)\n"
            "  --value-size B     bytes of value per lease (default 256, at most %u)\n"
            "  --mode M           0600 (default) or 0660 to share with the group\n"
            "  --manual-clock     time moves only when set (for tests and simulations)\n"
            "  --reclaim-orphans  a lease whose holder is proven dead may be taken\n"
            "                     before its expiry\n"
            "  --reclaim-delay T  ... but only T after the death was first seen (e.g. 500ms)\n"
            "  --token-state FILE keep a token epoch in FILE (on persistent storage) so that\n"
            "                     the new table's tokens are higher than those of every\n"
            "                     table created before with FILE, across rm and reboots\n",
            SHL_CAPACITY_MAX, SHL_VALUE_MAX);
}

int cmd_create(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        create_usage(stdout);
        return 0;
    }
    shl_options o;
    shl_options_init(&o);
    o.flags = SHL_CREATE | SHL_EXCL;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        int has_val = i + 1 < argc;
        if (strcmp(a, "--capacity") == 0 && has_val) {
            if (cli_u64(argv[++i], &v) || v < 1 || v > SHL_CAPACITY_MAX) {
                cli_err("create", "--capacity takes 1..%u, not '%s'", SHL_CAPACITY_MAX, argv[i]);
                return EXIT_USAGE;
            }
            o.capacity = (uint32_t)v;
        } else if (strcmp(a, "--value-size") == 0 && has_val) {
            if (cli_u64(argv[++i], &v) || v > SHL_VALUE_MAX) {
                cli_err("create", "--value-size takes 0..%u, not '%s'", SHL_VALUE_MAX, argv[i]);
                return EXIT_USAGE;
            }
            o.value_size = (uint32_t)v;
        } else if (strcmp(a, "--mode") == 0 && has_val) {
            const char *m = argv[++i];
            if (strcmp(m, "0600") == 0 || strcmp(m, "600") == 0)
                o.mode = 0600;
            else if (strcmp(m, "0660") == 0 || strcmp(m, "660") == 0)
                o.mode = 0660;
            else {
                cli_err("create", "--mode takes 0600 or 0660, not '%s'", m);
                return EXIT_USAGE;
            }
        } else if (strcmp(a, "--token-state") == 0 && has_val) {
            o.token_state_path = argv[++i];
        } else if (strcmp(a, "--manual-clock") == 0) {
            o.clock = SHL_CLOCK_MANUAL;
        } else if (strcmp(a, "--reclaim-orphans") == 0) {
            o.policy |= SHL_POLICY_RECLAIM_ORPHANS;
        } else if (strcmp(a, "--reclaim-delay") == 0 && has_val) {
            if (cli_duration_ns(argv[++i], &v) || v / 1000000 > UINT32_MAX) {
                cli_err("create", "--reclaim-delay takes a duration such as 500ms, not '%s'",
                        argv[i]);
                return EXIT_USAGE;
            }
            o.reclaim_delay_ms = (uint32_t)(v / 1000000);
        } else if (a[0] == '-') {
            cli_err("create", "unknown option or missing value: '%s'", a);
            create_usage(stderr);
            return EXIT_USAGE;
        } else if (!name) {
            name = a;
        } else {
            cli_err("create", "unexpected argument '%s'", a);
            return EXIT_USAGE;
        }
    }
    if (!name) {
        create_usage(stderr);
        return EXIT_USAGE;
    }
    if (o.reclaim_delay_ms && !(o.policy & SHL_POLICY_RECLAIM_ORPHANS)) {
        cli_err("create", "--reclaim-delay needs --reclaim-orphans");
        return EXIT_USAGE;
    }
    shl_table *t;
    int rc = shl_open(name, &o, &t);
    if (rc != SHL_OK) {
        cli_err("create", "cannot create table '%s': %s (%s)", name, shl_strerror(rc),
                shl_errname(rc));
        if (o.token_state_path && rc != SHL_EEXIST)
            cli_err("create", "(the error may concern the token state file '%s')",
                    o.token_state_path);
        return rc == SHL_EINVAL ? EXIT_USAGE : EXIT_TABLE;
    }
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    printf("created table %s: capacity %u, value size %u, mode %04o, %s clock, %llu bytes\n", name,
           ti.capacity, ti.value_size, (unsigned)ti.mode,
           ti.clock == SHL_CLOCK_MANUAL ? "manual" : "monotonic", (unsigned long long)ti.size);
    if (ti.token_floor)
        printf("token floor %llu (epoch %llu): every token is above it\n",
               (unsigned long long)ti.token_floor,
               (unsigned long long)(ti.token_floor >> SHL_TOKEN_EPOCH_BITS));
    shl_close(t);
    return 0;
}

int cmd_rm(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc != 2) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: shmlease rm NAME\n"
                "Removes the table's name. Processes that have it open keep it until they\n"
                "close it; a new open of NAME finds nothing (or creates a new table).\n");
        return argc == 2 ? 0 : EXIT_USAGE;
    }
    int rc = shl_unlink(argv[1]);
    if (rc != SHL_OK) {
        cli_err("rm", "cannot remove '%s': %s (%s)", argv[1], shl_strerror(rc), shl_errname(rc));
        return rc == SHL_EINVAL ? EXIT_USAGE : EXIT_TABLE;
    }
    return 0;
}
