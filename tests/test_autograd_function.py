"""User-defined ``autograd.Function``: the same classes written for dyngraph and for torch."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import assert_close


def make_exp(lib):
    class MyExp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)      # an output: kept without a reference cycle
            return y

        @staticmethod
        def backward(ctx, gy):
            (y,) = ctx.saved_tensors
            return gy * y

    return MyExp


def make_scaled_mul(lib):
    """Two tensor inputs, a Python number, two outputs, needs_input_grad."""

    class ScaledMul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, scale):
            ctx.save_for_backward(a, b)
            ctx.scale = scale
            return a * b * scale, a + b

        @staticmethod
        def backward(ctx, g_prod, g_sum):
            a, b = ctx.saved_tensors
            ga = gb = None
            if ctx.needs_input_grad[0]:
                ga = g_prod * b * ctx.scale + g_sum
            if ctx.needs_input_grad[1]:
                gb = g_prod * a * ctx.scale + g_sum
            return ga, gb, None

    return ScaledMul


def pair(a, requires_grad=True):
    a = np.asarray(a, dtype=np.float64)
    return (dg.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


def test_forward_backward_match_torch():
    xd, xt = pair([0.1, -0.5, 1.2])
    yd, yt = make_exp(dg).apply(xd), make_exp(torch).apply(xt)
    assert_close(yd, yt)
    assert yd.grad_fn.name() == "MyExpBackward"
    (yd * yd).sum().backward()
    (yt * yt).sum().backward()
    assert_close(xd.grad, xt.grad, 1e-12, 1e-12)


def test_multiple_outputs_non_tensor_args_and_none_grads():
    ad, at = pair([1.0, 2.0])
    bd, bt = pair([3.0, -1.0], requires_grad=False)
    needs = []
    for lib, a, b in ((dg, ad, bd), (torch, at, bt)):
        cls = make_scaled_mul(lib)
        p, s = cls.apply(a, b, 2.5)
        assert p.requires_grad and s.requires_grad
        (p.sum() + (s * s).sum()).backward()
        needs.append(p.grad_fn)
    assert_close(ad.grad, at.grad)
    assert bd.grad is None


def test_needs_input_grad_and_missing_output_grad_materialized():
    seen = []

    class F(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            return a * k, b * k

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ctx.needs_input_grad, ga.tolist(), gb.tolist()))
            return ga * 2, gb * 2, None

    a = dg.tensor([1.0, 2.0], requires_grad=True)
    b = dg.tensor([1.0, 2.0])
    y1, _ = F.apply(a, b, 3)
    y1.sum().backward()
    assert seen == [((True, False, False), [1.0, 1.0], [0.0, 0.0])]
    assert a.grad.tolist() == [2.0, 2.0]


def test_set_materialize_grads_false_passes_none():
    seen = []

    class F(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(g2)
            return g1 * 2 if g2 is None else g1 * 2 + g2 * 3

    a = dg.tensor([1.0], requires_grad=True)
    y1, y2 = F.apply(a)
    y1.sum().backward()
    assert seen == [None] and a.grad.tolist() == [2.0]


def test_mark_non_differentiable_matches_torch():
    for lib in (dg, torch):
        class SortLike(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = (x > 0).to(x.dtype)
                ctx.mark_non_differentiable(idx)
                return x * 2, idx

            @staticmethod
            def backward(ctx, g, g_idx):
                assert float(g_idx.abs().sum()) == 0.0
                return g * 2

        x = lib.tensor([1.0, -1.0], requires_grad=True)
        y, idx = SortLike.apply(x)
        assert y.requires_grad and not idx.requires_grad
        y.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]


def test_mark_dirty_in_place_forward():
    for lib in (dg, torch):
        class AddOneInplace(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1.0)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        h = a * 3
        out = AddOneInplace.apply(h)
        assert out is h and h.tolist() == [4.0, 7.0]
        (out * out).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), [24.0, 42.0])


def test_setup_context_style():
    for lib in (dg, torch):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(x, power):
                return x ** power

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, power = inputs
                ctx.save_for_backward(x)
                ctx.power = power

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * ctx.power * x ** (ctx.power - 1), None

        x = lib.tensor([1.0, 2.0], requires_grad=True, dtype=lib.float64)
        Cube.apply(x, 3).sum().backward()
        assert x.grad.tolist() == [3.0, 12.0]


def test_double_backward_through_custom_function_matches_torch():
    xd, xt = pair([0.3, -0.7, 1.1])
    res = []
    for lib, x in ((dg, xd), (torch, xt)):
        y = make_exp(lib).apply(x * x)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        res.append(gg)
    assert_close(res[0], res[1], 1e-10, 1e-12)


def test_once_differentiable_blocks_second_order():
    class Square(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @dg.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert not dg.is_grad_enabled()
            return g * 2 * x

    x = dg.tensor([1.0, 3.0], requires_grad=True)
    Square.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 6.0]
    (g,) = dg.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [2.0, 6.0]
    with pytest.raises(RuntimeError, match="once_differentiable.*Square"):
        g.sum().backward()


def test_saved_tensor_modified_in_place_raises():
    class Mul(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = dg.tensor([1.0, 2.0], requires_grad=True)
    b = dg.tensor([3.0, 4.0])
    y = Mul.apply(a, b)
    b.add_(1.0)
    with pytest.raises(RuntimeError, match=r"inplace operation.*saved tensor 1 of 'Mul'.*version 1"):
        y.sum().backward()


def test_saved_output_modified_in_place_raises():
    y = make_exp(dg).apply(dg.tensor([1.0], requires_grad=True))
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="inplace operation.*MyExp"):
        y.sum().backward()


def test_second_backward_through_freed_custom_function_raises():
    x = dg.tensor([1.0], requires_grad=True)
    y = make_exp(dg).apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*MyExp"):
        y.backward()
    y2 = make_exp(dg).apply(x).sum()
    y2.backward(retain_graph=True)
    y2.backward()
    assert np.isclose(x.grad.item(), 3 * np.e)


def test_wrong_number_or_shape_of_gradients_raises():
    class Bad(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"incorrect number of gradients \(expected 2, got 1\)"):
        Bad.apply(a, a).sum().backward()

    class BadShape(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.sum()

        @staticmethod
        def backward(ctx, g):
            return dg.ones(3)

    with pytest.raises(RuntimeError, match=r"invalid gradient at index 0 - got \[3\].*\[2\]"):
        BadShape.apply(a).backward()


def test_broadcast_gradient_is_summed_to_input_shape():
    class Expand(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * dg.ones(3, 2, dtype=g.dtype)   # broadcast (3, 2) for input (2,)

    a = dg.tensor([1.0, 2.0], requires_grad=True)
    Expand.apply(a).sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


def test_no_grad_and_no_requiring_inputs_record_nothing():
    x = dg.tensor([1.0], requires_grad=True)
    with dg.no_grad():
        y = make_exp(dg).apply(x)
    assert y.grad_fn is None and not y.requires_grad
    y = make_exp(dg).apply(dg.tensor([1.0]))
    assert y.grad_fn is None


def test_returning_an_input_gives_a_new_tensor():
    class Identity(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    x = dg.tensor([1.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.tolist() == [5.0]


def test_no_reference_cycle_outputs_and_ctx():
    gc.collect()
    gc.disable()
    try:
        x = dg.tensor([1.0, 2.0], requires_grad=True)
        y = make_exp(dg).apply(x)
        node_ref = weakref.ref(y.grad_fn)
        ctx_ref = weakref.ref(y.grad_fn.prim.ctx)
        y_ref = weakref.ref(y)
        del y
        assert y_ref() is None and node_ref() is None and ctx_ref() is None
    finally:
        gc.enable()


def test_custom_function_with_hooks_and_anomaly():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = make_exp(dg).apply(x)
    y.register_hook(lambda g: g * 2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))

    class NaNBack(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    with dg.autograd.detect_anomaly():
        out = NaNBack.apply(x)   # the line anomaly mode must point at
        with pytest.raises(RuntimeError, match=r"NaNBackBackward.*nan") as info:
            out.sum().backward()
    assert "out = NaNBack.apply(x)" in str(info.value)


def test_legacy_instance_call_is_rejected():
    with pytest.raises(RuntimeError, match="staticmethod"):
        make_exp(dg)()(dg.tensor([1.0]))


def test_vjp_is_an_alias_of_backward():
    class Double(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    x = dg.tensor([1.0], requires_grad=True)
    Double.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0]
