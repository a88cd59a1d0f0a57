/*
 * python/src/_shmlease.c - the native half of the Python package `shmlease`.
 *
 * A thin CPython extension over the public C API (lib/shmlease.h), linked
 * with the library's own sources. It converts arguments, releases the GIL
 * around every call that may wait (any call that takes a lease's lock, an
 * open, a wait, a renewer's stop), and turns return codes into the
 * exception classes that shmlease/_errors.py generates from the library's
 * error table (errors() below, made from SHL_ERRNO_MAP). The lease
 * semantics are all the library's; nothing here decides validity.
 *
 * Lifetime: a Table counts the calls that run without the GIL and the
 * renewers (and kept leases, deferred.c) made from it; close() refuses
 * while either is non-zero, so the handle is never freed under a running
 * call or a renewer's thread.
 */
#include "ext.h" /* Python.h first */

#include <datetime.h>
#include <structmember.h>

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ errors */

/* Codes run from 0 down to the most negative one in the table. */
#define ERR_SLOTS 256
static PyObject *err_class[ERR_SLOTS]; /* by -code; set by _setup() */
static PyObject *error_base;           /* shmlease.Error */
static PyObject *info_factory;         /* shmlease.LeaseInfo._from_tuple */
static PyObject *zero;                 /* the int 0 */

static PyObject *py_errors(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
#define ERR_ENTRY(name, code, msg)                                                                 \
    do {                                                                                           \
        PyObject *e = Py_BuildValue("(iss)", (code), "SHL_" #name, (msg));                         \
        if (!e || PyList_Append(list, e) < 0) {                                                    \
            Py_XDECREF(e);                                                                         \
            Py_DECREF(list);                                                                       \
            return NULL;                                                                           \
        }                                                                                          \
        Py_DECREF(e);                                                                              \
    } while (0);
    SHL_ERRNO_MAP(ERR_ENTRY)
#undef ERR_ENTRY
    return list;
}

static PyObject *class_for(int rc)
{
    if (rc < 0 && -rc < ERR_SLOTS && err_class[-rc])
        return err_class[-rc];
    return error_base ? error_base : PyExc_RuntimeError;
}

/* Raises the class of `rc`; `what` (a lease or table name, may be NULL)
 * prefixes the library's message. When the library said why
 * (shl_last_error(): the argument and the rule), that comes first, and the
 * name and message follow in parentheses: "owner: 300 bytes, the limit is
 * 63 (on 'jobs': invalid argument)". The detail is emptied once told.
 * Returns NULL for `return shl__py_raise_rc(...)`. */
PyObject *shl__py_raise_rc(int rc, const char *what)
{
    PyObject *cls = class_for(rc);
    const char *d = shl_last_error();
    if (*d) {
        if (what)
            PyErr_Format(cls, "%s (on '%s': %s)", d, what, shl_strerror(rc));
        else
            PyErr_Format(cls, "%s (%s)", d, shl_strerror(rc));
        shl_clear_error();
    } else if (what)
        PyErr_Format(cls, "%s: %s", what, shl_strerror(rc));
    else
        PyErr_SetString(cls, shl_strerror(rc));
    return NULL;
}

/* A ValueError of the InvalidArgument class, for input refused before the
 * library sees it. */
PyObject *shl__py_raise_inval(const char *fmt, const char *what)
{
    PyErr_Format(class_for(SHL_EINVAL), fmt, what);
    return NULL;
}

/* etcd: the table is an etcd one, which records no acquisition time and
 * no pid: since_ns and pid are None there (as in `shmlease dump --json`),
 * not the 0 the C info holds. */
static PyObject *info_tuple(const shl_lease_info *i, int etcd)
{
    PyObject *since = Py_None, *pid = Py_None;
    if (etcd) {
        Py_INCREF(since);
        Py_INCREF(pid);
    } else if (!(since = PyLong_FromUnsignedLongLong(i->since_ns))) {
        return NULL;
    } else if (!(pid = PyLong_FromLong(i->pid))) {
        Py_DECREF(since);
        return NULL;
    }
    return Py_BuildValue("(sKKKKNNiIIK)", i->owner, (unsigned long long)i->token,
                         (unsigned long long)i->expiry_ns, (unsigned long long)i->remaining_ns,
                         (unsigned long long)i->now_ns, since, pid, i->state, (unsigned)i->waiters,
                         (unsigned)i->value_len, (unsigned long long)i->value_token);
}

static PyObject *make_info(const shl_lease_info *i, int etcd)
{
    PyObject *tup = info_tuple(i, etcd);
    if (!tup || !info_factory)
        return tup;
    PyObject *r = PyObject_CallOneArg(info_factory, tup);
    Py_DECREF(tup);
    return r;
}

/* Busy carries the holder seen at the refusal; "already held by you" when
 * that holder is `owner` itself. */
PyObject *shl__py_raise_busy(const char *lease, const char *owner, const shl_lease_info *h,
                             int etcd)
{
    PyObject *cls = class_for(SHL_EBUSY);
    unsigned long long ms = h->remaining_ns / 1000000u;
    int mine = owner && strcmp(owner, h->owner) == 0;
    PyObject *msg = PyUnicode_FromFormat("%s: %s (%s %s, token %llu, %llu.%03llu s more)", lease,
                                         mine ? "already held by you" : shl_strerror(SHL_EBUSY),
                                         mine ? "owner" : "held by", h->owner,
                                         (unsigned long long)h->token, ms / 1000u, ms % 1000u);
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, msg);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *holder = make_info(h, etcd);
    if (!holder || PyObject_SetAttrString(exc, "holder", holder) < 0) {
        Py_XDECREF(holder);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(holder);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

/* --------------------------------------------------- argument parsing */

/* METH_FASTCALL | METH_KEYWORDS without the cost of a format string:
 * out[i] receives the argument named names[i] (borrowed) or stays NULL.
 * The first npos names may be given by position; the first nreq are
 * required. */
static int parse(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *const *names, int n, int npos, int nreq, PyObject **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", fn,
                     npos, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kn = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        while (j < n && PyUnicode_CompareWithASCIIString(kn, names[j]) != 0)
            j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, kn);
            return -1;
        }
        if (out[j]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn,
                         names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (int i = 0; i < nreq; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, names[i]);
            return -1;
        }
    return 0;
}

/* A lease, owner or table name: a str without NUL; the library checks the
 * rest (length, characters) and answers InvalidArgument. */
const char *shl__py_get_name(PyObject *o, const char *what)
{
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(o, &len);
    if (!s)
        return NULL;
    if ((size_t)len != strlen(s)) {
        shl__py_raise_inval("%s must not contain NUL characters", what);
        return NULL;
    }
    return s;
}

int shl__py_get_u64(PyObject *o, const char *what, uint64_t *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        shl__py_raise_inval("%s must be an integer from 0 to 2**64 - 1", what);
        return -1;
    }
    *out = v;
    return 0;
}

#define DUR_ZERO_OK 1u /* a timeout: 0 means "try once" */
#define DUR_NONE_OK 2u /* None (or absent) means `dflt` */

