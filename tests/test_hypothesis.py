"""Property tests: broadcasting and random op compositions against PyTorch (float64).

Hypothesis draws shapes (mutually broadcastable ones for binary ops) and short
programs of unary, binary, reduction, reshape and matmul steps; every program
is run with dyngraph and with torch on the same data, and the values and the
gradients of every input must agree.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import dyngraph as dg
from tests.helpers import assert_close

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

BINARY = {
    "add": lambda lib, a, b: a + b,
    "sub": lambda lib, a, b: a - b,
    "mul": lambda lib, a, b: a * b,
    "div": lambda lib, a, b: a / b,
    "pow": lambda lib, a, b: a.abs() ** b,
    "maximum": lambda lib, a, b: lib.maximum(a, b),
    "atan2": lambda lib, a, b: lib.atan2(a, b),
    "where": lambda lib, a, b: lib.where(a > b, a * b, a - b),
}


def tensors(arrays):
    d = [dg.tensor(a.copy(), requires_grad=True) for a in arrays]
    t = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    return d, t


def check(fn, arrays, rng):
    """Run ``fn(lib, *tensors)`` in both libraries; compare output and input gradients."""
    (ds, ts) = tensors(arrays)
    od, ot = fn(dg, *ds), fn(torch, *ts)
    assert tuple(od.shape) == tuple(ot.shape)
    assert_close(od, ot, 1e-10, 1e-12, msg="value")
    v = rng.uniform(-1, 1, tuple(ot.shape))
    gd = dg.autograd.grad((od * dg.tensor(v)).sum(), ds, allow_unused=True)
    gt = torch.autograd.grad((ot * torch.tensor(v)).sum(), ts, allow_unused=True)
    for k, (a, b) in enumerate(zip(gd, gt, strict=True)):
        if b is None:
            assert a is None or not np.any(a.numpy()), f"grad {k}: torch has none"
            continue
        assert a is not None, f"grad {k} missing"
        assert_close(a, b, 1e-9, 1e-11, msg=f"grad {k}")


def away_from_zero(rng, shape):
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       op=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**31 - 1))
def test_binary_broadcasting_matches_torch(shapes, op, seed):
    rng = np.random.default_rng(seed)
    a_shape, b_shape = shapes.input_shapes
    a = away_from_zero(rng, a_shape)
    b = away_from_zero(rng, b_shape)
    if op == "maximum":
        b = b + 0.1  # no exact ties (the gradient split at ties is a convention)
    check(BINARY[op], [np.asarray(a), np.asarray(b)], rng)


# -- random compositions ---------------------------------------------------------------

UNARY = {
    "sin": lambda lib, t: t.sin(),
    "tanh": lambda lib, t: t.tanh(),
    "sigmoid": lambda lib, t: t.sigmoid(),
    "exp_tanh": lambda lib, t: t.tanh().exp(),
    "square": lambda lib, t: t * t,
    "log1p_sq": lambda lib, t: (t * t).log1p(),
    "scale": lambda lib, t: t * 1.5 - 0.25,
    "neg": lambda lib, t: -t,
}


@st.composite
def programs(draw):
    """A start shape and 1..5 steps; each step knows the shape it produces."""
    shape = draw(array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    start = shape
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        kinds = ["unary", "binary"]
        if len(shape) >= 1:
            kinds += ["sum", "mean", "flatten", "matmul"]
        if len(shape) >= 2:
            kinds += ["transpose", "permute"]
        kind = draw(st.sampled_from(kinds))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY)))))
        elif kind == "binary":
            # the other operand's shape: a suffix of ours, with some sides set to 1
            k = draw(st.integers(0, len(shape)))
            other = tuple(s if draw(st.booleans()) else 1 for s in shape[len(shape) - k:])
            steps.append(("binary", (draw(st.sampled_from(["add", "mul", "sub"])), other)))
        elif kind in ("sum", "mean"):
            dim = draw(st.integers(-len(shape), len(shape) - 1))
            keep = draw(st.booleans())
            steps.append((kind, (dim, keep)))
            d = dim % len(shape)
            shape = shape[:d] + ((1,) if keep else ()) + shape[d + 1:]
        elif kind == "flatten":
            steps.append(("flatten", None))
            shape = (int(np.prod(shape)),)
        elif kind == "matmul":
            n = draw(st.integers(1, 3))
            steps.append(("matmul", (shape[-1], n)))
            shape = shape[:-1] + (n,)
        elif kind == "transpose":
            steps.append(("transpose", None))
            shape = (shape[-1],) + shape[1:-1] + (shape[0],)
        else:
            steps.append(("permute", None))
            shape = tuple(reversed(shape))
    return start, steps


def build(steps):
    """The program as fn(lib, x, *extra) plus the shapes of the extra operands."""
    extras = []
    for kind, arg in steps:
        if kind == "binary":
            extras.append(arg[1])
        elif kind == "matmul":
            extras.append(arg)

    def fn(lib, x, *others):
        it = iter(others)
        t = x
        for kind, arg in steps:
            if kind == "unary":
                t = UNARY[arg](lib, t)
            elif kind == "binary":
                o = next(it)
                t = t + o if arg[0] == "add" else t * o if arg[0] == "mul" else t - o
            elif kind == "sum":
                t = t.sum(dim=arg[0], keepdim=arg[1])
            elif kind == "mean":
                t = t.mean(dim=arg[0], keepdim=arg[1])
            elif kind == "flatten":
                t = t.reshape(-1)
            elif kind == "matmul":
                t = t @ next(it)
            elif kind == "transpose":
                t = t.transpose(0, -1)
            else:
                t = t.permute(*reversed(range(t.ndim)))
        return t

    return fn, extras


@SETTINGS
@given(program=programs(), seed=st.integers(0, 2**31 - 1))
def test_random_compositions_match_torch(program, seed):
    start, steps = program
    rng = np.random.default_rng(seed)
    fn, extras = build(steps)
    arrays = [np.asarray(rng.uniform(-1.5, 1.5, start))]
    arrays += [np.asarray(rng.uniform(-1.5, 1.5, s)) for s in extras]
    check(fn, arrays, rng)
