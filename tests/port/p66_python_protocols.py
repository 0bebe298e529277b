"""Python protocols on tensors as scripts use them: iteration and unpacking, `in`,
builtins `sum`/`max`/`min`/`sorted`/`abs`/`round`, `len`, `reversed`, f-string formatting
of 0-d tensors, `copy.deepcopy`, tensors in sets/dicts (identity hashing), comparison
with numbers, `int()`/`float()`/`bool()`, `__index__` in slices and `range`, numpy
interop (`np.asarray`, `.numpy()` sharing memory, numpy scalars as operands)."""

import copy

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    out = {}
    t = torch.tensor([[1.0, 5.0], [3.0, -2.0]], dtype=torch.float64)
    a, b = t
    (p, q), (r, s) = t.tolist()
    out["unpack"] = [np_of(a), np_of(b), [p, q, r, s]]
    out["iter"] = [[v.item() for v in t[0]], [list(row.shape) for row in t], len(list(iter(t)))]
    out["in"] = [5.0 in t, 7 in t, torch.tensor(3.0, dtype=torch.float64) in t]
    out["builtins"] = [sum(t[0]).item(), max(t[1]).item(), min(t[0]).item(),
                       [v.item() for v in sorted(t[1])], np_of(abs(t)), round(t[0, 0].item() / 3, 4),
                       np_of(torch.round(t / 3, decimals=2)), len(t), np_of(reversed(t))]
    z = torch.tensor(2.5)
    out["format"] = [f"{z:.3f}", f"{z.item():.2f}", format(z, ".1f"), f"{torch.tensor(3)}", str(z.item())]
    out["scalars"] = [int(z), float(z), bool(z), bool(torch.tensor([0.0])), int(torch.tensor([7])),
                      float(torch.tensor(1, dtype=torch.int64))]
    i = torch.tensor(2)
    lst = [10, 20, 30, 40]
    out["index"] = [lst[i], lst[i:], list(range(i)), "abc"[torch.tensor(1)], err(lambda: lst[torch.tensor(1.0)])]
    out["compare_numbers"] = [bool(z > 2), bool(z == 2.5), z.item() < 3, (t > 0).sum().item(),
                              bool((t == t).all()), t.eq(5).any().item()]
    dc = copy.deepcopy(t)
    dc[0, 0] = 100.0
    cp = copy.copy(t)
    w = torch.ones(2, requires_grad=True)
    wd = copy.deepcopy(w)
    out["copy"] = [t[0, 0].item(), dc[0, 0].item(), np_of(cp), wd.requires_grad, wd.is_leaf, wd is not w]
    k1, k2 = torch.ones(1), torch.ones(1)
    d = {k1: "a", k2: "b"}
    out["hash"] = [len(d), d[k1], len({k1, k2, k1})]
    arr = np.asarray(t)
    nt = t.numpy()
    nt[1, 1] = 42.0
    out["numpy"] = [arr.dtype.name, t[1, 1].item(), np.array(t).sum().item(), np.exp(t.numpy()).shape]
    x32 = torch.ones(2)
    out["numpy_scalars"] = [str((x32 * np.float64(2.0)).dtype).split(".")[-1], (x32 * np.float64(2.0)).tolist(),
                            str((x32 + np.int64(1)).dtype).split(".")[-1], (torch.tensor([1, 2]) * np.int64(3)).tolist(),
                            str((torch.tensor([1, 2]) * np.float32(0.5)).dtype).split(".")[-1]]
    out["radd"] = [np_of(1 + t), np_of(2 * t), np_of(1 - t), np_of(2 / t), np_of(2 ** t), np_of(7 % t[0]),
                   np_of(-t), np_of(+t)]
    out["none_cmp"] = [t is not None, t != None, t == None]  # noqa: E711
    out["repr_types"] = [type(t.shape).__name__ == "Size", isinstance(t.shape[0], int), type(t.tolist()).__name__,
                         type(t[0, 0].item()).__name__, type(t.dim()).__name__, type(t.numel()).__name__]
    out["bool_errors"] = [err(lambda: bool(t), "ambiguous"), err(lambda: t.item(), "element"),
                          err(lambda: [1, 2][torch.tensor([0, 1])])]
    return out
