/*
 * tools/cli.c - argument parsing and messages shared by the subcommands.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* While cli_parse() runs, a message is a usage error: it ends by saying
 * where the help is, on the same line. */
static int parsing;

static void vmsg(const char *cmd, int usage, const char *fmt, va_list ap)
{
    fprintf(stderr, "shmlease %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    if (usage)
        fprintf(stderr, "; see 'shmlease %s --help'", cmd);
    fputc('\n', stderr);
}

void cli_err(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd, parsing, fmt, ap);
    va_end(ap);
}

const char *cli_strerror(int rc)
{
    static char buf[SHL_DETAIL_MAX + 128];
    const char *d = shl_last_error();
    if (!*d)
        return shl_strerror(rc);
    snprintf(buf, sizeof buf, "%s: %s", shl_strerror(rc), d);
    shl_clear_error();
    return buf;
}

void cli_usage_err(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd, 1, fmt, ap);
    va_end(ap);
}

#define VIS_BUFS 4
#define VIS_CAP  (4 * 256 + 1)

const char *cli_vis(const char *s)
{
    static char bufs[VIS_BUFS][VIS_CAP];
    static unsigned next;
    char *b = bufs[next++ % VIS_BUFS];
    size_t n = 0;
    for (; *s && n + 8 < VIS_CAP; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < ' ' || c > '~' || c == '\\')
            n += (size_t)snprintf(b + n, VIS_CAP - n, "\\x%02x", c);
        else
            b[n++] = (char)c;
    }
    if (*s) /* longer than any name: say so rather than cut silently */
        n += (size_t)snprintf(b + n, VIS_CAP - n, "...");
    b[n] = '\0';
    return b;
}

void cli_json_mem(FILE *f, const void *p, size_t len)
{
    const unsigned char *s = p;
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < ' ' || c > '~')
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void cli_json_str(FILE *f, const char *s)
{
    cli_json_mem(f, s, strlen(s));
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

static int digits(const char *s, int hex)
{
    size_t n = hex ? strspn(s, "0123456789abcdefABCDEF") : strspn(s, "0123456789");
    return n > 0 && s[n] == '\0';
}

static int parse_u64(const char *s, int base, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_u64(const char *s, uint64_t *out)
{
    if (!s || !digits(s, 0))
        return -1;
    return parse_u64(s, 10, out);
}

int cli_x64(const char *s, uint64_t *out)
{
    if (s && (strncmp(s, "0x", 2) == 0 || strncmp(s, "0X", 2) == 0))
        return digits(s + 2, 1) ? parse_u64(s + 2, 16, out) : -1;
    return cli_u64(s, out);
}

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1},
    {"us", UINT64_C(1000)},
    {"ms", UINT64_C(1000000)},
    {"", UINT64_C(1000000000)},
    {"s", UINT64_C(1000000000)},
    {"m", UINT64_C(60) * 1000000000},
    {"h", UINT64_C(3600) * 1000000000},
    {"d", UINT64_C(86400) * 1000000000},
};

#define DURATION_RULE                                                                              \
    "a duration is a number of seconds, or a number with a unit ns, us, ms, s, m, h or d "         \
    "(e.g. 30s, 1.5m, 250ms), more than zero and at most 292 years"

/* Exact in 128 bits: 10^20 (more than INT64_MAX) times a day in ns, and 10^18 times
 * the same; digits after the 18th of a fraction are below an attosecond of a day. */
#define WHOLE_DIGITS 20
#define FRAC_DIGITS  18

static unsigned __int128 decimal(const char *s, size_t n)
{
    unsigned __int128 v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned)(s[i] - '0');
    return v;
}

/* "12", "12.5", ".5" followed by a unit, in ns, exactly (fractions of a ns
 * dropped); -1 for anything else (signs, exponents, hex, nan, inf), 1 when
 * longer than INT64_MAX ns. */
static int parse_duration(const char *s, uint64_t *ns)
{
    size_t ni = strspn(s, "0123456789"), nf = 0;
    if (s[ni] == '.')
        nf = strspn(s + ni + 1, "0123456789");
    if (ni + nf == 0)
        return -1;
    const char *unit = s + ni + (s[ni] == '.' ? 1 + nf : 0);
    size_t u = 0;
    while (u < sizeof units / sizeof units[0] && strcmp(unit, units[u].name) != 0)
        u++;
    if (u == sizeof units / sizeof units[0])
        return -1;
    size_t lead = 0; /* leading zeros do not count towards the length */
    while (lead + 1 < ni && s[lead] == '0')
        lead++;
    if (ni - lead > WHOLE_DIGITS)
        return 1;
    size_t k = nf < FRAC_DIGITS ? nf : FRAC_DIGITS;
    unsigned __int128 pow = 1;
    for (size_t i = 0; i < k; i++)
        pow *= 10;
    unsigned __int128 v =
        decimal(s + lead, ni - lead) * units[u].ns + decimal(s + ni + 1, k) * units[u].ns / pow;
    if (v > INT64_MAX)
        return 1;
    *ns = (uint64_t)v;
    return 0;
}

