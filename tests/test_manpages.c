/*
 * tests/test_manpages.c - the manual keeps up with the header: every public
 * function has a subsection in man/shmlease.3 and every return code an entry
 * under ERRORS; the pages render without warnings; the header's comments
 * are where a reader (and the formatter) keeps them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static char *slurp(const char *rel)
{
    const char *root = getenv("SHL_ROOT");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    return t_slurp(path);
}

/* Does a ".SS" line of the page name `fn` as a whole word? */
static int has_subsection(const char *page, const char *fn)
{
    size_t n = strlen(fn);
    for (const char *p = strstr(page, "\n.SS "); p; p = strstr(p + 1, "\n.SS ")) {
        const char *end = strchr(p + 1, '\n');
        for (const char *q = p + 5; q && q < end; q = strstr(q + 1, fn)) {
            q = strstr(q, fn);
            if (!q || q >= end)
                break;
            char before = q[-1], after = q[n];
            if ((before == ' ' || before == ',') && (after == ',' || after == '\n'))
                return 1;
        }
    }
    return 0;
}

Test(manpages, every_public_function_has_a_subsection)
{
    char *hdr = slurp("lib/shmlease.h"), *page = slurp("man/shmlease.3");
    int found = 0;
    for (char *p = strstr(hdr, "SHL_API "); p; p = strstr(p + 1, "SHL_API ")) {
        char *name = strstr(p, "shl_"), *paren = strchr(p, '(');
        if (!name || !paren || name > paren || strncmp(p, "SHL_API __", 10) == 0)
            continue;
        char fn[64];
        size_t n = (size_t)(paren - name);
        cr_assert_lt(n, sizeof fn);
        memcpy(fn, name, n);
        fn[n] = '\0';
        found++;
        cr_expect(has_subsection(page, fn), "man/shmlease.3 has no .SS for %s", fn);
    }
    cr_assert_gt(found, 20, "the header's functions were found (%d)", found);
    free(hdr);
    free(page);
}

Test(manpages, every_return_code_is_listed_under_errors)
{
    char *page = slurp("man/shmlease.3");
    char *errors = strstr(page, "\n.SH ERRORS\n");
    cr_assert(errors);
    char *next = strstr(errors + 1, "\n.SH ");
    if (next)
        *next = '\0';
    for (int rc = -1; strcmp(shl_errname(rc), "SHL_UNKNOWN") != 0; rc--) {
        char entry[64];
        snprintf(entry, sizeof entry, ".BR %s \" (\\-%d)\"", shl_errname(rc), -rc);
        cr_expect(strstr(errors, entry), "ERRORS lacks %s", entry);
    }
    free(page);
}

Test(manpages, pages_render_without_warnings)
{
    const char *root = getenv("SHL_ROOT");
    const char *pages[] = {"man/shmlease.1", "man/shmlease.3", "man/shmlease.7"};
    /* Without man the pages would go unchecked: a missing tool fails the
     * test instead of skipping it. */
    cr_assert_eq(t_run("command -v man >/dev/null", NULL), 0,
                 "man is needed to check the pages: sudo apt-get install -y man-db");
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char cmd[600], *out = NULL;
        snprintf(cmd, sizeof cmd,
                 "MANWIDTH=80 man --warnings -l '%s/%s' 2>&1 >/dev/null; "
                 "MANWIDTH=80 man -l '%s/%s' 2>/dev/null | grep -c shmlease",
                 root ? root : ".", pages[i], root ? root : ".", pages[i]);
        t_run(cmd, &out);
        cr_expect_gt(atoi(out), 3, "%s renders: %s", pages[i], out);
        cr_expect(strchr(out, ':') == NULL, "%s warns: %s", pages[i], out);
        free(out);
    }
}

/* The header is the manual: a comment belongs above its macro, not inside a
 * definition continued with backslashes (where the formatter breaks it up). */
Test(manpages, no_comment_inside_a_continued_macro)
{
    char *hdr = slurp("lib/shmlease.h");
    int line = 1, continued = 0, macros = 0;
    for (char *p = hdr; *p; line++) {
        char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int ends_continued = n > 0 && p[n - 1] == '\\';
        if ((continued || ends_continued) && strncmp(p, "#define", 7) == 0)
            macros++;
        if (continued || ends_continued) {
            char text[256];
            snprintf(text, sizeof text, "%.*s", (int)(n < 255 ? n : 255), p);
            cr_expect(!strstr(text, "/*") && !strstr(text, "*/"),
                      "lib/shmlease.h:%d: a comment inside a macro: %s", line, text);
        }
        continued = ends_continued;
        p = end ? end + 1 : p + n;
    }
    cr_assert_gt(macros, 0, "the header's continued macros were found (%d)", macros);
    free(hdr);
}
