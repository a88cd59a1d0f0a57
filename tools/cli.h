/*
 * tools/cli.h - what the shmlease subcommands share.
 *
 * Exit codes, one per kind of outcome, the same in every subcommand (listed in
 * --help and in shmlease(1)):
 *   0  success
 *   1  the operation was refused or found a problem (busy, not held, lost,
 *      check failed, rm of a table with held leases)
 *   2  usage error (bad or missing arguments, invalid names, out-of-range values)
 *   3  the table could not be opened or created (missing, permissions, corrupt),
 *      or it was removed while watched
 *   4  shmlease run, shmlease elect: the lease (the leadership) was lost and
 *      the command was stopped
 *   5  a system resource failed (out of memory, fork, an unexpected system error)
 */
#ifndef SHL_TOOLS_CLI_H
#define SHL_TOOLS_CLI_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "shmlease.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE   2
#define EXIT_TABLE   3
#define EXIT_LOST    4
#define EXIT_SYSTEM  5

struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
};

/* Prints "shmlease CMD: <msg>" on stderr (inside cli_parse(), as
 * cli_usage_err() does). */
void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* shl_strerror(rc), then ": " and the library's shl_last_error() when the
 * refusal left one ("invalid argument: owner: 300 bytes, the limit is 63"),
 * which it empties so that it is told once. The text lasts until the next
 * call. */
const char *cli_strerror(int rc);
/* A usage error, on one line: "shmlease CMD: <msg>; see 'shmlease CMD --help'". */
void cli_usage_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s with every byte outside printable ASCII, and '\', written as \xNN, so
 * that a name from a segment or the command line cannot drive the terminal.
 * Returns one of a few rotating static buffers: valid for the next few calls. */
const char *cli_vis(const char *s);

/* s as a JSON string, quoted; bytes outside printable ASCII as \u00NN. */
void cli_json_str(FILE *f, const char *s);
/* ... len bytes at p, any bytes (a value). */
void cli_json_mem(FILE *f, const void *p, size_t len);

/* True when argv has -h or --help before any "--". */
int cli_wants_help(int argc, char **argv);

/* Parses a whole decimal number (a leading 0 is not octal); 0 on success. */
int cli_u64(const char *s, uint64_t *out);
/* ... decimal, or hexadecimal after "0x" (as shmlease stress prints seeds). */
int cli_x64(const char *s, uint64_t *out);

/* Parses a duration as timeout(1) does: a positive number, fractions allowed,
 * with an optional unit ns, us, ms, s, m, h or d (seconds without one).
 * NaN, infinities, signs, zero and more than INT64_MAX ns are refused: then a
 * message naming `opt` and the rule is printed for `cmd`, and -1 returned. */
