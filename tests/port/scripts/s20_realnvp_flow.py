"""A RealNVP normalizing flow on 2-D "two moons"-like data, as flow tutorials write it:
coupling layers with ``mask`` buffers, scale nets ending in ``nn.Tanh`` and translation nets,
``torch.distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))`` as the prior,
``prior.log_prob(z) + logdet`` maximum likelihood, ``prior.sample((n,))`` (or NumPy noise)
pushed through the inverse, Adam with ``weight_decay``, ``clip_grad_norm_``,
``torch.distributions.Independent(Normal(...), 1)`` as a second prior, a ``LogNormal`` and a
``TransformedDistribution`` check of the change of variables.

    python s20_realnvp_flow.py --iters 30 --out flow.json
"""

import argparse
import json

import numpy as np
import torch
from torch import distributions, nn


class RealNVP(nn.Module):
    def __init__(self, nets, nett, mask, prior):
        super().__init__()
        self.prior = prior
        self.mask = nn.Parameter(mask, requires_grad=False)
        self.t = torch.nn.ModuleList([nett() for _ in range(len(mask))])
        self.s = torch.nn.ModuleList([nets() for _ in range(len(mask))])

    def g(self, z):
        x = z
        for i in range(len(self.t)):
            x_ = x * self.mask[i]
            s = self.s[i](x_) * (1 - self.mask[i])
            t = self.t[i](x_) * (1 - self.mask[i])
            x = x_ + (1 - self.mask[i]) * (x * torch.exp(s) + t)
        return x

    def f(self, x):
        log_det_J, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1 - self.mask[i])
            t = self.t[i](z_) * (1 - self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_J -= s.sum(dim=1)
        return z, log_det_J

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp

    def sample(self, batchSize, z=None):
        if z is None:
            z = self.prior.sample((batchSize,))
        return self.g(z)


def moons(rng, n):
    t = rng.uniform(0, np.pi, n)
    top = rng.random(n) < 0.5
    x = np.where(top, np.cos(t), 1 - np.cos(t))
    y = np.where(top, np.sin(t), 0.5 - np.sin(t))
    return (np.stack([x, y], 1) + 0.05 * rng.standard_normal((n, 2))).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prior", choices=["mvn", "independent"], default="mvn")
    parser.add_argument("--noise", choices=["torch", "numpy"], default="numpy")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    nets = lambda: nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(), nn.Linear(16, 16), nn.LeakyReLU(),
                                 nn.Linear(16, 2), nn.Tanh())
    nett = lambda: nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(), nn.Linear(16, 16), nn.LeakyReLU(),
                                 nn.Linear(16, 2))
    masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 2).astype(np.float32))
    if args.prior == "mvn":
        prior = distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
    else:
        prior = distributions.Independent(distributions.Normal(torch.zeros(2), torch.ones(2)), 1)
    flow = RealNVP(nets, nett, masks, prior)
    init = np.random.default_rng(4)
    with torch.no_grad():
        for name, p in flow.named_parameters():
            if name != "mask":
                p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad], lr=1e-3, weight_decay=1e-5)
    rng = np.random.default_rng(1)
    losses, norms = [], []
    for t in range(args.iters):
        noisy_moons = torch.from_numpy(moons(rng, args.batch))
        loss = -flow.log_prob(noisy_moons).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        norms.append(torch.nn.utils.clip_grad_norm_(flow.parameters(), 5.0).item())
        optimizer.step()
        losses.append(loss.item())
        if t % 10 == 0:
            print("iter %s:" % t, "loss = %.3f" % loss)  # noqa: UP031
    with torch.no_grad():
        z = torch.from_numpy(rng.standard_normal((8, 2)).astype(np.float32)) if args.noise == "numpy" else None
        x = flow.sample(8, z)
        z_back, _ = flow.f(x)
    lognormal = distributions.LogNormal(torch.tensor([0.0, 0.5]), torch.tensor([1.0, 0.3]))
    pushed = distributions.TransformedDistribution(distributions.Normal(torch.tensor([0.0, 0.5]),
                                                                        torch.tensor([1.0, 0.3])),
                                                   [distributions.transforms.ExpTransform()])
    y = torch.tensor([0.7, 2.0])
    result = {"losses": losses, "norms": norms, "samples": x.tolist(),
              "roundtrip": (z_back - z).abs().max().item() if z is not None else 0.0,
              "lognormal": [lognormal.log_prob(y).tolist(), pushed.log_prob(y).tolist(), lognormal.mean.tolist()],
              "prior_entropy": prior.entropy().item(), "sample_shape": list(prior.sample((3,)).shape)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
