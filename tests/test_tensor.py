"""Tensor basics: creation, properties, interop (NumPy, DLPack), repr, in-place rules, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg

# -- creation ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2, 3), lambda m: m.ones((2, 3), dtype=m.float64), lambda m: m.full((2,), 7),
    lambda m: m.full((2,), 1.5), lambda m: m.arange(5), lambda m: m.arange(1.0, 2.0, 0.25),
    lambda m: m.arange(0, 10, 3), lambda m: m.linspace(-1, 1, 5), lambda m: m.logspace(0, 2, 3),
    lambda m: m.eye(3), lambda m: m.eye(2, 4, dtype=m.int64), lambda m: m.tensor([[1, 2], [3, 4]]),
    lambda m: m.tensor(2.5), lambda m: m.tensor([True, False]), lambda m: m.zeros_like(m.ones(2, 2)),
    lambda m: m.ones_like(m.ones(3, dtype=m.int32)), lambda m: m.full_like(m.ones(2), 4.0),
    lambda m: m.empty(0, 3), lambda m: m.tril_indices(3, 3), lambda m: m.triu_indices(3, 4, 1),
])
def test_creation_matches_torch(make):
    a, b = make(dg), make(torch)
    assert a.dtype.name == str(b.dtype).replace("torch.", "")
    assert tuple(a.shape) == tuple(b.shape)
    if a.numel():
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_random_is_reproducible_and_generators_are_independent():
    dg.manual_seed(3)
    a = dg.randn(4)
    dg.manual_seed(3)
    assert dg.equal(a, dg.randn(4))
    g = dg.Generator().manual_seed(5)
    x = dg.rand(1000, generator=g)
    assert 0 <= x.min().item() and x.max().item() < 1
    assert abs(x.mean().item() - 0.5) < 0.05
    r = dg.randint(2, 6, (1000,), generator=g)
    assert r.dtype == dg.int64 and r.min().item() == 2 and r.max().item() == 5
    n = dg.normal(2.0, 3.0, size=(20000,), generator=g)
    assert abs(n.mean().item() - 2.0) < 0.1 and abs(n.std().item() - 3.0) < 0.1
    assert sorted(dg.randperm(6, generator=g).tolist()) == list(range(6))


# -- properties and interop ---------------------------------------------------------------

def test_properties():
    x = dg.arange(24.0).reshape(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.ndim == x.dim() == 3 and x.numel() == 24 and len(x) == 2
    assert repr(x.shape) == "dyngraph.Size([2, 3, 4])"
    assert x.mT.shape == (2, 4, 3) and x[0].T.shape == (4, 3)
    assert str(x.device) == "cpu" and x.device == dg.device("cpu")
    assert dg.tensor([[1, 2]]).tolist() == [[1, 2]] and dg.tensor(3.5).item() == 3.5
    assert [t.shape for t in dg.ones(3, 2)] == [(2,)] * 3  # iteration unbinds dim 0
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        dg.ones(2).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(dg.ones(2))


def test_numpy_interop_is_zero_copy():
    a = np.zeros(3, np.float32)
    t = dg.from_numpy(a)
    a[0] = 5
    assert t[0].item() == 5
    t.add_(1)
    assert a.tolist() == [6, 1, 1]
    assert np.shares_memory(t.numpy(), a)
    assert np.asarray(t).tolist() == [6, 1, 1]
    with pytest.raises(RuntimeError, match="requires grad"):
        dg.ones(2, requires_grad=True).numpy()
    assert (np.ones(3) * dg.ones(3)).__class__ is dg.Tensor  # ndarray defers to Tensor


def test_dlpack_roundtrips_with_torch_without_copies():
    t = torch.arange(6, dtype=torch.float32)
    d = dg.from_dlpack(t)
    t[0] = 42
    assert d[0].item() == 42
    back = torch.from_dlpack(d)
    d.mul_(2)
    assert back[1].item() == 2.0
    assert dg.from_dlpack(np.arange(3)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("make", [
    lambda m: m.tensor([1.0, 2.5, -3.0]),
    lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True),
    lambda m: m.tensor([1, 2, 3]),
    lambda m: m.tensor([True, False]),
    lambda m: m.tensor([1.5, 2.0], dtype=m.float64),
    lambda m: m.tensor(3.25),
    lambda m: m.tensor([1e-5, 1.0]),
    lambda m: m.tensor([1.0, 2.0], dtype=m.int32),
    lambda m: m.zeros(0),
])
def test_repr_matches_torch(make):
    assert repr(make(dg)).replace("dyngraph.", "torch.") == repr(make(torch))


def test_repr_shows_grad_fn():
    x = dg.ones(2, requires_grad=True)
    assert repr(x * 2) == "tensor([2., 2.], grad_fn=<MulBackward0>)"


# -- operators ------------------------------------------------------------------------------

def test_operators_broadcast_like_torch():
    a = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, -2.0, 4.0])
    for op in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y,
               lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x ** 2, lambda x, y: -x,
               lambda x, y: abs(y), lambda x, y: x @ y, lambda x, y: (x > y) & (x < 4),
               lambda x, y: (x == y) | ~(x <= 2), lambda x, y: 2 - x, lambda x, y: 1 / y):
        np.testing.assert_allclose(op(dg.tensor(a), dg.tensor(b)).numpy(),
                                   op(torch.tensor(a), torch.tensor(b)).numpy())


# -- in-place semantics ------------------------------------------------------------------------

def test_inplace_on_nonleaf_gives_torch_gradients():
    def run(m):
        x = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = x * 2
        y.add_(1).mul_(y.detach().clone())
        y[0] = x[1] ** 2
        y.sum().backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(dg), run(torch))


def test_detach_shares_the_version_counter_like_torch():
    for m in (dg, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.mul_(y.detach())  # the saved detached alias is modified by the same in-place op
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_inplace_version_counter_and_errors():
    x = dg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    y = x * 1
    v = y._version
    y.mul_(2)
    assert y._version == v + 1
    z = y.exp()  # saves its output
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*exp"):
        z.sum().backward()
    with dg.no_grad():
        x.add_(1)  # allowed: how optimizers update parameters
    assert x.tolist() == [2.0, 2.0, 2.0]
    a = dg.ones(2, dtype=dg.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        a.add_(0.5)


def test_views_share_memory_and_version():
    base = dg.zeros(2, 3)
    row = base[0]
    row.fill_(7)
    assert base.tolist()[0] == [7.0, 7.0, 7.0]
    assert row._version == base._version == 1


# -- errors name the op, shapes and dtypes ---------------------------------------------------

def test_errors_are_precise():
    with pytest.raises(RuntimeError, match=r"add.*\[2, 3\].*\[4\]"):
        dg.ones(2, 3) + dg.ones(4)
    with pytest.raises(RuntimeError, match=r"matmul.*2x3.*4x5"):
        dg.ones(2, 3) @ dg.ones(4, 5)
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        (dg.ones(2, requires_grad=True) * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        dg.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match="only tensors of floating point dtype"):
        dg.ones(2, dtype=dg.int64).requires_grad_()
    x = dg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        dg.autograd.grad((x * 2).sum(), dg.ones(2))
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
