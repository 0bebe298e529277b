"""Sub-pixel super-resolution (ESPCN) on synthetic images, in the layout of the classic
example: ``init.orthogonal_`` with ``calculate_gain('relu')``, ``nn.PixelShuffle``, a
``Dataset`` that makes low-resolution inputs with ``F.interpolate(mode='bicubic')``, Adam,
PSNR from the MSE, a checkpoint per epoch, then upscaling a test image.

    python s11_super_resolution.py --upscale_factor 2 --nEpochs 2 --out sr.json
"""

import argparse
import json
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


class SyntheticImages(Dataset):
    def __init__(self, n, size, factor, seed):
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:size, 0:size] / size
        freqs = rng.uniform(1, 4, (n, 2))
        self.targets = np.stack([0.5 + 0.5 * np.sin(2 * np.pi * (f[0] * xx + f[1] * yy)) for f in freqs])
        self.targets = self.targets[:, None].astype(np.float32)
        self.factor = factor

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        target = torch.from_numpy(self.targets[i])
        low = F.interpolate(target[None], scale_factor=1 / self.factor, mode="bicubic", align_corners=False)[0]
        return low.clamp(0, 1), target


def main():
    parser = argparse.ArgumentParser(description="Super Res Example")
    parser.add_argument("--upscale_factor", type=int, default=2)
    parser.add_argument("--batchSize", type=int, default=4)
    parser.add_argument("--testBatchSize", type=int, default=4)
    parser.add_argument("--nEpochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--out", default=None)
    opt = parser.parse_args()
    torch.manual_seed(opt.seed)
    device = torch.device("cpu")
    train_set = SyntheticImages(12, 16, opt.upscale_factor, opt.seed)
    test_set = SyntheticImages(4, 16, opt.upscale_factor, opt.seed + 1)
    training_data_loader = DataLoader(dataset=train_set, num_workers=0, batch_size=opt.batchSize, shuffle=False)
    testing_data_loader = DataLoader(dataset=test_set, num_workers=0, batch_size=opt.testBatchSize, shuffle=False)
    model = Net(upscale_factor=opt.upscale_factor).to(device)
    with torch.no_grad():   # the orthogonal init's squared row norms (gain**2 and 1)
        orth = [float((m.weight.flatten(1) @ m.weight.flatten(1).t()).diagonal().mean())
                for m in (model.conv1, model.conv4)]
    rng = np.random.default_rng(7)
    with torch.no_grad():
        for prm in model.parameters():
            fan_in = prm[0].numel() if prm.dim() > 1 else 16
            prm.copy_(torch.from_numpy(rng.normal(0, (2.0 / fan_in) ** 0.5, tuple(prm.shape))))
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=opt.lr)
    losses, psnrs = [], []
    for epoch in range(1, opt.nEpochs + 1):
        epoch_loss = 0.0
        for input, target in training_data_loader:
            input, target = input.to(device), target.to(device)
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            epoch_loss += loss.item()
            loss.backward()
            optimizer.step()
        losses.append(epoch_loss / len(training_data_loader))
        avg_psnr = 0.0
        with torch.no_grad():
            for input, target in testing_data_loader:
                mse = criterion(model(input.to(device)), target.to(device))
                avg_psnr += 10 * log10(1 / mse.item())
        psnrs.append(avg_psnr / len(testing_data_loader))
        torch.save(model.state_dict(), f"model_epoch_{epoch}.pth")
    low, _ = test_set[0]
    out = model(low.unsqueeze(0)).clamp(0, 1)
    result = {"losses": losses, "psnr": psnrs, "orthogonal_rows": orth, "out_shape": list(out.shape)}
    if opt.out:
        with open(opt.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
