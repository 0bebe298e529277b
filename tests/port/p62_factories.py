"""Tensor factories and constructors as real code calls them: `linspace`/`logspace`/
`arange` with float steps, `eye(n, m)`, `*_like` with dtype overrides, `full` dtype
inference, `tensor` from nested lists / 0-d tensors / numpy scalars, `tril_indices`,
`meshgrid(indexing=)`, `stack` of 0-d tensors, `as_tensor` sharing, `from_numpy` writes."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-7


def dt(t):
    return str(t.dtype).split(".")[-1]


def run(torch, shared):
    out = {}
    out["arange"] = [np_of(torch.arange(0, 1, 0.25)), np_of(torch.arange(5, 0, -2)), dt(torch.arange(0, 1, 0.5)),
                     np_of(torch.arange(1.0, 2.0, 0.3)), dt(torch.arange(3, dtype=torch.float64)),
                     err(lambda: torch.arange(0, -3)), list(torch.arange(2, 2).shape), np_of(torch.arange(-1.5, 1.5))]
    out["linspace"] = [np_of(torch.linspace(0, 1, 5)), np_of(torch.linspace(-1, 1, 1)), dt(torch.linspace(0, 1, 3)),
                       np_of(torch.linspace(0, 10, 4, dtype=torch.float64)), np_of(torch.logspace(0, 2, 3)),
                       np_of(torch.logspace(0, 3, 4, base=2)), list(torch.linspace(0, 1, 0).shape)]
    out["eye"] = [np_of(torch.eye(3)), np_of(torch.eye(2, 4)), dt(torch.eye(2, dtype=torch.int64))]
    base = torch.ones(2, 3, dtype=torch.float64)
    out["like"] = [dt(torch.zeros_like(base)), dt(torch.ones_like(base, dtype=torch.int32)),
                   np_of(torch.full_like(base, 7)), dt(torch.full_like(base, 7)),
                   list(torch.empty_like(base).shape), dt(torch.rand_like(base)),
                   dt(torch.randn_like(base, dtype=torch.float32)), dt(torch.randint_like(base, 5)),
                   base.new_empty((0,)).shape[0], dt(torch.zeros_like(torch.tensor([1, 2])))]
    out["full"] = [dt(torch.full((2,), 3)), dt(torch.full((2,), 3.0)), dt(torch.full((2,), True)),
                   np_of(torch.full((2, 2), -1.5)), dt(torch.full((1,), 2, dtype=torch.float64))]
    out["tensor"] = [dt(torch.tensor([1, 2.5])), dt(torch.tensor([True, 1])), dt(torch.tensor([[1], [2]])),
                     np_of(torch.tensor([torch.tensor(1.0), torch.tensor(2.0)])),
                     dt(torch.tensor(np.float64(2.5))), dt(torch.tensor(np.int32(3))),
                     dt(torch.tensor([np.float32(1.0)])), list(torch.tensor([]).shape), dt(torch.tensor([])),
                     list(torch.tensor([[]]).shape), np_of(torch.tensor(((1, 2), (3, 4)))),
                     dt(torch.tensor(range(3))), np_of(torch.tensor([1, 2], dtype=torch.float16).float())]
    a = np.arange(4.0)
    shared_t = torch.as_tensor(a)
    from_np = torch.from_numpy(a)
    copied = torch.tensor(a)
    a[0] = 100.0
    out["sharing"] = [shared_t[0].item(), from_np[0].item(), copied[0].item()]
    from_np[1] = -5.0
    out["from_numpy_write"] = a.tolist()
    out["as_tensor_dtype"] = [dt(torch.as_tensor([1, 2], dtype=torch.float32)), dt(torch.as_tensor(a, dtype=torch.float32))]
    r, c = torch.tril_indices(3, 3)
    out["tri_idx"] = [r.tolist(), c.tolist(), torch.triu_indices(3, 4, 1).tolist(), torch.tril_indices(4, 3, -1).tolist()]
    gx, gy = torch.meshgrid(torch.arange(3), torch.arange(2), indexing="ij")
    hx, hy = torch.meshgrid(torch.arange(3), torch.arange(2), indexing="xy")
    out["meshgrid"] = [np_of(gx), np_of(gy), np_of(hx), np_of(hy)]
    out["stack0d"] = [np_of(torch.stack([torch.tensor(1.0), torch.tensor(2.0)])),
                      list(torch.stack([torch.ones(2)] * 3, dim=-1).shape), np_of(torch.hstack([torch.ones(2), torch.zeros(1)])),
                      list(torch.vstack([torch.ones(2), torch.zeros(2)]).shape), list(torch.dstack([torch.ones(2, 2)] * 2).shape),
                      list(torch.column_stack([torch.ones(3), torch.zeros(3)]).shape), list(torch.atleast_2d(torch.tensor(1.0)).shape)]
    out["diag"] = [np_of(torch.diag(torch.tensor([1.0, 2.0]))), np_of(torch.diag(torch.arange(9.0).reshape(3, 3), 1)),
                   np_of(torch.diag_embed(torch.ones(2, 2))), np_of(torch.diagflat(torch.tensor([1.0, 2.0]))),
                   np_of(torch.block_diag(torch.ones(1, 2), torch.full((2, 1), 2.0)))]
    out["complex_shapes"] = [list(torch.zeros((2, 3)).shape), list(torch.zeros([2, 3]).shape),
                             list(torch.zeros(torch.Size([2, 3])).shape), list(torch.ones(()).shape),
                             list(torch.empty(0, 3).shape), list(torch.zeros(2, 0, 3).sum(1).shape)]
    out["errors"] = [err(lambda: torch.tensor([[1, 2], [3]])), err(lambda: torch.eye(-1)),
                     err(lambda: torch.linspace(0, 1, -1)), err(lambda: torch.zeros(2, 3.0))]
    out["randint"] = [dt(torch.randint(0, 5, (3,))), list(torch.randint(3, (2, 2)).shape),
                      dt(torch.randperm(4)), sorted(torch.randperm(5).tolist()), dt(torch.rand(2))]
    out["complex_fill"] = [np_of(torch.zeros(3).fill_(2)), np_of(torch.empty(2, dtype=torch.int64).fill_(3)),
                           np_of(torch.arange(6).view(2, 3).t().contiguous())]
    return out
