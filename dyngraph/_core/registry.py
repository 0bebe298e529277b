"""The primitive registry and the single dispatch path (ground floor).

A :class:`Primitive` is defined once: its array-level forward (``impl``), one
vector-Jacobian rule per differentiable input, and what those rules need kept
alive (inputs and/or the output).  Every consumer -- eager autograd,
higher-order gradients, graph capture, ONNX export, visualisation -- reads the
same object from :data:`REGISTRY`.

Rules are written with operators and primitives, never with NumPy-only
calls, so the same rule runs on raw arrays during an ordinary ``backward()``
(fast, nothing recorded) and on Tensors under ``create_graph=True`` (where it
records a differentiable graph: gradients of gradients for free).  Calling a
primitive object directly does exactly that switch: arrays in -> ``impl``;
any Tensor in -> :func:`bind`.

Example::

    @primitive("tanh", save_output=True, promote="float")
    def tanh(x):
        return np.tanh(x)

    tanh.defvjp(lambda g, out, x: g * (1 - out * out))
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes as _dt
from ..dtypes import is_floating_point_dtype as _is_float
from ..tensor import Tensor
from .graph import Meta, Node, capture_stack, default_node_name
from .state import STATE

__all__ = ["Primitive", "primitive", "bind", "REGISTRY", "EMPTY"]

EMPTY: dict = {}
REGISTRY: dict[str, Primitive] = {}

_NUMBER_TYPES = (int, float, bool)

# NumPy's floating-point report state (divide/overflow/invalid): the same context variable and
# "all off" value that ops/_util.py's ``quiet_fp`` sets (NumPy >= 2; None on NumPy 1.x, where
# quiet_fp uses np.errstate and the C bind calls the wrapper like any other forward).
try:
    from numpy._core.umath import _extobj_contextvar as _FP_STATE
    from numpy._core.umath import _make_extobj

    _FP_QUIET = _make_extobj(divide="ignore", over="ignore", invalid="ignore")
except ImportError:  # pragma: no cover - NumPy 1.x
    _FP_STATE = _FP_QUIET = None


class Primitive:
    """One primitive operation: forward on arrays plus its derivative rules.

    Attributes:
        name: unique name (``"add"``, ``"matmul"``...), also the registry key.
        impl: ``impl(*arrays, **params) -> array`` (or a tuple for multi-output).
        vjp_rules: one rule per input, ``rule(g, out, *inputs, **params)``
            returning the gradient for that input (``None`` where an input is
            not differentiable).  ``None`` when the primitive is not differentiable.
        vjp_argnum: alternative for variadic primitives,
            ``rule(argnum, g, out, *inputs, **params)``.
        save_for: optional refinement of ``save_inputs``: ``save_for[i]`` lists
            the inputs that the rule of input ``i`` reads; inputs that no rule
            needed in this call reads are not saved (they reach the rules as None).
        save_inputs / save_output: what the rules read.  Inputs that are not
            saved reach the rules as ``None``, or as a :class:`Meta` (shape and
            dtype only) when ``meta=True``, so their data can be freed early.
        light: positions of saved inputs whose rules read only their shape and
            dtype (``h[idx]``'s ``h``, a scatter's target and source): the node
            saves a :class:`Meta` for them, neither keeping their data alive nor
            checking their version (``y = h[i]; h[j] = 0; y.backward()`` works,
            as in PyTorch).
        promote: ``None`` (inputs used as given), ``"same"`` (tensors and Python
            scalars promoted to one dtype, PyTorch rules) or ``"float"`` (same,
            then integers become the default float dtype).
        promote_from: first argument position that takes part in promotion.
        broadcasts: gradients of inputs are summed back to each input's shape.
        n_outputs: number of outputs (``-1``: decided per call, e.g. ``split``).
        is_view: the output shares memory with input 0 (reshape, transpose...).
        ufunc: ``(numpy_function, extra_literals)`` when the forward on same-dtype
            float arrays is exactly that NumPy call (graph fusion emits it directly).
        random: draws random numbers.
        pure: same inputs and params give the same output, without side effects
            (False for random primitives); graph passes fold/merge/remove only pure calls.
        torch_name: the name of PyTorch's autograd node for this op (``grad_fn.name()``):
            a string, or ``torch_name(params) -> str`` where PyTorch's name depends on the
            call (``sum`` over all elements is ``SumBackward0``, over a dim ``SumBackward1``).
            Default ``<CamelName>Backward0``; a primitive that stands for several PyTorch ops
            names the usual one.  Only ``grad_fn.name()`` reads it, never the hot path.
    """

    __slots__ = (
        "name", "_impl", "_quiet_impl", "vjp_rules", "vjp_argnum", "save_inputs", "save_output",
        "promote", "promote_from", "broadcasts", "n_outputs", "is_view", "differentiable",
        "nondiff_argnums", "meta", "save_for", "doc", "batch", "batchable", "batch_reason",
        "ufunc", "random", "pure", "torch_name", "light",
    )

    def __init__(self, name: str, impl: Callable, *, save_inputs=False, save_output=False,
                 promote=None, promote_from=0, broadcasts=False, n_outputs=1, is_view=False,
                 differentiable=True, nondiff_argnums=(), meta=False, save_for=None,
                 ufunc=None, random=False, pure=None, torch_name=None, light=None):
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is defined twice")
        self.name = name
        self.impl = impl
        self.vjp_rules = None
        self.vjp_argnum = None
        self.save_inputs = save_inputs
        self.save_output = save_output
        self.promote = promote
        self.promote_from = promote_from
        self.broadcasts = broadcasts
        self.n_outputs = n_outputs
        self.is_view = is_view
        self.differentiable = differentiable
        self.nondiff_argnums = tuple(nondiff_argnums)
        # rules read the shapes/dtypes of unsaved inputs from Meta stand-ins; broadcasting
        # primitives get them only where a gradient needs fitting (see ``record``)
        self.meta = bool(meta)
        # save_for[i] = the inputs the rule of input i reads; inputs no needed rule
        # reads are not kept (x * 2.0 keeps nothing of x, as in PyTorch)
        self.save_for = tuple(tuple(x) for x in save_for) if save_for is not None else None
        self.light = tuple(int(i) for i in light) if light else None
        self.doc = impl.__doc__
        # facts the graph passes read (jit/passes): the NumPy ufunc the forward is, with any
        # trailing literal operands (``relu`` is ``np.maximum(x, 0.0)``), for fusion; whether
        # it draws random numbers; whether it is pure (same inputs, same output, no side
        # effect): impure calls are never folded, merged or removed
        if ufunc is not None and not isinstance(ufunc, tuple):
            ufunc = (ufunc,)
        self.ufunc = None if ufunc is None else (ufunc[0], tuple(ufunc[1:]))
        self.random = bool(random)
        self.pure = (not random) if pure is None else bool(pure)
        # automatic batching (dg.autobatch): ``batch(B, args, batched, params)`` runs the
        # primitive once for B members; see ``defbatch``
        self.batch = None
        self.batchable = None
        self.batch_reason = None
        # computed once here, so ``grad_fn.name()`` costs a lookup (or one call of the function)
        self.torch_name = default_node_name(name) if torch_name is None else torch_name
        REGISTRY[name] = self

    @property
    def impl(self):
        """The forward on arrays, ``impl(*arrays, **params)``."""
        return self._impl

    @impl.setter
    def impl(self, fn):
        # A forward wrapped by ops/_util.py's ``quiet_fp`` (NumPy's FP reports off around the
        # call) keeps the function it wraps here too: the C bind then sets NumPy's FP-state
        # context variable itself around that function -- the wrapper's own work, without its
        # Python frame (~0.4 us per call of tanh, sigmoid, exp, div...).  The Python path
        # calls ``impl`` (the wrapper) as before.
        self._impl = fn
        raw = getattr(fn, "__wrapped__", None) if getattr(fn, "_quiet_fp", False) else None
        self._quiet_impl = raw if raw is not None and _FP_STATE is not None else None

    # -- rule registration -------------------------------------------------
    def defvjp(self, *rules):
        """Register one vjp rule per input (``None`` for a non-differentiable input)."""
        self.vjp_rules = tuple(rules)
        return self

    def defvjp_argnum(self, rule):
        """Register one rule ``rule(argnum, g, out, *inputs, **params)`` for all inputs."""
        self.vjp_argnum = rule
        return rule

    def defbatch(self, rule=None, *, fallback: str | None = None, eager: str | None = None,
                 eager_if=None):
        """Register how ``dg.autobatch`` runs this primitive for B members at once.

        ``rule(B, args, batched, params)`` gets the inputs with a leading member axis
        where ``batched[i]`` is true (others are shared by all members) and returns the
        output(s) with a leading member axis, or ``NotImplemented`` to run the members
        one by one.  ``fallback=reason``: always member by member (listed in the
        stats).  ``eager=reason``: the output shape depends on values, so the inputs
        are evaluated and the call runs at once when it is recorded; ``eager_if(args)``
        returns such a reason for some calls only (None otherwise).
        """
        self.batch = rule
        self.batchable = "eager" if eager else (False if fallback else (eager_if or True))
        self.batch_reason = eager or fallback
        return rule

    @property
    def has_vjp(self) -> bool:
        return self.vjp_rules is not None or self.vjp_argnum is not None

    def vjp(self, argnum, g, out, inputs, params):
        """Gradient for input ``argnum`` (arrays or Tensors, depending on the caller)."""
        rules = self.vjp_rules
        if rules is not None:
            if argnum >= len(rules) or rules[argnum] is None:
                raise missing_rule(self, argnum)
            return rules[argnum](g, out, *inputs, **params)
        if self.vjp_argnum is not None:
            return self.vjp_argnum(argnum, g, out, *inputs, **params)
        raise missing_rule(self)

    # -- calling -----------------------------------------------------------
    def __call__(self, *args, **params):
        """Arrays in: run ``impl``.  Any Tensor in: dispatch through :func:`bind`."""
        for a in args:
            if isinstance(a, Tensor):
                return bind(self, args, params)
        return self._impl(*args, **params)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def missing_rule(prim, argnum=None) -> NotImplementedError:
    """The one error for a primitive input without a derivative rule (callers raise it).

    "No gradient" is a rule returning ``None``; this is for rules never written.
    """
    name = getattr(prim, "name", type(prim).__name__)
    if argnum is None:
        return NotImplementedError(f"the derivative of '{name}' is not implemented")
    return NotImplementedError(
        f"the derivative of '{name}' with respect to argument {argnum} is not implemented")


def primitive(name: str, **options) -> Callable[[Callable], Primitive]:
    """Decorator that turns an array function into a registered :class:`Primitive`."""

    def wrap(impl):
        return Primitive(name, impl, **options)

    return wrap


# --------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------

def _bind_py(prim: Primitive, args: tuple, params: dict = EMPTY):
    """Apply ``prim`` to ``args`` (Tensors and Python numbers) with ``params``.

    The one entry point for every primitive call: it hands the call to the
    innermost interpreter (graph capture installs one) or runs it eagerly --
    compute now, and record a graph node when grad mode is on and an input
    requires grad.  This is the hot path of the framework: keep it short.
    """
    state = STATE
    if state.interpreter is not None:
        return state.interpreter.process(prim, args, params)
    datas = []
    need = False
    for a in args:
        if isinstance(a, Tensor):
            datas.append(a._data)
            if a._rg:
                need = True
        else:
            datas.append(a)
    promote = prim.promote
    if promote is not None:
        # fast exits: one floating input, or two arrays of one dtype
        if len(datas) == 1:
            d = datas[0].dtype
            if d.kind != "f" and (promote == "float" and not _is_float(d)
                                  or d.kind == "b" and prim.name == "neg"):
                datas = promote_arrays(prim, datas)
        elif len(datas) != 2 or prim.promote_from or type(datas[0]) is not type(datas[1]) \
                or datas[0].dtype is not datas[1].dtype \
                or (promote == "float" and not _is_float(datas[0].dtype)):
            datas = promote_arrays(prim, datas)
    if not prim.is_view:
        for d in datas:
            if type(d) is np.ndarray and d.dtype.kind == "V" and _dt.is_bfloat16(d.dtype):
                datas, out = _run_bf16(prim, args, datas, params)
                return _finish(prim, args, datas, params, out, need)
    try:
        impl = prim._impl
        out = impl(*datas, **params) if params else impl(*datas)
    except (ValueError, TypeError, IndexError) as exc:
        raise _op_error(prim, args, params, exc) from exc
    return _finish(prim, args, datas, params, out, need)


_F32 = np.dtype(np.float32)


def _run_bf16(prim: Primitive, args: tuple, datas: list, params: dict):
    """Run ``prim`` on bfloat16 operands the way PyTorch's CPU kernels do: in float32.

    NumPy has no bfloat16 kernels (ml_dtypes' loops round every partial sum, and it has no
    matmul), so bfloat16 arrays are widened to float32 (exact), the forward runs there and
    each float32 result is rounded back to bfloat16 once.  The widened arrays are returned
    as the ``datas`` the node saves, so backward rules also compute in float32; the leaves
    cast their gradients back to bfloat16.  An explicit ``dtype=`` parameter
    (``sum(x, dtype=float32)``) keeps its result dtype.  The C accelerator sends every
    bfloat16 call here (it only takes float kind ``'f'`` arrays).
    """
    bf16 = _dt.bfloat16.np     # loaded: a bfloat16 operand is here
    datas = [d.astype(_F32) if type(d) is np.ndarray and d.dtype == bf16 else d for d in datas]
    try:
        out = prim.impl(*datas, **params) if params else prim.impl(*datas)
    except (ValueError, TypeError, IndexError) as exc:
        raise _op_error(prim, args, params, exc) from exc
    if params.get("dtype") is None:
        if prim.n_outputs == 1:
            if getattr(out, "dtype", None) == _F32:
                out = np.asarray(out).astype(bf16)
        else:
            out = tuple(o.astype(bf16) if getattr(o, "dtype", None) == _F32 else o for o in out)
    return datas, out


def _finish(prim: Primitive, args: tuple, datas: list, params: dict, out, need: bool):
    """The tail of eager ``bind`` once the forward ran: record a node or wrap the result.

    Also where the C accelerator hands over a result it does not handle (a non-float
    output of a differentiable call, a non-ndarray result), so no forward runs twice.
    """
    if need and prim.differentiable and STATE.grad_enabled:
        return record(prim, args, datas, params, out)
    if prim.n_outputs == 1:
        if type(out) is not np.ndarray:
            out = _as_array(out)
        t = _new(Tensor)
        t._data = out
        t._rg = False
        t._fn = None
        t._nr = 0
        t._grad = None
        t._vc = None
        t._base = None
        t._hooks = None
        if prim.is_view:
            _mark_view(t, args[0])
        return t
    return tuple(_wrap_plain(o) for o in out)


def eager(prim: Primitive, args: tuple, params: dict):
    """Run ``prim`` eagerly, bypassing any installed interpreter (for interpreters)."""
    state = STATE
    interp = state.interpreter
    if interp is None:
        return bind(prim, args, params)
    state.interpreter = None
    try:
        return bind(prim, args, params)
    finally:
        state.interpreter = interp


def _as_array(out):
    # NumPy returns scalars (np.float32(..)) from 0-d operations; keep arrays.
    if isinstance(out, np.generic):
        return np.asarray(out)
    if hasattr(out, "__cuda_array_interface__"):
        return out
    return np.asarray(out)


def _wrap_plain(o):
    if type(o) is not np.ndarray:
        o = _as_array(o)
    return Tensor._make(o, False, None, 0)


def _mark_view(t, base):
    """Output ``t`` of a view primitive shares ``base``'s version counter if it is a view of it.

    Decided without ``np.may_share_memory`` (~0.5 us) where the arrays' ``base`` links say it:
    NumPy points a view's ``base`` at the array that owns the memory (collapsing chains), so
    the output is a view of ``base`` when its ``base`` is ``base``'s array or that array's own
    ``base``; a NumPy array without ``base`` owns memory its call just allocated (a copying
    ``reshape``).  The C accelerator makes the same checks and calls this function for the
    rest.
    """
    if not isinstance(base, Tensor):
        return
    d = t._data
    bd = base._data
    if d is not bd:
        ob = getattr(d, "base", None)
        if ob is None and type(d) is np.ndarray:
            return
        if ob is not bd and (ob is None or ob is not getattr(bd, "base", None)) \
                and not np.may_share_memory(d, bd):
            return
    root = base._base if base._base is not None else base
    t._base = root
    vc = root._vc
    if vc is None:
        vc = root._vc = [0]
    t._vc = vc


def _mark_views_py(outs, base):
    """:func:`_mark_view` for every Tensor in ``outs`` (the pieces of ``split``/``chunk``/
    ``unbind``, multi-output views that the surface marks); returns ``outs``.  The C
    accelerator's ``mark_views`` runs the same checks."""
    for o in outs:
        if type(o) is Tensor:
            _mark_view(o, base)
    return outs


