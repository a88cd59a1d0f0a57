/*
 * tools/cmd_lease.c - shmlease renew, release, read and write: the lease
 * calls from a shell script that holds a lease it got from shmlease
 * acquire, named by its token.
 *
 * The token alone names the acquisition (a lease never issues a token
 * twice), so a script need not repeat the owner: the owner is that of the
 * holder with this token, looked up first; the call itself then checks
 * (owner, token) atomically, as every holder's call does, so a lease that
 * changed hands meanwhile is refused (SHL_ELOST), never touched.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_TTL_NS (UINT64_C(10) * 1000000000)

enum verb { RENEW, RELEASE, READ, WRITE };

static const char *const verb_name[] = {"renew", "release", "read", "write"};

struct lease_args {
    enum verb verb;
    const char *table, *lease, *owner, *value;
    uint64_t token, ttl;
};

static void usage_of(FILE *f, enum verb v)
{
    static const char *const text[] = {
        "usage: shmlease renew NAME LEASE --token N [--ttl T] [--owner O]\n"
        "Renews the lease held with token N for T more (default 10s) from now.\n",
        "usage: shmlease release NAME LEASE --token N [--owner O]\n"
        "Releases the lease held with token N; its keeper (shmlease acquire) exits.\n",
        "usage: shmlease read NAME LEASE [--token N]\n"
        "Prints the lease's value as stored (no newline added). With --token N, only\n"
        "while the lease is held with token N, before and after the read (exit 1\n"
        "otherwise).\n",
        "usage: shmlease write NAME LEASE --token N [--owner O] [VALUE]\n"
        "Replaces the lease's value with VALUE (or standard input when VALUE is\n"
        "absent or -) if and only if the lease is still held with token N.\n",
    };
    fputs(text[v], f);
    fputs("  --token N     the token shmlease acquire printed\n"
          "  --owner O     the holder's owner (default: the holder with token N)\n"
          "Exit status: 0 done; 1 the lease is not held with token N (released,\n"
          "expired, revoked or taken over); 2 usage error; 3 table problem.\n",
          f);
}

static void renew_usage(FILE *f)
{
    usage_of(f, RENEW);
}
static void release_usage(FILE *f)
{
    usage_of(f, RELEASE);
}
static void read_usage(FILE *f)
{
    usage_of(f, READ);
}
static void write_usage(FILE *f)
{
    usage_of(f, WRITE);
}

static void (*const usages[])(FILE *) = {renew_usage, release_usage, read_usage, write_usage};

static int parse(int argc, char **argv, enum verb v, struct lease_args *a)
{
    memset(a, 0, sizeof *a);
    a->verb = v;
    a->ttl = DEFAULT_TTL_NS;
    a->token = UINT64_MAX; /* not given */
    struct cli_opt opts[] = {
        {"--token", NULL, CLI_NUMBER, &a->token},
        {"--owner", NULL, CLI_STRING, &a->owner},
        {"--ttl", NULL, CLI_DURATION, &a->ttl},
        {NULL, NULL, 0, NULL},
    };
    if (v != RENEW)
        opts[2].name = NULL; /* only renew takes a ttl */
    if (v == READ)
        opts[1].name = NULL; /* a read names no owner */
    static const char *const names[] = {"NAME", "LEASE", "VALUE", NULL};
    static const char *const two[] = {"NAME", "LEASE", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, usages[v], opts, v == WRITE ? names : two, 2, 0, &ops);
    if (ex)
        return ex;
    a->table = ops.v[0];
    a->lease = ops.v[1];
    a->value = ops.n > 2 && strcmp(ops.v[2], "-") != 0 ? ops.v[2] : NULL;
    if (v != READ && a->token == UINT64_MAX) {
        cli_usage_err(verb_name[v], "missing --token N (the token shmlease acquire printed)");
        return EXIT_USAGE;
    }
    if (cli_table_name(verb_name[v], a->table) || cli_lease_name(verb_name[v], a->lease) ||
        (a->owner && cli_owner_name(verb_name[v], a->owner)))
        return EXIT_USAGE;
    return 0;
}

/* The owner of the holder (exclusive or shared) with `token`; SHL_ELOST
 * when no holder has it. */
