/*
 * tests/test_systemd_units.c - the example units in examples/systemd/ pass
 * systemd-analyze verify without a word, and every option their command
 * lines give shmlease is one its subcommand offers.
 *
 * verify checks that ExecStart's program exists: the units name
 * /usr/bin/shmlease (where a package installs it), which the copies verified
 * here name the built tool instead; nothing else is changed. verify exits 0
 * after a key it ignores (a misspelt one, a bad value), so any output fails
 * the test too. A missing systemd-analyze fails it: the check must not pass
 * unseen.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *root(void)
{
    const char *r = getenv("SHL_ROOT");
    return r ? r : ".";
}

static void need_systemd_analyze(void)
{
    cr_assert_eq(t_run("command -v systemd-analyze >/dev/null 2>&1", NULL), 0,
                 "systemd-analyze is missing (make deps installs it): "
                 "apt-get install -y --no-install-recommends systemd");
}

Test(systemd_units, verify_says_nothing)
{
    t_guard(120);
    need_systemd_analyze();
    char dir[96], cmd[2048], *out;
    t_mkdtemp(dir, sizeof dir, "shl-units");
    /* Each unit as installed but for the tool's path; a template also as an
     * instance (the escaped path of a table, as its comment says). */
    snprintf(cmd, sizeof cmd,
             "n=0; for u in '%s'/examples/systemd/*.service; do\n"
             "  b=$(basename \"$u\"); sed 's|/usr/bin/shmlease|%s|g' \"$u\" > '%s'/\"$b\"\n"
             "  set -- '%s'/\"$b\"\n"
             "  case $b in *@.service) "
             "i='%s'/\"${b%%@.service}@run-shmlease\\x2djobs-jobs.shl.service\"\n"
             "    cp '%s'/\"$b\" \"$i\"; set -- \"$@\" \"$i\";; esac\n"
             "  for f; do\n"
             "    said=$(cd '%s' && systemd-analyze verify --man=no \"$f\" 2>&1); st=$?\n"
             "    if [ $st != 0 ] || [ -n \"$said\" ]; then echo \"$f: status $st: $said\"; fi\n"
             "    n=$((n + 1))\n"
             "  done\n"
             "done; echo \"verified $n\"",
             root(), t_tool(), dir, dir, dir, dir, dir);
    cr_assert_eq(t_run(cmd, &out), 0);
    /* Three units and the template's instance. */
    cr_expect_str_eq(out, "verified 4\n", "systemd-analyze verify:\n%s", out);
    free(out);
    t_rm_rf(dir);
}

Test(systemd_units, their_options_are_the_tools)
{
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd,
             "grep -h '^Exec[A-Za-z]*=-\\?/usr/bin/shmlease ' '%s'/examples/systemd/*.service |\n"
             "while read -r line; do\n"
             "  set -- ${line#*/usr/bin/shmlease }; sub=$1\n"
             "  help=$('%s' \"$sub\" --help) || { echo \"$sub: no such subcommand\"; continue; }\n"
             "  for w; do\n"
             "    [ \"$w\" = -- ] && break\n"
             "    case $w in --*) printf '%%s\\n' \"$help\" | grep -q -e \" $w\\b\" ||\n"
             "      echo \"$sub has no $w\";; esac\n"
             "  done\n"
             "  echo \"checked $sub\"\n"
             "done",
             root(), t_tool());
    cr_assert_eq(t_run(cmd, &out), 0);
    cr_expect(!strstr(out, " no "), "%s", out);
    cr_expect(strstr(out, "checked run") && strstr(out, "checked metrics") &&
                  strstr(out, "checked create"),
              "the units' command lines were not all read: %s", out);
    free(out);
}
