/*
 * tests/test_terms.c - the documentation speaks of one thing with one word:
 * "reclaim delay" for the wait before a dead holder's lease is taken over
 * (the option is reclaim_delay_ms, the tool prints "reclaim delay"), and
 * "roll forward" for finishing an interrupted change. Older words for the
 * same things must not come back into the pages a user reads.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "doc_blocks.h"

/* What a user reads: the README, docs/, the manual pages, the public header
 * (with its groups in lib/shmlease/) and the Python package's README. */
static const char *const pages[] = {
    "README.md",        "docs/*.md",        "man/*.[0-9]",        "lib/shmlease.h",
    "lib/shmlease/*.h", "python/README.md", "examples/README.md", "python/shmlease/*.pyi",
};

/* Old words and the ones that replace them. */
static const char *const old_terms[][2] = {
    {"lock-delay", "reclaim delay"},
    {"lock delay", "reclaim delay"},
    {"orphan delay", "reclaim delay"},
    {"roll-forward", "roll forward"},
};

/* The line of `text` holding `at`, for a message. */
static void line_of(const char *text, const char *at, char *buf, size_t cap)
{
    const char *b = at, *e = strchr(at, '\n');
    while (b > text && b[-1] != '\n')
        b--;
    size_t n = (size_t)((e ? e : at + strlen(at)) - b);
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
}

Test(terms, no_old_word_in_what_users_read)
{
    const char *root = getenv("SHL_ROOT") ? getenv("SHL_ROOT") : ".";
    int files = 0;
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char pattern[1024];
        snprintf(pattern, sizeof pattern, "%s/%s", root, pages[i]);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0)
            continue;
        for (size_t k = 0; k < g.gl_pathc; k++, files++) {
            char *text = t_slurp(g.gl_pathv[k]);
            for (size_t j = 0; j < sizeof old_terms / sizeof old_terms[0]; j++) {
                const char *hit = strcasestr(text, old_terms[j][0]);
                char line[256] = "";
                if (hit)
                    line_of(text, hit, line, sizeof line);
                cr_expect(!hit, "%s says \"%s\" where the docs say \"%s\": %s", g.gl_pathv[k],
                          old_terms[j][0], old_terms[j][1], line);
            }
            free(text);
        }
        globfree(&g);
    }
    cr_assert_geq(files, 8, "only %d pages found under %s", files, root);
}
