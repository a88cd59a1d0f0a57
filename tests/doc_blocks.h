/*
 * tests/doc_blocks.h - the code blocks of a Markdown page, for the tests
 * that run what the documentation shows (tests/test_readme.c,
 * tests/test_guide.c).
 *
 * A block is a fenced one: a line "```LANG", its lines, a line "```". Two
 * HTML comments, invisible on the rendered page, tell the tests more:
 *   <!-- not run: REASON -->   on the line before a block: not run (cron,
 *                              etcd, docker);
 *   <!-- output: TEXT -->      on the line after it: its output has TEXT.
 */
#ifndef SHL_TEST_DOC_BLOCKS_H
#define SHL_TEST_DOC_BLOCKS_H

#include <stddef.h>

typedef struct t_doc_block {
    char *code;   /* the block's lines, each with its newline */
    char *expect; /* the output it must show, or NULL */
    int norun;    /* marked not run */
    int line;     /* line of its opening fence, from 1 */
} t_doc_block;

/* The page at `rel` (relative to SHL_ROOT), whole, or fails the test. */
char *t_doc_read(const char *rel);

/* The blocks of language `lang` in `page` after the first line that starts
 * with `after` (from the start when NULL), up to the next heading of the
 * same or a higher level as `after` (to the end when NULL); at most `cap`.
 * Returns how many; free them with t_doc_free(). */
int t_doc_blocks(const char *page, const char *after, const char *lang, t_doc_block *out, int cap);
void t_doc_free(t_doc_block *b, int n);

/* `code` with every shell word "jobs" (a table name: after a space, before a
 * space, a newline or a quote) replaced by `table`; to free. */
char *t_doc_table(const char *code, const char *table);

/* Runs `code` with `sh -e` in a new empty directory (removed after), the
 * tool's directory first in PATH so that `shmlease` is the one under test;
 * its output (stdout and stderr) in *out (to free). Returns the exit status
 * as t_run() does. */
int t_doc_sh(const char *code, char **out);

#endif
