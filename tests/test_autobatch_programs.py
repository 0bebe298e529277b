"""Random programs with data-dependent branches, run as members inside ``dg.autobatch``,
equal eager (values and gradients, float64)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dyngraph as dg

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)

UNARY = [dg.tanh, dg.sigmoid, dg.sin, lambda x: x * x, lambda x: dg.exp(-x * x), dg.relu,
         lambda x: x.cumsum(-1), lambda x: dg.softmax(x, dim=-1), lambda x: x.flip(-1)]
BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - 0.5 * b,
          lambda a, b: dg.maximum(a, b), lambda a, b: dg.cat([a, b], -1)[..., : a.shape[-1]]]

step = st.tuples(st.sampled_from(["unary", "binary", "branch", "matmul", "reduce_back"]),
                 st.integers(0, 100), st.integers(0, 100))


def program(steps, W, x):
    """A little program: every value in ``vals`` has the shape of ``x``; branches read values."""
    vals = [x]
    for kind, i, j in steps:
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if kind == "unary":
            vals.append(UNARY[i % len(UNARY)](a))
        elif kind == "binary":
            vals.append(BINARY[j % len(BINARY)](a, b))
        elif kind == "matmul":
            vals.append(dg.tanh(a @ W))
        elif kind == "reduce_back":
            vals.append(a - a.mean(-1, keepdim=True))
        elif a.sum() > b.sum():           # a data-dependent branch: forces a and b only
            vals.append(a * 2.0)
        else:
            vals.append(dg.sin(b))
    return sum(v.sum() for v in vals[1:]) if len(vals) > 1 else x.sum()


@SETTINGS
@given(steps=st.lists(step, min_size=1, max_size=8), seed=st.integers(0, 2**31 - 1),
       n=st.integers(1, 5))
def test_random_programs_as_members_equal_eager(steps, seed, n):
    rng = np.random.default_rng(seed)
    W = dg.nn.Parameter(dg.tensor(rng.standard_normal((3, 3))))
    xs = [dg.tensor(rng.standard_normal((2, 3)), requires_grad=True) for _ in range(n)]

    def run(batched):
        W.grad = None
        for x in xs:
            x.grad = None
        ctx = dg.autobatch() if batched else None
        if ctx is not None:
            ctx.__enter__()
        try:
            outs = [program(steps, W, x * 1.0) for x in xs]
            total = dg.stack(outs).sum()
            total.backward()
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        return ([float(o) for o in outs], W.grad.numpy().copy() if W.grad is not None else None,
                [x.grad.numpy().copy() for x in xs])

    ve, gwe, gxe = run(False)
    vb, gwb, gxb = run(True)
    np.testing.assert_allclose(vb, ve, rtol=1e-11, atol=1e-11)
    if gwe is None:
        assert gwb is None
    else:
        np.testing.assert_allclose(gwb, gwe, rtol=1e-11, atol=1e-11)
    for a, b in zip(gxb, gxe, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11)
