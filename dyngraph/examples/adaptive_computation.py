"""Data-dependent control flow: a classifier that stops computing once it is sure (early exit).

    python -m dyngraph.examples.adaptive_computation [--epochs 15] [--blocks 4]

A stack of residual blocks on the 8x8 digits, with a small classifier head
after every block.  Training supervises every head (so each exit is a usable
classifier).  At inference each input runs blocks only until a head is
confident::

    while probs.max() < threshold and depth < last:   # a Python `while` on a tensor
        depth += 1
        h = blocks[depth](h)
        probs = softmax(heads[depth](h))

Easy digits leave after one block, hard ones go deeper; the script reports
accuracy and the average number of blocks used for several thresholds,
next to always running the full stack.
"""

from __future__ import annotations

import argparse
import time

import dyngraph as dg
from dyngraph import nn
from dyngraph.nn import functional as F


class EarlyExitNet(nn.Module):
    def __init__(self, hidden: int = 64, blocks: int = 4, classes: int = 10):
        super().__init__()
        self.stem = nn.Linear(64, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(blocks))
        self.heads = nn.ModuleList(nn.Linear(hidden, classes) for _ in range(blocks))

    def forward(self, x):
        """Training: the logits of every exit, one per block."""
        h = F.relu(self.stem(x.reshape(x.shape[0], -1)))
        outs = []
        for block, head in zip(self.blocks, self.heads, strict=True):
            h = h + F.relu(block(h))
            outs.append(head(h))
        return outs

    @dg.no_grad()
    def predict(self, x, threshold: float):
        """One sample: (predicted class, blocks used).  Stops at the first confident head."""
        h = F.relu(self.stem(x.reshape(1, -1)))
        depth = 0
        h = h + F.relu(self.blocks[0](h))
        probs = F.softmax(self.heads[0](h), dim=1)
        last = len(self.blocks) - 1
        while probs.max() < threshold and depth < last:  # data-dependent loop
            depth += 1
            h = h + F.relu(self.blocks[depth](h))
            probs = F.softmax(self.heads[depth](h), dim=1)
        return int(probs.argmax()), depth + 1


def train(epochs: int = 15, hidden: int = 64, blocks: int = 4, batch: int = 64, lr: float = 2e-3,
          seed: int = 0, thresholds=(0.5, 0.9, 0.99), limit_test: int | None = None,
          quiet: bool = False) -> dict:
    dg.manual_seed(seed)
    train_set = dg.data.datasets.Digits(split="train")
    test_set = dg.data.datasets.Digits(split="test")
    model = EarlyExitNet(hidden, blocks)
    opt = dg.optim.Adam(model.parameters(), lr=lr)
    loader = dg.data.DataLoader(train_set, batch_size=batch, shuffle=True)
    t0 = time.perf_counter()
    for epoch in range(epochs):
        total, n = 0.0, 0
        for x, y in loader:
            outs = model(x)
            loss = sum(F.cross_entropy(o, y) for o in outs) / len(outs)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            n += len(y)
        if not quiet:
            print(f"epoch {epoch + 1:3d}  loss {total / n:.4f}")
    train_time = time.perf_counter() - t0
    model.eval()
    xs, ys = test_set.data, test_set.targets
    if limit_test is not None:
        xs, ys = xs[:limit_test], ys[:limit_test]
    with dg.no_grad():
        full = model(xs)[-1].argmax(dim=1)
    result = {"full_accuracy": float((full == ys).float().mean()), "blocks": blocks,
              "train_seconds": train_time, "exits": {}}
    for thr in thresholds:
        t1 = time.perf_counter()
        correct, used = 0, 0
        for i in range(xs.shape[0]):
            pred, depth = model.predict(xs[i], thr)
            correct += pred == int(ys[i])
            used += depth
        m = xs.shape[0]
        result["exits"][thr] = {"accuracy": correct / m, "mean_blocks": used / m,
                                "seconds": time.perf_counter() - t1}
    if not quiet:
        print(f"full depth ({blocks} blocks): accuracy {result['full_accuracy']:.3f}")
        for thr, r in result["exits"].items():
            print(f"early exit at confidence {thr:<5}: accuracy {r['accuracy']:.3f}, "
                  f"mean blocks {r['mean_blocks']:.2f} of {blocks}")
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-test", type=int, default=None, help="evaluate on the first N test digits")
    args = ap.parse_args(argv)
    train(args.epochs, args.hidden, args.blocks, seed=args.seed, limit_test=args.limit_test)


if __name__ == "__main__":
    main()
