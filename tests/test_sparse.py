"""``dg.sparse``: COO tensors and their products, values and gradients against torch 2.13
and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg

torch = pytest.importorskip("torch")

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]      # a duplicate entry at (0, 2)
VALS = [3.0, 4.0, 5.0, 1.0, -2.0]


def _both(fn):
    return fn(torch), fn(dg)


def test_construction_coalesce_and_dense_match_torch():
    def run(lib):
        a = lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS, dtype=lib.float64), (3, 3))
        c = a.coalesce()
        inferred = lib.sparse_coo_tensor(IDX, VALS)
        d = lib.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse()
        return (a.is_coalesced(), c.is_coalesced(), a._nnz(), c._nnz(), c.indices().tolist(),
                c.values().tolist(), a.to_dense().tolist(), tuple(inferred.shape), a.is_sparse,
                lib.ones(1).is_sparse, d.indices().tolist(), d.values().tolist(), a.t().to_dense().tolist(),
                lib.sparse.sum(a).item(), str(a.layout).split(".")[1], (a * 2).to_dense().tolist(),
                (a + a).to_dense().tolist())

    t, d = _both(run)
    assert t == d
    assert dg.ones(2).layout is dg.strided and dg.sparse_coo_tensor(IDX, VALS).layout is dg.sparse_coo
    assert str(dg.strided).split(".")[1] == str(torch.strided).split(".")[1]
    assert repr(dg.sparse_coo_tensor(IDX, VALS, (3, 3)).coalesce()).replace("dyngraph", "torch") == \
        repr(torch.sparse_coo_tensor(IDX, VALS, (3, 3)).coalesce())
    with pytest.raises(RuntimeError, match="out of bounds"):
        dg.sparse_coo_tensor(IDX, VALS, (2, 3))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        dg.sparse_coo_tensor(IDX, VALS, (3, 3)).indices()


@pytest.mark.parametrize("form", ["sparse.mm", "mm", "spmm", "matmul_op", "dense_at_sparse", "vector", "addmm"])
def test_products_and_gradients_match_torch(form):
    rng = np.random.default_rng(0)
    h0 = rng.standard_normal((3, 4))

    def run(lib):
        v = lib.tensor(VALS, dtype=lib.float64, requires_grad=True)
        a = lib.sparse_coo_tensor(lib.tensor(IDX), v, (3, 3))
        h = lib.tensor(h0, requires_grad=True)
        if form == "sparse.mm":
            out = lib.sparse.mm(a, h)
        elif form == "mm":
            out = lib.mm(a, h)
        elif form == "spmm":
            out = lib.spmm(a, h)
        elif form == "matmul_op":
            out = a @ h
        elif form == "dense_at_sparse":
            out = h.t() @ a
        elif form == "vector":
            out = a @ h[:, 0]
        else:
            out = lib.sparse.addmm(h[:, :3], a, h[:, :3], beta=0.5, alpha=2.0)
        (out.tanh() ** 2).sum().backward()
        return out.detach().numpy(), h.grad.numpy(), v.grad.numpy()

    for x, y in zip(*_both(run)):
        np.testing.assert_allclose(y, x, rtol=1e-12, atol=1e-14)


def test_gradient_matches_finite_differences_float64():
    rng = np.random.default_rng(1)
    h0, v0 = rng.standard_normal((3, 2)), np.array(VALS)

    def loss(v, h):
        a = dg.sparse_coo_tensor(dg.tensor(IDX), v, (3, 3))
        return (dg.sparse.mm(a, h).sin() * dg.sparse.mm(a.t(), h)).sum()

    assert dg.autograd.gradcheck(loss, (dg.tensor(v0, requires_grad=True), dg.tensor(h0, requires_grad=True)))


def test_sparse_leaf_grad_is_sparse():
    a = dg.sparse_coo_tensor(IDX, VALS, (3, 3), requires_grad=True)
    dg.sparse.mm(a, dg.ones(3, 2)).sum().backward()
    ta = torch.sparse_coo_tensor(IDX, VALS, (3, 3), requires_grad=True)
    torch.sparse.mm(ta, torch.ones(3, 2)).sum().backward()
    assert a.grad.is_sparse and ta.grad.is_sparse
    np.testing.assert_allclose(a.grad.to_dense().numpy(), ta.grad.to_dense().numpy())
    assert a.grad.indices().tolist() == ta.grad.coalesce().indices().tolist()
    np.testing.assert_allclose(a.grad.values().numpy(), ta.grad.coalesce().values().numpy())
