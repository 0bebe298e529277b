"""Reverse mode over the captured IR: the backward program of a capture.

For every recorded node, in reverse order, the primitive's own vjp rule runs
on the traced tensors under the tracer -- exactly the rule eager mode uses
-- so its primitive calls are recorded as backward nodes (fusable, foldable,
exportable, and differentiable again).  A rule that computes with NumPy
outside primitives (index or tie-weight arrays derived from data) cannot be
recorded faithfully; for that node the rule itself becomes one opaque
``vjp:<primitive>`` node that re-runs it on arrays at replay, as an ordinary
``backward()`` would.  Gradients flow only where eager autograd recorded a
graph (``requires_grad`` at the time of each call, ``no_grad`` blocks,
``detach()``), and are summed back to each input's shape and dtype like the
engine does for broadcasting primitives.
"""

from __future__ import annotations

import numpy as np

from .._core.rules import fit, rule_inputs
from ..ops.registry import REGISTRY
from ..tensor import Tensor
from .ir import Node, Var

__all__ = ["reverse", "run_vjp", "VJP_PREFIX", "Uncapturable"]

VJP_PREFIX = "vjp:"


class Uncapturable(Exception):  # noqa: N818
    """The function did something a static graph cannot replay (message says what).

    Defined here, below the tracer (which re-exports it), so reverse mode and the
    tracer do not import each other.
    """


def _arr(x):
    return x if type(x) is np.ndarray else np.asarray(x)


def run_vjp(*arrays, prim="", argnum=0, n_g=1, n_out=0, kinds=(), params=None):
    """Replay of an opaque rule node: the rule on arrays, as a plain ``backward()`` runs it."""
    p = REGISTRY[prim]
    gs = arrays[:n_g]
    outs = arrays[n_g:n_g + n_out]
    rest = arrays[n_g + n_out:]
    g = gs[0] if n_g == 1 else tuple(gs)
    if p.save_output:
        out = outs[0] if len(outs) == 1 else tuple(outs)
    else:
        out = None
    it = iter(rest)
    values = [lit if kind == "lit" else next(it) for kind, lit in kinds]
    gi = _arr(p.vjp(argnum, g, out, rule_inputs(p, values), params or {}))
    if p.broadcasts and kinds[argnum][0] == "var":
        x = values[argnum]
        gi = fit(gi, x.shape, x.dtype)
    return _arr(gi)


def reverse(tr, roots, sources, nodes=None):
    """Gradients of ``roots`` ([(vid, cotangent Tensor)]) for ``sources`` (vids).

    Records into ``tr.graph``; returns {source vid: Tensor or None}.
    """
    nodes = list(tr.fwd.nodes if nodes is None else nodes)
    src = set(sources)
    grads = {}
    for vid, c in roots:
        grads[vid] = c if vid not in grads else grads[vid] + c
    results = {}
    # which nodes can carry gradient from the sources to the roots
    reach = set(src)
    for n in nodes:
        rg = n.out_rg or ()
        if any(rg) and any(type(a) is Var and a.id in reach and (n.arg_rg or ())[i]
                           for i, a in enumerate(n.args)):
            reach.update(o for o, r in zip(n.outs, rg, strict=False) if r)
    for n in reversed(nodes):
        gs = [grads.pop(o, None) for o in n.outs]
        for o, g in zip(n.outs, gs, strict=True):
            if o in src and g is not None:
                results[o] = g
        if all(g is None for g in gs) or not any(n.out_rg or ()):
            continue
        if n.op.startswith(VJP_PREFIX):
            raise Uncapturable("differentiating through a backward rule that is not written with "
                               f"primitives ({n.op}); higher-order gradients need eager mode")
        prim = REGISTRY[n.op]
        if not prim.differentiable:
            continue
        todo = [i for i, a in enumerate(n.args)
                if type(a) is Var and a.id in reach and (n.arg_rg or ())[i]
                and i not in prim.nondiff_argnums]
        if not todo:
            continue
        for k, o in enumerate(n.outs):
            if gs[k] is None:
                info = tr.graph.values.get(o) or tr.fwd.values[o]
                gs[k] = Tensor._make(np.zeros(info.shape, info.dtype), False, None, 0)
        g = gs[0] if len(gs) == 1 else tuple(gs)
        for i in todo:
            gi = _one_rule(tr, n, prim, i, g)
            if gi is None:
                continue
            vid = n.args[i].id
            grads[vid] = gi if vid not in grads else grads[vid] + gi
    for vid in src:
        if vid not in results and vid in grads:
            results[vid] = grads[vid]
    return results


def _one_rule(tr, n, prim, i, g):
    T = tr.tensor_of
    args = [T(a.id) if type(a) is Var else a for a in n.args]
    inputs = rule_inputs(prim, args)
    out = None
    if prim.save_output:
        outs = [T(o) for o in n.outs]
        out = outs[0] if len(outs) == 1 else tuple(outs)
    graph = tr.graph
    mark = (len(graph.nodes), set(graph.constants), tr.next_vid)
    if not prim.has_vjp:
        raise Uncapturable(f"primitive '{prim.name}' has no vjp rules (its gradient is computed by "
                           "a custom backward); its backward cannot be captured")
    tr.strict += 1
    try:
        try:
            gi = prim.vjp(i, g, out, inputs, n.params)
        except NotImplementedError as exc:
            raise Uncapturable(str(exc)) from exc
        if gi is not None:
            if not isinstance(gi, Tensor):
                raise Uncapturable(f"the vjp rule of {prim.name} returned an array")
            tr.lookup(gi)
        tr.strict -= 1
        if gi is None:
            return None
    except Uncapturable:
        tr.strict -= 1
        # roll back what the rule recorded; replay the rule as one opaque node instead
        del graph.nodes[mark[0]:]
        for c in set(graph.constants) - mark[1]:
            del graph.constants[c]
        try:
            gi = _opaque(tr, n, prim, i, g, args)
        except NotImplementedError as exc:
            raise Uncapturable(str(exc)) from exc
    x = args[i]
    if prim.broadcasts:
        gi = fit(gi, x._data.shape, x._data.dtype)
    return gi


def _opaque(tr, n, prim, i, g, args):
    gs = list(g) if isinstance(g, tuple) else [g]
    outs = [tr.tensor_of(o) for o in n.outs] if prim.save_output else []
    tensor_args = [a for a in args if isinstance(a, Tensor)]
    kinds = tuple(("var", None) if isinstance(a, Tensor) else ("lit", a) for a in args)
    params = {"prim": prim.name, "argnum": i, "n_g": len(gs), "n_out": len(outs), "kinds": kinds,
              "params": dict(n.params)}
    ins = [Var(tr.lookup(t)) for t in gs + outs + tensor_args]
    value = run_vjp(*[t._data for t in gs + outs + tensor_args], **params)
    vid = tr._new(value.shape, value.dtype)
    tr.graph.nodes.append(Node(VJP_PREFIX + prim.name, tuple(ins), params, (vid,),
                               out_rg=(False,), arg_rg=tuple(False for _ in ins)))
    t = Tensor._make(value, False, None, 0)
    tr.bind_tensor(t, vid)
    return t
