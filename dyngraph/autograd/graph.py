"""Graph nodes and graph walking (``dg.autograd.graph``).

The node classes live on the ground floor (:mod:`dyngraph._core.graph`); this
module re-exports them with PyTorch's module name and adds :func:`walk` and
:func:`walk`, which needs the anomaly module.  (Recording source lines is
``dg.viz.record_source``: the viz floor sits above autograd.)
"""

from __future__ import annotations

from .._core.graph import FREED, AccumulateGrad, LeafHooks, Meta, Node, RemovableHandle
from .anomaly import describe_source

__all__ = ["Node", "AccumulateGrad", "Meta", "walk", "LeafHooks", "RemovableHandle", "FREED"]


def walk(t):
    """List every node behind tensor ``t``, outputs first, iteratively.

    Each entry is ``(depth, node)``; leaves appear as :class:`AccumulateGrad`.
    Where the node recorded its source (anomaly mode or
    ``dg.viz.record_source(True)``) the line is in ``node.metadata["source"]``.

    >>> for depth, node in dg.autograd.graph.walk(loss):
    ...     print("  " * depth, node.name())
    """
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
