/*
 * tests/test_corpus.c - the fuzz corpus (tests/corpus/): the seeds are what
 * their names promise, and every input replays harmlessly through the fuzz
 * body (the same open, lease operations, check and repair as `make fuzz`).
 *
 * Seeds are made by `make corpus` (tests/fuzz/mkcorpus.c): seed-ok-* must
 * pass shl_check_image(), seed-corrupt-* must be SHL_ECORRUPT and
 * seed-version-* SHL_EVERSION. Any other file is an input kept from a fuzz
 * run (a regression) and is only replayed.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "shmlease.h"

#define CORPUS_MAX (1 << 20)

struct input {
    char name[256];
    unsigned char *buf;
    size_t len;
};

/* Calls fn on every input of the corpus; returns how many there were. */
static unsigned each_input(void (*fn)(const struct input *in, void *arg), void *arg)
{
    char dir[512];
    const char *root = getenv("SHL_ROOT");
    snprintf(dir, sizeof dir, "%s/tests/corpus", root ? root : ".");
    DIR *d = opendir(dir);
    cr_assert(d, "no corpus at %s", dir);
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        struct input in;
        char path[1024];
        snprintf(in.name, sizeof in.name, "%s", e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            cr_assert_fail("%s", path);
        in.buf = malloc(CORPUS_MAX);
        if (!in.buf)
            cr_assert_fail("out of memory");
        in.len = fread(in.buf, 1, CORPUS_MAX, f);
        fclose(f);
        fn(&in, arg);
        free(in.buf);
        n++;
    }
    closedir(d);
    return n;
}

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static void first_problem(void *arg, const char *problem)
{
    char *out = arg;
    if (!out[0])
        snprintf(out, 256, "%s", problem);
}

struct tally {
    unsigned ok, corrupt, version;
};

/* Per input, only failures reach criterion (cr_assert_fail): a passing
 * assertion is a message to its runner too, and there are many inputs. */
static void check_seed(const struct input *in, void *arg)
{
    struct tally *n = arg;
    if (!has_prefix(in->name, "seed-"))
        return;
    char problem[256] = "";
    int rc = shl_check_image(in->buf, in->len, first_problem, problem);
    if (has_prefix(in->name, "seed-version-")) {
        if (rc != SHL_EVERSION)
            cr_assert_fail("%s: %s, not EVERSION (%s)", in->name, shl_errname(rc), problem);
        n->version++;
        return;
    }
    /* A seed of another build's layout is refused at its format word, and a
     * fuzzer starting from it never gets past the header. */
    if (rc == SHL_EVERSION)
        cr_assert_fail("%s was made by a build with another segment layout (%s): "
                       "run `make corpus` and commit tests/corpus/",
                       in->name, problem);
    if (has_prefix(in->name, "seed-ok-")) {
        if (rc != SHL_OK)
            cr_assert_fail("%s: %s: %s", in->name, shl_errname(rc), problem);
        n->ok++;
    } else {
        if (!has_prefix(in->name, "seed-corrupt-"))
            cr_assert_fail("%s: unknown kind of seed", in->name);
        if (rc != SHL_ECORRUPT)
            cr_assert_fail("%s: %s, not ECORRUPT", in->name, shl_errname(rc));
        n->corrupt++;
    }
}

Test(corpus, seeds_are_what_they_say)
{
    struct tally n = {0};
    each_input(check_seed, &n);
    /* Each kind is there: a corpus emptied by mistake does not pass. */
    cr_assert_geq(n.ok, 4u, "healthy seeds: %u (run `make corpus`)", n.ok);
    cr_assert_geq(n.corrupt, 10u, "damaged seeds: %u (run `make corpus`)", n.corrupt);
    cr_assert_geq(n.version, 1u, "foreign-format seeds: %u (run `make corpus`)", n.version);
}

static void replay(const struct input *in, void *arg)
{
    (void)arg;
    if (fz_one(in->buf, in->len) != 0)
        cr_assert_fail("corpus input %s broke a contract", in->name);
}

Test(corpus, replay)
{
    cr_assert_geq(each_input(replay, NULL), 15u, "the corpus has its seed inputs");
}