int cli_duration(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    uint64_t ns = 0;
    int r = parse_duration(s, &ns);
    if (r != 0 || ns == 0) {
        cli_err(cmd, "%s '%s'%s: %s", opt, cli_vis(s),
                r < 0   ? ""
                : r > 0 ? " is too long"
                        : " is zero (or under a nanosecond)",
                DURATION_RULE);
        return -1;
    }
    *out = ns;
    return 0;
}

int cli_wait(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (strcmp(s, "inf") == 0 || strcmp(s, "infinity") == 0 || strcmp(s, "forever") == 0) {
        *out = SHL_WAIT_FOREVER;
        return 0;
    }
    uint64_t ns;
    if (cli_u64(s, &ns) == 0 && ns == 0) { /* as flock -w 0: do not wait */
        *out = 0;
        return 0;
    }
    return cli_duration(cmd, opt, s, out);
}

/* ns / (step * 10^decimals) with `decimals` decimals and `unit` after, as
 * "%.<decimals>f" of the double quotient prints it, in integers: ls prints
 * one per held lease, and printf's floating point was a tenth of ls on a
 * table of held leases. Below 10^15 ns the double is within 10^-10 of the
 * exact quotient, and a remainder that is not exactly half a step is at
 * least 1 ns (10^-9 of a unit) from the rounding boundary, so both round
 * alike. 0 (nothing written) for an exact half, which printf rounds by the
 * double's binary value, for a larger ns, or when buf is too small. */
static int fmt_fixed(uint64_t ns, uint64_t step, unsigned decimals, const char *unit, char *buf,
                     unsigned cap)
{
    uint64_t q = ns / step, r = ns % step;
    if (ns >= UINT64_C(1000000000000000) || 2 * r == step)
        return 0;
    q += 2 * r > step;
    char d[32];
    int i = (int)sizeof d;
    for (unsigned k = 0; k < decimals; k++, q /= 10)
        d[--i] = (char)('0' + q % 10);
    d[--i] = '.';
    do
        d[--i] = (char)('0' + q % 10);
    while ((q /= 10) != 0);
    size_t n = sizeof d - (size_t)i, u = strlen(unit);
    if (n + u + 1 > cap)
        return 0;
    memcpy(buf, d + i, n);
    memcpy(buf + n, unit, u + 1);
    return 1;
}

const char *cli_fmt_ns(uint64_t ns, char *buf, unsigned cap)
{
    if (ns >= UINT64_C(1000000000)) {
        if (!fmt_fixed(ns, 1000000, 3, "s", buf, cap))
            snprintf(buf, cap, "%.3fs", (double)ns / 1e9);
    } else if (ns >= 1000000) {
        if (!fmt_fixed(ns, 100000, 1, "ms", buf, cap))
            snprintf(buf, cap, "%.1fms", (double)ns / 1e6);
    } else if (ns >= 1000) {
        if (!fmt_fixed(ns, 100, 1, "us", buf, cap))
            snprintf(buf, cap, "%.1fus", (double)ns / 1e3);
    } else {
        snprintf(buf, cap, "%lluns", (unsigned long long)ns);
    }
    return buf;
}

int cli_exit_of(int rc)
{
    switch (rc) {
    case SHL_OK:
        return 0;
    case SHL_EINVAL:
        return EXIT_USAGE;
    case SHL_ENOMEM:
    case SHL_ESYS:
        return EXIT_SYSTEM;
    default:
        return EXIT_REFUSED;
    }
}

int cli_etcd_name(const char *name)
{
    return strncmp(name, "etcd://", 7) == 0 || strncmp(name, "etcds://", 8) == 0;
}

