"""Polynomial least squares by the normal equations (torch.linalg.solve, inv, norm,
pinv, lstsq, svdvals),
then the same fit by full-batch gradient descent on nn.Parameter coefficients."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    rng = np.random.default_rng(16)
    out = {}
    t = torch.linspace(-1, 1, 30, dtype=torch.float64)
    target = 0.5 - t + 2 * t ** 3 + torch.from_numpy(rng.standard_normal(30) * 0.01)
    A = torch.stack([t ** k for k in range(4)], dim=1)
    coef = torch.linalg.solve(A.T @ A, A.T @ target)
    resid = torch.linalg.norm(A @ coef - target)
    out["coef"] = np_of(coef)
    out["resid"] = resid.item()
    out["pinv_like"] = np_of(torch.linalg.inv(A.T @ A) @ A.T @ target)
    out["pinv"] = np_of(torch.linalg.pinv(A) @ target)
    sol = torch.linalg.lstsq(A, target.unsqueeze(1))
    out["lstsq"] = np_of(sol.solution.squeeze(1))
    out["rank"] = int(sol.rank)
    out["cond"] = (lambda s: (s[0] / s[-1]).item())(torch.linalg.svdvals(A))
    c = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    opt = torch.optim.SGD([c], lr=0.05, momentum=0.9)
    gd = []
    for _ in range(30):
        opt.zero_grad()
        loss = ((A @ c - target) ** 2).mean()
        loss.backward()
        opt.step()
        gd.append(loss.item())
    out["gd_losses"] = gd
    out["gd_coef"] = np_of(c)
    return out
