/*
 * tests/test_tool_doc.c - shmlease(1) keeps up with the tool: every option
 * of every subcommand's --help, every exit code, every key that dump --json
 * prints, and the jq paths of its examples work on real output.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static char *page(void)
{
    const char *root = getenv("SHL_ROOT");
    char path[512];
    snprintf(path, sizeof path, "%s/man/shmlease.1", root ? root : ".");
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(tool_doc, every_option_of_every_subcommand_is_in_the_manual)
{
    /* stress documents its own campaign options. */
    static const char *const cmds[] = {"create",  "ls",      "dump",  "check",   "repair",
                                       "revoke",  "watch",   "run",   "acquire", "renew",
                                       "release", "read",    "write", "rm",      "doctor",
                                       "tables",  "metrics", "elect", "observe", NULL};
    const char *man = page();
    for (int i = 0; cmds[i]; i++) {
        char *help;
        cr_assert_eq(t_tool_run(&help, "%s --help", cmds[i]), 0);
        for (char *p = strstr(help, " --"); p; p = strstr(p + 1, " --")) {
            char opt[64], roff[160];
            size_t n = strspn(p + 1, "-abcdefghijklmnopqrstuvwxyz");
            if (n <= 2 || n >= sizeof opt)
                continue;
            memcpy(opt, p + 1, n);
            opt[n] = '\0';
            /* roff spells "--token-state" as "\-\-token\-state". */
            size_t k = 0;
            for (size_t j = 0; j < n; j++) {
                if (opt[j] == '-')
                    roff[k++] = '\\';
                roff[k++] = opt[j];
            }
            roff[k] = '\0';
            cr_expect(strstr(man, roff), "shmlease %s %s is not in shmlease(1)", cmds[i], opt);
        }
        free(help);
    }
}

Test(tool_doc, every_exit_code_is_listed)
{
    const char *man = page(), *sec = strstr(man, ".SH EXIT STATUS");
    cr_assert(sec);
    /* tools/cli.h: EXIT_REFUSED 1 ... EXIT_SYSTEM 5. */
    for (int code = 0; code <= 5; code++) {
        char want[32];
        snprintf(want, sizeof want, "\n.B %d\n", code);
        cr_expect(strstr(sec, want), "exit status %d is not listed in shmlease(1)", code);
    }
}

/* Every key dump --json prints is in the JSON section, and the jq paths of
 * the examples lead somewhere on real output. */
Test(tool_doc, dump_json_keys_and_jq_paths_are_documented)
{
    char name[96], cmd[4096];
    shl_table *t = t_create(t_name(name, sizeof name, "doc"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "nightly-backup", "me", 60 * SEC, &tok), SHL_OK);
    const char *root = getenv("SHL_ROOT");
    snprintf(
        cmd, sizeof cmd,
        "'%s' dump %s --json | python3 -c '\n"
        "import json, re, sys\n"
        "d = json.load(sys.stdin)\n"
        "man = open(sys.argv[1]).read()\n"
        "sec = man[man.index(\".SH JSON\"):man.index(\".SH EXIT STATUS\")]\n"
        "def keys(v):\n"
        "    if isinstance(v, dict):\n"
        "        for k, x in v.items():\n"
        "            yield k\n"
        "            yield from keys(x)\n"
        "    elif isinstance(v, list):\n"
        "        for x in v:\n"
        "            yield from keys(x)\n"
        "missing = sorted({k for k in keys(d) if chr(34) + k + chr(34) not in sec})\n"
        "assert not missing, \"not in the JSON section: %%s\" %% missing\n"
        "paths = re.findall(r\"jq (\\.[^ \\n]*)\", man)\n"
        "assert paths, \"no jq example\"\n"
        "for p in paths:\n"
        "    v = d\n"
        "    for part in re.findall(r\"\\.(\\w+)|\\[(\\d+)\\]\", p.replace(\"\\\\-\", \"-\")):\n"
        "        v = v[part[0]] if part[0] else v[int(part[1])]\n"
        "    assert v is not None, p\n"
        "' '%s/man/shmlease.1' 2>&1",
        t_tool(), name, root ? root : ".");
    char *out;
    cr_assert_eq(t_run(cmd, &out), 0, "shmlease(1) and dump --json disagree: %s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}
