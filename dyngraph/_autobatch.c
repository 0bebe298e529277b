/*
 * dyngraph._autobatch: the per-call hot paths of dg.autobatch's recording in C.
 *
 * An accelerator, not a second implementation: the Python code in
 * dyngraph/autobatch/interpreter.py stays the reference.  Each function here
 * handles the common case and hands everything else to it, BEFORE changing any
 * state (so the Python path sees the call exactly as it would without this file):
 *
 * - process(interp, prim, args, params): Autobatcher.process (installed as the
 *   class's method when this module imports) for a call whose signature was seen
 *   before: builds the signature tuple, looks up its output facts (a new signature:
 *   Autobatcher._infer, cached as in Python), records the pending node and its
 *   output tensors.  A non-batchable or value-dependent primitive, a call with
 *   nothing per-member in it, anomaly mode, a cell trace go to
 *   Autobatcher._process_py.
 * - record_cell(interp, cache, args): a dg.autobatch.cell call (no keyword
 *   arguments) whose template is cached and captures no buffers; returns None
 *   when the Python call_cell must run instead.
 *
 * The objects it builds (PNode, Lazy, Tensor and their slots) are those of the
 * Python classes, with the same values; slot offsets are read from their
 * __slots__ descriptors at set-up (tests/test_autobatch_native.py compares the
 * two paths field by field).  DYNGRAPH_PURE_PYTHON=1 disables the module.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

static PyTypeObject *LazyT = NULL, *TensorT = NULL, *PNodeT = NULL, *TemplateT = NULL,
                    *AutobatcherT = NULL, *PrimitiveT = NULL, *ConstsT = NULL, *NdarrayT = NULL;
static PyObject *State = NULL;      /* the thread-local dispatch state */
static PyObject *ProcessPy = NULL;  /* Autobatcher._process_py */
static PyObject *StackP = NULL, *CatP = NULL;
static PyObject *EmptyParams = NULL; /* registry.EMPTY */
static PyObject *ParamMark = NULL, *ValueMark = NULL;   /* interpreter._PARAM / _VALUE */
static Py_ssize_t CollectorMin = 8;
static PyObject *ZERO = NULL, *ONE = NULL, *MINUS1 = NULL;

static Py_ssize_t l_shape, l_dtype, l_ndim, l_size, l_node, l_k;
static Py_ssize_t t_data, t_rg, t_fn, t_nr, t_grad, t_vc, t_base, t_hooks;
static Py_ssize_t n_prim, n_params, n_args, n_sig, n_depth, n_specs, n_refs, n_result, n_row,
    n_seq, n_nuse, n_user, n_interp, n_grad_enabled, n_versions, n_mark;
static Py_ssize_t tm_sid, tm_specs, tm_protos, tm_multi, tm_weak, tm_consts;
static Py_ssize_t c_buf, c_seqs, c_n, c_cap, c_row_bytes;
static Py_ssize_t p_batchable, p_differentiable;

static PyObject *s_grad_enabled, *s_anomaly, *s_seq, *s_nodes, *s_stats, *s_tracing, *s_shapes,
    *s_shape, *s_dtype, *s_cells, *s_nodes_stat, *s_collectors, *s_arenas, *s_arenas_for, *s_grow;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
#define TRUTHY(o) ((o) == Py_True || ((o) != Py_False && (o) != Py_None && PyObject_IsTrue(o) == 1))

static int slot_offset(PyObject *cls, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "_autobatch: %s is not a slot", name);
        Py_DECREF(descr);
        return -1;
    }
    *out = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return 0;
}

/* steals value */
static inline void put_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    *p = value;
    Py_XDECREF(old);
}

static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    Py_INCREF(value);
    put_slot(obj, off, value);
}

static int type_arg(PyObject *o, PyTypeObject **out, const char *what) {
    if (!PyType_Check(o)) {
        PyErr_Format(PyExc_TypeError, "_autobatch.setup: %s must be a class", what);
        return -1;
    }
    Py_XSETREF(*out, (PyTypeObject *)Py_NewRef(o));
    return 0;
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *lazy, *tensor, *pnode, *tmpl, *ab, *prim, *state, *procpy, *stack, *cat, *empty, *pmark,
        *vmark, *consts, *ndarray;
    Py_ssize_t cmin;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOnOO", &lazy, &tensor, &pnode, &tmpl, &ab, &prim, &state,
                          &procpy, &stack, &cat, &empty, &pmark, &vmark, &cmin, &consts, &ndarray))
        return NULL;
    if (type_arg(consts, &ConstsT, "Consts") < 0 || type_arg(ndarray, &NdarrayT, "ndarray") < 0)
        return NULL;
    const char *cn[] = {"buf", "seqs", "n", "cap", "row_bytes"};
    Py_ssize_t *co[] = {&c_buf, &c_seqs, &c_n, &c_cap, &c_row_bytes};
    for (int i = 0; i < 5; i++)
        if (slot_offset(consts, cn[i], co[i]) < 0) return NULL;
    if (type_arg(lazy, &LazyT, "Lazy") < 0 || type_arg(tensor, &TensorT, "Tensor") < 0 ||
        type_arg(pnode, &PNodeT, "PNode") < 0 || type_arg(tmpl, &TemplateT, "Template") < 0 ||
        type_arg(ab, &AutobatcherT, "Autobatcher") < 0 || type_arg(prim, &PrimitiveT, "Primitive") < 0)
        return NULL;
    const char *ln[] = {"shape", "dtype", "ndim", "size", "node", "k"};
    Py_ssize_t *lo[] = {&l_shape, &l_dtype, &l_ndim, &l_size, &l_node, &l_k};
    for (int i = 0; i < 6; i++)
        if (slot_offset(lazy, ln[i], lo[i]) < 0) return NULL;
    const char *tn[] = {"_data", "_rg", "_fn", "_nr", "_grad", "_vc", "_base", "_hooks"};
    Py_ssize_t *to[] = {&t_data, &t_rg, &t_fn, &t_nr, &t_grad, &t_vc, &t_base, &t_hooks};
    for (int i = 0; i < 8; i++)
        if (slot_offset(tensor, tn[i], to[i]) < 0) return NULL;
    const char *nn[] = {"prim", "params", "args", "sig", "depth", "specs", "refs", "result", "row",
                        "seq", "nuse", "user", "interp", "grad_enabled", "versions", "mark"};
    Py_ssize_t *no[] = {&n_prim, &n_params, &n_args, &n_sig, &n_depth, &n_specs, &n_refs, &n_result,
                        &n_row, &n_seq, &n_nuse, &n_user, &n_interp, &n_grad_enabled, &n_versions,
                        &n_mark};
    for (int i = 0; i < 16; i++)
        if (slot_offset(pnode, nn[i], no[i]) < 0) return NULL;
    const char *mn[] = {"sid", "specs", "protos", "multi", "weak", "consts"};
    Py_ssize_t *mo[] = {&tm_sid, &tm_specs, &tm_protos, &tm_multi, &tm_weak, &tm_consts};
    for (int i = 0; i < 6; i++)
        if (slot_offset(tmpl, mn[i], mo[i]) < 0) return NULL;
    if (slot_offset(prim, "batchable", &p_batchable) < 0 ||
        slot_offset(prim, "differentiable", &p_differentiable) < 0)
        return NULL;
    Py_XSETREF(State, Py_NewRef(state));
    Py_XSETREF(ProcessPy, Py_NewRef(procpy));
    Py_XSETREF(StackP, Py_NewRef(stack));
    Py_XSETREF(CatP, Py_NewRef(cat));
    Py_XSETREF(EmptyParams, Py_NewRef(empty));
    Py_XSETREF(ParamMark, Py_NewRef(pmark));
    Py_XSETREF(ValueMark, Py_NewRef(vmark));
    CollectorMin = cmin;
    Py_RETURN_NONE;
}

#define READY (LazyT != NULL)

/* a slotted instance with every named slot NULL (as object.__new__ leaves it) */
static inline PyObject *alloc(PyTypeObject *type) { return type->tp_alloc(type, 0); }

/* Output k of pending node: a Tensor over a Lazy stand-in (interpreter._pending_output). */
static PyObject *pending_output(PyObject *node, PyObject *k, PyObject *shape, PyObject *dtype,
                                PyObject *ndim, PyObject *size, PyObject *rg) {
    PyObject *lz = alloc(LazyT);
    if (lz == NULL) return NULL;
    set_slot(lz, l_shape, shape);
    set_slot(lz, l_dtype, dtype);
    set_slot(lz, l_ndim, ndim);
    set_slot(lz, l_size, size);
    set_slot(lz, l_node, node);
    set_slot(lz, l_k, k);
    PyObject *t = alloc(TensorT);
    if (t == NULL) {
        Py_DECREF(lz);
        return NULL;
    }
    put_slot(t, t_data, lz);
    int r = TRUTHY(rg);
    set_slot(t, t_rg, rg);
    set_slot(t, t_fn, r ? node : Py_None);
    set_slot(t, t_nr, k);
    set_slot(t, t_grad, Py_None);
    set_slot(t, t_vc, Py_None);
    set_slot(t, t_base, Py_None);
    set_slot(t, t_hooks, Py_None);
    return t;
}

/* obj.name += 1 (the stats counters) */
static int incr_attr(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    PyObject *w = PyNumber_Add(v, ONE);
    Py_DECREF(v);
    if (w == NULL) return -1;
    int r = PyObject_SetAttr(obj, name, w);
    Py_DECREF(w);
    return r;
}

/* node.nuse += 1; node.user = seq (a recorded consumer, as in Python's process/call_cell) */
static int use(PyObject *m, PyObject *seq) {
    PyObject *nu = SLOT(m, n_nuse);
    if (nu == NULL || !PyLong_CheckExact(nu)) {
        PyErr_SetString(PyExc_TypeError, "_autobatch: a pending node without a consumer count");
        return -1;
    }
    Py_ssize_t c = PyLong_AsSsize_t(nu);
    if (c == -1 && PyErr_Occurred()) return -1;
    PyObject *w = PyLong_FromSsize_t(c + 1);
    if (w == NULL) return -1;
    put_slot(m, n_nuse, w);
    set_slot(m, n_user, seq);
    return 0;
}

