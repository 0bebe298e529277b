/*
 * dyngraph._speedups: the eager dispatch hot path (bind) in C.
 *
 * This is an accelerator, not a second implementation of the semantics: it
 * handles only the common case -- no interpreter installed, no anomaly mode,
 * Tensor / Python-number / None inputs (at most BIND_MAX_ARGS) whose dtype promotion
 * is a no-op, one output or a tuple of arrays; views share their input's version
 * counter (mark_view) -- and hands every
 * other call to the Python implementation (dyngraph/_core/registry.py:_bind_py),
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
static PyObject *Finish = NULL;         /* registry._finish: the tail of bind after the forward */
static PyObject *MarkView = NULL;       /* registry._mark_view: views the fast checks cannot decide */
/* the class of ml_dtypes' bfloat16 dtype (both byte orders); NULL when ml_dtypes is missing.
   Comparing the dtype's class is one pointer test per input instead of reading dtype.kind. */
static PyTypeObject *Bf16DTypeType = NULL;
static PyObject *ZERO = NULL, *ONE = NULL;

/* every slot of Tensor and Node (read from __slots__ at set-up): new objects start with
   all of them None, so a slot added in Python needs no change here */
#define MAX_SLOTS 32
static Py_ssize_t tensor_slots[MAX_SLOTS], node_slots[MAX_SLOTS];
static int n_tensor_slots = 0, n_node_slots = 0;

/* slot offsets of the slots this file reads or writes by name */
static Py_ssize_t t_data, t_rg, t_fn, t_nr, t_grad, t_vc, t_base, t_hooks;
static Py_ssize_t n_prim, n_params, n_edges, n_saved, n_saved_data, n_saved_versions, n_out,
    n_in_meta, n_n_out;
static Py_ssize_t p_impl, p_promote, p_promote_from, p_broadcasts, p_n_outputs, p_is_view,
    p_differentiable, p_nondiff, p_save_inputs, p_save_output, p_meta, p_vjp_rules, p_save_for,
    p_vjp_argnum;
static PyTypeObject *PrimitiveType = NULL;

static PyObject *s_special, *s_interpreter, *s_grad_enabled, *s_anomaly, *s_dtype, *s_kind, *s_shape,
    *s_out_vc, *s_same, *s_float, *s_f, *s_base, *s_out_meta, *s_flags, *s_writeable, *s_owndata;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
/* truthiness with a fast path for the bools the Python code normally stores */
#define TRUTHY(o) ((o) == Py_True || ((o) != Py_False && (o) != Py_None && PyObject_IsTrue(o) == 1))

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

/* offsets of all named slots of cls (its own __slots__; __dict__/__weakref__ skipped) */
static int all_slots(PyObject *cls, Py_ssize_t *table, int *count) {
    PyObject *names = PyObject_GetAttrString(cls, "__slots__");
    if (names == NULL) return -1;
    PyObject *seq = PySequence_Fast(names, "__slots__ must be a sequence");
    Py_DECREF(names);
    if (seq == NULL) return -1;
    int k = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *nm = PySequence_Fast_GET_ITEM(seq, i);
        const char *s = PyUnicode_AsUTF8(nm);
        if (s == NULL) goto fail;
        if (strcmp(s, "__dict__") == 0 || strcmp(s, "__weakref__") == 0) continue;
        if (k >= MAX_SLOTS) {
            PyErr_SetString(PyExc_RuntimeError, "_speedups: too many slots");
            goto fail;
        }
        if (slot_offset(cls, s, &table[k]) < 0) goto fail;
        k++;
    }
    Py_DECREF(seq);
    *count = k;
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* a new instance of a slotted class with every slot None */
static PyObject *alloc_none(PyTypeObject *type, const Py_ssize_t *table, int count) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) return NULL;
    for (int i = 0; i < count; i++) *(PyObject **)((char *)obj + table[i]) = Py_NewRef(Py_None);
    return obj;
}

