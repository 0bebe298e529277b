"""Scatter/gather family corners and search ops: `scatter_reduce` with every reduce and
`include_self`, `scatter` with a scalar and `reduce=`, `index_copy`, `index_reduce`,
`put_`, `gather` with negative dims, `searchsorted`/`bucketize` (right, sorter), `histc`,
`masked_fill` with broadcast masks, and their gradients."""

import numpy as np

from tests.port import np_of

RTOL = 1e-10


def run(torch, shared):
    rng = np.random.default_rng(23)
    out = {}
    idx = torch.tensor([[0, 1, 0, 2], [2, 2, 1, 0]])
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            src = torch.tensor(rng.standard_normal((2, 4)), requires_grad=True)
            base = torch.tensor(rng.standard_normal((2, 3)), requires_grad=True)
            res = base.scatter_reduce(1, idx[:, :4].clamp(max=2), src, reduce=reduce, include_self=inc)
            (res * torch.tensor(np.arange(6.0).reshape(2, 3))).sum().backward()
            out[f"scatter_reduce_{reduce}_{inc}"] = [np_of(res), np_of(src.grad), np_of(base.grad)]
    z = torch.zeros(3, 4)
    out["scatter_scalar"] = [np_of(z.scatter(1, torch.tensor([[1], [3], [0]]), 2.5)),
                             np_of(torch.ones(2, 3).scatter_(1, torch.tensor([[0, 0], [2, 1]]), torch.full((2, 2), 3.0),
                                                             reduce="add")),
                             np_of(torch.ones(2, 3).scatter(1, torch.tensor([[0, 0]]), 4.0, reduce="multiply"))]
    x = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    out["gather_neg"] = np_of(torch.gather(x, -1, torch.tensor([[2], [0], [1], [1]])))
    ic = torch.zeros(5, 3, dtype=torch.float64).index_copy(0, torch.tensor([4, 0, 2, 1]), x)
    ir = torch.ones(3, 3, dtype=torch.float64).index_reduce(0, torch.tensor([0, 2, 0, 2]), x, "prod")
    ira = torch.ones(3, 3, dtype=torch.float64).index_reduce(0, torch.tensor([0, 2, 0, 2]), x, "amax",
                                                                 include_self=False)
    (ic.sum() + ir.sum() + (ira * 2).sum()).backward()
    out["index_copy_reduce"] = [np_of(ic), np_of(ir), np_of(ira), np_of(x.grad)]
    pt = torch.zeros(2, 3)
    pt.put_(torch.tensor([0, 5, 0]), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    out["put_"] = np_of(pt)
    edges = torch.tensor([0.0, 1.0, 2.5, 4.0])
    vals = torch.tensor([[-1.0, 1.0, 2.0], [2.5, 4.0, 9.0]])
    out["searchsorted"] = [torch.searchsorted(edges, vals).tolist(), torch.searchsorted(edges, vals, right=True).tolist(),
                           torch.searchsorted(edges, 2.5).item(), torch.bucketize(vals, edges).tolist(),
                           torch.bucketize(vals, edges, right=True).tolist(),
                           torch.searchsorted(torch.tensor([3.0, 1.0, 2.0]), torch.tensor([2.0]),
                                              sorter=torch.tensor([1, 2, 0])).tolist(),
                           torch.searchsorted(torch.tensor([[1, 3, 5], [2, 4, 6]]), torch.tensor([[4], [4]])).tolist(),
                           str(torch.searchsorted(edges, vals, out_int32=True).dtype).split(".")[-1]]
    out["histc"] = [np_of(torch.histc(torch.tensor([1.0, 2.0, 1.0, 4.0, 0.0]), bins=4, min=0, max=4)),
                    np_of(torch.histc(torch.tensor([1.0, 2.0, 1.0]), bins=3))]
    m = torch.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    mf = m.masked_fill(torch.tensor([True, False, True, False]), 0.0)
    mf2 = mf.masked_fill(torch.tensor([[True], [False], [True]]), -1.0)
    (mf2 * 3).sum().backward()
    out["masked_fill_bcast"] = [np_of(mf2), np_of(m.grad)]
    mt = torch.zeros(2, 3).masked_fill(torch.tensor([[True, False, True], [False, False, True]]), torch.tensor(5.0))
    out["masked_fill_tensor"] = np_of(mt)
    return out
