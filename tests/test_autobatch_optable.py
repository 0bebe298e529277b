"""Every record of the op table, run as N members inside ``dg.autobatch``, equals eager.

Each member gets its own sample values (same shapes), and all samples of a record also
run together as members of different shapes; the op's inputs are pending
per-member tensors, so the primitive runs through its batching rule (or its marked
fallback).  Values and the gradients of a random projection of all outputs must equal
the same members run eagerly (float64, 1e-12).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn
from dyngraph.ops.registry import REGISTRY
from tests.helpers import flat_outputs
from tests.opinfo import all_ops

OPS = [op for op in all_ops() if "float64" in op.dtypes]
N = 2


def _grad_argnums(op, sample):
    if op.grad_argnums is not None:
        return set(op.grad_argnums)
    return {i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"}


def _leaves(sample, req):
    return [dg.tensor(a.copy(), requires_grad=i in req) if isinstance(a, np.ndarray) else a
            for i, a in enumerate(sample.args)]


def _member_inputs(leaves):
    # x * 1 (exact) makes each input a per-member value: under autobatch a pending one
    out = []
    for a in leaves:
        if isinstance(a, dg.Tensor) and a.dtype.is_floating_point:
            out.append(a * 1.0)
        elif isinstance(a, dg.Tensor):
            out.append(a.clone())
        else:
            out.append(a)
    return out


def _kwargs(sample):
    return {k: dg.tensor(v.copy()) if isinstance(v, np.ndarray) else v for k, v in sample.kwargs.items()}


def _float_diff(out):
    return [o for o in flat_outputs(out) if isinstance(o, dg.Tensor) and o.dtype.is_floating_point
            and o.requires_grad]


def _run_members(op, samples, req, batched: bool):
    leaves = [_leaves(s, req) for s in samples]
    rng = np.random.default_rng(5)
    ctx = dg.autobatch(stats=True) if batched else None
    if ctx is not None:
        ctx.__enter__()
    try:
        outs, loss = [], None
        for s, lv in zip(samples, leaves, strict=True):
            out = op.fn(dg, *_member_inputs(lv), **_kwargs(s))
            outs.append(flat_outputs(out))
            for o in _float_diff(out):
                v = dg.tensor(rng.uniform(-1, 1, size=tuple(o.shape)))
                term = (o * v).sum()
                loss = term if loss is None else loss + term
        if loss is not None and req:
            loss.backward()
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    grads = [[lv[i].grad for i in sorted(req)] for lv in leaves] if loss is not None and req else None
    return outs, grads, (ctx.stats if ctx is not None else None)


def _close(a, b, what):
    a = np.asarray(a.detach().numpy() if isinstance(a, dg.Tensor) else a)
    b = np.asarray(b.detach().numpy() if isinstance(b, dg.Tensor) else b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_members_match_eager(op):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_seed = [op.samples(np.random.default_rng(10 + m), np.dtype("float64")) for m in range(N)]
        for k in range(len(per_seed[0])):
            samples = [ps[k] for ps in per_seed]
            if any(tuple(getattr(a, "shape", ())) != tuple(getattr(b, "shape", ()))
                   for s in samples[1:] for a, b in zip(samples[0].args, s.args, strict=True)):
                continue  # the sample's shapes are random: members need equal shapes here
            req = _grad_argnums(op, samples[0]) if op.grad else set()
            try:
                exp, gexp, _ = _run_members(op, samples, req, batched=False)
            except Exception:
                with pytest.raises(Exception):  # noqa: B017
                    _run_members(op, samples, req, batched=True)
                continue
            got, ggot, stats = _run_members(op, samples, req, batched=True)
            for m in range(N):
                assert len(got[m]) == len(exp[m])
                for j, (a, b) in enumerate(zip(got[m], exp[m], strict=True)):
                    _close(a, b, f"{op.name} sample {k} member {m} output {j}")
                if gexp is not None:
                    for j, (a, b) in enumerate(zip(ggot[m], gexp[m], strict=True)):
                        if b is None:
                            assert a is None, f"{op.name}: grad {j} of member {m} should be None"
                        else:
                            _close(a, b, f"{op.name} sample {k} member {m} grad of input {j}")
            # nothing ran one by one for want of a rule
            for name, reasons in stats.fallbacks.items():
                assert "no batching rule" not in reasons, f"{name} has no batching rule"
        # members of different shapes in one block (shape-polymorphic records): each shape
        # forms its own groups
        mixed = list(per_seed[0])
        if len(mixed) > 1:
            req = _grad_argnums(op, mixed[0]) if op.grad else set()
            if all((_grad_argnums(op, m) if op.grad else set()) == req for m in mixed):
                try:
                    exp, gexp, _ = _run_members(op, mixed, req, batched=False)
                except Exception:
                    return
                got, ggot, _ = _run_members(op, mixed, req, batched=True)
                for m in range(len(mixed)):
                    for j, (a, b) in enumerate(zip(got[m], exp[m], strict=True)):
                        _close(a, b, f"{op.name} mixed member {m} output {j}")
                    if gexp is not None:
                        for j, (a, b) in enumerate(zip(ggot[m], gexp[m], strict=True)):
                            if b is not None:
                                _close(a, b, f"{op.name} mixed member {m} grad {j}")


def test_every_differentiable_primitive_has_a_batching_rule_or_a_mark():
    missing = [name for name, p in REGISTRY.items()
               if p.differentiable and p.batch is None and p.batchable is None]
    assert not missing, (f"primitives without a batching rule (prim.defbatch(rule)) or an "
                         f"explicit fallback mark (defbatch(fallback=reason)): {missing}")


def test_every_primitive_is_marked():
    unmarked = [name for name, p in REGISTRY.items() if p.batchable is None]
    assert not unmarked, f"primitives with no autobatch entry: {unmarked}"
