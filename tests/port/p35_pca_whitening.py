"""PCA and whitening the way analysis scripts write them: centre with mean(0),
covariance via X.T @ X / (n - 1) (and torch.cov-free), torch.linalg.eigh, flip to
descending order, project, reconstruct, explained-variance ratios; then a ZCA
whitening layer used inside a model with a gradient through eigh."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    rng = np.random.default_rng(35)
    mix = rng.standard_normal((4, 4))
    X = torch.from_numpy(rng.standard_normal((50, 4)) @ mix)
    Xc = X - X.mean(dim=0, keepdim=True)
    cov = Xc.T @ Xc / (X.shape[0] - 1)
    evals, evecs = torch.linalg.eigh(cov)
    evals, evecs = evals.flip(0), evecs.flip(1)
    evecs = evecs * torch.sign(evecs[0:1, :])          # fix the sign convention
    k = 2
    Z = Xc @ evecs[:, :k]
    recon = Z @ evecs[:, :k].T + X.mean(0)
    out = {"evals": np_of(evals), "evecs": np_of(evecs), "Z": np_of(Z),
           "recon_err": ((recon - X) ** 2).mean().item(),
           "explained": (evals / evals.sum()).cumsum(0).tolist(),
           "eigvalsh": np_of(torch.linalg.eigvalsh(cov))}

    # gradient through a whitening transform
    w = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((4, 4)) * 0.3 + np.eye(4)))
    opt = torch.optim.SGD([w], lr=0.05)
    losses = []
    for _ in range(3):
        H = Xc @ w
        C = H.T @ H / (H.shape[0] - 1) + 1e-3 * torch.eye(4, dtype=torch.float64)
        L, V = torch.linalg.eigh(C)
        zca = V @ torch.diag(L.rsqrt()) @ V.T
        white = H @ zca
        loss = (white[:, 0] - X[:, 1]).pow(2).mean() + 0.01 * L.log().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["losses"] = losses
    out["w"] = np_of(w)
    return out
