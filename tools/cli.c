/*
 * tools/cli.c - argument parsing and messages shared by the subcommands.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_err(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "shmlease %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    }
    return 0;
}

int cli_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_duration_ns(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul;
    if (!*end || strcmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcmp(end, "s") == 0)
        mul = 1e9;
    else if (strcmp(end, "us") == 0)
        mul = 1e3;
    else if (strcmp(end, "ns") == 0)
        mul = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mul = 60e9;
    else
        return -1;
    double ns = v * mul;
    if (ns >= 1.8e19)
        return -1;
    *out = (uint64_t)ns;
    return 0;
}

const char *cli_fmt_ns(uint64_t ns, char *buf, unsigned cap)
{
    if (ns >= UINT64_C(1000000000))
        snprintf(buf, cap, "%.3fs", (double)ns / 1e9);
    else if (ns >= 1000000)
        snprintf(buf, cap, "%.1fms", (double)ns / 1e6);
    else if (ns >= 1000)
        snprintf(buf, cap, "%.1fus", (double)ns / 1e3);
    else
        snprintf(buf, cap, "%lluns", (unsigned long long)ns);
    return buf;
}

int cli_open(const char *cmd, const char *name, shl_table **t)
{
    int rc = shl_open(name, NULL, t);
    if (rc != SHL_OK) {
        cli_err(cmd, "cannot open table '%s': %s (%s)", name, shl_strerror(rc), shl_errname(rc));
        return EXIT_TABLE;
    }
    return 0;
}

int cli_args(const char *usage, int argc, char **argv, int min, int max)
{
    if (cli_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return -1;
    }
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            fprintf(stderr, "shmlease %s: unknown option '%s'\n", argv[0], argv[i]);
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
        n++;
    }
    if (n < min || n > max) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    return 0;
}
