/*
 * python/src/deferred.c - kept leases whose renewer starts when it is due.
 *
 * The lease context (shmlease/_lease.py, Lease) starts a lease's renewer
 * only when the lease needs one: most blocks end long before the first
 * renewal is due, and a renewer costs a thread, an eventfd and a renewal.
 * _defer() records the lease here with a due time (half an interval after
 * the acquisition began); one thread per process, which needs no GIL (a C
 * call that holds the GIL cannot delay it), starts the renewers that come
 * due: a look at the table's name first (shl_table_check(): the renewer
 * looks before each renewal, not at its start), then shl_renewer_start(),
 * which renews at once, so a late start loses nothing. The Deferred object
 * takes the outcome with take(): None for an entry still pending (now
 * withdrawn: the caller releases the lease itself), the Renewer started,
 * or the loss (an SHL_LOSS_* int) found at the start.
 *
 * kmu guards the list and every entry's state; a start runs without it.
 * An entry pins its table (renewers), so that close() refuses, as with a
 * renewer. After fork() the child has no keeper thread and a new list
 * (kgen): the parent's entries are the parent's.
 */
#include "ext.h" /* Python.h first */

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_PENDING, K_STARTING, K_STARTED, K_LOST, K_TAKEN };

#define KEEP_IDLE_NS     UINT64_C(1000000000) /* an idle keeper looks this often ... */
#define KEEP_IDLE_ROUNDS 8                    /* ... this many times, then sleeps */

typedef struct kentry {
    struct kentry *prev, *next; /* the list of K_PENDING and K_STARTING entries */
    shl_table *t;
    uint64_t token, ttl, due, safe; /* safe: the local deadline until a renewer runs */
    unsigned gen;
    int state, loss;
    shl_renewer *r;
    char lease[SHL_NAME_MAX + 1];
    char owner[SHL_OWNER_MAX + 1];
} kentry;

static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kcv;   /* the keeper's sleep (CLOCK_MONOTONIC) */
static pthread_cond_t kdone; /* a start ended */
static kentry khead = {&khead, &khead, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, {0}, {0}};
static int kthread_up;
static unsigned kgen;
static uint64_t kwake; /* the sleeping keeper's next look; 0 while it is awake */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void kunlink(kentry *e)
{
    if (e->gen == kgen) {
        e->prev->next = e->next;
        e->next->prev = e->prev;
    }
    e->prev = e->next = e;
}

static void klink(kentry *e)
{
    e->gen = kgen;
    e->prev = khead.prev;
    e->next = &khead;
    khead.prev->next = e;
    khead.prev = e;
}

/* Starts e's renewer; kmu held on entry and on return, not during. */
static void kstart(kentry *e)
{
    e->state = K_STARTING;
    pthread_mutex_unlock(&kmu);
    shl_renewer *r = NULL;
    int rc = shl_table_check(e->t);
    if (rc == SHL_OK)
        rc = shl_renewer_start(e->t, e->lease, e->owner, e->token, e->ttl, NULL, &r);
    uint64_t now = mono_ns();
    pthread_mutex_lock(&kmu);
    if (rc == SHL_OK) {
        e->state = K_STARTED;
        e->r = r;
        kunlink(e);
    } else if (rc == SHL_ELOST || rc == SHL_EREMOVED) {
        e->state = K_LOST;
        e->loss = rc == SHL_EREMOVED ? SHL_LOSS_REMOVED
                  : now >= e->safe   ? SHL_LOSS_DEADLINE
                                     : SHL_LOSS_REFUSED;
        kunlink(e);
    } else { /* transient (a lock being repaired, ...): again soon */
        e->state = K_PENDING;
        e->due = now + e->ttl / 12;
    }
    pthread_cond_broadcast(&kdone);
}

/* Whether e's renewer is being started. In a forked child a start the
 * parent had under way never ends there: the entry counts as pending (and
 * not listed, kgen), its lease the parent's. */
static int kstarting(kentry *e)
{
    if (e->state == K_STARTING && e->gen != kgen)
        e->state = K_PENDING;
    return e->state == K_STARTING;
}

static void kwait(uint64_t until)
{
    if (until == UINT64_MAX) {
        pthread_cond_wait(&kcv, &kmu);
        return;
    }
    struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
    pthread_cond_timedwait(&kcv, &kmu, &ts);
}

