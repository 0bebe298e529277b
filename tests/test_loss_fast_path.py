"""The fused ``cross_entropy`` node of ``F.cross_entropy``'s eager short path (issue 13, "Loss
path" in docs/performance.md) against PyTorch, against the composition of ``log_softmax`` and
``nll_loss`` it replaces, and the residual it keeps for the backward."""

import numpy as np
import pytest
import torch

import dyngraph as dg
import dyngraph.nn.functional as F
from dyngraph.ops.nn import SoftmaxResidual, cross_entropy_p, log_softmax_p, nll_loss_p

# (N, C): one row (the whole-array path), small (<= 1024 elements), large (global shift),
# large with a wide spread (per-row shift)
SHAPES = [(1, 5), (1, 1), (6, 7), (3, 1), (8, 300), (4, 3001)]


def _logits(shape, dtype, seed, spread=3.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * spread).astype(dtype)


def _targets(n, c, seed, ignore=None):
    t = np.random.default_rng(seed + 1).integers(0, c, size=n)
    if ignore is not None and n > 1:
        t[::2] = ignore
    return t


def _pair(x, t, **kw):
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor(t), **kw)
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t), **kw)
    return a, b, la, lb


def _tols(dtype):
    return (2e-6, 1e-6) if dtype == np.float32 else (1e-12, 1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [None, 2, -100])
def test_values_and_grads_match_torch(dtype, shape, reduction, ignore):
    n, c = shape
    if ignore == 2 and c <= 2:
        pytest.skip("ignore_index must be a class here")
    x = _logits(shape, dtype, n * 31 + c, spread=40.0 if c == 3001 else 3.0)
    t = _targets(n, c, n + c, ignore)
    kw = {"reduction": reduction} if ignore is None else {"reduction": reduction, "ignore_index": ignore}
    a, b, la, lb = _pair(x, t, **kw)
    assert la.grad_fn.name() == "NllLossBackward0"
    assert la.grad_fn.prim is cross_entropy_p      # the fused node, not the composition
    rtol, atol = _tols(dtype)
    np.testing.assert_allclose(la.detach().numpy(), lb.detach().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True)
    g = np.random.default_rng(7).standard_normal(lb.shape).astype(dtype)
    la.backward(dg.tensor(g))
    lb.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=10 * rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_target_ignored_gives_nan_and_a_zero_gradient(dtype):
    x = _logits((3, 4), dtype, 0)
    t = np.full(3, -100)
    for reduction in ("mean", "sum"):
        a, b, la, lb = _pair(x, t, reduction=reduction)
        np.testing.assert_allclose(la.item(), lb.item(), equal_nan=True)
        la.backward()
        lb.backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())   # zeros


