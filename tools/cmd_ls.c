/*
 * tools/cmd_ls.c - shmlease ls and shmlease watch: one line per lease.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *cli_lock_note(const shl_lease_detail *d, char *buf, unsigned cap)
{
    buf[0] = '\0';
    if (d->lock == SHL_LOCK_DEAD)
        snprintf(buf, cap, "lock holder %d died: next operation recovers", (int)d->lock_pid);
    else if (d->lock == SHL_LOCK_BROKEN)
        snprintf(buf, cap, "lock unrecoverable: run shmlease repair");
    else if (d->lock == SHL_LOCK_HELD)
        snprintf(buf, cap, "locked by pid %d%s", (int)d->lock_pid, d->stable ? "" : " mid-change");
    return buf;
}

static void ls_usage(FILE *f)
{
    fputs("usage: shmlease ls NAME [--json]\n"
          "Lists the table's leases, one line each: name, state (FREE, HELD, EXPIRED,\n"
          "ORPHANED, REVOKED), owner (for a lease nobody holds, the last holder as\n"
          "\"(last: OWNER)\"), holder pid, token, remaining time, waiters, and a\n"
          "note when a lease's lock is held mid-change, broken, or its holder died,\n"
          "or when the holder's renewer has missed two heartbeats while the lease is valid.\n"
          "A lease held shared is SHARED, with one \"(shared)\" line per shared holder\n"
          "(state, owner, pid, token, remaining time) after it.\n"
          "Bytes of names and owners outside printable ASCII are shown as \\xNN.\n"
          "Columns are as wide as their widest entry. --json prints {\"table\", \"leases\":\n"
          "[{\"name\", \"state\", \"owner\", \"last_owner\", \"pid\", \"token\",\n"
          "\"remaining_ns\", \"waiters\", \"shared\": [{\"owner\", \"pid\", \"token\", \"state\",\n"
          "\"remaining_ns\"}]}]}, owners whole (null where there is none).\n"
          "Never waits on a lock. A table removed meanwhile (its name gone, or naming\n"
          "another file) is said so after the listing, exit 3.\n",
          f);
}

static const char *const table_operand[] = {"NAME", NULL};

int cmd_ls(int argc, char **argv)
{
    int json = 0;
    const struct cli_opt opts[] = {
        {"--json", NULL, CLI_FLAG, &json},
        {NULL, NULL, 0, NULL},
    };
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, ls_usage, opts, table_operand, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    shl_table *t;
    if ((rc = cli_open("ls", ops.v[0], &t)) != 0)
        return rc;
    rc = json ? cli_ls_json(t, ops.v[0], stdout) : cli_ls_table(t, stdout);
    int ex = cli_removed("ls", ops.v[0], t);
    shl_close(t);
    return ex ? ex : cli_exit_of(rc);
}

/* ---------------------------------------------------------------- watch */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void watch_usage(FILE *f)
{
    fputs("usage: shmlease watch NAME [--interval T] [--count N]\n"
          "Shows shmlease ls of the table, refreshed every T (default 500ms, at least\n"
          "1ms). On a terminal the screen is redrawn; q or Ctrl-C exits. --count N stops\n"
          "after N refreshes (without a terminal, the listings follow one another).\n"
          "When the table's name is removed (or given to a new table), watch says so and\n"
          "exits with status 3.\n",
          f);
}

/* The file that NAME names now (in /dev/shm, or its path); 0 when none. */
static int named_file(const char *name, struct stat *st)
{
    shl_place p;
    return shl_place_get(name, &p) == SHL_OK && stat(p.path, st) == 0;
}

/* Whether NAME still names the table being watched (open as t): the same
 * segment file, not marked removed (shl_table_check()), or for an etcd
 * table, its meta record (a fresh open finds it; a cluster that does not
 * answer is not a removal). */
static int still_named(const char *name, shl_table *t)
{
    if (cli_etcd_name(name)) {
        shl_table *e;
        int rc = shl_open(name, NULL, &e);
        shl_close(e);
        return rc != SHL_ENOENT && rc != SHL_ECORRUPT;
    }
    return shl_table_check(t) != SHL_EREMOVED;
}

/* Waits for the interval, a key (q exits), or a signal. */
static void pause_for(uint64_t interval, int tty)
{
    if (tty) {
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        uint64_t ms = interval / 1000000;
        if (poll(&p, 1, ms > INT32_MAX ? INT32_MAX : (int)ms) > 0) {
            char c;
            if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
                stop = 1;
        }
    } else {
        struct timespec ts = {(time_t)(interval / 1000000000), (long)(interval % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

int cmd_watch(int argc, char **argv)
{
    uint64_t interval = 500 * UINT64_C(1000000), count = UINT64_MAX; /* MAX: until stopped */
    const struct cli_opt opts[] = {
        {"--interval", NULL, CLI_DURATION, &interval},
        {"--count", NULL, CLI_NUMBER, &count},
        {NULL, NULL, 0, NULL},
    };
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, watch_usage, opts, table_operand, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (interval < 1000000) {
        cli_usage_err("watch", "--interval must be at least 1ms");
        return EXIT_USAGE;
    }
    if (count == 0) {
        cli_usage_err("watch", "--count takes a positive number, not 0");
        return EXIT_USAGE;
    }
    const char *name = ops.v[0];
    shl_table *t;
    if ((rc = cli_open("watch", name, &t)) != 0)
        return rc;
    struct stat first;
    int named = named_file(name, &first);
    int tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    struct termios saved, raw;
    if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    } else {
        tty = 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = 0;
    for (uint64_t n = 0; !stop && n < count; n++) {
        if (!still_named(name, t)) {
            rc = EXIT_TABLE;
            break;
        }
        if (tty)
            fputs("\033[H\033[2J", stdout);
        if (cli_ls_table(t, stdout) != SHL_OK)
            rc = EXIT_REFUSED;
        fflush(stdout);
        if (n + 1 == count)
            break;
        pause_for(interval, tty);
    }
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    if (rc == EXIT_TABLE)
        cli_err("watch", "table '%s' was removed%s", name,
                named && named_file(name, &first) ? " and created again" : "");
    shl_close(t);
    return rc;
}
