/*
 * tests/test_manpages.c - the manual keeps up with the header: every public
 * function has a subsection in man/shmlease.3 and every return code an entry
 * under ERRORS; the pages render without warnings; the header's comments
 * are where a reader (and the formatter) keeps them. The header is
 * lib/shmlease.h with the groups it includes from lib/shmlease/.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "doc_blocks.h"

static char *slurp(const char *rel)
{
    return t_doc_read(rel);
}

/* One file of the public header. */
typedef struct header_file {
    char path[64]; /* from the top of the tree */
    char *text;
} header_file;

#define HEADER_FILES_MAX 16
static const char group_include[] = "#include \"shmlease/";

/* The public header as a program sees it: lib/shmlease.h, then each group
 * it includes (#include "shmlease/NAME.h"), in its order. Returns how many
 * files; free them with free_header(). */
static int read_header(header_file *h)
{
    int n = 0;
    snprintf(h[n].path, sizeof h[n].path, "lib/shmlease.h");
    h[n].text = slurp(h[n].path);
    n++;
    for (const char *p = strstr(h[0].text, group_include); p; p = strstr(p + 1, group_include)) {
        const char *name = p + strlen("#include \""), *end = strchr(name, '"');
        cr_assert(end && end - name < 40, "lib/shmlease.h: a malformed include: %.60s", p);
        cr_assert_lt(n, HEADER_FILES_MAX, "more groups than HEADER_FILES_MAX");
        snprintf(h[n].path, sizeof h[n].path, "lib/%.*s", (int)(end - name), name);
        h[n].text = slurp(h[n].path);
        n++;
    }
    return n;
}

static void free_header(header_file *h, int n)
{
    for (int i = 0; i < n; i++)
        free(h[i].text);
}

/* What the tests below read is the whole header: every file of
 * lib/shmlease/ is one that lib/shmlease.h includes. */
Test(manpages, every_group_of_the_header_is_included)
{
    const char *root = getenv("SHL_ROOT") ? getenv("SHL_ROOT") : ".";
    header_file h[HEADER_FILES_MAX];
    int n = read_header(h);
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/lib/shmlease/*.h", root);
    glob_t g;
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no %s", pattern);
    for (size_t k = 0; k < g.gl_pathc; k++) {
        const char *base = strrchr(g.gl_pathv[k], '/') + 1;
        int included = 0;
        for (int i = 1; i < n; i++)
            included |= strcmp(strrchr(h[i].path, '/') + 1, base) == 0;
        cr_expect(included, "lib/shmlease.h does not include shmlease/%s", base);
    }
    cr_expect_eq((size_t)(n - 1), g.gl_pathc,
                 "lib/shmlease.h includes %d groups, lib/shmlease/ has %zu", n - 1, g.gl_pathc);
    globfree(&g);
    free_header(h, n);
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
    header_file h[HEADER_FILES_MAX];
    int files = read_header(h), found = 0;
    char *page = slurp("man/shmlease.3");
    for (int i = 0; i < files; i++) {
        const char *hdr = h[i].text;
        for (const char *p = strstr(hdr, "SHL_API "); p; p = strstr(p + 1, "SHL_API ")) {
            const char *name = strstr(p, "shl_"), *paren = strchr(p, '(');
            if (!name || !paren || name > paren || strncmp(p, "SHL_API __", 10) == 0)
                continue;
            char fn[64];
            size_t n = (size_t)(paren - name);
            cr_assert_lt(n, sizeof fn);
            memcpy(fn, name, n);
            fn[n] = '\0';
            found++;
            cr_expect(has_subsection(page, fn), "man/shmlease.3 has no .SS for %s (%s)", fn,
                      h[i].path);
        }
    }
    cr_assert_gt(found, 20, "the header's functions were found (%d)", found);
    free_header(h, files);
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
    header_file h[HEADER_FILES_MAX];
    int files = read_header(h), macros = 0;
    for (int i = 0; i < files; i++) {
        int line = 1, continued = 0;
        for (const char *p = h[i].text; *p; line++) {
            const char *end = strchr(p, '\n');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            int ends_continued = n > 0 && p[n - 1] == '\\';
            if ((continued || ends_continued) && strncmp(p, "#define", 7) == 0)
                macros++;
            if (continued || ends_continued) {
                char text[256];
                snprintf(text, sizeof text, "%.*s", (int)(n < 255 ? n : 255), p);
                cr_expect(!strstr(text, "/*") && !strstr(text, "*/"),
                          "%s:%d: a comment inside a macro: %s", h[i].path, line, text);
            }
            continued = ends_continued;
            p = end ? end + 1 : p + n;
        }
    }
    cr_assert_gt(macros, 0, "the header's continued macros were found (%d)", macros);
    free_header(h, files);
}
