/*
 * tests/test_api_usage.c - the C API makes the right thing easy: the
 * EXAMPLE of shmlease(3) compiles against the built library as written and
 * runs, and a dropped result of a call that must be checked is a compiler
 * warning.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The program between .EX and .EE of the EXAMPLES section, with roff's
 * escapes (\e, \-) turned back into C, written to `path`. */
static void extract_example(const char *page, const char *path)
{
    const char *sec = strstr(page, "\n.SH EXAMPLES\n");
    cr_assert(sec, "no EXAMPLES section");
    const char *ex = strstr(sec, "\n.EX\n"), *end = ex ? strstr(ex, "\n.EE\n") : NULL;
    cr_assert(ex && end, "no .EX/.EE block in EXAMPLES");
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (const char *p = ex + 5; p <= end; p++) {
        if (*p == '\\' && (p[1] == 'e' || p[1] == '-')) {
            fputc(p[1] == 'e' ? '\\' : '-', f);
            p++;
        } else {
            fputc(*p, f);
        }
    }
    fclose(f);
}

/* cc with the tree's header and library on `src`; its exit status, its
 * output in *out. */
static int compile(const char *src, const char *exe, const char *flags, char **out)
{
    const char *root = getenv("SHL_ROOT"), *build = getenv("SHL_BUILD");
    char dflt[600];
    if (!root)
        root = ".";
    if (!build) { /* make check sets none: the release build it made first */
        snprintf(dflt, sizeof dflt, "%s/build", root);
        build = dflt;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror %s -I'%s/lib' -o '%s' '%s' -L'%s' -lshmlease "
             "-Wl,-rpath,'%s' 2>&1",
             flags, root, exe, src, build, build);
    return t_run(cmd, out);
}

Test(api_usage, the_manual_example_runs_as_written)
{
    t_guard(120);
    char dir[64], src[128], exe[128], cmd[512], name[96], *out;
    const char *root = getenv("SHL_ROOT");
    char page[512];
    snprintf(page, sizeof page, "%s/man/shmlease.3", root ? root : ".");
    t_mkdtemp(dir, sizeof dir, "shlexample");
    snprintf(src, sizeof src, "%s/example.c", dir);
    snprintf(exe, sizeof exe, "%s/example", dir);
    char *text = t_slurp(page);
    extract_example(text, src);
    free(text);
    cr_assert_eq(compile(src, exe, "", &out), 0, "the EXAMPLE does not compile:\n%s", out);
    free(out);
    t_name(name, sizeof name, "example"); /* the table it takes as its argument */
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", exe, name);
    cr_assert_eq(t_run(cmd, &out), 0, "the EXAMPLE failed:\n%s", out);
    cr_assert(strstr(out, "nightly: started with token 1\n"), "output: %s", out);
    free(out);
    cr_assert_eq(t_run(cmd, &out), 0, "the EXAMPLE failed the second time:\n%s", out);
    cr_assert(strstr(out, "nightly: started with token 2\n"), "output: %s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_OK);
    t_rm_rf(dir);
}

/* A result dropped, even through (void), is a warning (an error with
 * -Werror); the same call whose result is tested compiles clean. */
Test(api_usage, an_unchecked_result_is_a_warning)
{
    t_guard(120);
    static const char *const calls[] = {
        "shl_acquire(t, \"L\", \"me\", SHL_SEC(1), &tok)",
        "shl_renew(t, \"L\", \"me\", tok, SHL_SEC(1))",
        "shl_release(t, \"L\", \"me\", tok)",
        "shl_write(t, \"L\", \"me\", tok, \"x\", 1)",
        "(void)shl_write(t, \"L\", \"me\", tok, \"x\", 1)",
        "shl_open(\"x\", NULL, &t)",
    };
    char dir[64], src[128], exe[128], *out;
    t_mkdtemp(dir, sizeof dir, "shlunused");
    snprintf(src, sizeof src, "%s/u.c", dir);
    snprintf(exe, sizeof exe, "%s/u.o", dir);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        for (int checked = 0; checked < 2; checked++) {
            const char *call = calls[i];
            if (checked && strncmp(call, "(void)", 6) == 0)
                call += 6;
            FILE *f = fopen(src, "w");
            cr_assert(f);
            fprintf(f,
                    "#include <shmlease.h>\n"
                    "int f(shl_table *t, uint64_t tok);\n"
                    "int f(shl_table *t, uint64_t tok)\n{\n    (void)tok;\n"
                    "    %s%s%s;\n    return 0;\n}\n",
                    checked ? "if (" : "", call, checked ? ") return 1" : "");
            fclose(f);
            int rc = compile(src, exe, "-c", &out);
            if (checked)
                cr_assert_eq(rc, 0, "%s, tested, does not compile:\n%s", calls[i], out);
            else
                cr_assert(rc != 0 && strstr(out, "unused-result"),
                          "%s, its result dropped, compiles without a warning:\n%s", calls[i], out);
            free(out);
        }
    }
    t_rm_rf(dir);
}
