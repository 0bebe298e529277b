"""A tiny GAN on 2-D points: generator and discriminator, two Adam optimizers,
BCEWithLogitsLoss with real/fake labels from torch.ones/zeros, detach() for the
discriminator step, requires_grad_(False) freezing during the generator step."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    G = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2, inplace=True), nn.Linear(16, 2)).double()
    D = nn.Sequential(nn.Linear(2, 16), nn.SiLU(), nn.Linear(16, 1)).double()
    shared.model(torch, "G", G)
    shared.model(torch, "D", D)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(13)
    out = {"d_loss": [], "g_loss": [], "d_x": []}
    batch = 8
    for _step in range(6):
        theta = rng.uniform(0, 2 * np.pi, batch)
        real = torch.from_numpy(np.stack([np.cos(theta), np.sin(theta)], 1))
        z = torch.from_numpy(rng.standard_normal((batch, 3)))
        real_labels = torch.ones(batch, 1, dtype=torch.float64)
        fake_labels = torch.zeros(batch, 1, dtype=torch.float64)
        # discriminator
        fake = G(z)
        d_real = D(real)
        d_loss = criterion(d_real, real_labels) + criterion(D(fake.detach()), fake_labels)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        # generator (discriminator frozen)
        for p in D.parameters():
            p.requires_grad_(False)
        g_loss = criterion(D(fake), real_labels)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        for p in D.parameters():
            p.requires_grad_(True)
        out["d_loss"].append(d_loss.item())
        out["g_loss"].append(g_loss.item())
        out["d_x"].append(torch.sigmoid(d_real).mean().item())
    out["d_grads_none_after_g"] = [p.grad is None for p in D.parameters()]
    out["G"] = {k: np_of(v) for k, v in G.state_dict().items()}
    return out
