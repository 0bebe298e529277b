"""The embedding gradient's flat-index scatter (many looked-up rows) gives the same bits as the
row-index ``np.add.at`` it replaces, and PyTorch's gradient."""

import numpy as np
import pytest
import torch

import dyngraph as dg
import dyngraph.nn.functional as F
from dyngraph.ops import nn as ops_nn
from dyngraph.ops.nn import embedding_backward_p


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(40,), (600,), (25, 8)])
def test_same_bits_as_row_index_add_at(dtype, shape):
    rng = np.random.default_rng(3)
    idx = rng.integers(-30, 30, shape)
    idx.reshape(-1)[1:6] = idx.reshape(-1)[0]  # repeated rows sum in the same order
    g = rng.standard_normal(shape + (128,)).astype(dtype)
    assert g.size >= ops_nn._FLAT_ADD_AT_MIN  # the flat path runs
    out = embedding_backward_p(g, idx, num_weights=30)
    ref = np.zeros((30, 128), dtype)
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 128))
    assert out.dtype == dtype and np.array_equal(out, ref)


def test_short_gradient_row_form():
    out = embedding_backward_p(np.ones((3, 4)), np.array([1, 1, 2]), num_weights=3)
    np.testing.assert_array_equal(out, [[0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1]])


def test_embedding_gradient_matches_torch_with_padding():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((50, 64))
    idx = rng.integers(0, 50, (12, 10))
    idx[0, :4] = 7
    idx[1, :3] = 3  # padding rows get no gradient
    de = dg.nn.Embedding(50, 64, padding_idx=3).double()
    te = torch.nn.Embedding(50, 64, padding_idx=3).double()
    with dg.no_grad():
        de.weight.copy_(dg.from_numpy(w))
    with torch.no_grad():
        te.weight.copy_(torch.from_numpy(w))
    up = rng.standard_normal((12, 10, 64))
    (de(dg.from_numpy(idx)) * dg.from_numpy(up)).sum().backward()
    (te(torch.from_numpy(idx)) * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(de.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_empty_indices_give_a_zero_gradient_as_torch(shape, padding_idx):
    # the row width comes from the gradient's trailing shape: g.reshape(0, -1) cannot infer it
    w = dg.randn(5, 3, requires_grad=True)
    y = F.embedding(dg.zeros(*shape, dtype=dg.int64), w, padding_idx=padding_idx)
    y.sum().backward()
    wt = torch.randn(5, 3, requires_grad=True)
    yt = torch.nn.functional.embedding(torch.zeros(*shape, dtype=torch.int64), wt,
                                       padding_idx=padding_idx)
    yt.sum().backward()
    assert tuple(y.shape) == tuple(yt.shape)
    assert w.grad is not None and tuple(w.grad.shape) == (5, 3)
    np.testing.assert_array_equal(w.grad.numpy(), wt.grad.numpy())
