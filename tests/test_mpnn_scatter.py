"""The flat-index paths of ``scatter_add`` and ``index_add`` along dim 0 (ops/indexing.py,
``_rows_add_at``): same bits as adding the entries one by one in C order, the same errors
for indices out of range, and the general path where the flat index does not apply."""

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops.indexing import index_add_p, scatter_add_p


def _loop_scatter(x, index, src):
    """Reference: ``out[index[i, j...], j...] += src[i, j...]`` entry by entry in C order."""
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        out[(index[pos],) + pos[1:]] += src[pos]
    return out


def _loop_index_add(x, index, src, alpha=1):
    out = x.copy()
    for k, r in enumerate(index):
        out[r] += src[k] * alpha if alpha != 1 else src[k]
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scatter_add_expanded_index_bits(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 5)).astype(dtype)
    dst = rng.integers(-7, 7, 30)  # repeats and negative rows (the primitive wraps them)
    index = np.broadcast_to(dst[:, None], (30, 5))
    src = rng.standard_normal((30, 5)).astype(dtype)
    assert np.array_equal(scatter_add_p(x, index, src, dim=0), _loop_scatter(x, index, src))


@pytest.mark.parametrize("shape,ishape", [((6, 4), (9, 3)), ((5, 3, 4), (8, 2, 4)), ((6,), (11,))])
def test_scatter_add_partial_blocks_bits(shape, ishape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    index = rng.integers(0, shape[0], ishape)
    src = rng.standard_normal(tuple(n + 1 for n in ishape))  # larger than the index: its block is used
    block = src[tuple(slice(0, n) for n in ishape)]
    assert np.array_equal(scatter_add_p(x, index, src, dim=0), _loop_scatter(x, index, block))


def test_scatter_add_other_dim_unchanged():
    rng = np.random.default_rng(2)
    x, index, src = rng.standard_normal((3, 6)), rng.integers(0, 6, (3, 8)), rng.standard_normal((3, 8))
    want = x.copy()
    for i in range(3):
        for j in range(8):
            want[i, index[i, j]] += src[i, j]
    assert np.array_equal(scatter_add_p(x, index, src, dim=1), want)


@pytest.mark.parametrize("alpha", [1, 2.5])
@pytest.mark.parametrize("shape", [(4, 16), (4, 3, 2), (5,)])
def test_index_add_rows_bits(shape, alpha):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    index = rng.integers(-shape[0], shape[0], 13)
    src = rng.standard_normal((13,) + shape[1:])
    assert np.array_equal(index_add_p(x, index, src, dim=0, alpha=alpha), _loop_index_add(x, index, src, alpha))


def test_out_of_range_errors_name_the_dimension():
    x = np.zeros((4, 3))
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 4"):
        scatter_add_p(x, np.full((2, 3), 4), np.ones((2, 3)), dim=0)
    with pytest.raises(IndexError, match="index -5 is out of bounds"):  # NumPy's words, as before
        index_add_p(x, np.array([0, -5]), np.ones((2, 3)), dim=0)
    with pytest.raises(RuntimeError, match="out of bounds"):
        dg.zeros(4, 3).scatter_add_(0, dg.tensor([[4, 0, 0]]), dg.ones(1, 3))


def test_mpnn_aggregation_matches_torch():
    """The benchmark row's aggregation, values and gradients, float64, against PyTorch."""
    rng = np.random.default_rng(4)
    h0, msg0, dst0 = rng.standard_normal((34, 16)), rng.standard_normal((68, 16)), rng.integers(0, 34, 68)
    batch0 = np.sort(rng.integers(0, 4, 34))
    out = []
    for T in (dg, torch):
        h = T.tensor(h0, requires_grad=True)
        msg = T.tensor(msg0, requires_grad=True)
        dst, batch = T.tensor(dst0), T.tensor(batch0)
        agg = T.zeros_like(h)
        agg.scatter_add_(0, dst.unsqueeze(1).expand(-1, 16), msg)
        pooled = T.zeros(4, 16, dtype=h.dtype).index_add(0, batch, agg * h)
        (pooled ** 2).sum().backward()
        out.append([np.asarray(a.detach().numpy()) for a in (pooled, h.grad, msg.grad)])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_surface_bounds_checks_one_reduction(dtype):
    """``_all_below``'s unsigned view: negative and too-large indices still raise, by value."""
    x, src = dg.zeros(4, 3), dg.ones(2, 3)
    for bad in (-1, 4):
        index = dg.tensor(np.array([[0, 1, 2], [bad, 0, 0]], dtype))
        with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 0 with size 4"):
            dg.scatter_add(x, 0, index, src)
    for bad in (-5, 4):
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size 4"):
            dg.index_add(x, 0, dg.tensor(np.array([0, bad], dtype)), src)
    out = dg.index_add(x, 0, dg.tensor(np.array([-1, 3], dtype)), src)  # -1 is row 3, as before
    assert out.tolist() == [[0.0] * 3, [0.0] * 3, [0.0] * 3, [2.0] * 3]


@pytest.mark.parametrize("shape", [(6, 4), (6, 2, 3), (6,)])
def test_index_backward_rows_bits(shape):
    """The vjp of ``h[src]`` (``index_backward_p``) with one 1-D integer index: whole rows."""
    from dyngraph.ops.indexing import index_backward_p

    rng = np.random.default_rng(5)
    rows = rng.integers(-6, 6, 15)
    g = rng.standard_normal((15,) + shape[1:])
    got = index_backward_p(g, rows, shape=shape, index=("tensor",))
    assert np.array_equal(got, _loop_index_add(np.zeros(shape), rows, g))
    with pytest.raises(IndexError, match="out of bounds"):
        index_backward_p(g[:1], np.array([6]), shape=shape, index=("tensor",))
