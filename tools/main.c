/*
 * tools/main.c - the shmlease command: dispatch to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct cli_cmd cmds[] = {
    {"create", "create a table", cmd_create},
    {"tables", "list the tables in /dev/shm (or a directory)", cmd_tables},
    {"ls", "list the leases, one line each (--json)", cmd_ls},
    {"dump", "print everything about the table (--json)", cmd_dump},
    {"check", "verify every invariant of the table", cmd_check},
    {"repair", "repair the table after a crash (--dry-run)", cmd_repair},
    {"revoke", "end a lease's current holder at once", cmd_revoke},
    {"watch", "ls, refreshed live (q or Ctrl-C exits)", cmd_watch},
    {"rm", "remove a table's name", cmd_rm},
    {"doctor", "check what on this host breaks tables", cmd_doctor},
    {"run", "run a command while holding a lease", cmd_run},
    {"elect", "run a command only while leader of an election", cmd_elect},
    {"observe", "print an election's leaders as they come (--json)", cmd_observe},
    {"acquire", "acquire a lease for a script; prints its token", cmd_acquire},
    {"renew", "renew a lease held with --token", cmd_renew},
    {"release", "release a lease held with --token", cmd_release},
    {"read", "print a lease's value", cmd_read},
    {"write", "write a lease's value, with --token", cmd_write},
    {"metrics", "Prometheus metrics of tables (--listen, --textfile)", cmd_metrics},
    {"stress", "run a fault campaign that proves no stale write lands", cmd_stress},
    {"version", "print the library and tool version", cmd_version},
};

#define NCMDS (sizeof cmds / sizeof cmds[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: shmlease COMMAND [ARGS...]   (shmlease COMMAND --help for more)\n\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "\nexit codes: 0 success, 1 refused or problem found, 2 usage error,\n"
               "            3 table could not be opened or created (or was removed),\n"
               "            4 run, elect: lease (leadership) lost, or table removed, and\n"
               "              command stopped,\n"
               "            5 system error\n"
               "durations: seconds, or a number with a unit ns, us, ms, s, m, h, d\n");
}

int main(int argc, char **argv)
{

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv + 1);
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            return cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "shmlease: unknown command '%s'; see 'shmlease --help'\n", cli_vis(argv[1]));
    return EXIT_USAGE;
}
