"""Constant folding: a node whose tensor inputs are all constants is computed once."""

from __future__ import annotations

import numpy as np

from ...ops.registry import REGISTRY
from ..ir import Var, has_sym


def constant_folding(graph) -> int:
    """Replace foldable nodes by constants; returns how many were folded."""
    consts = graph.constants
    kept = []
    folded = 0
    for node in graph.nodes:
        vars_ = node.var_args()
        if (vars_ and all(v in consts for v in vars_) and _pure(node.op)
                and not has_sym(node.params) and not has_sym(node.args) and node.op in REGISTRY):
            prim = REGISTRY[node.op]
            args = [consts[a.id] if type(a) is Var else a for a in node.args]
            try:
                out = prim.impl(*args, **node.params)
            except Exception:
                kept.append(node)
                continue
            outs = out if isinstance(out, tuple) else (out,)
            for vid, o in zip(node.outs, outs, strict=False):
                consts[vid] = np.asarray(o)
            folded += 1
            continue
        kept.append(node)
    graph.nodes = kept
    return folded


def _pure(op: str) -> bool:
    """Only pure primitives (``Primitive.pure``: not random, no side effect) are folded."""
    p = REGISTRY.get(op)
    return p is None or p.pure
