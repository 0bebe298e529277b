"""cat/stack's one-pass checks (issue 13): same results as PyTorch, same errors as before."""

import numpy as np
import pytest
import torch

import dyngraph as dg


def _pair(shapes, dtypes=None, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype((dtypes or [np.float32] * len(shapes))[k])
            for k, s in enumerate(shapes)]
    return ([dg.tensor(a, requires_grad=True) for a in arrs],
            [torch.tensor(a, requires_grad=True) for a in arrs])


@pytest.mark.parametrize("shapes,dim", [([(1, 4), (1, 4)], 1), ([(2, 3), (5, 3)], 0),
                                        ([(2, 3), (2, 1), (2, 2)], -1), ([(3,), (0,)], 0),
                                        ([(2, 0), (2, 3)], 1), ([(4,)] * 40, 0)])
def test_cat_matches_torch(shapes, dim):
    ds, ts = _pair(shapes)
    out, ref = dg.cat(ds, dim), torch.cat(ts, dim)
    assert tuple(out.shape) == tuple(ref.shape)
    w = np.arange(out.numel(), dtype=np.float32).reshape(tuple(out.shape))
    (out * dg.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    for a, b in zip(ds, ts, strict=True):
        if a.grad is None and b.grad.numel() == 0:
            continue  # a legacy empty 1-D input is left out of the node (no gradient)
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_cat_promotes_mixed_dtypes():
    ds, ts = _pair([(1, 2), (1, 3)], [np.float32, np.float64])
    assert str(dg.cat(ds, 1).dtype) == str(torch.cat(ts, 1).dtype).replace("torch", "dyngraph")


@pytest.mark.parametrize("shape,n,dim", [((), 3, 0), ((3,), 2, -1), ((2, 3), 4, 1),
                                         ((2, 3), 2, -3), ((1, 128), 32, 0)])
def test_stack_matches_torch(shape, n, dim):
    ds, ts = _pair([shape] * n, seed=n)
    out, ref = dg.stack(ds, dim), torch.stack(ts, dim)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    w = np.arange(out.numel(), dtype=np.float32).reshape(tuple(out.shape))
    (out * dg.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for a, b in zip(ds, ts, strict=True):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_errors_unchanged():
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions"):
        dg.cat([dg.zeros(2, 3), dg.zeros(3)])
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 1"):
        dg.cat([dg.zeros(2, 3), dg.zeros(3, 3)], 1)
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        dg.cat([dg.tensor(1.0), dg.tensor(2.0)])
    with pytest.raises(TypeError, match="expected Tensor as element 1"):
        dg.cat([dg.zeros(2), np.zeros(2)])
    with pytest.raises(IndexError):
        dg.cat([dg.zeros(2), dg.zeros(2)], 1)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        dg.stack([dg.zeros(2), dg.zeros(3)])
    with pytest.raises(TypeError, match="expected Tensor as element 1"):
        dg.stack([dg.zeros(2), [0.0, 1.0]])
    with pytest.raises(IndexError):
        dg.stack([dg.zeros(2), dg.zeros(2)], 2)
