/*
 * tests/test_corpus.c - replays the fuzz corpus (tests/corpus/) through the
 * fuzz body, so that every input the fuzzer kept stays harmless.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

Test(corpus, replay)
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
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert(f, "%s", path);
        unsigned char *buf = malloc(1 << 20);
        size_t len = fread(buf, 1, 1 << 20, f);
        fclose(f);
        cr_assert_eq(fz_one(buf, len), 0, "corpus input %s", e->d_name);
        free(buf);
        n++;
    }
    closedir(d);
    cr_assert_geq(n, 4u, "the corpus has its seed inputs");
}
