"""2-D CSR sparse tensors (``torch.sparse_csr_tensor``, ``x.to_sparse_csr()``) against torch 2.13:
parts, dense form, products and the gradients of the dense operand and of the values."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def test_csr_parts_and_dense_form_match_torch():
    dense = np.array([[0.0, 2.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 4.0, 0.0]])
    for make in (lambda lib: lib.tensor(dense).to_sparse_csr(),
                 lambda lib: lib.tensor(dense).to_sparse().to_sparse_csr(),
                 lambda lib: lib.sparse_csr_tensor(lib.tensor([0, 2, 2, 4]), lib.tensor([1, 3, 0, 2]),
                                                   lib.tensor([2.0, 1.0, 3.0, 4.0], dtype=lib.float64), (3, 4))):
        t, d = make(torch), make(dyngraph)
        assert d.layout is dyngraph.sparse_csr and d.is_sparse_csr and not d.is_sparse
        assert t.crow_indices().tolist() == d.crow_indices().tolist()
        assert t.col_indices().tolist() == d.col_indices().tolist()
        np.testing.assert_array_equal(_np(d.values()), _np(t.values()))
        np.testing.assert_array_equal(_np(d.to_dense()), _np(t.to_dense()))
        assert tuple(d.shape) == tuple(t.shape) and d._nnz() == t._nnz()
        coo = d.to_sparse()
        assert coo.layout is dyngraph.sparse_coo and coo.indices().tolist() == t.to_sparse().indices().tolist()
    default = dyngraph.sparse_csr_tensor([0, 1, 2], [1, 0], [5.0, 6.0])
    assert tuple(default.shape) == tuple(torch.sparse_csr_tensor([0, 1, 2], [1, 0], [5.0, 6.0]).shape)
    with pytest.raises(RuntimeError, match="crow_indices"):
        dyngraph.sparse_csr_tensor([1, 2], [0], [1.0], (1, 2))
    with pytest.raises(RuntimeError, match="out of bounds"):
        dyngraph.sparse_csr_tensor([0, 1], [5], [1.0], (1, 2))


def test_csr_products_and_gradients_match_torch():
    rng = np.random.default_rng(0)
    crow, col = [0, 2, 3, 5], [0, 2, 1, 0, 3]
    vals, h, v = rng.standard_normal(5), rng.standard_normal((4, 3)), rng.standard_normal(4)
    res = []
    for lib in (torch, dyngraph):
        V = lib.tensor(vals, requires_grad=True)
        H = lib.tensor(h, requires_grad=True)
        A = lib.sparse_csr_tensor(lib.tensor(crow), lib.tensor(col), V, (3, 4))
        out = A @ H
        mv = A @ lib.tensor(v)
        res.append((A, V, H, out, mv))
    w = rng.standard_normal((3, 3))
    for lib, (_, _, _, out, mv) in zip((torch, dyngraph), res):
        ((out * lib.tensor(w)).sum() + mv.sum()).backward()
    (ta, tv, th, tout, tmv), (da, dv, dh, dout, dmv) = res
    np.testing.assert_allclose(_np(dout), _np(tout), rtol=1e-12)
    np.testing.assert_allclose(_np(dmv), _np(tmv), rtol=1e-12)
    np.testing.assert_allclose(_np(dh.grad), _np(th.grad), rtol=1e-12)
    np.testing.assert_allclose(_np(dv.grad), _np(tv.grad), rtol=1e-12)
    assert "layout=dyngraph.sparse_csr" in repr(da) and "crow_indices=tensor([0, 2, 3, 5])" in repr(da)