/* A datetime.timedelta in ns (exact: it counts microseconds). */
static int delta_ns(PyObject *d, const char *what, uint64_t *out)
{
    long days = PyDateTime_DELTA_GET_DAYS(d);
    long secs = PyDateTime_DELTA_GET_SECONDS(d), us = PyDateTime_DELTA_GET_MICROSECONDS(d);
    if (days < 0)
        return shl__py_raise_inval("%s must be a positive duration", what), -1;
    /* days < 1e9: the sum fits in 128 bits; it must fit in 64. */
    unsigned __int128 v = (unsigned __int128)days * 86400u * 1000000000u +
                          (unsigned __int128)secs * 1000000000u + (unsigned __int128)us * 1000u;
    if (v > UINT64_MAX)
        return shl__py_raise_inval("%s is too large: the limit is 2**64 - 1 ns (some 584 years)",
                                   what),
               -1;
    *out = (uint64_t)v;
    return 0;
}

/* A duration given either in seconds (`sec`: int or float, like
 * time.sleep, or a datetime.timedelta) or exactly in nanoseconds (`ns`:
 * int). Seconds are rounded up to the nanosecond, so a positive duration
 * never becomes 0. */
static int get_duration(PyObject *sec, PyObject *ns, const char *what, const char *what_ns,
                        unsigned flags, uint64_t dflt, uint64_t *out)
{
    if (sec == Py_None)
        sec = NULL;
    if (ns == Py_None)
        ns = NULL;
    if (sec && ns) {
        PyErr_Format(PyExc_TypeError, "give %s or %s, not both", what, what_ns);
        return -1;
    }
    if (!sec && !ns) {
        if (flags & DUR_NONE_OK) {
            *out = dflt;
            return 0;
        }
        PyErr_Format(PyExc_TypeError, "missing %s (seconds) or %s", what, what_ns);
        return -1;
    }
    uint64_t v;
    if (ns) {
        if (shl__py_get_u64(ns, what_ns, &v) < 0)
            return -1;
    } else if (PyDelta_Check(sec)) {
        if (delta_ns(sec, what, &v) < 0)
            return -1;
    } else if (PyFloat_Check(sec)) {
        double d = PyFloat_AS_DOUBLE(sec);
        if (isnan(d) || d < 0 || (d == 0 && !(flags & DUR_ZERO_OK)))
            return shl__py_raise_inval("%s must be a positive number of seconds", what), -1;
        double x = ceil(d * 1e9);
        if (!(x < 18446744073709551616.0))
            return shl__py_raise_inval(
                       "%s is too large: the limit is 2**64 - 1 ns (some 584 years)", what),
                   -1;
        v = (uint64_t)x;
    } else if (PyLong_Check(sec) && !PyBool_Check(sec)) {
        int neg = PyObject_RichCompareBool(sec, zero, Py_LT);
        if (neg < 0)
            return -1;
        if (neg)
            return shl__py_raise_inval("%s must be a positive number of seconds", what), -1;
        unsigned long long s = PyLong_AsUnsignedLongLong(sec);
        if (s == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return shl__py_raise_inval(
                       "%s is too large: the limit is 2**64 - 1 ns (some 584 years)", what),
                   -1;
        }
        if (s > UINT64_MAX / 1000000000u)
            return shl__py_raise_inval(
                       "%s is too large: the limit is 2**64 - 1 ns (some 584 years)", what),
                   -1;
        v = (uint64_t)s * 1000000000u;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be seconds (int, float or timedelta), not %.100s",
                     what, Py_TYPE(sec)->tp_name);
        return -1;
    }
    if (v == 0 && !(flags & DUR_ZERO_OK))
        return shl__py_raise_inval("%s must be positive", what), -1;
    *out = v;
    return 0;
}

/* ------------------------------------------------------------- Table */

static PyTypeObject TableType;

int shl__py_table_ready(TableObject *self)
{
    if (!self->t) {
        PyErr_SetString(PyExc_ValueError, "operation on a closed table");
        return -1;
    }
    return 0;
}

static int table_init(TableObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {
        "name",       "create",       "exclusive",       "capacity",         "value_size",
        "mode",       "manual_clock", "reclaim_orphans", "reclaim_delay_ms", "token_state_path",
        "max_shared", "max_waiters",  "spare_values",    "history",          NULL};
    PyObject *nameo;
    int create = 0, excl = 0, manual = 0;
    unsigned int capacity = 1024, value_size = 256;
    int mode = 0600;
    PyObject *state_path = Py_None, *reclaimo = Py_None, *delayo = Py_None;
    /* max_shared, max_waiters, spare_values, history */
    PyObject *sizeo[4] = {Py_None, Py_None, Py_None, Py_None};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$ppIIipOOOOOOO:Table", kwlist, &nameo, &create,
                                     &excl, &capacity, &value_size, &mode, &manual, &reclaimo,
                                     &delayo, &state_path, &sizeo[0], &sizeo[1], &sizeo[2],
                                     &sizeo[3]))
        return -1;
    if (self->t) {
        PyErr_SetString(PyExc_RuntimeError, "Table already open");
        return -1;
    }
    const char *name = shl__py_get_name(nameo, "table name");
    if (!name)
        return -1;
    PyObject *path_bytes = NULL;
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = value_size;
    o.mode = (mode_t)mode;
    o.clock = manual ? SHL_CLOCK_MANUAL : SHL_CLOCK_MONOTONIC;
    o.flags = (create || excl ? SHL_CREATE : 0) | (excl ? SHL_EXCL : 0);
    /* None: the library's default policy and delay (shl_options_init()). */
    if (reclaimo != Py_None) {
        int reclaim = PyObject_IsTrue(reclaimo);
        if (reclaim < 0)
            return -1;
        o.policy = reclaim ? o.policy | SHL_POLICY_RECLAIM_ORPHANS
                           : o.policy & ~SHL_POLICY_RECLAIM_ORPHANS;
    }
    if (delayo != Py_None) {
        unsigned long d = PyLong_Check(delayo) ? PyLong_AsUnsignedLong(delayo) : (unsigned long)-1;
        if (d > UINT32_MAX) {
            PyErr_Clear();
            return shl__py_raise_inval("%s must be an integer from 0 to 2**32 - 1",
                                       "reclaim_delay_ms"),
                   -1;
        }
        o.reclaim_delay_ms = (uint32_t)d;
    }
    /* None: the library's defaults (the pools from the capacity). */
    static const char *const size_names[4] = {"max_shared", "max_waiters", "spare_values",
                                              "history"};
    uint32_t *sizes[4] = {&o.max_shared, &o.max_waiters, &o.spare_values, &o.history};
    for (int i = 0; i < 4; i++) {
        if (sizeo[i] == Py_None)
            continue;
        unsigned long v =
            PyLong_Check(sizeo[i]) ? PyLong_AsUnsignedLong(sizeo[i]) : (unsigned long)-1;
        if (v >= UINT32_MAX) {
            PyErr_Clear();
            return shl__py_raise_inval("%s must be an integer from 0 to 2**32 - 2", size_names[i]),
                   -1;
        }
        *sizes[i] = (uint32_t)v;
    }
    if (state_path != Py_None) {
        if (!PyUnicode_FSConverter(state_path, &path_bytes))
            return -1;
        o.token_state_path = PyBytes_AS_STRING(path_bytes);
    }
    /* Without create, an existing table of either mode is opened, whatever
     * its geometry, as shl_open(name, NULL) does. */
    const shl_options *op = create || excl ? &o : NULL;
    shl_table *t = NULL;
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = shl_open(name, op, &t);
    PyEval_RestoreThread(ts);
    Py_XDECREF(path_bytes);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name), -1;
    self->t = t;
    self->etcd = strncmp(name, "etcd://", 7) == 0 || strncmp(name, "etcds://", 8) == 0;
    Py_INCREF(nameo);
    Py_XSETREF(self->name, nameo);
    return 0;
}