static void *keeper_main(void *arg)
{
    (void)arg;
    int idle = 0;
    pthread_mutex_lock(&kmu);
    for (;;) {
        uint64_t now = mono_ns(), next = UINT64_MAX;
        kentry *due = NULL;
        for (kentry *e = khead.next; e != &khead && !due; e = e->next)
            if (e->state == K_PENDING && e->due <= now)
                due = e;
            else if (e->state == K_PENDING && e->due < next)
                next = e->due;
        if (due) {
            kstart(due);
            continue;
        }
        idle = khead.next != &khead ? 0 : idle + 1;
        if (next == UINT64_MAX && idle <= KEEP_IDLE_ROUNDS)
            next = now + KEEP_IDLE_NS;
        kwake = next; /* an entry due earlier wakes us */
        kwait(next);
        kwake = 0;
    }
    return NULL;
}

static void keeper_conds_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&kcv, &a);
    pthread_condattr_destroy(&a);
    pthread_cond_init(&kdone, NULL);
}

/* The child's copies of the lock and conditions may be in use by the
 * parent's threads, which the child does not have: made anew. */
static void keeper_after_fork(void)
{
    pthread_mutex_init(&kmu, NULL);
    keeper_conds_init();
    khead.prev = khead.next = &khead;
    kthread_up = 0;
    kwake = 0;
    kgen++;
}

/* Once, with kmu held. */
static int keeper_start(void)
{
    static int once;
    if (!once) {
        keeper_conds_init();
        pthread_atfork(NULL, NULL, keeper_after_fork);
        once = 1;
    }
    /* The thread takes no signals: they stay with the application's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    int e = pthread_create(&th, NULL, keeper_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return -1;
    pthread_detach(th);
    kthread_up = 1;
    return 0;
}

typedef struct {
    PyObject_HEAD kentry *e;
    TableObject *table;
    PyObject *lease;
} DeferredObject;

/* (token, safe_ns, Deferred) for (lease, owner, token), acquired with
 * ttl by a call that began at `began`: its renewer is due half an interval
 * (ttl/3) after that, or at `due` if not 0; until a renewer runs it is
 * believed held up to the local deadline of a renewer's defaults (margin
 * ttl/10), safe_ns. */
static PyObject *defer_new(TableObject *self, PyObject *leaseo, const char *lease,
                           const char *owner, uint64_t token, uint64_t ttl, uint64_t began,
                           uint64_t due)
{
    uint64_t safe = began + ttl - ttl / 10;
    if (!due)
        due = began + ttl / 6;
    if (strlen(lease) > SHL_NAME_MAX)
        return shl__py_raise_inval("lease: longer than %s bytes", SHL__PY_STR(SHL_NAME_MAX));
    if (strlen(owner) > SHL_OWNER_MAX)
        return shl__py_raise_inval("owner: longer than %s bytes", SHL__PY_STR(SHL_OWNER_MAX));
    DeferredObject *d = PyObject_New(DeferredObject, &shl__py_deferred_type);
    kentry *e = calloc(1, sizeof *e);
    if (!d || !e) {
        free(e);
        Py_XDECREF(d);
        return PyErr_NoMemory();
    }
    e->t = self->t;
    e->token = token;
    e->ttl = ttl;
    e->due = due;
    e->safe = safe;
    strcpy(e->lease, lease);
    strcpy(e->owner, owner);
    d->e = e;
    Py_INCREF(self);
    d->table = self;
    Py_INCREF(leaseo);
    d->lease = leaseo;
    self->renewers++;
    pthread_mutex_lock(&kmu);
    klink(e);
    int failed = !kthread_up && keeper_start() < 0;
    if (!failed && due < kwake)
        pthread_cond_signal(&kcv);
    pthread_mutex_unlock(&kmu);
    if (failed) {
        Py_DECREF(d); /* unlinks, unpins and gives the lease back */
        return shl__py_raise_rc(SHL_ESYS, lease);
    }
    return Py_BuildValue("(KKN)", (unsigned long long)token, (unsigned long long)safe, d);
}

/* _defer(lease, owner, token, ttl_ns, began_ns, due_ns) -> (token, safe_ns,
 * Deferred): keep a lease acquired by a call that began at began_ns; due_ns
 * 0 for the usual due time. */
PyObject *shl__py_table_defer(TableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t token, ttl, began, due;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "_defer(lease, owner, token, ttl_ns, began_ns, due_ns)");
        return NULL;
    }
    if (shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(args[0], "lease");
    const char *owner = lease ? shl__py_get_name(args[1], "owner") : NULL;
    if (!owner || shl__py_get_u64(args[2], "token", &token) < 0 ||
        shl__py_get_u64(args[3], "ttl_ns", &ttl) < 0 ||
        shl__py_get_u64(args[4], "began_ns", &began) < 0 ||
        shl__py_get_u64(args[5], "due_ns", &due) < 0)
        return NULL;
    return defer_new(self, args[0], lease, owner, token, ttl, began, due);
}

