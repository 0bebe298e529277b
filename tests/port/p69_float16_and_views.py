"""float16 storage and float32 compute, as inference scripts do: weights kept in half,
upcast for the matmul, results rounded back; `torch.finfo` clamping; `view(dtype)`-free
reinterpretations avoided; `.to(other)` / `type_as` on half tensors; half reductions
upcast with `dtype=`; `torch.allclose`/`isclose` tolerances on half values."""

import numpy as np

from tests.port import np_of

RTOL = 1e-6


def dt(t):
    return str(t.dtype).split(".")[-1]


def run(torch, shared):
    rng = np.random.default_rng(29)
    out = {}
    w16 = torch.tensor(rng.standard_normal((8, 4)), dtype=torch.float16)
    b16 = torch.tensor(rng.standard_normal(4), dtype=torch.float16)
    x = torch.tensor(rng.standard_normal((3, 8)), dtype=torch.float32)
    y = x @ w16.float() + b16.float()
    out["upcast_matmul"] = [np_of(y), dt(y)]
    y16 = y.half()
    out["roundtrip"] = [np_of(y16.float()), dt(y16), dt(y16.type_as(x)), dt(x.type_as(y16)), dt(y16.to(x))]
    big = torch.tensor([1e5, -1e5, 6e4, 1e-8], dtype=torch.float32)
    fi = torch.finfo(torch.float16)
    out["clamp_to_half"] = np_of(big.clamp(fi.min, fi.max).half().float())
    out["finfo"] = [fi.max, fi.min, fi.eps, fi.tiny, fi.bits, torch.finfo(torch.float32).eps, torch.finfo().bits]
    h = torch.tensor([0.1, 0.2, 0.3, 1000.0], dtype=torch.float16)
    out["half_reduce"] = [h.sum(dtype=torch.float32).item(), dt(h.sum()), h.float().mean().item(),
                          h.max().item(), dt(h.max()), dt(h.mean(dtype=torch.float64))]
    out["half_elementwise"] = [np_of((h * 2).float()), np_of((h + h).float()), dt(h * 2.5), dt(h * torch.tensor(2.5)),
                               dt(h + torch.tensor([1.0])), dt(torch.sqrt(h)), dt(h > 0.15), np_of(h > 0.15)]
    out["isclose"] = [torch.allclose(h.float(), torch.tensor([0.1, 0.2, 0.3, 1000.0]), atol=1e-3),
                      np_of(torch.isclose(h.float(), torch.tensor([0.1, 0.2, 0.3, 1000.0]), rtol=0, atol=1e-4))]
    out["tolist_half"] = [type(h.tolist()[0]).__name__, h.tolist()]
    lin = torch.nn.Linear(8, 4)
    shared.model(torch, "lin", lin)
    lin.half()
    with torch.no_grad():
        z = torch.nn.functional.linear(x, lin.weight.float(), lin.bias.float())
    out["half_module"] = [dt(lin.weight), np_of(z), np_of(lin.weight.float())]
    return out