/* The fields every new PNode gets (Autobatcher._record / call_cell). */
static PyObject *new_node(PyObject *interp, PyObject *prim, PyObject *params, PyObject *args,
                          PyObject *sig, long depth, PyObject *seq, PyObject *grad, PyObject *versions,
                          PyObject *specs) {
    PyObject *node = alloc(PNodeT);
    if (node == NULL) return NULL;
    PyObject *d = PyLong_FromLong(depth);
    if (d == NULL) {
        Py_DECREF(node);
        return NULL;
    }
    set_slot(node, n_prim, prim);
    set_slot(node, n_params, params);
    set_slot(node, n_args, args);
    set_slot(node, n_sig, sig);
    put_slot(node, n_depth, d);
    set_slot(node, n_result, Py_None);
    set_slot(node, n_row, Py_None);
    set_slot(node, n_seq, seq);
    set_slot(node, n_interp, interp);
    set_slot(node, n_grad_enabled, grad);
    set_slot(node, n_mark, ZERO);
    set_slot(node, n_nuse, ZERO);
    set_slot(node, n_user, MINUS1);
    set_slot(node, n_versions, versions);
    set_slot(node, n_specs, specs);
    return node;
}

/* The interpreter's plain attributes (seq, nodes, stats, tracing, arenas: no class attribute
   or descriptor of these names; record_cell and process take only an exact Autobatcher) read
   and written in its instance dict, not through generic getattr/setattr (~30 ns each);
   the ordinary way when the dict lacks the name. */
static PyObject *idict(PyObject *o) {   /* borrowed, or NULL */
    PyObject **dp = _PyObject_GetDictPtr(o);
    return dp != NULL && *dp != NULL && PyDict_CheckExact(*dp) ? *dp : NULL;
}

static PyObject *iget(PyObject *o, PyObject *name) {   /* new reference */
    PyObject *d = idict(o);
    if (d != NULL) {
        PyObject *v = PyDict_GetItemWithError(d, name);
        if (v != NULL) return Py_NewRef(v);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(o, name);
}

static int iset(PyObject *o, PyObject *name, PyObject *v) {
    PyObject *d = idict(o);
    if (d != NULL && PyDict_GetItemWithError(d, name) != NULL) return PyDict_SetItem(d, name, v);
    if (PyErr_Occurred()) return -1;
    return PyObject_SetAttr(o, name, v);
}

/* this thread's dict of the dispatch state (a threading.local), borrowed; NULL (no error
   set) when it cannot be had -- state_get then reads the attribute the ordinary way (as
   _speedups.c does: _State defines no class attributes of these names) */
static PyObject *s_dict = NULL;
static PyObject *state_dict(void) {
    PyObject *d = PyObject_GetAttr(State, s_dict);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(d);   /* the thread's dict outlives this call: the thread state holds it */
    return PyDict_CheckExact(d) ? d : NULL;
}

static PyObject *state_get(PyObject *ld, PyObject *name) {   /* new reference */
    if (ld != NULL) {
        PyObject *v = PyDict_GetItemWithError(ld, name);
        if (v != NULL) return Py_NewRef(v);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(State, name);
}

/* interp.seq, and interp.seq = seq + 1; the node appended to interp.nodes */
static PyObject *take_seq(PyObject *interp) {
    PyObject *seq = iget(interp, s_seq);
    if (seq == NULL) return NULL;
    PyObject *next = PyNumber_Add(seq, ONE);
    if (next == NULL || iset(interp, s_seq, next) < 0) {
        Py_XDECREF(next);
        Py_DECREF(seq);
        return NULL;
    }
    Py_DECREF(next);
    return seq;
}

static int append_node(PyObject *interp, PyObject *node) {
    PyObject *nodes = iget(interp, s_nodes);
    if (nodes == NULL) return -1;
    int r = PyList_Check(nodes) ? PyList_Append(nodes, node) : -1;
    if (r < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_autobatch: interp.nodes is not a list");
    Py_DECREF(nodes);
    return r;
}

/* 1 when anomaly mode is on (the Python path captures the creation stack), -1 on error */
static int anomaly_on(PyObject *ld) {
    PyObject *a = state_get(ld, s_anomaly);
    if (a == NULL) return -1;
    int r = PyObject_IsTrue(a);
    Py_DECREF(a);
    return r;
}

static PyObject *slow_process(PyObject *interp, PyObject *prim, PyObject *args, PyObject *params) {
    return PyObject_CallFunctionObjArgs(ProcessPy, interp, prim, args, params, NULL);
}

#define SPEC_ADD(o)                                   \
    do {                                              \
        if (PyList_Append(spec, (o)) < 0) goto error; \
    } while (0)
#define SPEC_ADD_NEW(o)                          \
    do {                                         \
        PyObject *_v = (o);                      \
        if (_v == NULL) goto error;              \
        int _r = PyList_Append(spec, _v);        \
        Py_DECREF(_v);                           \
        if (_r < 0) goto error;                  \
    } while (0)

/* Autobatcher.process: see the file comment.  Called as a method (self = the interpreter). */
static PyObject *process(PyObject *interp, PyObject *const *fargs, Py_ssize_t nfargs) {
    if (nfargs != 3) {
        PyErr_SetString(PyExc_TypeError, "process(prim, args, params)");
        return NULL;
    }
    PyObject *prim = fargs[0], *args = fargs[1], *params = fargs[2];
    PyObject *spec = NULL, *sig = NULL, *pkey = NULL, *grad = NULL, *stored = NULL, *versions = NULL,
             *seq = NULL, *node = NULL, *out = NULL, *refs = NULL, *tmp = NULL;
    if (!READY || Py_TYPE(prim) != PrimitiveT || !PyTuple_CheckExact(args) ||
        SLOT(prim, p_batchable) != Py_True)
        return slow_process(interp, prim, args, params);
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    /* a collector (stack/cat of many inputs, the per-node losses) is listed for _collected */
    int collector = (prim == StackP || prim == CatP) && n >= CollectorMin;
    PyObject *ld = state_dict();
    int an = anomaly_on(ld);
    if (an < 0) return NULL;
    if (an) return slow_process(interp, prim, args, params);
    tmp = iget(interp, s_tracing);
    if (tmp == NULL) return NULL;
    int tracing = PyObject_IsTrue(tmp);
    Py_CLEAR(tmp);
    if (tracing) return slow_process(interp, prim, args, params);
    /* the params key (_pkey): () without params, else the items, hashable */
    if (params == NULL || params == Py_None || (PyDict_Check(params) && PyDict_GET_SIZE(params) == 0)) {
        pkey = PyTuple_New(0);
    } else if (PyDict_CheckExact(params)) {
        PyObject *items = PyDict_Items(params);
        if (items == NULL) return NULL;
        pkey = PyList_AsTuple(items);
        Py_DECREF(items);
        if (pkey != NULL && PyObject_Hash(pkey) == -1) {
            PyErr_Clear();   /* unhashable (a slice before 3.12): the Python path keys by repr */
            Py_DECREF(pkey);
            return slow_process(interp, prim, args, params);
        }
    } else {
        return slow_process(interp, prim, args, params);
    }
    if (pkey == NULL) return NULL;
    grad = state_get(ld, s_grad_enabled);
    if (grad == NULL) goto error;
    spec = PyList_New(0);
    if (spec == NULL) goto error;
    SPEC_ADD(prim);
    SPEC_ADD(pkey);
    SPEC_ADD(grad);
    long depth = 0;
    int lazy = 0, cnst = 0, rg = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (PyObject_TypeCheck(a, TensorT)) {
            PyObject *d = SLOT(a, t_data), *arg = SLOT(a, t_rg);
            if (d == NULL || arg == NULL) goto slow;
            int r = TRUTHY(arg);
            if (Py_TYPE(d) == LazyT) {
                lazy = 1;
                SPEC_ADD(SLOT(d, l_shape));
                SPEC_ADD(SLOT(d, l_dtype));
                PyObject *m = SLOT(d, l_node);
                PyObject *res = SLOT(m, n_result);
                long nd = -1;
                if (res == Py_None) {
                    nd = PyLong_AsLong(SLOT(m, n_depth));
                    if (nd == -1 && PyErr_Occurred()) goto error;
                }
                if (nd >= depth) depth = nd + 1;
            } else if (r && SLOT(a, t_fn) == Py_None) {
                SPEC_ADD_NEW(PyLong_FromVoidPtr(a));
                SPEC_ADD_NEW(PyObject_GetAttr(d, s_shape));
                SPEC_ADD_NEW(PyObject_GetAttr(d, s_dtype));
            } else {
                cnst = 1;
                SPEC_ADD_NEW(PyObject_GetAttr(d, s_shape));
                SPEC_ADD_NEW(PyObject_GetAttr(d, s_dtype));
            }
            if (r) rg = 1;
        } else {
            SPEC_ADD((PyObject *)Py_TYPE(a));
            SPEC_ADD(a);
        }
    }
    if (!(lazy || cnst)) goto slow;        /* run_now */
    sig = PyList_AsTuple(spec);
    if (sig == NULL) goto error;
    PyObject *shapes = PyObject_GetAttr(interp, s_shapes);
    if (shapes == NULL) goto error;
    if (!PyDict_CheckExact(shapes)) {
        Py_DECREF(shapes);
        goto slow;
    }
    PyObject *info = PyDict_GetItemWithError(shapes, sig);
    if (info == NULL) {
        if (PyErr_Occurred()) {   /* unhashable: the Python path raises eager's error */
            PyErr_Clear();
            Py_DECREF(shapes);
            goto slow;
        }
        /* a new signature: its output facts, as the Python path computes and caches them
           (a collector's signature is new in every block: its length differs) */
        info = PyObject_CallMethod(interp, "_infer", "OOO", prim, args, params);
        if (info == NULL || PyDict_SetItem(shapes, sig, info) < 0) {
            Py_XDECREF(info);
            Py_DECREF(shapes);
            goto error;
        }
        Py_DECREF(info);   /* the dict keeps it */
    }
    Py_DECREF(shapes);   /* the interpreter keeps the dict (and info) alive */
    if (!PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) != 4) goto slow;   /* "eager" */
    PyObject *specs = PyTuple_GET_ITEM(info, 0), *multi = PyTuple_GET_ITEM(info, 1),
             *floats = PyTuple_GET_ITEM(info, 2), *sid = PyTuple_GET_ITEM(info, 3);
    Py_INCREF(info);
    int rgs = rg && TRUTHY(grad) && TRUTHY(SLOT(prim, p_differentiable));
    /* from here on the call is recorded: the consumers' counts, the node, its outputs */
    seq = take_seq(interp);
    if (seq == NULL) goto error_info;
    if (lazy) {
        stored = PySequence_List(args);
        if (stored == NULL) goto error_info;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i);
            if (!PyObject_TypeCheck(a, TensorT)) continue;
            PyObject *d = SLOT(a, t_data);
            if (Py_TYPE(d) != LazyT) continue;
            if (use(SLOT(d, l_node), seq) < 0) goto error_info;
            Py_INCREF(d);
            PyList_SetItem(stored, i, d);
        }
    }
    if (cnst) {
        versions = PyList_New(n);
        if (versions == NULL) goto error_info;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i), *v = NULL;
            PyObject *vc = PyObject_TypeCheck(a, TensorT) ? SLOT(a, t_vc) : NULL;
            if (vc != NULL && vc != Py_None) {
                v = PySequence_GetItem(vc, 0);
                if (v == NULL) goto error_info;
            } else {
                v = Py_NewRef(ZERO);
            }
            PyList_SET_ITEM(versions, i, v);
        }
    }
    PyObject *st = iget(interp, s_stats);
    if (st == NULL) goto error_info;
    if (st != Py_None && incr_attr(st, s_nodes_stat) < 0) {
        Py_DECREF(st);
        goto error_info;
    }
    Py_DECREF(st);
    node = new_node(interp, prim, params, lazy ? stored : args, sid, depth, seq, grad,
                    versions ? versions : Py_None, specs);
    if (node == NULL || append_node(interp, node) < 0) goto error_info;
    if (!TRUTHY(multi)) {
        PyObject *sp = PyTuple_GET_ITEM(specs, 0), *shape = PyTuple_GET_ITEM(sp, 0);
        PyObject *ndim = PyLong_FromSsize_t(PyTuple_GET_SIZE(shape));
        if (ndim == NULL) goto error_info;
        out = pending_output(node, ZERO, shape, PyTuple_GET_ITEM(sp, 1), ndim,
                             PyTuple_GET_ITEM(sp, 2), rgs ? PyTuple_GET_ITEM(floats, 0) : Py_False);
        Py_DECREF(ndim);
        if (out == NULL) goto error_info;
        PyObject *w = PyWeakref_NewRef(out, NULL);
        if (w == NULL) goto error_info;
        refs = PyTuple_Pack(1, w);
        Py_DECREF(w);
        if (refs == NULL) goto error_info;
    } else {
        Py_ssize_t no = PyTuple_GET_SIZE(specs);
        refs = PyList_New(no);
        out = PyTuple_New(no);
        if (refs == NULL || out == NULL) goto error_info;
        for (Py_ssize_t k = 0; k < no; k++) {
            PyObject *sp = PyTuple_GET_ITEM(specs, k), *shape = PyTuple_GET_ITEM(sp, 0);
            PyObject *kk = PyLong_FromSsize_t(k), *ndim = PyLong_FromSsize_t(PyTuple_GET_SIZE(shape));
            PyObject *t = NULL;
            if (kk != NULL && ndim != NULL)
                t = pending_output(node, kk, shape, PyTuple_GET_ITEM(sp, 1), ndim, PyTuple_GET_ITEM(sp, 2),
                                   rgs ? PyTuple_GET_ITEM(floats, k) : Py_False);
            Py_XDECREF(kk);
            Py_XDECREF(ndim);
            if (t == NULL) goto error_info;
            PyTuple_SET_ITEM(out, k, t);
            PyObject *w = PyWeakref_NewRef(t, NULL);
            if (w == NULL) goto error_info;
            PyList_SET_ITEM(refs, k, w);
        }
    }
    put_slot(node, n_refs, refs);
    refs = NULL;
    if (collector) {
        PyObject *cs = PyObject_GetAttr(interp, s_collectors);
        if (cs != NULL && !PyList_Check(cs)) {
            PyErr_SetString(PyExc_TypeError, "_autobatch: interp.collectors is not a list");
            Py_CLEAR(cs);
        }
        int r = cs == NULL ? -1 : PyList_Append(cs, node);
        Py_XDECREF(cs);
        if (r < 0) goto error_info;
    }
    Py_DECREF(info);
    Py_DECREF(node);
    Py_XDECREF(stored);
    Py_XDECREF(versions);
    Py_DECREF(seq);
    Py_DECREF(sig);
    Py_DECREF(spec);
    Py_DECREF(grad);
    Py_DECREF(pkey);
    return out;