int cli_duration(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* A wait as --wait takes it: a duration, "inf", "infinity" or "forever"
 * (SHL_WAIT_FOREVER), or 0 (do not wait: *out = 0). */
int cli_wait(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* Formats ns as "1.250s", "12ms", "830us". */
const char *cli_fmt_ns(uint64_t ns, char *buf, unsigned cap);

/* The exit code of a library error (EXIT_USAGE for SHL_EINVAL, EXIT_SYSTEM
 * for SHL_ENOMEM and SHL_ESYS, EXIT_REFUSED for the rest). */
int cli_exit_of(int rc);

/* Formats a size as "6.5 MiB", "812 KiB", "100 bytes". */
const char *cli_fmt_bytes(uint64_t b, char *buf, unsigned cap);
/* n with a comma between thousands ("6,344"), in buf. */
const char *cli_fmt_count(uint64_t n, char *buf, unsigned cap);
/* The name of a statfs(2) f_type ("tmpfs", "xfs", ...). */
const char *cli_fs_name(int64_t type);
/* After a table was created or opened: a warning on stderr when it is on a
 * file system other than tmpfs (shl_place_get()). */
void cli_place_warn(const char *cmd, const char *name);
/* The message of rc from an operation on the table NAME: shl_strerror(),
 * but for an etcd table a refusal names TLS and the credentials, not
 * segments. */
const char *cli_table_strerror(const char *name, int rc);
/* After shl_open(NAME) failed with rc: the message, and for a refused or
 * missing directory of a path table, which and why. */
void cli_open_failed(const char *cmd, const char *name, int rc);
/* ... the second part alone: why, when it was the directory's fault. */
void cli_place_why(const char *cmd, const char *name, int rc);

/* Name checks done before anything is opened or acquired, with the rule in
 * the message; 0 when valid, else EXIT_USAGE after the message. */
int cli_table_name(const char *cmd, const char *name);
/* Whether NAME is an etcd table's (etcd:// or etcds://). */
int cli_etcd_name(const char *name);
/* Where the etcd table NAME (etcd[s]://ENDPOINTS/TABLE, accepted by
 * shl_open()) lives, written to f: "etcd endpoints E[ (TLS)], key prefix
 * "TABLE/"". */
void cli_etcd_where(FILE *f, const char *name);
/* After shl_open(NAME) gave rc: when an etcd table is SHL_ENOTSUP (no etcd
 * support in this build, or libcurl not loadable), a line saying which. */
void cli_etcd_unsupported(const char *cmd, const char *name, int rc);
int cli_lease_name(const char *cmd, const char *name);
int cli_owner_name(const char *cmd, const char *owner);

/* Opens an existing table, printing why not; returns EXIT_USAGE for an
 * invalid name, EXIT_TABLE when it does not open. */
int cli_open(const char *cmd, const char *name, shl_table **t);
/* EXIT_TABLE, after saying so, when the table open as t was removed (its
 * name gone or naming another file: shl_table_check()); else 0. */
int cli_removed(const char *cmd, const char *name, shl_table *t);

/* One option of a subcommand. */
enum cli_kind {
    CLI_FLAG,     /* int *: set to 1 */
    CLI_STRING,   /* const char **  */
    CLI_DURATION, /* uint64_t * ns (cli_duration) */
    CLI_NUMBER,   /* uint64_t * (cli_u64) */
    CLI_WAIT,     /* uint64_t * ns, SHL_WAIT_FOREVER or 0 (cli_wait) */
    CLI_CODE,     /* uint64_t *: an exit code, 0..255 */
};

struct cli_opt {
    const char *name;  /* "--ttl" */
    const char *alias; /* "-n", or NULL */
    enum cli_kind kind;
    void *out;
};

/* What cli_parse() found besides the options. */
struct cli_operands {
    const char *v[16];
    int n;
    char **rest; /* with want_rest: the words after "--" (NULL when no "--") */
};

/* Parses argv[1..] of subcommand argv[0]: -h/--help prints usage on stdout
 * and returns -1; options from `opts` (NULL-named end); operands named by
 * `names` (NULL-terminated, at most 16, for messages), the first min required. "--" ends the
 * options: with want_rest, the words after it are the command (ops->rest); otherwise they are
 * operands, so that a lease named "-x" can be given. Any error prints one line that names the
 * argument and where the help is, and returns EXIT_USAGE. An option's value may also be
 * given as "--opt=value". */
int cli_parse(int argc, char **argv, void (*usage)(FILE *f), const struct cli_opt *opts,
              const char *const *names, int min, int want_rest, struct cli_operands *ops);

/* How run and acquire take a lease: the options they share (--ttl, -w,
 * -n, -E, -s, --owner), and the acquire itself. */
struct cli_take {
    const char *table, *lease, *owner;
    uint64_t ttl;      /* default 10s */
    uint64_t wait;     /* 0: fail at once; SHL_WAIT_FOREVER: no bound */
    uint64_t conflict; /* exit code when the lease is busy or the wait ends (-E) */
    int nonblock;      /* -n: fail at once (the default, said aloud) */
    int shared;        /* -s: a shared (reader) lease */
};

#define CLI_TAKE_OPTS 6 /* entries cli_take_opts() fills */

/* Sets k's defaults and fills opts[0 .. CLI_TAKE_OPTS - 1] with the shared
 * options, which write into k. */
void cli_take_opts(struct cli_take *k, struct cli_opt *opts);
/* After cli_parse(): -n against --wait, and the names; 0 or EXIT_USAGE
 * after saying why. */
int cli_take_check(const char *cmd, const struct cli_take *k);
/* Acquires as k says (*gen: with shared, the last exclusive token before);
 * 0, or the exit code after saying why (busy or timed out: k->conflict,
 * with the holder named). */
int cli_take(const char *cmd, shl_table *t, const struct cli_take *k, uint64_t *token,
             uint64_t *gen);

/* Opens the table NAME, creating it with shl_options_init()'s defaults
 * when missing; refuses a manual-clock table (cmd keeps leases in real
 * time). 0, or the exit code after saying why. */
int cli_open_or_create(const char *cmd, const char *name, shl_table **t);

/* After an acquire of `lease` in t was refused with rc (SHL_EBUSY,
 * SHL_ETIMEDOUT): one line on stderr naming the holder, its pid, token and
 * time left, and "ORPHANED: holder pid N is dead" when the kernel proved
 * it, with when its lease frees; "already held by you" when the holder is
 * `owner` itself (a script that acquires twice). */
void cli_busy(const char *cmd, shl_table *t, const char *lease, const char *owner, int rc);

/* Lists the table as `shmlease ls` does: columns as wide as their widest
 * entry; a lease not held shows its last holder as "(last: OWNER)". */
int cli_ls_table(shl_table *t, FILE *f);
/* ... as `shmlease ls --json` does, for the table NAME open as t. */
int cli_ls_json(shl_table *t, const char *name, FILE *f);
/* A short note on a lease's lock ("" when there is nothing to say). */
const char *cli_lock_note(const shl_lease_detail *d, char *buf, unsigned cap);

/* A command run while a lease or a term is held (run, elect): tools/cli_child.c. */
#define CLI_EXEC_FAILED 127                        /* the command could not be started */
#define CLI_GRACE_NS    (UINT64_C(2) * 1000000000) /* --grace by default */
#define CLI_MIN_TTL_NS  UINT64_C(1000000)

/* What the renewer would refuse after the acquire (shl_renewer_start's
 * SHL_EINVAL), checked before anything is acquired: ttl, margin (0: the
 * default ttl/10) and max_hold (0: none). 0, or -1 after a usage error
 * with the rule. */
int cli_child_timing(const char *cmd, uint64_t ttl, uint64_t margin, uint64_t max_hold);

struct cli_child {
    const char *cmd;   /* "run", "elect": for messages */
    const char *what;  /* "lease", "leadership of": for messages */
    const char *lease; /* its name, for messages */
    uint64_t grace;    /* after SIGTERM on loss, SIGKILL after this */
    int lost;          /* set by cli_child_supervise(): 1 when it ended on a loss */
    int sfd, pidfd;
    int pid;
    sigset_t old; /* the signal mask before cli_child_signals() */
};

/* What keeps the lease or the term: the fd that turns readable on loss, the
 * loss reason (0 while held), and its end (release: the command ended, give
 * it back; else stop keeping it after a loss): SHL_OK, or an error when the
 * lease had been lost. */
struct cli_keeper {
    int fd;
    int (*lost)(void *k);
    int (*end)(void *k, int release);
    void *k;
};

/* Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT and opens a signalfd for them,
 * to pass them on to the command. Call before any thread starts. 0 or -1
 * after saying why. */
int cli_child_signals(struct cli_child *c);
/* The command's environment: ours without our secrets and any SHMLEASE_*
 * variable that we set, plus `vars` (NUL-separated "NAME=value" words, len
 * bytes, at most 8, kept by the caller). Built before fork: the child only
 * execs. NULL when out of memory. */
char **cli_child_env(const char *vars, size_t len);
/* The command after "--" (cli_parse()'s ops.rest): 0, or EXIT_USAGE after
 * saying it is missing. */
int cli_child_command(const char *cmd, char **rest);
/* Starts argv with env; it dies with us. 0 or -1 after saying why. */
int cli_child_start(struct cli_child *c, char **argv, char **env);
/* Runs the command until it ends (then k->end(release), and its exit
 * status; EXIT_LOST when the release finds the lease lost), or the keeper
 * reports a loss (then SIGTERM, SIGKILL after the grace, k->end(0), and
 * EXIT_LOST). Signals received are passed on. c->lost tells a loss. */
int cli_child_supervise(struct cli_child *c, const struct cli_keeper *k);
/* Closes the signalfd. */
void cli_child_close(struct cli_child *c);
/* The words for a renewer's loss reason (SHL_LOSS_*). */
const char *cli_loss_text(int reason);

/* The subcommands. */
int cmd_version(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_acquire(int argc, char **argv);
int cmd_renew(int argc, char **argv);
int cmd_release(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_write(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_tables(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_revoke(int argc, char **argv);
int cmd_stress(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_elect(int argc, char **argv);
int cmd_observe(int argc, char **argv);

#endif
