/*
 * pyrmq.store._syncer: fdatasync on a thread that never takes the GIL (issue 14, SYNC_FLUSH).
 *
 * A group commit syncs the commit log while the event loop goes on appending. Run by a Python
 * worker thread, one sync needs the GIL twice (to start the call and to return from it), and
 * while the loop is busy -- which it is exactly then, appending the next sends -- each of those
 * waits up to the interpreter's switch interval: in the SYNC_FLUSH row a group commit took
 * 1.3 ms from being handed to a worker to that worker starting (mean; 5 ms at p99), longer than
 * the fdatasync itself. This thread is plain C: it syncs the file it is handed and signals an
 * eventfd, which the loop waits on as on a socket.
 *
 * Syncer has the same interface as its Python twin, pyrmq.store.file_syncer.ThreadSyncer, which is
 * used when this extension was not built; tests/store/test_file_syncer.py runs both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    pthread_mutex_t lock;   /* guards fd, error and stopping against the thread */
    pthread_cond_t wake;
    pthread_t thread;
    int thread_running;     /* created and not joined */
    int event_fd;           /* readable once a started sync is done; -1 after close */
    int fd;                 /* the duplicate to sync next; -1: nothing handed over */
    int error;              /* errno of the last sync, 0 when it succeeded */
    int stopping;
    int busy;               /* started and not finished (only the caller's thread touches it) */
    int synced_ok;          /* the started sync ended without error: read without the lock
                             * (atomics), so a send can ask on the loop for nearly nothing */
} SyncerObject;

static void *syncer_main(void *arg)
{
    SyncerObject *self = (SyncerObject *)arg;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        while (self->fd < 0 && !self->stopping)
            pthread_cond_wait(&self->wake, &self->lock);
        if (self->fd < 0)
            break;   /* stopping, nothing handed over */
        int fd = self->fd;
        pthread_mutex_unlock(&self->lock);
        int rc;
        do
            rc = fdatasync(fd);
        while (rc != 0 && errno == EINTR);
        int error = rc == 0 ? 0 : errno;
        close(fd);
        pthread_mutex_lock(&self->lock);
        self->fd = -1;
        self->error = error;
        __atomic_store_n(&self->synced_ok, error == 0, __ATOMIC_RELEASE);
        uint64_t one = 1;
        /* an eventfd counter cannot overflow at one increment per sync; nothing to do if it did */
        (void)!write(self->event_fd, &one, sizeof one);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

static void syncer_stop(SyncerObject *self)
{
    if (self->thread_running) {
        pthread_mutex_lock(&self->lock);
        self->stopping = 1;
        pthread_cond_signal(&self->wake);
        pthread_mutex_unlock(&self->lock);
        /* a sync under way finishes first; it does not need the GIL */
        Py_BEGIN_ALLOW_THREADS
        pthread_join(self->thread, NULL);
        Py_END_ALLOW_THREADS
        self->thread_running = 0;
    }
    if (self->event_fd >= 0) {
        close(self->event_fd);
        self->event_fd = -1;
    }
}

static PyObject *Syncer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Syncer() takes no arguments");
        return NULL;
    }
    SyncerObject *self = (SyncerObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->event_fd = -1;
    self->fd = -1;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, NULL);
    self->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->event_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(self);
        return NULL;
    }
    /* the thread starts with every signal blocked: they are the main thread's (Python runs the
     * handlers there) and cannot interrupt a sync */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&self->thread, NULL, syncer_main, self);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(self);
        return NULL;
    }
    self->thread_running = 1;
    return (PyObject *)self;
}