error_info:
    Py_DECREF(info);
error:
    Py_XDECREF(spec);
    Py_XDECREF(sig);
    Py_XDECREF(pkey);
    Py_XDECREF(grad);
    Py_XDECREF(stored);
    Py_XDECREF(versions);
    Py_XDECREF(seq);
    Py_XDECREF(node);
    Py_XDECREF(out);
    Py_XDECREF(refs);
    return NULL;
slow:
    Py_XDECREF(spec);
    Py_XDECREF(sig);
    Py_XDECREF(pkey);
    Py_XDECREF(grad);
    return slow_process(interp, prim, args, params);
}

/* the cell call key is built in place in a tuple of the size counted first (kn: entries so far) */
#define KEY_ADD(o)                                       \
    do {                                                 \
        if (kn >= klen) goto none;                       \
        PyTuple_SET_ITEM(key, kn, Py_NewRef(o));         \
        kn++;                                            \
    } while (0)
#define KEY_ADD_NEW(o)                       \
    do {                                     \
        PyObject *_v = (o);                  \
        if (_v == NULL) goto error;          \
        if (kn >= klen) {                    \
            Py_DECREF(_v);                   \
            goto none;                       \
        }                                    \
        PyTuple_SET_ITEM(key, kn, _v);       \
        kn++;                                \
    } while (0)

/* Consts.put(d, seq) on a Consts c whose row d fits (Consts.fits, tested by the caller) */
static int consts_put(PyObject *c, Py_buffer *v, long long seq) {
    Py_ssize_t n = PyLong_AsSsize_t(SLOT(c, c_n)), cap = PyLong_AsSsize_t(SLOT(c, c_cap));
    if ((n == -1 || cap == -1) && PyErr_Occurred()) return -1;
    if (n >= cap) {
        PyObject *r = PyObject_CallMethodNoArgs(c, s_grow);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    Py_buffer b, q;
    if (PyObject_GetBuffer(SLOT(c, c_buf), &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(SLOT(c, c_seqs), &q, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&b);
        return -1;
    }
    int ok = (n + 1) * v->len <= b.len && (Py_ssize_t)((n + 1) * sizeof(int64_t)) <= q.len;
    if (ok) {
        if (v->len) memcpy((char *)b.buf + n * v->len, v->buf, (size_t)v->len);
        ((int64_t *)q.buf)[n] = (int64_t)seq;
    }
    PyBuffer_Release(&b);
    PyBuffer_Release(&q);
    if (!ok) {
        PyErr_SetString(PyExc_RuntimeError, "_autobatch: a Consts buffer is smaller than its capacity");
        return -1;
    }
    PyObject *w = PyLong_FromSsize_t(n + 1);
    if (w == NULL) return -1;
    put_slot(c, c_n, w);
    return 0;
}

/* call_cell's copy of constant arguments (Template.consts) into the interpreter's Consts of
   the template: stored[j] = the Consts for each one copied.  0, or -1 on error. */
static int put_consts(PyObject *interp, PyObject *tmpl, PyObject *cpos, PyObject *args,
                      PyObject *stored, PyObject *seq) {
    PyObject *tr = iget(interp, s_tracing);
    if (tr == NULL) return -1;
    int tracing = PyObject_IsTrue(tr);
    Py_DECREF(tr);
    if (tracing) return tracing < 0 ? -1 : 0;
    long long sq = PyLong_AsLongLong(seq);
    if (sq == -1 && PyErr_Occurred()) return -1;
    PyObject *arenas = iget(interp, s_arenas);
    if (arenas == NULL) return -1;
    if (!PyDict_CheckExact(arenas)) {
        Py_DECREF(arenas);
        PyErr_SetString(PyExc_TypeError, "_autobatch: interp.arenas is not a dict");
        return -1;
    }
    PyObject *ar = PyDict_GetItemWithError(arenas, tmpl);
    Py_XINCREF(ar);
    Py_DECREF(arenas);
    if (ar == NULL) {
        if (PyErr_Occurred()) return -1;
        ar = PyObject_CallMethodObjArgs(interp, s_arenas_for, tmpl, args, NULL);
        if (ar == NULL) return -1;
    }
    Py_ssize_t nc = PyTuple_GET_SIZE(cpos);
    if (!PyTuple_CheckExact(ar) || PyTuple_GET_SIZE(ar) != nc) {
        Py_DECREF(ar);
        PyErr_SetString(PyExc_TypeError, "_autobatch: a template's Consts do not match its positions");
        return -1;
    }
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < nc; i++) {
        Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(cpos, i));
        if (j == -1 && PyErr_Occurred()) goto error;
        if (j < 0 || j >= na) continue;
        PyObject *a = PyTuple_GET_ITEM(args, j), *c = PyTuple_GET_ITEM(ar, i);
        if (!PyObject_TypeCheck(a, TensorT) || Py_TYPE(c) != ConstsT) continue;
        PyObject *d = SLOT(a, t_data);
        if (d == NULL || Py_TYPE(d) != NdarrayT) continue;     /* a pending one stays Lazy */
        Py_buffer v;
        if (PyObject_GetBuffer(d, &v, PyBUF_C_CONTIGUOUS) < 0) {   /* not C-contiguous */
            PyErr_Clear();
            continue;
        }
        Py_ssize_t rb = PyLong_AsSsize_t(SLOT(c, c_row_bytes));
        if (rb == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&v);
            goto error;
        }
        if (v.len != rb) {
            PyBuffer_Release(&v);
            continue;
        }
        int r = consts_put(c, &v, sq);
        PyBuffer_Release(&v);
        if (r < 0) goto error;
        Py_INCREF(c);
        PyList_SetItem(stored, j, c);
    }
    Py_DECREF(ar);
    return 0;
