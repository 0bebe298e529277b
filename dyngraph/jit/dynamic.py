"""Dynamic shapes: merge two captures that differ only in one size into one symbolic graph.

Two traces of the same function at sizes ``s1 != s2`` (a dimension marked
dynamic, or one that changed between calls) have the same nodes when the
control flow did not depend on the size.  Every integer that differs
between them (a param such as a reshape target, a value's shape) is fitted
as ``k * s + c`` (:class:`~dyngraph.jit.ir.Sym`) with integer ``k``; anything
else that differs (floats, constants, guard values, structure) means the
size cannot be expressed and the function keeps one variant per size.
Nodes whose params became symbolic check their output shapes at replay, so a
wrong fit fails a guard (and recaptures) instead of computing garbage.
"""

from __future__ import annotations

import copy

import numpy as np

from .ir import Sym, Var, has_sym

__all__ = ["unify", "CannotUnify"]


class CannotUnify(Exception):  # noqa: N818
    pass


def _fit(a, b, s1, s2, where):
    if type(a) is Var or type(b) is Var:
        if a != b:
            raise CannotUnify(f"{where}: different values")
        return a
    if isinstance(a, bool) or isinstance(b, bool):
        if a != b:
            raise CannotUnify(f"{where}: {a!r} vs {b!r}")
        return a
    if isinstance(a, int) and isinstance(b, int):
        if a == b:
            return a
        k, r = divmod(b - a, s2 - s1)
        if r:
            raise CannotUnify(f"{where}: {a} vs {b} is not k*size+c")
        return Sym(k, a - k * s1)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_fit(x, y, s1, s2, where) for x, y in zip(a, b, strict=False))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_fit(x, y, s1, s2, where) for x, y in zip(a, b, strict=False)]
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return {k: _fit(a[k], b[k], s1, s2, f"{where}[{k}]") for k in a}
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)):
            raise CannotUnify(f"{where}: different constant arrays")
        return a
    if type(a) is not type(b) or a != b:
        raise CannotUnify(f"{where}: {a!r} vs {b!r}")
    return a


def unify_graph(g1, g2, s1, s2, dynamic):
    """A symbolic copy of ``g1`` valid for any size (raises :class:`CannotUnify`)."""
    if (len(g1.nodes) != len(g2.nodes) or g1.inputs != g2.inputs or g1.captures != g2.captures
            or g1.outputs != g2.outputs or set(g1.constants) != set(g2.constants)):
        raise CannotUnify("the two captures have different structure")
    g = copy.copy(g1)
    g.nodes = []
    for n1, n2 in zip(g1.nodes, g2.nodes, strict=False):
        if n1.op != n2.op or n1.outs != n2.outs:
            raise CannotUnify(f"node {n1.op} vs {n2.op}")
        args = tuple(_fit(a, b, s1, s2, n1.op) for a, b in zip(n1.args, n2.args, strict=False))
        if len(n1.args) != len(n2.args):
            raise CannotUnify(f"{n1.op}: different arguments")
        params = _fit(n1.params, n2.params, s1, s2, n1.op)
        n = copy.copy(n1)
        n.args, n.params = args, params
        n.check_shape = n1.check_shape or has_sym(params) or has_sym(args)
        g.nodes.append(n)
    g.values = {}
    for vid, info in g1.values.items():
        other = g2.values.get(vid)
        if other is None or other.dtype != info.dtype:
            raise CannotUnify("value types differ")
        g.values[vid] = type(info)(_fit(info.shape, other.shape, s1, s2, f"%{vid}"), info.dtype)
    for vid in g1.constants:
        _fit(g1.constants[vid], g2.constants[vid], s1, s2, f"constant %{vid}")
    if len(g1.guards) != len(g2.guards):
        raise CannotUnify("different guards")
    for a, b in zip(g1.guards, g2.guards, strict=False):
        if a != b:
            raise CannotUnify(f"guard {a[1]}(%{a[0]}) took {a[2]!r} at one size, {b[2]!r} at the other")
    g.dynamic = list(dynamic)
    return g


def unify(c1, c2, s1, s2, dynamic):
    """Merge two :class:`~dyngraph.jit.tracer.Capture` objects; returns (fwd, bwd)."""
    if c1.out_spec != c2.out_spec or c1.sources != c2.sources or c1.residuals != c2.residuals:
        raise CannotUnify("outputs or differentiable inputs differ")
    if len(c1.capture_refs) != len(c2.capture_refs) or any(
            a() is not b() for a, b in zip(c1.capture_refs, c2.capture_refs, strict=False)):
        raise CannotUnify("different captured tensors")
    if [(k, p) for k, _, p in c1.effects] != [(k, p) for k, _, p in c2.effects]:
        raise CannotUnify("different side effects")
    fwd = unify_graph(c1.fwd, c2.fwd, s1, s2, dynamic)
    bwd = None
    if c1.bwd is not None or c2.bwd is not None:
        if c1.bwd is None or c2.bwd is None:
            raise CannotUnify("only one capture has a backward program")
        # the backward program finds the size through its first residual/cotangent
        bwd = unify_graph(c1.bwd, c2.bwd, s1, s2, [])
        bwd.dynamic = _size_source(bwd, s1, s2, c1.bwd, c2.bwd)
    return fwd, bwd


def _size_source(g, s1, s2, g1, g2):
    """(input position, dim) of a backward input whose dim is exactly the size."""
    for pos, vid in enumerate(g.inputs):
        for d, x in enumerate(g.values[vid].shape):
            if type(x) is Sym and x.k == 1 and x.c == 0:
                return [(pos, d)]
    if any(has_sym(n.params) or has_sym(n.args) for n in g.nodes) or any(
            has_sym(v.shape) for v in g.values.values()):
        raise CannotUnify("the backward program has no input that carries the size")
    return []