static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    Py_INCREF(value);
    *p = value;
    Py_XDECREF(old);
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *tensor, *node, *array, *state, *slow, *operr, *prim, *meta, *asarray, *finish, *markview;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO", &tensor, &node, &array, &state, &slow, &operr, &prim,
                          &meta, &asarray, &finish, &markview))
        return NULL;
    if (all_slots(tensor, tensor_slots, &n_tensor_slots) < 0) return NULL;
    if (all_slots(node, node_slots, &n_node_slots) < 0) return NULL;
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
                        "differentiable", "nondiff_argnums", "save_inputs", "save_output", "meta",
                        "vjp_rules", "save_for", "vjp_argnum"};
    Py_ssize_t *po[] = {&p_impl, &p_promote, &p_promote_from, &p_broadcasts, &p_n_outputs,
                        &p_is_view, &p_differentiable, &p_nondiff, &p_save_inputs,
                        &p_save_output, &p_meta, &p_vjp_rules, &p_save_for, &p_vjp_argnum};
    for (int i = 0; i < 14; i++)
        if (slot_offset(prim, pn[i], po[i]) < 0) return NULL;
    Py_XSETREF(PrimitiveType, (PyTypeObject *)Py_NewRef(prim));
    Py_XSETREF(TensorType, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(NodeType, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(ArrayType, (PyTypeObject *)Py_NewRef(array));
    Py_XSETREF(State, Py_NewRef(state));
    Py_XSETREF(SlowBind, Py_NewRef(slow));
    Py_XSETREF(OpError, Py_NewRef(operr));
    Py_XSETREF(MetaType, Py_NewRef(meta));
    Py_XSETREF(AsArray, Py_NewRef(asarray));
    Py_XSETREF(Finish, Py_NewRef(finish));
    Py_XSETREF(MarkView, Py_NewRef(markview));
    /* np.dtype(ml_dtypes.bfloat16)'s class; bfloat16 inputs defer to registry._run_bf16 */
    PyObject *np = PyImport_ImportModule("numpy");
    PyObject *ml = np ? PyImport_ImportModule("ml_dtypes") : NULL;
    PyObject *bf = ml ? PyObject_GetAttrString(ml, "bfloat16") : NULL;
    PyObject *bfdt = bf ? PyObject_CallMethod(np, "dtype", "O", bf) : NULL;
    if (bfdt != NULL) {
        Py_XSETREF(Bf16DTypeType, (PyTypeObject *)Py_NewRef(Py_TYPE(bfdt)));
    } else {
        PyErr_Clear();
        Py_CLEAR(Bf16DTypeType);
    }
    Py_XDECREF(bfdt);
    Py_XDECREF(bf);
    Py_XDECREF(ml);
    Py_XDECREF(np);
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
    PyObject *t = alloc_none(TensorType, tensor_slots, n_tensor_slots);
    if (t == NULL) return NULL;
    set_slot(t, t_data, data);
    set_slot(t, t_rg, rg ? Py_True : Py_False);
    if (fn) set_slot(t, t_fn, fn);
    set_slot(t, t_nr, ZERO);
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

/* at most this many inputs take the C path (cat/stack of more go through Python) */
#define BIND_MAX_ARGS 64

/* registry._mark_view: output tensor t of a view primitive shares the version counter of
   input `base` (a Tensor) when its array is a view of base's.  Decided here without
   np.may_share_memory for the usual cases (the same logic as the Python reference), and by
   the Python function for the rest. */
static int mark_view(PyObject *t, PyObject *base) {
    if (!PyObject_TypeCheck(base, TensorType)) return 0;
    PyObject *d = SLOT(t, t_data), *bd = SLOT(base, t_data);
    int share;
    if (d == bd) {
        share = 1;
    } else {
        PyObject *ob = PyObject_GetAttr(d, s_base);
        if (ob == NULL) return -1;
        if (ob == Py_None && Py_TYPE(d) == ArrayType) {
            share = 0; /* a fresh array that owns its memory */
        } else if (ob == bd) {
            share = 1;
        } else {
            PyObject *bb = PyObject_GetAttr(bd, s_base);
            if (bb == NULL) {
                Py_DECREF(ob);
                return -1;
            }
            share = (bb != Py_None && bb == ob) ? 1 : -1;
            Py_DECREF(bb);
        }
        Py_DECREF(ob);
    }
    if (share < 0) {
        PyObject *r = PyObject_CallFunctionObjArgs(MarkView, t, base, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    if (share) {
        PyObject *root = SLOT(base, t_base) != Py_None ? SLOT(base, t_base) : base;
        if (SLOT(root, t_vc) == Py_None) {
            PyObject *cell = PyList_New(1);
            if (cell == NULL) return -1;
            PyList_SET_ITEM(cell, 0, Py_NewRef(ZERO));
            set_slot(root, t_vc, cell);
            Py_DECREF(cell);
        }
        set_slot(t, t_base, root);
        set_slot(t, t_vc, SLOT(root, t_vc));
    }
    return 0;
}

/* the graph node of one call (registry.record up to in_meta): edges, params, saved inputs
   and their versions; new reference */
static PyObject *make_node(PyObject *prim, PyObject *args, PyObject *params, PyObject **datas,
                           Py_ssize_t n) {
    PyObject *node = alloc_none(NodeType, node_slots, n_node_slots);
    PyObject *edges = PyList_New(n);
    if (node == NULL || edges == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *e;
        if (PyObject_TypeCheck(a, TensorType) && TRUTHY(SLOT(a, t_rg))) {
            PyObject *fn = SLOT(a, t_fn);
            if (fn == Py_None)
                e = PyTuple_Pack(2, a, ZERO);
            else
                e = PyTuple_Pack(2, fn, SLOT(a, t_nr));
            if (e == NULL) goto fail;
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
    if (PyObject_IsTrue(SLOT(prim, p_save_inputs))) {
        /* save_for: keep only the inputs that the rules of the differentiable inputs read */
        char keep[BIND_MAX_ARGS];
        PyObject *save_for = SLOT(prim, p_save_for);
        PyObject *edl = SLOT(node, n_edges);
        for (Py_ssize_t i = 0; i < n; i++) keep[i] = save_for == Py_None;
        if (save_for != Py_None) {
            for (Py_ssize_t i = 0; i < n && i < PyTuple_GET_SIZE(save_for); i++) {
                if (PyList_GET_ITEM(edl, i) == Py_None) continue;
                PyObject *need_i = PyTuple_GET_ITEM(save_for, i);
                for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(need_i); k++) {
                    Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(need_i, k));
                    if (j >= 0 && j < n) keep[j] = 1;
                }
            }
        }
        int keep_all = 1;
        for (Py_ssize_t i = 0; i < n; i++) keep_all &= keep[i];
        PyObject *saved_args = args;
        if (!keep_all) {
            saved_args = PyTuple_New(n);
            if (saved_args == NULL) goto fail;
            for (Py_ssize_t i = 0; i < n; i++)
                PyTuple_SET_ITEM(saved_args, i, Py_NewRef(keep[i] ? PyTuple_GET_ITEM(args, i) : Py_None));
        } else {
            Py_INCREF(saved_args);
        }
        PyObject *dl = PyList_New(n), *vl = PyList_New(n);
        if (dl == NULL || vl == NULL) {
            Py_XDECREF(dl);
            Py_XDECREF(vl);
            Py_DECREF(saved_args);
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = PyTuple_GET_ITEM(saved_args, i);
            PyList_SET_ITEM(dl, i, Py_NewRef(keep[i] ? datas[i] : Py_None));
            PyObject *v;
            if (PyObject_TypeCheck(a, TensorType)) {
                PyObject *vc = SLOT(a, t_vc);
                v = vc == Py_None ? Py_NewRef(ZERO) : PySequence_GetItem(vc, 0);
                if (v == NULL) {
                    Py_DECREF(dl);
                    Py_DECREF(vl);
                    Py_DECREF(saved_args);
                    goto fail;
                }
            } else {
                v = Py_NewRef(Py_None);
            }
            PyList_SET_ITEM(vl, i, v);
        }
        set_slot(node, n_saved, saved_args);
        Py_DECREF(saved_args);
        set_slot(node, n_saved_data, dl);
        set_slot(node, n_saved_versions, vl);
        Py_DECREF(dl);
        Py_DECREF(vl);
    } else {
        set_slot(node, n_saved, Py_None);
        set_slot(node, n_saved_data, Py_None);
        set_slot(node, n_saved_versions, Py_None);
    }
    return node;
fail:
    Py_XDECREF(node);
    Py_XDECREF(edges);
    return NULL;
}

/* the outputs of a multi-output call (a tuple of ndarrays), as registry.record / _finish
   wrap them; node is NULL when no graph is recorded */
static PyObject *wrap_outputs(PyObject *node, PyObject *outs, int save_output) {
    Py_ssize_t k = PyTuple_GET_SIZE(outs);
    PyObject *res = PyTuple_New(k);
    if (res == NULL) return NULL;
    PyObject *meta = NULL;
    if (node != NULL) {
        meta = PyTuple_New(k);
        if (meta == NULL) goto fail;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i);
        int floating = 0;
        if (node != NULL) {
            PyObject *dt = PyObject_GetAttr(o, s_dtype);
            PyObject *sh = dt ? shape_of(o) : NULL;
            PyObject *pair = sh ? PyTuple_Pack(2, sh, dt) : NULL;
            floating = dt ? dtype_kind(dt) == 'f' : 0;
            Py_XDECREF(dt);
            Py_XDECREF(sh);
            if (pair == NULL) goto fail;
            PyTuple_SET_ITEM(meta, i, pair);
        }
        PyObject *t = alloc_none(TensorType, tensor_slots, n_tensor_slots);
        if (t == NULL) goto fail;
        PyTuple_SET_ITEM(res, i, t);
        set_slot(t, t_data, o);
        set_slot(t, t_rg, floating ? Py_True : Py_False);
        if (floating) set_slot(t, t_fn, node);
        /* output numbers as registry.record gives them; _finish wraps plain outputs as 0 */
        PyObject *nr = PyLong_FromSsize_t(node != NULL ? i : 0);
        if (nr == NULL) goto fail;
        set_slot(t, t_nr, nr);
        Py_DECREF(nr);
    }
    if (node != NULL) {
        PyObject *nk = PyLong_FromSsize_t(k);
        if (nk == NULL) goto fail;
        set_slot(node, n_n_out, nk);
        Py_DECREF(nk);
        if (PyObject_SetAttr(node, s_out_meta, meta) < 0) goto fail;
        if (save_output) set_slot(node, n_out, outs);
    }
    Py_XDECREF(meta);
    return res;
fail:
    Py_XDECREF(meta);
    Py_DECREF(res);
    return NULL;
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

    /* after the forward ran, unusual results go to the Python tail of bind
       (registry._finish): the forward never runs twice */
#define FINISH()                                                                        \
    do {                                                                                \
        PyObject *dl_ = PyList_New(n), *r_ = NULL;                                      \
        if (dl_ != NULL) {                                                              \
            for (Py_ssize_t i_ = 0; i_ < n; i_++) PyList_SET_ITEM(dl_, i_, Py_NewRef(datas[i_])); \
            r_ = PyObject_CallFunctionObjArgs(Finish, prim, args, dl_, params, out,     \
                                              need ? Py_True : Py_False, NULL);         \
            Py_DECREF(dl_);                                                             \
        }                                                                               \
        Py_DECREF(out);                                                                 \
        Py_XDECREF(empty_params);                                                       \
        return r_;                                                                      \
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
    int single = SLOT(prim, p_n_outputs) == ONE || PyLong_AsLong(SLOT(prim, p_n_outputs)) == 1;
    int is_view = TRUTHY(SLOT(prim, p_is_view));
    /* registry.record marks views and fits broadcast gradients for one output only */
    if (!single && (is_view || TRUTHY(SLOT(prim, p_broadcasts)))) SLOW();

    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n > BIND_MAX_ARGS) SLOW();
    PyObject *datas[BIND_MAX_ARGS];
    int need = 0, has_none = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (PyObject_TypeCheck(a, TensorType)) {
            PyObject *d = SLOT(a, t_data);
            if (Py_TYPE(d) != ArrayType) SLOW();
            datas[i] = d;
            if (TRUTHY(SLOT(a, t_rg))) need = 1;
            /* bfloat16 (ml_dtypes, kind 'V') computes in float32: registry._run_bf16 */
            if (!is_view && Bf16DTypeType != NULL) {
                PyObject *ddt = PyObject_GetAttr(d, s_dtype);
                if (ddt == NULL) {
                    Py_XDECREF(empty_params);
                    return NULL;
                }
                int bf16 = Py_TYPE(ddt) == Bf16DTypeType;
                Py_DECREF(ddt);
                if (bf16) SLOW();
            }
        } else if (PyFloat_CheckExact(a) || PyLong_CheckExact(a)) {
            datas[i] = a;
        } else if (a == Py_None) {   /* an optional input left out (nll_loss's weight) */
            datas[i] = a;
            has_none = 1;
        } else {
            SLOW();
        }
    }
    /* dtype promotion: handled here only when it is a no-op */
    PyObject *promote = SLOT(prim, p_promote);
    if (promote != Py_None) {
        if (has_none) SLOW();
        if (SLOT(prim, p_promote_from) != ZERO &&
            PyLong_AsLong(SLOT(prim, p_promote_from)) != 0)
            SLOW();
        PyObject *dt0 = NULL;
        int float_scalar = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (Py_TYPE(datas[i]) != ArrayType) {
                float_scalar |= PyFloat_CheckExact(datas[i]);
                continue;
            }
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
        /* scalars are weak: any next to floating arrays; Python ints next to integer arrays
           under "same" promotion (``i + 64`` on an index tensor); the rest goes the slow way */
        if (kind != 'f') {
            int same = promote == s_same || (PyUnicode_Check(promote) &&
                                             PyUnicode_Compare(promote, s_same) == 0);
            if (!((kind == 'i' || kind == 'u') && same && !float_scalar)) SLOW();
        }
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
    if (single && Py_TYPE(out) != ArrayType) {
        /* a NumPy scalar from a 0-d result: make it a 0-d array, as the Python path does */
        PyObject *arr = PyObject_CallOneArg(AsArray, out);
        Py_DECREF(out);
        if (arr == NULL) {
            Py_XDECREF(empty_params);
            return NULL;
        }
        out = arr;
        if (Py_TYPE(out) != ArrayType) FINISH();
    }
    if (!single) {
        /* several outputs: a tuple of ndarrays here, anything else in the Python tail */
        if (!PyTuple_CheckExact(out)) FINISH();
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(out); i++)
            if (Py_TYPE(PyTuple_GET_ITEM(out, i)) != ArrayType) FINISH();
    }
    int track = 0;
    if (need && TRUTHY(SLOT(prim, p_differentiable))) {
        PyObject *ge = PyObject_GetAttr(State, s_grad_enabled);
        if (ge == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        track = TRUTHY(ge);
        Py_DECREF(ge);
    }
    if (!track) {
        PyObject *t = single ? new_tensor(out, 0, NULL) : wrap_outputs(NULL, out, 0);
        if (t != NULL && single && is_view && mark_view(t, PyTuple_GET_ITEM(args, 0)) < 0)
            Py_CLEAR(t);
        Py_DECREF(out);
        Py_XDECREF(empty_params);
        return t;
    }
    /* ---- record the node ---- */
    if (single) {
        PyObject *outdt = PyObject_GetAttr(out, s_dtype);
        if (outdt == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        char okind = dtype_kind(outdt);
        Py_DECREF(outdt);
        if (okind != 'f') FINISH(); /* an integer output: no node, as the Python tail decides */
    }
    PyObject *node = make_node(prim, args, params, datas, n);
    if (node == NULL) goto fail_node;
    int want_meta = PyObject_IsTrue(SLOT(prim, p_meta));
    if (!want_meta && TRUTHY(SLOT(prim, p_broadcasts))) {
        /* gradients need fitting only where an input's shape or dtype differs from the
           output's (as registry.record decides) */
        PyObject *oshape = shape_of(out);
        PyObject *odt = oshape ? PyObject_GetAttr(out, s_dtype) : NULL;
        if (odt == NULL) {
            Py_XDECREF(oshape);
            goto fail_node;
        }
        for (Py_ssize_t i = 0; i < n && !want_meta; i++) {
            if (Py_TYPE(datas[i]) != ArrayType) continue;
            PyObject *sh = shape_of(datas[i]);
            PyObject *dt = sh ? PyObject_GetAttr(datas[i], s_dtype) : NULL;
            int eq = dt == NULL ? -1 : PyObject_RichCompareBool(sh, oshape, Py_EQ);
            if (eq == 1 && dt != odt) eq = PyObject_RichCompareBool(dt, odt, Py_EQ);
            Py_XDECREF(sh);
            Py_XDECREF(dt);
            if (eq < 0) {
                Py_DECREF(oshape);
                Py_DECREF(odt);
                goto fail_node;
            }
            if (!eq) want_meta = 1;
        }
        Py_DECREF(oshape);
        Py_DECREF(odt);
    }
    if (want_meta) {
        PyObject *ml = make_meta_list(args, n);
        if (ml == NULL) goto fail_node;
        set_slot(node, n_in_meta, ml);
        Py_DECREF(ml);
    }
    int save_output = PyObject_IsTrue(SLOT(prim, p_save_output));
    PyObject *t;
    if (!single) {
        t = wrap_outputs(node, out, save_output);
        if (t == NULL) goto fail_node;
    } else {
        t = new_tensor(out, 1, node);
        if (t == NULL) goto fail_node;
        if (save_output) {
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
        if (is_view && mark_view(t, PyTuple_GET_ITEM(args, 0)) < 0) {
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
    Py_DECREF(out);
    Py_XDECREF(empty_params);
    return NULL;
#undef SLOW
#undef FINISH
}


/* engine._add_to_buffer's test: `old` (a buffer entry, borrowed) is referenced by the buffer
   only, an exact ndarray owning writeable memory, with gi's shape and dtype: old += gi gives
   the same values as old + gi without a new array.  1 yes, 0 no, -1 error. */
static int addable_in_place(PyObject *old, PyObject *gi) {
    if (Py_REFCNT(old) != 1 || Py_TYPE(old) != ArrayType || Py_TYPE(gi) != ArrayType) return 0;
    PyObject *b = PyObject_GetAttr(old, s_base);
    if (b == NULL) return -1;
    int ok = b == Py_None;
    Py_DECREF(b);
    if (!ok) return 0;
    PyObject *d1 = PyObject_GetAttr(old, s_dtype), *d2 = d1 ? PyObject_GetAttr(gi, s_dtype) : NULL;
    ok = d2 == NULL ? -1 : (d1 == d2 ? 1 : PyObject_RichCompareBool(d1, d2, Py_EQ));
    Py_XDECREF(d1);
    Py_XDECREF(d2);
    if (ok != 1) return ok;
    PyObject *s1 = shape_of(old), *s2 = s1 ? shape_of(gi) : NULL;
    ok = s2 == NULL ? -1 : PyObject_RichCompareBool(s1, s2, Py_EQ);
    Py_XDECREF(s1);
    Py_XDECREF(s2);
    if (ok != 1) return ok;
    PyObject *flags = PyObject_GetAttr(old, s_flags);
    if (flags == NULL) return -1;
    PyObject *w = PyObject_GetAttr(flags, s_writeable);
    PyObject *o = w ? PyObject_GetAttr(flags, s_owndata) : NULL;
    Py_DECREF(flags);
    ok = o == NULL ? -1 : (w == Py_True && o == Py_True);
    Py_XDECREF(w);
    Py_XDECREF(o);
    return ok;
}

/*
 * backward_loop: the engine's plain-backward loop (dyngraph/autograd/engine.py).
 * Runs nodes whose gradients have all arrived; simple nodes (a Primitive with
 * rules, one output, no hooks) are handled here, everything else -- leaves,
 * custom Functions, hooked nodes, multi-output nodes, errors -- by the Python
 * callbacks, which share the same ready list, buffers and dependency counts.
 */
static PyObject *backward_loop(PyObject *self, PyObject *args) {
    PyObject *ready, *buffers, *deps, *leaf_cb, *general_cb, *saved_err_cb, *fit_cb, *add_cb, *freed;
    int retain;
    if (!PyArg_ParseTuple(args, "O!O!O!pOOOOOO", &PyList_Type, &ready, &PyDict_Type, &buffers,
                          &PyDict_Type, &deps, &retain, &leaf_cb, &general_cb, &saved_err_cb,
                          &fit_cb, &add_cb, &freed))
        return NULL;
    PyObject *gdt = NULL; /* dtype broadcasting rules' gradients are cast to (see below) */
    while (PyList_GET_SIZE(ready) > 0) {
        Py_ssize_t last = PyList_GET_SIZE(ready) - 1;
        PyObject *v = Py_NewRef(PyList_GET_ITEM(ready, last));
        if (PyList_SetSlice(ready, last, last + 1, NULL) < 0) {
            Py_DECREF(v);
            return NULL;
        }
        PyObject *g = PyDict_GetItemWithError(buffers, v);
        if (g == NULL && PyErr_Occurred()) {
            Py_DECREF(v);
            return NULL;
        }
        if (g != NULL) {
            Py_INCREF(g);
            if (PyDict_DelItem(buffers, v) < 0) goto fail_v;
        }
        /* the buffer held the only other reference: g is the engine's alone (a leaf's first
           gradient need not be copied, engine._accumulate) */
        int own = g != NULL && Py_REFCNT(g) == 1;
        PyObject *gg = g ? g : Py_None;
        int fast = PyObject_TypeCheck(v, NodeType) && g != NULL;
        PyObject *prim = NULL, *rules = NULL;
        PyObject *argnum_rule = NULL; /* rule(argnum, g, out, *inputs) of variadic primitives (cat) */
        if (fast) {
            prim = SLOT(v, n_prim);
            fast = Py_TYPE(prim) == PrimitiveType && SLOT(v, n_n_out) == ONE;
        }
        if (fast) {
            rules = SLOT(prim, p_vjp_rules);
            if (rules == Py_None && SLOT(prim, p_vjp_argnum) != Py_None)
                argnum_rule = SLOT(prim, p_vjp_argnum);
            PyObject *sv = SLOT(v, n_saved);
            fast = (PyTuple_Check(rules) || argnum_rule != NULL) && sv != freed &&
                   (sv == Py_None || (PyTuple_Check(sv) && PyList_Check(SLOT(v, n_saved_versions)) &&
                                      PyList_GET_SIZE(SLOT(v, n_saved_versions)) == PyTuple_GET_SIZE(sv))) &&
                   (PyList_Check(SLOT(v, n_edges)) || PyTuple_Check(SLOT(v, n_edges)));
        }
        if (fast && argnum_rule == NULL) {
            /* a missing rule is reported by the general path (registry.missing_rule) */
            PyObject *ed = SLOT(v, n_edges);
            Py_ssize_t nr = PyTuple_GET_SIZE(rules), ne_ = PySequence_Fast_GET_SIZE(ed);
            for (Py_ssize_t i = 0; i < ne_ && fast; i++)
                if (PySequence_Fast_GET_ITEM(ed, i) != Py_None &&
                    (i >= nr || PyTuple_GET_ITEM(rules, i) == Py_None))
                    fast = 0;
        }
        if (fast) {
            PyObject *sp = PyObject_GetAttr(v, s_special);
            if (sp == NULL) goto fail_g;
            fast = sp == Py_False;
            Py_DECREF(sp);
        }
        if (!fast) {
            PyObject *r = PyObject_TypeCheck(v, NodeType)
                              ? PyObject_CallFunctionObjArgs(general_cb, v, gg, NULL)
                              : PyObject_CallFunctionObjArgs(leaf_cb, v, gg, own ? Py_True : Py_False, NULL);
            if (r == NULL) goto fail_g;
            Py_DECREF(r);
            Py_XDECREF(g);
            Py_DECREF(v);
            continue;
        }
        /* ---- fast node ---- */
        PyObject *node = v;
        PyObject *saved = SLOT(node, n_saved);
        PyObject *inputs;            /* borrowed sequence of rule inputs */
        PyObject *nones = NULL;
        PyObject *edges = SLOT(node, n_edges);
        Py_ssize_t ne = PySequence_Fast_GET_SIZE(edges);
        if (saved != Py_None) {
            PyObject *versions = SLOT(node, n_saved_versions);
            Py_ssize_t ns = PyTuple_GET_SIZE(saved);
            for (Py_ssize_t i = 0; i < ns; i++) {
                PyObject *ver = PyList_GET_ITEM(versions, i);
                if (ver == Py_None) continue;
                PyObject *a = PyTuple_GET_ITEM(saved, i);
                if (!PyObject_TypeCheck(a, TensorType)) continue;
                PyObject *vc = SLOT(a, t_vc);
                if (vc == Py_None || !PyList_Check(vc)) continue;
                PyObject *cur = PyList_GET_ITEM(vc, 0);
                int eq = PyObject_RichCompareBool(cur, ver, Py_EQ);
                if (eq < 0) goto fail_g;
                if (!eq) {
                    PyObject *idx = PyLong_FromSsize_t(i);
                    PyObject *r = PyObject_CallFunctionObjArgs(saved_err_cb, node, idx, a, ver, cur, NULL);
                    Py_XDECREF(idx);
                    Py_XDECREF(r);
                    goto fail_g; /* the callback raises */
                }
            }
            inputs = SLOT(node, n_saved_data);
        } else if (SLOT(node, n_in_meta) != Py_None) {
            inputs = SLOT(node, n_in_meta);
        } else {
            nones = PyList_New(ne);
            if (nones == NULL) goto fail_g;
            for (Py_ssize_t i = 0; i < ne; i++) PyList_SET_ITEM(nones, i, Py_NewRef(Py_None));
            inputs = nones;
        }
        PyObject *out = SLOT(node, n_out);
        if (out != Py_None) {
            PyObject *ovc = PyObject_GetAttr(node, s_out_vc);
            if (ovc == NULL) goto fail_nones;
            int bad = ovc != Py_None && PyList_GET_ITEM(ovc, 0) != ZERO;
            if (bad) {
                PyObject *cur = Py_NewRef(PyList_GET_ITEM(ovc, 0));
                Py_DECREF(ovc);
                PyObject *r = PyObject_CallFunctionObjArgs(saved_err_cb, node, Py_None, out, ZERO, cur, NULL);
                Py_DECREF(cur);
                Py_XDECREF(r);
                goto fail_nones;
            }
            Py_DECREF(ovc);
        }
        int bcast = TRUTHY(SLOT(prim, p_broadcasts));
        PyObject *meta = bcast ? SLOT(node, n_in_meta) : Py_None;
        if (bcast && meta == Py_None) {
            /* no input needed fitting (shapes and dtypes equal the output's): gradients still
               take the output's dtype, which g has (registry.record / engine._apply_rules) */
            gdt = PyObject_GetAttr(g, s_dtype);
            if (gdt == NULL) goto fail_nones;
        }
        PyObject *params = SLOT(node, n_params);
        int has_params = PyDict_Check(params) && PyDict_GET_SIZE(params) > 0;
        Py_ssize_t ni = PySequence_Size(inputs);
        PyObject *callargs = PyTuple_New(2 + ni);
        if (callargs == NULL) goto fail_nones;
        PyTuple_SET_ITEM(callargs, 0, Py_NewRef(g));
        PyTuple_SET_ITEM(callargs, 1, Py_NewRef(out));
        for (Py_ssize_t k = 0; k < ni; k++) {
            PyObject *item = PySequence_GetItem(inputs, k);
            if (item == NULL) {
                Py_DECREF(callargs);
                goto fail_nones;
            }
            PyTuple_SET_ITEM(callargs, 2 + k, item);
        }
        for (Py_ssize_t i = 0; i < ne; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(edges, i);
            if (e == Py_None) continue;
            PyObject *child = PyTuple_GET_ITEM(e, 0);
            PyObject *gi;
            if (argnum_rule == NULL) {
                PyObject *rule = PyTuple_GET_ITEM(rules, i); /* present: checked above */
                gi = PyObject_Call(rule, callargs, has_params ? params : NULL);
            } else {
                /* Primitive.vjp: vjp_argnum(i, g, out, *inputs, **params) */
                Py_ssize_t nc = PyTuple_GET_SIZE(callargs);
                PyObject *ca = PyTuple_New(nc + 1);
                PyObject *idx = ca ? PyLong_FromSsize_t(i) : NULL;
                if (idx == NULL) {
                    Py_XDECREF(ca);
                    Py_DECREF(callargs);
                    goto fail_nones;
                }
                PyTuple_SET_ITEM(ca, 0, idx);
                for (Py_ssize_t k = 0; k < nc; k++)
                    PyTuple_SET_ITEM(ca, k + 1, Py_NewRef(PyTuple_GET_ITEM(callargs, k)));
                gi = PyObject_Call(argnum_rule, ca, has_params ? params : NULL);
                Py_DECREF(ca);
            }
            if (gi == NULL) {
                Py_DECREF(callargs);
                goto fail_nones;
            }
            if (gi != Py_None) {
                PyObject *m = meta != Py_None ? PySequence_GetItem(meta, i) : Py_NewRef(Py_None);
                if (m == NULL) {
                    Py_DECREF(gi);
                    Py_DECREF(callargs);
                    goto fail_nones;
                }
                if (Py_TYPE(gi) != ArrayType || m != Py_None) {
                    PyObject *f = PyObject_CallFunctionObjArgs(fit_cb, gi, m, NULL);
                    Py_DECREF(gi);
                    gi = f;
                } else if (gdt != NULL) {
                    PyObject *d = PyObject_GetAttr(gi, s_dtype);
                    int same = d == NULL ? -1 : (d == gdt ? 1 : PyObject_RichCompareBool(d, gdt, Py_EQ));
                    Py_XDECREF(d);
                    PyObject *f = same == 0 ? PyObject_CallMethod(gi, "astype", "O", gdt) : NULL;
                    if (same != 1) {
                        Py_DECREF(gi);
                        gi = f;
                    }
                }
                Py_DECREF(m);
                if (gi == NULL) {
                    Py_DECREF(callargs);
                    goto fail_nones;
                }
                if (PyObject_TypeCheck(child, NodeType) && SLOT(child, n_n_out) != ONE) {
                    PyObject *r = PyObject_CallFunctionObjArgs(add_cb, buffers, child,
                                                               PyTuple_GET_ITEM(e, 1), gi, NULL);
                    Py_DECREF(gi);
                    if (r == NULL) {
                        Py_DECREF(callargs);
                        goto fail_nones;
                    }
                    Py_DECREF(r);
                } else {
                    PyObject *old = PyDict_GetItemWithError(buffers, child);
                    if (old == NULL && PyErr_Occurred()) {
                        Py_DECREF(gi);
                        Py_DECREF(callargs);
                        goto fail_nones;
                    }
                    int inplace = old != NULL ? addable_in_place(old, gi) : 0;
                    if (inplace < 0) {
                        Py_DECREF(gi);
                        Py_DECREF(callargs);
                        goto fail_nones;
                    }
                    if (old != NULL) {
                        /* in place when the buffer is the engine's alone (engine._add_to_buffer) */
                        PyObject *sum = inplace ? PyNumber_InPlaceAdd(old, gi) : PyNumber_Add(old, gi);
                        Py_DECREF(gi);
                        if (sum == NULL) {
                            Py_DECREF(callargs);
                            goto fail_nones;
                        }
                        if (Py_TYPE(sum) != ArrayType) {
                            PyObject *f = PyObject_CallFunctionObjArgs(fit_cb, sum, Py_None, NULL);
                            Py_DECREF(sum);
                            sum = f;
                            if (sum == NULL) {
                                Py_DECREF(callargs);
                                goto fail_nones;
                            }
                        }
                        gi = sum;
                    }
                    int r = PyDict_SetItem(buffers, child, gi);
                    Py_DECREF(gi);
                    if (r < 0) {
                        Py_DECREF(callargs);
                        goto fail_nones;
                    }
                }
            } else {
                Py_DECREF(gi);
            }
            PyObject *cnt = PyDict_GetItemWithError(deps, child);
            if (cnt == NULL) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "engine: missing dependency count");
                Py_DECREF(callargs);
                goto fail_nones;
            }
            long left = PyLong_AsLong(cnt) - 1;
            PyObject *lo = PyLong_FromLong(left);
            if (lo == NULL || PyDict_SetItem(deps, child, lo) < 0) {
                Py_XDECREF(lo);
                Py_DECREF(callargs);
                goto fail_nones;
            }
            Py_DECREF(lo);
            if (left == 0 && PyList_Append(ready, child) < 0) {
                Py_DECREF(callargs);
                goto fail_nones;
            }
        }
        Py_DECREF(callargs);
        Py_XDECREF(nones);
        Py_CLEAR(gdt);
        if (!retain && (saved != Py_None || out != Py_None)) {
            set_slot(node, n_saved, freed);
            set_slot(node, n_saved_data, Py_None);
            set_slot(node, n_out, Py_None);
        }
        Py_DECREF(g);
        Py_DECREF(v);
        continue;
    fail_nones:
        Py_XDECREF(nones);
        Py_CLEAR(gdt);
    fail_g:
        Py_XDECREF(g);
    fail_v:
        Py_DECREF(v);
        return NULL;
    }
    Py_RETURN_NONE;
}


/* discover(roots): dependency counts of every vertex reachable from the root
 * vertices (Nodes or leaf tensors), iteratively; the dict doubles as the visited
 * set (see engine._discover). */
static PyObject *discover(PyObject *self, PyObject *roots) {
    PyObject *deps = PyDict_New();
    PyObject *stack = PySequence_List(roots);
    if (deps == NULL || stack == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); i++)
        if (PyDict_SetItem(deps, PyList_GET_ITEM(stack, i), ZERO) < 0) goto fail;
    while (PyList_GET_SIZE(stack) > 0) {
        Py_ssize_t last = PyList_GET_SIZE(stack) - 1;
        PyObject *v = Py_NewRef(PyList_GET_ITEM(stack, last));
        if (PyList_SetSlice(stack, last, last + 1, NULL) < 0) {
            Py_DECREF(v);
            goto fail;
        }
        if (!PyObject_TypeCheck(v, NodeType)) {
            Py_DECREF(v);
            continue;
        }
        PyObject *edges = PySequence_Fast(SLOT(v, n_edges), "edges must be a sequence");
        Py_DECREF(v);
        if (edges == NULL) goto fail;
        Py_ssize_t ne = PySequence_Fast_GET_SIZE(edges);
        for (Py_ssize_t i = 0; i < ne; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(edges, i);
            if (e == Py_None) continue;
            PyObject *c = PyTuple_GET_ITEM(e, 0);
            PyObject *cnt = PyDict_GetItemWithError(deps, c);
            if (cnt == NULL && PyErr_Occurred()) {
                Py_DECREF(edges);
                goto fail;
            }
            PyObject *nc = PyLong_FromLong(cnt == NULL ? 1 : PyLong_AsLong(cnt) + 1);
            int r = nc == NULL ? -1 : PyDict_SetItem(deps, c, nc);
            Py_XDECREF(nc);
            if (r < 0 || (cnt == NULL && PyList_Append(stack, c) < 0)) {
                Py_DECREF(edges);
                goto fail;
            }
        }
        Py_DECREF(edges);
    }
    Py_DECREF(stack);
    return deps;
fail:
    Py_XDECREF(deps);
    Py_XDECREF(stack);
    return NULL;
}

static PyMethodDef methods[] = {
    {"discover", discover, METH_O, "Dependency counts of the graph behind the root vertices."},
    {"backward_loop", backward_loop, METH_VARARGS, "The engine's plain-backward loop."},
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
    INTERN(s_special, "special");
    INTERN(s_base, "base");
    INTERN(s_out_meta, "out_meta");
    INTERN(s_flags, "flags");
    INTERN(s_writeable, "writeable");
    INTERN(s_owndata, "owndata");
#undef INTERN
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    return PyModule_Create(&module);
}