void cli_etcd_where(FILE *f, const char *name)
{
    int tls = strncmp(name, "etcds://", 8) == 0;
    const char *eps = name + (tls ? 8 : 7);
    const char *slash = strchr(eps, '/');
    int n = slash ? (int)(slash - eps) : (int)strlen(eps);
    fprintf(f, "etcd endpoints %.*s%s, key prefix \"", n, eps, tls ? " (TLS)" : "");
    /* A table name's '/' is ':' in its key prefix (shmlease(3), ETCD TABLES). */
    for (const char *c = slash ? slash + 1 : ""; *c; c++)
        fputc(*c == '/' ? ':' : *c, f);
    fputs("/\"", f);
}

/* The rules of lib/shmlease.h (shl_open, SHL_NAME_MAX, SHL_OWNER_MAX),
 * checked here so that the message can state them. */
int cli_table_name(const char *cmd, const char *name)
{
    /* An etcd table: the library parses it strictly (SHL_EINVAL). */
    if (cli_etcd_name(name))
        return 0;
    shl_place p; /* the library's own rule, without opening anything */
    if (shl_place_get(name, &p) != SHL_EINVAL)
        return 0;
    cli_usage_err(
        cmd,
        "invalid table name '%s': a table name is 1 to %d characters of A-Z a-z 0-9 . _ -, "
        "not starting with '.' (a leading '/' is allowed), or a path of at most %d "
        "characters such as /run/lock/jobs.shl (components of those characters, none "
        "empty, '.' or '..'), or etcd[s]://HOST:PORT[,HOST:PORT...]/TABLE",
        cli_vis(name), SHL_TABLE_NAME_MAX, SHL_TABLE_NAME_MAX);
    return EXIT_USAGE;
}

/* 1..max bytes from lo to '~'. */
static int printable(const char *s, unsigned max, unsigned char lo)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < lo || (unsigned char)s[i] > '~')
            return 0;
    return n > 0 && n <= max;
}

int cli_lease_name(const char *cmd, const char *name)
{
    if (printable(name, SHL_NAME_MAX, '!'))
        return 0;
    cli_usage_err(cmd,
                  "invalid lease name '%s': a lease name is 1 to %d printable ASCII characters, "
                  "without spaces",
                  cli_vis(name), SHL_NAME_MAX);
    return EXIT_USAGE;
}

int cli_owner_name(const char *cmd, const char *owner)
{
    if (printable(owner, SHL_OWNER_MAX, ' '))
        return 0;
    cli_usage_err(cmd,
                  "invalid owner '%s': an owner is 1 to %d printable ASCII characters (spaces "
                  "allowed)",
                  cli_vis(owner), SHL_OWNER_MAX);
    return EXIT_USAGE;
}

int cli_open(const char *cmd, const char *name, shl_table **t)
{
    *t = NULL;
    if (cli_table_name(cmd, name))
        return EXIT_USAGE;
    int rc = shl_open(name, NULL, t);
    if (rc != SHL_OK) {
        cli_open_failed(cmd, name, rc);
        cli_etcd_unsupported(cmd, name, rc);
        if (rc == SHL_EREMOVED)
            cli_err(cmd,
                    "(its name still names a table marked removed by an rm that did not "
                    "finish: shmlease rm %s removes the name)",
                    name);
        return EXIT_TABLE;
    }
    cli_place_warn(cmd, name);
    return 0;
}

int cli_removed(const char *cmd, const char *name, shl_table *t)
{
    if (shl_table_check(t) != SHL_EREMOVED)
        return 0;
    cli_err(cmd,
            "table '%s' was removed: its holders have been told (SHL_EREMOVED); a new "
            "open of the name finds nothing or a new table",
            name);
    return EXIT_TABLE;
}

void cli_etcd_unsupported(const char *cmd, const char *name, int rc)
{
    if (rc != SHL_ENOTSUP || !cli_etcd_name(name))
        return;
#if SHL_HAVE_ETCD
    cli_err(cmd, "(etcd tables need libcurl, loaded when first used: libcurl.so.4 could not be "
                 "loaded; on Debian: apt-get install libcurl4)");
#else
    cli_err(cmd, "(this build has no etcd support: it was built with ETCD=0)");
#endif
}

/* The option named by a, or by its first n bytes ("--ttl" of "--ttl=5s"). */
static const struct cli_opt *find_opt(const struct cli_opt *opts, const char *a, size_t n)
{
    for (; opts && opts->name; opts++)
        if ((strlen(opts->name) == n && strncmp(a, opts->name, n) == 0) ||
            (opts->alias && strlen(opts->alias) == n && strncmp(a, opts->alias, n) == 0))
            return opts;
    return NULL;
}

