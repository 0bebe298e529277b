"""Integer division and remainder of negatives, floor/true division modes, bitwise and
shift ops, integer cumsum, comparison helpers."""

from tests.port import np_of

RTOL = 1e-12


def run(torch, shared):
    out = {}
    a = torch.tensor([7, -7, 7, -7, 0, 5])
    b = torch.tensor([2, 2, -2, -2, 3, -5])
    fa, fb = a.double(), b.double()
    out["floor_div"] = [np_of(a // b), np_of(torch.div(a, b, rounding_mode="floor")),
                        np_of(torch.floor_divide(a, b)), np_of(a // 2), np_of(-7 // b)]
    out["trunc_div"] = np_of(torch.div(a, b, rounding_mode="trunc"))
    out["true_div"] = [np_of(a / b), np_of(torch.true_divide(a, b)), np_of(torch.div(a, b))]
    out["remainder"] = [np_of(a % b), np_of(torch.remainder(a, b)), np_of(torch.fmod(a, b)),
                        np_of(a % 3), np_of(torch.remainder(a, -3)), np_of(torch.fmod(a, -3))]
    out["float_rem"] = [np_of(fa % fb), np_of(torch.fmod(fa, fb)), np_of(fa // fb),
                        np_of(torch.remainder(torch.tensor([-1.5, 1.5]), 1.0))]
    out["div_dtypes"] = [(a // b).dtype == torch.int64, torch.div(a, b, rounding_mode="trunc").dtype == torch.int64,
                         (a % 3).dtype == torch.int64]
    x = torch.tensor([0b1100, 0b1010, -1, 5])
    y = torch.tensor([0b1010, 0b0110, 3, 1])
    out["bitwise"] = [np_of(x & y), np_of(x | y), np_of(x ^ y), np_of(~x),
                      np_of(torch.bitwise_and(x, y)), np_of(torch.bitwise_or(x, 1)),
                      np_of(torch.bitwise_xor(x, y)), np_of(torch.bitwise_not(x))]
    out["shifts"] = [np_of(x << 1), np_of(x >> 1), np_of(torch.tensor([1, 2, 3]) << torch.tensor([3, 2, 1]))]
    m = torch.tensor([True, False, True, False])
    n = torch.tensor([True, True, False, False])
    out["bool_logic"] = [np_of(m & n), np_of(m | n), np_of(m ^ n), np_of(~m),
                         np_of(torch.logical_and(m, n)), np_of(torch.logical_or(m, n)),
                         np_of(torch.logical_xor(m, n)), np_of(torch.logical_not(m)),
                         np_of(torch.logical_and(x, y)), np_of(torch.logical_not(torch.tensor([0.0, 2.0])))]
    out["int_cumsum"] = [np_of(torch.cumsum(a, 0)), torch.cumsum(a, 0).dtype == torch.int64,
                         np_of(torch.cumsum(m, 0)), torch.cumsum(m, 0).dtype == torch.int64,
                         np_of(torch.cumprod(torch.tensor([1, 2, -3, 4]), 0)),
                         np_of(torch.cumsum(a, 0, dtype=torch.float64)),
                         np_of(a.cumsum(dim=0)), np_of(torch.tensor([[1, 2], [3, 4]]).cumsum(1))]
    xi = x.clone()
    xi &= torch.tensor([1, 1, 1, 1])
    xi |= torch.tensor([2, 0, 0, 0])
    xi ^= torch.tensor([0, 0, 4, 0])
    out["bitwise_inplace"] = np_of(xi)
    out["cmp_funcs"] = [np_of(torch.eq(a, b)), np_of(torch.ne(a, 7)), np_of(torch.gt(a, b)),
                        np_of(torch.le(a, 0)), np_of(torch.maximum(a, b)), np_of(torch.minimum(a, b)),
                        torch.equal(a, a.clone()), torch.equal(a, b)]
    out["isin"] = np_of(torch.isin(a, torch.tensor([7, 0])))
    out["count_nonzero"] = [torch.count_nonzero(a).item(), np_of(torch.count_nonzero(
        torch.tensor([[0, 1], [2, 0], [3, 4]]), dim=0))]
    out["any_all"] = [m.any().item(), m.all().item(), torch.tensor([]).bool().all().item(),
                      torch.tensor([]).bool().any().item(), np_of(torch.tensor([[1, 0], [1, 1]]).all(dim=1)),
                      np_of(torch.tensor([[0.0, 0.0], [1.0, 0.0]]).any(dim=1))]
    inf = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")])
    out["inf_checks"] = [np_of(torch.isposinf(inf)), np_of(inf.isneginf()), np_of(torch.isinf(inf)), np_of(inf.isfinite())]
    out["gcd"] = [np_of(torch.gcd(torch.tensor([12, -18, 0]), torch.tensor([8, 12, 5])))]
    out["bincount"] = [np_of(torch.bincount(torch.tensor([0, 1, 1, 3]))),
                       np_of(torch.bincount(torch.tensor([0, 1, 1]), minlength=5))]
    return out
