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
/* Meta's two slots: the C path fills them directly (as Meta.__init__ does) instead of calling
   the class, which runs a Python __init__ frame per input of every meta=True call */
static Py_ssize_t m_shape, m_dtype;
static PyObject *AsArray = NULL;        /* registry._as_array */
static PyObject *Finish = NULL;         /* registry._finish: the tail of bind after the forward */
static PyObject *MarkView = NULL;       /* registry._mark_view: views the fast checks cannot decide */
/* the class of ml_dtypes' bfloat16 dtype (both byte orders); NULL until dyngraph.dtypes loads
   it (ml_dtypes is imported on first use of bfloat16: set_bf16_dtype, called from
   dtypes.on_bfloat16).  No bfloat16 array exists before that.  Comparing the dtype's class is
   one pointer test per input instead of reading dtype.kind. */
static PyTypeObject *Bf16DTypeType = NULL;
static PyObject *ZERO = NULL, *ONE = NULL;
/* NumPy's FP-report context variable and its "all off" value (registry._FP_STATE/_FP_QUIET);
   NULL on NumPy 1.x.  A primitive whose forward is ops/_util.py's quiet_fp wrapper keeps the
   wrapped function in its _quiet_impl slot, and bind sets the variable around that function
   itself: the wrapper's work without its Python frame. */
static PyObject *FpVar = NULL, *FpQuiet = NULL;
/* registry.EMPTY: the params of calls made without any (``bind(prim, args)``), shared as in
   the Python path (a fresh dict per call before) */
static PyObject *EmptyParams = NULL;
/* NumPy's array/dtype fields are read directly (check_layout's probe agreed); numpy.dtype */
static int layout_ok = 0;
static PyTypeObject *DescrType = NULL;

/* every slot of Tensor and Node (read from __slots__ at set-up): new objects start with
   all of them None, so a slot added in Python needs no change here */
#define MAX_SLOTS 32
static Py_ssize_t tensor_slots[MAX_SLOTS], node_slots[MAX_SLOTS], meta_slots[MAX_SLOTS];
static int n_tensor_slots = 0, n_node_slots = 0, n_meta_slots = 0;

/* slot offsets of the slots this file reads or writes by name */
static Py_ssize_t t_data, t_rg, t_fn, t_nr, t_grad, t_vc, t_base, t_hooks;
static Py_ssize_t n_prim, n_params, n_ne, n_f0, n_n0, n_f1, n_n1, n_f2, n_n2, n_fx, n_sn, n_s0, n_s1, n_s2, n_sx, n_saved_data, n_saved_versions, n_out,
    n_in_meta, n_n_out, n_out_vc;
static Py_ssize_t p_impl, p_quiet_impl, p_promote, p_promote_from, p_broadcasts, p_n_outputs, p_is_view,
    p_differentiable, p_nondiff, p_save_inputs, p_save_output, p_meta, p_vjp_rules, p_save_for,
    p_vjp_argnum, p_light;
static PyTypeObject *PrimitiveType = NULL;

static PyObject *s_dict;
static PyObject *s_process;   /* "process": the interpreter protocol's entry */
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

/* Graph bookkeeping the C path creates that holds only atomic data -- Meta records (a shape
   tuple of ints and a dtype), their shape tuples, the in_meta / saved_data / saved_versions
   lists (Meta, ndarray, int, float, None) and version-counter cells ([int]) -- cannot be part
   of a reference cycle, so it is taken out of the cyclic GC's lists.  Every op made 5-10
   tracked objects and the collector re-traversed all of them while the graph lived: 35% of
   a Child-Sum Tree-LSTM forward was spent in collections (CPU time, gc callbacks).  Tensors,
   Nodes, edges and params stay tracked (hooks and in-place ops can close cycles through
   them).  Untracking changes no value: the Python path builds the same objects, tracked. */
static inline void gc_untrack(PyObject *op) {
    if (PyObject_GC_IsTracked(op)) PyObject_GC_UnTrack(op);
}

/* a list whose items are all untracked (or not GC objects at all: ndarrays, ints, floats,
   None): untracked too */
static void untrack_if_atomic(PyObject *lst) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); i++) {
        PyObject *o = PyList_GET_ITEM(lst, i);
        if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o)) return;
    }
    gc_untrack(lst);
}

/* a shape tuple: untracked when all its items are ints (always, for NumPy's shapes) */
static void untrack_shape(PyObject *shape) {
    if (!PyTuple_CheckExact(shape)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(shape, i))) return;
    gc_untrack(shape);
}

/* a tuple whose items are all untracked or not GC objects (the saved args of `a * 2.0`:
   (None, 2.0)): untracked, as the collector itself would do at its next pass -- a tuple
   cannot change, so it can never join a cycle */
static void untrack_tuple_if_atomic(PyObject *tup) {
    if (!PyTuple_CheckExact(tup) || !PyObject_GC_IsTracked(tup)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        PyObject *o = PyTuple_GET_ITEM(tup, i);
        if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o)) return;
    }
    gc_untrack(tup);
}

/* a call's params ({"shape": (1, 128)}, {"dim": 0}): its tuples of atomic items, then the
   dict itself when every value is atomic.  Up to 3.13 CPython tracks a dict again as soon as
   a tracked value is stored in it (MAINTAIN_TRACKING), so a later mutation stays safe;
   later versions keep every dict tracked, and there only the tuples are untracked. */
static void untrack_params(PyObject *params) {
    if (params == EmptyParams || !PyDict_CheckExact(params)) return;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int atomic = 1;
    while (PyDict_Next(params, &pos, &k, &v)) {
        if (!PyObject_IS_GC(v)) continue;
        untrack_tuple_if_atomic(v);
        if (PyObject_GC_IsTracked(v)) atomic = 0;
    }
#if PY_VERSION_HEX < 0x030E0000
    if (atomic && PyObject_GC_IsTracked(params)) gc_untrack(params);
#else
    (void)atomic;
#endif
}

static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    Py_INCREF(value);
    *p = value;
    Py_XDECREF(old);
}

/* The edges of a node live flat in its slots (graph.py, Node.__slots__; graph._set_edges is
   the Python side): _ne inputs, the first three as _f0/_n0, _f1/_n1, _f2/_n2 (vertex, output
   number), the others in the tuple _fx = (f3, n3, f4, n4, ...); a vertex of None means no
   edge.  A node owns no list or tuple per edge -- one tracked object per node where there
   were 1 + k. */
#define INLINE_EDGES 3

typedef struct {
    Py_ssize_t n;
    PyObject *f[INLINE_EDGES], *nr[INLINE_EDGES], *fx; /* strong references while held */
} Edges;

/* the edges of `node` with references held (Python code run meanwhile -- rules, hashes --
   cannot free them); 0, or -1 without an error set when the slots do not hold that layout
   (the caller then takes the Python path or reports it) */
static int edges_get(PyObject *node, Edges *e) {
    PyObject *ne = SLOT(node, n_ne);
    if (!PyLong_CheckExact(ne)) return -1;
    Py_ssize_t n = PyLong_AsSsize_t(ne);
    if (n < 0) {
        PyErr_Clear();
        return -1;
    }
    PyObject *fx = SLOT(node, n_fx);
    if (n > INLINE_EDGES ? !PyTuple_CheckExact(fx) || PyTuple_GET_SIZE(fx) != 2 * (n - INLINE_EDGES)
                         : fx != Py_None)
        return -1;
    const Py_ssize_t fo[INLINE_EDGES] = {n_f0, n_f1, n_f2}, no[INLINE_EDGES] = {n_n0, n_n1, n_n2};
    e->n = n;
    for (int i = 0; i < INLINE_EDGES; i++) {
        e->f[i] = Py_NewRef(SLOT(node, fo[i]));
        e->nr[i] = Py_NewRef(SLOT(node, no[i]));
    }
    e->fx = Py_NewRef(fx);
    return 0;
}

static void edges_release(Edges *e) {
    for (int i = 0; i < INLINE_EDGES; i++) {
        Py_CLEAR(e->f[i]);
        Py_CLEAR(e->nr[i]);
    }
    Py_CLEAR(e->fx);
    e->n = 0;
}

/* vertex (Py_None: no edge) and output number of edge i < e->n; borrowed from e */
static inline PyObject *edge_fn(const Edges *e, Py_ssize_t i) {
    return i < INLINE_EDGES ? e->f[i] : PyTuple_GET_ITEM(e->fx, 2 * (i - INLINE_EDGES));
}

static inline PyObject *edge_nr(const Edges *e, Py_ssize_t i) {
    return i < INLINE_EDGES ? e->nr[i] : PyTuple_GET_ITEM(e->fx, 2 * (i - INLINE_EDGES) + 1);
}

/* The saved arguments likewise (graph.py, Node.saved): _sn None (nothing saved), FREED, or
   their number; the first three in _s0.._s2, the others in the tuple _sx.  The number of
   saved arguments when the slots hold that layout, -1 for None / FREED / another layout. */
static Py_ssize_t saved_count(PyObject *node) {
    PyObject *sn = SLOT(node, n_sn);
    if (!PyLong_CheckExact(sn)) return -1;
    Py_ssize_t n = PyLong_AsSsize_t(sn);
    if (n < 0) {
        PyErr_Clear();
        return -1;
    }
    PyObject *sx = SLOT(node, n_sx);
    if (n > INLINE_EDGES ? !PyTuple_CheckExact(sx) || PyTuple_GET_SIZE(sx) != n - INLINE_EDGES
                         : sx != Py_None)
        return -1;
    return n;
}

/* saved argument i < saved_count(node); borrowed */
static inline PyObject *saved_item(PyObject *node, Py_ssize_t i) {
    return i == 0   ? SLOT(node, n_s0)
           : i == 1 ? SLOT(node, n_s1)
           : i == 2 ? SLOT(node, n_s2)
                    : PyTuple_GET_ITEM(SLOT(node, n_sx), i - INLINE_EDGES);
}

