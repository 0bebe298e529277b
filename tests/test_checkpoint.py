"""Activation checkpointing: ``dg.utils.checkpoint`` against plain runs and torch.utils.checkpoint."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import dyngraph as dg
from dyngraph.utils.checkpoint import checkpoint, checkpoint_sequential
from tests.helpers import assert_close

RNG = np.random.default_rng(11)
W1 = RNG.uniform(-1, 1, (3, 4))
W2 = RNG.uniform(-1, 1, (4, 2))
X = RNG.uniform(-1, 1, (5, 3))


def setup(lib):
    t = dg.tensor if lib is dg else torch.tensor
    w1 = t(W1.copy(), requires_grad=True)
    w2 = t(W2.copy(), requires_grad=True)
    x = t(X.copy(), requires_grad=True)

    def block(h, scale=1.0):
        a = (h @ w1).tanh() * scale     # parameters reach the block by closure
        return (a @ w2).sin() + a.sum()

    return w1, w2, x, block


def run(lib, use_cp):
    w1, w2, x, block = setup(lib)
    h = x * 2
    if use_cp:
        if lib is dg:
            y = checkpoint(block, h, use_reentrant=False, scale=0.5)
        else:
            y = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False, scale=0.5)
    else:
        y = block(h, scale=0.5)
    (y * y).sum().backward()
    return y, x.grad, w1.grad, w2.grad


def test_grads_equal_plain_run_and_torch_checkpoint():
    plain = run(dg, False)
    cp = run(dg, True)
    ref = run(torch, True)
    for a, b, c in zip(plain, cp, ref, strict=True):
        assert_close(b, a, 1e-14, 1e-14)
        assert_close(b, c, 1e-12, 1e-12)


def test_function_is_recomputed_in_backward():
    calls = []
    x = dg.tensor([1.0, 2.0], requires_grad=True)

    def f(t):
        calls.append(1)
        return t.exp()

    y = dg.utils.checkpoint(f, x, use_reentrant=False)   # the module is callable too
    assert len(calls) == 1
    y.sum().backward()
    assert len(calls) == 2
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))


def test_intermediates_are_not_kept_alive():
    refs = []
    x = dg.tensor(RNG.uniform(size=(4, 4)), requires_grad=True)

    def f(t):
        a = t.exp()
        b = a * t
        refs.extend([weakref.ref(a), weakref.ref(b), weakref.ref(b.grad_fn)])
        return b.sin()

    gc.collect()
    gc.disable()
    try:
        y = checkpoint(f, x, use_reentrant=False)
        assert all(r() is None for r in refs)
        plain = f(x)
        assert all(r() is not None for r in refs[3:])   # without checkpointing they live
        del plain
        y.sum().backward()
    finally:
        gc.enable()
    np.testing.assert_allclose(x.grad.numpy(), (np.exp(x.numpy(force=True)) * (1 + x.numpy(force=True)))
                               * np.cos(np.exp(x.numpy(force=True)) * x.numpy(force=True)))


def test_rng_state_is_replayed():
    x = dg.tensor(RNG.uniform(1, 2, (200,)), requires_grad=True)

    def f(t):
        mask = (dg.rand(*t.shape) > 0.5).to(t.dtype)
        return t * t * mask

    dg.manual_seed(3)
    f(x).sum().backward()
    expected = x.grad.numpy().copy()
    x.grad = None
    dg.manual_seed(3)
    checkpoint(f, x, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected)
    x.grad = None
    dg.manual_seed(3)
    checkpoint(f, x, use_reentrant=False, preserve_rng_state=False).sum().backward()
    assert not np.allclose(x.grad.numpy(), expected)


def test_autograd_grad_and_double_backward_through_checkpoint():
    w1, w2, x, block = setup(dg)
    wt1, wt2, xt, blockt = setup(torch)
    y = checkpoint(block, x, use_reentrant=False)
    yt = torch.utils.checkpoint.checkpoint(blockt, xt, use_reentrant=False)
    g = dg.autograd.grad(y.sum(), [w1, x], create_graph=True)
    gt = torch.autograd.grad(yt.sum(), [wt1, xt], create_graph=True)
    for a, b in zip(g, gt, strict=True):
        assert_close(a, b, 1e-12, 1e-12)
    (g[0] * g[1].sum()).sum().backward()
    (gt[0] * gt[1].sum()).sum().backward()
    assert_close(w1.grad, wt1.grad, 1e-10, 1e-12)
    assert_close(w2.grad, wt2.grad, 1e-10, 1e-12)


def test_multiple_outputs_non_tensor_args_and_outside_non_leaf():
    x = dg.tensor([0.5, 1.5], requires_grad=True)
    outside = x * 3                         # a non-leaf read through the closure

    def f(t, k):
        return t * outside * k, t.exp(), "tag"

    a, b, tag = checkpoint(f, x, 2.0, use_reentrant=False)
    assert tag == "tag"
    (a.sum() + b.sum()).backward(retain_graph=True)
    xv = np.array([0.5, 1.5])
    np.testing.assert_allclose(x.grad.numpy(), 12 * xv + np.exp(xv))
    x.grad = None
    (outside * 1.0).sum().backward()        # the recomputation did not consume it either
    assert x.grad.tolist() == [3.0, 3.0]


def test_custom_function_and_nested_checkpoint_inside():
    class Cube(dg.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t ** 3

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return 3 * g * t * t

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda t: checkpoint(lambda u: Cube.apply(u).sin(), t * 2, use_reentrant=False),
                   x, use_reentrant=False)
    y.sum().backward()
    u = 2 * np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), np.cos(u ** 3) * 3 * u ** 2 * 2)


def test_modified_argument_raises():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = checkpoint(lambda t: t.exp(), h, use_reentrant=False)
    h.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"inplace operation.*checkpoint.*version 1"):
        y.sum().backward()


def test_second_backward_needs_retain_graph():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda t: t.exp(), x, use_reentrant=False).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))
    y = checkpoint(lambda t: t.exp(), x, use_reentrant=False).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*checkpoint"):
        y.backward()


def test_no_grad_just_runs():
    x = dg.tensor([1.0], requires_grad=True)
    with dg.no_grad():
        y = checkpoint(lambda t: t * 2, x, use_reentrant=False)
    assert not y.requires_grad


def test_checkpoint_sequential_matches_plain():
    fns = [lambda t: t.sin(), lambda t: t * 3, lambda t: t.exp(), lambda t: t.tanh(), lambda t: t ** 2]
    a = RNG.uniform(-1, 1, (4,))
    x1 = dg.tensor(a.copy(), requires_grad=True)
    x2 = dg.tensor(a.copy(), requires_grad=True)
    out = x1
    for f in fns:
        out = f(out)
    out.sum().backward()
    checkpoint_sequential(fns, 2, x2, use_reentrant=False).sum().backward()
    assert_close(x2.grad, x1.grad, 1e-14, 1e-14)


def test_checkpoint_under_an_observing_interpreter():
    seen = []

    from dyngraph._core.interpreter import Interpreter, interpreting

    class Observer(Interpreter):
        """Watches and hands calls below, like the profiler's interpreter."""

        observer = True

        def process(self, prim, args, params):
            seen.append(prim.name)
            return self.process_below(prim, args, params)

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    refs = []

    def f(t):
        a = t.exp()
        refs.append(weakref.ref(a))
        return a * t

    with interpreting(Observer()):
        y = checkpoint(f, x, use_reentrant=False)
    assert "exp" in seen and refs[0]() is None
    y.sum().backward()
    xv = np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), np.exp(xv) * (1 + xv))


def test_modules_with_dropout_match_plain_run():
    dg.manual_seed(0)
    m = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.Tanh(), dg.nn.Dropout(0.5), dg.nn.Linear(8, 2))
    x = dg.randn(3, 4)
    dg.manual_seed(1)
    m(x).sum().backward()
    expected = [p.grad.numpy().copy() for p in m.parameters()]
    for run_cp in (lambda: checkpoint(m, x, use_reentrant=False),
                   lambda: checkpoint_sequential(m, 2, x, use_reentrant=False)):
        m.zero_grad()
        dg.manual_seed(1)
        run_cp().sum().backward()
        for e, p in zip(expected, m.parameters(), strict=True):
            np.testing.assert_array_equal(p.grad.numpy(), e)
