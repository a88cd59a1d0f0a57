/*
 * tests/test_etcd_corpus.c - the etcd answers' fuzz corpus
 * (tests/corpus-etcd/): every input replays harmlessly through the fuzz
 * body, and the seeds are what their names promise. ok-<kind>-* are real
 * answers of etcd 3.4 that the parser of <kind> (range, txn, lease, status,
 * watch: a stream, line by line) takes; err-<kind>-* are etcd's refusals,
 * which it turns into a code. Any other file is an input kept from a fuzz
 * run, only replayed.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "fuzz.h"

#define CORPUS_MAX (1 << 20)

static int kind_of(const char *name)
{
    static const char *const kinds[] = {"range-", "txn-", "lease-", "status-", "watch-"};
    const char *dash = strchr(name, '-');
    for (int k = 0; dash && k < 5; k++)
        if (!strncmp(dash + 1, kinds[k], strlen(kinds[k])))
            return k;
    return -1;
}

/* The worst code of the seed's lines (a watch) or of the whole (others). */
static int seed_code(int kind, const char *p, size_t n)
{
    int rc;
    if (kind != FZ_ETCD_WATCH) {
        cr_assert_eq(fz_etcd_parse(kind, p, n, &rc), 0);
        return rc;
    }
    int worst = ETC_OK;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(p + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (p + at)) : n - at;
        rc = ETC_OK;
        if (len)
            cr_assert_eq(fz_etcd_parse(kind, p + at, len, &rc), 0);
        if (rc != ETC_OK)
            worst = rc;
        at += len + 1;
    }
    return worst;
}

Test(etcd_corpus, replays_and_seeds)
{
    char dir[512];
    const char *root = getenv("SHL_ROOT");
    snprintf(dir, sizeof dir, "%s/tests/corpus-etcd", root ? root : ".");
    DIR *d = opendir(dir);
    cr_assert(d, "no corpus at %s", dir);
    unsigned n = 0, ok = 0, err = 0;
    char *buf = malloc(CORPUS_MAX);
    cr_assert(buf);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert(f, "%s", path);
        size_t len = fread(buf, 1, CORPUS_MAX, f);
        fclose(f);
        cr_assert_eq(fz_etcd_one((const uint8_t *)buf, len), 0, "%s broke a parser", e->d_name);
        int kind = kind_of(e->d_name);
        if (!strncmp(e->d_name, "ok-", 3)) {
            cr_assert_geq(kind, 0, "%s: no kind in the name", e->d_name);
            int rc = seed_code(kind, buf, len);
            cr_assert_eq(rc, ETC_OK, "%s: %s", e->d_name, etc_errname(rc));
            ok++;
        } else if (!strncmp(e->d_name, "err-", 4)) {
            cr_assert_geq(kind, 0, "%s: no kind in the name", e->d_name);
            int rc = seed_code(kind, buf, len);
            cr_assert(rc < 0, "%s: taken as an answer", e->d_name);
            err++;
        }
        n++;
    }
    closedir(d);
    free(buf);
    cr_assert_geq(ok, 10, "the seeds of every kind are there");
    cr_assert_geq(err, 3);
    cr_log_info("%u inputs, %u ok seeds, %u refusals", n, ok, err);
}