static int check_layout(void);

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *tensor, *node, *array, *state, *slow, *operr, *prim, *meta, *asarray, *finish, *markview;
    PyObject *fpvar, *fpquiet, *empty;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO", &tensor, &node, &array, &state, &slow, &operr, &prim,
                          &meta, &asarray, &finish, &markview, &fpvar, &fpquiet, &empty))
        return NULL;
    if (!PyDict_CheckExact(empty)) {
        PyErr_SetString(PyExc_TypeError, "_speedups.setup: EMPTY must be a dict");
        return NULL;
    }
    Py_XSETREF(EmptyParams, Py_NewRef(empty));
    if (fpvar != Py_None && !PyContextVar_CheckExact(fpvar)) {
        PyErr_SetString(PyExc_TypeError, "_speedups.setup: the FP state must be a ContextVar or None");
        return NULL;
    }
    if (all_slots(tensor, tensor_slots, &n_tensor_slots) < 0) return NULL;
    if (all_slots(node, node_slots, &n_node_slots) < 0) return NULL;
    const char *tn[] = {"_data", "_rg", "_fn", "_nr", "_grad", "_vc", "_base", "_hooks"};
    Py_ssize_t *to[] = {&t_data, &t_rg, &t_fn, &t_nr, &t_grad, &t_vc, &t_base, &t_hooks};
    for (int i = 0; i < 8; i++)
        if (slot_offset(tensor, tn[i], to[i]) < 0) return NULL;
    const char *nn[] = {"prim", "params", "_ne", "_f0", "_n0", "_f1", "_n1", "_f2", "_n2", "_fx",
                        "_sn", "_s0", "_s1", "_s2", "_sx", "saved_data", "saved_versions", "out",
                        "in_meta", "n_out", "out_vc"};
    Py_ssize_t *no[] = {&n_prim, &n_params, &n_ne, &n_f0, &n_n0, &n_f1, &n_n1, &n_f2, &n_n2, &n_fx,
                        &n_sn, &n_s0, &n_s1, &n_s2, &n_sx, &n_saved_data, &n_saved_versions, &n_out,
                        &n_in_meta, &n_n_out, &n_out_vc};
    for (int i = 0; i < 21; i++)
        if (slot_offset(node, nn[i], no[i]) < 0) return NULL;
    const char *pn[] = {"_impl", "_quiet_impl", "promote", "promote_from", "broadcasts", "n_outputs", "is_view",
                        "differentiable", "nondiff_argnums", "save_inputs", "save_output", "meta",
                        "vjp_rules", "save_for", "vjp_argnum", "light"};
    Py_ssize_t *po[] = {&p_impl, &p_quiet_impl, &p_promote, &p_promote_from, &p_broadcasts, &p_n_outputs,
                        &p_is_view, &p_differentiable, &p_nondiff, &p_save_inputs,
                        &p_save_output, &p_meta, &p_vjp_rules, &p_save_for, &p_vjp_argnum, &p_light};
    for (int i = 0; i < 16; i++)
        if (slot_offset(prim, pn[i], po[i]) < 0) return NULL;
    if (fpvar == Py_None) {
        Py_CLEAR(FpVar);
        Py_CLEAR(FpQuiet);
    } else {
        Py_XSETREF(FpVar, Py_NewRef(fpvar));
        Py_XSETREF(FpQuiet, Py_NewRef(fpquiet));
    }
    Py_XSETREF(PrimitiveType, (PyTypeObject *)Py_NewRef(prim));
    Py_XSETREF(TensorType, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(NodeType, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(ArrayType, (PyTypeObject *)Py_NewRef(array));
    /* ndarray/dtype fields read directly when the probe agrees (see check_layout) */
    layout_ok = 0;
    int lay = check_layout();
    if (lay < 0) return NULL;
    layout_ok = lay;
    Py_XSETREF(State, Py_NewRef(state));
    Py_XSETREF(SlowBind, Py_NewRef(slow));
    Py_XSETREF(OpError, Py_NewRef(operr));
    if (!PyType_Check(meta)) {
        PyErr_SetString(PyExc_TypeError, "_speedups.setup: Meta must be a class");
        return NULL;
    }
    if (all_slots(meta, meta_slots, &n_meta_slots) < 0 || slot_offset(meta, "shape", &m_shape) < 0 ||
        slot_offset(meta, "dtype", &m_dtype) < 0)
        return NULL;
    Py_XSETREF(MetaType, Py_NewRef(meta));
    Py_XSETREF(AsArray, Py_NewRef(asarray));
    Py_XSETREF(Finish, Py_NewRef(finish));
    Py_XSETREF(MarkView, Py_NewRef(markview));
    Py_RETURN_NONE;
}

/* set_bf16_dtype(np_dtype): the class of np.dtype(ml_dtypes.bfloat16); bfloat16 inputs then
   defer to registry._run_bf16 (dyngraph.dtypes calls it when it loads bfloat16) */
static PyObject *set_bf16_dtype(PyObject *self, PyObject *dt) {
    Py_XSETREF(Bf16DTypeType, (PyTypeObject *)Py_NewRef(Py_TYPE(dt)));
    Py_RETURN_NONE;
}

/* --- NumPy array and dtype fields ------------------------------------------------------------
 * The leading fields of NumPy's array object and dtype (PyArrayObject_fields and
 * PyArray_Descr in numpy/ndarraytypes.h).  They are part of NumPy's binary interface -- every
 * compiled extension reads them through NumPy's own macros -- and the same in NumPy 1.x and 2.x.
 * This file is built without NumPy's headers, so setup() checks the layout against a probe
 * array (ndim, shape, base, dtype and its kind read both ways) and, only when everything
 * agrees, reads dtype/shape/base/kind from the fields instead of through attribute look-ups
 * (each a generic getattr, ~30 ns, and .shape builds a tuple); otherwise the attribute path
 * runs as before. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} np_array_head;

typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind;
    char type;
    char byteorder;
} np_descr_head;


#define ARR(a) ((np_array_head *)(a))

/* kind character of an ndarray's dtype ('f', 'i', 'b', ...), or 0 on failure */
static char dtype_kind_attr(PyObject *dtype);
static inline char dtype_kind(PyObject *dtype) {
    if (layout_ok && PyObject_TypeCheck(dtype, DescrType)) return ((np_descr_head *)dtype)->kind;
    return dtype_kind_attr(dtype);
}

/* a.dtype (new reference) */
static inline PyObject *get_dtype(PyObject *a) {
    if (layout_ok && Py_TYPE(a) == ArrayType) return Py_NewRef(ARR(a)->descr);
    return PyObject_GetAttr(a, s_dtype);
}

/* a.base (new reference; None for an array owning its memory) */
static inline PyObject *get_base(PyObject *a) {
    if (layout_ok && Py_TYPE(a) == ArrayType) return Py_NewRef(ARR(a)->base ? ARR(a)->base : Py_None);
    return PyObject_GetAttr(a, s_base);
}

static PyObject *shape_of(PyObject *a);

/* a.shape == b.shape for two arrays: 1, 0, or -1 on error */
static int same_shape(PyObject *a, PyObject *b) {
    if (layout_ok && Py_TYPE(a) == ArrayType && Py_TYPE(b) == ArrayType) {
        int nd = ARR(a)->nd;
        if (nd != ARR(b)->nd) return 0;
        return nd == 0 || memcmp(ARR(a)->dimensions, ARR(b)->dimensions, nd * sizeof(Py_ssize_t)) == 0;
    }
    PyObject *s1 = shape_of(a), *s2 = s1 ? shape_of(b) : NULL;
    int eq = s2 == NULL ? -1 : PyObject_RichCompareBool(s1, s2, Py_EQ);
    Py_XDECREF(s1);
    Py_XDECREF(s2);
    return eq;
}

/* a.dtype == b.dtype: 1, 0, or -1 on error */
static int same_dtype(PyObject *a, PyObject *b) {
    PyObject *d1 = get_dtype(a), *d2 = d1 ? get_dtype(b) : NULL;
    int eq = d2 == NULL ? -1 : (d1 == d2 ? 1 : PyObject_RichCompareBool(d1, d2, Py_EQ));
    Py_XDECREF(d1);
    Py_XDECREF(d2);
    return eq;
}

/* setup(): does the struct above match what NumPy's attributes say?  1 yes, 0 no (attributes
   are used then), -1 on error */
static int check_layout(void) {
    int ok = 0;
    PyObject *np = PyImport_ImportModule("numpy");
    if (np == NULL) return -1;
    PyObject *dtype_cls = PyObject_GetAttrString(np, "dtype");
    PyObject *one = PyLong_FromLong(1);
    /* probes: a float32 array, a view of it (base set), an int64 vector, an empty bool matrix */
    PyObject *a = PyObject_CallMethod(np, "zeros", "(iii)s", 2, 3, 5, "float32");
    PyObject *v = a && one ? PyObject_GetItem(a, one) : NULL;
    PyObject *i = PyObject_CallMethod(np, "zeros", "is", 4, "int64");
    PyObject *b = PyObject_CallMethod(np, "zeros", "(ii)s", 0, 3, "bool");
    if (dtype_cls == NULL || !PyType_Check(dtype_cls) || a == NULL || v == NULL || i == NULL || b == NULL) {
        PyErr_Clear();
        goto done;
    }
    Py_XSETREF(DescrType, (PyTypeObject *)Py_NewRef(dtype_cls));
    PyObject *probes[] = {a, v, i, b};
    for (int k = 0; k < 4; k++) {
        PyObject *x = probes[k];
        if (Py_TYPE(x) != ArrayType) goto done;
        PyObject *dt = PyObject_GetAttr(x, s_dtype), *sh = shape_of(x), *bs = PyObject_GetAttr(x, s_base);
        PyObject *kind = dt ? PyObject_GetAttr(dt, s_kind) : NULL;
        int good = dt && sh && bs && kind && PyTuple_Check(sh) && PyUnicode_Check(kind) &&
                   ARR(x)->descr == dt && (ARR(x)->base ? ARR(x)->base : Py_None) == bs &&
                   ARR(x)->nd == PyTuple_GET_SIZE(sh) && PyObject_TypeCheck(dt, DescrType) &&
                   PyUnicode_GET_LENGTH(kind) == 1 &&
                   ((np_descr_head *)dt)->kind == (char)PyUnicode_READ_CHAR(kind, 0);
        for (Py_ssize_t d = 0; good && d < PyTuple_GET_SIZE(sh); d++)
            good = PyLong_AsSsize_t(PyTuple_GET_ITEM(sh, d)) == ARR(x)->dimensions[d];
        Py_XDECREF(dt);
        Py_XDECREF(sh);
        Py_XDECREF(bs);
        Py_XDECREF(kind);
        if (!good) {
            PyErr_Clear();
            goto done;
        }
    }
    ok = ARR(v)->base == a && ARR(a)->base == NULL && ((np_descr_head *)ARR(a)->descr)->kind == 'f' &&
         ((np_descr_head *)ARR(i)->descr)->kind == 'i' && ((np_descr_head *)ARR(b)->descr)->kind == 'b';
done:
    Py_XDECREF(one);
    Py_XDECREF(a);
    Py_XDECREF(v);
    Py_XDECREF(i);
    Py_XDECREF(b);
    Py_XDECREF(dtype_cls);
    Py_DECREF(np);
    return ok;
}

static char dtype_kind_attr(PyObject *dtype) {
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
static PyObject *shape_of(PyObject *a) {
    if (layout_ok && Py_TYPE(a) == ArrayType) {
        /* ndarray.shape's tuple of ints, built from the fields (no attribute look-up) */
        int nd = ARR(a)->nd;
        PyObject *t = PyTuple_New(nd);
        if (t == NULL) return NULL;
        for (int i = 0; i < nd; i++) {
            PyObject *o = PyLong_FromSsize_t(ARR(a)->dimensions[i]);
            if (o == NULL) {
                Py_DECREF(t);
                return NULL;
            }
            PyTuple_SET_ITEM(t, i, o);
        }
        return t;
    }
    return PyObject_GetAttr(a, s_shape);
}

/* Meta(shape, dtype) of a Tensor's array: a new instance with its two slots set, as
   Meta.__init__; new reference */
static PyObject *make_meta(PyObject *a) {
    PyObject *d = SLOT(a, t_data);
    PyObject *shape = shape_of(d);
    PyObject *dt = shape ? get_dtype(d) : NULL;
    PyObject *m = dt ? alloc_none((PyTypeObject *)MetaType, meta_slots, n_meta_slots) : NULL;
    if (m != NULL) {
        set_slot(m, m_shape, shape);
        set_slot(m, m_dtype, dt);
        untrack_shape(shape);
        if (!PyObject_IS_GC(dt)) gc_untrack(m);   /* NumPy's dtypes are not GC objects */
    }
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    return m;
}

static PyObject *make_meta_list(PyObject *args, Py_ssize_t n) {
    PyObject *lst = PyList_New(n);
    if (lst == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *m;
        if (PyObject_TypeCheck(a, TensorType)) {
            m = make_meta(a);
            if (m == NULL) {
                Py_DECREF(lst);
                return NULL;
            }
        } else {
            m = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(lst, i, m);
    }
    untrack_if_atomic(lst);
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
        PyObject *ob = get_base(d);
        if (ob == NULL) return -1;
        if (ob == Py_None && Py_TYPE(d) == ArrayType) {
            share = 0; /* a fresh array that owns its memory */
        } else if (ob == bd) {
            share = 1;
        } else {
            PyObject *bb = get_base(bd);
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
            gc_untrack(cell);   /* a version counter: [int] */
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
    PyObject *fx = NULL, *ne = NULL;
    if (node == NULL) goto fail;
    /* the edges, flat in the node's slots (Edges above; graph._set_edges builds the same) */
    char has_edge[BIND_MAX_ARGS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        has_edge[i] = PyObject_TypeCheck(a, TensorType) && TRUTHY(SLOT(a, t_rg));
    }
    PyObject *nondiff = SLOT(prim, p_nondiff);
    if (PyTuple_Check(nondiff)) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(nondiff); k++) {
            Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(nondiff, k));
            if (idx == -1 && PyErr_Occurred()) goto fail;
            if (idx >= 0 && idx < n) has_edge[idx] = 0;
        }
    }
    if (n > INLINE_EDGES && (fx = PyTuple_New(2 * (n - INLINE_EDGES))) == NULL) goto fail;
    const Py_ssize_t fo[INLINE_EDGES] = {n_f0, n_f1, n_f2}, no[INLINE_EDGES] = {n_n0, n_n1, n_n2};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *f = Py_None, *nr = Py_None;
        if (has_edge[i]) {
            f = SLOT(a, t_fn);
            if (f == Py_None) {
                f = a; /* a leaf: (leaf, 0) */
                nr = ZERO;
            } else {
                nr = SLOT(a, t_nr);
            }
        }
        if (i < INLINE_EDGES) {
            set_slot(node, fo[i], f);
            set_slot(node, no[i], nr);
        } else {
            PyTuple_SET_ITEM(fx, 2 * (i - INLINE_EDGES), Py_NewRef(f));
            PyTuple_SET_ITEM(fx, 2 * (i - INLINE_EDGES) + 1, Py_NewRef(nr));
        }
    }
    if ((ne = PyLong_FromSsize_t(n)) == NULL) goto fail;
    set_slot(node, n_ne, ne);
    Py_CLEAR(ne);
    if (fx != NULL) {
        set_slot(node, n_fx, fx);
        Py_CLEAR(fx);
    }
    set_slot(node, n_prim, prim);
    set_slot(node, n_params, params);
    untrack_params(params);
    set_slot(node, n_n_out, ONE);
    if (PyObject_IsTrue(SLOT(prim, p_save_inputs))) {
        /* save_for: keep only the inputs that the rules of the differentiable inputs read */
        char keep[BIND_MAX_ARGS];
        PyObject *save_for = SLOT(prim, p_save_for);
        for (Py_ssize_t i = 0; i < n; i++) keep[i] = save_for == Py_None;
        if (save_for != Py_None) {
            for (Py_ssize_t i = 0; i < n && i < PyTuple_GET_SIZE(save_for); i++) {
                if (!has_edge[i]) continue;
                PyObject *need_i = PyTuple_GET_ITEM(save_for, i);
                for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(need_i); k++) {
                    Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(need_i, k));
                    if (j >= 0 && j < n) keep[j] = 1;
                }
            }
        }
        /* light: kept Tensor inputs whose rules read only their shape and dtype are saved as a
           Meta (neither kept alive nor version-checked), as registry.record does */
        PyObject *metas[BIND_MAX_ARGS];
        for (Py_ssize_t i = 0; i < n; i++) metas[i] = NULL;
        PyObject *light = SLOT(prim, p_light);
        if (PyTuple_Check(light)) {
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(light); k++) {
                Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(light, k));
                if (j == -1 && PyErr_Occurred()) goto fail_metas;
                if (j >= 0 && j < n && keep[j] && metas[j] == NULL &&
                    PyObject_TypeCheck(PyTuple_GET_ITEM(args, j), TensorType) &&
                    (metas[j] = make_meta(PyTuple_GET_ITEM(args, j))) == NULL)
                    goto fail_metas;
            }
        }
        /* the saved arguments go in the node's slots (saved_count above; the Node.saved setter
           builds the same from registry.record's tuple): the args, None where not kept */
        PyObject *sx = NULL, *sn = NULL;
        const Py_ssize_t so[INLINE_EDGES] = {n_s0, n_s1, n_s2};
        if (n > INLINE_EDGES && (sx = PyTuple_New(n - INLINE_EDGES)) == NULL) goto fail_metas;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = !keep[i] ? Py_None : metas[i] ? metas[i] : PyTuple_GET_ITEM(args, i);
            if (i < INLINE_EDGES)
                set_slot(node, so[i], a);
            else
                PyTuple_SET_ITEM(sx, i - INLINE_EDGES, Py_NewRef(a));
        }
        if ((sn = PyLong_FromSsize_t(n)) == NULL) {
            Py_XDECREF(sx);
            goto fail_metas;
        }
        set_slot(node, n_sn, sn);
        Py_DECREF(sn);
        if (sx != NULL) {
            untrack_tuple_if_atomic(sx);
            set_slot(node, n_sx, sx);
            Py_DECREF(sx);
        }
        PyObject *dl = PyList_New(n), *vl = PyList_New(n);
        if (dl == NULL || vl == NULL) {
            Py_XDECREF(dl);
            Py_XDECREF(vl);
            goto fail_metas;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *a = saved_item(node, i);
            PyList_SET_ITEM(dl, i, Py_NewRef(!keep[i] ? Py_None : metas[i] ? metas[i] : datas[i]));
            PyObject *v;
            if (PyObject_TypeCheck(a, TensorType)) {
                PyObject *vc = SLOT(a, t_vc);
                v = vc == Py_None ? Py_NewRef(ZERO) : PySequence_GetItem(vc, 0);
                if (v == NULL) {
                    Py_DECREF(dl);
                    Py_DECREF(vl);
                    goto fail_metas;
                }
            } else {
                v = Py_NewRef(Py_None);
            }
            PyList_SET_ITEM(vl, i, v);
        }
        untrack_if_atomic(dl);
        untrack_if_atomic(vl);
        set_slot(node, n_saved_data, dl);
        set_slot(node, n_saved_versions, vl);
        Py_DECREF(dl);
        Py_DECREF(vl);
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(metas[i]);
        goto done;
    fail_metas:
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(metas[i]);
        goto fail;
    }
