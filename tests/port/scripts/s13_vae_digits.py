"""A variational autoencoder on synthetic 8x8 "digits", in the shape of the classic example:
``argparse`` with ``--no-cuda``, ``device = torch.device("cuda" if ... else "cpu")``,
``F.binary_cross_entropy(reduction="sum")`` + KL, ``torch.randn_like`` reparameterisation (or
NumPy noise), ``model.train()``/``model.eval()``, ``test()`` under ``torch.no_grad()``, f-string
progress lines with tensors in them, latent-space samples.

    python s13_vae_digits.py --epochs 2 --noise numpy --out vae.json
"""

import argparse
import json

import numpy as np
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F


def make_digits(rng, n):
    """Blurry strokes on an 8x8 grid, values in [0, 1] (a stand-in for MNIST)."""
    imgs = np.zeros((n, 1, 8, 8), dtype=np.float32)
    labels = rng.integers(0, 4, n)
    for i, c in enumerate(labels):
        if c == 0:
            imgs[i, 0, 1:7, 3:5] = 1.0
        elif c == 1:
            imgs[i, 0, 3:5, 1:7] = 1.0
        elif c == 2:
            np.fill_diagonal(imgs[i, 0], 1.0)
        else:
            imgs[i, 0, 1:7, 1:7] = 0.5
    imgs = np.clip(imgs + 0.1 * rng.random(imgs.shape, dtype=np.float32), 0, 1)
    return imgs, labels


class VAE(nn.Module):
    def __init__(self, latent=3):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc21 = nn.Linear(32, latent)
        self.fc22 = nn.Linear(32, latent)
        self.fc3 = nn.Linear(latent, 32)
        self.fc4 = nn.Linear(32, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps=None):
        std = torch.exp(0.5 * logvar)
        if eps is None:
            eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps=None):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def main():
    parser = argparse.ArgumentParser(description="VAE example")
    parser.add_argument("--batch-size", type=int, default=16, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=2, metavar="N")
    parser.add_argument("--noise", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda else "cpu")
    kwargs = {"num_workers": 1, "pin_memory": True} if args.cuda else {}

    rng = np.random.default_rng(args.seed)
    xtr, ytr = make_digits(rng, 64)
    xte, yte = make_digits(rng, 32)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr)),
        batch_size=args.batch_size, shuffle=False, **kwargs)
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(xte), torch.from_numpy(yte)),
        batch_size=args.batch_size, shuffle=False, **kwargs)

    model = VAE().to(device)
    init = np.random.default_rng(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def eps_for(n):
        if args.noise == "torch":
            return None
        return torch.from_numpy(rng.standard_normal((n, 3)).astype(np.float32)).to(device)

    log, train_losses, test_losses = [], [], []

    def train(epoch):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data, eps_for(len(data)))
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                line = f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} ({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item() / len(data):.6f}"
                print(line)
                log.append(line)
        avg = train_loss / len(train_loader.dataset)
        print(f"====> Epoch: {epoch} Average loss: {avg:.4f}")
        train_losses.append(avg)

    def test(epoch):
        model.eval()
        test_loss = 0
        with torch.no_grad():
            for i, (data, _) in enumerate(test_loader):
                data = data.to(device)
                recon_batch, mu, logvar = model(data, eps_for(len(data)))
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
                if i == 0:
                    n = min(data.size(0), 4)
                    comparison = torch.cat([data[:n], recon_batch.view(args.batch_size, 1, 8, 8)[:n]])
                    assert comparison.shape == (2 * n, 1, 8, 8)
        test_loss /= len(test_loader.dataset)
        print(f"====> Test set loss: {test_loss:.4f}")
        test_losses.append(test_loss)

    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(4, 3).to(device)
            sample = model.decode(sample).cpu()
            assert sample.view(4, 1, 8, 8).shape == torch.Size([4, 1, 8, 8])
    with torch.no_grad():
        mu, logvar = model.encode(torch.from_numpy(xte).view(-1, 64))
        z = torch.stack(torch.meshgrid(torch.linspace(-1, 1, 3), torch.linspace(-1, 1, 3), indexing="ij"), -1)
        grid = model.decode(torch.cat([z.view(-1, 2), torch.zeros(9, 1)], 1))
    stats = f"mu={mu.mean():.4f} std={logvar.mul(0.5).exp().mean():.4f}"
    print(stats)
    result = {"train": train_losses, "test": test_losses, "log": log, "stats": stats,
              "grid": grid.sum(1).tolist(), "mu": mu[:4].tolist()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
