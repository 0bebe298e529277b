"""A spatial transformer network in the layout of the classic tutorial: a localisation net
(``Conv2d`` + ``MaxPool2d`` + ``ReLU``), ``fc_loc`` whose last layer starts at the identity
(``weight.data.zero_()``, ``bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))``),
``F.affine_grid(theta, x.size())`` + ``F.grid_sample(x, grid)`` (default corner convention),
``F.dropout(x, training=self.training)``, ``F.log_softmax`` + ``F.nll_loss``, SGD, and
``test()`` with ``output.max(1, keepdim=True)[1]`` and ``pred.eq(target.view_as(pred)).sum().item()``.
The inputs are shifted and rotated synthetic digits.

    python s24_spatial_transformer.py --epochs 2 --out stn.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self, p_drop=0.5):
        super().__init__()
        self.p_drop = p_drop
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=3)
        self.conv2_drop = nn.Dropout2d(p_drop)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 4)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(4, 6, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(6 * 2 * 2, 8), nn.ReLU(True), nn.Linear(8, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 6 * 2 * 2)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size())
        x = F.grid_sample(x, grid)
        return x, theta

    def forward(self, x):
        x, theta = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 8 * 2 * 2)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=self.p_drop, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1), theta


def make_digits(rng, n):
    base = np.zeros((4, 14, 14), dtype=np.float32)
    base[0, 3:11, 6:8] = 1
    base[1, 6:8, 3:11] = 1
    base[2, 3:11, 3:11] = np.eye(8)
    base[3, 3:11, 3:5] = base[3, 3:11, 9:11] = 1
    labels = rng.integers(0, 4, n)
    imgs = np.zeros((n, 1, 14, 14), dtype=np.float32)
    for i, c in enumerate(labels):
        imgs[i, 0] = np.roll(base[c], (int(rng.integers(-2, 3)), int(rng.integers(-2, 3))), (0, 1))
    return torch.from_numpy(imgs + 0.05 * rng.standard_normal(imgs.shape).astype(np.float32)), \
        torch.from_numpy(labels.astype(np.int64))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    xtr, ytr = make_digits(rng, 48)
    xte, yte = make_digits(rng, 16)
    train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=16)
    test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xte, yte), batch_size=16)
    model = Net(args.dropout).to(device)
    init = np.random.default_rng(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("fc_loc.2"):
                p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    history = []

    def train(epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output, theta = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            history.append({"loss": loss.item(), "theta": theta[0].tolist()})
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")

    def test():
        with torch.no_grad():
            model.eval()
            test_loss = 0
            correct = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output, _ = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                pred = output.max(1, keepdim=True)[1]
                correct += pred.eq(target.view_as(pred)).sum().item()
            test_loss /= len(test_loader.dataset)
            return test_loss, correct

    tests = []
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        tests.append(test())
    with torch.no_grad():
        warped, theta = model.stn(xte[:2])
    result = {"history": history, "tests": tests, "warped": warped.sum((1, 2, 3)).tolist(),
              "theta": theta.tolist()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
