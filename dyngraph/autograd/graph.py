"""Graph nodes: what one recorded primitive call keeps for the backward pass.

A :class:`Node` holds the primitive, its parameters, the values its rules
need (input Tensors and/or output *arrays* -- never the output Tensor, so no
reference cycle forms), and one edge per input: ``(node, output_nr)`` for an
intermediate result, ``(leaf_tensor, 0)`` for a leaf, or ``None`` when that
input needs no gradient.  Dropping the last Tensor that reaches a graph frees
the whole graph by reference counting.
"""

from __future__ import annotations

__all__ = ["Node", "AccumulateGrad", "Meta", "walk"]

FREED = object()  # marks saved values released by a backward pass


class Node:
    """A recorded primitive call (PyTorch's ``grad_fn``)."""

    # Hot attributes are slots; rarely used ones (hooks, retained grads, debug
    # info, multi-output metadata) live in the lazily created instance dict and
    # default to the class attributes below, so creating a Node stays cheap.
    __slots__ = ("prim", "params", "edges", "saved", "saved_data", "saved_versions", "out",
                 "in_meta", "n_out", "__dict__", "__weakref__")

    special = False  # set when hooks / retain_grad / custom backward need the engine's slow path
    out_vc = None
    out_meta = None
    pre_hooks = None
    post_hooks = None
    retained = None
    info = None

    def __init__(self, prim, params, edges):
        self.prim = prim
        self.params = params
        self.edges = edges
        self.saved = None
        self.saved_data = None
        self.saved_versions = None
        self.out = None
        self.in_meta = None
        self.n_out = 1

    # -- PyTorch-compatible introspection ------------------------------------
    def name(self) -> str:
        return _backward_name(self.prim.name)

    def __repr__(self) -> str:
        info = self.info
        where = ""
        if isinstance(info, dict):
            src = info.get("source")
            if src is None and info.get("traceback"):
                f = info["traceback"][-1]
                src = f"{f.filename}:{f.lineno}"
            if src:
                where = f" created at {src}"
        return f"<{self.name()} object at {id(self):#x}{where}>"

    @property
    def next_functions(self):
        """``((node_or_AccumulateGrad, output_nr), ...)`` like PyTorch; None for no edge."""
        out = []
        for e in self.edges:
            if e is None:
                out.append((None, 0))
            elif isinstance(e[0], Node):
                out.append(e)
            else:
                out.append((AccumulateGrad(e[0]), 0))
        return tuple(out)

    @property
    def metadata(self) -> dict:
        if self.info is None:
            self.info = {}
        if not isinstance(self.info, dict):
            self.info = {"traceback": self.info}
        return self.info

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after this node computed its input grads."""
        self.special = True
        if self.post_hooks is None:
            self.post_hooks = []
        self.post_hooks.append(fn)
        return _RemovableHandle(self.post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; may return replacement grads."""
        return self._add_pre_hook(-1, fn)

    def _add_pre_hook(self, output_nr: int, fn):
        self.special = True
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        return _RemovableHandle(hooks, fn)

    @property
    def saved_tensors_freed(self) -> bool:
        return self.saved is FREED


class Meta:
    """Shape and dtype of an input whose data a rule does not need."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Meta(shape={self.shape}, dtype={self.dtype})"


class AccumulateGrad:
    """The node that stands for a leaf tensor in ``next_functions``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable

    def name(self) -> str:
        return "AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"

    def __eq__(self, other):
        return isinstance(other, AccumulateGrad) and other.variable is self.variable

    def __hash__(self):
        return id(self.variable)


class LeafHooks:
    """Gradient hooks of a leaf tensor: before (``pre``) and after (``post``) accumulation."""

    __slots__ = ("pre", "post")

    def __init__(self):
        self.pre = []
        self.post = []


class _RemovableHandle:
    __slots__ = ("_list", "_fn")

    def __init__(self, lst, fn):
        self._list = lst
        self._fn = fn

    def remove(self):
        try:
            self._list.remove(self._fn)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_NAME_CACHE: dict = {}


def _backward_name(prim_name: str) -> str:
    name = _NAME_CACHE.get(prim_name)
    if name is None:
        name = "".join(p[:1].upper() + p[1:] for p in prim_name.split("_")) + "Backward"
        _NAME_CACHE[prim_name] = name
    return name


def walk(t):
    """List every node behind tensor ``t``, outputs first, iteratively.

    Each entry is ``(depth, node)``; leaves appear as :class:`AccumulateGrad`.
    Where the node recorded its source (anomaly mode or
    ``dg.autograd.graph.record_source(True)``, the same switch as
    ``dg.viz.record_source``) the line is in ``node.metadata["source"]``.

    >>> for depth, node in dg.autograd.graph.walk(loss):
    ...     print("  " * depth, node.name())
    """
    from .anomaly import describe_source  # noqa: PLC0415

    fn = t.grad_fn
    if fn is None:
        return [(0, AccumulateGrad(t))] if t.requires_grad else []
    result = []
    seen = set()
    stack = [(fn, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Node):
            if id(node) in seen:
                continue
            seen.add(id(node))
        result.append((depth, node))
        if isinstance(node, Node):
            for e in reversed(node.edges):
                if e is None:
                    continue
                nxt = e[0] if isinstance(e[0], Node) else AccumulateGrad(e[0])
                stack.append((nxt, depth + 1))
    for _, node in result:
        if isinstance(node, Node):
            node.metadata.setdefault("source", describe_source(node))
    return result


def record_source(mode: bool = True):
    """Record the user's source line for every new node (alias of ``dg.viz.record_source``)."""
    from ..viz.record import record_source as _record_source  # noqa: PLC0415

    return _record_source(mode)
