"""Every record of the op table, captured with dg.compile and replayed on fresh inputs.

Values must equal eager mode (float64, 1e-12) and so must gradients (the
backward program is captured from the same vjp rules).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dyngraph as dg
from tests.helpers import flat_outputs, to_lib
from tests.opinfo import all_ops

OPS = [op for op in all_ops() if "float64" in op.dtypes]


def _grad_argnums(op, sample):
    if op.grad_argnums is not None:
        return set(op.grad_argnums)
    return {i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"}


def _inputs(op, sample, req):
    args = [to_lib(dg, a, i in req) for i, a in enumerate(sample.args)]
    kwargs = {k: to_lib(dg, v) for k, v in sample.kwargs.items()}
    return args, kwargs


def _float_outs(out):
    return [o for o in flat_outputs(out) if isinstance(o, dg.Tensor) and o.dtype.is_floating_point]


def _close(a, b, what):
    a = np.asarray(a.detach().numpy() if isinstance(a, dg.Tensor) else a)
    b = np.asarray(b.detach().numpy() if isinstance(b, dg.Tensor) else b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=what)


def _run(fn, op, sample, req, seed):
    args, kwargs = _inputs(op, sample, req)
    out = fn(*args, **kwargs)
    outs = flat_outputs(out)
    grads = None
    diff = [o for o in _float_outs(out) if o.requires_grad]
    if req and diff:
        rng = np.random.default_rng(seed)
        loss = None
        for o in diff:
            v = dg.tensor(rng.uniform(-1, 1, size=tuple(o.shape)).astype(o.numpy(force=True).dtype))
            term = (o * v).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        grads = [args[i].grad for i in sorted(req)]
    return outs, grads


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_capture_replay_matches_eager(op):
    first = op.samples(np.random.default_rng(0), np.dtype("float64"))[0]
    fresh = op.samples(np.random.default_rng(7), np.dtype("float64"))[0]
    req = _grad_argnums(op, first) if op.grad else set()

    def fn(*a, **k):
        return op.fn(dg, *a, **k)

    compiled = dg.compile(fn, warn=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(compiled, op, first, req, 1)          # capture
        got, ggot = _run(compiled, op, fresh, req, 2)   # replay on fresh inputs
    exp, gexp = _run(fn, op, fresh, req, 2)
    assert len(got) == len(exp)
    for k, (a, b) in enumerate(zip(got, exp, strict=True)):
        _close(a, b, f"{op.name} output {k}")
    if gexp is not None:
        for k, (a, b) in enumerate(zip(ggot, gexp, strict=True)):
            if b is None:
                assert a is None
            else:
                _close(a, b, f"{op.name} grad of input {k}")
