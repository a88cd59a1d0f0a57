/*
 * tools/cmd_ls.c - shmlease ls and shmlease watch: one line per lease.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void print_header(FILE *f)
{
    fprintf(f, "%-24s %-8s %-16s %8s %8s %10s %7s\n", "LEASE", "STATE", "OWNER", "PID", "TOKEN",
            "REMAINING", "WAITERS");
}

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

static int ls_line(void *arg, const shl_lease_detail *d)
{
    FILE *f = arg;
    const shl_lease_info *in = &d->info;
    char rem[32] = "-", note[96], pid[16] = "-";
    if (in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED)
        cli_fmt_ns(in->remaining_ns, rem, sizeof rem);
    if (in->pid)
        snprintf(pid, sizeof pid, "%d", (int)in->pid);
    fprintf(f, "%-24s %-8s %-16s %8s %8llu %10s %7u", d->name, shl_state_name(in->state),
            in->owner[0] ? in->owner : "-", pid, (unsigned long long)in->token, rem, in->waiters);
    if (cli_lock_note(d, note, sizeof note)[0])
        fprintf(f, "  %s", note);
    if (d->renewer_stalled) {
        char age[32];
        uint64_t now = in->now_ns, beat = d->heartbeat_ns;
        fprintf(f, "  renewer stalled: last beat %s ago",
                cli_fmt_ns(now > beat ? now - beat : 0, age, sizeof age));
    }
    fputc('\n', f);
    return 0;
}

int cli_ls_table(shl_table *t, FILE *f)
{
    print_header(f);
    return shl_foreach(t, ls_line, f);
}

int cmd_ls(int argc, char **argv)
{
    static const char usage[] =
        "usage: shmlease ls NAME\n"
        "Lists the table's leases, one line each: name, state (FREE, HELD, EXPIRED,\n"
        "ORPHANED, REVOKED), owner, holder pid, token, remaining time, waiters, and a\n"
        "note when a lease's lock is held mid-change, broken, or its holder died,\n"
        "or when the holder's renewer has missed two heartbeats while the lease is valid.\n"
        "Never waits on a lock.\n";
    int rc = cli_args(usage, argc, argv, 1, 1);
    if (rc)
        return rc < 0 ? 0 : rc;
    shl_table *t;
    if ((rc = cli_open("ls", argv[1], &t)) != 0)
        return rc;
    rc = cli_ls_table(t, stdout);
    shl_close(t);
    return rc == SHL_OK ? 0 : EXIT_REFUSED;
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
          "Shows shmlease ls of the table, refreshed every T (default 500ms). On a\n"
          "terminal the screen is redrawn; q or Ctrl-C exits. --count N stops after N\n"
          "refreshes (without a terminal, the listings follow one another).\n",
          f);
}

int cmd_watch(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        watch_usage(stdout);
        return 0;
    }
    const char *name = NULL;
    uint64_t interval = 500 * UINT64_C(1000000), count = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc) {
            if (cli_duration_ns(argv[++i], &interval) || interval < 1000000) {
                cli_err("watch", "--interval takes a duration of at least 1ms, not '%s'", argv[i]);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            if (cli_u64(argv[++i], &count) || count == 0) {
                cli_err("watch", "--count takes a positive number, not '%s'", argv[i]);
                return EXIT_USAGE;
            }
        } else if (argv[i][0] == '-' || name) {
            cli_err("watch", "unexpected argument '%s'", argv[i]);
            watch_usage(stderr);
            return EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (!name) {
        watch_usage(stderr);
        return EXIT_USAGE;
    }
    shl_table *t;
    int rc = cli_open("watch", name, &t);
    if (rc)
        return rc;
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
    for (uint64_t n = 0; !stop && (!count || n < count); n++) {
        if (tty)
            fputs("\033[H\033[2J", stdout);
        if (cli_ls_table(t, stdout) != SHL_OK)
            rc = EXIT_REFUSED;
        fflush(stdout);
        if (count && n + 1 == count)
            break;
        /* Wait for the interval, a key, or a signal. */
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int ms = (int)(interval / 1000000);
        if (tty) {
            if (poll(&p, 1, ms) > 0) {
                char c;
                if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
                    stop = 1;
            }
        } else {
            struct timespec ts = {(time_t)(interval / 1000000000), (long)(interval % 1000000000)};
            nanosleep(&ts, NULL);
        }
    }
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    shl_close(t);
    return rc;
}
