/*
 * dyngraph._speedups: the eager dispatch hot path (bind) in C.
 *
 * This is an accelerator, not a second implementation of the semantics: it
 * handles only the common case -- no interpreter installed, no anomaly mode,
 * inputs that need no dtype promotion, one output, no view -- and hands every
 * other call to the Python implementation (dyngraph/ops/registry.py:_bind_py),
 * which stays the reference.  The object layout it writes (Tensor and Node
 * slots) is read from the Python classes' __slots__ descriptors at set-up, so
 * the two implementations build identical objects.
 *
 * Set DYNGRAPH_PURE_PYTHON=1 to disable it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* --- references set by setup() ------------------------------------------- */
static PyTypeObject *TensorType = NULL;
static PyTypeObject *NodeType = NULL;
static PyTypeObject *ArrayType = NULL; /* numpy.ndarray */
static PyObject *State = NULL;          /* the thread-local dispatch state */
static PyObject *SlowBind = NULL;       /* registry._bind_py */
static PyObject *OpError = NULL;        /* registry._op_error */
static PyObject *MetaType = NULL;       /* autograd.graph.Meta */
static PyObject *AsArray = NULL;        /* registry._as_array */
static PyObject *ZERO = NULL, *ONE = NULL;

/* slot offsets */
static Py_ssize_t t_data, t_rg, t_fn, t_nr, t_grad, t_vc, t_base, t_hooks;
static Py_ssize_t n_prim, n_params, n_edges, n_saved, n_saved_data, n_saved_versions, n_out,
    n_in_meta, n_n_out;
static Py_ssize_t p_impl, p_promote, p_promote_from, p_broadcasts, p_n_outputs, p_is_view,
    p_differentiable, p_nondiff, p_save_inputs, p_save_output, p_meta;

static PyObject *s_interpreter, *s_grad_enabled, *s_anomaly, *s_dtype, *s_kind, *s_shape,
    *s_out_vc, *s_same, *s_float, *s_f;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int slot_offset(PyObject *cls, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "_speedups: %s is not a slot", name);
        Py_DECREF(descr);
        return -1;
    }
    *out = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return 0;
}