/* Takes the value of option o; 0 or -1 after a message. */
static int opt_value(const char *cmd, const struct cli_opt *o, const char *v)
{
    switch (o->kind) {
    case CLI_STRING:
        *(const char **)o->out = v;
        return 0;
    case CLI_DURATION:
        return cli_duration(cmd, o->name, v, o->out);
    case CLI_WAIT:
        return cli_wait(cmd, o->name, v, o->out);
    case CLI_CODE:
        if (cli_u64(v, o->out) == 0 && *(uint64_t *)o->out <= 255)
            return 0;
        cli_err(cmd, "%s '%s': an exit code is a decimal number from 0 to 255", o->name,
                cli_vis(v));
        return -1;
    case CLI_NUMBER:
        if (cli_u64(v, o->out) == 0)
            return 0;
        cli_err(cmd, "%s '%s': not a decimal number", o->name, cli_vis(v));
        return -1;
    case CLI_FLAG:
        break;
    }
    return -1;
}

/* A word of short options, as getopt(3) takes them: "-ns" is -n -s, and a
 * short option that takes a value takes the rest of the word ("-w5") or,
 * when the word ends with it, the next word ("-nw 5"). *i moves past what
 * was used; 0, or -1 after a message. */
static int short_group(const char *cmd, int argc, char **argv, int *i, const struct cli_opt *opts)
{
    const char *a = argv[*i];
    for (size_t k = 1; a[k]; k++) {
        char one[3] = {'-', a[k], 0};
        const struct cli_opt *o = find_opt(opts, one, 2);
        if (!o) {
            cli_err(cmd, "unknown option '%s' in '%s'", cli_vis(one), cli_vis(a));
            return -1;
        }
        if (o->kind == CLI_FLAG) {
            *(int *)o->out = 1;
            continue;
        }
        if (a[k + 1])
            return opt_value(cmd, o, a + k + 1);
        if (*i + 1 == argc) {
            cli_err(cmd, "%s needs a value", o->name);
            return -1;
        }
        return opt_value(cmd, o, argv[++*i]);
    }
    return 0;
}

static int parse_words(int argc, char **argv, const struct cli_opt *opts, const char *const *names,
                       int want_rest, struct cli_operands *ops)
{
    const char *cmd = argv[0];
    int max = 0, operands_only = 0;
    while (names[max])
        max++;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!operands_only && strcmp(a, "--") == 0) {
            if (want_rest) {
                ops->rest = argv + i + 1;
                return 0;
            }
            operands_only = 1;
            continue;
        }
        if (!operands_only && a[0] == '-' && a[1]) {
            /* "--opt=value", as getopt_long(3) takes it */
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
            size_t n = eq ? (size_t)(eq - a) : strlen(a);
            const struct cli_opt *o = find_opt(opts, a, n);
            if (!o && a[1] != '-' && a[2]) {
                if (short_group(cmd, argc, argv, &i, opts))
                    return -1;
                continue;
            }
            if (!o) {
                char name[80];
                snprintf(name, sizeof name, "%.*s", (int)n, a);
                cli_err(cmd, "unknown option '%s'%s", cli_vis(name),
                        max ? " (\"--\" ends the options, for a name that starts with '-')" : "");
                return -1;
            }
            if (o->kind == CLI_FLAG) {
                if (eq) {
                    cli_err(cmd, "%s takes no value", o->name);
                    return -1;
                }
                *(int *)o->out = 1;
                continue;
            }
            if (!eq && i + 1 == argc) {
                cli_err(cmd, "%s needs a value", o->name);
                return -1;
            }
            if (opt_value(cmd, o, eq ? eq + 1 : argv[++i]))
                return -1;
            continue;
        }
        if (ops->n == max) {
            cli_err(cmd, "unexpected argument '%s'%s", cli_vis(a),
                    want_rest ? " (the command goes after --)" : "");
            return -1;
        }
        ops->v[ops->n++] = a;
    }
    return 0;
}

int cli_parse(int argc, char **argv, void (*usage)(FILE *f), const struct cli_opt *opts,
              const char *const *names, int min, int want_rest, struct cli_operands *ops)
{
    memset(ops, 0, sizeof *ops);
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return -1;
    }
    parsing = 1;
    int bad = parse_words(argc, argv, opts, names, want_rest, ops) != 0;
    if (!bad && ops->n < min) {
        cli_err(argv[0], "missing %s", names[ops->n]);
        bad = 1;
    }
    parsing = 0;
    return bad ? EXIT_USAGE : 0;
}
