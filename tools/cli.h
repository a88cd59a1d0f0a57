/*
 * tools/cli.h - what the shmlease subcommands share.
 *
 * Exit codes (documented in --help and the man page):
 *   0  success
 *   1  the operation was refused or found a problem (busy, lost, check failed)
 *   2  usage error (bad or missing arguments)
 *   3  the table could not be opened or created (missing, permissions, corrupt)
 *   4  shmlease run: the lease was lost and the command was stopped
 */
#ifndef SHL_TOOLS_CLI_H
#define SHL_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "shmlease.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE   2
#define EXIT_TABLE   3
#define EXIT_LOST    4

struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
};

/* Prints "shmlease CMD: <msg>" on stderr. */
void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when argv has -h or --help. */
int cli_wants_help(int argc, char **argv);

/* Parses a whole unsigned number (decimal, or 0x/0 prefixes); 0 on success. */
int cli_u64(const char *s, uint64_t *out);

/* Parses a duration: "250ms", "2s", "1.5s", "100us", "10ns", "3m"; a bare
 * number is milliseconds. 0 on success. */
int cli_duration_ns(const char *s, uint64_t *out);

/* Formats ns as "1.250s", "12ms", "830us". */
const char *cli_fmt_ns(uint64_t ns, char *buf, unsigned cap);

/* Opens an existing table, printing why not; returns EXIT_TABLE on failure. */
int cli_open(const char *cmd, const char *name, shl_table **t);

/* Handles --help (prints usage on stdout, returns -1) and checks that argv
 * has min..max operands and no option (else usage on stderr, EXIT_USAGE).
 * 0 when the arguments are fine. */
int cli_args(const char *usage, int argc, char **argv, int min, int max);

/* Lists the table as `shmlease ls` does. */
int cli_ls_table(shl_table *t, FILE *f);
/* A short note on a lease's lock ("" when there is nothing to say). */
const char *cli_lock_note(const shl_lease_detail *d, char *buf, unsigned cap);

/* The subcommands. */
int cmd_version(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_revoke(int argc, char **argv);
int cmd_stress(int argc, char **argv);

#endif
