/*
 * python/src/election.c - the native side of shmlease.Election: a
 * candidate handle (shl_election) and the table-level leader() and
 * observe() calls. Arguments come from the package's Python code, already
 * converted (durations in ns, None for "no bound"), so that the
 * conversions stay where the rest of the package makes them.
 */
#include "ext.h"

typedef struct {
    PyObject_HEAD shl_election *e;
    TableObject *table; /* strong reference: the handle outlives the candidate */
    PyObject *name;
    unsigned inflight; /* a campaign or a proclaim running without the GIL */
    int kept;          /* a term (led, or lost and not yet resigned) whose renewer uses the table */
} ElectionObject;

/* After a call that may start or end a term: the table stays open while a
 * term's renewer uses it (Table.close() refuses), as for a kept lease. */
static void set_kept(ElectionObject *self, int kept)
{
    if (kept && !self->kept)
        self->table->renewers++;
    else if (!kept && self->kept)
        self->table->renewers--;
    self->kept = kept;
}

/* An optional ns value: None is dflt. */
static int opt_u64(PyObject *o, const char *what, uint64_t dflt, uint64_t *out)
{
    if (o == Py_None) {
        *out = dflt;
        return 0;
    }
    return shl__py_get_u64(o, what, out);
}

/* Table._election(name, id) */
PyObject *shl__py_table_election(TableObject *self, PyObject *args)
{
    PyObject *nameo, *ido;
    if (!PyArg_ParseTuple(args, "UU:_election", &nameo, &ido) || shl__py_table_ready(self) < 0)
        return NULL;
    const char *name = shl__py_get_name(nameo, "election");
    const char *id = name ? shl__py_get_name(ido, "id") : NULL;
    if (!id)
        return NULL;
    shl_election *e = NULL;
    int rc = shl_election_open(self->t, name, id, &e);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name);
    ElectionObject *eo = PyObject_New(ElectionObject, &shl__py_election_type);
    if (!eo) {
        shl_election_close(e);
        return NULL;
    }
    eo->e = e;
    eo->inflight = 0;
    eo->kept = 0;
    Py_INCREF(self);
    eo->table = self;
    Py_INCREF(nameo);
    eo->name = nameo;
    return (PyObject *)eo;
}

static int election_ready(ElectionObject *self)
{
    if (!self->e) {
        PyErr_SetString(PyExc_ValueError, "operation on a closed election");
        return -1;
    }
    if (self->inflight) {
        PyErr_SetString(PyExc_RuntimeError, "election in use by another thread");
        return -1;
    }
    return shl__py_table_ready(self->table);
}

/* Runs `expr` without the GIL, the candidate and its table pinned. */
#define ELECTION_NOGIL(self, expr)                                                                 \
    do {                                                                                           \
        (self)->inflight++;                                                                        \
        (self)->table->inflight++;                                                                 \
        PyThreadState *ts_ = PyEval_SaveThread();                                                  \
        expr;                                                                                      \
        PyEval_RestoreThread(ts_);                                                                 \
        (self)->table->inflight--;                                                                 \
        (self)->inflight--;                                                                        \
    } while (0)

static const char *name_of(ElectionObject *self)
{
    return PyUnicode_AsUTF8(self->name);
}

/* campaign(ttl_ns, timeout_ns, value, interval_ns, margin_ns) -> token */
static PyObject *election_campaign(ElectionObject *self, PyObject *args)
{
    PyObject *ttlo, *timeouto, *intervalo, *margino;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "OOy*OO:campaign", &ttlo, &timeouto, &v, &intervalo, &margino))
        return NULL;
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    uint64_t ttl, timeout, token = 0;
    if (election_ready(self) < 0 || shl__py_get_u64(ttlo, "ttl_ns", &ttl) < 0 ||
        opt_u64(timeouto, "timeout_ns", SHL_WAIT_FOREVER, &timeout) < 0 ||
        opt_u64(intervalo, "interval_ns", 0, &ro.interval_ns) < 0 ||
        opt_u64(margino, "margin_ns", 0, &ro.margin_ns) < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    int rc;
    ELECTION_NOGIL(
        self, rc = shl_election_campaign(self->e, ttl, timeout, v.buf, (size_t)v.len, &ro, &token));
    set_kept(self, rc == SHL_OK); /* on error it holds nothing, a lost term neither */
    PyBuffer_Release(&v);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name_of(self));
    return PyLong_FromUnsignedLongLong(token);
}

static PyObject *election_proclaim(ElectionObject *self, PyObject *args)
{
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "y*:proclaim", &v))
        return NULL;
    if (election_ready(self) < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    int rc;
    ELECTION_NOGIL(self, rc = shl_election_proclaim(self->e, v.buf, (size_t)v.len));
    PyBuffer_Release(&v);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name_of(self));
    Py_RETURN_NONE;
}

/* resign() -> True (the term ended here), False (it had been lost), None
 * (not leading). */
static PyObject *election_resign(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (election_ready(self) < 0)
        return NULL;
    int rc;
    ELECTION_NOGIL(self, rc = shl_election_resign(self->e));
    set_kept(self, 0); /* either way the handle no longer leads */
    if (rc == SHL_OK)
        Py_RETURN_TRUE;
    if (rc == SHL_ELOST)
        Py_RETURN_FALSE;
    if (rc == SHL_EINVAL)
        Py_RETURN_NONE;
    return shl__py_raise_rc(rc, name_of(self));
}

static void election_end(ElectionObject *self)
{
    shl_election *e = self->e;
    if (!e)
        return;
    self->e = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    shl_election_close(e);
    PyEval_RestoreThread(ts);
    set_kept(self, 0);
}

