"""Train a small image classifier on synthetic 8x8 digits: the shape of an ordinary
training script (argparse, device preamble, DataLoader from submodules, TensorBoard,
StepLR, checkpoint save/load, an "infinite" sampled loader).

    python s01_train_classifier.py --epochs 2 --logdir runs/cls --out metrics.json
"""

import argparse
import json
import os

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data.dataloader import DataLoader
from torch.utils.data.dataset import Subset, TensorDataset
from torch.utils.data.sampler import RandomSampler, SequentialSampler
from torch.utils.tensorboard import SummaryWriter


class Net(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(dropout)
        self.fc1 = nn.Linear(16 * 3 * 3, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def numpy_init_(model: nn.Module, seed: int) -> None:
    """Deterministic weights from NumPy, so runs are comparable everywhere."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            scale = 1.0 / np.sqrt(max(1, p[0].numel())) if p.dim() > 1 else 0.1
            p.copy_(torch.from_numpy(rng.uniform(-scale, scale, size=tuple(p.shape))))


def train(args, model, device, loader, optimizer, epoch, writer, history):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
        if writer is not None:
            writer.add_scalar("train/loss", loss.item(), (epoch - 1) * len(loader) + batch_idx)
        if batch_idx % args.log_interval == 0 and args.verbose:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}")


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(loader.dataset), correct


def main():
    parser = argparse.ArgumentParser(description="synthetic digits")
    parser.add_argument("--batch-size", type=int, default=16, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--lr", type=float, default=0.1, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--dropout", type=float, default=0.25)
    parser.add_argument("--no-accel", action="store_true", help="disables accelerator")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=2)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--logdir", default=None)
    parser.add_argument("--save-model", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()
    torch.manual_seed(args.seed)
    cudnn.benchmark = False
    cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    kwargs = {"num_workers": 1, "pin_memory": True} if use_accel else {}

    rng = np.random.default_rng(args.seed)
    images = rng.standard_normal((96, 1, 8, 8)).astype(np.float32)
    labels = (images[:, 0, :4].mean((1, 2)) > 0).astype(np.int64) + (images[:, 0, 4:].mean((1, 2)) > 0.1)
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    train_set, test_set = Subset(dataset, range(64)), Subset(dataset, range(64, 96))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=SequentialSampler(train_set), **kwargs)
    test_loader = DataLoader(test_set, batch_size=args.test_batch_size, shuffle=False, **kwargs)

    model = Net(args.dropout).to(device)
    numpy_init_(model, args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    history, evals = [], []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, writer, history)
        evals.append(test(model, device, test_loader))
        scheduler.step()
    if writer is not None:
        writer.add_scalar("test/loss", evals[-1][0], args.epochs)
        writer.close()

    # the "infinite" loader of many training loops: sampled with replacement, drawn lazily
    forever = DataLoader(train_set, batch_size=8,
                         sampler=RandomSampler(train_set, replacement=True, num_samples=int(1e10)))
    batches = iter(forever)
    shapes = [list(next(batches)[0].shape) for _ in range(3)]

    torch.save(model.state_dict(), "digits_cnn.pt")
    restored = Net(args.dropout).to(device)
    restored.load_state_dict(torch.load("digits_cnn.pt"))
    metrics = {
        "losses": history, "evals": evals, "restored_eval": test(restored, device, test_loader),
        "lr": optimizer.param_groups[0]["lr"], "shapes": shapes, "num_batches": len(forever),
        "device": str(device), "bn_batches": int(model.bn1.num_batches_tracked),
        "events": bool(args.logdir) and any(f.startswith("events.out.tfevents") for f in os.listdir(args.logdir)),
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(metrics, f)


if __name__ == "__main__":
    main()
