"""Math ops real code reaches for, with gradients: `lerp`, `addcmul`, tensor-bound
`clamp`, `nan_to_num`, `logsumexp` with -inf rows, `diff`, `trapezoid`, `cross`,
`outer`, `kron`, `tensordot`, `einsum` variants, `baddbmm`, `trace`, `cumprod` with
zeros, `atan2`, `hypot`, `xlogy`, `sinc`, `erfinv`, `polar` free ops, `renorm`, `dist`."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    rng = np.random.default_rng(13)
    out = {}

    def g(shape, scale=1.0):
        return torch.tensor(rng.standard_normal(shape) * scale, requires_grad=True)

    a, b, c = g((3, 4)), g((3, 4)), g((3, 4))
    lo, hi = torch.tensor(np.full((3, 4), -0.5)), torch.tensor(np.full((1, 4), 0.7))
    terms = {
        "lerp": torch.lerp(a, b, 0.3), "lerp_t": torch.lerp(a, b, c.sigmoid()),
        "addcmul": torch.addcmul(a, b, c, value=0.5), "addcdiv": torch.addcdiv(a, b, c.exp(), value=-2),
        "clamp_t": torch.clamp(a, min=lo, max=hi), "clamp_min_t": a.clamp(min=lo),
        "hypot": torch.hypot(a, b), "atan2": torch.atan2(a, b), "xlogy": torch.xlogy(a.abs(), b.abs()),
        "sinc": torch.sinc(a), "erfinv": torch.erfinv(a.tanh() * 0.9), "logit": torch.logit(a.sigmoid(), eps=1e-6),
        "diff": torch.diff(a, dim=1), "diff2": torch.diff(a, n=2, dim=0), "cumprod": torch.cumprod(a, 1),
        "logcumsumexp": torch.logcumsumexp(a, 0), "frac_trunc": a * 3 - torch.trunc(a * 3).detach(),
        "copysign": torch.copysign(a, b), "float_power": torch.float_power(a.abs(), 1.5),
        "logaddexp": torch.logaddexp(a, b), "logaddexp2": torch.logaddexp2(a, b),
        "renorm": torch.renorm(a, 2, 0, 1.0), "lgamma": torch.lgamma(a.abs() + 0.1),
        "digamma": torch.digamma(a.abs() + 0.5), "polygamma": torch.polygamma(1, b.abs() + 0.5),
        "special": torch.special.gammaln(c.exp()) + torch.special.psi(c.exp()) + torch.special.erfinv(c.tanh() / 2), "softsign": torch.nn.functional.softsign(a),
        "rsqrt": torch.rsqrt(a.abs() + 0.1), "expm1": torch.expm1(a), "square": torch.square(a),
        "amax_ties": torch.cat([a[:, :2], a[:, :2]], 1).amax(1), "max_ties": torch.cat([a, a], 0).max(0).values,
    }
    for name, t in terms.items():
        for x in (a, b, c):
            x.grad = None
        (t * torch.tensor(np.linspace(-1, 1, t.numel()).reshape(t.shape))).sum().backward()
        out[name] = [np_of(t), np_of(a.grad) if a.grad is not None else None,
                     np_of(b.grad) if b.grad is not None else None]
    z = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])
    out["logsumexp_inf"] = np_of(torch.logsumexp(z, 1))
    out["nan_to_num"] = [np_of(torch.nan_to_num(torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]))),
                         np_of(torch.nan_to_num(torch.tensor([float("nan"), float("inf")]), nan=0.5, posinf=9.0))]
    cp = g((4,))
    with torch.no_grad():
        cp[2] = 0.0
    torch.cumprod(cp, 0).sum().backward()
    out["cumprod_zero_grad"] = np_of(cp.grad)
    u, v = g((2, 3)), g((2, 3))
    res = {"cross": torch.cross(u, v, dim=1), "linalg_cross": torch.linalg.cross(u, v),
           "outer": torch.outer(u[0], v[1]), "kron": torch.kron(u, v[:1]),
           "tensordot": torch.tensordot(u, v.T, dims=1), "tensordot2": torch.tensordot(u, v, dims=([0, 1], [0, 1])),
           "einsum_trace": torch.einsum("ii", u @ v.T), "einsum_outer": torch.einsum("i,j->ij", u[0], v[0]),
           "einsum_ellipsis": torch.einsum("...j,...j->...", u, v), "einsum_bilinear": torch.einsum("bi,bj->bij", u, v),
           "trace": torch.trace(u @ v.T), "dist": torch.dist(u, v), "dist1": torch.dist(u, v, p=1),
           "trapz": torch.trapezoid(u, dx=0.5), "trapz_x": torch.trapezoid(u, x=torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64)),
           "cumtrapz": torch.cumulative_trapezoid(u, dim=1), "vdot": torch.vdot(u[0], v[0]), "dot": torch.dot(u[1], v[1]),
           "baddbmm": torch.baddbmm(torch.ones(1, 2, 2, dtype=torch.float64), u[None], v.transpose(0, 1)[None],
                                       beta=0.5, alpha=2.0),
           "addmm": torch.addmm(torch.ones(2, dtype=torch.float64), u, v.T, beta=2, alpha=0.5),
           "addmv": torch.addmv(torch.ones(2, dtype=torch.float64), u, v[0]),
           "chain_matmul": torch.linalg.multi_dot([u, v.T, u]),
           "cosine_sim": torch.nn.functional.cosine_similarity(u, v, dim=0),
           "pdist": torch.nn.functional.pdist(torch.cat([u, v])), "cov": torch.cov(torch.cat([u, v])),
           "corrcoef": torch.corrcoef(torch.cat([u, v]).T)}
    for name, t in res.items():
        u.grad = v.grad = None
        t.sum().backward()
        out[name] = [np_of(t)] + [None if x.grad is None else np_of(x.grad) for x in (u, v)]
    return out