@pytest.mark.parametrize("shape", SHAPES + [(20, 5001)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_same_bits_as_log_softmax_then_nll_loss(shape, reduction):
    # the fused forward forms log-probabilities at the targets with log_softmax's operations
    n, c = shape
    for seed, spread in ((0, 3.0), (1, 80.0)):
        x = _logits(shape, np.float32, seed, spread)
        for ignore in (-100, 0):
            t = _targets(n, c, seed, ignore if n > 1 else None)
            fused = cross_entropy_p.impl(x, t, reduction=reduction, ignore_index=ignore)
            comp = nll_loss_p.impl(log_softmax_p.impl(x, dim=1), t, reduction=reduction,
                                   ignore_index=ignore)
            np.testing.assert_array_equal(fused, comp)


def test_the_backward_uses_the_residual_once_and_recomputes_after():
    x = _logits((5, 2000), np.float32, 3)
    t = _targets(5, 2000, 3)
    a, b, la, lb = _pair(x, t)
    box = la.grad_fn.params["residual"]
    assert isinstance(box, SoftmaxResidual) and box.e is not None
    la.backward(retain_graph=True)
    assert box.e is None and box.s is None          # given up to the first backward
    first = a.grad.numpy().copy()
    a.grad = None
    la.backward()                                   # recomputed from the saved logits
    np.testing.assert_allclose(a.grad.numpy(), first, rtol=1e-6, atol=1e-9)
    lb.backward()
    np.testing.assert_allclose(first, b.grad.numpy(), rtol=2e-5, atol=1e-8)


def test_no_residual_without_a_graph():
    x = dg.tensor(_logits((4, 6), np.float32, 1), requires_grad=True)
    t = dg.tensor(_targets(4, 6, 1))
    with dg.no_grad():
        assert F.cross_entropy(x, t).grad_fn is None
    assert F.cross_entropy(x.detach(), t).grad_fn is None
    # the primitive alone keeps nothing
    assert cross_entropy_p.impl(x.detach().numpy(), t.numpy()).shape == ()


def test_inplace_change_of_the_logits_is_caught():
    x = dg.tensor(_logits((2, 5), np.float32, 2), requires_grad=True)
    y = x * 1.0
    loss = F.cross_entropy(y, dg.tensor([1, 4]))
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape,ignore", [((1, 5), -100), ((4, 6), -100), ((4, 6), 1)])
def test_second_order_matches_torch(reduction, shape, ignore):
    n, c = shape
    x = _logits(shape, np.float64, 5)
    t = _targets(n, c, 5, ignore if ignore >= 0 else None)
    kw = {"reduction": reduction, "ignore_index": ignore}
    outs = []
    for lib in (dg, torch):
        xa = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(xa, lib.tensor(t), **kw)
        if reduction == "none":
            loss = (loss * lib.tensor(np.linspace(0.5, 2.0, n))).sum()
        (gx,) = lib.autograd.grad(loss, (xa,), create_graph=True)
        (hx,) = lib.autograd.grad((gx * gx).sum() + (gx * lib.tensor(x)).sum(), (xa,))
        outs.append((gx.detach().numpy(), hx.numpy()))
    for d, r in zip(outs[0], outs[1], strict=True):
        np.testing.assert_allclose(d, r, rtol=1e-10, atol=1e-12)


def test_gradients_match_finite_differences():
    x = _logits((3, 4), np.float64, 9)
    t = np.array([1, -100, 3])
    fn = lambda v: F.cross_entropy(v, dg.tensor(t), reduction="sum")
    assert dg.autograd.gradcheck(fn, (dg.tensor(x, requires_grad=True),))


def test_bfloat16_runs_in_float32_like_torch():
    x = _logits((3, 7), np.float32, 4)
    t = np.array([0, 6, 2])
    a = dg.tensor(x, dtype=dg.bfloat16, requires_grad=True)
    b = torch.tensor(x, dtype=torch.bfloat16, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor(t))
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t))
    np.testing.assert_allclose(la.float().item(), lb.float().item(), rtol=1e-2)
    la.backward()
    lb.backward()
    np.testing.assert_allclose(a.grad.float().numpy(), b.grad.float().numpy(), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_general_path_still_matches_torch(dtype):
    # weight=, label_smoothing=, class probabilities, (N, C, d) inputs, 1-d input: the
    # composition (log_softmax + nll_loss and friends), not the fused node
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 5)).astype(dtype)
    t = np.array([0, 4, 2, 2])
    w = rng.uniform(0.5, 2.0, 5).astype(dtype)
    p = rng.uniform(size=(4, 5)).astype(dtype)
    p /= p.sum(axis=1, keepdims=True)
    x3 = rng.standard_normal((2, 5, 3)).astype(dtype)
    t3 = np.array([[0, 1, -100], [4, 2, 3]])
    cases = [
        (x, t, {"weight": w}), (x, t, {"weight": w, "ignore_index": 2, "reduction": "sum"}),
        (x, t, {"label_smoothing": 0.1}), (x, t, {"label_smoothing": 0.2, "weight": w}),
        (x, p, {}), (x, p, {"reduction": "none", "label_smoothing": 0.05}),
        (x3, t3, {}), (x3, t3, {"reduction": "none"}), (x[0], np.array(3), {}),
    ]
    rtol, atol = _tols(dtype)
    for xi, ti, kw in cases:
        a = dg.tensor(xi, requires_grad=True)
        b = torch.tensor(xi, requires_grad=True)
        kd = {k: dg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        kt = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        la = F.cross_entropy(a, dg.tensor(ti), **kd)
        lb = torch.nn.functional.cross_entropy(b, torch.tensor(ti), **kt)
        assert la.grad_fn.prim is not cross_entropy_p, kw
        np.testing.assert_allclose(la.detach().numpy(), lb.detach().numpy(), rtol=rtol, atol=atol)
        la.sum().backward()
        lb.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=10 * rtol, atol=atol)