static int table_close_handle(TableObject *self)
{
    if (!self->t)
        return 0;
    if (self->inflight || self->renewers) {
        PyErr_Format(PyExc_RuntimeError,
                     "table in use: %u call(s) running in other threads, %u lease(s) kept alive; "
                     "end them first",
                     self->inflight, self->renewers);
        return -1;
    }
    shl_close(self->t);
    self->t = NULL;
    return 0;
}

static void table_dealloc(TableObject *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    /* Renewers hold a reference, and no call can be running: inflight is 0. */
    if (self->t)
        shl_close(self->t);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *table_close(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (table_close_handle(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *table_enter(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (shl__py_table_ready(self) < 0)
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *table_exit(TableObject *self, PyObject *args)
{
    (void)args;
    if (table_close_handle(self) < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *table_get_closed(TableObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->t == NULL);
}

static PyObject *table_get_name(TableObject *self, void *c)
{
    (void)c;
    if (!self->name)
        Py_RETURN_NONE;
    Py_INCREF(self->name);
    return self->name;
}

/* acquire(lease, owner, ttl=None, *, ttl_ns=None) */
static const char *const acq_names[] = {"lease", "owner", "ttl", "ttl_ns"};

/* The result of a shared acquisition: (token, gen). */
static PyObject *token_gen(uint64_t token, uint64_t gen)
{
    return Py_BuildValue("(KK)", (unsigned long long)token, (unsigned long long)gen);
}

static PyObject *do_acquire(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, const char *fn, int busy_none, int shared)
{
    PyObject *a[4];
    if (parse(fn, args, nargs, kwnames, acq_names, 4, 3, 2, a) < 0 || shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t ttl, token = 0;
    if (!owner || get_duration(a[2], a[3], "ttl", "ttl_ns", 0, 0, &ttl) < 0)
        return NULL;
    shl_lease_info holder;
    uint64_t gen = 0;
    int rc;
    if (shared)
        NOGIL(self, rc = shl_acquire_shared_ex(self->t, lease, owner, ttl, &token, &gen, &holder));
    else
        NOGIL(self, rc = shl_acquire_ex(self->t, lease, owner, ttl, &token, &holder));
    if (rc == SHL_OK)
        return shared ? token_gen(token, gen) : PyLong_FromUnsignedLongLong(token);
    if (rc == SHL_EBUSY) {
        if (busy_none)
            Py_RETURN_NONE;
        return shl__py_raise_busy(lease, owner, &holder, self->etcd);
    }
    return shl__py_raise_rc(rc, lease);
}

static PyObject *table_acquire(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    return do_acquire(self, args, nargs, kwnames, "acquire", 0, 0);
}

static PyObject *table_acquire_shared(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames)
{
    return do_acquire(self, args, nargs, kwnames, "acquire_shared", 0, 1);
}

static PyObject *table_try_acquire_shared(TableObject *self, PyObject *const *args,
                                          Py_ssize_t nargs, PyObject *kwnames)
{
    return do_acquire(self, args, nargs, kwnames, "try_acquire_shared", 1, 1);
}

static PyObject *table_try_acquire(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    return do_acquire(self, args, nargs, kwnames, "try_acquire", 1, 0);
}

static PyObject *do_acquire_wait(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames, const char *fn, int shared)
{
    static const char *const names[] = {"lease", "owner", "ttl", "timeout", "ttl_ns", "timeout_ns"};
    PyObject *a[6];
    if (parse(fn, args, nargs, kwnames, names, 6, 4, 2, a) < 0 || shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t ttl, timeout, token = 0;
    if (!owner || get_duration(a[2], a[4], "ttl", "ttl_ns", 0, 0, &ttl) < 0 ||
        get_duration(a[3], a[5], "timeout", "timeout_ns", DUR_ZERO_OK | DUR_NONE_OK,
                     SHL_WAIT_FOREVER, &timeout) < 0)
        return NULL;
    uint64_t gen = 0;
    int rc;
    if (shared)
        NOGIL(self,
              rc = shl_acquire_shared_wait(self->t, lease, owner, ttl, timeout, &token, &gen));
    else
        NOGIL(self, rc = shl_acquire_wait(self->t, lease, owner, ttl, timeout, &token));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    return shared ? token_gen(token, gen) : PyLong_FromUnsignedLongLong(token);
}

static PyObject *table_acquire_wait(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames)
{
    return do_acquire_wait(self, args, nargs, kwnames, "acquire_wait", 0);
}

static PyObject *table_acquire_shared_wait(TableObject *self, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames)
{
    return do_acquire_wait(self, args, nargs, kwnames, "acquire_shared_wait", 1);
}

static PyObject *table_renew(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"lease", "owner", "token", "ttl", "ttl_ns"};
    PyObject *a[5];
    if (parse("renew", args, nargs, kwnames, names, 5, 4, 3, a) < 0 ||
        shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t token, ttl;
    if (!owner || shl__py_get_u64(a[2], "token", &token) < 0 ||
        get_duration(a[3], a[4], "ttl", "ttl_ns", 0, 0, &ttl) < 0)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_renew(self->t, lease, owner, token, ttl));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    Py_RETURN_NONE;
}

static PyObject *table_release(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"lease", "owner", "token"};
    PyObject *a[3];
    if (parse("release", args, nargs, kwnames, names, 3, 3, 3, a) < 0 ||
        shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t token;
    if (!owner || shl__py_get_u64(a[2], "token", &token) < 0)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_release(self->t, lease, owner, token));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    Py_RETURN_NONE;
}

/* A read-only bytes-like value: str is refused (encode it first). */
static int get_value(PyObject *o, Py_buffer *view)
{
    if (PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "value must be bytes-like, not str (encode it first)");
        return -1;
    }
    return PyObject_GetBuffer(o, view, PyBUF_SIMPLE);
}

static PyObject *table_write(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"lease", "owner", "token", "value"};
    PyObject *a[4];
    if (parse("write", args, nargs, kwnames, names, 4, 4, 4, a) < 0 ||
        shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t token;
    Py_buffer v;
    if (!owner || shl__py_get_u64(a[2], "token", &token) < 0 || get_value(a[3], &v) < 0)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_write(self->t, lease, owner, token, v.buf, (size_t)v.len));
    PyBuffer_Release(&v);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    Py_RETURN_NONE;
}

/* read(lease) -> (bytes, token) */
static PyObject *table_read(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"lease"};
    PyObject *a[1];
    if (parse("read", args, nargs, kwnames, names, 1, 1, 1, a) < 0 || shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    if (!lease)
        return NULL;
    /* A first try into a small buffer on the stack covers most values; a
     * longer one is read again into a bytes object of its size. */
    char small[256];
    size_t len = 0;
    uint64_t token = 0;
    int rc;
    NOGIL(self, rc = shl_read(self->t, lease, small, sizeof small, &len, &token));
    if (rc == SHL_OK)
        return Py_BuildValue("(y#K)", small, (Py_ssize_t)len, (unsigned long long)token);
    while (rc == SHL_E2BIG) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
        if (!b)
            return NULL;
        size_t cap = len;
        NOGIL(self, rc = shl_read(self->t, lease, PyBytes_AS_STRING(b), cap, &len, &token));
        if (rc == SHL_OK) {
            if (len < cap && _PyBytes_Resize(&b, (Py_ssize_t)len) < 0)
                return NULL;
            PyObject *r = Py_BuildValue("(NK)", b, (unsigned long long)token);
            return r;
        }
        Py_DECREF(b); /* grew again in between: once more with its new size */
    }
    return shl__py_raise_rc(rc, lease);
}

static PyObject *table_stat_tuple(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    static const char *const names[] = {"lease"};
    PyObject *a[1];
    if (parse("stat", args, nargs, kwnames, names, 1, 1, 1, a) < 0 || shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    if (!lease)
        return NULL;
    shl_lease_info i;
    int rc;
    NOGIL(self, rc = shl_stat(self->t, lease, &i));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    return info_tuple(&i, self->etcd);
}

static PyObject *table_now_ns(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (shl__py_table_ready(self) < 0)
        return NULL;
    uint64_t now;
    int rc = shl_now(self->t, &now);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    return PyLong_FromUnsignedLongLong(now);
}

static PyObject *table_clock_set(TableObject *self, PyObject *arg)
{
    uint64_t now;
    if (shl__py_table_ready(self) < 0 || shl__py_get_u64(arg, "now_ns", &now) < 0)
        return NULL;
    int rc = shl_clock_set(self->t, now);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *table_revoke(TableObject *self, PyObject *arg)
{
    if (shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(arg, "lease");
    if (!lease)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_revoke(self->t, lease));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    Py_RETURN_NONE;
}

static PyObject *table_info_tuple(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (shl__py_table_ready(self) < 0)
        return NULL;
    shl_table_info i;
    int rc = shl_table_info_get(self->t, &i);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    return Py_BuildValue(
        "(IIIiiIIiKiKIIIIIIIKKKK)", (unsigned)i.capacity, (unsigned)i.value_size, (unsigned)i.used,
        i.clock, (int)i.mode, i.policy, (unsigned)i.reclaim_delay_ms, i.created,
        (unsigned long long)i.size, (int)i.creator_pid, (unsigned long long)i.token_floor,
        (unsigned)i.max_shared, (unsigned)i.shared_taken, (unsigned)i.max_waiters,
        (unsigned)i.waiters_taken, (unsigned)i.history, (unsigned)i.spare_values,
        (unsigned)i.spare_values_taken, (unsigned long long)i.shared_taken_back,
        (unsigned long long)i.waiters_taken_back, (unsigned long long)i.spare_values_taken_back,
        (unsigned long long)i.allocated);
}

static PyObject *detail_tuple(const shl_lease_detail *d, int etcd)
{
    PyObject *info = info_tuple(&d->info, etcd);
    PyObject *counters = PyTuple_New(SHL_COUNTER_COUNT);
    PyObject *events = PyTuple_New(d->nevents <= SHL_HISTORY_MAX ? d->nevents : 0);
    if (!info || !counters || !events)
        goto fail;
    for (int i = 0; i < SHL_COUNTER_COUNT; i++) {
        PyObject *c =
            Py_BuildValue("(sK)", shl_counter_name(i), (unsigned long long)d->counters[i]);
        if (!c)
            goto fail;
        PyTuple_SET_ITEM(counters, i, c);
    }
    for (uint32_t i = 0; i < d->nevents && i < SHL_HISTORY_MAX; i++) {
        const shl_event_info *e = &d->events[i];
        char owner[sizeof e->owner + 1];
        memcpy(owner, e->owner, sizeof e->owner);
        owner[sizeof e->owner] = 0;
        PyObject *ev = Py_BuildValue("(KKisssL)", (unsigned long long)e->time_ns,
                                     (unsigned long long)e->token, (int)e->pid, shl_op_name(e->op),
                                     e->op == SHL_OP_REJECT ? shl_counter_name(e->why) : "", owner,
                                     (long long)e->revision);
        if (!ev)
            goto fail;
        PyTuple_SET_ITEM(events, i, ev);
    }
    static const char *const locks[] = {"FREE", "HELD", "DEAD", "BROKEN"};
    const char *lock = d->lock >= 0 && d->lock <= SHL_LOCK_BROKEN ? locks[d->lock] : "?";
    uint32_t pl = d->preview_len <= SHL_PREVIEW_MAX ? d->preview_len : SHL_PREVIEW_MAX;
    return Py_BuildValue("(sINisiisKKiKNKNy#i)", d->name, (unsigned)d->slot, info, d->stable, lock,
                         (int)d->lock_pid, d->intent_armed,
                         d->intent_armed ? shl_op_name(d->intent_op) : "",
                         (unsigned long long)d->intent_token, (unsigned long long)d->heartbeat_ns,
                         d->renewer_stalled, (unsigned long long)d->dead_seen_ns, counters,
                         (unsigned long long)d->events_total, events, (const char *)d->preview,
                         (Py_ssize_t)pl, d->history_partial);
fail:
    Py_XDECREF(info);
    Py_XDECREF(counters);
    Py_XDECREF(events);
    return NULL;
}

/* _inspect(lease_or_slot) -> detail tuple, None past the last slot */
static PyObject *table_inspect_tuple(TableObject *self, PyObject *arg)
{
    if (shl__py_table_ready(self) < 0)
        return NULL;
    shl_lease_detail d;
    int rc;
    const char *what = NULL;
    if (PyLong_Check(arg)) {
        unsigned long slot = PyLong_AsUnsignedLong(arg);
        if (slot == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (slot > UINT32_MAX)
            Py_RETURN_NONE;
        NOGIL(self, rc = shl_inspect_slot(self->t, (uint32_t)slot, &d));
        if (rc == SHL_ENOENT)
            Py_RETURN_NONE;
    } else {
        what = shl__py_get_name(arg, "lease");
        if (!what)
            return NULL;
        NOGIL(self, rc = shl_inspect(self->t, what, &d));
    }
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, what);
    return detail_tuple(&d, self->etcd);
}

static void collect_line(void *arg, const char *line)
{
    /* Called without the GIL: take it for the append. A failed append
     * leaves an exception set, checked after the call. */
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *s = PyErr_Occurred() ? NULL : PyUnicode_DecodeUTF8(line, strlen(line), "replace");
    if (s) {
        PyList_Append((PyObject *)arg, s);
        Py_DECREF(s);
    }
    PyGILState_Release(g);
}

/* check() -> (ok, [problems]) */
static PyObject *table_check(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (shl__py_table_ready(self) < 0)
        return NULL;
    PyObject *lines = PyList_New(0);
    if (!lines)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_check(self->t, collect_line, lines));
    if (PyErr_Occurred() || (rc != SHL_OK && rc != SHL_ECORRUPT)) {
        Py_DECREF(lines);
        return PyErr_Occurred() ? NULL : shl__py_raise_rc(rc, NULL);
    }
    return Py_BuildValue("(NN)", PyBool_FromLong(rc == SHL_OK), lines);
}

/* repair(dry_run=False) -> (ok, [actions]) */
static PyObject *table_repair(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"dry_run"};
    PyObject *a[1];
    if (parse("repair", args, nargs, kwnames, names, 1, 1, 0, a) < 0 ||
        shl__py_table_ready(self) < 0)
        return NULL;
    int dry = a[0] ? PyObject_IsTrue(a[0]) : 0;
    if (dry < 0)
        return NULL;
    PyObject *lines = PyList_New(0);
    if (!lines)
        return NULL;
    int rc;
    NOGIL(self, rc = shl_repair(self->t, dry ? SHL_REPAIR_DRY_RUN : 0, collect_line, lines));
    if (PyErr_Occurred() || (rc != SHL_OK && rc != SHL_ECORRUPT)) {
        Py_DECREF(lines);
        return PyErr_Occurred() ? NULL : shl__py_raise_rc(rc, NULL);
    }
    return Py_BuildValue("(NN)", PyBool_FromLong(rc == SHL_OK), lines);
}

static PyObject *table_heartbeat_tuple(TableObject *self, PyObject *arg)
{
    if (shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(arg, "lease");
    if (!lease)
        return NULL;
    shl_heartbeat hb;
    int rc = shl_heartbeat_get(self->t, lease, &hb);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    return Py_BuildValue("(KKKKi)", (unsigned long long)hb.token, (unsigned long long)hb.beat_ns,
                         (unsigned long long)hb.interval_ns, (unsigned long long)hb.age_ns,
                         hb.stalled);
}

/* The benchmark's loop: n operations of one kind (0: acquire+release,
 * 1: write, 2: read), timed from C. */
static int bench_loop(shl_table *t, int kind, const char *lease, const char *owner,
                      unsigned long long n, double *ns)
{
    const uint64_t ttl = UINT64_C(60000000000);
    char buf[64] = "benchmark value";
    size_t len;
    uint64_t token = 0, wtok;
    int rc = kind != 0 ? shl_acquire(t, lease, owner, ttl, &token) : SHL_OK;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned long long i = 0; i < n && rc == SHL_OK; i++) {
        if (kind == 0) {
            rc = shl_acquire(t, lease, owner, ttl, &token);
            if (rc == SHL_OK)
                rc = shl_release(t, lease, owner, token);
        } else if (kind == 1) {
            rc = shl_write(t, lease, owner, token, buf, sizeof buf);
        } else {
            rc = shl_read(t, lease, buf, sizeof buf, &len, &wtok);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (kind != 0 && rc == SHL_OK)
        rc = shl_release(t, lease, owner, token);
    *ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    return rc;
}

/* _bench(op, lease, owner, n) -> ns per operation, the same calls made
 * from C in a loop: the floor the benchmark compares the binding with. */
static PyObject *table_bench(TableObject *self, PyObject *args)
{
    const char *op, *lease, *owner;
    unsigned long long n;
    if (!PyArg_ParseTuple(args, "sssK:_bench", &op, &lease, &owner, &n) ||
        shl__py_table_ready(self) < 0)
        return NULL;
    static const char *const ops[] = {"acquire_release", "write", "read"};
    int kind = 0;
    while (kind < 3 && strcmp(op, ops[kind]) != 0)
        kind++;
    if (kind == 3 || n == 0)
        return shl__py_raise_inval("_bench: unknown operation or n == 0 (%s)", op);
    double ns = 0;
    int rc;
    NOGIL(self, rc = bench_loop(self->t, kind, lease, owner, n, &ns));
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    return PyFloat_FromDouble(ns);
}

/* ----------------------------------------------------------- Renewer */

/* _renewer(lease, owner, token, ttl_ns, interval_ns, margin_ns, max_hold_ns) */
static PyObject *table_renewer(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"lease",       "owner",     "token",      "ttl_ns",
                                        "interval_ns", "margin_ns", "max_hold_ns"};
    PyObject *a[7];
    if (parse("_renewer", args, nargs, kwnames, names, 7, 7, 4, a) < 0 ||
        shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(a[0], "lease");
    const char *owner = lease ? shl__py_get_name(a[1], "owner") : NULL;
    uint64_t token, ttl;
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    if (!owner || shl__py_get_u64(a[2], "token", &token) < 0 ||
        shl__py_get_u64(a[3], "ttl_ns", &ttl) < 0 ||
        (a[4] && a[4] != Py_None && shl__py_get_u64(a[4], "interval_ns", &o.interval_ns) < 0) ||
        (a[5] && a[5] != Py_None && shl__py_get_u64(a[5], "margin_ns", &o.margin_ns) < 0) ||
        (a[6] && a[6] != Py_None && shl__py_get_u64(a[6], "max_hold_ns", &o.max_hold_ns) < 0))
        return NULL;
    RenewerObject *ro = PyObject_New(RenewerObject, &shl__py_renewer_type);
    if (!ro)
        return NULL;
    ro->r = NULL;
    ro->inflight = 0;
    Py_INCREF(self);
    ro->table = self;
    Py_INCREF(a[0]);
    ro->lease = a[0];
    shl_renewer *r = NULL;
    int rc;
    NOGIL(self, rc = shl_renewer_start(self->t, lease, owner, token, ttl, &o, &r));
    if (rc != SHL_OK) {
        Py_DECREF(ro);
        return shl__py_raise_rc(rc, lease);
    }
    ro->r = r;
    self->renewers++;
    return (PyObject *)ro;
}

static int renewer_ready(RenewerObject *self)
{
    if (!self->r) {
        PyErr_SetString(PyExc_ValueError, "the lease is no longer kept (renewer stopped)");
        return -1;
    }
    return 0;
}

/* Stops the thread; returns the library's code. */
static int renewer_end(RenewerObject *self, unsigned flags)
{
    shl_renewer *r = self->r;
    if (!r)
        return SHL_OK;
    self->r = NULL;
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = shl_renewer_stop(r, flags);
    PyEval_RestoreThread(ts);
    self->table->renewers--;
    return rc;
}

static void renewer_dealloc(RenewerObject *self)
{
    if (self->r && self->inflight == 0)
        renewer_end(self, SHL_RENEWER_RELEASE);
    Py_XDECREF(self->table);
    Py_XDECREF(self->lease);
    PyObject_Free(self);
}

/* stop(release=True) -> True if the lease was kept to the end, False if it
 * was lost. */
static PyObject *renewer_stop(RenewerObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"release"};
    PyObject *a[1];
    if (parse("stop", args, nargs, kwnames, names, 1, 1, 0, a) < 0)
        return NULL;
    int rel = a[0] ? PyObject_IsTrue(a[0]) : 1;
    if (rel < 0)
        return NULL;
    if (self->inflight) {
        PyErr_SetString(PyExc_RuntimeError, "renewer in use by another thread");
        return NULL;
    }
    if (!self->r)
        Py_RETURN_NONE;
    int rc = renewer_end(self, rel ? SHL_RENEWER_RELEASE : 0);
    if (rc == SHL_OK)
        Py_RETURN_TRUE;
    if (rc == SHL_ELOST)
        Py_RETURN_FALSE;
    return shl__py_raise_rc(rc, NULL);
}

static PyObject *renewer_fileno(RenewerObject *self, PyObject *unused)
{
    (void)unused;
    if (renewer_ready(self) < 0)
        return NULL;
    int fd = shl_renewer_fd(self->r);
    if (fd < 0)
        return shl__py_raise_rc(fd, NULL);
    return PyLong_FromLong(fd);
}

/* The SHL_LOSS_* reason, 0 while held. */
static PyObject *renewer_lost(RenewerObject *self, PyObject *unused)
{
    (void)unused;
    if (renewer_ready(self) < 0)
        return NULL;
    int r = shl_renewer_lost(self->r);
    if (r < 0)
        return shl__py_raise_rc(r, NULL);
    return PyLong_FromLong(r);
}

static PyObject *renewer_check(RenewerObject *self, PyObject *unused)
{
    (void)unused;
    if (renewer_ready(self) < 0)
        return NULL;
    int rc = shl_renewer_check(self->r);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, PyUnicode_AsUTF8(self->lease));
    Py_RETURN_NONE;
}

static PyObject *renewer_write(RenewerObject *self, PyObject *arg)
{
    Py_buffer v;
    if (renewer_ready(self) < 0 || get_value(arg, &v) < 0)
        return NULL;
    int rc;
    self->inflight++;
    self->table->inflight++;
    PyThreadState *ts = PyEval_SaveThread();
    rc = shl_renewer_write(self->r, v.buf, (size_t)v.len);
    PyEval_RestoreThread(ts);
    self->table->inflight--;
    self->inflight--;
    PyBuffer_Release(&v);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, PyUnicode_AsUTF8(self->lease));
    Py_RETURN_NONE;
}

static PyObject *renewer_token(RenewerObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->r ? shl_renewer_token(self->r) : 0);
}

static PyObject *renewer_running(RenewerObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->r != NULL);
}

