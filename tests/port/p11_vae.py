"""A variational autoencoder: encoder to (mu, logvar), reparameterisation with noise
drawn from NumPy, BCE reconstruction (binary_cross_entropy, reduction="sum") + KL,
Adam; then decoding a latent grid under no_grad."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional

    class VAE(nn.Module):
        def __init__(self, d=12, h=10, z=2):
            super().__init__()
            self.fc1 = nn.Linear(d, h)
            self.fc21 = nn.Linear(h, z)
            self.fc22 = nn.Linear(h, z)
            self.fc3 = nn.Linear(z, h)
            self.fc4 = nn.Linear(h, d)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            return torch.sigmoid(self.fc4(F.elu(self.fc3(z))))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 12))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        bce = F.binary_cross_entropy(recon_x, x.view(-1, 12), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld, bce, kld

    rng = np.random.default_rng(11)
    data = torch.from_numpy((rng.random((20, 3, 4)) > 0.5).astype(np.float64))
    model = VAE().double()
    shared.model(torch, "vae", model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    out = {"loss": [], "bce": [], "kld": []}
    for _epoch in range(3):
        for start in range(0, 20, 5):
            batch = data[start:start + 5]
            eps = torch.from_numpy(rng.standard_normal((5, 2)))
            optimizer.zero_grad()
            recon, mu, logvar = model(batch, eps)
            loss, bce, kld = loss_function(recon, batch, mu, logvar)
            loss.backward()
            optimizer.step()
            out["loss"].append(loss.item() / len(batch))
            out["bce"].append(bce.item())
            out["kld"].append(kld.item())
    with torch.no_grad():
        grid = torch.stack(torch.meshgrid(torch.linspace(-1, 1, 3, dtype=torch.float64),
                                          torch.linspace(-1, 1, 3, dtype=torch.float64),
                                          indexing="ij"), dim=-1).reshape(-1, 2)
        samples = model.decode(grid)
    out["samples"] = np_of(samples)
    out["samples_req_grad"] = samples.requires_grad
    return out