def test_graph_capture_records_the_fused_node_and_replays_eager_bits():
    # the same node under graph capture (no residual: its backward is the rule on arrays at
    # replay, recomputing the exponentials), so compiled and eager steps agree bit for bit
    x = _logits((6, 1500), np.float32, 8)
    t = _targets(6, 1500, 8, ignore=3)
    g = dg.jit.trace(lambda a, b: F.cross_entropy(a, b, ignore_index=3), (dg.tensor(x), dg.tensor(t)))
    assert "cross_entropy(" in str(g.graph) and "residual" not in str(g.graph)

    def step(a, b):
        loss = F.cross_entropy(a, b, ignore_index=3)
        loss.backward()
        return loss

    cf = dg.compile(step)
    for k in range(3):
        xk = x + np.float32(k)
        ae, ac = dg.tensor(xk, requires_grad=True), dg.tensor(xk, requires_grad=True)
        le, lc = step(ae, dg.tensor(t)), cf(ac, dg.tensor(t))
        assert le.item() == lc.item()
        np.testing.assert_array_equal(ae.grad.numpy(), ac.grad.numpy())


def test_onnx_lowering_matches_eager(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    x = dg.tensor(_logits((5, 7), np.float32, 6))
    t = dg.tensor(np.array([0, 6, 3, 3, 1]))
    for kw in ({}, {"reduction": "sum", "ignore_index": 3}, {"reduction": "none"}):
        path = tmp_path / "ce.onnx"
        dg.onnx.export(lambda a, b, kw=kw: F.cross_entropy(a, b, **kw), (x, t), path)
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        (got,) = sess.run(None, dict(zip(names, (x.numpy(), t.numpy()), strict=True)))
        np.testing.assert_allclose(got, F.cross_entropy(x, t, **kw).numpy(), rtol=1e-6, atol=1e-7)


def test_autobatch_batches_the_fused_node():
    rng = np.random.default_rng(2)
    w = dg.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((1, 4)).astype(np.float32)) for _ in range(6)]
    ts = [dg.tensor(np.array([k % 5])) for k in range(6)]

    def losses():
        return dg.stack([F.cross_entropy(x @ w.T, t) for x, t in zip(xs, ts, strict=True)]).sum()

    eager = losses()
    eager.backward()
    ge = w.grad.numpy().copy()
    w.grad = None
    with dg.autobatch(stats=True) as ab:
        batched = losses()
        batched.backward()
    assert ab.stats.per_primitive["cross_entropy"][:2] == [1, 6]   # one group of six calls
    np.testing.assert_allclose(batched.item(), eager.item(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), ge, rtol=1e-5, atol=1e-7)


def test_explicit_log_softmax_and_nll_loss_gradients_match_torch():
    # the composed rules (array fast paths of the two vjps) on a large input
    x = _logits((6, 2500), np.float32, 12)
    t = _targets(6, 2500, 12)
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    F.nll_loss(F.log_softmax(a, 1), dg.tensor(t)).backward()
    torch.nn.functional.nll_loss(torch.log_softmax(b, 1), torch.tensor(t)).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-5, atol=1e-9)
    a.grad = None
    F.nll_loss(F.log_softmax(a[:1], 1), dg.tensor(t[:1])).backward()
    b.grad = None
    torch.nn.functional.nll_loss(torch.log_softmax(b[:1], 1), torch.tensor(t[:1])).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-5, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 6), (4, 700)])
def test_masked_logits_with_minus_inf_match_torch(shape):
    # -inf for masked classes (never a target): the global shift is refused, the rows stay finite
    n, c = shape
    x = _logits(shape, np.float32, 13)
    x[:, 1::3] = -np.inf
    t = np.array([0, 2, 5, 3][:n])
    a, b, la, lb = _pair(x, t)
    np.testing.assert_allclose(la.item(), lb.item(), rtol=2e-6)
    la.backward()
    lb.backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-5, atol=1e-8)
    assert not np.isnan(a.grad.numpy()).any()