error:
    Py_DECREF(ar);
    return -1;
}

/* A cell call (Autobatcher.call_cell's recording, for a cached template): the outputs, or
   None (nothing changed) when the Python call_cell must run. */
static PyObject *record_cell_impl(PyObject *interp, PyObject *cache, PyObject *args, PyObject *ld);

static PyObject *record_cell(PyObject *self, PyObject *const *fargs, Py_ssize_t nfargs) {
    if (nfargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_cell(interp, cache, args)");
        return NULL;
    }
    return record_cell_impl(fargs[0], fargs[1], fargs[2], state_dict());
}

/* ld: this thread's dict of the dispatch state (state_dict), or NULL */
static PyObject *record_cell_impl(PyObject *interp, PyObject *cache, PyObject *args, PyObject *ld) {
    if (!READY || Py_TYPE(interp) != AutobatcherT || !PyDict_CheckExact(cache) || !PyTuple_CheckExact(args))
        Py_RETURN_NONE;
    PyObject *key = NULL, *ktuple = NULL, *grad = NULL, *stored = NULL, *seq = NULL, *node = NULL,
             *refs = NULL, *outs = NULL;
    int an = anomaly_on(ld);
    if (an < 0) return NULL;
    if (an) Py_RETURN_NONE;
    grad = state_get(ld, s_grad_enabled);
    if (grad == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args), klen = 1, kn = 0;
    for (Py_ssize_t i = 0; i < n; i++) {   /* 3 entries per argument, 4 for a parameter */
        PyObject *a = PyTuple_GET_ITEM(args, i);
        klen += 3;
        if (PyObject_TypeCheck(a, TensorT)) {
            PyObject *d = SLOT(a, t_data), *arg = SLOT(a, t_rg);
            if (d != NULL && arg != NULL && Py_TYPE(d) != LazyT && TRUTHY(arg) && SLOT(a, t_fn) == Py_None)
                klen += 1;
        }
    }
    key = PyTuple_New(klen);
    if (key == NULL) goto error;
    KEY_ADD(grad);
    long depth = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (PyObject_TypeCheck(a, TensorT)) {
            PyObject *d = SLOT(a, t_data), *arg = SLOT(a, t_rg);
            if (d == NULL || arg == NULL) goto none;
            if (Py_TYPE(d) == LazyT) {
                KEY_ADD(SLOT(d, l_shape));
                KEY_ADD(SLOT(d, l_dtype));
                KEY_ADD(arg);
                PyObject *m = SLOT(d, l_node);
                if (SLOT(m, n_result) == Py_None) {
                    long md = PyLong_AsLong(SLOT(m, n_depth));
                    if (md == -1 && PyErr_Occurred()) goto error;
                    if (md >= depth) depth = md + 1;
                }
            } else if (TRUTHY(arg) && SLOT(a, t_fn) == Py_None) {
                KEY_ADD_NEW(PyLong_FromVoidPtr(a));
                KEY_ADD_NEW(PyObject_GetAttr(d, s_shape));
                KEY_ADD_NEW(PyObject_GetAttr(d, s_dtype));
                KEY_ADD(ParamMark);
            } else {
                KEY_ADD_NEW(PyObject_GetAttr(d, s_shape));
                KEY_ADD_NEW(PyObject_GetAttr(d, s_dtype));
                KEY_ADD(arg);
            }
        } else {
            KEY_ADD((PyObject *)Py_TYPE(a));
            KEY_ADD(a);
            KEY_ADD(ValueMark);
        }
    }
    if (kn != klen) goto none;
    ktuple = Py_NewRef(key);
    PyObject *tmpl = PyDict_GetItemWithError(cache, ktuple);   /* borrowed; the cache keeps it */
    if (tmpl == NULL) {
        PyErr_Clear();
        goto none;
    }
    if (Py_TYPE(tmpl) != TemplateT) goto none;     /* False: runs inline (the Python path) */
    PyObject *weak = SLOT(tmpl, tm_weak);
    if (weak == NULL || !PyTuple_CheckExact(weak) || PyTuple_GET_SIZE(weak) != 0) goto none;
    Py_INCREF(tmpl);
    seq = take_seq(interp);
    if (seq == NULL) goto error_t;
    stored = PySequence_List(args);
    if (stored == NULL) goto error_t;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (!PyObject_TypeCheck(a, TensorT)) continue;
        PyObject *d = SLOT(a, t_data);
        if (Py_TYPE(d) != LazyT) continue;
        if (use(SLOT(d, l_node), seq) < 0) goto error_t;
        Py_INCREF(d);
        PyList_SetItem(stored, i, d);
    }
    PyObject *st = iget(interp, s_stats);
    if (st == NULL) goto error_t;
    if (st != Py_None && (incr_attr(st, s_cells) < 0 || incr_attr(st, s_nodes_stat) < 0)) {
        Py_DECREF(st);
        goto error_t;
    }
    Py_DECREF(st);
    PyObject *cpos = SLOT(tmpl, tm_consts);
    if (cpos != NULL && PyTuple_CheckExact(cpos) && PyTuple_GET_SIZE(cpos) > 0 &&
        put_consts(interp, tmpl, cpos, args, stored, seq) < 0)
        goto error_t;
    node = new_node(interp, tmpl, EmptyParams, stored, SLOT(tmpl, tm_sid), depth, seq, grad, Py_None,
                    SLOT(tmpl, tm_specs));
    if (node == NULL || append_node(interp, node) < 0) goto error_t;
    PyObject *protos = SLOT(tmpl, tm_protos);
    Py_ssize_t no = PyTuple_GET_SIZE(protos);
    refs = PyTuple_New(no);
    outs = PyTuple_New(no);
    if (refs == NULL || outs == NULL) goto error_t;
    for (Py_ssize_t j = 0; j < no; j++) {
        PyObject *p = PyTuple_GET_ITEM(protos, j);   /* shape, dtype, ndim, size, rg, k */
        PyObject *t = pending_output(node, PyTuple_GET_ITEM(p, 5), PyTuple_GET_ITEM(p, 0),
                                     PyTuple_GET_ITEM(p, 1), PyTuple_GET_ITEM(p, 2),
                                     PyTuple_GET_ITEM(p, 3), PyTuple_GET_ITEM(p, 4));
        if (t == NULL) goto error_t;
        PyTuple_SET_ITEM(outs, j, t);
        PyObject *w = PyWeakref_NewRef(t, NULL);
        if (w == NULL) goto error_t;
        PyTuple_SET_ITEM(refs, j, w);
    }
    put_slot(node, n_refs, refs);
    refs = NULL;
    PyObject *result;
    if (TRUTHY(SLOT(tmpl, tm_multi))) {
        result = outs;
        outs = NULL;
    } else {
        result = Py_NewRef(PyTuple_GET_ITEM(outs, 0));
    }
    Py_DECREF(tmpl);
    Py_XDECREF(outs);
    Py_DECREF(node);
    Py_DECREF(stored);
    Py_DECREF(seq);
    Py_DECREF(ktuple);
    Py_DECREF(key);
    Py_DECREF(grad);
    return result;
error_t:
    Py_DECREF(tmpl);
error:
    Py_XDECREF(key);
    Py_XDECREF(ktuple);
    Py_XDECREF(grad);
    Py_XDECREF(stored);
    Py_XDECREF(seq);
    Py_XDECREF(node);
    Py_XDECREF(refs);
    Py_XDECREF(outs);
    return NULL;
none:
    Py_XDECREF(key);
    Py_XDECREF(ktuple);
    Py_XDECREF(grad);
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------------------------------
 * evaluation: the per-member loops of Autobatcher._execute / _run_group
 * ------------------------------------------------------------------------------------- */

static int list_arg(PyObject *o, const char *what) {
    if (!PyList_CheckExact(o)) {
        PyErr_Format(PyExc_TypeError, "_autobatch: %s must be a list", what);
        return -1;
    }
    return 0;
}

/* group_by(todo, late) -> (groups, keys): as _execute's loop: a node's key is
   (depth << 32) | sig, its depth late.get(node, node.depth); groups {key: [nodes]} in
   first-seen order, keys the key of each node of todo */
static PyObject *group_by(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) {
        PyErr_SetString(PyExc_TypeError, "group_by(todo, late)");
        return NULL;
    }
    PyObject *todo = a[0], *late = a[1];
    if (list_arg(todo, "todo") < 0) return NULL;
    int use_late = PyDict_CheckExact(late) && PyDict_GET_SIZE(late) > 0;
    Py_ssize_t n = PyList_GET_SIZE(todo);
    PyObject *groups = PyDict_New(), *keys = PyList_New(n);
    if (groups == NULL || keys == NULL) goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(todo, i);
        if (Py_TYPE(node) != PNodeT) {
            PyErr_SetString(PyExc_TypeError, "_autobatch.group_by: not a PNode");
            goto error;
        }
        PyObject *d = NULL;
        if (use_late) {
            d = PyDict_GetItemWithError(late, node);
            if (d == NULL && PyErr_Occurred()) goto error;
        }
        if (d == NULL) d = SLOT(node, n_depth);
        long long dd = PyLong_AsLongLong(d), sg = PyLong_AsLongLong(SLOT(node, n_sig));
        if ((dd == -1 || sg == -1) && PyErr_Occurred()) goto error;
        PyObject *k = PyLong_FromLongLong((long long)((unsigned long long)dd << 32) | sg);
        if (k == NULL) goto error;
        PyList_SET_ITEM(keys, i, k);
        PyObject *g = PyDict_GetItemWithError(groups, k);
        if (g == NULL) {
            if (PyErr_Occurred()) goto error;
            g = PyList_New(1);
            if (g == NULL) goto error;
            PyList_SET_ITEM(g, 0, Py_NewRef(node));
            int r = PyDict_SetItem(groups, k, g);
            Py_DECREF(g);
            if (r < 0) goto error;
        } else if (PyList_Append(g, node) < 0) {
            goto error;
        }
    }
    PyObject *res = PyTuple_Pack(2, groups, keys);
    Py_DECREF(groups);
    Py_DECREF(keys);
    return res;
