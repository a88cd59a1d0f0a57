/*
 * tools/cli_busy.c - why an acquire was refused, in words: who holds the
 * lease (owner, pid, token, time left), and whether the kernel proved that
 * holder dead (then when its lease frees).
 */
#include <inttypes.h>
#include <stdio.h>

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

void cli_busy(const char *cmd, shl_table *t, const char *lease, int rc)
{
    shl_lease_info in;
    if (shl_stat(t, lease, &in) != SHL_OK ||
        (in.state != SHL_STATE_HELD && in.state != SHL_STATE_ORPHANED)) {
        /* Freed since the refusal: the code says it all. */
        cli_err(cmd, "cannot acquire '%s': %s (%s)", cli_vis(lease), shl_strerror(rc),
                shl_errname(rc));
        return;
    }
    char left[32];
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
