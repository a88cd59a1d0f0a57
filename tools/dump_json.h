/*
 * tools/dump_json.h - shmlease dump --json's leases, written through a
 * buffer of its own.
 */
#ifndef SHL_DUMP_JSON_H
#define SHL_DUMP_JSON_H

#include <stdio.h>

#include "shmlease.h"

/* Bytes on their way to f: the JSON of a table of a million leases is most
 * of a GB, and a hundred stdio calls per lease cost more than reading it. */
struct dump_out {
    FILE *f;
    size_t n;
    char b[16384];
};

/* The lock states' names, by SHL_LOCK_* (cmd_dump.c). */
extern const char *const dump_lock_names[];

void dump_put(struct dump_out *o, const char *s, size_t n);
/* Writes what is buffered to o->f. */
void dump_flush(struct dump_out *o);
/* One lease's object, as the shape in cmd_dump.c says; etcd: the fields
 * etcd does not keep are null. */
void dump_json_lease(struct dump_out *o, int etcd, const shl_lease_detail *d);

#endif
