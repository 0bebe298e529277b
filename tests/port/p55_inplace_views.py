"""In-place ops on views that PyTorch allows and their autograd: `x[:, 0].add_(1)`,
`x.diagonal().fill_(0)`, `t.T.mul_`, views of non-leaves written in place, and the
errors for leaves that require grad; `clone().detach()` patterns and `.data`."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    out = {}
    x = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    x[:, 0].add_(1)
    x.diagonal().fill_(0)
    x[1].mul_(2)
    x.T[0].sub_(0.5)
    x[:, 1:3].clamp_(max=10)
    x.narrow(1, 3, 1).neg_()
    x.view(-1)[5] = 42.0
    out["views_write_base"] = np_of(x)
    y = torch.zeros(2, 3)
    row = y[0]
    row += 1
    col = y.select(1, 2)
    col.fill_(7)
    y.unsqueeze(0)[0, 1].copy_(torch.tensor([5.0, 6.0, 7.5]))
    out["aliasing"] = [np_of(y), np_of(row), row.data_ptr() == y.data_ptr()]
    d = torch.zeros(3, 3)
    torch.diagonal(d, offset=1).fill_(1)
    d.diagonal(-1).copy_(torch.tensor([2.0, 3.0]))
    out["diag_views"] = np_of(d)
    w = torch.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    h = w * 2
    h[:, 0].mul_(3)
    h.diagonal().add_(w.diagonal() ** 2)
    h[1].exp_()
    h.sum().backward()
    out["nonleaf_view_grad"] = [np_of(h), np_of(w.grad)]
    leaf = torch.ones(3, requires_grad=True)
    out["leaf_inplace_err"] = [err(lambda: leaf.add_(1), "leaf"), err(lambda: leaf[0].mul_(2), "leaf")]
    with torch.no_grad():
        leaf[1] = 5.0
        leaf.mul_(2)
    out["leaf_no_grad"] = [np_of(leaf), leaf.requires_grad, leaf.is_leaf, leaf.grad is None]
    p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    q = p.clone().detach()
    q += 1
    r = p.detach().clone().requires_grad_(True)
    (r * r).sum().backward()
    out["clone_detach"] = [np_of(p), np_of(q), q.requires_grad, r.is_leaf, np_of(r.grad), p.grad is None]
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a.detach()
    b.zero_()
    out["detach_shares"] = [np_of(a), a.requires_grad]
    c = torch.tensor([1.0, 2.0], requires_grad=True)
    c.data.mul_(10)
    c.data = torch.tensor([3.0, 4.0])
    (c * 2).sum().backward()
    out["data_attr"] = [np_of(c), np_of(c.grad), c.requires_grad]
    s = torch.tensor([2.0, 3.0], requires_grad=True)
    t = s.sigmoid()
    t.mul_(2)
    out["version_err"] = err(lambda: t.sum().backward())
    u = torch.tensor([2.0, 3.0], requires_grad=True)
    v = u.exp()
    v.add_(1)
    out["version_exp_err"] = err(lambda: v.sum().backward(), "inplace")
    m = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    n = m * 1
    n.relu_()
    n.sum().backward()
    out["relu_"] = [np_of(n), np_of(m.grad)]
    o = torch.zeros(2, 2)
    o.masked_fill_(torch.tensor([[True, False], [False, True]]), 3.0)
    o.index_fill_(1, torch.tensor([1]), -1.0)
    o.index_add_(0, torch.tensor([1, 1]), torch.ones(2, 2))
    o.scatter_add_(1, torch.tensor([[0, 0]]), torch.tensor([[10.0, 20.0]]))
    out["misc_inplace"] = np_of(o)
    z = torch.tensor([1.0, 2.0, 3.0])
    ret = z.add_(1)
    out["inplace_returns_self"] = [ret is z, z.mul_(2).data_ptr() == z.data_ptr(), np_of(z)]
    run_more(torch, out)
    return out


def run_more(torch, out):
    w = torch.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    buf = torch.zeros(2, 4, dtype=torch.float64)
    buf.narrow(1, 1, 3).copy_(w * w)
    buf.T[0].add_(w[:, 0])
    buf[:, 2:].mul_(buf[:, :2].clone())
    out["buffer_view_copy"] = [np_of(buf), buf.requires_grad]
    (buf * torch.arange(8.0, dtype=torch.float64).reshape(2, 4)).sum().backward()
    out["buffer_view_grad"] = np_of(w.grad)
    leaf = torch.ones(2, 2, requires_grad=True)
    out["leaf_view_err"] = err(lambda: leaf[0].add_(1), "leaf")
