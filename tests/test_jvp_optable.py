"""Forward mode for every differentiable op of the table.

``dg.autograd.functional.jvp`` (the double-vjp trick over the registry's rules)
must agree with a central finite difference along a random tangent, in float64:
``J v ≈ (f(x + εv) - f(x - εv)) / 2ε``.  One directional difference costs two
forward calls, so every record is checked on its first two samples.
"""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from tests.helpers import flat_outputs, to_lib
from tests.opinfo import all_ops

EPS = 1e-6
N_SAMPLES = 2

def _cases():
    cases = []
    for op in all_ops():
        if not (op.grad and op.fd) or "float64" not in op.dtypes:
            continue
        samples = op.samples(np.random.default_rng(0), np.dtype("float64"))
        for i in range(min(N_SAMPLES, len(samples))):
            cases.append(pytest.param(op, i, id=f"{op.name}-{i}"))
    return cases


def _diff_argnums(op, sample):
    if op.grad_argnums is not None:
        return sorted(op.grad_argnums)
    return [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def _make_fn(op, sample, argnums):
    """f(*differentiable tensors) -> tuple of the op's floating-point outputs."""

    def f(*tensors):
        args = [to_lib(dg, a) for a in sample.args]
        for k, t in zip(argnums, tensors, strict=True):
            args[k] = t
        kwargs = {k: to_lib(dg, v) for k, v in sample.kwargs.items()}
        outs = flat_outputs(op.fn(dg, *args, **kwargs))
        return tuple(o for o in outs if isinstance(o, dg.Tensor) and o.is_floating_point())

    return f


@pytest.mark.parametrize("op,i", _cases())
def test_jvp_matches_finite_differences(op, i):
    sample = op.samples(np.random.default_rng(0), np.dtype("float64"))[i]
    argnums = _diff_argnums(op, sample)
    if not argnums:
        pytest.skip("no floating-point input")
    f = _make_fn(op, sample, argnums)
    rng = np.random.default_rng(42)
    primals = [sample.args[k] for k in argnums]
    tangents = [np.asarray(rng.uniform(-1, 1, p.shape), dtype=np.float64) for p in primals]

    outs, jv = dg.autograd.functional.jvp(
        f, tuple(dg.tensor(p.copy()) for p in primals), tuple(dg.tensor(t) for t in tangents))
    if not outs:
        pytest.skip("no floating-point output")

    def at(sign):
        shifted = tuple(dg.tensor(np.asarray(p + sign * EPS * t, dtype=np.float64))
                        for p, t in zip(primals, tangents, strict=True))
        with dg.no_grad():
            return [o.numpy().astype(np.float64) for o in f(*shifted)]

    plus, minus = at(1.0), at(-1.0)
    for k, (j, p, m) in enumerate(zip(jv, plus, minus, strict=True)):
        numeric = (p - m) / (2 * EPS)
        np.testing.assert_allclose(j.numpy(), numeric, rtol=1e-4, atol=max(op.fd_atol, 1e-5),
                                   err_msg=f"{op.name}: jvp of output {k} vs finite differences")