static int owner_of(shl_table *t, const char *lease, uint64_t token, char *out)
{
    shl_lease_detail *d = malloc(sizeof *d);
    if (!d)
        return SHL_ENOMEM;
    int rc = shl_inspect(t, lease, d);
    if (rc == SHL_ENOENT)
        rc = SHL_ELOST; /* never used: not held */
    if (rc == SHL_OK) {
        rc = SHL_ELOST;
        if (d->info.token == token && d->info.state == SHL_STATE_HELD) {
            memcpy(out, d->info.owner, sizeof d->info.owner);
            rc = SHL_OK;
        }
        for (uint32_t i = 0; rc != SHL_OK && i < d->nshared && i < SHL_SHARED_MAX; i++)
            if (d->shared[i].token == token && d->shared[i].state == SHL_STATE_HELD) {
                memcpy(out, d->shared[i].owner, sizeof d->shared[i].owner);
                rc = SHL_OK;
            }
    }
    free(d);
    return rc;
}

/* The value to write: the operand, or standard input up to cap bytes
 * (cap + 1 read tells that it is longer). */
static int value_in(const struct lease_args *a, char *buf, size_t cap, size_t *len)
{
    if (a->value) {
        *len = strlen(a->value);
        if (*len > cap)
            return SHL_EINVAL;
        memcpy(buf, a->value, *len);
        return SHL_OK;
    }
    *len = fread(buf, 1, cap + 1, stdin);
    return *len > cap ? SHL_EINVAL : SHL_OK;
}

static int do_read(shl_table *t, const struct lease_args *a, char *owner)
{
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    char *buf = malloc(ti.value_size + 1);
    if (!buf)
        return SHL_ENOMEM;
    size_t len = 0;
    uint64_t vtok;
    int rc = shl_read(t, a->lease, buf, ti.value_size + 1, &len, &vtok);
    if (rc == SHL_OK && a->token != UINT64_MAX)
        rc = owner_of(t, a->lease, a->token, owner); /* still held, after the read */
    if (rc == SHL_OK)
        fwrite(buf, 1, len, stdout);
    free(buf);
    return rc;
}

static int do_write(shl_table *t, const struct lease_args *a, const char *owner)
{
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    char *buf = malloc(ti.value_size + 1);
    if (!buf)
        return SHL_ENOMEM;
    size_t len;
    int rc = value_in(a, buf, ti.value_size, &len);
    if (rc == SHL_EINVAL)
        cli_err("write", "the value is longer than the table's %u bytes per lease", ti.value_size);
    else
        rc = shl_write(t, a->lease, owner, a->token, buf, len);
    free(buf);
    return rc;
}

static int call(shl_table *t, const struct lease_args *a)
{
    char owner[SHL_OWNER_MAX + 1] = "";
    int rc = SHL_OK;
    if (a->owner)
        snprintf(owner, sizeof owner, "%s", a->owner);
    else if (a->token != UINT64_MAX)
        rc = owner_of(t, a->lease, a->token, owner);
    if (rc != SHL_OK)
        return rc;
    switch (a->verb) {
    case RENEW:
        return shl_renew(t, a->lease, owner, a->token, a->ttl);
    case RELEASE:
        return shl_release(t, a->lease, owner, a->token);
    case READ:
        return do_read(t, a, owner);
    case WRITE:
        return do_write(t, a, owner);
    }
    return SHL_EINVAL;
}

static int lease_cmd(int argc, char **argv, enum verb v)
{
    struct lease_args a;
    int ex = parse(argc, argv, v, &a);
    if (ex)
        return ex < 0 ? 0 : ex;
    shl_table *t;
    if ((ex = cli_open(verb_name[v], a.table, &t)) != 0)
        return ex;
    int rc = call(t, &a);
    if (rc == SHL_ELOST)
        cli_err(verb_name[v],
                "lease '%s' is not held with token %" PRIu64
                "%s (released, expired, revoked or taken over) (SHL_ELOST)",
                cli_vis(a.lease), a.token, a.owner ? " by that owner" : "");
    else if (rc == SHL_ENOENT && v == READ)
        cli_err("read", "lease '%s' was never used (SHL_ENOENT)", cli_vis(a.lease));
    else if (rc != SHL_OK && !(v == WRITE && rc == SHL_EINVAL))
        cli_err(verb_name[v], "%s '%s': %s (%s)", verb_name[v], cli_vis(a.lease),
                cli_table_strerror(a.table, rc), shl_errname(rc));
    shl_close(t);
    return cli_exit_of(rc);
}

int cmd_renew(int argc, char **argv)
{
    return lease_cmd(argc, argv, RENEW);
}

int cmd_release(int argc, char **argv)
{
    return lease_cmd(argc, argv, RELEASE);
}

int cmd_read(int argc, char **argv)
{
    return lease_cmd(argc, argv, READ);
}

int cmd_write(int argc, char **argv)
{
    return lease_cmd(argc, argv, WRITE);
}