error:
    Py_XDECREF(groups);
    Py_XDECREF(keys);
    return NULL;
}

/* assign(group, out, rows): every member's result = out, and row = its position when rows */
static PyObject *assign(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) {
        PyErr_SetString(PyExc_TypeError, "assign(group, out, rows)");
        return NULL;
    }
    PyObject *group = a[0], *out = a[1];
    int rows = PyObject_IsTrue(a[2]);
    if (rows < 0 || list_arg(group, "group") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(group, i);
        if (Py_TYPE(node) != PNodeT) {
            PyErr_SetString(PyExc_TypeError, "_autobatch.assign: not a PNode");
            return NULL;
        }
        set_slot(node, n_result, out);
        if (rows) {
            PyObject *r = PyLong_FromSsize_t(i);
            if (r == NULL) return NULL;
            put_slot(node, n_row, r);
        }
    }
    Py_RETURN_NONE;
}

/* release(group) -> the members with instance attributes (hooks, retained grads, anomaly
   info: the rare ones the Python loop handles); every member's args dropped */
static PyObject *release(PyObject *self, PyObject *group) {
    if (list_arg(group, "group") < 0) return NULL;
    PyObject *rare = PyList_New(0);
    if (rare == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(group, i);
        if (Py_TYPE(node) != PNodeT) {
            PyErr_SetString(PyExc_TypeError, "_autobatch.release: not a PNode");
            Py_DECREF(rare);
            return NULL;
        }
        PyObject **dp = _PyObject_GetDictPtr(node);
        if (dp != NULL && *dp != NULL && PyDict_GET_SIZE(*dp) > 0 && PyList_Append(rare, node) < 0) {
            Py_DECREF(rare);
            return NULL;
        }
        set_slot(node, n_args, Py_None);
    }
    return rare;
}

/* version of a tensor's buffer (its _vc cell's int, 0 without one) */
static PyObject *version_of(PyObject *t) {
    PyObject *vc = SLOT(t, t_vc);
    if (vc == NULL || vc == Py_None) return Py_NewRef(ZERO);
    return PySequence_GetItem(vc, 0);
}

/* stale(group) -> the first member whose tensor inputs were written in place since it was
   recorded (Autobatcher._check_versions raises for it), else None */
static PyObject *stale(PyObject *self, PyObject *group) {
    if (list_arg(group, "group") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(group, i);
        PyObject *vs = SLOT(node, n_versions);
        if (vs == NULL || vs == Py_None) continue;
        PyObject *args = SLOT(node, n_args);
        if (args == NULL || !PyList_Check(vs)) return Py_NewRef(node);   /* Python decides */
        PyObject *seq = PySequence_Fast(args, "args");
        if (seq == NULL) return NULL;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
        if (m != PyList_GET_SIZE(vs)) {
            Py_DECREF(seq);
            return Py_NewRef(node);
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *x = PySequence_Fast_GET_ITEM(seq, j);
            if (!PyObject_TypeCheck(x, TensorT) || Py_TYPE(SLOT(x, t_data)) == LazyT) continue;
            PyObject *v = version_of(x);
            if (v == NULL) {
                Py_DECREF(seq);
                return NULL;
            }
            int eq = PyObject_RichCompareBool(v, PyList_GET_ITEM(vs, j), Py_EQ);
            Py_DECREF(v);
            if (eq != 1) {
                Py_DECREF(seq);
                if (eq < 0) return NULL;
                return Py_NewRef(node);
            }
        }
        Py_DECREF(seq);
    }
    Py_RETURN_NONE;
}

/* columns(group, width) -> per argument position, the list of every member's argument */
static PyObject *columns(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) {
        PyErr_SetString(PyExc_TypeError, "columns(group, width)");
        return NULL;
    }
    PyObject *group = a[0];
    Py_ssize_t w = PyLong_AsSsize_t(a[1]);
    if ((w == -1 && PyErr_Occurred()) || list_arg(group, "group") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    PyObject *cols = PyList_New(w);
    if (cols == NULL) return NULL;
    for (Py_ssize_t j = 0; j < w; j++) {
        PyObject *c = PyList_New(n);
        if (c == NULL) goto error;
        PyList_SET_ITEM(cols, j, c);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *args = SLOT(PyList_GET_ITEM(group, i), n_args);
        PyObject *seq = args == NULL ? NULL : PySequence_Fast(args, "args");
        if (seq == NULL) goto error;
        if (PySequence_Fast_GET_SIZE(seq) != w) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "_autobatch.columns: members with different argument counts");
            goto error;
        }
        for (Py_ssize_t j = 0; j < w; j++)
            PyList_SET_ITEM(PyList_GET_ITEM(cols, j), i, Py_NewRef(PySequence_Fast_GET_ITEM(seq, j)));
        Py_DECREF(seq);
    }
    return cols;
error:
    Py_DECREF(cols);
    return NULL;
}

static int cmp_ptr(const void *x, const void *y) {
    uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
    return a < b ? -1 : a > b;
}

/* scan(refs) -> None when some ref is not the Lazy output of an executed node, else
   (distinct, nodes, k, results, rows, keys): distinct 1 when every ref is the same object,
   2 when all differ, 0 otherwise; nodes / results the members' nodes and node results; k
   the output number when all refs share it, else -1; rows (bytes of intp) each member's row
   (-1: the node's result is its own value); keys (bytes of intp) per member the identity of
   its source array (the result, or output k of a tuple result). */
static PyObject *scan(PyObject *self, PyObject *refs) {
    if (list_arg(refs, "refs") < 0) {
        PyErr_Clear();
        refs = PySequence_List(refs);
        if (refs == NULL) return NULL;
    } else {
        Py_INCREF(refs);
    }
    Py_ssize_t n = PyList_GET_SIZE(refs);
    PyObject *nodes = NULL, *results = NULL, *rows = NULL, *keys = NULL, *out = NULL;
    uintptr_t *ptrs = NULL;
    if (n == 0) goto none;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(refs, i);
        if (Py_TYPE(r) != LazyT) goto none;
        PyObject *m = SLOT(r, l_node);
        if (m == NULL || Py_TYPE(m) != PNodeT || SLOT(m, n_result) == Py_None) goto none;
    }
    nodes = PyList_New(n);
    results = PyList_New(n);
    rows = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(Py_ssize_t));
    keys = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(Py_ssize_t));
    ptrs = PyMem_Malloc(n * sizeof(uintptr_t));
    if (nodes == NULL || results == NULL || rows == NULL || keys == NULL || ptrs == NULL) {
        if (ptrs == NULL) PyErr_NoMemory();
        goto error;
    }
    Py_ssize_t *rw = (Py_ssize_t *)PyBytes_AS_STRING(rows), *ky = (Py_ssize_t *)PyBytes_AS_STRING(keys);
    long k0 = -2;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(refs, i);
        PyObject *m = SLOT(r, l_node), *res = SLOT(m, n_result), *row = SLOT(m, n_row);
        long k = PyLong_AsLong(SLOT(r, l_k));
        if (k == -1 && PyErr_Occurred()) goto error;
        k0 = k0 == -2 ? k : (k0 == k ? k0 : -1);
        PyList_SET_ITEM(nodes, i, Py_NewRef(m));
        PyList_SET_ITEM(results, i, Py_NewRef(res));
        if (row == Py_None) {
            rw[i] = -1;
        } else {
            rw[i] = PyLong_AsSsize_t(row);
            if (rw[i] == -1 && PyErr_Occurred()) goto error;
        }
        PyObject *src = res;
        if (PyTuple_CheckExact(res)) {
            if (k < 0 || k >= PyTuple_GET_SIZE(res)) {
                PyErr_SetString(PyExc_IndexError, "_autobatch.scan: output number out of range");
                goto error;
            }
            src = PyTuple_GET_ITEM(res, k);
        }
        ky[i] = (Py_ssize_t)(uintptr_t)src;
        ptrs[i] = (uintptr_t)r;
    }
    qsort(ptrs, n, sizeof(uintptr_t), cmp_ptr);
    int same = ptrs[0] == ptrs[n - 1], distinct = 1;
    for (Py_ssize_t i = 1; i < n && distinct; i++)
        if (ptrs[i] == ptrs[i - 1]) distinct = 0;
    PyObject *kk = PyLong_FromLong(k0 < 0 ? -1 : k0);
    if (kk == NULL) goto error;
    out = Py_BuildValue("(iOOOOO)", same ? 1 : distinct ? 2 : 0, nodes, kk, results, rows, keys);
    Py_DECREF(kk);
error:
    PyMem_Free(ptrs);
    Py_XDECREF(nodes);
    Py_XDECREF(results);
    Py_XDECREF(rows);
    Py_XDECREF(keys);
    Py_DECREF(refs);
    return out;
none:
    Py_DECREF(refs);
    Py_RETURN_NONE;
}


/* keep(nodes) -> the nodes still pending or with a live, unmaterialised output
   (interpreter._keep) */
static PyObject *keep(PyObject *self, PyObject *nodes) {
    if (list_arg(nodes, "nodes") < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        int k = 0;
        if (SLOT(node, n_result) == Py_None) {
            k = 1;
        } else {
            PyObject *refs = SLOT(node, n_refs);
            PyObject *seq = refs == NULL ? NULL : PySequence_Fast(refs, "refs");
            if (seq == NULL) goto error;
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq) && !k; j++) {
                PyObject *w = PySequence_Fast_GET_ITEM(seq, j);
                PyObject *t = PyWeakref_Check(w) ? PyWeakref_GET_OBJECT(w) : Py_None;
                if (t == Py_None || !PyObject_TypeCheck(t, TensorT)) continue;
                PyObject *d = SLOT(t, t_data);
                if (d != NULL && Py_TYPE(d) == LazyT && SLOT(d, l_node) == node) k = 1;
            }
            Py_DECREF(seq);
        }
        if (k && PyList_Append(out, node) < 0) goto error;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* late_depths(collectors, ep) -> {node: depth}: the walk of interpreter._collected over
   the collectors that are pending and marked ep (the same LIFO order) */
