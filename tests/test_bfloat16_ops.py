"""bfloat16 is a floating dtype, as in PyTorch: float ops keep it, reductions accumulate
in float32 and return bfloat16, it promotes with float32 to float32 and with integers and
Python scalars to bfloat16, and it can require gradients (gradients are bfloat16).

Each op runs on the same bfloat16 values in dyngraph and in torch (CPU); the output
dtypes must agree exactly and the values within bfloat16 rounding (rtol 1e-2).
"""

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RTOL, ATOL = 1e-2, 1e-2


def _pair(shape, seed, positive=False):
    """The same bfloat16 values as a dyngraph and a torch tensor."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.1
    t = torch.tensor(a).to(torch.bfloat16)
    return dg.tensor(t.float().numpy()).to(dg.bfloat16), t


def _check(d, t):
    assert str(d.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (d.dtype, t.dtype)
    np.testing.assert_allclose(d.detach().float().numpy(), t.detach().float().numpy(),
                               rtol=RTOL, atol=ATOL)


X, XT = _pair((4, 6), 0)
W, WT = _pair((5, 6), 1)
B, BT = _pair((5,), 2)
P, PT = _pair((4, 6), 3, positive=True)

UNARY = {
    "exp": (lambda m, x: m.exp(x), X, XT),
    "tanh": (lambda m, x: m.tanh(x), X, XT),
    "sigmoid": (lambda m, x: m.sigmoid(x), X, XT),
    "relu": (lambda m, x: m.relu(x), X, XT),
    "log": (lambda m, x: m.log(x), P, PT),
    "sqrt": (lambda m, x: m.sqrt(x), P, PT),
    "softmax": (lambda m, x: m.softmax(x, 1), X, XT),
    "sum": (lambda m, x: x.sum(), X, XT),
    "sum_dim": (lambda m, x: x.sum(1), X, XT),
    "mean": (lambda m, x: x.mean(), X, XT),
    "mean_dim": (lambda m, x: x.mean(0), X, XT),
    "var": (lambda m, x: x.var(1), X, XT),
    "norm": (lambda m, x: x.norm(), X, XT),
    "div_int_scalar": (lambda m, x: x / 3, X, XT),
    "mul_float_scalar": (lambda m, x: x * 2.5, X, XT),
    "pow": (lambda m, x: x ** 2, X, XT),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_bfloat16_unary_matches_torch(name):
    f, x, xt = UNARY[name]
    _check(f(dg, x), f(torch, xt))


def test_bfloat16_nn_functional_matches_torch():
    _check(F.log_softmax(X, 1), TF.log_softmax(XT, 1))
    _check(F.linear(X, W, B), TF.linear(XT, WT, BT))
    _check(F.gelu(X), TF.gelu(XT))
    _check(F.layer_norm(X, (6,)), TF.layer_norm(XT, (6,)))
    target = [0, 1, 2, 3]
    _check(F.cross_entropy(X, dg.tensor(target)), TF.cross_entropy(XT, torch.tensor(target)))


def test_bfloat16_matmul_accumulates_in_float32():
    _check(X @ W.T, XT @ WT.T)
    # a long inner dimension: a bfloat16 running sum would drift far beyond rtol 1e-2
    a, at = _pair((2, 4096), 4, positive=True)
    b, bt = _pair((4096, 3), 5, positive=True)
    _check(a @ b, at @ bt)
    big, bigt = _pair((100_000,), 6, positive=True)
    _check(big.sum(), bigt.sum())


def test_bfloat16_promotion_matches_torch():
    f32, f32t = dg.tensor(XT.float().numpy()), XT.float()
    ints, intst = dg.arange(6), torch.arange(6)
    _check(X + f32, XT + f32t)
    _check(X + ints, XT + intst)
    _check(X + 1, XT + 1)
    _check(X + 0.5, XT + 0.5)
    _check(X + dg.tensor(2.0), XT + torch.tensor(2.0))  # a 0-d float32 does not win
    assert dg.promote_types(dg.bfloat16, dg.float16) == dg.float32
    assert dg.promote_types(dg.bfloat16, dg.int64) == dg.bfloat16
    assert X.is_floating_point() and dg.is_floating_point(X) and dg.bfloat16.is_floating_point
    assert (X > 0).dtype == dg.bool and X.argmax().dtype == dg.int64
    assert X.sum(dtype=dg.float32).dtype == dg.float32  # an explicit dtype wins


def test_bfloat16_requires_grad_and_mlp_backward_match_torch():
    x, xt = _pair((8, 6), 10)
    w1, w1t = _pair((16, 6), 11)
    b1, b1t = _pair((16,), 12)
    w2, w2t = _pair((3, 16), 13)
    target = [0, 1, 2, 0, 1, 2, 0, 1]
    params = [p.requires_grad_() for p in (w1, b1, w2)]
    params_t = [p.requires_grad_() for p in (w1t, b1t, w2t)]

    loss = F.cross_entropy(F.linear(dg.tanh(F.linear(x, w1, b1)), w2), dg.tensor(target))
    loss_t = TF.cross_entropy(TF.linear(torch.tanh(TF.linear(xt, w1t, b1t)), w2t),
                              torch.tensor(target))
    _check(loss, loss_t)
    loss.backward()
    loss_t.backward()
    for p, pt in zip(params, params_t):
        assert p.grad.dtype == dg.bfloat16
        _check(p.grad, pt.grad)
    assert dg.nn.Parameter(x).dtype == dg.bfloat16


def test_bfloat16_unary_backward_dtype():
    x, xt = _pair((3, 4), 20)
    x.requires_grad_()
    xt.requires_grad_()
    (dg.sigmoid(x) * dg.exp(x)).mean().backward()
    (torch.sigmoid(xt) * torch.exp(xt)).mean().backward()
    _check(x.grad, xt.grad)


def test_bfloat16_module_to():
    lin = dg.nn.Linear(6, 2).to(dg.bfloat16)
    assert dg.nn.Linear(2, 2).bfloat16().float().weight.dtype == dg.float32
    assert lin.weight.dtype == dg.bfloat16 and lin.weight.requires_grad
    out = lin(X)
    assert out.dtype == dg.bfloat16
    out.sum().backward()
    assert lin.weight.grad.dtype == dg.bfloat16
