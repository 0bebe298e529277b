"""A small CIFAR-style ResNet: ``BasicBlock`` with a 1x1 downsample shortcut, ``BatchNorm2d``,
``kaiming_normal_(mode="fan_out")`` in ``_initialize_weights``, SGD momentum + weight decay +
``MultiStepLR``/``CosineAnnealingLR``, ``torch.backends.cudnn.benchmark = True``, a
``@torch.compile(disable=...)`` training step (torch runs it with
``--no-compile``: inductor on CPU is not run-to-run reproducible), ``model.eval()`` accuracy with ``argmax`` under
``torch.no_grad()``, ``AverageMeter`` bookkeeping, best-checkpoint ``state_dict`` round trip.

    python s14_resnet_cifar_style.py --epochs 2 --sched multistep --out resnet.json
"""

import argparse
import copy
import json
import os

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        out = F.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=4, width=4):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, width * 2, num_blocks[1], stride=2)
        self.linear = nn.Linear(width * 2 * block.expansion, num_classes)
        self._initialize_weights()

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.linear(out)


def ResNetTiny():
    return ResNet(BasicBlock, [1, 2])


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def synthetic_images(rng, n):
    x = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
    y = (x[:, 0, :4].mean((1, 2)) > 0).astype(np.int64) * 2 + (x[:, 1, :, :4].mean((1, 2)) > 0)
    x[:, 2] += y[:, None, None] * 0.5
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def main():
    parser = argparse.ArgumentParser(description="PyTorch CIFAR-style Training")
    parser.add_argument("--lr", default=0.1, type=float, help="learning rate")
    parser.add_argument("--epochs", default=2, type=int)
    parser.add_argument("--sched", default="multistep", choices=["multistep", "cosine"])
    parser.add_argument("--resume", "-r", action="store_true", help="resume from checkpoint")
    parser.add_argument("--no-compile", action="store_true", help="run the training step eagerly")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    best_acc = 0
    start_epoch = 0
    rng = np.random.default_rng(0)
    xtr, ytr = synthetic_images(rng, 48)
    xte, yte = synthetic_images(rng, 24)
    trainloader = DataLoader(TensorDataset(xtr, ytr), batch_size=12, shuffle=False, num_workers=0)
    testloader = DataLoader(TensorDataset(xte, yte), batch_size=8, shuffle=False, num_workers=0)

    print("==> Building model..")
    net = ResNetTiny()
    init = np.random.default_rng(1)
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(init.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
        net.linear.bias.zero_()
    net = net.to(device)
    if device == "cuda":
        net = torch.nn.DataParallel(net)
        cudnn.benchmark = True
    cudnn.benchmark = True

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    if args.sched == "multistep":
        scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
    else:
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)

    @torch.compile(disable=args.no_compile)
    def train_step(inputs, targets):
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        return outputs, loss

    history = []

    def train(epoch):
        print("\nEpoch: %d" % epoch)  # noqa: UP031
        net.train()
        losses = AverageMeter()
        correct = 0
        total = 0
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs, loss = train_step(inputs, targets)
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), inputs.size(0))
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
            print(batch_idx, len(trainloader), "Loss: %.3f | Acc: %.3f%% (%d/%d)"  # noqa: UP031
                  % (losses.avg, 100. * correct / total, correct, total))
        history.append({"loss": losses.avg, "correct": correct, "lr": optimizer.param_groups[0]["lr"]})

    def test(epoch):
        nonlocal best_acc
        net.eval()
        test_loss = 0
        correct = 0
        total = 0
        with torch.no_grad():
            for batch_idx, (inputs, targets) in enumerate(testloader):  # noqa: B007
                inputs, targets = inputs.to(device), targets.to(device)
                outputs = net(inputs)
                loss = criterion(outputs, targets)
                test_loss += loss.item()
                predicted = outputs.argmax(dim=1)
                total += targets.size(0)
                correct += (predicted == targets).sum().item()
        acc = 100. * correct / total
        history[-1].update(test_loss=test_loss / (batch_idx + 1), acc=acc)
        if acc >= best_acc:
            print("Saving..")
            state = {"net": net.state_dict(), "acc": acc, "epoch": epoch}
            if not os.path.isdir("checkpoint"):
                os.mkdir("checkpoint")
            torch.save(state, "./checkpoint/ckpt.pth")
            best_acc = acc

    for epoch in range(start_epoch, start_epoch + args.epochs):
        train(epoch)
        test(epoch)
        scheduler.step()

    checkpoint = torch.load("./checkpoint/ckpt.pth")
    fresh = ResNetTiny().to(device)
    fresh.load_state_dict(checkpoint["net"])
    fresh.eval()
    snapshot = copy.deepcopy(net.state_dict())
    with torch.no_grad():
        logits = fresh(xte[:4])
    result = {"history": history, "best_acc": checkpoint["acc"], "best_epoch": checkpoint["epoch"],
              "logits": logits.tolist(), "keys": list(snapshot.keys()),
              "nbt": snapshot["bn1.num_batches_tracked"].item(),
              "running_mean": snapshot["layer2.0.bn2.running_mean"].tolist(),
              "last_lr": scheduler.get_last_lr()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