static PyObject *late_depths(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) {
        PyErr_SetString(PyExc_TypeError, "late_depths(collectors, ep)");
        return NULL;
    }
    PyObject *cs = a[0], *ep = a[1];
    if (list_arg(cs, "collectors") < 0) return NULL;
    PyObject *late = PyDict_New(), *stack = PyList_New(0);   /* (node, depth) pairs, flat */
    if (late == NULL || stack == NULL) goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cs); i++) {
        PyObject *c = PyList_GET_ITEM(cs, i);
        if (Py_TYPE(c) != PNodeT) {
            PyErr_SetString(PyExc_TypeError, "_autobatch.late_depths: not a PNode");
            goto error;
        }
        int same = PyObject_RichCompareBool(SLOT(c, n_mark), ep, Py_EQ);
        if (same < 0) goto error;
        if (!same || SLOT(c, n_result) != Py_None) continue;
        long cd = PyLong_AsLong(SLOT(c, n_depth));
        if (cd == -1 && PyErr_Occurred()) goto error;
        /* push (arg.node, c.depth - 1) for the Lazy args, in order */
        PyObject *args = SLOT(c, n_args);
        PyObject *seq = args == NULL ? NULL : PySequence_Fast(args, "args");
        if (seq == NULL) goto error;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq); j++) {
            PyObject *x = PySequence_Fast_GET_ITEM(seq, j);
            if (Py_TYPE(x) != LazyT) continue;
            PyObject *d = PyLong_FromLong(cd - 1);
            if (d == NULL || PyList_Append(stack, SLOT(x, l_node)) < 0 || PyList_Append(stack, d) < 0) {
                Py_XDECREF(d);
                Py_DECREF(seq);
                goto error;
            }
            Py_DECREF(d);
        }
        Py_DECREF(seq);
        while (PyList_GET_SIZE(stack)) {
            Py_ssize_t top = PyList_GET_SIZE(stack);
            PyObject *m = Py_NewRef(PyList_GET_ITEM(stack, top - 2));
            PyObject *d = Py_NewRef(PyList_GET_ITEM(stack, top - 1));
            if (PyList_SetSlice(stack, top - 2, top, NULL) < 0) {
                Py_DECREF(m);
                Py_DECREF(d);
                goto error;
            }
            PyObject *nu = SLOT(m, n_nuse);
            int one = nu != NULL && PyLong_CheckExact(nu) && PyLong_AsLong(nu) == 1;
            int mk = one ? PyObject_RichCompareBool(SLOT(m, n_mark), ep, Py_EQ) : 0;
            if (mk < 0) {
                Py_DECREF(m);
                Py_DECREF(d);
                goto error;
            }
            if (!one || !mk || SLOT(m, n_result) != Py_None) {
                Py_DECREF(m);
                Py_DECREF(d);
                continue;
            }
            long dd = PyLong_AsLong(d);
            int r = PyDict_SetItem(late, m, d);
            Py_DECREF(d);
            PyObject *margs = SLOT(m, n_args);
            PyObject *ms = (r < 0 || margs == NULL) ? NULL : PySequence_Fast(margs, "args");
            Py_DECREF(m);
            if (ms == NULL) goto error;
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(ms); j++) {
                PyObject *x = PySequence_Fast_GET_ITEM(ms, j);
                if (Py_TYPE(x) != LazyT) continue;
                PyObject *d2 = PyLong_FromLong(dd - 1);
                if (d2 == NULL || PyList_Append(stack, SLOT(x, l_node)) < 0 || PyList_Append(stack, d2) < 0) {
                    Py_XDECREF(d2);
                    Py_DECREF(ms);
                    goto error;
                }
                Py_DECREF(d2);
            }
            Py_DECREF(ms);
        }
    }
    Py_DECREF(stack);
    return late;
error:
    Py_XDECREF(late);
    Py_XDECREF(stack);
    return NULL;
}

/* plan(rows, keys, distinct) -> the sources of a gather from several source arrays, in
   order of first appearance: per source (p0, rows, pos, unique) -- p0 its first member,
   rows (bytes of intp) the rows it gives or None (the source is one member's own value),
   pos (start, stop) when its members are contiguous, else bytes of intp, unique: no row
   is taken twice (distinct, or checked).  rows/keys as scan() returns them.  The Python
   reference is the several-sources branch of Autobatcher._plan. */
static int cmp_ssize(const void *x, const void *y) {
    Py_ssize_t a = *(const Py_ssize_t *)x, b = *(const Py_ssize_t *)y;
    return a < b ? -1 : a > b;
}

