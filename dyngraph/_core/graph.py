"""Graph nodes (ground floor): what one recorded primitive call keeps for the backward pass.

A :class:`Node` holds the primitive, its parameters, the values its rules
need (input Tensors and/or output *arrays* -- never the output Tensor, so no
reference cycle forms), and one edge per input: ``(node, output_nr)`` for an
intermediate result, ``(leaf_tensor, 0)`` for a leaf, or ``None`` when that
input needs no gradient (``node.edges``).  Dropping the last Tensor that reaches
a graph frees the whole graph by reference counting.

The edges are stored flat in the node's own slots, not as a list of tuples:
every container a node owns is one more object that the cyclic garbage
collector tracks, promotes through its generations while the graph is pending
and re-traverses in every full collection (see ``_set_edges``).
"""

from __future__ import annotations

import itertools
import os
import traceback
import weakref

__all__ = ["Node", "AccumulateGrad", "Meta", "LeafHooks", "RemovableHandle", "FREED"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLES_DIR = os.path.join(_PKG_DIR, "examples") + os.sep

FREED = object()  # marks saved values released by a backward pass


class Node:
    """A recorded primitive call (PyTorch's ``grad_fn``)."""

    # Hot attributes are slots; rarely used ones (hooks, retained grads, debug
    # info, multi-output metadata) live in the lazily created instance dict and
    # default to the class attributes below, so creating a Node stays cheap.
    # ``out_vc`` (the version counter of a saved output: every tanh/sigmoid/exp node) and
    # ``out_meta`` (multi-output nodes) are slots too: as class defaults they put an instance
    # dict -- one more object tracked by the cyclic GC -- on every such node.
    # The edges live in slots instead of a list of ``(fn, nr)`` tuples (1 + k objects the
    # cyclic GC tracks per node, k = inputs): ``_ne`` the number of inputs, ``_f0``/``_n0``,
    # ``_f1``/``_n1``, ``_f2``/``_n2`` the vertex and output number of the first three
    # (``None``/``None`` where an input has no edge; three: ``linear(x, W, b)``), ``_fx`` the
    # others as one flat tuple ``(f3, n3, f4, n4, ...)`` (``None`` up to three inputs).  The
    # node itself is tracked and its slots are traversed, so cycles through edges are still
    # found.  ``node.edges`` gives them as before; the engine and the C accelerator read the
    # slots.  The saved arguments likewise (their tuple was one more tracked object per
    # saving node): ``_sn`` is None (nothing saved), ``FREED``, or their number, ``_s0``..
    # ``_s2`` the first three, ``_sx`` the others as a tuple (``None`` up to three);
    # ``node.saved`` reads and writes them as the tuple it was.
    __slots__ = ("prim", "params", "_ne", "_f0", "_n0", "_f1", "_n1", "_f2", "_n2", "_fx",
                 "_sn", "_s0", "_s1", "_s2", "_sx", "saved_data", "saved_versions", "out",
                 "in_meta", "n_out", "out_vc", "out_meta", "__dict__", "__weakref__")

    special = False  # set when hooks / retain_grad / custom backward need the engine's slow path
    pre_hooks = None
    post_hooks = None
    retained = None
    info = None

    def __init__(self, prim, params, edges):
        self.prim = prim
        self.params = params
        _set_edges(self, edges)
        self._sn = self._s0 = self._s1 = self._s2 = self._sx = None
        self.saved_data = None
        self.saved_versions = None
        self.out = None
        self.in_meta = None
        self.n_out = 1
        self.out_vc = None
        self.out_meta = None

    @property
    def edges(self) -> tuple:
        """One entry per input: ``(node_or_leaf, output_nr)``, or ``None`` for no gradient.

        A new tuple on every read (the node stores the edges flat); assigning a sequence of
        such entries replaces them.

        >>> x = dg.ones(2, requires_grad=True)
        >>> e = (x * 2.0).grad_fn.edges      # a leaf and a Python number
        >>> e[0][0] is x, e[0][1], e[1]
        (True, 0, None)
        """
        ne = self._ne
        if ne == 0:
            return ()
        f = self._f0
        e0 = None if f is None else (f, self._n0)
        if ne == 1:
            return (e0,)
        f = self._f1
        e1 = None if f is None else (f, self._n1)
        if ne == 2:
            return (e0, e1)
        f = self._f2
        e2 = None if f is None else (f, self._n2)
        if ne == 3:
            return (e0, e1, e2)
        x = self._fx
        return (e0, e1, e2,
                *[None if x[k] is None else (x[k], x[k + 1]) for k in range(0, len(x), 2)])

    @edges.setter
    def edges(self, edges) -> None:
        _set_edges(self, edges)

    @property
    def saved(self):
        """The arguments the rules read (Tensors, numbers, ``None`` where not kept) as a tuple;
        ``None`` when nothing is saved, ``FREED`` once a backward pass released them.

        A new tuple on every read (the node stores the items in slots); assign a sequence,
        ``None`` or ``FREED`` to replace them.

        >>> x = dg.ones(2, requires_grad=True)
        >>> (x * x).grad_fn.saved[0] is x
        True
        """
        n = self._sn
        if n is None or n is FREED:
            return n
        if n == 2:
            return (self._s0, self._s1)
        if n == 1:
            return (self._s0,)
        if n == 3:
            return (self._s0, self._s1, self._s2)
        if n == 0:
            return ()
        return (self._s0, self._s1, self._s2, *self._sx)

    @saved.setter
    def saved(self, saved) -> None:
        if saved is None or saved is FREED:
            self._sn = saved
            self._s0 = self._s1 = self._s2 = self._sx = None
            return
        saved = tuple(saved)
        n = len(saved)
        self._sn = n
        self._s0 = saved[0] if n > 0 else None
        self._s1 = saved[1] if n > 1 else None
        self._s2 = saved[2] if n > 2 else None
        self._sx = saved[3:] if n > 3 else None

    # -- PyTorch-compatible introspection ------------------------------------
    def name(self) -> str:
        """PyTorch's name for this node (``"MulBackward0"``), from the primitive's ``torch_name``.

        >>> (dg.ones(2, requires_grad=True).sum(0)).grad_fn.name()
        'SumBackward1'
        """
        return node_name(self.prim, self.params)

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
        return RemovableHandle(self.post_hooks, fn=fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; may return replacement grads."""
        return self._add_pre_hook(-1, fn)

    def _add_pre_hook(self, output_nr: int, fn):
        self.special = True
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        return RemovableHandle(hooks, fn=fn)

    @property
    def saved_tensors_freed(self) -> bool:
        return self._sn is FREED


def _set_edges(node, edges) -> None:
    """Store ``edges`` (entries ``(vertex, output_nr)`` or ``None``) flat in ``node``'s slots.

    The layout ``registry.record`` and the C accelerator's ``make_node`` both build (and
    ``tests/test_gc_nodes.py`` compares): see ``Node.__slots__``.
    """
    ne = len(edges)
    fns = [None] * 6
    rest = []
    for i, e in enumerate(edges):
        if e is None:
            f = n = None
        else:
            f, n = e
            if f is None:
                raise ValueError(f"Node edge {i}: the vertex of an edge cannot be None (use None "
                                 "for the whole edge)")
        if i < 3:
            fns[2 * i] = f
            fns[2 * i + 1] = n
        else:
            rest.append(f)
            rest.append(n)
    node._ne = ne
    node._f0, node._n0, node._f1, node._n1, node._f2, node._n2 = fns
    node._fx = tuple(rest) if ne > 3 else None


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


class RemovableHandle:
    """Returned by every ``register_*hook``: ``handle.remove()`` takes the hook out again.

    The one handle class of dyngraph (tensor and node hooks, module hooks,
    optimizer hooks).  Hooks live in lists (the handle removes its ``fn``) or in
    dicts keyed by ``handle.id`` (the handle pops its key from each dict).
    Usable as a context manager: the hook is removed on exit.

    >>> h = x.register_hook(lambda g: g * 2)
    >>> h.remove()
    """

    __slots__ = ("id", "_containers", "_fn")
    _next_id = itertools.count()

    def __init__(self, *containers, fn=None, key=None):
        self.id = next(RemovableHandle._next_id) if key is None else key
        self._containers = containers
        self._fn = fn

    def remove(self) -> None:
        for c in self._containers:
            if isinstance(c, list):
                try:
                    c.remove(self._fn)
                except ValueError:
                    pass
            else:
                c.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_NAME_CACHE: dict = {}


def default_node_name(prim_name: str) -> str:
    """``"log_softmax"`` -> ``"LogSoftmaxBackward0"``: PyTorch's spelling of a node name.

    The ``0`` is PyTorch's overload number; primitives whose PyTorch node differs set
    ``torch_name`` (see :class:`~dyngraph._core.registry.Primitive`).
    """
    name = _NAME_CACHE.get(prim_name)
    if name is None:
        name = "".join(p[:1].upper() + p[1:] for p in prim_name.split("_")) + "Backward0"
        _NAME_CACHE[prim_name] = name
    return name


def node_name(prim, params) -> str:
    """The node name of a call of ``prim`` with ``params`` (the one place names come from).

    Primitives carry ``torch_name`` (a string or a function of the params); other node
    kinds (custom ``autograd.Function``, compiled backward...) may set it too, or get
    the default spelling of their ``name``.
    """
    tn = getattr(prim, "torch_name", None)
    if tn is None:
        return default_node_name(prim.name)
    if type(tn) is str:
        return tn
    return tn(params)


def bump_version(t) -> None:
    """Record that ``t``'s buffer was written in place (the one way to advance a version).

    Views share the counter cell (``t._vc``, created on first use), so writing
    through any view is seen by every node that saved the base or another view.
    """
    vc = t._vc
    if vc is None:
        t._vc = [1]
    else:
        vc[0] += 1


def version(t) -> int:
    """``t``'s version counter (0 until the first in-place write)."""
    vc = t._vc
    return 0 if vc is None else vc[0]


def retain_grad_ref(node, nr, t) -> None:
    """``t.retain_grad()`` on output ``nr`` of ``node``: the engine fills ``t.grad`` (weakly)."""
    node.special = True
    if node.retained is None:
        node.retained = {}
    node.retained[nr] = weakref.ref(t)


def capture_stack():
    """The creation stack of a node (anomaly mode), without dyngraph's own frames."""
    frames = traceback.extract_stack()[:-1]
    # the bundled examples (dyngraph/examples) are user code, not library frames
    user = [f for f in frames if not f.filename.startswith(_PKG_DIR)
            or f.filename.startswith(_EXAMPLES_DIR)]
    return {"traceback": user or frames}
