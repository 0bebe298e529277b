"""Reductions with `dtype=`, `keepdim`, several dims, empty dims, tie behaviour of
`max`/`min`/`argmax`, `sort(stable=True)`, `unique(return_counts)`, `topk` ties."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def dt(t):
    return str(t.dtype).split(".")[-1]


def run(torch, shared):
    out = {}
    x = torch.tensor(np.arange(24.0).reshape(2, 3, 4) % 7)
    i = torch.tensor([[3, 1, 3], [2, 2, 0]])
    out["keepdim"] = [list(x.sum(1, keepdim=True).shape), list(x.mean((0, 2), keepdim=True).shape),
                      np_of(x.sum((0, 2))), np_of(x.amax((1, 2))), np_of(x.amin(-1, keepdim=True)),
                      list(x.max(dim=1, keepdim=True).values.shape), np_of(x.std(1, keepdim=True)),
                      np_of(x.var((0, 1), unbiased=False)), np_of(x.var(2, correction=0)),
                      np_of(torch.std_mean(x, dim=1)[0]), np_of(x.norm(dim=2)), np_of(x.prod(0))]
    out["dtype_kw"] = [dt(i.sum(dtype=torch.float64)), i.sum(dtype=torch.float32).item(),
                       dt(x.float().sum(dtype=torch.float64)), dt(torch.prod(i, 1, dtype=torch.float64)),
                       np_of(torch.mean(i, 1, dtype=torch.float64)), dt(i.sum(0)),
                       np_of(torch.softmax(i, 1, dtype=torch.float64)), np_of(torch.cumsum(i, 1, dtype=torch.float64))]
    e = torch.zeros(3, 0, dtype=torch.float64)
    out["empty"] = [np_of(e.sum(1)), np_of(e.sum(0)), e.sum().item(), np_of(e.prod(1)),
                    list(e.mean(0).shape), np_of(e.amax(0)) if False else None,
                    err(lambda: e.amax(1)), err(lambda: e.max(1)), err(lambda: e.argmax(1)),
                    err(lambda: torch.zeros(0).max()), np_of(e.logsumexp(1)), np_of(e.any(1)), np_of(e.all(1))]
    out["empty_mean"] = np.isnan(np_of(e.mean(1))).tolist()
    t = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 5.0], [4.0, 1.0, 4.0, 4.0]], dtype=torch.float64)
    mx = t.max(dim=1)
    mn = t.min(dim=1)
    out["ties"] = [np_of(mx.values), mx.indices.tolist(), mn.indices.tolist(), t.argmax(1).tolist(),
                   t.argmin(1).tolist(), t.argmax().item(), t.argmin().item(), t.argmax(0).tolist(),
                   torch.max(t, 0)[1].tolist(), t.max().item(), torch.argmax(t, dim=1, keepdim=True).tolist()]
    out["max_binary"] = np_of(torch.max(t, torch.full_like(t, 2.5)))
    out["nan"] = [torch.tensor([1.0, float("nan"), 3.0]).max().item() != torch.tensor([1.0, float("nan")]).max().item(),
                  torch.tensor([1.0, float("nan"), 3.0]).argmax().item(),
                  torch.tensor([1.0, float("nan"), 2.0]).nansum().item(),
                  torch.tensor([1.0, float("nan"), 2.0]).nanmean().item()]
    v = torch.tensor([3, 1, 2, 1, 3, 3, 0])
    sv, si = torch.sort(v, stable=True)
    sd, sdi = torch.sort(v, descending=True, stable=True)
    out["sort"] = [sv.tolist(), si.tolist(), sd.tolist(), sdi.tolist(),
                   torch.argsort(v, stable=True).tolist(), torch.argsort(v, descending=True, stable=True).tolist(),
                   np_of(torch.sort(t, dim=0, stable=True).values), torch.sort(t, dim=0, stable=True).indices.tolist(),
                   v.sort(stable=True)[1].tolist(), list(torch.msort(t).shape)]
    u, cnt = torch.unique(v, return_counts=True)
    u2, inv, c2 = torch.unique(v, sorted=True, return_inverse=True, return_counts=True)
    out["unique"] = [u.tolist(), cnt.tolist(), u2.tolist(), inv.tolist(), c2.tolist(),
                     torch.unique(torch.tensor([[1, 2], [1, 2], [0, 5]]), dim=0).tolist(),
                     [r.tolist() for r in torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 1]), return_counts=True)],
                     torch.unique(t).tolist()]
    out["topk_ties"] = [torch.topk(torch.tensor([1.0, 3.0, 3.0, 2.0]), 2).values.tolist(),
                        torch.topk(torch.tensor([5.0, 1.0, 3.0]), 2, largest=False).indices.tolist(),
                        torch.kthvalue(torch.tensor([3.0, 1.0, 2.0, 5.0]), 2).values.item(),
                        np_of(torch.median(t, dim=1).values), torch.median(torch.tensor([1.0, 4.0, 2.0, 3.0])).item(),
                        np_of(torch.quantile(t, 0.25, dim=1)), torch.quantile(t, torch.tensor([0.5, 0.9], dtype=torch.float64)).tolist()]
    out["cummax"] = [np_of(torch.cummax(t, 1).values), torch.cummax(t, 1).indices.tolist(),
                     np_of(torch.cummin(t, 0).values), np_of(torch.logcumsumexp(t, 1))]
    md = torch.mode(t, 1)
    out["mode"] = [np_of(md.values), md.indices.tolist(), torch.mode(v).values.item(), torch.mode(v).indices.item(),
                   list(t.mode(0, keepdim=True).values.shape)]
    out["aminmax"] = [np_of(torch.aminmax(t, dim=1).min), np_of(torch.aminmax(t).max)]
    out["int_reduce"] = [i.max().item(), type(i.max().item()).__name__, i.sum().item(), i.prod().item(),
                         dt(i.amax(1)), np_of(i.float().mean(0)), i.argmax().item()]
    out["bool_reduce"] = [torch.tensor([True, True, False]).sum().item(),
                          dt(torch.tensor([True, False]).sum())]
    return out
