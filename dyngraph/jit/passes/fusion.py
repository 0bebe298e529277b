"""Elementwise fusion: emit elementwise primitives as direct NumPy ufunc calls.

A primitive's ``impl`` is a Python function around a NumPy call; for the
common float elementwise primitives (and matmul) the executor calls the ufunc
itself, and :mod:`.buffer_reuse` then lets each op write into the buffer of
an operand that dies there.  A chain like ``g * (1 - y * y)`` therefore runs
as three ufunc calls on one buffer, with no temporaries and no Python frames
between them.  (Measured here: a ufunc with ``out=`` costs the same as one that
allocates; Python float operands cost ~2x a 0-d array operand, so the executor
passes 0-d arrays.)

Which primitives are ufuncs is a fact of the primitive (``Primitive.ufunc``,
declared in its stanza); a node whose primitive has none calls its ``impl``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...ops.registry import REGISTRY
from ..ir import Var


class _Ufuncs(Mapping):
    """primitive name -> (NumPy function, extra trailing literal operands), read from the
    primitives' ``ufunc`` flags at lookup time (every family is registered by then)."""

    def __getitem__(self, name):
        p = REGISTRY.get(name)
        if p is None or p.ufunc is None:
            raise KeyError(name)
        return p.ufunc

    def __iter__(self):
        return (name for name, p in REGISTRY.items() if p.ufunc is not None)

    def __len__(self):
        return sum(1 for _ in self)


UFUNCS = _Ufuncs()
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
