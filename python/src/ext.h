/*
 * python/src/ext.h - what the extension's files share: the native Table and
 * Renewer objects, the GIL-releasing call, and the argument and error
 * helpers (defined in _shmlease.c). Names here are shl__py_*; everything
 * else in each file is static.
 */
#ifndef SHMLEASE_PY_EXT_H
#define SHMLEASE_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "shmlease.h"

typedef struct {
    PyObject_HEAD shl_table *t;
    unsigned inflight; /* calls running without the GIL (changed with the GIL held) */
    unsigned renewers; /* live renewers (and kept leases, deferred.c) made from this handle */
    PyObject *name;
    PyObject *weakrefs;
    int etcd;            /* an etcd:// or etcds:// table (shmlease.h: table names) */
    uint32_t value_size; /* the table's, once a call needed it (fixed at creation); 0: not yet */
} TableObject;

typedef struct {
    PyObject_HEAD shl_renewer *r;
    TableObject *table; /* strong reference: the handle outlives the thread */
    PyObject *lease;
    unsigned inflight;
} RenewerObject;

/* Runs `expr` (assigning rc) without the GIL, the handle pinned. */
#define NOGIL(self, expr)                                                                          \
    do {                                                                                           \
        (self)->inflight++;                                                                        \
        PyThreadState *ts_ = PyEval_SaveThread();                                                  \
        expr;                                                                                      \
        PyEval_RestoreThread(ts_);                                                                 \
        (self)->inflight--;                                                                        \
    } while (0)

extern PyTypeObject shl__py_renewer_type;
extern PyTypeObject shl__py_deferred_type;
extern PyTypeObject shl__py_election_type;

/* _shmlease.c: errors (each returns NULL, for `return shl__py_raise_*()`) */
PyObject *shl__py_raise_rc(int rc, const char *what);
PyObject *shl__py_raise_inval(const char *fmt, const char *what);
/* A number macro as a string: SHL__PY_STR(SHL_NAME_MAX) is "63". */
#define SHL__PY_STR_(x) #x
#define SHL__PY_STR(x)  SHL__PY_STR_(x)
PyObject *shl__py_raise_busy(const char *lease, const char *owner, const shl_lease_info *h,
                             int etcd);
/* _shmlease.c: arguments */
const char *shl__py_get_name(PyObject *o, const char *what);
int shl__py_get_u64(PyObject *o, const char *what, uint64_t *out);
int shl__py_table_ready(TableObject *self);

/* deferred.c: Table._defer() and Table._acquire_kept() */
PyObject *shl__py_table_defer(TableObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *shl__py_table_acquire_kept(TableObject *self, PyObject *const *args, Py_ssize_t nargs);

/* election.c: Table._election(), Table._leader() and Table._observe() */
PyObject *shl__py_table_election(TableObject *self, PyObject *args);
PyObject *shl__py_table_leader(TableObject *self, PyObject *arg);
PyObject *shl__py_table_observe(TableObject *self, PyObject *args);

#endif
