"""An SN-GAN on 2-D data as GAN repositories write it: a discriminator whose layers are wrapped
in ``torch.nn.utils.parametrizations.spectral_norm`` (and the older ``torch.nn.utils.spectral_norm``
spelling via ``--sn-api``), hinge losses ``F.relu(1 - d_real).mean() + F.relu(1 + d_fake).mean()``,
``n_critic`` discriminator steps per generator step, ``Adam(betas=(0.0, 0.9))``, an EMA copy of the
generator updated with ``torch.lerp``/``lerp_`` under ``no_grad``, evaluation noise drawn inside
``torch.random.fork_rng()`` so it does not disturb training noise, and a whole-checkpoint dict
with both state dicts.

    python s22_sngan_hinge_ema.py --iters 6 --noise numpy --out sngan.json
"""

import argparse
import copy
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm


class Generator(nn.Module):
    def __init__(self, nz=4, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(nz, hidden), nn.ReLU(True), nn.Linear(hidden, hidden), nn.ReLU(True),
                                 nn.Linear(hidden, 2))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, hidden=32, sn=spectral_norm):
        super().__init__()
        self.net = nn.Sequential(sn(nn.Linear(2, hidden)), nn.LeakyReLU(0.1, inplace=True),
                                 sn(nn.Linear(hidden, hidden)), nn.LeakyReLU(0.1, inplace=True),
                                 sn(nn.Linear(hidden, 1)))

    def forward(self, x):
        return self.net(x).view(-1)


@torch.no_grad()
def ema_update(ema, model, decay):
    for p_ema, p in zip(ema.parameters(), model.parameters()):
        p_ema.lerp_(p, 1.0 - decay)
    for b_ema, b in zip(ema.buffers(), model.buffers()):
        b_ema.copy_(b)


def ring(rng, n):
    angle = rng.integers(0, 8, n) * (2 * np.pi / 8)
    pts = np.stack([np.cos(angle), np.sin(angle)], 1) * 2.0
    return (pts + 0.05 * rng.standard_normal((n, 2))).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=6)
    parser.add_argument("--n-critic", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--ema", type=float, default=0.9)
    parser.add_argument("--noise", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--sn-api", choices=["parametrizations", "hook"], default="parametrizations")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(1234)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sn = spectral_norm if args.sn_api == "parametrizations" else torch.nn.utils.spectral_norm
    netG, netD = Generator().to(device), Discriminator(sn=sn).to(device)
    init = np.random.default_rng(7)
    with torch.no_grad():
        for _name, p in list(netG.named_parameters()) + list(netD.named_parameters()):
            p.copy_(torch.from_numpy(init.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
        for _name, b in netD.named_buffers():       # the power-iteration vectors start equal too
            b.copy_(F.normalize(torch.from_numpy(init.standard_normal(tuple(b.shape)).astype(np.float32)), dim=0))
    netG_ema = copy.deepcopy(netG).eval()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.0, 0.9))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.0, 0.9))
    rng = np.random.default_rng(0)

    def noise(n):
        if args.noise == "torch":
            return torch.randn(n, 4, device=device)
        return torch.from_numpy(rng.standard_normal((n, 4)).astype(np.float32)).to(device)

    history = []
    for it in range(args.iters):
        for _ in range(args.n_critic):
            real = torch.from_numpy(ring(rng, args.batch)).to(device)
            with torch.no_grad():
                fake = netG(noise(args.batch))
            d_real, d_fake = netD(real), netD(fake)
            lossD = F.relu(1.0 - d_real).mean() + F.relu(1.0 + d_fake).mean()
            optD.zero_grad(set_to_none=True)
            lossD.backward()
            optD.step()
        lossG = -netD(netG(noise(args.batch))).mean()
        optG.zero_grad(set_to_none=True)
        lossG.backward()
        optG.step()
        ema_update(netG_ema, netG, args.ema)
        with torch.random.fork_rng():
            torch.manual_seed(99)
            eval_noise = torch.randn(4, 4)
        with torch.no_grad():
            ema_out = netG_ema(torch.from_numpy(np.ones((2, 4), dtype=np.float32)))
        history.append({"D": lossD.item(), "G": lossG.item(), "ema": ema_out.tolist(),
                        "eval_noise_shape": list(eval_noise.shape)})
        print(f"[{it}/{args.iters}] Loss_D: {lossD.item():.4f} Loss_G: {lossG.item():.4f}")
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict(), "iter": args.iters}, "sngan.pt")
    ckpt = torch.load("sngan.pt")
    netD2 = Discriminator(sn=sn)
    netD2.load_state_dict(ckpt["netD"])
    netD2.eval()
    netD.eval()
    probe = torch.from_numpy(ring(np.random.default_rng(5), 6))
    with torch.no_grad():
        same = torch.allclose(netD2(probe), netD(probe))
        netD(probe)   # the hook API recomputes the weight in forward
        sigma = [torch.linalg.matrix_norm(m.weight, ord=2).item() for m in netD.net if isinstance(m, nn.Linear)]
    result = {"history": history, "same_after_reload": same, "keys": sorted(ckpt["netD"].keys()),
              "sigma": sigma, "iter": ckpt["iter"]}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
