"""Exact Gaussian-process regression written directly in PyTorch, as GP tutorials do: an
``RBFKernel(nn.Module)`` with ``raw_lengthscale``/``raw_outputscale`` through ``F.softplus``,
``torch.cdist`` distances, a jitter loop on ``torch.linalg.cholesky_ex`` ``info``, the
negative log marginal likelihood from ``torch.cholesky_solve`` and ``L.diagonal().log().sum()``
(checked against ``MultivariateNormal(scale_tril=L).log_prob``), Adam on the hyper-parameters,
predictive mean/variance with ``torch.linalg.solve_triangular`` under ``torch.no_grad()``, and
``torch.linalg.cond``/``matrix_rank`` diagnostics.  float64 throughout
(``torch.set_default_dtype(torch.float64)``).

    python s23_gp_regression.py --iters 25 --out gp.json
"""

import argparse
import json
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import MultivariateNormal


class RBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_lengthscale = nn.Parameter(torch.tensor(0.0))
        self.raw_outputscale = nn.Parameter(torch.tensor(0.0))

    @property
    def lengthscale(self):
        return F.softplus(self.raw_lengthscale)

    @property
    def outputscale(self):
        return F.softplus(self.raw_outputscale)

    def forward(self, x1, x2):
        d = torch.cdist(x1 / self.lengthscale, x2 / self.lengthscale)
        return self.outputscale * torch.exp(-0.5 * d.pow(2))


class ExactGP(nn.Module):
    def __init__(self, train_x, train_y):
        super().__init__()
        self.train_x, self.train_y = train_x, train_y
        self.kernel = RBFKernel()
        self.raw_noise = nn.Parameter(torch.tensor(-2.0))
        self.mean_const = nn.Parameter(torch.tensor(0.0))

    @property
    def noise(self):
        return F.softplus(self.raw_noise) + 1e-4

    def cholesky(self):
        n = self.train_x.size(0)
        K = self.kernel(self.train_x, self.train_x) + self.noise * torch.eye(n)
        jitter = 0.0
        for _ in range(5):
            L, info = torch.linalg.cholesky_ex(K + jitter * torch.eye(n))
            if info.item() == 0:
                return L, K
            jitter = 1e-6 if jitter == 0.0 else jitter * 10
        raise RuntimeError("kernel matrix is not positive definite")

    def neg_mll(self):
        L, _ = self.cholesky()
        r = (self.train_y - self.mean_const).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        n = r.size(0)
        nll = 0.5 * (r * alpha).sum() + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
        return nll / n, L

    @torch.no_grad()
    def predict(self, test_x):
        L, K = self.cholesky()
        Ks = self.kernel(self.train_x, test_x)
        r = (self.train_y - self.mean_const).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        mean = self.mean_const + (Ks.mT @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        var = self.kernel.outputscale - v.pow(2).sum(0) + self.noise
        return mean, var, K


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=25)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    train_x = torch.from_numpy(np.sort(rng.uniform(0, 6, args.n))).unsqueeze(-1)
    train_y = torch.sin(train_x.squeeze(-1)) + 0.1 * torch.from_numpy(rng.standard_normal(args.n))
    model = ExactGP(train_x, train_y)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    history = []
    for i in range(args.iters):
        optimizer.zero_grad()
        loss, L = model.neg_mll()
        loss.backward()
        optimizer.step()
        history.append([loss.item(), model.kernel.lengthscale.item(), model.kernel.outputscale.item(),
                        model.noise.item()])
        if i % 5 == 0:
            print(f"Iter {i + 1}/{args.iters} - Loss: {loss.item():.3f}   lengthscale: "
                  f"{model.kernel.lengthscale.item():.3f}   noise: {model.noise.item():.3f}")
    with torch.no_grad():
        _, L = model.neg_mll()
        mvn = MultivariateNormal(model.mean_const.expand(args.n), scale_tril=L)
        mll_check = (-mvn.log_prob(train_y) / args.n).item()
        loss, _ = model.neg_mll()
    test_x = torch.linspace(0, 6, 7).unsqueeze(-1)
    mean, var, K = model.predict(test_x)
    result = {"history": history, "mean": mean.tolist(), "var": var.tolist(), "mll_check": mll_check,
              "loss": loss.item(), "cond": torch.linalg.cond(K).item(), "rank": torch.linalg.matrix_rank(K).item(),
              "grad_free": all(p.grad is not None for p in model.parameters())}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
