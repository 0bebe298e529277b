"""Generated tests: every record of the op table against PyTorch and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import assert_close, flat_outputs, to_lib, to_np
from tests.opinfo import all_ops

OPS = all_ops()


def _cases(filter_fn=lambda op: True, dtypes=None):
    cases = []
    for op in OPS:
        if not filter_fn(op):
            continue
        for dt in dtypes or op.dtypes:
            if dt not in op.dtypes:
                continue
            samples = op.samples(np.random.default_rng(0), np.dtype(dt))
            for i, s in enumerate(samples):
                cases.append(pytest.param(op, dt, i, id=f"{op.name}-{dt}-{i}{'-' + s.desc if s.desc else ''}"))
    return cases


def _sample(op, dt, i):
    return op.samples(np.random.default_rng(0), np.dtype(dt))[i]


def _grad_argnums(op, sample):
    if op.grad_argnums is not None:
        return set(op.grad_argnums)
    return {i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"}


def _call(lib, op, sample, requires=()):
    args = [to_lib(lib, a, i in requires) for i, a in enumerate(sample.args)]
    kwargs = {k: to_lib(lib, v) for k, v in sample.kwargs.items()}
    return op.fn(lib, *args, **kwargs), args


@pytest.mark.parametrize("op,dt,i", _cases())
def test_values_match_torch(op, dt, i):
    sample = _sample(op, dt, i)
    out, _ = _call(dg, op, sample)
    if op.skip_torch:
        expected = op.reference(*sample.args, **sample.kwargs)
    else:
        expected, _ = _call(torch, op, sample)
    outs, exps = flat_outputs(out), flat_outputs(expected)
    assert len(outs) == len(exps)
    for k, (o, e) in enumerate(zip(outs, exps)):
        assert_close(o, e, op.rtol, op.atol, msg=f"{op.name} output {k}")
        if op.compare_dtype and isinstance(e, torch.Tensor):
            assert o.dtype.name == str(e.dtype).replace("torch.", ""), f"{op.name}: dtype {o.dtype} vs {e.dtype}"


def _backward(lib, op, sample, rng_seed=1, track=True):
    req = _grad_argnums(op, sample)
    out, args = _call(lib, op, sample, req if track else ())
    outs = [o for o in flat_outputs(out) if o.dtype.is_floating_point and (o.requires_grad or not track)]
    rng = np.random.default_rng(rng_seed)
    loss = None
    for o in outs:
        v = to_lib(lib, rng.uniform(-1, 1, size=tuple(o.shape)).astype(to_np(o).dtype))
        term = (o * v).sum()
        loss = term if loss is None else loss + term
    inputs = [args[i] for i in sorted(req)]
    return loss, inputs


@pytest.mark.parametrize("op,dt,i", _cases(lambda op: op.grad and not op.skip_torch, ("float64",)))
def test_grads_match_torch(op, dt, i):
    sample = _sample(op, dt, i)
    loss_d, ins_d = _backward(dg, op, sample)
    loss_t, ins_t = _backward(torch, op, sample)
    if loss_t is None:
        assert loss_d is None
        return
    gd = dg.autograd.grad(loss_d, ins_d, allow_unused=True)
    gt = torch.autograd.grad(loss_t, ins_t, allow_unused=True)
    for k, (a, b) in enumerate(zip(gd, gt)):
        if b is None:
            assert a is None or np.allclose(to_np(a), 0), f"{op.name}: grad {k} should be None"
            continue
        assert a is not None, f"{op.name}: grad {k} is None but torch has one"
        assert_close(a, b, 1e-7, 1e-9, msg=f"{op.name} grad {k}")
        assert a.dtype.name == str(b.dtype).replace("torch.", "")


@pytest.mark.parametrize("op,dt,i", _cases(lambda op: op.grad and op.fd, ("float64",)))
def test_grads_match_finite_differences(op, dt, i):
    sample = _sample(op, dt, i)
    req = sorted(_grad_argnums(op, sample))
    loss, ins = _backward(dg, op, sample)
    if loss is None:
        return
    analytic = dg.autograd.grad(loss, ins, allow_unused=True)
    eps = 1e-6
    for k, argnum in enumerate(req):
        base = sample.args[argnum]
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            vals = []
            for sgn in (1, -1):
                args = list(sample.args)
                pert = base.copy()
                pert[idx] += sgn * eps
                args[argnum] = pert
                lp, _ = _backward(dg, op, type(sample)(tuple(args), sample.kwargs), track=False)
                vals.append(lp.item())
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        a = np.zeros_like(base) if analytic[k] is None else to_np(analytic[k])
        np.testing.assert_allclose(a, numeric, rtol=1e-4, atol=op.fd_atol,
                                   err_msg=f"{op.name}: grad of arg {argnum} vs finite differences")


def _second_order(lib, op, sample):
    loss, ins = _backward(lib, op, sample)
    if loss is None:
        return None
    gs = lib.autograd.grad(loss, ins, create_graph=True, allow_unused=True)
    rng = np.random.default_rng(7)
    loss2 = None
    for g in gs:
        if g is None or not g.requires_grad:
            continue
        w = to_lib(lib, rng.uniform(-1, 1, size=tuple(g.shape)))
        term = (g * w).sum()
        loss2 = term if loss2 is None else loss2 + term
    if loss2 is None:
        return [None] * len(ins)
    return lib.autograd.grad(loss2, ins, allow_unused=True)


@pytest.mark.parametrize("op,dt,i", _cases(lambda op: op.grad and op.gradgrad and not op.skip_torch, ("float64",)))
def test_second_order_grads_match_torch(op, dt, i):
    sample = _sample(op, dt, i)
    gd = _second_order(dg, op, sample)
    gt = _second_order(torch, op, sample)
    if gt is None:
        return
    for k, (a, b) in enumerate(zip(gd, gt)):
        a = None if a is None else to_np(a)
        b = None if b is None else to_np(b)
        if b is None:
            b = np.zeros_like(a) if a is not None else None
        if a is None:
            a = np.zeros_like(b) if b is not None else None
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=f"{op.name}: 2nd-order grad {k}")