/* _acquire_kept(lease, owner, ttl_ns, wait_ns) -> (token, safe_ns, Deferred):
 * the lease context's acquisition in one call (its per-use cost): acquire
 * (wait_ns 0: one try, Busy with the holder; None: no bound), then keep it
 * as _defer() does. */
PyObject *shl__py_table_acquire_kept(TableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t ttl, wait = SHL_WAIT_FOREVER, token = 0;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_acquire_kept(lease, owner, ttl_ns, wait_ns)");
        return NULL;
    }
    if (shl__py_table_ready(self) < 0)
        return NULL;
    const char *lease = shl__py_get_name(args[0], "lease");
    const char *owner = lease ? shl__py_get_name(args[1], "owner") : NULL;
    if (!owner || shl__py_get_u64(args[2], "ttl_ns", &ttl) < 0 ||
        (args[3] != Py_None && shl__py_get_u64(args[3], "wait_ns", &wait) < 0))
        return NULL;
    uint64_t began = mono_ns();
    shl_lease_info holder;
    int rc;
    if (wait == 0)
        NOGIL(self, rc = shl_acquire_ex(self->t, lease, owner, ttl, &token, &holder));
    else
        NOGIL(self, rc = shl_acquire_wait(self->t, lease, owner, ttl, wait, &token));
    if (rc == SHL_EBUSY)
        return shl__py_raise_busy(lease, owner, &holder, self->etcd);
    if (rc != SHL_OK)
        return shl__py_raise_rc(rc, lease);
    return defer_new(self, args[0], lease, owner, token, ttl, began, 0);
}

/* The entry leaves: the pin goes with it, or to the Renewer. */
static void deferred_drop(DeferredObject *self, int to_renewer)
{
    free(self->e);
    self->e = NULL;
    if (!to_renewer)
        self->table->renewers--;
}

