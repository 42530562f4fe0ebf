/* The fast call path of a Module: argument checks and the kernel call in one C function.
 *
 * A Caller holds what each argument must be (the exact dtype object, ndim, each dimension as a
 * constant or a shape variable, whether the kernel writes it) and the kernel's address. Its
 * `run(args)` accepts only the plain case: every argument an exact numpy.ndarray with that dtype,
 * C-contiguous, aligned, writeable where written, of the right shape, shape variables bound
 * consistently, outputs not overlapping other arguments. Then it calls the kernel with the GIL
 * released and returns None (or the kernel's nonzero status as an int). For anything else it
 * returns NotImplemented and touches nothing: Module.__call__ then runs the Python checker
 * (runtime/args.py), which converts other array types and raises the errors naming the argument.
 * Every call is checked in full, so there is no cache to go stale; a Caller never changes after
 * it is made, so threads may share it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>

#define TL_MAX_ARGS 24

typedef struct {
    PyObject_HEAD
    void *fn;
    int returns_status;
    int nparams;
    int nvars;
    PyObject *dtypes;              /* tuple of np.dtype, one per parameter (owned) */
    int ndim[TL_MAX_ARGS];
    int output[TL_MAX_ARGS];
    int64_t *dims;                 /* per parameter, per axis: >= 0 a constant, -1 - k variable k */
} Caller;

typedef int64_t tl_i64;
/* Pointers and int64 travel alike in integer registers / stack slots on the x86-64 ABIs; the
 * kernel's exact arity is called through a switch so that no call passes extra arguments. */
