"""dtype conversions and mixed-dtype arithmetic: int/bool/float16 tensors, promotion
with Python scalars, `.to(float16)` round trips, `torch.where` with scalars."""

import numpy as np

from tests.port import np_of

RTOL = 2e-7


def dt(t):
    return str(t.dtype).split(".")[-1]


def run(torch, shared):
    out = {}
    i = torch.tensor([1, -2, 3])
    b = torch.tensor([True, False, True])
    f = torch.tensor([0.5, 1.5, -2.25])
    d = torch.tensor([0.5, 1.5, -2.25], dtype=torch.float64)
    h = f.to(torch.float16)
    out["defaults"] = [dt(i), dt(b), dt(f), dt(torch.tensor(3)), dt(torch.tensor(3.0)),
                       dt(torch.tensor([True])), dt(torch.arange(3)), dt(torch.arange(3.0)),
                       dt(torch.zeros(2)), dt(torch.full((2,), 7)), dt(torch.full((2,), 7.0))]
    out["promote"] = [dt(i + f), dt(i + 1.5), dt(i * 2), dt(b + b), dt(b + 1), dt(b * 1.5),
                      dt(f + d), dt(h + f), dt(h + 1.0), dt(h + i), dt(i / 2), dt(i / i),
                      dt(i + d), dt(b & b), dt(f * torch.tensor(2)), dt(h * torch.tensor(2.0)),
                      dt(i.float() + d), dt(torch.tensor(2.0, dtype=torch.float64) * f)]
    out["values"] = [np_of(i + f), np_of(i / 2), np_of(b + b), np_of(b * 1.5), np_of(i * 2.5)]
    out["sum_bool"] = [b.sum().item(), dt(b.sum()), dt(i.sum()), dt(h.sum()), dt(i.prod())]
    out["mean_int_err"] = "no error"
    try:
        i.mean()
    except RuntimeError:
        out["mean_int_err"] = "RuntimeError"
    out["mean_int_dtype"] = i.mean(dtype=torch.float64).item()
    rt = torch.tensor([0.1, 1.0 / 3, 65519.0, 1e-5, 70000.0], dtype=torch.float32)
    out["f16_roundtrip"] = np_of(rt.to(torch.float16).to(torch.float32))
    out["f16_half"] = [dt(rt.half()), np_of(rt.half().float()), dt(rt.half().double())]
    out["f16_math"] = np_of((h * 3 + 1).float())
    out["to_int"] = [np_of(torch.tensor([-1.7, -0.5, 0.5, 2.9]).to(torch.int64)),
                     np_of(torch.tensor([-1.7, 2.9]).long()), np_of(torch.tensor([0.0, -0.0, 2.0]).bool()),
                     np_of(torch.tensor([3, 0, -1]).bool()), np_of(b.int()), dt(b.int()), dt(b.long())]
    out["to_kwargs"] = [dt(i.to(dtype=torch.float32)), dt(i.to(f)), dt(i.to("cpu", torch.float64)),
                        dt(f.type(torch.int32)), dt(f.to(torch.uint8)), np_of(torch.tensor([1.0, 255.0]).to(torch.uint8))]
    out["where_scalars"] = [np_of(torch.where(f > 0, f, 0.0)), dt(torch.where(f > 0, f, 0.0)),
                            np_of(torch.where(b, 1, 0)), dt(torch.where(b, 1, 0)),
                            np_of(torch.where(b, 1.0, 0.0)), dt(torch.where(b, 1.0, 0.0)),
                            np_of(torch.where(i > 0, i, -1.5)), dt(torch.where(i > 0, i, -1.5)),
                            dt(torch.where(b, d, f)), np_of(torch.where(b, d, f))]
    out["where_1arg"] = [t.tolist() for t in torch.where(torch.tensor([[0, 1], [1, 1]]) > 0)]
    out["cmp_broadcast"] = [np_of(i[:, None] > f), np_of(i == torch.tensor([[1], [3]])),
                            np_of(f >= 0.5), np_of(b == 1), dt(i < 2.5), np_of(i < 2.5)]
    out["float_ops_on_int"] = [np_of(torch.sqrt(torch.tensor([4, 9]))), dt(torch.sqrt(torch.tensor([4, 9]))),
                               dt(torch.exp(b)), dt(torch.sigmoid(i)), np_of(torch.sin(i))]
    out["clamp_int"] = [np_of(i.clamp(0, 2)), dt(i.clamp(0, 2)), dt(i.clamp(min=0.5)), np_of(i.clamp(min=0.5))]
    out["abs_neg"] = [np_of(-i), np_of(i.abs()), dt(i.abs()), np_of(torch.tensor([-3, 4]).sign())]
    out["pow"] = [np_of(i ** 2), dt(i ** 2), dt(i ** 2.0), np_of(2 ** i.clamp(min=0)), np_of(f ** 2)]
    x = torch.zeros(3, dtype=torch.int64)
    x += 2
    x *= 3
    out["int_inplace"] = np_of(x)
    try:
        x += 0.5
        out["int_inplace_float"] = "no error"
    except RuntimeError:
        out["int_inplace_float"] = "RuntimeError"
    y = torch.zeros(3)
    y += i
    out["float_inplace_int"] = [np_of(y), dt(y)]
    out["is_fp"] = [f.is_floating_point(), h.is_floating_point(), i.is_floating_point(), b.is_floating_point(),
                    torch.is_floating_point(d)]
    out["element_size"] = [h.element_size(), f.element_size(), d.element_size(), i.element_size(),
                           b.element_size()]
    out["finfo"] = [torch.finfo(torch.float16).eps, torch.finfo(torch.float32).max, torch.iinfo(torch.int32).max,
                    torch.finfo(torch.float64).tiny]
    out["default_dtype"] = [dt(torch.tensor([1.0])), torch.get_default_dtype() == torch.float32]
    out["np_roundtrip"] = [dt(torch.from_numpy(np.arange(3, dtype=np.int32))),
                           dt(torch.from_numpy(np.ones(2, dtype=np.float16))),
                           dt(torch.as_tensor(np.array([True]))), dt(torch.tensor(np.float32(2.0)))]
    out["item_types"] = [type(i[0].item()).__name__, type(b[0].item()).__name__, type(h[0].item()).__name__]
    return out
