/*
 * tests/test_guide.c - docs/GUIDE.md's shell recipes run as written, with
 * the tool under test, each in a directory of its own and on a table of its
 * own (the recipes' table "jobs" is renamed), and show what the page says
 * they show (its "<!-- output: -->" comments). Blocks marked "not run" need
 * cron, etcd or docker.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "doc_blocks.h"

#define MAX_BLOCKS 64

Test(guide, shell_recipes_run_as_written)
{
    t_guard(120);
    char *page = t_doc_read("docs/GUIDE.md");
    t_doc_block b[MAX_BLOCKS];
    int n = t_doc_blocks(page, NULL, "sh", b, MAX_BLOCKS), ran = 0, expected = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].norun)
            continue;
        char name[128];
        t_name(name, sizeof name, "guide");
        char *code = t_doc_table(b[i].code, name), *out = NULL;
        int rc = t_doc_sh(code, &out);
        cr_expect_eq(rc, 0, "docs/GUIDE.md:%d exits %d:\n%s\noutput:\n%s", b[i].line, rc, code,
                     out);
        if (b[i].expect) {
            expected++;
            cr_expect(strstr(out, b[i].expect), "docs/GUIDE.md:%d does not show \"%s\":\n%s",
                      b[i].line, b[i].expect, out);
        }
        ran++;
        free(out);
        free(code);
    }
    t_doc_free(b, n);
    free(page);
    /* cron twice, a script's lease, a leader, a fenced writer, readers. */
    cr_assert_geq(ran, 6, "only %d recipes ran", ran);
    cr_assert_geq(expected, 6, "only %d recipes say what they show", expected);
}

/* Every relative link of the README and of docs/ names a file that exists. */
Test(guide, links_between_pages_resolve)
{
    static const char *const pages[][2] = {
        {"README.md", ""},
        {"docs/GUIDE.md", "docs/"},
        {"docs/DEVELOPING.md", "docs/"},
        {"docs/STRESS.md", "docs/"},
        {"docs/OPERATIONS.md", "docs/"},
        {"python/README.md", "python/"},
    };
    const char *root = getenv("SHL_ROOT") ? getenv("SHL_ROOT") : ".";
    int links = 0;
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char *text = t_doc_read(pages[i][0]);
        for (char *p = strstr(text, "]("); p; p = strstr(p + 1, "](")) {
            char *end = strchr(p, ')');
            if (!end || end - p > 200 || strncmp(p + 2, "http", 4) == 0 || p[2] == '#')
                continue;
            char target[256], path[1024];
            snprintf(target, sizeof target, "%.*s", (int)(end - p - 2), p + 2);
            char *hash = strchr(target, '#');
            if (hash)
                *hash = '\0';
            snprintf(path, sizeof path, "%s/%s%s", root, pages[i][1], target);
            cr_expect(access(path, F_OK) == 0, "%s links to %s, which does not exist", pages[i][0],
                      target);
            links++;
        }
        free(text);
    }
    cr_assert_geq(links, 8, "only %d links found", links);
}