static PyObject *election_close(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->inflight) {
        PyErr_SetString(PyExc_RuntimeError, "election in use by another thread");
        return NULL;
    }
    election_end(self);
    Py_RETURN_NONE;
}

static void election_dealloc(ElectionObject *self)
{
    if (self->inflight == 0)
        election_end(self);
    Py_XDECREF(self->table);
    Py_XDECREF(self->name);
    PyObject_Free(self);
}

static PyObject *election_fileno(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->e)
        return PyLong_FromLong(-1);
    return PyLong_FromLong(shl_election_fd(self->e));
}

static PyObject *election_lost(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->e)
        return PyLong_FromLong(0);
    int r = shl_election_lost(self->e);
    if (r < 0)
        return shl__py_raise_rc(r, name_of(self));
    return PyLong_FromLong(r);
}

static PyObject *election_check(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    int rc = self->e ? shl_election_check(self->e) : SHL_ELOST;
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, name_of(self));
    Py_RETURN_NONE;
}

static PyObject *election_token(ElectionObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->e ? shl_election_token(self->e) : 0);
}

static PyObject *election_closed(ElectionObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->e == NULL);
}

/* The leader as a tuple: (id, token, remaining_ns, pid, state, proclaimed,
 * value). */
static PyObject *leader_tuple(const shl_leader *l, const char *value)
{
    return Py_BuildValue("(sKKiiiy#)", l->id, (unsigned long long)l->token,
                         (unsigned long long)l->remaining_ns, (int)l->pid, l->state, l->proclaimed,
                         value, (Py_ssize_t)(l->proclaimed ? l->value_len : 0));
}

/* The table's value size: a buffer that holds any proclaimed value. Asked
 * once: it never changes, and shl_table_info_get() also counts the pools'
 * taken groups, a look at every group. */
static size_t value_cap(TableObject *self)
{
    shl_table_info ti;
    if (!self->value_size && shl_table_info_get(self->t, &ti) == SHL_OK)
        self->value_size = ti.value_size;
    return self->value_size ? self->value_size : SHL_VALUE_MAX;
}

/* One look at the election: the leader now (observe 0), or the next one
 * above `after` within timeout (observe 1); None when there is none
 * (SHL_ENOENT, SHL_ETIMEDOUT). */
static PyObject *look(TableObject *self, const char *name, int observe, uint64_t after,
                      uint64_t timeout)
{
    size_t cap = value_cap(self);
    char *value = PyMem_Malloc(cap);
    if (!value)
        return PyErr_NoMemory();
    shl_leader l;
    int rc;
    if (observe)
        NOGIL(self, rc = shl_election_observe(self->t, name, after, timeout, &l, value, cap));
    else
        NOGIL(self, rc = shl_election_leader(self->t, name, &l, value, cap));
    PyObject *r;
    if (rc == SHL_OK)
        r = leader_tuple(&l, value);
    else if (rc == (observe ? SHL_ETIMEDOUT : SHL_ENOENT))
        r = Py_NewRef(Py_None);
    else
        r = shl__py_raise_rc(rc, name);
    PyMem_Free(value);
    return r;
}

/* Table._leader(name) -> tuple, or None when nobody leads */
PyObject *shl__py_table_leader(TableObject *self, PyObject *arg)
{
    if (shl__py_table_ready(self) < 0)
        return NULL;
    const char *name = shl__py_get_name(arg, "election");
    return name ? look(self, name, 0, 0, 0) : NULL;
}

/* Table._observe(name, after, timeout_ns) -> tuple, or None when the time
 * ran out */
PyObject *shl__py_table_observe(TableObject *self, PyObject *args)
{
    PyObject *nameo, *aftero, *timeouto;
    if (!PyArg_ParseTuple(args, "UOO:_observe", &nameo, &aftero, &timeouto) ||
        shl__py_table_ready(self) < 0)
        return NULL;
    const char *name = shl__py_get_name(nameo, "election");
    uint64_t after, timeout;
    if (!name || shl__py_get_u64(aftero, "after", &after) < 0 ||
        opt_u64(timeouto, "timeout_ns", SHL_WAIT_FOREVER, &timeout) < 0)
        return NULL;
    return look(self, name, 1, after, timeout);
}

static PyMethodDef election_methods[] = {
    {"campaign", (PyCFunction)election_campaign, METH_VARARGS,
     "campaign(ttl_ns, timeout_ns, value, interval_ns, margin_ns) -> token"},
    {"proclaim", (PyCFunction)election_proclaim, METH_VARARGS,
     "proclaim(value): the leader's fenced value"},
    {"resign", (PyCFunction)election_resign, METH_NOARGS,
     "resign() -> True, False if the term had been lost, None if not leading"},
    {"close", (PyCFunction)election_close, METH_NOARGS, "resign if leading, then free"},
    {"fileno", (PyCFunction)election_fileno, METH_NOARGS,
     "an eventfd readable once the term is declared lost; -1 when not leading"},
    {"lost", (PyCFunction)election_lost, METH_NOARGS, "0, or the SHL_LOSS_* reason (sticky)"},
    {"check", (PyCFunction)election_check, METH_NOARGS, "raise Lost unless leading"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef election_getset[] = {
    {"token", (getter)election_token, NULL, "the current term's token, 0 when not leading", NULL},
    {"closed", (getter)election_closed, NULL, "whether close() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject shl__py_election_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmlease._shmlease._Election",
    .tp_basicsize = sizeof(ElectionObject),
    .tp_dealloc = (destructor)election_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A candidate in an election (made by Table._election); use shmlease.Election.",
    .tp_methods = election_methods,
    .tp_getset = election_getset,
};
