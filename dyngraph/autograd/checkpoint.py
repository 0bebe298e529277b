"""Activation checkpointing: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` and keeps only its inputs; the
intermediate tensors of ``fn`` (and the values its nodes saved) are dropped as
soon as it returns.  During backward the forward of ``fn`` is run again, with
the RNG state it saw the first time (so dropout draws the same mask), and the
gradients are propagated through that fresh graph.

How it works: the first run records ``fn``'s graph only long enough to find
its *frontier* -- the tensors it reads that were not made inside it (its
arguments, parameters captured by closure, earlier results).  One
:class:`~dyngraph.autograd.graph.Node` with an edge per frontier tensor then
stands for all of ``fn``; its ``backward_node`` recomputes ``fn`` and asks the
engine for the gradients of those frontier tensors.  Because the recomputed
graph is differentiated with the same ``create_graph`` flag, higher-order
gradients through a checkpoint work too.

>>> h = dg.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
>>> h.sum().backward()            # block's forward runs again here
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .._core.interpreter import Interpreter, interpreting
from .._core.state import STATE
from ..random import default_generator
from ..tensor import Tensor
from .anomaly import capture_stack
from .engine import run_backward
from .graph import Node

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Collector(Interpreter):
    """An observing interpreter that computes (handing calls below) and remembers new nodes."""

    observer = True

    def __init__(self):
        self.nodes = weakref.WeakSet()

    def process(self, prim, args, params):
        out = self.process_below(prim, args, params)
        for t in (out if isinstance(out, tuple) else (out,)):
            fn = getattr(t, "_fn", None)
            if fn is not None:
                self.nodes.add(fn)
        return out

    def on_node(self, node):
        """Custom Function nodes made inside ``fn`` (``Function.apply`` calls this)."""
        self.nodes.add(node)
        super().on_node(node)


def _frontier(outputs, inner):
    """Vertices ``(node_or_leaf, output_nr)`` just outside the nodes in ``inner``, in order."""
    found = {}
    stack = []
    seen = set()
    for o in outputs:
        fn = o._fn
        if fn is None:
            found.setdefault((id(o), 0), (o, 0))
        elif fn in inner:
            if id(fn) not in seen:
                seen.add(id(fn))
                stack.append(fn)
        else:
            found.setdefault((id(fn), o._nr), (fn, o._nr))
    while stack:
        node = stack.pop()
        for e in node.edges:
            if e is None:
                continue
            v, nr = e
            if isinstance(v, Node) and v in inner:
                if id(v) not in seen:
                    seen.add(id(v))
                    stack.append(v)
            else:
                found.setdefault((id(v), nr), (v, nr))
    result = []
    for v, nr in found.values():
        if isinstance(v, Tensor):
            result.append(v)  # a leaf: the tensor itself is the target
        else:
            # an outside node's output: the engine stops there (and does not run it)
            result.append((v, nr))
    return result


class _CheckpointBackward:
    """``Node.prim`` of a checkpointed call: recompute, then differentiate the recomputation."""

    vjp_rules = None  # no registry rules: the engine calls backward_node
    torch_name = "CheckpointFunctionBackward"  # PyTorch's reentrant checkpoint node
    __slots__ = ("fn", "kwargs", "rng_state", "targets", "out_info", "name", "args_info")

    def __init__(self, fn, kwargs):
        self.fn = fn
        self.kwargs = kwargs
        self.name = "checkpoint"
        self.rng_state = None
        self.targets = ()
        self.out_info = ()
        self.args_info = ()

    def backward_node(self, node, grads, create_graph):
        saved = node.saved
        # (saved is FREED is caught by the engine before we are called)
        args = []
        for i, (a, info) in enumerate(zip(saved, self.args_info, strict=True)):
            if info is None:
                args.append(a)
                continue
            vc, version, rg = info
            if vc[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: argument {i} of checkpoint({_fn_name(self.fn)}), a "
                    f"tensor of shape {list(a.shape)}, is at version {vc[0]}; expected version "
                    f"{version} instead. The checkpointed function is recomputed from its "
                    "arguments during backward, so they must not change in between; clone() it.")
            t = Tensor._make(a._data, rg, None, 0)
            t._vc = vc
            args.append(t)
        outer_rng = None
        if self.rng_state is not None:
            outer_rng = default_generator.rng.bit_generator.state
            default_generator.rng.bit_generator.state = self.rng_state
        prev = STATE.grad_enabled
        STATE.grad_enabled = True
        try:
            out = self.fn(*args, **self.kwargs)
        finally:
            STATE.grad_enabled = prev
            if outer_rng is not None:
                default_generator.rng.bit_generator.state = outer_rng
        outs = out if isinstance(out, tuple) else (out,)
        gs = [grads] if node.n_out == 1 else list(grads)
        roots, root_grads = [], []
        for i, o in enumerate(outs):
            g = gs[i] if i < len(gs) else None
            if g is None or not isinstance(o, Tensor) or not o._rg:
                continue
            roots.append(o)
            root_grads.append(g if isinstance(g, Tensor) else Tensor._make(g, False, None, 0))
        targets = []
        for i, a in enumerate(args):
            if self.args_info[i] is not None and self.args_info[i][2]:
                targets.append(a)
        for tgt in self.targets:
            if isinstance(tgt, Tensor):
                targets.append(tgt)
            else:
                # a stand-in tensor whose vertex is (node, nr): autograd.grad stops there
                targets.append(Tensor._make(None, True, tgt[0], tgt[1]))
        n = len(node.edges)
        if not roots or not targets:
            return [None] * n
        # create_graph: the grads we return are differentiated through the recomputed graph
        res = run_backward(roots, root_grads, create_graph, create_graph, inputs=targets,
                           accumulate=False, allow_unused=True)
        if not create_graph:
            res = [None if r is None else r._data for r in res]
        return list(res)


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable | None = None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs: Any):
    """Run ``function(*args, **kwargs)`` without keeping its intermediate tensors.

    The forward is recomputed during backward; gradients (including those of
    parameters the function uses through closures or modules) equal the
    gradients without checkpointing.  ``preserve_rng_state`` replays the
    random-number state so random ops (dropout) draw the same values.
    ``use_reentrant`` is accepted for PyTorch compatibility: both settings use
    the same mechanism here, which supports ``autograd.grad``, keyword
    arguments and inputs that do not require grad.

    >>> out = dg.utils.checkpoint.checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)
    """
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported by dyngraph")
    outer = STATE.interpreter
    if not STATE.grad_enabled or (outer is not None and not outer.observer):
        # Nothing to save (no_grad), or an interpreter that owns the computation (graph
        # capture, batching) has its own memory plan: just run.  Observing interpreters
        # (the profiler) are kept: the collector hands every call on to them.
        return function(*args, **kwargs)
    rng_state = default_generator.rng.bit_generator.state if preserve_rng_state else None

    detached = []
    args_info = []
    for a in args:
        if isinstance(a, Tensor):
            d = Tensor._make(a._data, a._rg, None, 0)
            vc = a._vc
            if vc is None:
                vc = a._vc = [0]
            d._vc = vc
            detached.append(d)
            args_info.append((vc, vc[0], a._rg))
        else:
            detached.append(a)
            args_info.append(None)

    collector = _Collector()
    with interpreting(collector):
        out = function(*detached, **kwargs)
    is_tuple = isinstance(out, tuple)
    outs = out if is_tuple else (out,)
    diff_outs = [o for o in outs if isinstance(o, Tensor) and o._rg]
    if not diff_outs:
        return out

    detached_ids = {id(d): i for i, d in enumerate(detached) if isinstance(d, Tensor)}
    frontier = _frontier(diff_outs, collector.nodes)
    # The detached arguments stand for the caller's arguments: their edges go to the
    # caller's graph; everything else in the frontier keeps its own vertex.
    edges = []
    targets = []
    for f in frontier:
        if isinstance(f, Tensor) and id(f) in detached_ids:
            continue
        targets.append(f)
    for a, info in zip(args, args_info, strict=True):
        if info is not None and info[2]:
            edges.append((a, 0) if a._fn is None else (a._fn, a._nr))
    for f in targets:
        edges.append((f, 0) if isinstance(f, Tensor) else (f[0], f[1]))

    impl = _CheckpointBackward(function, kwargs)
    impl.rng_state = rng_state
    impl.targets = tuple(targets)
    impl.args_info = tuple(args_info)
    node = Node(impl, {}, tuple(edges))
    node.n_out = len(outs)
    node.saved = tuple(detached)
    if STATE.anomaly:
        node.info = capture_stack()
    result = []
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and o._rg:
            result.append(Tensor._make(o._data, True, node, i))
        elif isinstance(o, Tensor):
            result.append(o)
        else:
            result.append(o)
    # the first run's graph dies here with `out`/`outs`: only the arguments stay alive
    return tuple(result) if is_tuple else result[0]


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          **kwargs):
    """Split a sequence of modules/functions into ``segments`` checkpointed chunks.

    The last segment runs normally (its activations are needed right away).

    >>> out = checkpoint_sequential(model, 2, x, use_reentrant=False)
    """
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {segments}")
    size = max(len(fns) // segments, 1)

    def run_segment(start, end):
        def forward(x):
            for f in fns[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_segment(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run_segment(end + 1, len(fns) - 1)(input)