static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    Py_INCREF(value);
    *p = value;
    Py_XDECREF(old);
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *tensor, *node, *array, *state, *slow, *operr, *prim, *meta, *asarray;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &tensor, &node, &array, &state, &slow, &operr, &prim,
                          &meta, &asarray))
        return NULL;
    const char *tn[] = {"_data", "_rg", "_fn", "_nr", "_grad", "_vc", "_base", "_hooks"};
    Py_ssize_t *to[] = {&t_data, &t_rg, &t_fn, &t_nr, &t_grad, &t_vc, &t_base, &t_hooks};
    for (int i = 0; i < 8; i++)
        if (slot_offset(tensor, tn[i], to[i]) < 0) return NULL;
    const char *nn[] = {"prim", "params", "edges", "saved", "saved_data", "saved_versions", "out",
                        "in_meta", "n_out"};
    Py_ssize_t *no[] = {&n_prim, &n_params, &n_edges, &n_saved, &n_saved_data, &n_saved_versions,
                        &n_out, &n_in_meta, &n_n_out};
    for (int i = 0; i < 9; i++)
        if (slot_offset(node, nn[i], no[i]) < 0) return NULL;
    const char *pn[] = {"impl", "promote", "promote_from", "broadcasts", "n_outputs", "is_view",
                        "differentiable", "nondiff_argnums", "save_inputs", "save_output", "meta"};
    Py_ssize_t *po[] = {&p_impl, &p_promote, &p_promote_from, &p_broadcasts, &p_n_outputs,
                        &p_is_view, &p_differentiable, &p_nondiff, &p_save_inputs,
                        &p_save_output, &p_meta};
    for (int i = 0; i < 11; i++)
        if (slot_offset(prim, pn[i], po[i]) < 0) return NULL;
    Py_XSETREF(TensorType, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(NodeType, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(ArrayType, (PyTypeObject *)Py_NewRef(array));
    Py_XSETREF(State, Py_NewRef(state));
    Py_XSETREF(SlowBind, Py_NewRef(slow));
    Py_XSETREF(OpError, Py_NewRef(operr));
    Py_XSETREF(MetaType, Py_NewRef(meta));
    Py_XSETREF(AsArray, Py_NewRef(asarray));
    Py_RETURN_NONE;
}

/* kind character of an ndarray's dtype ('f', 'i', 'b', ...), or 0 on failure */
static char dtype_kind(PyObject *dtype) {
    PyObject *kind = PyObject_GetAttr(dtype, s_kind);
    if (kind == NULL) {
        PyErr_Clear();
        return 0;
    }
    char c = 0;
    if (PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1)
        c = (char)PyUnicode_READ_CHAR(kind, 0);
    Py_DECREF(kind);
    return c;
}

static PyObject *new_tensor(PyObject *data, int rg, PyObject *fn) {
    PyObject *t = TensorType->tp_alloc(TensorType, 0);
    if (t == NULL) return NULL;
    set_slot(t, t_data, data);
    set_slot(t, t_rg, rg ? Py_True : Py_False);
    set_slot(t, t_fn, fn ? fn : Py_None);
    set_slot(t, t_nr, ZERO);
    set_slot(t, t_grad, Py_None);
    set_slot(t, t_vc, Py_None);
    set_slot(t, t_base, Py_None);
    set_slot(t, t_hooks, Py_None);
    return t;
}

static PyObject *slow(PyObject *prim, PyObject *args, PyObject *params) {
    return PyObject_CallFunctionObjArgs(SlowBind, prim, args, params, NULL);
}

/* shape of an array or Tensor-data, new reference */
static PyObject *shape_of(PyObject *a) { return PyObject_GetAttr(a, s_shape); }

static PyObject *make_meta_list(PyObject *args, Py_ssize_t n) {
    PyObject *lst = PyList_New(n);
    if (lst == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *m;
        if (PyObject_TypeCheck(a, TensorType)) {
            PyObject *d = SLOT(a, t_data);
            PyObject *shape = shape_of(d);
            PyObject *dt = shape ? PyObject_GetAttr(d, s_dtype) : NULL;
            m = dt ? PyObject_CallFunctionObjArgs(MetaType, shape, dt, NULL) : NULL;
            Py_XDECREF(shape);
            Py_XDECREF(dt);
            if (m == NULL) {
                Py_DECREF(lst);
                return NULL;
            }
        } else {
            m = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(lst, i, m);
    }
    return lst;
}

static PyObject *bind(PyObject *self, PyObject *const *fargs, Py_ssize_t nfargs) {
    if (nfargs < 2 || nfargs > 3) {
        PyErr_SetString(PyExc_TypeError, "bind(prim, args, params={})");
        return NULL;
    }
    PyObject *prim = fargs[0], *args = fargs[1];
    PyObject *params = nfargs == 3 ? fargs[2] : NULL;
    PyObject *empty_params = NULL;
    if (!PyTuple_Check(args)) return slow(prim, args, params ? params : Py_None);
    int has_params = params != NULL && PyDict_Check(params) && PyDict_GET_SIZE(params) > 0;
    if (params == NULL) {
        empty_params = PyDict_New();
        if (empty_params == NULL) return NULL;
        params = empty_params;
    }
#define SLOW()                                            \
    do {                                                  \
        PyObject *r_ = slow(prim, args, params);          \
        Py_XDECREF(empty_params);                         \
        return r_;                                        \
    } while (0)

    /* interpreter / anomaly: Python path */
    PyObject *interp = PyObject_GetAttr(State, s_interpreter);
    if (interp == NULL) return NULL;
    int has_interp = interp != Py_None;
    Py_DECREF(interp);
    if (has_interp) SLOW();
    PyObject *anom = PyObject_GetAttr(State, s_anomaly);
    if (anom == NULL) return NULL;
    int anomaly = PyObject_IsTrue(anom);
    Py_DECREF(anom);
    if (anomaly) SLOW();
    if (SLOT(prim, p_n_outputs) != ONE &&
        PyLong_AsLong(SLOT(prim, p_n_outputs)) != 1)
        SLOW();
    if (PyObject_IsTrue(SLOT(prim, p_is_view))) SLOW();

    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n > 8) SLOW();
    PyObject *datas[8];
    int need = 0, n_arrays = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (PyObject_TypeCheck(a, TensorType)) {
            PyObject *d = SLOT(a, t_data);
            if (Py_TYPE(d) != ArrayType) SLOW();
            datas[i] = d;
            n_arrays++;
            if (SLOT(a, t_rg) == Py_True) need = 1;
        } else if (PyFloat_CheckExact(a) || PyLong_CheckExact(a)) {
            datas[i] = a;
        } else {
            SLOW();
        }
    }
    /* dtype promotion: handled here only when it is a no-op */
    PyObject *promote = SLOT(prim, p_promote);
    if (promote != Py_None) {
        if (SLOT(prim, p_promote_from) != ZERO &&
            PyLong_AsLong(SLOT(prim, p_promote_from)) != 0)
            SLOW();
        PyObject *dt0 = NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (Py_TYPE(datas[i]) != ArrayType) continue;
            PyObject *dt = PyObject_GetAttr(datas[i], s_dtype);
            if (dt == NULL) {
                Py_XDECREF(dt0);
                return NULL;
            }
            if (dt0 == NULL) {
                dt0 = dt;
            } else {
                int same = dt == dt0;
                Py_DECREF(dt);
                if (!same) {
                    Py_DECREF(dt0);
                    SLOW();
                }
            }
        }
        if (dt0 == NULL) SLOW();
        char kind = dtype_kind(dt0);
        Py_DECREF(dt0);
        /* scalars are weak: fine next to floating arrays; integer/bool arrays go the slow way */
        if (kind != 'f') SLOW();
    }
    /* forward */
    PyObject *argtuple = PyTuple_New(n);
    if (argtuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(argtuple, i, Py_NewRef(datas[i]));
    PyObject *out = PyObject_Call(SLOT(prim, p_impl), argtuple, has_params ? params : NULL);
    Py_DECREF(argtuple);
    if (out == NULL) {
        /* re-raise ValueError/TypeError/IndexError with the op's name, shapes and dtypes */
        if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
            PyErr_ExceptionMatches(PyExc_IndexError)) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyErr_NormalizeException(&et, &ev, &tb);
            if (tb != NULL) PyException_SetTraceback(ev, tb);
            PyObject *err = PyObject_CallFunctionObjArgs(OpError, prim, args, params, ev, NULL);
            if (err != NULL) {
                if (err != ev) PyException_SetCause(err, Py_NewRef(ev));
                PyErr_SetObject((PyObject *)Py_TYPE(err), err);
                Py_DECREF(err);
            }
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
        }
        Py_XDECREF(empty_params);
        return NULL;
    }
    if (Py_TYPE(out) != ArrayType) {
        /* a NumPy scalar from a 0-d result: make it a 0-d array, as the Python path does */
        PyObject *arr = PyObject_CallOneArg(AsArray, out);
        Py_DECREF(out);
        if (arr == NULL) {
            Py_XDECREF(empty_params);
            return NULL;
        }
        out = arr;
        if (Py_TYPE(out) != ArrayType) {
            Py_DECREF(out);
            SLOW();
        }
    }
    int track = 0;
    if (need && SLOT(prim, p_differentiable) == Py_True) {
        PyObject *ge = PyObject_GetAttr(State, s_grad_enabled);
        if (ge == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        track = ge == Py_True;
        Py_DECREF(ge);
    }
    if (!track) {
        PyObject *t = new_tensor(out, 0, NULL);
        Py_DECREF(out);
        Py_XDECREF(empty_params);
        return t;
    }
    /* ---- record the node ---- */
    PyObject *outdt = PyObject_GetAttr(out, s_dtype);
    if (outdt == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    char okind = dtype_kind(outdt);
    Py_DECREF(outdt);
    if (okind != 'f') {
        Py_DECREF(out);
        SLOW();
    }
    PyObject *node = NodeType->tp_alloc(NodeType, 0);
    PyObject *edges = PyList_New(n);
    if (node == NULL || edges == NULL) goto fail_node;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *e;
        if (PyObject_TypeCheck(a, TensorType) && SLOT(a, t_rg) == Py_True) {
            PyObject *fn = SLOT(a, t_fn);
            if (fn == Py_None)
                e = PyTuple_Pack(2, a, ZERO);
            else
                e = PyTuple_Pack(2, fn, SLOT(a, t_nr));
            if (e == NULL) goto fail_node;
        } else {
            e = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(edges, i, e);
    }
    PyObject *nondiff = SLOT(prim, p_nondiff);
    if (PyTuple_Check(nondiff)) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(nondiff); k++) {
            Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(nondiff, k));
            if (idx >= 0 && idx < n) PyList_SetItem(edges, idx, Py_NewRef(Py_None));
        }
    }
    set_slot(node, n_prim, prim);
    set_slot(node, n_params, params);
    set_slot(node, n_edges, edges);
    Py_CLEAR(edges);
    set_slot(node, n_n_out, ONE);
    set_slot(node, n_out, Py_None);
    set_slot(node, n_in_meta, Py_None);
    if (PyObject_IsTrue(SLOT(prim, p_save_inputs))) {
        PyObject *dl = PyList_New(n), *vl = PyList_New(n);
        if (dl == NULL || vl == NULL) {
            Py_XDECREF(dl);
            Py_XDECREF(vl);
            goto fail_node;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i);
            PyList_SET_ITEM(dl, i, Py_NewRef(datas[i]));
            PyObject *v;
            if (PyObject_TypeCheck(a, TensorType)) {
                PyObject *vc = SLOT(a, t_vc);
                v = vc == Py_None ? Py_NewRef(ZERO) : PySequence_GetItem(vc, 0);
                if (v == NULL) {
                    Py_DECREF(dl);
                    Py_DECREF(vl);
                    goto fail_node;
                }
            } else {
                v = Py_NewRef(Py_None);
            }
            PyList_SET_ITEM(vl, i, v);
        }
        set_slot(node, n_saved, args);
        set_slot(node, n_saved_data, dl);
        set_slot(node, n_saved_versions, vl);
        Py_DECREF(dl);
        Py_DECREF(vl);
    } else {
        set_slot(node, n_saved, Py_None);
        set_slot(node, n_saved_data, Py_None);
        set_slot(node, n_saved_versions, Py_None);
    }
    int want_meta = PyObject_IsTrue(SLOT(prim, p_meta));
    if (!want_meta && SLOT(prim, p_broadcasts) == Py_True && n_arrays > 1) {
        /* gradients need fitting only where an input's shape differs from the output's
           (dtypes are equal here: promotion was a no-op) */
        PyObject *oshape = shape_of(out);
        if (oshape == NULL) goto fail_node;
        for (Py_ssize_t i = 0; i < n && !want_meta; i++) {
            if (Py_TYPE(datas[i]) != ArrayType) continue;
            PyObject *sh = shape_of(datas[i]);
            if (sh == NULL) {
                Py_DECREF(oshape);
                goto fail_node;
            }
            int eq = PyObject_RichCompareBool(sh, oshape, Py_EQ);
            Py_DECREF(sh);
            if (eq < 0) {
                Py_DECREF(oshape);
                goto fail_node;
            }
            if (!eq) want_meta = 1;
        }
        Py_DECREF(oshape);
    }
    if (want_meta) {
        PyObject *ml = make_meta_list(args, n);
        if (ml == NULL) goto fail_node;
        set_slot(node, n_in_meta, ml);
        Py_DECREF(ml);
    }
    PyObject *t = new_tensor(out, 1, node);
    if (t == NULL) goto fail_node;
    if (PyObject_IsTrue(SLOT(prim, p_save_output))) {
        set_slot(node, n_out, out);
        PyObject *cell = PyList_New(1);
        if (cell == NULL) {
            Py_DECREF(t);
            goto fail_node;
        }
        PyList_SET_ITEM(cell, 0, Py_NewRef(ZERO));
        set_slot(t, t_vc, cell);
        int r = PyObject_SetAttr(node, s_out_vc, cell);
        Py_DECREF(cell);
        if (r < 0) {
            Py_DECREF(t);
            goto fail_node;
        }
    }
    Py_DECREF(node);
    Py_DECREF(out);
    Py_XDECREF(empty_params);
    return t;
fail_node:
    Py_XDECREF(node);
    Py_XDECREF(edges);
    Py_DECREF(out);
    Py_XDECREF(empty_params);
    return NULL;
#undef SLOW
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Bind the accelerator to dyngraph's classes."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(prim, args, params={}): the eager dispatch fast path."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups",
                                    "C accelerator for dyngraph's dispatch hot path.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
#define INTERN(var, text)                                   \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_interpreter, "interpreter");
    INTERN(s_grad_enabled, "grad_enabled");
    INTERN(s_anomaly, "anomaly");
    INTERN(s_dtype, "dtype");
    INTERN(s_kind, "kind");
    INTERN(s_shape, "shape");
    INTERN(s_out_vc, "out_vc");
    INTERN(s_same, "same");
    INTERN(s_float, "float");
    INTERN(s_f, "f");
#undef INTERN
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    return PyModule_Create(&module);
}