static PyObject *plan(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3 || !PyBytes_Check(a[0]) || !PyBytes_Check(a[1]) ||
        PyBytes_GET_SIZE(a[0]) != PyBytes_GET_SIZE(a[1]) || PyBytes_GET_SIZE(a[0]) % sizeof(Py_ssize_t)) {
        PyErr_SetString(PyExc_TypeError, "plan(rows: bytes, keys: bytes, distinct)");
        return NULL;
    }
    int distinct = PyObject_IsTrue(a[2]);
    if (distinct < 0) return NULL;
    const Py_ssize_t *rows = (const Py_ssize_t *)PyBytes_AS_STRING(a[0]);
    const Py_ssize_t *keys = (const Py_ssize_t *)PyBytes_AS_STRING(a[1]);
    Py_ssize_t B = PyBytes_GET_SIZE(a[0]) / sizeof(Py_ssize_t);
    Py_ssize_t *src = PyMem_Malloc((B + 1) * sizeof(Py_ssize_t));   /* member -> source */
    Py_ssize_t *skey = PyMem_Malloc((B + 1) * sizeof(Py_ssize_t));  /* source -> key */
    Py_ssize_t *cnt = PyMem_Calloc(B + 1, sizeof(Py_ssize_t));
    Py_ssize_t *buf = PyMem_Malloc((B + 1) * sizeof(Py_ssize_t));
    PyObject *out = NULL;
    if (src == NULL || skey == NULL || cnt == NULL || buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t S = 0, last = -1;
    for (Py_ssize_t i = 0; i < B; i++) {
        Py_ssize_t s = -1;
        if (last >= 0 && skey[last] == keys[i]) {
            s = last;
        } else {
            for (Py_ssize_t j = 0; j < S; j++)
                if (skey[j] == keys[i]) {
                    s = j;
                    break;
                }
            if (s < 0) {
                s = S++;
                skey[s] = keys[i];
            }
        }
        src[i] = s;
        cnt[s]++;
        last = s;
    }
    out = PyList_New(S);
    if (out == NULL) goto done;
    for (Py_ssize_t s = 0; s < S; s++) {
        /* this source's members, in increasing position */
        Py_ssize_t m = 0, p0 = -1;
        for (Py_ssize_t i = 0; i < B; i++)
            if (src[i] == s) {
                if (p0 < 0) p0 = i;
                buf[m++] = i;
            }
        PyObject *pos;
        if (buf[m - 1] - buf[0] == m - 1) {
            pos = Py_BuildValue("(nn)", buf[0], buf[0] + m);
        } else {
            pos = PyBytes_FromStringAndSize((const char *)buf, m * (Py_ssize_t)sizeof(Py_ssize_t));
        }
        if (pos == NULL) goto fail;
        PyObject *rw;
        int uniq = 1;
        if (rows[p0] < 0) {
            rw = Py_NewRef(Py_None);
        } else {
            rw = PyBytes_FromStringAndSize(NULL, m * (Py_ssize_t)sizeof(Py_ssize_t));
            if (rw == NULL) {
                Py_DECREF(pos);
                goto fail;
            }
            Py_ssize_t *r = (Py_ssize_t *)PyBytes_AS_STRING(rw);
            for (Py_ssize_t k = 0; k < m; k++) r[k] = rows[buf[k]];
            if (!distinct && m > 1) {
                /* buf is free again: a sorted copy of the rows */
                for (Py_ssize_t k = 0; k < m; k++) buf[k] = r[k];
                qsort(buf, m, sizeof(Py_ssize_t), cmp_ssize);
                for (Py_ssize_t k = 1; k < m && uniq; k++)
                    if (buf[k] == buf[k - 1]) uniq = 0;
            }
        }
        PyObject *t = Py_BuildValue("(nNNO)", p0, rw, pos, uniq ? Py_True : Py_False);
        if (t == NULL) goto fail;
        PyList_SET_ITEM(out, s, t);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(src);
    PyMem_Free(skey);
    PyMem_Free(cnt);
    PyMem_Free(buf);
    return out;
}

/* fill(out, sources, rows, pos) -> True when done: out[pos[s]] = sources[s][rows[s]] for
   each source (rows[s] None: the source is one row, put at every position), by row copies;
   False (nothing written) when some array is not a C-contiguous buffer of out's format or
   an index is out of range -- ops/_batching.gather_p then runs its NumPy code. */
static int intp_view(PyObject *o, Py_buffer *v) {
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (v->itemsize != sizeof(Py_ssize_t) || v->ndim != 1 || v->format == NULL ||
        strchr("lqn", v->format[strlen(v->format) - 1]) == NULL) {
        PyBuffer_Release(v);
        return 0;
    }
    return 1;
}

/* The member positions p of a plan entry: a slice (*start, *step, *n of them) or an intp
 * array, then viewed in *pv (*have_pv set, *idx its elements, *n its length).  0, nothing held,
 * where p is neither. */
static int plan_positions(PyObject *p, Py_ssize_t B, Py_ssize_t *start, Py_ssize_t *step,
                          Py_ssize_t *n, const Py_ssize_t **idx, Py_buffer *pv, int *have_pv) {
    if (PySlice_Check(p)) {
        Py_ssize_t stop;
        if (PySlice_Unpack(p, start, &stop, step) < 0) {
            PyErr_Clear();
            return 0;
        }
        *n = PySlice_AdjustIndices(B, start, &stop, *step);
        return 1;
    }
    *have_pv = intp_view(p, pv);
    if (!*have_pv)
        return 0;
    *idx = pv->buf;
    *n = pv->shape[0];
    return 1;
}

static PyObject *fill(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 4) {
        PyErr_SetString(PyExc_TypeError, "fill(out, sources, rows, pos)");
        return NULL;
    }
    PyObject *srcs = a[1], *rows = a[2], *poss = a[3];
    if (!PyTuple_Check(srcs) || !PyTuple_Check(rows) || !PyTuple_Check(poss) ||
        PyTuple_GET_SIZE(srcs) != PyTuple_GET_SIZE(rows) || PyTuple_GET_SIZE(srcs) != PyTuple_GET_SIZE(poss))
        Py_RETURN_FALSE;
    Py_buffer ov;
    if (PyObject_GetBuffer(a[0], &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int ok = ov.ndim >= 1 && ov.shape[0] > 0 && ov.format != NULL;
    Py_ssize_t B = ok ? ov.shape[0] : 0, rb = ok ? ov.len / B : 0;
    Py_ssize_t S = PyTuple_GET_SIZE(srcs);
    /* two passes: check everything, then copy (nothing is written unless all is valid) */
    for (int pass = 0; pass < 2 && ok; pass++) {
        for (Py_ssize_t s = 0; s < S && ok; s++) {
            Py_buffer sv, rv, pv;
            int have_r = 0, have_p = 0;
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(srcs, s), &sv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            ok = sv.format != NULL && strcmp(sv.format, ov.format) == 0 && sv.itemsize == ov.itemsize;
            PyObject *r = PyTuple_GET_ITEM(rows, s), *p = PyTuple_GET_ITEM(poss, s);
            Py_ssize_t start = 0, step = 1, np_ = 0;
            const Py_ssize_t *pidx = NULL, *ridx = NULL;
            if (ok)
                ok = plan_positions(p, B, &start, &step, &np_, &pidx, &pv, &have_p);
            Py_ssize_t nsrc = 0;
            if (ok && r == Py_None) {
                ok = sv.len == rb;
            } else if (ok) {
                have_r = intp_view(r, &rv);
                ok = have_r && rv.shape[0] == np_ && rb > 0 && sv.len % rb == 0;
                if (ok) {
                    ridx = rv.buf;
                    nsrc = sv.len / rb;
                }
            }
            for (Py_ssize_t k = 0; k < np_ && ok; k++) {
                Py_ssize_t q = pidx ? pidx[k] : start + k * step;
                if (q < 0 || q >= B) {
                    ok = 0;
                    break;
                }
                const char *from = (const char *)sv.buf;
                if (ridx) {
                    Py_ssize_t row = ridx[k];
                    if (row < 0 || row >= nsrc) {
                        ok = 0;
                        break;
                    }
                    from += row * rb;
                }
                if (pass == 1) memcpy((char *)ov.buf + q * rb, from, rb);
            }
            if (have_r) PyBuffer_Release(&rv);
            if (have_p) PyBuffer_Release(&pv);
            PyBuffer_Release(&sv);
        }
    }
    PyBuffer_Release(&ov);
    if (ok) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* scatter(g, outs, rows, pos, uniq) -> True when, for every source s with rows[s] not None,
   outs[s][rows[s][k]] = g[pos[s][k]] (uniq[s]) or += (float32/float64 only) was done, in k
   order: ops/_batching._gather_backward_all's loop (the adjoint of fill).  False, with
   nothing written, when anything is not as expected (the NumPy loop then runs). */
static PyObject *scatter(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 5) {
        PyErr_SetString(PyExc_TypeError, "scatter(g, outs, rows, pos, uniq)");
        return NULL;
    }
    PyObject *outs = a[1], *rows = a[2], *poss = a[3], *uniq = a[4];
    if (!PyList_Check(outs) || !PyTuple_Check(rows) || !PyTuple_Check(poss) || !PyTuple_Check(uniq))
        Py_RETURN_FALSE;
    Py_ssize_t S = PyList_GET_SIZE(outs);
    if (PyTuple_GET_SIZE(rows) != S || PyTuple_GET_SIZE(poss) != S || PyTuple_GET_SIZE(uniq) != S)
        Py_RETURN_FALSE;
    Py_buffer gv;
    if (PyObject_GetBuffer(a[0], &gv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int ok = gv.ndim >= 1 && gv.shape[0] > 0 && gv.format != NULL;
    Py_ssize_t B = ok ? gv.shape[0] : 0, rb = ok ? gv.len / B : 0;
    int kind = 0;   /* 1 float32, 2 float64 (for sums) */
    if (ok && gv.itemsize == 4 && strcmp(gv.format, "f") == 0) kind = 1;
    if (ok && gv.itemsize == 8 && strcmp(gv.format, "d") == 0) kind = 2;
    Py_ssize_t width = ok && gv.itemsize ? rb / gv.itemsize : 0;
    for (int pass = 0; pass < 2 && ok; pass++) {
        for (Py_ssize_t s = 0; s < S && ok; s++) {
            PyObject *r = PyTuple_GET_ITEM(rows, s), *p = PyTuple_GET_ITEM(poss, s);
            if (r == Py_None) continue;        /* a member's own value: summed in Python */
            int u = PyObject_IsTrue(PyTuple_GET_ITEM(uniq, s));
            if (u < 0) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            if (!u && kind == 0) {
                ok = 0;
                break;
            }
            Py_buffer zv, rv, pv;
            int have_p = 0;
            if (PyObject_GetBuffer(PyList_GET_ITEM(outs, s), &zv,
                                   PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            ok = zv.format != NULL && strcmp(zv.format, gv.format) == 0 && zv.itemsize == gv.itemsize &&
                 rb > 0 && zv.len % rb == 0;
            Py_ssize_t nz = ok ? zv.len / rb : 0;
            Py_ssize_t start = 0, step = 1, np_ = 0;
            const Py_ssize_t *pidx = NULL, *ridx = NULL;
            if (ok)
                ok = plan_positions(p, B, &start, &step, &np_, &pidx, &pv, &have_p);
            int have_r = ok ? intp_view(r, &rv) : 0;
            ok = ok && have_r && rv.shape[0] == np_;
            if (ok) ridx = rv.buf;
            for (Py_ssize_t k = 0; k < np_ && ok; k++) {
                Py_ssize_t q = pidx ? pidx[k] : start + k * step, row = ridx[k];
                if (q < 0 || q >= B || row < 0 || row >= nz) {
                    ok = 0;
                    break;
                }
                if (pass == 0) continue;
                char *to = (char *)zv.buf + row * rb;
                const char *from = (const char *)gv.buf + q * rb;
                if (u) {
                    memcpy(to, from, rb);
                } else if (kind == 1) {
                    float *t = (float *)to;
                    const float *f = (const float *)from;
                    for (Py_ssize_t e = 0; e < width; e++) t[e] = t[e] + f[e];
                } else {
                    double *t = (double *)to;
                    const double *f = (const double *)from;
                    for (Py_ssize_t e = 0; e < width; e++) t[e] = t[e] + f[e];
                }
            }
            if (have_r) PyBuffer_Release(&rv);
            if (have_p) PyBuffer_Release(&pv);
            PyBuffer_Release(&zv);
        }
    }
    PyBuffer_Release(&gv);
    if (ok) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* pending(nodes, rm, ep) -> (todo, roots) or None: Autobatcher._all_feed's pass -- the
   pending nodes in order, each marked ep, and how many of them were marked rm (a root);
   None as soon as a pending node with no consumer is not a root (the caller walks). */
static PyObject *pending(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) {
        PyErr_SetString(PyExc_TypeError, "pending(nodes, rm, ep)");
        return NULL;
    }
    PyObject *nodes = a[0], *ep = a[2];
    if (list_arg(nodes, "nodes") < 0) return NULL;
    long rm = PyLong_AsLong(a[1]);
    if (rm == -1 && PyErr_Occurred()) return NULL;
    PyObject *todo = PyList_New(0);
    if (todo == NULL) return NULL;
    Py_ssize_t roots = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *n = PyList_GET_ITEM(nodes, i);
        if (Py_TYPE(n) != PNodeT) {
            PyErr_SetString(PyExc_TypeError, "_autobatch.pending: not a PNode");
            goto error;
        }
        if (SLOT(n, n_result) != Py_None) continue;
        long m = PyLong_AsLong(SLOT(n, n_mark));
        if (m == -1 && PyErr_Occurred()) goto error;
        if (m == rm) {
            roots++;
        } else {
            PyObject *nu = SLOT(n, n_nuse);
            long c = PyLong_AsLong(nu);
            if (c == -1 && PyErr_Occurred()) goto error;
            if (c == 0) {
                Py_DECREF(todo);
                Py_RETURN_NONE;
            }
        }
        set_slot(n, n_mark, ep);
        if (PyList_Append(todo, n) < 0) goto error;
    }
    PyObject *r = Py_BuildValue("(Nn)", todo, roots);
    return r;
error:
    Py_DECREF(todo);
    return NULL;
}


/* users(group) -> bytes of int64: every member's last recorded consumer (n.user) */
static PyObject *users(PyObject *self, PyObject *group) {
    if (list_arg(group, "group") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) return NULL;
    int64_t *u = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(group, i);
        PyObject *v = Py_TYPE(node) == PNodeT ? SLOT(node, n_user) : NULL;
        long long x = v == NULL ? -1 : PyLong_AsLongLong(v);
        if (v == NULL || (x == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_autobatch.users: not a PNode");
            Py_DECREF(out);
            return NULL;
        }
        u[i] = (int64_t)x;
    }
    return out;
}

/* assign_pieces(group, pieces, piece_of, rows): member i's result = pieces[piece_of[i]],
   its row = rows[i] (Autobatcher._split, after cutting a group by reader) */
static PyObject *assign_pieces(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 4) {
        PyErr_SetString(PyExc_TypeError, "assign_pieces(group, pieces, piece_of, rows)");
        return NULL;
    }
    PyObject *group = a[0], *pieces = a[1], *of = a[2], *rows = a[3];
    if (list_arg(group, "group") < 0 || list_arg(pieces, "pieces") < 0 || list_arg(of, "piece_of") < 0 ||
        list_arg(rows, "rows") < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group), np_ = PyList_GET_SIZE(pieces);
    if (PyList_GET_SIZE(of) != n || PyList_GET_SIZE(rows) != n) {
        PyErr_SetString(PyExc_ValueError, "_autobatch.assign_pieces: lengths differ");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(group, i);
        Py_ssize_t p = PyLong_AsSsize_t(PyList_GET_ITEM(of, i));
        if (p == -1 && PyErr_Occurred()) return NULL;
        if (Py_TYPE(node) != PNodeT || p < 0 || p >= np_) {
            PyErr_SetString(PyExc_ValueError, "_autobatch.assign_pieces: not a PNode, or no such piece");
            return NULL;
        }
        set_slot(node, n_result, PyList_GET_ITEM(pieces, p));
        set_slot(node, n_row, PyList_GET_ITEM(rows, i));
    }
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------
 * Cell: the callable dg.autobatch.cell returns (cells.cell).  A call with positional
 * arguments under an installed Autobatcher is recorded by record_cell without a Python
 * frame; every other call -- keyword arguments, no interpreter, another interpreter, a
 * template not cached yet, the Python reference switched on (use_native(False)) -- goes to
 * `slow`, the Python wrapper cells.cell builds (which does exactly what it did alone).
 * Attributes (functools.update_wrapper's, __autobatch_cell__) live in its __dict__; as a
 * class attribute it binds like a function.
 * ------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *slow;     /* the Python wrapper */
    PyObject *cache;    /* the template cache (a dict), shared with the Python wrapper */
    PyObject *dict;
    PyObject *weakrefs;
    vectorcallfunc vectorcall;
} CellObject;

static int CellNative = 1;             /* set_cell_native(): interpreter.use_native */
static PyObject *s_interpreter = NULL;

static PyObject *cell_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    CellObject *c = (CellObject *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (CellNative && READY && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        PyObject *ld = state_dict();
        PyObject *interp = state_get(ld, s_interpreter);
        if (interp == NULL) return NULL;
        if (Py_TYPE(interp) == AutobatcherT) {
            PyObject *tup = PyTuple_New(n);
            if (tup == NULL) {
                Py_DECREF(interp);
                return NULL;
            }
            for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
            PyObject *out = record_cell_impl(interp, c->cache, tup, ld);
            Py_DECREF(tup);
            Py_DECREF(interp);
            if (out != Py_None) return out;      /* the outputs, or NULL (an error) */
            Py_DECREF(out);
        } else {
            Py_DECREF(interp);
        }
    }
    return PyObject_Vectorcall(c->slow, args, nargsf, kwnames);
}

static PyObject *cell_new(PyTypeObject *type, PyObject *a, PyObject *kw) {
    PyObject *slow, *cache;
    if (kw != NULL && PyDict_GET_SIZE(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "Cell(slow, cache)");
        return NULL;
    }
    if (!PyArg_ParseTuple(a, "OO!", &slow, &PyDict_Type, &cache)) return NULL;
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "Cell: slow must be callable");
        return NULL;
    }
    CellObject *c = (CellObject *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    c->slow = Py_NewRef(slow);
    c->cache = Py_NewRef(cache);
    c->vectorcall = cell_vectorcall;
    return (PyObject *)c;
}

static int cell_traverse(PyObject *self, visitproc visit, void *arg) {
    CellObject *c = (CellObject *)self;
    Py_VISIT(c->slow);
    Py_VISIT(c->cache);
    Py_VISIT(c->dict);
    return 0;
}

static int cell_clear(PyObject *self) {
    CellObject *c = (CellObject *)self;
    Py_CLEAR(c->slow);
    Py_CLEAR(c->cache);
    Py_CLEAR(c->dict);
    return 0;
}

static void cell_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    if (((CellObject *)self)->weakrefs != NULL) PyObject_ClearWeakRefs(self);
    cell_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *cell_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *cell_self(PyObject *self, PyObject *unused) { return Py_NewRef(self); }

static PyObject *cell_reduce(PyObject *self, PyObject *unused) {
    PyErr_SetString(PyExc_TypeError, "cannot pickle a dg.autobatch.cell function");
    return NULL;
}

static PyObject *cell_repr(PyObject *self) {
    PyObject *w = NULL;
    CellObject *c = (CellObject *)self;
    if (c->dict != NULL) w = PyDict_GetItemString(c->dict, "__wrapped__");   /* borrowed */
    if (w != NULL) return PyUnicode_FromFormat("<dg.autobatch.cell %R>", w);
    return PyUnicode_FromString("<dg.autobatch.cell>");
}

static PyMethodDef cell_methods[] = {
    {"__copy__", cell_self, METH_NOARGS, "A cell is shared by copies, like a function."},
    {"__deepcopy__", cell_self, METH_O, "A cell is shared by deep copies, like a function."},
    {"__reduce__", cell_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef cell_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject CellType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dyngraph._autobatch.Cell",
    .tp_basicsize = sizeof(CellObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "dg.autobatch.cell's callable: records a cached template's call in C.",
    .tp_new = cell_new,
    .tp_dealloc = cell_dealloc,
    .tp_traverse = cell_traverse,
    .tp_clear = cell_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CellObject, vectorcall),
    .tp_descr_get = cell_get,
    .tp_dictoffset = offsetof(CellObject, dict),
    .tp_weaklistoffset = offsetof(CellObject, weakrefs),
    .tp_methods = cell_methods,
    .tp_getset = cell_getset,
    .tp_repr = cell_repr,
};

static PyObject *set_cell_native(PyObject *self, PyObject *on) {
    int r = PyObject_IsTrue(on);
    if (r < 0) return NULL;
    CellNative = r;
    Py_RETURN_NONE;
}

static PyMethodDef process_def = {"process", (PyCFunction)(void (*)(void))process, METH_FASTCALL,
                                  "Autobatcher.process in C (see dyngraph/_autobatch.c)."};

/* process_method(): Autobatcher.process as a method descriptor of the Autobatcher class */
static PyObject *process_method(PyObject *self, PyObject *noargs) {
    if (!READY) {
        PyErr_SetString(PyExc_RuntimeError, "_autobatch: setup() first");
        return NULL;
    }
    return PyDescr_NewMethod(AutobatcherT, &process_def);
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Record the classes and objects the fast paths use."},
    {"process_method", process_method, METH_NOARGS,
     "Autobatcher.process in C, as a method descriptor of the Autobatcher class."},
    {"record_cell", (PyCFunction)(void (*)(void))record_cell, METH_FASTCALL,
     "record_cell(interp, cache, args): a cell call's pending outputs, or None (Python path)."},
    {"group_by", (PyCFunction)(void (*)(void))group_by, METH_FASTCALL,
     "group_by(todo, late) -> (groups, keys): _execute's grouping by (depth, signature)."},
    {"assign", (PyCFunction)(void (*)(void))assign, METH_FASTCALL,
     "assign(group, out, rows): every member's result (and row = position when rows)."},
    {"release", release, METH_O, "release(group) -> members with instance attributes; args dropped."},
    {"stale", stale, METH_O, "stale(group) -> first member whose inputs were written in place, or None."},
    {"columns", (PyCFunction)(void (*)(void))columns, METH_FASTCALL,
     "columns(group, width) -> per argument position, every member's argument."},
    {"scan", scan, METH_O, "scan(refs) -> None or (distinct, nodes, k, results, rows, keys)."},
    {"pending", (PyCFunction)(void (*)(void))pending, METH_FASTCALL,
     "pending(nodes, rm, ep) -> (todo, roots) or None (Autobatcher._all_feed's pass)."},
    {"users", users, METH_O, "users(group) -> bytes of int64: each member's last consumer."},
    {"assign_pieces", (PyCFunction)(void (*)(void))assign_pieces, METH_FASTCALL,
     "assign_pieces(group, pieces, piece_of, rows): results and rows after a split."},
    {"keep", keep, METH_O, "keep(nodes) -> the nodes still pending or with a live pending output."},
    {"late_depths", (PyCFunction)(void (*)(void))late_depths, METH_FASTCALL,
     "late_depths(collectors, ep) -> {node: depth} (interpreter._collected's walk)."},
    {"plan", (PyCFunction)(void (*)(void))plan, METH_FASTCALL,
     "plan(rows, keys, distinct) -> per source (p0, rows, pos, unique), first appearance first."},
    {"set_cell_native", set_cell_native, METH_O,
     "set_cell_native(on): Cell objects record through record_cell (True) or call their Python wrapper."},
    {"scatter", (PyCFunction)(void (*)(void))scatter, METH_FASTCALL,
     "scatter(g, outs, rows, pos, uniq) -> True when outs[s][rows[s]] (+)= g[pos[s]] was done."},
    {"fill", (PyCFunction)(void (*)(void))fill, METH_FASTCALL,
     "fill(out, sources, rows, pos) -> True when out[pos[s]] = sources[s][rows[s]] was done."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_autobatch",
                                    "dg.autobatch's recording hot paths in C (optional).", -1, methods};

PyMODINIT_FUNC PyInit__autobatch(void) {
    s_grad_enabled = PyUnicode_InternFromString("grad_enabled");
    s_anomaly = PyUnicode_InternFromString("anomaly");
    s_seq = PyUnicode_InternFromString("seq");
    s_nodes = PyUnicode_InternFromString("nodes");
    s_stats = PyUnicode_InternFromString("stats");
    s_tracing = PyUnicode_InternFromString("tracing");
    s_shapes = PyUnicode_InternFromString("shapes");
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_cells = PyUnicode_InternFromString("cells");
    s_nodes_stat = PyUnicode_InternFromString("nodes");
    s_collectors = PyUnicode_InternFromString("collectors");
    s_arenas = PyUnicode_InternFromString("arenas");
    s_arenas_for = PyUnicode_InternFromString("_arenas_for");
    s_grow = PyUnicode_InternFromString("grow");
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    MINUS1 = PyLong_FromLong(-1);
    if (!ZERO || !ONE || !MINUS1) return NULL;
    if (!s_grad_enabled || !s_anomaly || !s_seq || !s_nodes || !s_stats || !s_tracing || !s_shapes ||
        !s_shape || !s_dtype || !s_cells || !s_nodes_stat || !s_collectors || !s_arenas ||
        !s_arenas_for || !s_grow)
        return NULL;
    s_interpreter = PyUnicode_InternFromString("interpreter");
    s_dict = PyUnicode_InternFromString("__dict__");
    if (s_interpreter == NULL || s_dict == NULL || PyType_Ready(&CellType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Cell", (PyObject *)&CellType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
