"""Common-subexpression elimination: one node per distinct (op, args, params)."""

from __future__ import annotations

from ...ops.registry import REGISTRY
from ..ir import Var, subst


def _key(x):
    if type(x) is Var:
        return ("v", x.id)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(_key(e) for e in x))
    if isinstance(x, dict):
        return ("d", tuple(sorted((k, _key(v)) for k, v in x.items())))
    return (type(x).__name__, repr(x))


def cse(graph) -> int:
    """Merge repeated computations; returns how many nodes were removed."""
    seen = {}
    rename = {}
    kept = []
    for node in graph.nodes:
        if rename:
            node.args = subst(node.args, rename)
        prim = REGISTRY.get(node.op)
        if prim is not None and not prim.pure:  # a random draw is never merged with another
            kept.append(node)
            continue
        key = (node.op, _key(node.args), _key(node.params))
        prev = seen.get(key)
        if prev is not None and len(prev.outs) == len(node.outs):
            for a, b in zip(node.outs, prev.outs, strict=False):
                rename[a] = b
            continue
        seen[key] = node
        kept.append(node)
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept
    if rename:
        graph.outputs = [rename.get(v, v) if v is not None else None for v in graph.outputs]
        graph.guards = [(rename.get(v, v), k, e) for v, k, e in graph.guards]
    return removed
