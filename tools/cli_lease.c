/*
 * tools/cli_lease.c - what run and acquire share: the table opened or made
 * with the defaults, and why an acquire was refused, in words: who holds the
 * lease (owner, pid, token, time left), and whether the kernel proved that
 * holder dead (then when its lease frees).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* "; ORPHANED: holder pid N is dead ..." when the holder is proven dead. */
static void orphan_note(FILE *f, shl_table *t, const shl_lease_info *in)
{
    if (in->state != SHL_STATE_ORPHANED)
        return;
    fprintf(f, "; ORPHANED: holder pid %d is dead", (int)in->pid);
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return;
    char d[32];
    if (ti.policy & SHL_POLICY_RECLAIM_ORPHANS)
        fprintf(f,
                ", its lease is taken over %s after the death was first seen (retry, or "
                "wait with -w)",
                cli_fmt_ns((uint64_t)ti.reclaim_delay_ms * 1000000, d, sizeof d));
    else
        fputs(", but this table keeps a dead holder's lease until its expiry "
              "(created with --no-reclaim)",
              f);
}

void cli_busy(const char *cmd, shl_table *t, const char *lease, const char *owner, int rc)
{
    shl_lease_info in;
    if (shl_stat(t, lease, &in) != SHL_OK ||
        (in.state != SHL_STATE_HELD && in.state != SHL_STATE_ORPHANED)) {
        /* Freed since the refusal: the code says it all. */
        cli_err(cmd, "cannot acquire '%s': %s (%s)", cli_vis(lease), cli_strerror(rc),
                shl_errname(rc));
        return;
    }
    char left[32];
    if (owner && in.shared <= 1 && strcmp(in.owner, owner) == 0) {
        cli_err(cmd,
                "lease '%s' is already held by you (owner '%s', token %" PRIu64
                ", %s left): renew or release it with --token %" PRIu64 " (%s)",
                cli_vis(lease), cli_vis(owner), in.token,
                cli_fmt_ns(in.remaining_ns, left, sizeof left), in.token, shl_errname(rc));
        return;
    }
    fprintf(stderr,
            rc == SHL_ETIMEDOUT ? "shmlease %s: timed out waiting for lease '%s': "
                                : "shmlease %s: lease '%s' is busy: ",
            cmd, cli_vis(lease));
    fprintf(stderr, "held by '%s'", cli_vis(in.owner));
    if (in.shared > 1)
        fprintf(stderr, " and %u other shared holders", in.shared - 1);
    fputs(" (", stderr);
    if (in.pid) /* none on etcd */
        fprintf(stderr, "pid %d, ", (int)in.pid);
    fprintf(stderr, "token %" PRIu64 "), %s left", in.token,
            cli_fmt_ns(in.remaining_ns, left, sizeof left));
    orphan_note(stderr, t, &in);
    fprintf(stderr, " (%s)\n", shl_errname(rc));
}

int cli_open_or_create(const char *cmd, const char *name, shl_table **t)
{
    int rc = shl_open(name, NULL, t);
    if (rc == SHL_ENOENT) {
        shl_options o;
        shl_options_init(&o);
        rc = shl_open(name, &o, t);
    }
    if (rc != SHL_OK) {
        cli_open_failed(cmd, name, rc);
        return EXIT_TABLE;
    }
    cli_place_warn(cmd, name);
    shl_table_info ti;
    shl_table_info_get(*t, &ti);
    if (ti.clock == SHL_CLOCK_MANUAL) {
        cli_err(cmd,
                "table '%s' has a manual clock: %s keeps a lease in real time and needs a "
                "monotonic one",
                name, cmd);
        shl_close(*t);
        *t = NULL;
        return EXIT_USAGE;
    }
    return 0;
}

void cli_take_opts(struct cli_take *k, struct cli_opt *opts)
{
    k->ttl = UINT64_C(10) * 1000000000;
    k->conflict = EXIT_REFUSED;
    const struct cli_opt shared[CLI_TAKE_OPTS] = {
        {"--ttl", NULL, CLI_DURATION, &k->ttl},
        {"--wait", "-w", CLI_WAIT, &k->wait},
        {"--nonblock", "-n", CLI_FLAG, &k->nonblock},
        {"--conflict-exit-code", "-E", CLI_CODE, &k->conflict},
        {"--shared", "-s", CLI_FLAG, &k->shared},
        {"--owner", NULL, CLI_STRING, &k->owner},
    };
    memcpy(opts, shared, sizeof shared);
}

int cli_take_check(const char *cmd, const struct cli_take *k)
{
    if (k->nonblock && k->wait) {
        cli_usage_err(cmd, "-n (fail at once) contradicts --wait");
        return EXIT_USAGE;
    }
    if (cli_table_name(cmd, k->table) || cli_lease_name(cmd, k->lease) ||
        (k->owner && cli_owner_name(cmd, k->owner)))
        return EXIT_USAGE;
    return 0;
}

int cli_take(const char *cmd, shl_table *t, const struct cli_take *k, uint64_t *token,
             uint64_t *gen)
{
    int rc;
    if (k->shared)
        rc = k->wait ? shl_acquire_shared_wait(t, k->lease, k->owner, k->ttl, k->wait, token, gen)
                     : shl_acquire_shared(t, k->lease, k->owner, k->ttl, token, gen);
    else
        rc = k->wait ? shl_acquire_wait(t, k->lease, k->owner, k->ttl, k->wait, token)
                     : shl_acquire(t, k->lease, k->owner, k->ttl, token);
    if (rc == SHL_OK)
        return 0;
    if (rc == SHL_EBUSY || rc == SHL_ETIMEDOUT) {
        cli_busy(cmd, t, k->lease, k->owner, rc);
        return (int)k->conflict;
    }
    cli_err(cmd, "cannot acquire '%s': %s (%s)", cli_vis(k->lease),
            cli_table_strerror(k->table, rc), shl_errname(rc));
    return cli_exit_of(rc);
}
