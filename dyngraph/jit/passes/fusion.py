"""Elementwise fusion: emit elementwise primitives as direct NumPy ufunc calls.

A primitive's ``impl`` is a Python function around a NumPy call; for the
common float elementwise primitives (and matmul) the executor calls the ufunc
itself, and :mod:`.buffer_reuse` then lets each op write into the buffer of
an operand that dies there.  A chain like ``g * (1 - y * y)`` therefore runs
as three ufunc calls on one buffer, with no temporaries and no Python frames
between them.  (Measured here: a ufunc with ``out=`` costs the same as one that
allocates; Python float operands cost ~2x a 0-d array operand, so the executor
passes 0-d arrays.  A node whose primitive has no entry here calls its ``impl``.)
"""

from __future__ import annotations

import numpy as np

from ..ir import Var

# primitive name -> (NumPy function, extra trailing literal operands)
UFUNCS = {
    "add": (np.add, ()), "sub": (np.subtract, ()), "mul": (np.multiply, ()),
    "div": (np.divide, ()), "neg": (np.negative, ()), "exp": (np.exp, ()),
    "log": (np.log, ()), "tanh": (np.tanh, ()), "sqrt": (np.sqrt, ()), "sin": (np.sin, ()),
    "cos": (np.cos, ()), "abs": (np.absolute, ()), "maximum": (np.maximum, ()),
    "minimum": (np.minimum, ()), "expm1": (np.expm1, ()), "log1p": (np.log1p, ()),
    "relu": (np.maximum, (0.0,)),
}
ELEMENTWISE = set(UFUNCS)
# view primitives emitted as the NumPy method itself (primitive -> its one param)
VIEWS = {"permute": "dims", "reshape": "shape", "expand": "shape"}


def fusion(graph) -> int:
    """Mark nodes the executor emits as direct ufunc / matmul calls; returns the count."""
    n = 0
    vals = graph.values
    for node in graph.nodes:
        node.emit = None
        if len(node.outs) != 1:
            continue
        if node.op in VIEWS and set(node.params) == {VIEWS[node.op]} and len(node.args) == 1 \
                and type(node.args[0]) is Var and len(vals[node.outs[0]].shape) > 0:
            node.emit = ["view", node.op, None]
            n += 1
            continue
        if node.params:
            continue
        out = vals[node.outs[0]]
        if out.dtype.kind != "f" or len(out.shape) == 0:
            continue
        vargs = [a for a in node.args if type(a) is Var]
        if any(vals[a.id].dtype != out.dtype for a in vargs):
            continue
        if any(type(a) is not Var and type(a) not in (int, float) for a in node.args):
            continue
        if node.op in UFUNCS:
            node.emit = ["ufunc", node.op, None]
            n += 1
        elif node.op in VIEWS and len(vargs) == 1:
            node.emit = ["view", node.op, None]
            n += 1
        elif node.op == "matmul" and len(vargs) == 2 and all(len(vals[a.id].shape) >= 2 for a in vargs):
            node.emit = ["matmul", node.op, None]
            n += 1
    return n
