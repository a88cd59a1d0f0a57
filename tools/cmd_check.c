/*
 * tools/cmd_check.c - shmlease check, repair and revoke.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct counted {
    FILE *f;
    unsigned n;
};

static void print_counted(void *arg, const char *line)
{
    struct counted *c = arg;
    fprintf(c->f, "%s\n", line);
    c->n++;
}

/* Opens NAME; for a segment that does not open because it is damaged,
 * checks its bytes instead (problems on stdout) and returns EXIT_REFUSED. */
static int open_or_explain(const char *cmd, const char *name, shl_table **t)
{
    if (cli_table_name(cmd, name))
        return EXIT_USAGE;
    int rc = shl_open(name, NULL, t);
    if (rc == SHL_OK)
        return 0;
    if (rc != SHL_ECORRUPT && rc != SHL_EVERSION) {
        cli_open_failed(cmd, name, rc);
        return EXIT_TABLE;
    }
    struct counted c = {stdout, 0};
    int crc = shl_check_name(name, print_counted, &c);
    if (crc == SHL_OK || c.n == 0)
        printf("segment does not open: %s\n", cli_strerror(rc));
    cli_err(cmd, "table '%s' does not open: %s (%s)", name, cli_table_strerror(name, rc),
            shl_errname(rc));
    return EXIT_REFUSED;
}

static void check_usage(FILE *f)
{
    fputs("usage: shmlease check NAME\n"
          "Verifies every invariant of the table: header and format word, lock states,\n"
          "intent records, token and expiry consistency, the hash index, history. Prints\n"
          "each problem on its own line, or one line \"ok: table NAME, N leases, no problem\n"
          "found\". Exit 0 when clean, 1 when problems were found\n"
          "(also for a segment too damaged to open), 3 when it cannot be opened.\n"
          "Reads only; never waits on a lock. A table removed meanwhile (its name gone,\n"
          "or naming another file) is said so, exit 3.\n",
          f);
}

static const char *const table_operand[] = {"NAME", NULL};

int cmd_check(int argc, char **argv)
{
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, check_usage, NULL, table_operand, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *name = ops.v[0];
    shl_table *t;
    if ((rc = open_or_explain("check", name, &t)) != 0)
        return rc;
    struct counted c = {stdout, 0};
    rc = shl_check(t, print_counted, &c);
    int ex = cli_removed("check", name, t);
    shl_table_info ti;
    int known = shl_table_info_get(t, &ti) == SHL_OK;
    shl_close(t);
    if (ex)
        return ex;
    if (rc == SHL_OK) { /* one line that says so, for people and for logs */
        if (known)
            printf("ok: table %s, %u lease%s, no problem found\n", cli_vis(name), ti.used,
                   ti.used == 1 ? "" : "s");
        else
            printf("ok: table %s, no problem found\n", cli_vis(name));
        return 0;
    }
    cli_err("check", "%u problem%s found in '%s'", c.n, c.n == 1 ? "" : "s", name);
    return EXIT_REFUSED;
}

static void repair_usage(FILE *f)
{
    fputs("usage: shmlease repair NAME [--dry-run]\n"
          "Finishes or rolls back interrupted changes, recovers locks whose holder died,\n"
          "reinitialises unrecoverable locks, rebuilds a damaged index, and ends leases\n"
          "of dead holders when the table's policy reclaims orphans. Never lowers a\n"
          "token. Prints each action (with --dry-run: each action it would take, and\n"
          "changes nothing). Exit 0 when the table is sound afterwards (dry run: when\n"
          "there is nothing to do), 1 when something cannot be repaired (dry run: when\n"
          "there is something to do), 3 when it cannot be opened.\n",
          f);
}

int cmd_repair(int argc, char **argv)
{
    int dry = 0;
    const struct cli_opt opts[] = {{"--dry-run", "-n", CLI_FLAG, &dry}, {NULL, NULL, 0, NULL}};
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, repair_usage, opts, table_operand, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *name = ops.v[0];
    unsigned flags = dry ? SHL_REPAIR_DRY_RUN : 0;
    shl_table *t;
    rc = open_or_explain("repair", name, &t);
    if (rc == EXIT_REFUSED) {
        printf("cannot repair: the header is damaged; remove the table (shmlease rm) and "
               "create it again\n");
        return rc;
    }
    if (rc)
        return rc;
    struct counted c = {stdout, 0};
    rc = shl_repair(t, flags, print_counted, &c);
    if (rc == SHL_OK && !(flags & SHL_REPAIR_DRY_RUN)) {
        struct counted left = {stdout, 0};
        if (shl_check(t, print_counted, &left) != SHL_OK) {
            cli_err("repair", "%u problem%s remain", left.n, left.n == 1 ? "" : "s");
            rc = SHL_ECORRUPT;
        }
    }
    shl_close(t);
    if (c.n == 0 && rc == SHL_OK)
        printf("nothing to repair\n");
    if (rc == SHL_OK)
        return 0;
    if (rc != SHL_ECORRUPT) {
        cli_err("repair", "%s (%s)", cli_strerror(rc), shl_errname(rc));
        return cli_exit_of(rc);
    }
    return EXIT_REFUSED;
}

static void revoke_usage(FILE *f)
{
    fputs("usage: shmlease revoke NAME LEASE\n"
          "Ends the current holder's validity at once: its renew, release and writes\n"
          "fail from now on, and the next acquire gets the next token. Exit 0 when\n"
          "revoked, 1 when the lease is not held now (or unknown). Put \"--\" before\n"
          "a LEASE that starts with '-'.\n",
          f);
}

int cmd_revoke(int argc, char **argv)
{
    static const char *const names[] = {"NAME", "LEASE", NULL};
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, revoke_usage, NULL, names, 2, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *lease = ops.v[1];
    if (cli_lease_name("revoke", lease))
        return EXIT_USAGE;
    shl_table *t;
    if ((rc = cli_open("revoke", ops.v[0], &t)) != 0)
        return rc;
    rc = shl_revoke(t, lease);
    shl_close(t);
    if (rc == SHL_OK) {
        printf("revoked %s\n", cli_vis(lease));
        return 0;
    }
    if (rc == SHL_ENOENT) {
        cli_err("revoke", "lease '%s' is not held (nothing revoked)", cli_vis(lease));
        return EXIT_REFUSED;
    }
    cli_err("revoke", "lease '%s': %s (%s)", cli_vis(lease), cli_strerror(rc), shl_errname(rc));
    return cli_exit_of(rc);
}
