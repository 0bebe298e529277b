"""A mixture density network on an inverse (one-to-many) regression problem, as MDN
tutorials write it: a trunk with ``nn.Tanh``, heads for ``pi`` logits, ``mu`` and
``sigma = torch.exp(...)``, the negative log-likelihood written by hand with
``torch.logsumexp`` and checked against ``MixtureSameFamily(Categorical(logits=...),
Independent(Normal(mu, sigma), 1))``, a ``StudentT`` likelihood head for a robust variant,
RMSprop, ``ReduceLROnPlateau``, ``--double`` (``torch.set_default_dtype(torch.float64)``), and sampling through ``mixture.sample()`` (or NumPy draws).

    python s27_mixture_density.py --epochs 30 --out mdn.json
"""

import argparse
import json
import math

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal, StudentT


class MDN(nn.Module):
    def __init__(self, n_hidden=16, n_gaussians=3, out_dim=1):
        super().__init__()
        self.k, self.d = n_gaussians, out_dim
        self.z_h = nn.Sequential(nn.Linear(1, n_hidden), nn.Tanh())
        self.z_pi = nn.Linear(n_hidden, n_gaussians)
        self.z_mu = nn.Linear(n_hidden, n_gaussians * out_dim)
        self.z_sigma = nn.Linear(n_hidden, n_gaussians * out_dim)

    def forward(self, x):
        z_h = self.z_h(x)
        pi_logits = self.z_pi(z_h)
        mu = self.z_mu(z_h).view(-1, self.k, self.d)
        sigma = torch.exp(self.z_sigma(z_h)).view(-1, self.k, self.d)
        return pi_logits, mu, sigma


def mdn_loss(pi_logits, mu, sigma, y):
    log_pi = torch.log_softmax(pi_logits, dim=1)
    z = (y.unsqueeze(1) - mu) / sigma
    log_normal = -0.5 * z.pow(2) - torch.log(sigma) - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(log_pi + log_normal.sum(-1), dim=1).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--noise", choices=["torch", "numpy"], default="numpy")
    parser.add_argument("--double", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    npf = np.float64 if args.double else np.float32
    if args.double:
        torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(0)
    y_data = rng.uniform(-10.5, 10.5, (args.n, 1)).astype(npf)
    x_data = (np.sin(0.75 * y_data) * 7.0 + y_data * 0.5 + rng.standard_normal((args.n, 1))).astype(npf)
    x, y = torch.from_numpy(x_data) / 10, torch.from_numpy(y_data) / 10
    model = MDN()
    init = np.random.default_rng(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init.uniform(-0.5, 0.5, tuple(p.shape)).astype(npf)))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=3)
    history = []
    for epoch in range(args.epochs):
        pi_logits, mu, sigma = model(x)
        loss = mdn_loss(pi_logits, mu, sigma, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step(loss.item())
        with torch.no_grad():
            mix = MixtureSameFamily(Categorical(logits=pi_logits), Independent(Normal(mu, sigma), 1))
            check = -mix.log_prob(y).mean()
        history.append([loss.item(), check.item(), optimizer.param_groups[0]["lr"]])
        if epoch % 10 == 0:
            print(f"epoch {epoch:3d} loss {loss.item():.4f}")
    robust = StudentT(torch.tensor(3.0), mu[:, 0, 0].detach(), sigma[:, 0, 0].detach())
    with torch.no_grad():
        x_test = torch.linspace(-1, 1, 5).unsqueeze(1)
        pi_logits, mu, sigma = model(x_test)
        mix = MixtureSameFamily(Categorical(logits=pi_logits), Independent(Normal(mu, sigma), 1))
        if args.noise == "numpy":
            k = torch.from_numpy(np.array([int(np.argmax(r)) for r in pi_logits.numpy()]))
            eps = torch.from_numpy(rng.standard_normal((5, 1)).astype(npf))
            draw = mu[torch.arange(5), k] + sigma[torch.arange(5), k] * eps
        else:
            draw = mix.sample()
    result = {"history": history, "mean": mix.mean.squeeze(-1).tolist(), "var": mix.variance.squeeze(-1).tolist(),
              "draw": draw.squeeze(-1).tolist(), "t_logp": robust.log_prob(y[:, 0]).mean().item(),
              "draw_shape": list(mix.sample((2,)).shape)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
