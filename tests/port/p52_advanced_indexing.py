"""Advanced indexing corner cases: `x[..., None]`, mixed fancy and slice indices
(`x[[0, 2], :, [1, 3]]`), boolean masks of lower rank, negative indices, `index_put_`
with accumulate, setitem with broadcasting, and the errors PyTorch raises."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    out = {}
    x = torch.arange(60, dtype=torch.float64).reshape(3, 4, 5)
    out["none"] = [list(x[..., None].shape), list(x[None, ..., None].shape), list(x[:, None, 1].shape),
                   list(x[None].shape), list(x[0, ..., None, 2].shape)]
    out["mixed"] = [np_of(x[[0, 2], :, [1, 3]]), list(x[[0, 2], :, [1, 3]].shape),
                    np_of(x[:, [0, 2], [1, 3]]), np_of(x[1, [0, 2]]), np_of(x[[0, 1], 1:3]),
                    list(x[:, [[0], [1]], [2, 3]].shape), np_of(x[:, [[0], [1]], [2, 3]])]
    out["neg"] = [np_of(x[-1]), np_of(x[:, -1, -2]), np_of(x[[-1, 0]]), np_of(x[..., -3:-1])]
    out["tensor_idx"] = [np_of(x[torch.tensor([2, 0])]), np_of(x[torch.tensor(1)]),
                         list(x[torch.tensor([[0, 1], [2, 2]])].shape), np_of(x[:, torch.tensor([3, 3])])]
    m2 = torch.tensor([[True, False, True, False], [False] * 4, [True] * 4])
    m1 = torch.tensor([True, False, True])
    out["bool_masks"] = [list(x[m2].shape), np_of(x[m2]), list(x[m1].shape), np_of(x[m1, 1]),
                         np_of(x[:, m2[0]]), list(x[x > 50].shape), np_of(x[0][x[0, :, 0] > 4])]
    out["bool_scalar"] = [list(x[True].shape), list(x[False].shape)]
    out["steps"] = [np_of(x[::2, ::3, 1::2]), np_of(x[1:100]), list(x[5:].shape), list(x[:, 3:1].shape)]
    out["neg_step"] = err(lambda: x[::-1])
    out["flip"] = np_of(x.flip(0)[:, 0, 0])
    out["oob"] = [err(lambda: x[3]), err(lambda: x[:, [0, 4]]), err(lambda: x[0, 0, 0, 0])]
    out["mask_shape_err"] = err(lambda: x[torch.tensor([True, False])])
    y = torch.zeros(5, dtype=torch.float64)
    idx = torch.tensor([0, 1, 1, 3, 1])
    y.index_put_((idx,), torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64), accumulate=True)
    out["index_put_acc"] = np_of(y)
    z = torch.zeros(5, dtype=torch.float64)
    z.index_put_((torch.tensor([4, 2]),), torch.tensor(7.0, dtype=torch.float64))
    out["index_put"] = np_of(z)
    w = torch.zeros(3, 4)
    w.index_put_((torch.tensor([0, 2, 0]), torch.tensor([1, 3, 1])), torch.tensor(1.0), accumulate=True)
    out["index_put_2d"] = np_of(w)
    out["index_put_fn"] = np_of(torch.index_put(torch.zeros(3), (torch.tensor([0, 0]),),
                                                torch.tensor([1.0, 2.0]), accumulate=True))
    s = x.clone()
    s[[0, 2], :, [1, 3]] = -1.0
    s[..., 0] = torch.tensor([9.0, 8.0, 7.0, 6.0], dtype=torch.float64)
    s[m1] += 100
    s[1, x[1, :, 0] > 25, 2:] = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)
    out["setitem"] = np_of(s)
    t = torch.zeros(4, dtype=torch.int64)
    t[torch.tensor([0, 0, 2])] += 1
    out["dup_setitem_add"] = np_of(t)
    out["nonzero"] = [torch.nonzero(m2).tolist(), [v.tolist() for v in m2.nonzero(as_tuple=True)],
                      list(torch.nonzero(torch.zeros(2, 3)).shape), torch.argwhere(m1).tolist()]
    out["take"] = [np_of(torch.take(x, torch.tensor([0, 59, 17]))),
                   np_of(torch.take_along_dim(x, torch.tensor([[[1]], [[0]], [[4]]]), dim=2))]
    out["masked_select"] = np_of(torch.masked_select(x[0], x[0] > 15))
    out["masked_scatter"] = np_of(torch.zeros(2, 3).masked_scatter(torch.tensor([[True, False, True], [False, True, False]]),
                                                                   torch.tensor([1.0, 2.0, 3.0, 4.0])))
    g = torch.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    (g[[0, 0, 2], [1, 1, 3]] * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    out["grad_dup_index"] = np_of(g.grad)
    g2 = torch.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    (g2[g2 > 4] ** 2).sum().backward()
    out["grad_mask"] = np_of(g2.grad)
    return out
