"""Dynamic depth with weight sharing: each forward pass decides how deep the net is.

    python -m dyngraph.examples.dynamic_depth [--steps 600] [--max-depth 4] [--draw docs/img]

The network has an input layer, ONE hidden layer and an output layer.  On
every forward pass it draws a depth ``k`` (0..max_depth) and applies the same
hidden layer ``k`` times -- ordinary Python ``for`` over a random number.
Autograd differentiates whatever graph that pass produced, so the shared
weights receive the sum of the gradients of all their uses.  It learns
``y = sin(x) + 0.3 x`` on ``[-3, 3]``; the loss falls.

``--draw DIR`` writes two pictures: the graph of a depth-1 and of a depth-3
pass, and the structural difference between them (``dg.viz.diff``).
"""

from __future__ import annotations

import argparse
import os
import random
import time

import dyngraph as dg
from dyngraph import nn


class DynamicNet(nn.Module):
    """input -> relu(hidden)^k -> output, with ``k`` chosen per call."""

    def __init__(self, hidden: int = 32, max_depth: int = 4):
        super().__init__()
        self.inp = nn.Linear(1, hidden)
        self.hidden = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)
        self.max_depth = max_depth

    def forward(self, x, depth: int | None = None):
        if depth is None:
            depth = random.randint(0, self.max_depth)  # decided anew on every pass
        h = dg.relu(self.inp(x))
        for _ in range(depth):  # the same weights, reused `depth` times
            h = dg.relu(self.hidden(h))
        return self.out(h)


def target(x):
    return dg.sin(x) + 0.3 * x


def train(steps: int = 600, hidden: int = 32, max_depth: int = 4, batch: int = 64, lr: float = 3e-3,
          seed: int = 0, log_every: int = 100, quiet: bool = False) -> dict:
    """Train with a random depth per step; return the loss curve and the final loss per depth."""
    random.seed(seed)
    dg.manual_seed(seed)
    model = DynamicNet(hidden, max_depth)
    opt = dg.optim.Adam(model.parameters(), lr=lr)
    losses, depths = [], []
    t0 = time.perf_counter()
    for step in range(steps):
        x = dg.rand(batch, 1) * 6 - 3
        depth = random.randint(0, max_depth)
        loss = nn.functional.mse_loss(model(x, depth), target(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        depths.append(depth)
        if not quiet and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:5d}  depth {depth}  loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - t0
    xs = dg.linspace(-3, 3, 200).reshape(200, 1)
    with dg.no_grad():
        per_depth = {d: nn.functional.mse_loss(model(xs, d), target(xs)).item()
                     for d in range(max_depth + 1)}
    k = max(1, steps // 10)
    result = {"first": sum(losses[:k]) / k, "last": sum(losses[-k:]) / k, "per_depth": per_depth,
              "seconds": elapsed, "model": model, "depths": depths}
    if not quiet:
        print(f"mean loss of the first {k} steps {result['first']:.4f} -> last {k} steps "
              f"{result['last']:.4f}  ({elapsed:.1f}s)")
        print("test loss per depth: " + ", ".join(f"{d}: {v:.4f}" for d, v in per_depth.items()))
    return result


def draw(model: DynamicNet, directory: str) -> list[str]:
    """Render the graphs of a depth-1 and a depth-3 pass and their diff into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    x = dg.linspace(-3, 3, 8).reshape(8, 1)
    with dg.viz.record():
        a = nn.functional.mse_loss(model(x, 1), target(x))
        b = nn.functional.mse_loss(model(x, 3), target(x))
    params = dict(model.named_parameters())
    out = [dg.viz.draw(b, params=params, group_by_module=True).render(
        os.path.join(directory, "dynamic_depth_graph.png"))]
    d = dg.viz.diff(a, b, params=params)
    print(d)
    out.append(d.draw().render(os.path.join(directory, "dynamic_depth_diff.png")))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--max-depth", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draw", metavar="DIR", help="write graph pictures (needs Graphviz `dot`)")
    args = ap.parse_args(argv)
    res = train(args.steps, args.hidden, args.max_depth, seed=args.seed)
    if args.draw:
        for path in draw(res["model"], args.draw):
            print("wrote", path)


if __name__ == "__main__":
    main()

