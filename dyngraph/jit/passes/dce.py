"""Dead-code elimination: drop nodes none of whose outputs is needed."""

from __future__ import annotations

from ...ops.registry import REGISTRY


def dce(graph) -> int:
    """Remove dead nodes (random primitives stay: they advance the generator)."""
    needed = {v for v in graph.outputs if v is not None}
    needed.update(vid for vid, _, _ in graph.guards)
    kept = []
    for node in reversed(graph.nodes):
        prim = REGISTRY.get(node.op)
        if any(o in needed for o in node.outs) or (prim is not None and not prim.pure):
            kept.append(node)
            needed.update(node.var_args())
    removed = len(graph.nodes) - len(kept)
    kept.reverse()
    graph.nodes = kept
    for vid in list(graph.constants):
        if vid not in needed:
            del graph.constants[vid]
    return removed
