/*
 * tests/helper_docs.c - the code blocks of a Markdown page (doc_blocks.h).
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "doc_blocks.h"

char *t_doc_read(const char *rel)
{
    const char *root = getenv("SHL_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    return t_slurp(path);
}

/* The heading level of a line ("## x" is 2), 0 if it is none. */
static int heading(const char *line)
{
    int n = 0;
    while (line[n] == '#')
        n++;
    return n > 0 && line[n] == ' ' ? n : 0;
}

/* A copy of the text of `line` after `prefix` up to `suffix`, or NULL. */
static char *comment(const char *line, size_t len, const char *prefix, const char *suffix)
{
    size_t p = strlen(prefix);
    if (len < p || strncmp(line, prefix, p) != 0)
        return NULL;
    const char *end = strstr(line + p, suffix);
    if (!end || end > line + len)
        return NULL;
    return strndup(line + p, (size_t)(end - line - p));
}

int t_doc_blocks(const char *page, const char *after, const char *lang, t_doc_block *out, int cap)
{
    const char *p = page;
    int level = 0, n = 0, lineno = 1;
    if (after) {
        for (; *p; lineno++) {
            if (strncmp(p, after, strlen(after)) == 0)
                break;
            const char *nl = strchr(p, '\n');
            p = nl ? nl + 1 : p + strlen(p);
        }
        cr_assert(*p, "no line starting with \"%s\"", after);
        level = heading(p);
    }
    char fence[32];
    snprintf(fence, sizeof fence, "```%s", lang);
    int in = 0, norun = 0, first = 1;
    size_t cap_code = 0;
    for (const char *line = p; *line; lineno++) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *next = nl ? nl + 1 : line + len;
        if (!in && !first && level && heading(line) && heading(line) <= level)
            break;
        first = 0;
        if (!in && len == strlen(fence) && strncmp(line, fence, len) == 0 && n < cap) {
            in = 1;
            out[n] = (t_doc_block){.code = calloc(1, 1), .norun = norun, .line = lineno};
            cap_code = 1;
        } else if (in && len == 3 && strncmp(line, "```", 3) == 0) {
            in = 0;
            size_t nlen;
            const char *after_line = next;
            const char *anl = strchr(after_line, '\n');
            nlen = anl ? (size_t)(anl - after_line) : strlen(after_line);
            out[n].expect = comment(after_line, nlen, "<!-- output: ", " -->");
            n++;
        } else if (in) {
            size_t have = strlen(out[n].code);
            if (have + len + 2 > cap_code) {
                cap_code = (have + len + 2) * 2;
                out[n].code = realloc(out[n].code, cap_code);
                cr_assert(out[n].code);
            }
            memcpy(out[n].code + have, line, len);
            out[n].code[have + len] = '\n';
            out[n].code[have + len + 1] = '\0';
        }
        if (!in) {
            char *why = comment(line, len, "<!-- not run: ", " -->");
            norun = why != NULL;
            free(why);
        }
        line = next;
    }
    cr_assert(!in, "a ```%s block is not closed", lang);
    return n;
}

void t_doc_free(t_doc_block *b, int n)
{
    for (int i = 0; i < n; i++) {
        free(b[i].code);
        free(b[i].expect);
    }
}

char *t_doc_table(const char *code, const char *table)
{
    size_t tl = strlen(table), count = 0;
    for (const char *q = strstr(code, " jobs"); q; q = strstr(q + 1, " jobs"))
        count++;
    char *out = malloc(strlen(code) + count * tl + 1), *w = out;
    cr_assert(out);
    for (const char *q = code; *q;) {
        char c = q[5];
        if (strncmp(q, " jobs", 5) == 0 && (c == ' ' || c == '\n' || c == '"' || c == '\'')) {
            *w++ = ' ';
            memcpy(w, table, tl);
            w += tl;
            q += 5;
        } else {
            *w++ = *q++;
        }
    }
    *w = '\0';
    return out;
}

int t_doc_sh(const char *code, char **out)
{
    char dir[256], script[300], tool[1024], cmd[2048];
    t_mkdtemp(dir, sizeof dir, "doc");
    snprintf(script, sizeof script, "%s/block.sh", dir);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs(code, f);
    fclose(f);
    snprintf(tool, sizeof tool, "%s", t_tool());
    char *tooldir = dirname(tool);
    char abs[1024];
    if (tooldir[0] != '/' && getcwd(abs, sizeof abs)) {
        size_t l = strlen(abs);
        snprintf(abs + l, sizeof abs - l, "/%s", tooldir);
        tooldir = abs;
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && PATH='%s':\"$PATH\" sh -e block.sh 2>&1", dir, tooldir);
    int rc = t_run(cmd, out);
    t_rm_rf(dir);
    return rc;
}