done:
    /* (nothing saved: _sn, saved_data and saved_versions stay None from alloc_none) */
    return node;
fail:
    Py_XDECREF(node);
    Py_XDECREF(fx);
    Py_XDECREF(ne);
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
            PyObject *dt = get_dtype(o);
            PyObject *sh = dt ? shape_of(o) : NULL;
            PyObject *pair = sh ? PyTuple_Pack(2, sh, dt) : NULL;
            floating = dt ? dtype_kind(dt) == 'f' : 0;
            Py_XDECREF(dt);
            Py_XDECREF(sh);
            if (pair == NULL) goto fail;
            /* (shape, dtype): atomic, as the shape tuple is (see untrack_shape) */
            untrack_shape(PyTuple_GET_ITEM(pair, 0));
            untrack_tuple_if_atomic(pair);
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
        untrack_tuple_if_atomic(meta);
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

/* this thread's dict of the dispatch state (a threading.local), borrowed; NULL (no error set)
   when it cannot be had, and state_get then reads the attribute the ordinary way */
static PyObject *state_dict(void) {
    PyObject *d = PyObject_GetAttr(State, s_dict);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(d);   /* the thread's dict outlives this call: the thread state holds it */
    return PyDict_CheckExact(d) ? d : NULL;
}

/* STATE.<name> (new reference): from the thread's dict, else by attribute (_State defines
   no class attributes of these names, so the instance dict is what getattr would read) */