static PyMethodDef renewer_methods[] = {
    {"stop", (PyCFunction)(void (*)(void))renewer_stop, METH_FASTCALL | METH_KEYWORDS,
     "stop($self, /, release=True)\n--\n\nStop renewing (and release); False if the lease was "
     "lost."},
    {"fileno", (PyCFunction)renewer_fileno, METH_NOARGS,
     "fileno($self, /)\n--\n\nAn eventfd that becomes readable when the lease is declared lost."},
    {"lost", (PyCFunction)renewer_lost, METH_NOARGS,
     "lost($self, /)\n--\n\n0 while held, else the SHL_LOSS_* reason (sticky)."},
    {"check", (PyCFunction)renewer_check, METH_NOARGS,
     "check($self, /)\n--\n\nRaise Lost unless the lease is still held as far as this process can "
     "tell."},
    {"write", (PyCFunction)renewer_write, METH_O,
     "write($self, value, /)\n--\n\nGuarded write through the renewer; raises Lost."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef renewer_getset[] = {
    {"token", (getter)renewer_token, NULL, "the token kept alive", NULL},
    {"running", (getter)renewer_running, NULL, "whether the renewer has not been stopped", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject shl__py_renewer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmlease._shmlease.Renewer",
    .tp_basicsize = sizeof(RenewerObject),
    .tp_dealloc = (destructor)renewer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The library's renewer thread for one held lease (made by Table._renewer).",
    .tp_methods = renewer_methods,
    .tp_getset = renewer_getset,
};

/* ------------------------------------------------------ Table's type */

#define FASTKW(fn) (PyCFunction)(void (*)(void))(fn), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef table_methods[] = {
    {"acquire", FASTKW(table_acquire),
     "acquire($self, /, lease, owner, ttl=None, *, ttl_ns=None)\n--\n\n"
     "Take the lease for `owner` for `ttl` seconds (or exactly `ttl_ns`) and return\n"
     "its new fencing token (an int). Raises Busy (with .holder) when another holds it."},
    {"try_acquire", FASTKW(table_try_acquire),
     "try_acquire($self, /, lease, owner, ttl=None, *, ttl_ns=None)\n--\n\n"
     "As acquire(), but return None when the lease is held by another."},
    {"acquire_wait", FASTKW(table_acquire_wait),
     "acquire_wait($self, /, lease, owner, ttl=None, timeout=None, *, ttl_ns=None,"
     " timeout_ns=None)\n--\n\n"
     "As acquire(), waiting (GIL released, no polling) up to `timeout` seconds (None:\n"
     "no bound) for the lease. Raises TimedOut."},
    {"acquire_shared", FASTKW(table_acquire_shared),
     "acquire_shared($self, /, lease, owner, ttl=None, *, ttl_ns=None)\n--\n\n"
     "Take the lease shared (one of up to 32 readers) for `owner` for `ttl` seconds and\n"
     "return (token, gen): its own new token, and the token of the last exclusive\n"
     "acquisition before it (0 if none; at least the token floor on a table that has\n"
     "one), for Fence.admit_read(). Raises Busy when an\n"
     "exclusive holder is valid or a writer is queued. renew() and release() take the\n"
     "token; write() refuses it (Lost)."},
    {"try_acquire_shared", FASTKW(table_try_acquire_shared),
     "try_acquire_shared($self, /, lease, owner, ttl=None, *, ttl_ns=None)\n--\n\n"
     "As acquire_shared(), but return None when busy."},
    {"acquire_shared_wait", FASTKW(table_acquire_shared_wait),
     "acquire_shared_wait($self, /, lease, owner, ttl=None, timeout=None, *, ttl_ns=None,"
     " timeout_ns=None)\n--\n\n"
     "As acquire_shared(), waiting (GIL released) up to `timeout` seconds; readers\n"
     "queued ahead of the next writer go in together. Raises TimedOut."},
    {"renew", FASTKW(table_renew),
     "renew($self, /, lease, owner, token, ttl=None, *, ttl_ns=None)\n--\n\n"
     "Extend a valid lease to now + ttl. Raises Lost when (owner, token) no longer\n"
     "holds it."},
    {"release", FASTKW(table_release),
     "release($self, /, lease, owner, token)\n--\n\nFree a valid lease (the token is kept). Raises "
     "Lost."},
    {"write", FASTKW(table_write),
     "write($self, /, lease, owner, token, value)\n--\n\n"
     "Replace the lease's value with the bytes-like `value`, if and only if (owner,\n"
     "token) holds the lease at that moment. Raises Lost (nothing written), TooBig."},
    {"read", FASTKW(table_read),
     "read($self, /, lease)\n--\n\n"
     "(value, token): the value and the token that wrote it (0: never written); a lock-free "
     "snapshot."},
    {"_stat", FASTKW(table_stat_tuple), "the shl_lease_info fields as a tuple"},
    {"now_ns", (PyCFunction)table_now_ns, METH_NOARGS,
     "now_ns($self, /)\n--\n\nThe table's clock in ns (CLOCK_MONOTONIC or the manual value)."},
    {"clock_set", (PyCFunction)table_clock_set, METH_O,
     "clock_set($self, now_ns, /)\n--\n\nMove a manual-clock table's clock; backwards raises "
     "ClockBackwards."},
    {"revoke", (PyCFunction)table_revoke, METH_O,
     "revoke($self, lease, /)\n--\n\nEnd the current holder's validity at once. NotFound if not "
     "held."},
    {"_info", (PyCFunction)table_info_tuple, METH_NOARGS, "the shl_table_info fields"},
    {"_inspect", (PyCFunction)table_inspect_tuple, METH_O, "a lease's detail tuple"},
    {"_heartbeat", (PyCFunction)table_heartbeat_tuple, METH_O, "the shl_heartbeat fields"},
    {"_renewer", FASTKW(table_renewer), "start the library's renewer for a held lease"},
    {"_defer", (PyCFunction)(void (*)(void))shl__py_table_defer, METH_FASTCALL,
     "keep a held lease, its renewer started when due: (token, safe_ns, Deferred)"},
    {"_acquire_kept", (PyCFunction)(void (*)(void))shl__py_table_acquire_kept, METH_FASTCALL,
     "acquire, then keep the lease as _defer does: (token, safe_ns, Deferred)"},
    {"_election", (PyCFunction)shl__py_table_election, METH_VARARGS,
     "a candidate (election, id): shmlease.Election's handle"},
    {"_leader", (PyCFunction)shl__py_table_leader, METH_O, "an election's leader tuple, or None"},
    {"_observe", (PyCFunction)shl__py_table_observe, METH_VARARGS,
     "the next leader tuple above a token, or None when the time ran out"},
    {"_bench", (PyCFunction)table_bench, METH_VARARGS, "ns per operation from C (benchmark)"},
    {"check", (PyCFunction)table_check, METH_NOARGS,
     "check($self, /)\n--\n\nVerify every invariant of the table: (True, []) or (False, "
     "problems)."},
    {"repair", FASTKW(table_repair),
     "repair($self, /, dry_run=False)\n--\n\n"
     "Bring the table back to a consistent state (see shmlease repair); the actions."},
    {"close", (PyCFunction)table_close, METH_NOARGS,
     "close($self, /)\n--\n\nUnmap the table. Leases stay as they are (close does not release)."},
    {"__enter__", (PyCFunction)table_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)table_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef table_getset[] = {
    {"closed", (getter)table_get_closed, NULL, "whether close() was called", NULL},
    {"name", (getter)table_get_name, NULL, "the table's name as given", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmlease._shmlease._Table",
    .tp_basicsize = sizeof(TableObject),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The native table handle; use shmlease.Table.",
    .tp_methods = table_methods,
    .tp_getset = table_getset,
    .tp_init = (initproc)table_init,
    .tp_new = PyType_GenericNew,
    .tp_weaklistoffset = offsetof(TableObject, weakrefs),
};

/* ------------------------------------------------------------- Fence */

typedef struct {
    PyObject_HEAD Py_buffer view;
    shl_fence *f;
} FenceObject;

static int fence_init(FenceObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buffer", "offset", NULL};
    PyObject *obj;
    Py_ssize_t off = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n:Fence", kwlist, &obj, &off))
        return -1;
    if (self->f) {
        PyErr_SetString(PyExc_RuntimeError, "Fence already initialised");
        return -1;
    }
    if (PyObject_GetBuffer(obj, &self->view, PyBUF_WRITABLE) < 0)
        return -1;
    if (off < 0 || off > self->view.len - (Py_ssize_t)sizeof(shl_fence) ||
        ((uintptr_t)((char *)self->view.buf + off) % _Alignof(shl_fence)) != 0) {
        PyBuffer_Release(&self->view);
        PyErr_Format(class_for(SHL_EINVAL),
                     "the fence needs 8 bytes, 8-byte aligned, inside the buffer (offset %zd)",
                     off);
        return -1;
    }
    self->f = (shl_fence *)((char *)self->view.buf + off);
    return 0;
}

static void fence_dealloc(FenceObject *self)
{
    if (self->f)
        PyBuffer_Release(&self->view);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int fence_ready(FenceObject *self)
{
    if (!self->f) {
        PyErr_SetString(PyExc_ValueError, "fence released");
        return -1;
    }
    return 0;
}

static PyObject *fence_admit(FenceObject *self, PyObject *arg)
{
    uint64_t token;
    if (fence_ready(self) < 0 || shl__py_get_u64(arg, "token", &token) < 0)
        return NULL;
    int rc = shl_fence_admit(self->f, token);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *fence_admit_read(FenceObject *self, PyObject *arg)
{
    uint64_t gen;
    if (fence_ready(self) < 0 || shl__py_get_u64(arg, "gen", &gen) < 0)
        return NULL;
    int rc = shl_fence_admit_read(self->f, gen);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *fence_load(FenceObject *self, PyObject *unused)
{
    (void)unused;
    uint64_t token;
    if (fence_ready(self) < 0)
        return NULL;
    int rc = shl_fence_load(self->f, &token);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    return PyLong_FromUnsignedLongLong(token);
}

static PyObject *fence_reset(FenceObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"token"};
    PyObject *a[1];
    uint64_t token = 0;
    if (parse("reset", args, nargs, kwnames, names, 1, 1, 0, a) < 0 || fence_ready(self) < 0 ||
        (a[0] && shl__py_get_u64(a[0], "token", &token) < 0))
        return NULL;
    int rc = shl_fence_init(self->f, token);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *fence_release(FenceObject *self, PyObject *unused)
{
    (void)unused;
    if (self->f) {
        self->f = NULL;
        PyBuffer_Release(&self->view);
    }
    Py_RETURN_NONE;
}

static PyObject *fence_enter(FenceObject *self, PyObject *unused)
{
    (void)unused;
    if (fence_ready(self) < 0)
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *fence_exit(FenceObject *self, PyObject *args)
{
    (void)args;
    fence_release(self, NULL);
    Py_RETURN_FALSE;
}

static PyMethodDef fence_methods[] = {
    {"admit", (PyCFunction)fence_admit, METH_O,
     "admit($self, token, /)\n--\n\nAdmit `token` iff it is not older than one admitted before, "
     "and raise\n"
     "the fence to it. Raises Stale (nothing changed); lock-free."},
    {"admit_read", (PyCFunction)fence_admit_read, METH_O,
     "admit_read($self, gen, /)\n--\n\nAdmit a reader whose `gen` (from acquire_shared()) is not "
     "older than the\n"
     "newest writer token admitted; the fence does not move. Raises Stale: a reader\n"
     "that began before a writer the resource has already let in."},
    {"load", (PyCFunction)fence_load, METH_NOARGS,
     "load($self, /)\n--\n\nThe largest token admitted so far (0: none)."},
    {"reset", FASTKW(fence_reset),
     "reset($self, /, token=0)\n--\n\nSet the fence (for a new resource only: it may readmit old "
     "tokens)."},
    {"release", (PyCFunction)fence_release, METH_NOARGS,
     "release($self, /)\n--\n\nLet go of the buffer (an mmap can then be closed)."},
    {"__enter__", (PyCFunction)fence_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)fence_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FenceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmlease.Fence",
    .tp_basicsize = sizeof(FenceObject),
    .tp_dealloc = (destructor)fence_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Fence(buffer, offset=0)\n\n"
              "A fence register: the largest token a resource has admitted, kept in 8\n"
              "aligned bytes of a writable buffer (an mmap of the resource's file, a\n"
              "shared memory region). A zero-filled buffer admits every token. See\n"
              "shl_fence_admit() for what a fence can and cannot do.",
    .tp_methods = fence_methods,
    .tp_init = (initproc)fence_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------ module */

static PyObject *py_setup(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *classes, *base, *factory;
    if (!PyArg_ParseTuple(args, "O!OO:_setup", &PyDict_Type, &classes, &base, &factory))
        return NULL;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(classes, &pos, &k, &v)) {
        long code = PyLong_AsLong(k);
        if (code == -1 && PyErr_Occurred())
            return NULL;
        if (code > 0 || -code >= ERR_SLOTS) {
            PyErr_Format(PyExc_ValueError, "error code %ld out of range", code);
            return NULL;
        }
        Py_INCREF(v);
        Py_XSETREF(err_class[-code], v);
    }
    Py_INCREF(base);
    Py_XSETREF(error_base, base);
    Py_INCREF(factory);
    Py_XSETREF(info_factory, factory);
    Py_RETURN_NONE;
}

static PyObject *py_version(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(shl_version());
}

static PyObject *py_unlink(PyObject *mod, PyObject *arg)
{
    (void)mod;
    const char *name = shl__py_get_name(arg, "table name");
    if (!name)
        return NULL;
    int rc = shl_unlink(name);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name);
    Py_RETURN_NONE;
}

static PyObject *py_strerror(PyObject *mod, PyObject *arg)
{
    (void)mod;
    int rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    return Py_BuildValue("(ss)", shl_errname(rc), shl_strerror(rc));
}

/* _duration_ns(seconds, ns, what, zero_ok) -> int, or None when both are
 * None: the conversion every call makes, for the package's Python code
 * (the lease context calls it on each use: no format string here). */
static PyObject *py_duration_ns(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 4 || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_duration_ns(seconds, ns, what, zero_ok)");
        return NULL;
    }
    PyObject *sec = args[0], *ns = args[1];
    if (sec == Py_None && ns == Py_None)
        Py_RETURN_NONE;
    const char *what = PyUnicode_AsUTF8(args[2]);
    int zero_ok = PyObject_IsTrue(args[3]);
    if (!what || zero_ok < 0)
        return NULL;
    char what_ns[64];
    snprintf(what_ns, sizeof what_ns, "%s_ns", what);
    uint64_t v;
    if (get_duration(sec, ns, what, what_ns, zero_ok ? DUR_ZERO_OK : 0, 0, &v) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(v);
}

/* A native call that does nothing, for the benchmark's overhead floor. */
static PyObject *py_nop(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    (void)args;
    (void)nargs;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"errors", py_errors, METH_NOARGS,
     "errors($module, /)\n--\n\nThe library's error table: a list of (code, name, message)."},
    {"_setup", py_setup, METH_VARARGS, "register the exception classes and LeaseInfo"},
    {"version", py_version, METH_NOARGS,
     "version($module, /)\n--\n\nThe C library's version string."},
    {"unlink", py_unlink, METH_O,
     "unlink($module, name, /)\n--\n\nRemove a table's name; processes that have it open keep "
     "using it."},
    {"strerror", py_strerror, METH_O,
     "strerror($module, code, /)\n--\n\n(name, message) of a library return code."},
    {"_duration_ns", (PyCFunction)(void (*)(void))py_duration_ns, METH_FASTCALL,
     "seconds or ns to ns, as every call does"},
    {"_nop", (PyCFunction)(void (*)(void))py_nop, METH_FASTCALL, "does nothing (benchmark)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "shmlease._shmlease",
    "Native binding of the shmlease C library (use the package shmlease).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__shmlease(void);
PyMODINIT_FUNC PyInit__shmlease(void)
{
    if (PyType_Ready(&TableType) < 0 || PyType_Ready(&shl__py_renewer_type) < 0 ||
        PyType_Ready(&FenceType) < 0 || PyType_Ready(&shl__py_deferred_type) < 0 ||
        PyType_Ready(&shl__py_election_type) < 0)
        return NULL;
    if (!zero && !(zero = PyLong_FromLong(0)))
        return NULL;
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "_Table", (PyObject *)&TableType) < 0 ||
        PyModule_AddObjectRef(m, "Renewer", (PyObject *)&shl__py_renewer_type) < 0 ||
        PyModule_AddObjectRef(m, "Fence", (PyObject *)&FenceType) < 0)
        goto fail;
#define INT_CONST(name)                                                                            \
    if (PyModule_AddIntConstant(m, #name, name) < 0)                                               \
        goto fail;
    INT_CONST(SHL_NAME_MAX)
    INT_CONST(SHL_OWNER_MAX)
    INT_CONST(SHL_TABLE_NAME_MAX)
    INT_CONST(SHL_CAPACITY_MAX)
    INT_CONST(SHL_VALUE_MAX)
    INT_CONST(SHL_LOSS_REFUSED)
    INT_CONST(SHL_LOSS_DEADLINE)
    INT_CONST(SHL_LOSS_MAX_HOLD)
    INT_CONST(SHL_LOSS_REMOVED)
    INT_CONST(SHL_CLOCK_MANUAL)
    INT_CONST(SHL_POLICY_RECLAIM_ORPHANS)
#undef INT_CONST
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