mark_views = _mark_views_py


def record(prim: Primitive, args: tuple, datas: list, params: dict, out):
    """Build the graph node for one primitive call and wrap its outputs.

    ``datas`` are the (promoted) arrays the forward used; the node keeps them
    for the rules when the primitive saves its inputs, together with the
    inputs' version numbers so in-place changes are caught in backward.
    """
    edges = []
    for a in args:
        if isinstance(a, Tensor) and a._rg:
            fn = a._fn
            edges.append((a, 0) if fn is None else (fn, a._nr))
        else:
            edges.append(None)
    if prim.nondiff_argnums:
        for i in prim.nondiff_argnums:
            edges[i] = None
    node = Node(prim, params, edges)
    if prim.save_inputs:
        saved, saved_data = args, datas
        if prim.save_for is not None:
            keep = set()
            for i, e in enumerate(edges):
                if e is not None:
                    keep.update(prim.save_for[i])
            if len(keep) < len(args):
                saved = tuple(a if i in keep else None for i, a in enumerate(args))
                saved_data = [d if i in keep else None for i, d in enumerate(datas)]
        if prim.light is not None:
            saved, saved_data = list(saved), list(saved_data)
            for i in prim.light:
                a = saved[i] if i < len(saved) else None
                if isinstance(a, Tensor):
                    saved[i] = saved_data[i] = Meta(a._data.shape, a._data.dtype)
            saved = tuple(saved)
        node.saved = saved
        node.saved_data = saved_data
        versions = []
        for a in saved:
            if isinstance(a, Tensor):
                vc = a._vc
                versions.append(0 if vc is None else vc[0])
            else:
                versions.append(None)
        node.saved_versions = versions
    if prim.meta:
        node.in_meta = [Meta(a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None
                        for a in args]
    elif prim.broadcasts:
        # gradients need fitting only where an input's shape or dtype differs from the output's
        # (the inputs as given: a promoted float32 input gets its gradient cast back)
        oshape = out.shape
        odt = out.dtype
        for a in args:
            if isinstance(a, Tensor) and (a._data.shape != oshape or a._data.dtype != odt):
                node.in_meta = [Meta(a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None
                                for a in args]
                break
    if STATE.anomaly:
        node.info = capture_stack()
    if prim.n_outputs == 1:
        if type(out) is not np.ndarray:
            out = _as_array(out)
        floating = _is_float(out.dtype)
        t = _new(Tensor)
        t._data = out
        t._rg = floating
        t._fn = node if floating else None
        t._nr = 0
        t._grad = None
        t._vc = None
        t._base = None
        t._hooks = None
        if prim.save_output:
            node.out = out
            t._vc = node.out_vc = [0]
        if prim.is_view:
            _mark_view(t, args[0])
        return t
    outs = tuple(o if type(o) is np.ndarray else _as_array(o) for o in out)
    node.n_out = len(outs)
    node.out_meta = tuple((o.shape, o.dtype) for o in outs)
    if prim.save_output:
        node.out = outs
    result = tuple(
        Tensor._make(o, _is_float(o.dtype), node if _is_float(o.dtype) else None, i)
        for i, o in enumerate(outs))
    return result


def promote_arrays(prim: Primitive, datas: list) -> list:
    """Cast operands to the PyTorch result dtype (see :mod:`dyngraph.dtypes`)."""
    start = prim.promote_from
    ops = datas[start:] if start else datas
    if len(ops) == 2:
        a, b = ops
        if type(a) is np.ndarray and type(b) is np.ndarray:
            if a.dtype is b.dtype and (prim.promote == "same" or _is_float(a.dtype)):
                return datas
        elif type(a) is np.ndarray and type(b) is float:
            if _is_float(a.dtype):
                return datas
        elif type(b) is np.ndarray and type(a) is float:
            if _is_float(b.dtype):
                return datas
        elif type(a) is np.ndarray and type(b) is int:
            # a Python int is weak: integer arrays keep their dtype under "same" (``i + 64``)
            if _is_float(a.dtype) or (a.dtype.kind in "iu" and prim.promote == "same"):
                return datas
    elif len(ops) == 1:
        a = ops[0]
        if prim.promote == "same" or getattr(a, "dtype", None) is None or _is_float(a.dtype):
            if getattr(a, "dtype", None) is not None:
                return datas
    arrays = [o for o in ops if hasattr(o, "dtype") and not isinstance(o, np.generic)]
    scalars = [o for o in ops if not (hasattr(o, "dtype") and not isinstance(o, np.generic))]
    scalars = [o.item() if isinstance(o, np.generic) else o for o in scalars]
    target = _dt.result_np_dtype(arrays, scalars)
    if prim.promote == "float" and not _is_float(target):
        target = _dt.default_float_np()
    out = list(datas[:start])
    for o in ops:
        if hasattr(o, "dtype") and not isinstance(o, np.generic):
            out.append(o if o.dtype is target or o.dtype == target else o.astype(target))
        elif not arrays:
            out.append(np.asarray(o, dtype=target))
        elif isinstance(o, np.generic):
            out.append(o.item())
        else:
            out.append(o)
    return out


def _describe(a) -> str:
    if isinstance(a, Tensor):
        return f"Tensor(shape={list(a._data.shape)}, dtype={a.dtype})"
    return repr(a)


def _op_error(prim: Primitive, args, params, exc: Exception) -> Exception:
    """Re-raise a backend error with the op name, shapes and dtypes involved."""
    if getattr(exc, "_dg_op_error", False):
        return exc
    shown = ", ".join(_describe(a) for a in args)
    extra = f", params={params}" if params else ""
    err = type(exc)(f"{prim.name}: {exc} (inputs: {shown}{extra})")
    err._dg_op_error = True
    return err



_new = object.__new__


# ``bind`` is the Python implementation above unless the optional C accelerator
# (dyngraph/_speedups.c, built by setup.py) is available: it runs the common
# case (no interpreter, no promotion, one output) in C and calls ``_bind_py``
# for everything else.  DYNGRAPH_PURE_PYTHON=1 disables it.
bind = _bind_py
# The accelerator's small array loops (``rows_add``, ``index_below``, ``row_shift``, ``row_sum``:
# NumPy's results without its per-call cost on tiny arrays), or None: the families then run
# their NumPy code, which stays the reference.
LOOPS = None
if not __import__("os").environ.get("DYNGRAPH_PURE_PYTHON"):
    try:
        from .. import _speedups
    except ImportError:  # not built: pure Python
        _speedups = None
    if _speedups is not None:
        _speedups.setup(Tensor, Node, np.ndarray, STATE, _bind_py, _op_error, Primitive, Meta,
                        _as_array, _finish, _mark_view, _FP_STATE, _FP_QUIET, EMPTY)
        if hasattr(_speedups, "set_bf16_dtype"):
            _dt.on_bfloat16(_speedups.set_bf16_dtype)   # when ml_dtypes is loaded (dtypes.py)
        bind = _speedups.bind
        mark_views = _speedups.mark_views
        if hasattr(_speedups, "rows_add"):   # (an extension built before them has none)
            LOOPS = _speedups