static PyObject *state_get(PyObject *ldict, PyObject *name) {
    if (ldict != NULL) {
        PyObject *v = PyDict_GetItemWithError(ldict, name);
        if (v != NULL) return Py_NewRef(v);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(State, name);
}

/* impl(*datas, **params) as PyObject_VectorcallDict makes it, without building a keyword-names
   tuple per call: the params' values go after the datas and the names tuple is reused while
   the params' keys are the same string objects (``{"dim": d}`` literals: the code object's
   interned constants).  Dicts of other keys, or of more than KW_MAX, take VectorcallDict. */
#define KW_MAX 6
#define KW_SLOTS 16
static PyObject *kw_names_cache[KW_SLOTS];

static PyObject *call_impl(PyObject *impl, PyObject *const *datas, Py_ssize_t n, PyObject *params) {
    if (params == NULL || PyDict_GET_SIZE(params) == 0) return PyObject_Vectorcall(impl, datas, n, NULL);
    Py_ssize_t k = PyDict_GET_SIZE(params);
    if (k > KW_MAX || !PyDict_CheckExact(params)) return PyObject_VectorcallDict(impl, datas, n, params);
    PyObject *stack[1 + 64 + KW_MAX], *keys[KW_MAX];   /* stack[0]: room for ARGUMENTS_OFFSET */
    if (n > 64) return PyObject_VectorcallDict(impl, datas, n, params);
    for (Py_ssize_t i = 0; i < n; i++) stack[1 + i] = datas[i];
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    size_t h = 0;
    while (PyDict_Next(params, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return PyObject_VectorcallDict(impl, datas, n, params);
        keys[i] = key;
        stack[1 + n + i] = value;
        h = h * 31 + ((size_t)key >> 4);
        i++;
    }
    PyObject *names = kw_names_cache[h % KW_SLOTS];
    int hit = names != NULL && PyTuple_GET_SIZE(names) == k;
    for (Py_ssize_t j = 0; hit && j < k; j++) hit = PyTuple_GET_ITEM(names, j) == keys[j];
    if (!hit) {
        PyObject *fresh = PyTuple_New(k);
        if (fresh == NULL) return NULL;
        for (Py_ssize_t j = 0; j < k; j++) PyTuple_SET_ITEM(fresh, j, Py_NewRef(keys[j]));
        Py_XSETREF(kw_names_cache[h % KW_SLOTS], fresh);
        names = fresh;
    }
    /* the values are the dict's (borrowed): held for the call, as VectorcallDict's copy does */
    Py_INCREF(names);
    for (Py_ssize_t j = 0; j < k; j++) Py_INCREF(stack[1 + n + j]);
    PyObject *out = PyObject_Vectorcall(impl, stack + 1, n | PY_VECTORCALL_ARGUMENTS_OFFSET, names);
    for (Py_ssize_t j = 0; j < k; j++) Py_DECREF(stack[1 + n + j]);
    Py_DECREF(names);
    return out;
}

/* the forwards of reshape_p and expand_p when surface_setup ran (see the fast surfaces) */
static PyObject *ReshapeImpl = NULL, *ExpandImpl = NULL;
static PyObject *s_reshape;
static PyObject *f_expand_view(PyObject *self, PyObject *const *a, Py_ssize_t na);

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
        /* a new reference, released on every exit as before */
        empty_params = Py_NewRef(EmptyParams);
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

    /* interpreter / anomaly: Python path.  STATE is a threading.local: every attribute read
       finds this thread's dict first, so the dict is fetched once and the fields read from it
       (state_get; the dict lives as long as the thread, so a borrowed pointer is enough) */
    PyObject *ldict = state_dict();
    PyObject *interp = state_get(ldict, s_interpreter);
    if (interp == NULL) return NULL;
    if (interp != Py_None) {
        /* the innermost interpreter's process(prim, args, params), as _bind_py calls it,
           without _bind_py's frame (dg.autobatch records every call through here; its
           process is a C method when dyngraph._autobatch is built) */
        PyObject *pargs[4] = {interp, prim, args, params};
        PyObject *r_ = PyObject_VectorcallMethod(s_process, pargs,
                                                 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(interp);
        Py_XDECREF(empty_params);
        return r_;
    }
    Py_DECREF(interp);
    PyObject *anom = state_get(ldict, s_anomaly);
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
                PyObject *ddt = get_dtype(d);
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
            PyObject *dt = get_dtype(datas[i]);
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
    /* forward: a vectorcall on the datas array (no argument tuple) */
    PyObject *out;
    PyObject *kw = has_params ? params : NULL;
    PyObject *quiet_impl = SLOT(prim, p_quiet_impl);
    if (quiet_impl != Py_None && FpVar != NULL) {
        /* ops/_util.py's quiet_fp: set the FP state, run the wrapped forward, reset the state
           whatever happened (the wrapper's try/finally) */
        PyObject *token = PyContextVar_Set(FpVar, FpQuiet);
        if (token == NULL) {
            Py_XDECREF(empty_params);
            return NULL;
        }
        out = call_impl(quiet_impl, datas, n, kw);
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        int reset = PyContextVar_Reset(FpVar, token);
        Py_DECREF(token);
        if (reset < 0) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            Py_XDECREF(out);
            Py_XDECREF(empty_params);
            return NULL;
        }
        PyErr_Restore(et, ev, tb);
    } else {
        PyObject *impl = SLOT(prim, p_impl);
        out = NULL;
        if (impl != NULL && (impl == ReshapeImpl || impl == ExpandImpl) && n == 1 && has_params &&
            Py_TYPE(datas[0]) == ArrayType && PyDict_GET_SIZE(params) == 1) {
            /* reshape_p / expand_p as set up (their impl not replaced since): the body of the
               Python forward without its frame -- x.reshape(shape), or expand_view's view */
            PyObject *shape = PyDict_GetItemWithError(params, s_shape);
            if (shape == NULL && PyErr_Occurred()) {
                Py_XDECREF(empty_params);
                return NULL;
            }
            if (shape != NULL && PyTuple_CheckExact(shape)) {
                PyObject *fa[2] = {datas[0], shape};
                if (impl == ReshapeImpl) {
                    out = PyObject_VectorcallMethod(s_reshape, fa, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                    if (out == NULL) goto forward_failed;
                } else {
                    out = f_expand_view(NULL, fa, 2);
                    if (out == NULL) goto forward_failed;
                    if (out == Py_None) Py_CLEAR(out);   /* expand_p's own code decides */
                }
            }
        }
        if (out == NULL) out = call_impl(impl, datas, n, kw);
    }
forward_failed:
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
        PyObject *ge = state_get(ldict, s_grad_enabled);
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
        PyObject *outdt = get_dtype(out);
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
        for (Py_ssize_t i = 0; i < n && !want_meta; i++) {
            if (Py_TYPE(datas[i]) != ArrayType) continue;
            int eq = same_shape(datas[i], out);
            if (eq == 1) eq = same_dtype(datas[i], out);
            if (eq < 0) goto fail_node;
            if (!eq) want_meta = 1;
        }
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
            gc_untrack(cell);   /* a version counter: [int] */
            set_slot(t, t_vc, cell);
            set_slot(node, n_out_vc, cell);   /* (a slot: no generic setattr) */
            Py_DECREF(cell);
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
    PyObject *b = get_base(old);
    if (b == NULL) return -1;
    int ok = b == Py_None;
    Py_DECREF(b);
    if (!ok) return 0;
    ok = same_dtype(old, gi);
    if (ok != 1) return ok;
    ok = same_shape(old, gi);
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

/* engine._add_to_buffer(buffers, child, nr, gi) for a multi-output child (gi borrowed):
   0 done, -1 error.  Anything unusual (a buffer that is not a list, an output number out
   of range) goes to the Python function. */
static int add_to_list_buffer(PyObject *buffers, PyObject *child, PyObject *nr, PyObject *gi,
                              PyObject *add_cb, PyObject *fit_cb) {
    PyObject *cont = PyDict_GetItemWithError(buffers, child);
    if (cont == NULL && PyErr_Occurred()) return -1;
    Py_ssize_t n = PyLong_AsSsize_t(SLOT(child, n_n_out));
    Py_ssize_t k = PyLong_Check(nr) ? PyLong_AsSsize_t(nr) : -1;
    if (n == -1 || k == -1) {
        if (PyErr_Occurred()) PyErr_Clear();
        goto slow;
    }
    if (k >= n || (cont != NULL && (!PyList_CheckExact(cont) || PyList_GET_SIZE(cont) != n)))
        goto slow;
    if (cont == NULL) {
        cont = PyList_New(n);
        if (cont == NULL) return -1;
        for (Py_ssize_t j = 0; j < n; j++) PyList_SET_ITEM(cont, j, Py_NewRef(Py_None));
        int r = PyDict_SetItem(buffers, child, cont);
        Py_DECREF(cont); /* the dict holds it */
        if (r < 0) return -1;
    }
    PyObject *old = PyList_GET_ITEM(cont, k);
    if (old == Py_None) {
        PyList_SetItem(cont, k, Py_NewRef(gi));
        return 0;
    }
    int inplace = addable_in_place(old, gi);
    if (inplace < 0) return -1;
    PyObject *sum = inplace ? PyNumber_InPlaceAdd(old, gi) : PyNumber_Add(old, gi);
    if (sum == NULL) return -1;
    if (Py_TYPE(sum) != ArrayType) {
        PyObject *f = PyObject_CallFunctionObjArgs(fit_cb, sum, Py_None, NULL);
        Py_DECREF(sum);
        if (f == NULL) return -1;
        sum = f;
    }
    PyList_SetItem(cont, k, sum); /* steals sum; releases old */
    return 0;
slow:;
    PyObject *r = PyObject_CallFunctionObjArgs(add_cb, buffers, child, nr, gi, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/*
 * backward_loop: the engine's plain-backward loop (dyngraph/autograd/engine.py).
 * Runs nodes whose gradients have all arrived; simple nodes (a Primitive with
 * rules, no hooks; with several outputs when each received a gradient) are handled
 * here, everything else -- leaves, custom Functions, hooked nodes, multi-output nodes
 * with an output that got no gradient, errors -- by the Python
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
        Edges E = {0}; /* the fast node's edges, held while it runs */
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
        int multi = 0; /* a multi-output node (split's pieces): g is its list of gradients */
        if (fast) {
            prim = SLOT(v, n_prim);
            fast = Py_TYPE(prim) == PrimitiveType;
            if (fast && SLOT(v, n_n_out) != ONE) {
                /* every output received a gradient (else engine._fill_missing's zeros: the
                   general path); the rule gets them as a tuple, as from _fill_missing */
                fast = PyList_CheckExact(g);
                for (Py_ssize_t k = 0; fast && k < PyList_GET_SIZE(g); k++)
                    if (PyList_GET_ITEM(g, k) == Py_None) fast = 0;
                multi = fast;
            }
        }
        if (fast) {
            rules = SLOT(prim, p_vjp_rules);
            if (rules == Py_None && SLOT(prim, p_vjp_argnum) != Py_None)
                argnum_rule = SLOT(prim, p_vjp_argnum);
            /* saved arguments: none, or in the slot layout with one version each */
            PyObject *sv = SLOT(v, n_sn);
            Py_ssize_t ns = sv == Py_None ? 0 : saved_count(v);
            fast = (PyTuple_Check(rules) || argnum_rule != NULL) &&
                   (sv == Py_None || (ns >= 0 && PyList_Check(SLOT(v, n_saved_versions)) &&
                                      PyList_GET_SIZE(SLOT(v, n_saved_versions)) == ns));
        }
        /* edges in another layout (set directly, not through Node.edges): the general path */
        if (fast && edges_get(v, &E) < 0) fast = 0;
        if (fast && argnum_rule == NULL) {
            /* a missing rule is reported by the general path (registry.missing_rule) */
            Py_ssize_t nr = PyTuple_GET_SIZE(rules);
            for (Py_ssize_t i = 0; i < E.n && fast; i++)
                if (edge_fn(&E, i) != Py_None && (i >= nr || PyTuple_GET_ITEM(rules, i) == Py_None))
                    fast = 0;
        }
        if (fast) {
            PyObject *sp = PyObject_GetAttr(v, s_special);
            if (sp == NULL) goto fail_g;
            fast = sp == Py_False;
            Py_DECREF(sp);
        }
        if (!fast) {
            edges_release(&E);
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
        if (multi) {
            PyObject *tg = PyList_AsTuple(g);
            if (tg == NULL) goto fail_g;
            Py_SETREF(g, tg);
        }
        PyObject *node = v;
        int saved = SLOT(node, n_sn) != Py_None; /* in the slot layout: checked above */
        PyObject *inputs;            /* borrowed sequence of rule inputs */
        PyObject *nones = NULL;
        Py_ssize_t ne = E.n;
        if (saved) {
            PyObject *versions = SLOT(node, n_saved_versions);
            Py_ssize_t ns = saved_count(node);
            for (Py_ssize_t i = 0; i < ns; i++) {
                PyObject *ver = PyList_GET_ITEM(versions, i);
                if (ver == Py_None) continue;
                PyObject *a = saved_item(node, i);
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
        if (bcast && meta == Py_None && !multi) {
            /* no input needed fitting (shapes and dtypes equal the output's): gradients still
               take the output's dtype, which g has (registry.record / engine._apply_rules) */
            gdt = get_dtype(g);
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
            PyObject *child = edge_fn(&E, i);
            if (child == Py_None) continue;
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
                    PyObject *d = get_dtype(gi);
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
                    /* engine._add_to_buffer for a multi-output child: its buffer is a list
                       of one gradient per output, summed in place when the entry is the
                       list's alone (the same test as for one output) */
                    int r = add_to_list_buffer(buffers, child, edge_nr(&E, i), gi, add_cb, fit_cb);
                    Py_DECREF(gi);
                    if (r < 0) {
                        Py_DECREF(callargs);
                        goto fail_nones;
                    }
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
        edges_release(&E);
        if (!retain && (saved || out != Py_None)) {
            /* as `node.saved = FREED` (engine._run_node_now): the saved arguments released */
            set_slot(node, n_sn, freed);
            set_slot(node, n_s0, Py_None);
            set_slot(node, n_s1, Py_None);
            set_slot(node, n_s2, Py_None);
            set_slot(node, n_sx, Py_None);
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
        edges_release(&E);
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
        Edges E;
        if (edges_get(v, &E) < 0) {
            PyErr_Format(PyExc_TypeError, "engine: the edges of %R are not in Node's layout (set them "
                         "through Node.edges)", v);
            Py_DECREF(v);
            goto fail;
        }
        Py_DECREF(v);
        for (Py_ssize_t i = 0; i < E.n; i++) {
            PyObject *c = edge_fn(&E, i);
            if (c == Py_None) continue;
            PyObject *cnt = PyDict_GetItemWithError(deps, c);
            if (cnt == NULL && PyErr_Occurred()) {
                edges_release(&E);
                goto fail;
            }
            PyObject *nc = PyLong_FromLong(cnt == NULL ? 1 : PyLong_AsLong(cnt) + 1);
            int r = nc == NULL ? -1 : PyDict_SetItem(deps, c, nc);
            Py_XDECREF(nc);
            if (r < 0 || (cnt == NULL && PyList_Append(stack, c) < 0)) {
                edges_release(&E);
                goto fail;
            }
        }
        edges_release(&E);
    }
    Py_DECREF(stack);
    return deps;
fail:
    Py_XDECREF(deps);
    Py_XDECREF(stack);
    return NULL;
}

/* mark_views(outs, base): registry._mark_view on every Tensor of the tuple/list `outs` (the
   pieces of split/chunk/unbind: multi-output views marked by the surface), in C; returns outs */
static PyObject *mark_views(PyObject *self, PyObject *const *fargs, Py_ssize_t nfargs) {
    if (nfargs != 2 || TensorType == NULL) {
        PyErr_SetString(PyExc_TypeError, "mark_views(outs, base)");
        return NULL;
    }
    PyObject *outs = fargs[0], *base = fargs[1];
    PyObject *seq = PySequence_Fast(outs, "mark_views: outs must be a sequence");
    if (seq == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (Py_TYPE(o) != TensorType) continue;   /* registry: ``type(o) is Tensor`` */
        if (mark_view(o, base) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return Py_NewRef(outs);
}

/* --- small array loops (the buffer protocol: no NumPy headers) ----------------------------
   Loops that NumPy runs through per-call machinery costing several times the work on the
   small arrays of per-item models.  Each returns False/None where it does not apply (the
   caller then takes its NumPy path, which stays the reference) and gives NumPy's bits. */

/* buffer format -> 'f' (float32), 'd' (float64), 'q' (int64), 'i' (int32) or 0 */
static char buf_kind(const Py_buffer *b) {
    const char *f = b->format ? b->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') f++;   /* native (little-endian x86/arm) */
    if (f[0] == 0 || f[1] != 0) return 0;
    switch (f[0]) {
    case 'f': return b->itemsize == 4 ? 'f' : 0;
    case 'd': return b->itemsize == 8 ? 'd' : 0;
    case 'l': case 'q': return b->itemsize == 8 ? 'q' : 0;
    case 'i': return b->itemsize == 4 ? 'i' : 0;
    default: return 0;
    }
}

/* --- shared by the fast surfaces (below) and the loops' field reads ----------------------- */
static PyObject *ReshapeP = NULL, *ExpandP = NULL, *CatP = NULL, *StackP = NULL, *SplitP = NULL;
static PyObject *s_dim, *s_sizes;
static int surface_ok = 0;   /* set by surface_setup: the primitives and the flags probe */

#define NP_C_CONTIGUOUS 0x0001
#define NP_WRITEABLE 0x0400
#define NP_WARN_ON_WRITE ((int)(1u << 31))

/* a Tensor whose data is an exact ndarray (borrowed data), else NULL */
static inline PyObject *plain_data(PyObject *x) {
    if (!PyObject_TypeCheck(x, TensorType)) return NULL;
    PyObject *d = SLOT(x, t_data);
    return Py_TYPE(d) == ArrayType ? d : NULL;
}

/* bind(prim, args, {key: value}) for args a new tuple (stolen) */
static PyObject *bind_params1(PyObject *prim, PyObject *args, PyObject *key, PyObject *value) {
    if (args == NULL) return NULL;
    PyObject *params = PyDict_New();
    if (params == NULL || PyDict_SetItem(params, key, value) < 0) {
        Py_XDECREF(params);
        Py_DECREF(args);
        return NULL;
    }
    PyObject *fa[3] = {prim, args, params};
    PyObject *r = bind(NULL, fa, 3);
    Py_DECREF(params);
    Py_DECREF(args);
    return r;
}

/* a tuple of n Py_ssize_t values, new reference */
static PyObject *int_tuple(const Py_ssize_t *v, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyLong_FromSsize_t(v[i]);
        if (o == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

/* an exact int (not a bool, not a subclass) that fits a Py_ssize_t: returns 0 and sets *out,
   1 when not such an int (NotImplemented for the caller), -1 on error */
static int small_int(PyObject *o, Py_ssize_t *out) {
    if (!PyLong_CheckExact(o)) return 1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return 1;
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v > PY_SSIZE_T_MAX || v < PY_SSIZE_T_MIN) return 1;   /* (32-bit builds) */
    *out = (Py_ssize_t)v;
    return 0;
}

#define NOT_IMPL() Py_RETURN_NOTIMPLEMENTED
#define SURFACE_MAX_DIMS 64

/* The canonical float32/float64/int64 dtypes (surface_setup): an exact ndarray of one of them
   is described to the loops below from its fields (fields_buffer), without a buffer request
   (~0.1-0.15 us each); other arrays take the buffer protocol as before. */
static PyObject *DtF32 = NULL, *DtF64 = NULL, *DtI64 = NULL;

/* fill *b from a's fields as PyObject_GetBuffer would (C-contiguous and/or writable when asked):
   1 done (b->obj is NULL: PyBuffer_Release does nothing), 0 not such an array */
static int fields_buffer(PyObject *a, Py_buffer *b, int need_c, int need_w) {
    if (!surface_ok || Py_TYPE(a) != ArrayType) return 0;
    PyObject *dt = ARR(a)->descr;
    const char *fmt;
    Py_ssize_t isz;
    if (dt == DtF32) {
        fmt = "f";
        isz = 4;
    } else if (dt == DtF64) {
        fmt = "d";
        isz = 8;
    } else if (dt == DtI64) {
        fmt = "q";
        isz = 8;
    } else {
        return 0;
    }
    int fl = ARR(a)->flags;
    if ((need_c && !(fl & NP_C_CONTIGUOUS)) || (need_w && !(fl & NP_WRITEABLE))) return 0;
    Py_ssize_t n = 1;
    for (int d = 0; d < ARR(a)->nd; d++) n *= ARR(a)->dimensions[d];
    b->buf = ARR(a)->data;
    b->obj = NULL;
    b->len = n * isz;
    b->itemsize = isz;
    b->readonly = !(fl & NP_WRITEABLE);
    b->ndim = ARR(a)->nd;
    b->format = (char *)fmt;
    b->shape = ARR(a)->dimensions;
    b->strides = ARR(a)->strides;
    b->suboffsets = NULL;
    b->internal = NULL;
    return 1;
}

/* rows_add(out, rows, vals): np.add.at(out, rows, vals) along the first axis -- out[rows[i]]
   += vals[i] for i in order, as ufunc.at visits them (the same sums in the same order: the
   same bits).  out: writable C-contiguous float32/float64 of >= 1 row; rows: 1-D int64 (any
   stride), entries in [-n, n) (a negative one wraps, as in NumPy), or an (m, *out.shape[1:])
   int64 index whose entries repeat along every axis but the first (zero strides: an
   expand()ed row index); vals: C-contiguous, the dtype of out, len(rows) rows of out's row
   size (the index's shape for an expanded index), not overlapping out.  False (nothing
   written) otherwise. */
/* orow[j] += vrow[j] for j < r: 16-byte blocks through GCC/Clang vector types (SSE2/NEON
   adds; -O2 leaves the plain loop scalar), then the rest; each element gets the one IEEE
   addition of the plain loop (the same bits) */
#if defined(__GNUC__)
typedef float rows_v4f __attribute__((vector_size(16)));
typedef double rows_v2d __attribute__((vector_size(16)));
#define ROW_ADD_BLOCKS(VT, W, orow, vrow, r, j)                 \
    for (; j + W <= (r); j += W) {                              \
        VT o_, v_;                                              \
        memcpy(&o_, (orow) + j, sizeof o_);                     \
        memcpy(&v_, (vrow) + j, sizeof v_);                     \
        o_ += v_;                                               \
        memcpy((orow) + j, &o_, sizeof o_);                     \
    }
#else
#define ROW_ADD_BLOCKS(VT, W, orow, vrow, r, j)
#endif
#define ROW_ADD(VT, W, orow, vrow, r)                           \
    do {                                                        \
        Py_ssize_t j_ = 0;                                      \
        ROW_ADD_BLOCKS(VT, W, orow, vrow, r, j_)                \
        for (; j_ < (r); j_++) (orow)[j_] += (vrow)[j_];        \
    } while (0)

static PyObject *rows_add(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) {
        PyErr_SetString(PyExc_TypeError, "rows_add(out, rows, vals)");
        return NULL;
    }
    Py_buffer ob, rb, vb;
    int ok = 0;
    if (!fields_buffer(a[0], &ob, 1, 1) &&
        PyObject_GetBuffer(a[0], &ob, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    if (!fields_buffer(a[1], &rb, 0, 0) && PyObject_GetBuffer(a[1], &rb, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&ob);
        Py_RETURN_FALSE;
    }
    if (!fields_buffer(a[2], &vb, 1, 0) && PyObject_GetBuffer(a[2], &vb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&rb);
        PyBuffer_Release(&ob);
        Py_RETURN_FALSE;
    }
    char k = buf_kind(&ob);
    /* an expanded index (``dst.unsqueeze(1).expand(-1, H)`` for a scatter_add_ along dim 0):
       rows of out's row shape whose entries repeat one row number (zero strides), with vals
       of the index's shape -- scatter_add's np.add.at(out, (rows, cols...), vals) visits the
       same elements in the same order as whole-row additions */
    int expanded = rb.ndim >= 2 && rb.ndim == ob.ndim && vb.ndim == rb.ndim;
    for (int d = 1; expanded && d < rb.ndim; d++)
        expanded = rb.shape[d] == ob.shape[d] && vb.shape[d] == rb.shape[d] &&
                   (rb.strides[d] == 0 || rb.shape[d] == 1);
    expanded = expanded && vb.shape[0] == rb.shape[0];
    if ((k == 'f' || k == 'd') && buf_kind(&vb) == k && buf_kind(&rb) == 'q' && (rb.ndim == 1 || expanded) &&
        ob.ndim >= 1 && ob.shape[0] > 0) {
        Py_ssize_t nrow = ob.shape[0], m = rb.shape[0], st = rb.strides[0];
        Py_ssize_t r = ob.len / ob.itemsize / nrow;
        const char *rp = (const char *)rb.buf;
        const char *o0 = (const char *)ob.buf, *v0 = (const char *)vb.buf;
        if (vb.len == m * r * vb.itemsize && (o0 + ob.len <= v0 || v0 + vb.len <= o0)) {
            ok = 1;
            for (Py_ssize_t i = 0; i < m && ok; i++) {
                long long row = *(const long long *)(rp + i * st);
                if (row < 0) row += nrow;
                ok = row >= 0 && row < nrow;
            }
        }
        /* (out and vals do not overlap, checked above: restrict lets the row loops vectorise;
           each element still gets its additions one by one, in order) */
        if (ok && k == 'd') {
            double *o = (double *)ob.buf;
            const double *v = (const double *)vb.buf;
            for (Py_ssize_t i = 0; i < m; i++) {
                long long row = *(const long long *)(rp + i * st);
                double *restrict orow = o + (row < 0 ? row + nrow : row) * r;
                const double *restrict vrow = v + i * r;
                ROW_ADD(rows_v2d, 2, orow, vrow, r);
            }
        } else if (ok) {
            float *o = (float *)ob.buf;
            const float *v = (const float *)vb.buf;
            for (Py_ssize_t i = 0; i < m; i++) {
                long long row = *(const long long *)(rp + i * st);
                float *restrict orow = o + (row < 0 ? row + nrow : row) * r;
                const float *restrict vrow = v + i * r;
                ROW_ADD(rows_v4f, 4, orow, vrow, r);
            }
        }
    }
    PyBuffer_Release(&vb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&ob);
    return PyBool_FromLong(ok);
}

/* index_below(ia, n): whether every entry of the int64/int32 array ia (any strides, zero
   strides of an expand() included) is in [0, n); None for other arrays. */
static PyObject *index_below(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    long long n;
    if (na != 2 || ((n = PyLong_AsLongLong(a[1])) == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "index_below(ia, n)");
        return NULL;
    }
    Py_buffer b;
    if (!fields_buffer(a[0], &b, 0, 0) && PyObject_GetBuffer(a[0], &b, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char k = buf_kind(&b);
    if ((k != 'q' && k != 'i') || b.ndim > 32) {
        PyBuffer_Release(&b);
        Py_RETURN_NONE;
    }
    /* the dimensions that reach distinct entries: a zero stride (an expand()) repeats the same
       ones, a size-1 dimension has one; an empty array has none to check */
    Py_ssize_t shp[32], str[32], idx[32];
    int nd = 0, ok = 1;
    for (int d = 0; d < b.ndim; d++) {
        if (b.shape[d] == 0) {
            PyBuffer_Release(&b);
            Py_RETURN_TRUE;
        }
        if (b.shape[d] > 1 && b.strides[d] != 0) {
            shp[nd] = b.shape[d];
            str[nd] = b.strides[d];
            idx[nd++] = 0;
        }
    }
    const char *p = (const char *)b.buf;
    Py_ssize_t inner = nd ? shp[nd - 1] : 1, ist = nd ? str[nd - 1] : 0;
    /* the last dimension in one loop, an odometer over the others */
    while (ok) {
        if (k == 'q') {
            for (Py_ssize_t i = 0; i < inner; i++) {
                long long v = *(const long long *)(p + i * ist);
                ok &= v >= 0 && v < n;
            }
        } else {
            for (Py_ssize_t i = 0; i < inner; i++) {
                long long v = *(const int *)(p + i * ist);
                ok &= v >= 0 && v < n;
            }
        }
        int d = nd - 2;
        for (; d >= 0; d--) {
            p += str[d];
            if (++idx[d] < shp[d]) break;
            p -= str[d] * shp[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    PyBuffer_Release(&b);
    return PyBool_FromLong(ok);
}

/* gather_check(input, dim, index, src): surface/indexing.py _check_gather_like's first branch
   -- an exact Tensor index of int64/int32 entries, of input's rank, within input's sizes off
   dim and src's sizes (a Tensor src of that rank), every entry in [0, input.shape[dim]) --
   returns dim wrapped; NotImplemented for anything else (the Python checks decide then). */
static PyObject *f_gather_check(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 4 || Py_TYPE(a[2]) != TensorType || !PyLong_CheckExact(a[1])) NOT_IMPL();
    PyObject *xd = plain_data(a[0]), *ia = SLOT(a[2], t_data);
    if (xd == NULL || Py_TYPE(ia) != ArrayType) NOT_IMPL();
    Py_ssize_t dim;
    int r = small_int(a[1], &dim);
    if (r < 0) return NULL;
    int nd = ARR(xd)->nd;
    if (r || nd == 0 || ARR(ia)->nd != nd || dim < -nd || dim >= nd ||
        ((np_descr_head *)ARR(ia)->descr)->kind != 'i')
        NOT_IMPL();
    if (dim < 0) dim += nd;
    PyObject *sd = plain_data(a[3]);
    if (sd != NULL && ARR(sd)->nd != nd) sd = NULL;
    if (sd == NULL && PyObject_TypeCheck(a[3], TensorType) && Py_TYPE(SLOT(a[3], t_data)) != ArrayType)
        NOT_IMPL();   /* (a src of another array type: the Python code reads its shape) */
    Py_ssize_t size = 1;
    for (int k = 0; k < nd; k++) {
        Py_ssize_t ik = ARR(ia)->dimensions[k];
        if ((k != dim && ik > ARR(xd)->dimensions[k]) || (sd != NULL && ik > ARR(sd)->dimensions[k]))
            NOT_IMPL();
        size *= ik;
    }
    if (size) {
        PyObject *n = PyLong_FromSsize_t(ARR(xd)->dimensions[dim]);
        if (n == NULL) return NULL;
        PyObject *ba[2] = {ia, n};
        PyObject *below = index_below(NULL, ba, 2);
        Py_DECREF(n);
        if (below == NULL) return NULL;
        int yes = below == Py_True;
        Py_DECREF(below);
        if (!yes) NOT_IMPL();
    }
    return PyLong_FromSsize_t(dim);
}

/* NumPy's pairwise summation of n contiguous values (loops_utils.h: sequential below 8, eight
   accumulators up to 128, halves above), the order ufunc add.reduce sums a contiguous run in;
   in the type itself, as NumPy does for float32 and float64. */
#define PAIRWISE_SUM(NAME, T)                                                             \
    static T NAME(const T *a, Py_ssize_t n) {                                             \
        if (n < 8) {                                                                      \
            T res = (T)-0.0;                                                              \
            for (Py_ssize_t i = 0; i < n; i++) res += a[i];                               \
            return res;                                                                   \
        }                                                                                 \
        if (n <= 128) {                                                                   \
            T r[8], res;                                                                  \
            Py_ssize_t i;                                                                 \
            for (int j = 0; j < 8; j++) r[j] = a[j];                                      \
            for (i = 8; i < n - (n % 8); i += 8)                                          \
                for (int j = 0; j < 8; j++) r[j] += a[i + j];                             \
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));      \
            for (; i < n; i++) res += a[i];                                               \
            return res;                                                                   \
        }                                                                                 \
        Py_ssize_t n2 = n / 2;                                                            \
        n2 -= n2 % 8;                                                                     \
        return NAME(a, n2) + NAME(a + n2, n - n2);                                        \
    }
PAIRWISE_SUM(pairwise_f32, float)
PAIRWISE_SUM(pairwise_f64, double)

/* row_shift(x, e, t): one row of logits (C-contiguous float32/float64 x, writable e of its
   size and dtype): e = x - max(x) (NaN if any entry is NaN, as np.maximum.reduce), returns
   x[t] - max(x) as a float (exact: a value of x's dtype); None where it does not apply. */
static PyObject *row_shift(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    Py_ssize_t t;
    if (na != 3 || ((t = PyLong_AsSsize_t(a[2])) == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "row_shift(x, e, t)");
        return NULL;
    }
    Py_buffer xb, eb;
    if (PyObject_GetBuffer(a[0], &xb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(a[1], &eb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&xb);
        Py_RETURN_NONE;
    }
    char k = buf_kind(&xb);
    PyObject *res = NULL;
    Py_ssize_t c = xb.itemsize ? xb.len / xb.itemsize : 0;
    if ((k == 'f' || k == 'd') && buf_kind(&eb) == k && eb.len == xb.len && c > 0 && t >= 0 &&
        t < c) {
        if (k == 'f') {
            const float *x = (const float *)xb.buf;
            float *e = (float *)eb.buf, m = x[0];
            for (Py_ssize_t i = 1; i < c && m == m; i++)
                if (!(x[i] <= m)) m = x[i];   /* a NaN entry becomes the maximum and stops */
            for (Py_ssize_t i = 0; i < c; i++) e[i] = x[i] - m;
            res = PyFloat_FromDouble((double)e[t]);
        } else {
            const double *x = (const double *)xb.buf;
            double *e = (double *)eb.buf, m = x[0];
            for (Py_ssize_t i = 1; i < c && m == m; i++)
                if (!(x[i] <= m)) m = x[i];
            for (Py_ssize_t i = 0; i < c; i++) e[i] = x[i] - m;
            res = PyFloat_FromDouble(e[t]);
        }
    } else {
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&eb);
    PyBuffer_Release(&xb);
    return res;
}

/* row_sum(e): np.add.reduce(e, axis=None) of a C-contiguous float32/float64 array, as a float
   (exact: a value of e's dtype); None for other arrays. */
static PyObject *row_sum(PyObject *self, PyObject *e) {
    Py_buffer b;
    if (PyObject_GetBuffer(e, &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char k = buf_kind(&b);
    PyObject *res;
    if (k == 'f')
        res = PyFloat_FromDouble((double)(0.0f + pairwise_f32((const float *)b.buf, b.len / 4)));
    else if (k == 'd')
        res = PyFloat_FromDouble(0.0 + pairwise_f64((const double *)b.buf, b.len / 8));
    else
        res = Py_NewRef(Py_None);
    PyBuffer_Release(&b);
    return res;
}

static PyObject *fields_direct(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(layout_ok);
}

/* --- fast surfaces: the common case of a few PyTorch-facing functions ---------------------
   x.unsqueeze(d), x.view(a, b, ...), x.expand(...), dg.cat/stack/chunk: the argument checks of
   their Python surfaces (surface/shape.py, which stays the reference and runs everything else)
   done on NumPy's array fields, then the same bind(prim, args, params) call that the Python
   code makes, with equal params -- so the nodes are the Python path's.  Each returns
   NotImplemented where the call is not the common case (nothing has run then), and the caller
   goes on with its Python code, which raises PyTorch's errors. */


/* surface_setup(reshape_p, expand_p, cat_p, stack_p, split_p, probe, transposed, float32,
   float64, int64): the primitives the fast surfaces bind; probe a C-contiguous writeable
   float32 array, transposed a non-contiguous view of it (the flags bits are checked against
   them); NumPy's canonical dtypes of those names (fields_buffer) */
static PyObject *surface_setup(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 10 || !layout_ok || TensorType == NULL) {
        surface_ok = 0;
        Py_RETURN_FALSE;
    }
    Py_XSETREF(ReshapeP, Py_NewRef(a[0]));
    Py_XSETREF(ExpandP, Py_NewRef(a[1]));
    Py_XSETREF(CatP, Py_NewRef(a[2]));
    Py_XSETREF(StackP, Py_NewRef(a[3]));
    Py_XSETREF(SplitP, Py_NewRef(a[4]));
    PyObject *p = a[5], *tr = a[6];
    Py_XSETREF(DtF32, Py_NewRef(a[7]));
    Py_XSETREF(DtF64, Py_NewRef(a[8]));
    Py_XSETREF(DtI64, Py_NewRef(a[9]));
    Py_CLEAR(ReshapeImpl);
    Py_CLEAR(ExpandImpl);
    surface_ok = Py_TYPE(p) == ArrayType && Py_TYPE(tr) == ArrayType &&
                 (ARR(p)->flags & NP_C_CONTIGUOUS) && (ARR(p)->flags & NP_WRITEABLE) &&
                 !(ARR(tr)->flags & NP_C_CONTIGUOUS) && ARR(p)->nd == 2 && ARR(p)->nd == ARR(tr)->nd &&
                 ARR(tr)->strides[0] == ARR(p)->strides[1] && ARR(tr)->strides[1] == ARR(p)->strides[0] &&
                 ARR(p)->descr == DtF32;   /* (the probe is float32) */
    if (surface_ok) {
        /* the forwards as defined now: bind runs their bodies directly while they stay set */
        if ((ReshapeImpl = PyObject_GetAttrString(ReshapeP, "impl")) == NULL ||
            (ExpandImpl = PyObject_GetAttrString(ExpandP, "impl")) == NULL) {
            Py_CLEAR(ReshapeImpl);
            surface_ok = 0;
            return NULL;
        }
    }
    return PyBool_FromLong(surface_ok);
}

/* unsqueeze(x, dim): surface.shape.unsqueeze's common case */
static PyObject *f_unsqueeze(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2) NOT_IMPL();
    PyObject *d = plain_data(a[0]);
    Py_ssize_t dim;
    if (d == NULL) NOT_IMPL();
    int r = small_int(a[1], &dim);
    if (r < 0) return NULL;
    Py_ssize_t nd = ARR(d)->nd, n = nd + 1;
    if (r || dim < -n || dim >= n || n > SURFACE_MAX_DIMS) NOT_IMPL();
    if (dim < 0) dim += n;
    Py_ssize_t shape[SURFACE_MAX_DIMS];
    for (Py_ssize_t i = 0, k = 0; i < n; i++) shape[i] = i == dim ? 1 : ARR(d)->dimensions[k++];
    PyObject *sh = int_tuple(shape, n);
    if (sh == NULL) return NULL;
    PyObject *res = bind_params1(ReshapeP, PyTuple_Pack(1, a[0]), s_shape, sh);
    Py_DECREF(sh);
    return res;
}

/* view(x, shape): x.view(a, b, ...) with int sizes on a C-contiguous array (always a view):
   _view_method's first branch with _infer_shape's common results (one -1 inferred) */
static PyObject *f_view(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2 || !PyTuple_CheckExact(a[1])) NOT_IMPL();
    PyObject *d = plain_data(a[0]), *shape = a[1];
    if (d == NULL || !(ARR(d)->flags & NP_C_CONTIGUOUS)) NOT_IMPL();
    Py_ssize_t n = PyTuple_GET_SIZE(shape);
    if (n == 0 || n > SURFACE_MAX_DIMS) NOT_IMPL();
    Py_ssize_t numel = 1;
    for (int i = 0; i < ARR(d)->nd; i++) numel *= ARR(d)->dimensions[i];
    Py_ssize_t v[SURFACE_MAX_DIMS], rest = 1, infer = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = small_int(PyTuple_GET_ITEM(shape, i), &v[i]);
        if (r < 0) return NULL;
        if (r) NOT_IMPL();
        if (v[i] == -1 && infer < 0) {
            infer = i;
        } else if (v[i] < 0 || (v[i] && rest > PY_SSIZE_T_MAX / v[i])) {
            NOT_IMPL();   /* a second -1, a negative size, an overflow: the Python checks */
        } else {
            rest *= v[i];
        }
    }
    if (infer >= 0) {
        if (rest == 0 || numel % rest) NOT_IMPL();
        v[infer] = numel / rest;
    } else if (rest != numel) {
        NOT_IMPL();
    }
    PyObject *sh;
    if (infer < 0)
        sh = Py_NewRef(shape);   /* the ints as given: equal to _infer_shape's tuple */
    else if ((sh = int_tuple(v, n)) == NULL)
        return NULL;
    PyObject *res = bind_params1(ReshapeP, PyTuple_Pack(1, a[0]), s_shape, sh);
    Py_DECREF(sh);
    return res;
}

/* expand(x, sizes): one int size per dimension, -1 keeping it, a size-1 dimension growing */
static PyObject *f_expand(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2 || !PyTuple_CheckExact(a[1])) NOT_IMPL();
    PyObject *d = plain_data(a[0]), *sizes = a[1];
    if (d == NULL) NOT_IMPL();
    Py_ssize_t n = PyTuple_GET_SIZE(sizes);
    if (n != ARR(d)->nd || n > SURFACE_MAX_DIMS) NOT_IMPL();
    Py_ssize_t v[SURFACE_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t s, o = ARR(d)->dimensions[i];
        int r = small_int(PyTuple_GET_ITEM(sizes, i), &s);
        if (r < 0) return NULL;
        if (r) NOT_IMPL();
        if (s == -1)
            s = o;
        else if (s < 0 || (o != 1 && o != s))
            NOT_IMPL();
        v[i] = s;
    }
    PyObject *sh = int_tuple(v, n);
    if (sh == NULL) return NULL;
    PyObject *res = bind_params1(ExpandP, PyTuple_Pack(1, a[0]), s_shape, sh);
    Py_DECREF(sh);
    return res;
}

/* expand_view(x, shape): expand_p's forward for a C-contiguous ndarray x -- the read-only
   strided view np.broadcast_to makes (same strides, base x); None where expand_p's own code
   decides (another layout, a size that does not broadcast, a dtype without buffer export) */
static PyObject *f_expand_view(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2 || !PyTuple_CheckExact(a[1])) Py_RETURN_NONE;
    PyObject *x = a[0], *shape = a[1];
    if (Py_TYPE(x) != ArrayType || !(ARR(x)->flags & NP_C_CONTIGUOUS)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(shape), nd = ARR(x)->nd, lead = n - nd;
    if (lead < 0 || n > SURFACE_MAX_DIMS) Py_RETURN_NONE;
    Py_ssize_t st[SURFACE_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t s;
        int r = small_int(PyTuple_GET_ITEM(shape, i), &s);
        if (r < 0) return NULL;
        if (r) Py_RETURN_NONE;
        if (i < lead) {
            if (s < 0) Py_RETURN_NONE;
            st[i] = 0;
            continue;
        }
        Py_ssize_t o = ARR(x)->dimensions[i - lead];
        if (o == 1 && s >= 0)
            st[i] = 0;   /* (broadcast_to's stride for every size-1 dimension) */
        else if (o == s)
            st[i] = ARR(x)->strides[i - lead];
        else
            Py_RETURN_NONE;
    }
    PyObject *strides = int_tuple(st, n);
    if (strides == NULL) return NULL;
    PyObject *args[5] = {shape, ARR(x)->descr, x, ZERO, strides};
    PyObject *out = PyObject_Vectorcall((PyObject *)ArrayType, args, 5, NULL);
    Py_DECREF(strides);
    if (out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
            !PyErr_ExceptionMatches(PyExc_BufferError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (Py_TYPE(out) != ArrayType) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    ARR(out)->flags &= ~(NP_WRITEABLE | NP_WARN_ON_WRITE);   /* setflags(write=False) */
    return out;
}

/* the Tensors of a list/tuple of >= lo items as a new tuple when each has an exact ndarray,
   else NULL (no error) */
static PyObject *tensor_items(PyObject *seq, Py_ssize_t lo) {
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k < lo) return NULL;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < k; i++)
        if (plain_data(items[i]) == NULL) return NULL;
    if (PyTuple_CheckExact(seq)) return Py_NewRef(seq);
    return PyList_AsTuple(seq);
}

/* cat(tensors, dim): dg.cat's one-pass common case (Tensors of one rank, equal sizes off dim;
   vectors end to end may differ in length but not be empty) */
static PyObject *f_cat(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2) NOT_IMPL();
    Py_ssize_t dim;
    int r = small_int(a[1], &dim);
    if (r < 0) return NULL;
    if (r) NOT_IMPL();
    PyObject *args = tensor_items(a[0], 2);
    if (args == NULL) NOT_IMPL();
    Py_ssize_t k = PyTuple_GET_SIZE(args);
    PyObject *d0 = SLOT(PyTuple_GET_ITEM(args, 0), t_data);
    int nd = ARR(d0)->nd;
    if (nd == 0 || dim < -nd || dim >= nd) goto not_impl;
    if (dim < 0) dim += nd;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *di = SLOT(PyTuple_GET_ITEM(args, i), t_data);
        if (ARR(di)->nd != nd) goto not_impl;
        for (int j = 0; j < nd; j++) {
            if (j == dim ? (nd == 1 && ARR(di)->dimensions[j] == 0)
                         : ARR(di)->dimensions[j] != ARR(d0)->dimensions[j])
                goto not_impl;   /* (a legacy empty vector is skipped by the Python code) */
        }
    }
    PyObject *dd = PyLong_FromSsize_t(dim);
    if (dd == NULL) {
        Py_DECREF(args);
        return NULL;
    }
    PyObject *res = bind_params1(CatP, args, s_dim, dd);
    Py_DECREF(dd);
    return res;
not_impl:
    Py_DECREF(args);
    NOT_IMPL();
}

/* stack(tensors, dim): dg.stack's common case (Tensors of one shape) */
static PyObject *f_stack(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 2) NOT_IMPL();
    Py_ssize_t dim;
    int r = small_int(a[1], &dim);
    if (r < 0) return NULL;
    if (r) NOT_IMPL();
    PyObject *args = tensor_items(a[0], 1);
    if (args == NULL) NOT_IMPL();
    Py_ssize_t k = PyTuple_GET_SIZE(args);
    PyObject *d0 = SLOT(PyTuple_GET_ITEM(args, 0), t_data);
    int nd = ARR(d0)->nd, n = nd + 1;
    if (dim < -n || dim >= n) goto not_impl;
    if (dim < 0) dim += n;
    for (Py_ssize_t i = 1; i < k; i++) {
        PyObject *di = SLOT(PyTuple_GET_ITEM(args, i), t_data);
        if (ARR(di)->nd != nd ||
            (nd && memcmp(ARR(di)->dimensions, ARR(d0)->dimensions, nd * sizeof(Py_ssize_t)) != 0))
            goto not_impl;
    }
    PyObject *dd = PyLong_FromSsize_t(dim);
    if (dd == NULL) {
        Py_DECREF(args);
        return NULL;
    }
    PyObject *res = bind_params1(StackP, args, s_dim, dd);
    Py_DECREF(dd);
    return res;
not_impl:
    Py_DECREF(args);
    NOT_IMPL();
}

/* chunk(x, chunks, dim): dg.chunk's common case (chunks > 0, a non-empty dimension): pieces of
   ceil(n / chunks), split_p bound with split's sizes, the pieces marked as views of x */
static PyObject *f_chunk(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (!surface_ok || na != 3) NOT_IMPL();
    PyObject *d = plain_data(a[0]);
    Py_ssize_t chunks, dim;
    if (d == NULL) NOT_IMPL();
    int r1 = small_int(a[1], &chunks), r2 = r1 ? 1 : small_int(a[2], &dim);
    if (r1 < 0 || r2 < 0) return NULL;
    int nd = ARR(d)->nd;
    if (r1 || r2 || chunks <= 0 || nd == 0 || dim < -nd || dim >= nd) NOT_IMPL();
    if (dim < 0) dim += nd;
    Py_ssize_t n = ARR(d)->dimensions[dim];
    if (n <= 0) NOT_IMPL();
    Py_ssize_t size = n / chunks + (n % chunks != 0), full = n / size, last = n % size;
    PyObject *sizes = PyTuple_New(full + (last != 0));
    if (sizes == NULL) return NULL;
    PyObject *ps = PyLong_FromSsize_t(size);
    if (ps == NULL) {
        Py_DECREF(sizes);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < full; i++) PyTuple_SET_ITEM(sizes, i, Py_NewRef(ps));
    Py_DECREF(ps);
    if (last) {
        PyObject *pl = PyLong_FromSsize_t(last);
        if (pl == NULL) {
            Py_DECREF(sizes);
            return NULL;
        }
        PyTuple_SET_ITEM(sizes, full, pl);
    }
    PyObject *dd = PyLong_FromSsize_t(dim);
    PyObject *params = dd ? PyDict_New() : NULL;
    PyObject *args = params ? PyTuple_Pack(1, a[0]) : NULL;
    PyObject *res = NULL;
    if (args != NULL && PyDict_SetItem(params, s_sizes, sizes) == 0 &&
        PyDict_SetItem(params, s_dim, dd) == 0) {   /* {"sizes": ..., "dim": ...}, split's order */
        PyObject *fa[3] = {SplitP, args, params};
        res = bind(NULL, fa, 3);
        if (res != NULL) {
            PyObject *ma[2] = {res, a[0]};
            PyObject *m = mark_views(NULL, ma, 2);
            if (m == NULL) Py_CLEAR(res);
            Py_XDECREF(m);
        }
    }
    Py_XDECREF(args);
    Py_XDECREF(params);
    Py_XDECREF(dd);
    Py_DECREF(sizes);
    return res;
}

static PyMethodDef methods[] = {
    {"mark_views", (PyCFunction)(void (*)(void))mark_views, METH_FASTCALL,
     "mark_views(outs, base): registry.mark_views in C."},
    {"fields_direct", fields_direct, METH_NOARGS,
     "Whether NumPy's array/dtype fields are read directly (the set-up probe agreed)."},
    {"discover", discover, METH_O, "Dependency counts of the graph behind the root vertices."},
    {"backward_loop", backward_loop, METH_VARARGS, "The engine's plain-backward loop."},
    {"setup", setup, METH_VARARGS, "Bind the accelerator to dyngraph's classes."},
    {"set_bf16_dtype", set_bf16_dtype, METH_O,
     "set_bf16_dtype(np_dtype): bfloat16 inputs (that dtype's class) take registry._run_bf16."},
    {"rows_add", (PyCFunction)(void (*)(void))rows_add, METH_FASTCALL,
     "rows_add(out, rows, vals): np.add.at(out, rows, vals) along axis 0 (False: not done)."},
    {"index_below", (PyCFunction)(void (*)(void))index_below, METH_FASTCALL,
     "index_below(ia, n): every entry of the int array ia in [0, n) (None: not an int array)."},
    {"row_shift", (PyCFunction)(void (*)(void))row_shift, METH_FASTCALL,
     "row_shift(x, e, t): e = x - max(x); returns x[t] - max(x) (None: not done)."},
    {"row_sum", row_sum, METH_O, "row_sum(e): np.add.reduce(e, axis=None) of a float array."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(prim, args, params={}): the eager dispatch fast path."},
    {"surface_setup", (PyCFunction)(void (*)(void))surface_setup, METH_FASTCALL,
     "surface_setup(reshape_p, expand_p, cat_p, stack_p, split_p, probe, transposed, f32, f64, i64)."},
    {"gather_check", (PyCFunction)(void (*)(void))f_gather_check, METH_FASTCALL,
     "gather_check(input, dim, index, src): _check_gather_like's common case (NotImplemented: not done)."},
    {"unsqueeze", (PyCFunction)(void (*)(void))f_unsqueeze, METH_FASTCALL,
     "unsqueeze(x, dim): the common case of dg.unsqueeze (NotImplemented: not done)."},
    {"view", (PyCFunction)(void (*)(void))f_view, METH_FASTCALL,
     "view(x, shape): the common case of x.view(*shape) (NotImplemented: not done)."},
    {"expand", (PyCFunction)(void (*)(void))f_expand, METH_FASTCALL,
     "expand(x, sizes): the common case of x.expand(*sizes) (NotImplemented: not done)."},
    {"expand_view", (PyCFunction)(void (*)(void))f_expand_view, METH_FASTCALL,
     "expand_view(x, shape): expand_p's view of a C-contiguous array (None: not done)."},
    {"cat", (PyCFunction)(void (*)(void))f_cat, METH_FASTCALL,
     "cat(tensors, dim): the common case of dg.cat (NotImplemented: not done)."},
    {"stack", (PyCFunction)(void (*)(void))f_stack, METH_FASTCALL,
     "stack(tensors, dim): the common case of dg.stack (NotImplemented: not done)."},
    {"chunk", (PyCFunction)(void (*)(void))f_chunk, METH_FASTCALL,
     "chunk(x, chunks, dim): the common case of dg.chunk (NotImplemented: not done)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups",
                                    "C accelerator for dyngraph's dispatch hot path.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
#define INTERN(var, text)                                   \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_dict, "__dict__");
    INTERN(s_interpreter, "interpreter");
    INTERN(s_process, "process");
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
    INTERN(s_dim, "dim");
    INTERN(s_sizes, "sizes");
    INTERN(s_reshape, "reshape");
#undef INTERN
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    return PyModule_Create(&module);
}
