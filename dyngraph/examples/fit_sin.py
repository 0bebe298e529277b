"""Fit a cubic polynomial to sin(x) with plain autograd (no nn, no optim).

    python -m dyngraph.examples.fit_sin [--steps 2000]

Each step builds a fresh graph; ``loss.backward()`` fills ``.grad`` of the four
coefficients, which are then updated by hand under ``no_grad``.
"""

from __future__ import annotations

import argparse
import math

import dyngraph as dg


def fit(steps: int = 2000, lr: float = 1e-6, log_every: int = 400, seed: int = 0) -> float:
    dg.manual_seed(seed)
    x = dg.linspace(-math.pi, math.pi, 2000, dtype=dg.float64)
    y = dg.sin(x)
    a, b, c, d = (dg.randn((), dtype=dg.float64, requires_grad=True) for _ in range(4))
    loss_value = float("nan")
    for step in range(steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = ((y_pred - y) ** 2).sum()
        loss_value = loss.item()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {loss_value:12.4f}")
        loss.backward()
        with dg.no_grad():
            for p in (a, b, c, d):
                p -= lr * p.grad
                p.grad = None
    print(f"result: y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + {d.item():.4f} x^3")
    return loss_value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    fit(args.steps)


if __name__ == "__main__":
    main()
