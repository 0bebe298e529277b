"""User-defined differentiable operations: ``dg.autograd.Function``.

A subclass gives a ``forward`` (run with grad mode off) and a ``backward``
(the vector-Jacobian product); ``MyFn.apply(*args)`` runs the forward and, when
an input requires grad, records one graph :class:`~dyngraph.autograd.graph.Node`
whose ``prim`` is a :class:`_FunctionBackward`.  The engine calls its
``backward_node`` instead of registry vjp rules.

Under ``create_graph=True`` the user's ``backward`` runs with grad mode on, so
if it is written with dyngraph operations it is itself differentiable (double
backward works); ``@once_differentiable`` opts out of that.

No reference cycles: the node holds the context, the context holds a *weak*
reference to the node, and an output that is saved for backward is kept as its
array (the Tensor is rebuilt on access), never as the output Tensor itself.

>>> class Exp(dg.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         y = x.exp()
...         ctx.save_for_backward(y)
...         return y
...     @staticmethod
...     def backward(ctx, gy):
...         (y,) = ctx.saved_tensors
...         return gy * y
>>> x = dg.tensor([0.0, 1.0], requires_grad=True)
>>> Exp.apply(x).sum().backward()
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from .._core.graph import bump_version
from .._core.rules import fit
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..tensor import Tensor
from .anomaly import capture_stack
from .grad_mode import STATE
from .graph import FREED, Node

__all__ = ["Function", "FunctionCtx", "once_differentiable", "InplaceFunction"]


class _SavedOutput:
    """An output saved for backward: its array, never the Tensor (that would be a cycle)."""

    __slots__ = ("nr", "data", "vc")

    def __init__(self, nr, data, vc):
        self.nr = nr
        self.data = data
        self.vc = vc


class FunctionCtx:
    """The ``ctx`` object passed to ``forward``/``setup_context`` and ``backward``.

    Users may store any attribute on it (``ctx.dim = dim``).  Tensors needed by
    ``backward`` should go through :meth:`save_for_backward`, which checks that
    they are not modified in place before backward runs.
    """

    def __init__(self):
        self._to_save = None
        self._versions = None
        self._node_ref = None
        self._non_differentiable = ()
        self._dirty = ()
        self._materialize = True
        self._fn_name = "Function"
        self.needs_input_grad: tuple = ()

    # -- saving ------------------------------------------------------------
    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` (or None) for ``backward``; read them back with ``saved_tensors``."""
        versions = []
        for i, t in enumerate(tensors):
            if t is None:
                versions.append(None)
                continue
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"{self._fn_name}.save_for_backward: argument {i} is a "
                    f"{type(t).__name__}; only Tensors (or None) can be saved. Store other "
                    "values as attributes of ctx (ctx.name = value)")
            vc = t._vc
            if vc is None:
                vc = t._vc = [0]
            versions.append((vc, vc[0]))
        self._to_save = tuple(tensors)
        self._versions = versions

    def save_for_forward(self, *tensors) -> None:
        """Accepted for PyTorch compatibility (forward-mode uses the double-vjp trick here)."""
        self._saved_for_forward = tuple(tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, checked against in-place changes."""
        node = self._node_ref() if self._node_ref is not None else None
        saved = node.saved if node is not None else self._to_save
        if saved is FREED:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (or directly access saved "
                f"tensors after they have already been freed) in {self._fn_name}Backward: "
                "saved tensors are freed after backward(). Pass retain_graph=True to the first "
                "backward()/autograd.grad() if you need to backward through the graph again.")
        if saved is None:
            return ()
        result = []
        for i, (t, vv) in enumerate(zip(saved, self._versions, strict=False)):
            if vv is not None and vv[0][0] != vv[1]:
                shape = list(t.data.shape) if isinstance(t, _SavedOutput) else list(t.shape)
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: saved tensor {i} of '{self._fn_name}' "
                    f"({self._fn_name}Backward), a tensor of shape {shape}, is at version "
                    f"{vv[0][0]}; expected version {vv[1]} instead. Hint: clone() the tensor "
                    "before modifying it, or use the out-of-place operation.")
            if isinstance(t, _SavedOutput):
                out = Tensor._make(t.data, node is not None, node, t.nr)
                out._vc = t.vc
                result.append(out)
            else:
                result.append(t)
        return tuple(result)

    saved_variables = saved_tensors

    # -- output flags --------------------------------------------------------
    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that never get a gradient (their grad arrives as zeros in backward)."""
        self._non_differentiable = tuple(tensors)

    def mark_dirty(self, *tensors) -> None:
        """Inputs that ``forward`` modified in place (and returns as outputs)."""
        self._dirty = tuple(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, missing output gradients reach ``backward`` as None instead of zeros."""
        self._materialize = bool(value)


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        # The newer style: forward(*args) without ctx, plus setup_context(ctx, inputs, output).
        cls._new_style = (("setup_context" in attrs and name != "Function")
                          or any(getattr(b, "_new_style", False) for b in bases))
        # PyTorch accepts ``vjp`` as the name of the backward method
        if "vjp" in attrs and "backward" not in attrs:
            cls.backward = attrs["vjp"]


class Function(metaclass=_FunctionMeta):
    """Base class for custom differentiable operations (see the module docstring).

    Subclasses define ``forward(ctx, *args, **kwargs)`` and ``backward(ctx, *grad_outputs)``
    as static methods (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``)
    and are called as ``MyFn.apply(*args)``.  ``backward`` returns one gradient per
    positional argument of ``forward`` (None for non-Tensors or inputs without gradient).
    """

    _new_style = False

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{type(self).__name__}: legacy autograd functions with a non-static forward are not "
            f"supported; define forward/backward as @staticmethod and call "
            f"{type(self).__name__}.apply(...)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your "
                                  "custom autograd.Function to use it with backward mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "forward-mode jvp of a custom Function: use dg.autograd.functional.jvp, which "
            "derives it from backward (double-vjp trick)")

    @classmethod
    def vjp(cls, ctx, *grad_outputs):
        return cls.backward(ctx, *grad_outputs)

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and record a graph node when an input requires grad."""
        return _apply(cls, args, kwargs)


class InplaceFunction(Function):
    """Kept for PyTorch compatibility: a Function with an ``inplace`` flag."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


def _apply(cls, args, kwargs):
    grad_on = STATE.grad_enabled
    needs = tuple(isinstance(a, Tensor) and a._rg and grad_on for a in args)
    record = any(needs)
    ctx = FunctionCtx()
    ctx._fn_name = cls.__name__
    ctx.needs_input_grad = needs
    prev = STATE.grad_enabled
    STATE.grad_enabled = False
    try:
        if cls._new_style:
            output = cls.forward(*args, **kwargs)
        else:
            output = cls.forward(ctx, *args, **kwargs)
    finally:
        STATE.grad_enabled = prev
    if cls._new_style:
        cls.setup_context(ctx, args, output)
    if not record:
        _check_dirty_without_grad(ctx)
        return output

    is_tuple = isinstance(output, tuple)
    outs = output if is_tuple else (output,)
    edges = tuple(
        ((a, 0) if a._fn is None else (a._fn, a._nr)) if need else None
        for a, need in zip(args, needs, strict=False))
    impl = _FunctionBackward(cls, ctx)
    node = Node(impl, {}, edges)
    node.n_out = len(outs)
    if STATE.anomaly:
        node.info = capture_stack()
    ctx._node_ref = weakref.ref(node)
    interp = STATE.interpreter
    if interp is not None:
        interp.on_node(node)  # e.g. checkpoint's collector: this node is inside its fn
    impl.in_meta = tuple(
        (a._data.shape, a._data.dtype) if need else None for a, need in zip(args, needs, strict=False))

    arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
    dirty = {id(t) for t in ctx._dirty}
    nondiff = {id(t) for t in ctx._non_differentiable}
    out_meta = []
    wrapped = []
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            out_meta.append(None)
            wrapped.append(o)
            continue
        out_meta.append((o._data.shape, o._data.dtype))
        if id(o) in dirty:
            _take_over_dirty(o, node, i, cls.__name__)
            wrapped.append(o)
            continue
        if id(o) in arg_ids:
            # Returned an input unchanged: the output is a new tensor sharing its data.
            alias = Tensor._make(o._data, False, None, 0)
            vc = o._vc
            if vc is None:
                vc = o._vc = [0]
            alias._vc = vc
            o = alias
        if id(outs[i]) not in nondiff and _is_float_dtype(o._data.dtype):
            o._rg = True
            o._fn = node
            o._nr = i
        wrapped.append(o)
    impl.out_meta = tuple(out_meta)

    if ctx._to_save is not None:
        out_index = {id(o): i for i, o in enumerate(outs) if isinstance(o, Tensor)}
        saved = []
        for t, vv in zip(ctx._to_save, ctx._versions, strict=False):
            nr = out_index.get(id(t)) if t is not None else None
            if nr is not None and id(t) not in arg_ids:
                saved.append(_SavedOutput(nr, t._data, vv[0]))
            else:
                saved.append(t)
        node.saved = tuple(saved)
        ctx._to_save = None
    return tuple(wrapped) if is_tuple else wrapped[0]


def _check_dirty_without_grad(ctx):
    for t in ctx._dirty:
        bump_version(t)


def _take_over_dirty(t, node, nr, name):
    if t._rg and t._fn is None:
        raise RuntimeError(
            f"{name}: a leaf Variable that requires grad (shape {list(t.shape)}) has been "
            "modified in place by this Function (mark_dirty); clone() it before passing it in")
    bump_version(t)
    t._rg = True
    t._fn = node
    t._nr = nr


class _FunctionBackward:
    """``Node.prim`` of a custom Function call: runs the user's ``backward``."""

    vjp_rules = None  # no registry rules: the engine calls backward_node
    __slots__ = ("cls", "ctx", "name", "in_meta", "out_meta")

    def __init__(self, cls, ctx):
        self.cls = cls
        self.ctx = ctx
        self.name = cls.__name__
        self.in_meta = None
        self.out_meta = None

    @property
    def torch_name(self) -> str:
        # PyTorch names a custom Function's node "<ClassName>Backward", without an overload number
        return self.name + "Backward"

    def __repr__(self) -> str:
        return f"<custom Function {self.name}>"

    def backward_node(self, node, grads, create_graph):
        ctx = self.ctx
        gs = [grads] if node.n_out == 1 else list(grads)
        for i, g in enumerate(gs):
            meta = self.out_meta[i]
            if g is None:
                if ctx._materialize and meta is not None:
                    gs[i] = Tensor._make(np.zeros(meta[0], meta[1]), False, None, 0)
            elif not isinstance(g, Tensor):
                gs[i] = Tensor._make(g, False, None, 0)
        result = self.cls.backward(ctx, *gs)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(node.edges)
        if len(result) < n or any(r is not None for r in result[n:]):
            raise RuntimeError(
                f"function {self.name}Backward returned an incorrect number of gradients "
                f"(expected {n}, got {len(result)}): backward must return one gradient per "
                "positional argument of forward (None for non-Tensor arguments)")
        out = [None] * n
        for i in range(n):
            if node.edges[i] is None:
                continue
            g = result[i]
            if g is None:
                continue
            if not isinstance(g, Tensor):
                raise TypeError(
                    f"function {self.name}Backward returned a {type(g).__name__} as gradient "
                    f"{i}; expected a Tensor or None")
            out[i] = self._fit(i, g, create_graph)
        return out

    def _fit(self, i, g, create_graph):
        shape, dtype = self.in_meta[i]
        if tuple(g.shape) != shape:
            try:
                target = np.broadcast_shapes(tuple(g.shape), shape)
            except ValueError:
                target = None
            if target != tuple(g.shape):
                raise RuntimeError(
                    f"Function {self.name}Backward returned an invalid gradient at index {i} - "
                    f"got {list(g.shape)} but expected shape compatible with {list(shape)}")
        g = fit(g, shape, dtype)
        return g if create_graph else g._data


def once_differentiable(backward):
    """Decorate a Function's ``backward`` that is not itself differentiable.

    It runs with grad mode off; differentiating its results again (``create_graph=True``
    followed by a second backward) raises an error instead of giving a wrong answer.
    """

    @functools.wraps(backward)
    def wrapper(ctx, *grad_outputs):
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            result = backward(ctx, *grad_outputs)
        finally:
            STATE.grad_enabled = prev
        if not prev:
            return result
        node = ctx._node_ref() if ctx._node_ref is not None else None
        needs_graph = any(isinstance(g, Tensor) and g._rg for g in grad_outputs) or node is not None
        if not needs_graph:
            return result
        single = not isinstance(result, tuple)
        res = (result,) if single else result
        edges = tuple(e for e in (node.edges if node is not None else ()) if e is not None)
        edges += tuple(((g, 0) if g._fn is None else (g._fn, g._nr))
                       for g in grad_outputs if isinstance(g, Tensor) and g._rg)
        wrapped = []
        for r in res:
            if isinstance(r, Tensor) and _is_float_dtype(r._data.dtype):
                err = Node(_DelayedError(ctx._fn_name), {}, edges)
                r = Tensor._make(r._data, True, err, 0)
            wrapped.append(r)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper


class _DelayedError:
    """Node prim standing for a once-differentiable backward: differentiating it raises."""

    vjp_rules = None  # no registry rules: the engine calls backward_node
    __slots__ = ("name", "fn_name")

    def __init__(self, fn_name):
        self.name = "delayed_error"
        self.fn_name = fn_name

    def backward_node(self, node, grads, create_graph):
        raise RuntimeError(
            f"trying to differentiate twice a function that was marked with "
            f"@once_differentiable ({self.fn_name}.backward): its backward is not "
            "differentiable. Write backward with dyngraph operations and drop the decorator to "
            "get higher-order gradients.")