static void Syncer_dealloc(SyncerObject *self)
{
    syncer_stop(self);
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(Syncer_start_doc,
"start(fd)\n--\n\n"
"Start syncing the file open as fd (fdatasync of a duplicate, so closing fd meanwhile is\n"
"harmless). One sync at a time: finish() it, once fileno() is readable, before the next.");

static PyObject *Syncer_start(SyncerObject *self, PyObject *arg)
{
    int fd = PyObject_AsFileDescriptor(arg);
    if (fd < 0)
        return NULL;
    if (self->event_fd < 0) {
        PyErr_SetString(PyExc_ValueError, "the syncer is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a sync is already under way: finish() it first");
        return NULL;
    }
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    __atomic_store_n(&self->synced_ok, 0, __ATOMIC_RELAXED);   /* before the thread may set it */
    pthread_mutex_lock(&self->lock);
    self->fd = dup;
    self->error = 0;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    self->busy = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Syncer_finish_doc,
"finish()\n--\n\n"
"End the sync start() began, once fileno() is readable: None, or OSError with the errno\n"
"fdatasync failed with. RuntimeError when no sync was started or it is not done yet.");

static PyObject *Syncer_finish(SyncerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->busy || self->event_fd < 0) {
        PyErr_SetString(PyExc_RuntimeError, "no sync was started");
        return NULL;
    }
    uint64_t count;
    if (read(self->event_fd, &count, sizeof count) != (ssize_t)sizeof count) {
        if (errno == EAGAIN) {
            PyErr_SetString(PyExc_RuntimeError, "the sync is not done yet: wait until fileno() is readable");
            return NULL;
        }
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->busy = 0;
    pthread_mutex_lock(&self->lock);
    int error = self->error;
    pthread_mutex_unlock(&self->lock);
    if (error != 0) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(Syncer_synced_doc,
"synced()\n--\n\n"
"True once the sync start() began has ended without error, until the next start(): a\n"
"look that changes nothing (finish() is still due) and takes no lock.");

static PyObject *Syncer_synced(SyncerObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->busy && __atomic_load_n(&self->synced_ok, __ATOMIC_ACQUIRE));
}

PyDoc_STRVAR(Syncer_fileno_doc,
"fileno()\n--\n\n"
"The eventfd that becomes readable when a started sync is done.");

static PyObject *Syncer_fileno(SyncerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->event_fd < 0) {
        PyErr_SetString(PyExc_ValueError, "the syncer is closed");
        return NULL;
    }
    return PyLong_FromLong(self->event_fd);
}

PyDoc_STRVAR(Syncer_close_doc,
"close()\n--\n\n"
"Stop the thread (a sync under way finishes first) and close the eventfd. Idempotent.");

static PyObject *Syncer_close(SyncerObject *self, PyObject *Py_UNUSED(ignored))
{
    syncer_stop(self);
    Py_RETURN_NONE;
}

static PyMethodDef Syncer_methods[] = {
    {"start", (PyCFunction)Syncer_start, METH_O, Syncer_start_doc},
    {"finish", (PyCFunction)Syncer_finish, METH_NOARGS, Syncer_finish_doc},
    {"synced", (PyCFunction)Syncer_synced, METH_NOARGS, Syncer_synced_doc},
    {"fileno", (PyCFunction)Syncer_fileno, METH_NOARGS, Syncer_fileno_doc},
    {"close", (PyCFunction)Syncer_close, METH_NOARGS, Syncer_close_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(Syncer_doc,
"Syncer()\n--\n\n"
"fdatasync on a C thread of its own, signalled through an eventfd: start(fd), wait until\n"
"fileno() is readable, finish(). The thread never takes the GIL.");

static PyTypeObject SyncerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrmq.store._syncer.Syncer",
    .tp_basicsize = sizeof(SyncerObject),
    .tp_dealloc = (destructor)Syncer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Syncer_doc,
    .tp_methods = Syncer_methods,
    .tp_new = Syncer_new,
};

static int syncer_exec(PyObject *m)
{
    if (PyType_Ready(&SyncerType) < 0)
        return -1;
    Py_INCREF(&SyncerType);
    if (PyModule_AddObject(m, "Syncer", (PyObject *)&SyncerType) < 0) {
        Py_DECREF(&SyncerType);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot syncer_slots[] = {
    {Py_mod_exec, syncer_exec},
    {0, NULL},
};

static struct PyModuleDef syncer_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyrmq.store._syncer",
    .m_doc = "fdatasync on a C thread that never takes the GIL; pyrmq.store.file_syncer binds it or its twin.",
    .m_size = 0,
    .m_slots = syncer_slots,
};

PyMODINIT_FUNC PyInit__syncer(void)
{
    return PyModuleDef_Init(&syncer_module);
}