/* start(): start the renewer now, on this thread, if still pending. */
static PyObject *deferred_start(DeferredObject *self, PyObject *unused)
{
    (void)unused;
    kentry *e = self->e;
    if (!e)
        Py_RETURN_NONE;
    /* The GIL is released before kmu is taken, never held while waiting for it. */
    Py_BEGIN_ALLOW_THREADS;
    pthread_mutex_lock(&kmu);
    if (e->state == K_PENDING && e->gen == kgen)
        kstart(e);
    while (kstarting(e))
        pthread_cond_wait(&kdone, &kmu);
    pthread_mutex_unlock(&kmu);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

/* take() -> None (withdrawn while pending), a Renewer, or an SHL_LOSS_* int. */
/* The outcome, once: None for an entry still pending (withdrawn; with
 * `give_back` its lease is released here, and a refusal raised), the
 * Renewer started, or the loss found at the start. */
static PyObject *deferred_claim(DeferredObject *self, int give_back)
{
    kentry *e = self->e;
    if (!e) {
        PyErr_SetString(PyExc_ValueError, "already taken");
        return NULL;
    }
    int state, loss;
    shl_renewer *r;
    /* kmu may be taken with the GIL held (no holder of kmu waits for the
     * GIL); a wait for a start in progress releases the GIL first. */
    pthread_mutex_lock(&kmu);
    while (kstarting(e)) {
        pthread_mutex_unlock(&kmu);
        Py_BEGIN_ALLOW_THREADS;
        pthread_mutex_lock(&kmu);
        while (kstarting(e))
            pthread_cond_wait(&kdone, &kmu);
        pthread_mutex_unlock(&kmu);
        Py_END_ALLOW_THREADS;
        pthread_mutex_lock(&kmu);
    }
    state = e->state;
    if (state == K_PENDING)
        kunlink(e);
    e->state = K_TAKEN;
    pthread_mutex_unlock(&kmu);
    r = e->r;
    loss = e->loss;
    if (state == K_PENDING) {
        shl_table *t = e->t;
        uint64_t token = e->token;
        char lease[SHL_NAME_MAX + 1], owner[SHL_OWNER_MAX + 1];
        strcpy(lease, e->lease);
        strcpy(owner, e->owner);
        deferred_drop(self, 0);
        if (give_back) {
            int rc;
            NOGIL(self->table, rc = shl_release(t, lease, owner, token));
            if (rc != SHL_OK)
                return shl__py_raise_rc(rc, lease);
        }
        Py_RETURN_NONE;
    }
    if (state == K_LOST) {
        deferred_drop(self, 0);
        return PyLong_FromLong(loss);
    }
    RenewerObject *ro = PyObject_New(RenewerObject, &shl__py_renewer_type);
    if (!ro) {
        /* Nothing can hold it: give the lease back as a dropped renewer does. */
        int rc;
        NOGIL(self->table, rc = shl_renewer_stop(r, SHL_RENEWER_RELEASE));
        (void)rc;
        deferred_drop(self, 0);
        return NULL;
    }
    ro->r = r;
    ro->inflight = 0;
    Py_INCREF(self->table);
    ro->table = self->table;
    Py_INCREF(self->lease);
    ro->lease = self->lease;
    deferred_drop(self, 1);
    return (PyObject *)ro;
}

static PyObject *deferred_take(DeferredObject *self, PyObject *unused)
{
    (void)unused;
    return deferred_claim(self, 0);
}

/* release() -> as take(), but a lease whose renewer never started is
 * released (None, or the library's refusal raised: Lost). */
static PyObject *deferred_release(DeferredObject *self, PyObject *unused)
{
    (void)unused;
    return deferred_claim(self, 1);
}

/* lose(reason) -> True if the pending entry is now lost with `reason`
 * (found by a refused write before the renewer started); False if its
 * renewer was started meanwhile (it tells) or it is taken. */
static PyObject *deferred_lose(DeferredObject *self, PyObject *arg)
{
    long reason = PyLong_AsLong(arg);
    if (reason == -1 && PyErr_Occurred())
        return NULL;
    kentry *e = self->e;
    int done = 0;
    if (!e)
        Py_RETURN_FALSE;
    Py_BEGIN_ALLOW_THREADS;
    pthread_mutex_lock(&kmu);
    while (kstarting(e))
        pthread_cond_wait(&kdone, &kmu);
    if (e->state == K_PENDING) {
        kunlink(e);
        e->state = K_LOST;
        e->loss = (int)reason;
        done = 1;
    } else if (e->state == K_LOST) {
        done = 1;
    }
    pthread_mutex_unlock(&kmu);
    Py_END_ALLOW_THREADS;
    return PyBool_FromLong(done);
}

/* A Deferred dropped while its lease is kept: the lease is given back, as
 * a dropped Renewer gives it back. */
static void deferred_dealloc(DeferredObject *self)
{
    if (self->e) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *r = deferred_claim(self, 1); /* lost meanwhile: nothing to give back */
        Py_XDECREF(r);                         /* a Renewer stops and releases */
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(self->table);
    Py_XDECREF(self->lease);
    PyObject_Free(self);
}

static PyMethodDef deferred_methods[] = {
    {"start", (PyCFunction)deferred_start, METH_NOARGS,
     "start($self, /)\n--\n\nStart the renewer now if it is still pending."},
    {"take", (PyCFunction)deferred_take, METH_NOARGS,
     "take($self, /)\n--\n\nNone (withdrawn while pending), the Renewer, or the loss found "
     "at its start."},
    {"release", (PyCFunction)deferred_release, METH_NOARGS,
     "release($self, /)\n--\n\nAs take(), but release a lease whose renewer never started "
     "(raises Lost)."},
    {"lose", (PyCFunction)deferred_lose, METH_O,
     "lose($self, reason, /)\n--\n\nMark a pending entry lost; False if its renewer "
     "started."},
    {NULL, NULL, 0, NULL}};

PyTypeObject shl__py_deferred_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmlease._shmlease.Deferred",
    .tp_basicsize = sizeof(DeferredObject),
    .tp_dealloc = (destructor)deferred_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A kept lease whose renewer starts when it comes due (made by Table._defer).",
    .tp_methods = deferred_methods,
};
