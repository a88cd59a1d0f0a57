/*
 * lib/problem.c - a check's problems, counted and each handed on as one line
 * of text: what the checks of both kinds of table report through
 * (shl_check(), shl_check_name()).
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

void shl__problem(struct shl__problems *p, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    p->count++;
    if (p->fn)
        p->fn(p->arg, buf);
}
