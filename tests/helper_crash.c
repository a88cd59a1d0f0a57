/*
 * tests/helper_crash.c - what the crash, orphan and repair tests share:
 * dying at a crash point in a forked child, value patterns that reveal a
 * torn value, and collecting the problems shl_check() reports.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

void c_fill(unsigned char *buf, uint32_t len, unsigned gen)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(gen * 37u + i * 11u + (i >> 8));
}

int c_value_gen(const unsigned char *buf, size_t len)
{
    for (unsigned gen = 1; gen <= C_GENS; gen++) {
        if (len != c_gen_len(gen))
            continue;
        unsigned char want[C_VALUE_SIZE];
        c_fill(want, (uint32_t)len, gen);
        if (memcmp(want, buf, len) == 0)
            return (int)gen;
    }
    return -1;
}

int c_read_gen(shl_table *t, const char *lease)
{
    unsigned char buf[C_VALUE_SIZE];
    size_t len = 0;
    int rc = shl_read(t, lease, buf, sizeof buf, &len, NULL);
    if (rc != SHL_OK)
        return rc == SHL_ENOENT ? 0 : -100 + rc;
    return len == 0 ? 0 : c_value_gen(buf, len);
}

int c_write_gen(shl_table *t, const char *lease, const char *owner, uint64_t token, unsigned gen)
{
    unsigned char buf[C_VALUE_SIZE];
    c_fill(buf, c_gen_len(gen), gen);
    return shl_write(t, lease, owner, token, buf, c_gen_len(gen));
}

void c_arm(int cp, int hits)
{
    char v[32];
    snprintf(v, sizeof v, "%d:%d", cp, hits > 0 ? hits : 1);
    setenv("SHL_CRASHPOINT", v, 1);
    shl__crashpoint_reset();
}

struct die_arg {
    const char *table;
    int cp, hits;
    int (*op)(shl_table *t, void *arg);
    void *arg;
};

static int die_child(void *p)
{
    struct die_arg *d = p;
    c_arm(d->cp, d->hits);
    shl_table *t;
    if (shl_open(d->table, NULL, &t) != SHL_OK)
        return 3;
    int rc = d->op(t, d->arg);
    shl_close(t);
    return rc == 0 ? 0 : 4;
}

int c_die_at(const char *table, int cp, int hits, int (*op)(shl_table *t, void *arg), void *arg)
{
    struct die_arg d = {table, cp, hits, op, arg};
    return t_wait(t_fork(die_child, &d));
}

static void collect(void *arg, const char *problem)
{
    struct c_problems *p = arg;
    if (p->n < C_MAX_PROBLEMS)
        snprintf(p->line[p->n], sizeof p->line[0], "%s", problem);
    p->n++;
}

int c_check(shl_table *t, struct c_problems *p)
{
    memset(p, 0, sizeof *p);
    int rc = shl_check(t, collect, p);
    for (unsigned i = 0; i < p->n && i < C_MAX_PROBLEMS; i++)
        cr_log_info("check: %s", p->line[i]);
    return rc;
}

int c_check_image(const void *img, size_t size, struct c_problems *p)
{
    memset(p, 0, sizeof *p);
    return shl_check_image(img, size, collect, p);
}

void c_done(shl_table *t, const char *name)
{
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

int c_has(const struct c_problems *p, const char *needle)
{
    for (unsigned i = 0; i < p->n && i < C_MAX_PROBLEMS; i++)
        if (strstr(p->line[i], needle))
            return 1;
    return 0;
}

int c_repair(shl_table *t, unsigned flags, struct c_problems *p)
{
    memset(p, 0, sizeof *p);
    int rc = shl_repair(t, flags, collect, p);
    for (unsigned i = 0; i < p->n && i < C_MAX_PROBLEMS; i++)
        cr_log_info("repair: %s", p->line[i]);
    return rc;
}

void *c_segment(shl_table *t, size_t *size)
{
    (void)size;
    return t->hdr;
}

size_t c_segment_size(shl_table *t)
{
    return t->size;
}
