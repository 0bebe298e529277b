"""Buffer reuse: liveness analysis, ``out=`` buffers and early frees.

A buffer is *owned* when a fused node (a ufunc or matmul call) allocated it;
owned buffers never escape into a primitive that might return a view of
them, nor into the program's outputs.  An owned buffer that dies at an
elementwise node becomes that node's ``out=``; one that dies elsewhere goes
to a pool (keyed by shape and dtype) that later fused nodes draw from.  All
other values are deleted right after their last use, so memory is released
as early as in eager mode.
"""

from __future__ import annotations

from ..ir import Var


def buffer_reuse(graph) -> int:
    """Annotate nodes with ``out=`` donors and ``node.free`` lists; returns reuse count."""
    nodes = graph.nodes
    end = len(nodes)
    last = {}
    escaped = set(v for v in graph.outputs if v is not None)
    escaped.update(vid for vid, _, _ in graph.guards)
    guard_at = {}
    for vid, _, _ in graph.guards:
        guard_at[vid] = True
    for i, node in enumerate(nodes):
        for a in node.args:
            if type(a) is Var:
                last[a.id] = i
                if node.emit is None or node.emit[0] == "view":
                    escaped.add(a.id)
    for v in graph.outputs:
        if v is not None:
            last[v] = end
    owned = set()
    pool = {}
    reused = 0
    vals = graph.values
    for i, node in enumerate(nodes):
        node.free = []
        emit = node.emit
        if emit is not None and emit[0] == "view":
            emit = None
        if emit is not None:
            out = node.outs[0]
            key = (vals[out].shape, vals[out].dtype)
            donor = None
            if emit[0] == "ufunc":
                for a in node.args:
                    if (type(a) is Var and a.id in owned and a.id not in escaped
                            and last.get(a.id) == i
                            and (vals[a.id].shape, vals[a.id].dtype) == key):
                        donor = a.id
                        break
            if donor is None and pool.get(key):
                donor = pool[key].pop()
            emit[2] = donor
            if donor is not None:
                reused += 1
            owned.add(out)
        dying = []
        for a in {a.id for a in node.args if type(a) is Var}:
            if last.get(a) == i and a not in guard_at:
                dying.append(a)
        for a in dying:
            if emit is not None and a == emit[2]:
                continue
            if a in owned and a not in escaped:
                pool.setdefault((vals[a].shape, vals[a].dtype), []).append(a)
            else:
                node.free.append(a)
        for o in node.outs:
            if o not in last:
                node.free.append(o)  # computed but unused (multi-output nodes)
    return reused