#define P1 tl_i64
#define P2 P1, tl_i64
#define P3 P2, tl_i64
#define P4 P3, tl_i64
#define P5 P4, tl_i64
#define P6 P5, tl_i64
#define P7 P6, tl_i64
#define P8 P7, tl_i64
#define P9 P8, tl_i64
#define P10 P9, tl_i64
#define P11 P10, tl_i64
#define P12 P11, tl_i64
#define P13 P12, tl_i64
#define P14 P13, tl_i64
#define P15 P14, tl_i64
#define P16 P15, tl_i64
#define P17 P16, tl_i64
#define P18 P17, tl_i64
#define P19 P18, tl_i64
#define P20 P19, tl_i64
#define P21 P20, tl_i64
#define P22 P21, tl_i64
#define P23 P22, tl_i64
#define P24 P23, tl_i64
#define V1 v[0]
#define V2 V1, v[1]
#define V3 V2, v[2]
#define V4 V3, v[3]
#define V5 V4, v[4]
#define V6 V5, v[5]
#define V7 V6, v[6]
#define V8 V7, v[7]
#define V9 V8, v[8]
#define V10 V9, v[9]
#define V11 V10, v[10]
#define V12 V11, v[11]
#define V13 V12, v[12]
#define V14 V13, v[13]
#define V15 V14, v[14]
#define V16 V15, v[15]
#define V17 V16, v[16]
#define V18 V17, v[17]
#define V19 V18, v[18]
#define V20 V19, v[19]
#define V21 V20, v[20]
#define V22 V21, v[21]
#define V23 V22, v[22]
#define V24 V23, v[23]
#define CASE(n)                                                                                   \
    case n:                                                                                       \
        if (st) s = ((int32_t(*)(P##n))fn)(V##n);                                                 \
        else ((void (*)(P##n))fn)(V##n);                                                          \
        break;

static int32_t tl_invoke(void *fn, int st, int n, const int64_t *v) {
    int32_t s = 0;
    switch (n) {
    case 0:
        if (st) s = ((int32_t(*)(void))fn)();
        else ((void (*)(void))fn)();
        break;
    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
    CASE(9) CASE(10) CASE(11) CASE(12) CASE(13) CASE(14) CASE(15) CASE(16)
    CASE(17) CASE(18) CASE(19) CASE(20) CASE(21) CASE(22) CASE(23) CASE(24)
    }
    return s;
}

static PyObject *caller_run(Caller *c, PyObject *args) {
    int64_t v[TL_MAX_ARGS];
    int64_t vars[TL_MAX_ARGS];
    char bound[TL_MAX_ARGS] = {0};
    char *lo[TL_MAX_ARGS], *hi[TL_MAX_ARGS];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != c->nparams) Py_RETURN_NOTIMPLEMENTED;
    const int64_t *d = c->dims;
    for (int i = 0; i < c->nparams; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        if (Py_TYPE(o) != &PyArray_Type) Py_RETURN_NOTIMPLEMENTED;
        PyArrayObject *a = (PyArrayObject *)o;
        if ((PyObject *)PyArray_DESCR(a) != PyTuple_GET_ITEM(c->dtypes, i)) Py_RETURN_NOTIMPLEMENTED;
        int nd = c->ndim[i];
        if (PyArray_NDIM(a) != nd) Py_RETURN_NOTIMPLEMENTED;
        int need = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
        if (c->output[i]) need |= NPY_ARRAY_WRITEABLE;
        if ((PyArray_FLAGS(a) & need) != need) Py_RETURN_NOTIMPLEMENTED;
        const npy_intp *shape = PyArray_DIMS(a);
        for (int ax = 0; ax < nd; ax++) {
            int64_t e = d[ax], n = (int64_t)shape[ax];
            if (e >= 0) {
                if (n != e) Py_RETURN_NOTIMPLEMENTED;
            } else if (!bound[-1 - e]) {
                if (n > INT32_MAX) Py_RETURN_NOTIMPLEMENTED;
                vars[-1 - e] = n;
                bound[-1 - e] = 1;
            } else if (vars[-1 - e] != n) {
                Py_RETURN_NOTIMPLEMENTED;
            }
        }
        d += nd;
        char *data = PyArray_BYTES(a);
        v[i] = (int64_t)(intptr_t)data;
        lo[i] = data;
        hi[i] = data + PyArray_NBYTES(a);
    }
    /* Outputs must not share memory with other arguments (np.may_share_memory's bounds test). */
    for (int i = 0; i < c->nparams; i++) {
        if (!c->output[i] || lo[i] == hi[i]) continue;
        for (int j = 0; j < c->nparams; j++)
            if (j != i && lo[j] != hi[j] && lo[i] < hi[j] && lo[j] < hi[i])
                Py_RETURN_NOTIMPLEMENTED;
    }
    for (int k = 0; k < c->nvars; k++) {
        if (!bound[k]) Py_RETURN_NOTIMPLEMENTED;
        v[c->nparams + k] = vars[k];
    }
    int32_t status;
    Py_BEGIN_ALLOW_THREADS
    status = tl_invoke(c->fn, c->returns_status, c->nparams + c->nvars, v);
    Py_END_ALLOW_THREADS
    if (status == 0) Py_RETURN_NONE;
    return PyLong_FromLong(status);
}

static void caller_dealloc(Caller *c) {
    Py_XDECREF(c->dtypes);
    PyMem_Free(c->dims);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Caller(address, returns_status, dtypes, shapes, outputs, nvars): shapes holds one tuple of
 * ints per parameter (>= 0 a constant, -1 - k shape variable k). */
static PyObject *caller_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    unsigned long long address;
    int returns_status, nvars;
    PyObject *dtypes, *shapes, *outputs;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Caller takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "KpO!O!O!i", &address, &returns_status, &PyTuple_Type, &dtypes,
                          &PyTuple_Type, &shapes, &PyTuple_Type, &outputs, &nvars))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(dtypes);
    if (PyTuple_GET_SIZE(shapes) != n || PyTuple_GET_SIZE(outputs) != n || nvars < 0 ||
        n + nvars > TL_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "Caller: inconsistent or too many parameters");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape = PyTuple_GET_ITEM(shapes, i);
        if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > NPY_MAXDIMS) {
            PyErr_SetString(PyExc_ValueError, "Caller: each shape must be a tuple of ints");
            return NULL;
        }
        total += PyTuple_GET_SIZE(shape);
    }
    Caller *c = (Caller *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    c->dims = PyMem_Malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    if (c->dims == NULL) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    c->fn = (void *)(uintptr_t)address;
    c->returns_status = returns_status;
    c->nparams = (int)n;
    c->nvars = nvars;
    Py_INCREF(dtypes);
    c->dtypes = dtypes;
    int64_t *d = c->dims;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape = PyTuple_GET_ITEM(shapes, i);
        c->ndim[i] = (int)PyTuple_GET_SIZE(shape);
        c->output[i] = PyObject_IsTrue(PyTuple_GET_ITEM(outputs, i));
        for (Py_ssize_t ax = 0; ax < PyTuple_GET_SIZE(shape); ax++) {
            long long e = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, ax));
            if ((e == -1 && PyErr_Occurred()) || c->output[i] < 0 || e < -(long long)nvars) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Caller: bad dimension");
                Py_DECREF(c);
                return NULL;
            }
            *d++ = (int64_t)e;
        }
    }
    return (PyObject *)c;
}

static PyMethodDef caller_methods[] = {
    {"run", (PyCFunction)caller_run, METH_O,
     "Check and run on a tuple of arrays: None, a nonzero status, or NotImplemented."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorlang_fastcall.Caller",
    .tp_basicsize = sizeof(Caller),
    .tp_dealloc = (destructor)caller_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A kernel's argument checks and call for plain numpy arrays.",
    .tp_methods = caller_methods,
    .tp_new = caller_new,
};

static struct PyModuleDef fastcall_module = {
    PyModuleDef_HEAD_INIT, "_tl_fastcall", "The fast call path of tensorlang Modules.", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tl_fastcall(void) {
    import_array();
    if (PyType_Ready(&CallerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fastcall_module);
    if (m == NULL) return NULL;
    Py_INCREF(&CallerType);
    if (PyModule_AddObject(m, "Caller", (PyObject *)&CallerType) < 0) {
        Py_DECREF(&CallerType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_ARGS", TL_MAX_ARGS);
    return m;
}
