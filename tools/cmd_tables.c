/*
 * tools/cmd_tables.c - shmlease tables: the tables in /dev/shm (or in a
 * directory of path tables), one line each or as JSON.
 *
 * A file is listed when shl_place_get() finds a table header in it; other
 * files are not tables and are left out. A table of another build, or one
 * this user cannot open, is listed with what stands in the way instead of
 * its geometry.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define SHM_DIR "/dev/shm"

struct row {
    char name[SHL_TABLE_NAME_MAX + 1];
    int rc; /* of the open: SHL_OK, or why not */
    shl_table_info ti;
    int open; /* shl_place.open: 1, 0, -1 unknown */
};

static void tables_usage(FILE *f)
{
    fputs("usage: shmlease tables [DIR] [--json]\n"
          "Lists the tables in /dev/shm, or the path tables in directory DIR (such as\n"
          "/run/lock), one line each: name, capacity, leases used, value size, size,\n"
          "mode, reclaim delay (or \"off\"), and whether some process has it open. A\n"
          "table of another build or that cannot be opened is listed with the reason.\n"
          "--json prints [{\"name\", \"capacity\", \"used\", \"value_size\", \"size\",\n"
          "\"mode\", \"reclaim_orphans\", \"reclaim_delay_ms\", \"open\", \"error\"}].\n",
          f);
}

/* The row of the file `entry` of dir; 0 when it is no table. */
static int look(const char *dir, const char *entry, struct row *r)
{
    memset(r, 0, sizeof *r);
    int n = strcmp(dir, SHM_DIR) == 0
                ? snprintf(r->name, sizeof r->name, "%s", entry)
                : snprintf(r->name, sizeof r->name, "%s/%s", strcmp(dir, "/") ? dir : "", entry);
    if (n < 0 || (size_t)n >= sizeof r->name)
        return 0;
    shl_place p;
    if (shl_place_get(r->name, &p) != SHL_OK || !p.exists)
        return 0;
    if (p.table == SHL_ECORRUPT || p.table == SHL_ENOENT)
        return 0; /* not a table */
    r->open = p.open;
    r->rc = p.table;
    if (r->rc == SHL_OK) {
        shl_table *t;
        r->rc = shl_open(r->name, NULL, &t);
        if (r->rc == SHL_OK) {
            r->rc = shl_table_info_get(t, &r->ti);
            shl_close(t);
        }
    }
    return 1;
}

static const char *open_word(int open)
{
    return open > 0 ? "yes" : open == 0 ? "no" : "?";
}

static void print_text(const struct row *rows, size_t n)
{
    int w = (int)strlen("TABLE");
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(cli_vis(rows[i].name)) > w)
            w = (int)strlen(cli_vis(rows[i].name));
    printf("%-*s %8s %6s %6s %10s %4s %8s %4s\n", w, "TABLE", "CAPACITY", "USED", "VALUE", "SIZE",
           "MODE", "RECLAIM", "OPEN");
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        if (r->rc != SHL_OK) {
            printf("%-*s (%s: %s)\n", w, cli_vis(r->name), shl_errname(r->rc), shl_strerror(r->rc));
            continue;
        }
        char size[32], delay[32] = "off";
        if (r->ti.policy & SHL_POLICY_RECLAIM_ORPHANS)
            cli_fmt_ns((uint64_t)r->ti.reclaim_delay_ms * 1000000, delay, sizeof delay);
        if ((r->ti.policy & SHL_POLICY_RECLAIM_ORPHANS) && !r->ti.reclaim_delay_ms)
            snprintf(delay, sizeof delay, "at once");
        printf("%-*s %8u %6u %6u %10s %04o %8s %4s\n", w, cli_vis(r->name), r->ti.capacity,
               r->ti.used, r->ti.value_size, cli_fmt_bytes(r->ti.size, size, sizeof size),
               (unsigned)r->ti.mode, delay, open_word(r->open));
    }
}

static void print_json(const struct row *rows, size_t n)
{
    fputc('[', stdout);
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        fputs(i ? ",\n {\"name\": " : "\n {\"name\": ", stdout);
        cli_json_str(stdout, r->name);
        if (r->rc == SHL_OK)
            printf(", \"capacity\": %u, \"used\": %u, \"value_size\": %u, \"size\": %llu, "
                   "\"mode\": \"%04o\", \"reclaim_orphans\": %s, \"reclaim_delay_ms\": %u, "
                   "\"open\": %s, \"error\": null}",
                   r->ti.capacity, r->ti.used, r->ti.value_size, (unsigned long long)r->ti.size,
                   (unsigned)r->ti.mode,
                   (r->ti.policy & SHL_POLICY_RECLAIM_ORPHANS) ? "true" : "false",
                   r->ti.reclaim_delay_ms,
                   r->open > 0    ? "true"
                   : r->open == 0 ? "false"
                                  : "null");
        else
            printf(", \"capacity\": null, \"used\": null, \"value_size\": null, \"size\": null, "
                   "\"mode\": null, \"reclaim_orphans\": null, \"reclaim_delay_ms\": null, "
                   "\"open\": null, \"error\": \"%s\"}",
                   shl_errname(r->rc));
    }
    fputs(n ? "\n]\n" : "]\n", stdout);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct row *)a)->name, ((const struct row *)b)->name);
}

int cmd_tables(int argc, char **argv)
{
    int json = 0;
    const struct cli_opt opts[] = {
        {"--json", NULL, CLI_FLAG, &json},
        {NULL, NULL, 0, NULL},
    };
    static const char *const names[] = {"DIR", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, tables_usage, opts, names, 0, 0, &ops);
    if (ex)
        return ex < 0 ? 0 : ex;
    char dir[SHL_TABLE_NAME_MAX + 1];
    snprintf(dir, sizeof dir, "%s", ops.n ? ops.v[0] : SHM_DIR);
    for (size_t l = strlen(dir); l > 1 && dir[l - 1] == '/'; l--)
        dir[l - 1] = '\0';
    if (dir[0] != '/') {
        cli_usage_err("tables", "DIR '%s' is not an absolute path (path tables are named by one)",
                      cli_vis(dir));
        return EXIT_USAGE;
    }
    DIR *d = opendir(dir);
    if (!d) {
        cli_err("tables", "cannot list '%s': %m", cli_vis(dir));
        return EXIT_TABLE;
    }
    struct row *rows = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || (e->d_type != DT_REG && e->d_type != DT_UNKNOWN))
            continue;
        if (n == cap) {
            struct row *more = realloc(rows, (cap = cap ? 2 * cap : 16) * sizeof *rows);
            if (!more) {
                closedir(d);
                free(rows);
                cli_err("tables", "out of memory");
                return EXIT_SYSTEM;
            }
            rows = more;
        }
        n += (size_t)look(dir, e->d_name, &rows[n]);
    }
    closedir(d);
    qsort(rows, n, sizeof *rows, by_name);
    if (json)
        print_json(rows, n);
    else
        print_text(rows, n);
    free(rows);
    return 0;
}
