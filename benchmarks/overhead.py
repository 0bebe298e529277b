"""Framework overhead: a chain of tiny ops, dyngraph vs PyTorch eager vs hand-written NumPy.

Run:  .venv/bin/python benchmarks/overhead.py  [--repeat 200]

Workloads (one thread each, one process):
- chain: ``x = tanh(x @ W)`` 25 times on 8x8 float32, then ``sum().backward()``;
- add:   forward of ``a + b`` on 8x8 tensors that require grad.
Prints medians (microseconds) and ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

DEPTH, N = 25, 8


def _median_us(fn, repeat: int, inner: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(samples)


def chain_numpy(x0, W):
    """Hand-written forward and backward of the chain."""
    hs = [x0]
    h = x0
    for _ in range(DEPTH):
        h = np.tanh(h @ W)
        hs.append(h)
    g = np.ones_like(h)
    gW = np.zeros_like(W)
    for i in range(DEPTH, 0, -1):
        g = g * (1 - hs[i] * hs[i])
        gW += hs[i - 1].T @ g
        g = g @ W.T
    return gW


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=100)
    args = ap.parse_args()

    import torch

    import dyngraph as dg

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((N, N)).astype(np.float32)
    W0 = (rng.standard_normal((N, N)) * 0.3).astype(np.float32)

    Wd = dg.tensor(W0, requires_grad=True)
    xd = dg.tensor(x0)

    def chain_dg():
        h = xd
        for _ in range(DEPTH):
            h = (h @ Wd).tanh()
        h.sum().backward()
        Wd.grad = None

    Wt = torch.tensor(W0, requires_grad=True)
    xt = torch.tensor(x0)

    def chain_torch():
        h = xt
        for _ in range(DEPTH):
            h = torch.tanh(h @ Wt)
        h.sum().backward()
        Wt.grad = None

    def chain_np():
        chain_numpy(x0, W0)

    # correctness check before timing
    h = xd
    for _ in range(DEPTH):
        h = (h @ Wd).tanh()
    h.sum().backward()
    np.testing.assert_allclose(Wd.grad.numpy(), chain_numpy(x0, W0), rtol=1e-4, atol=1e-5)
    Wd.grad = None

    ad, bd = dg.randn(N, N, requires_grad=True), dg.randn(N, N, requires_grad=True)
    at, bt = torch.randn(N, N, requires_grad=True), torch.randn(N, N, requires_grad=True)

    res = {
        "chain dyngraph": _median_us(chain_dg, args.repeat, 10),
        "chain torch": _median_us(chain_torch, args.repeat, 10),
        "chain numpy": _median_us(chain_np, args.repeat, 10),
        "add dyngraph": _median_us(lambda: ad + bd, args.repeat, 1000),
        "add torch": _median_us(lambda: at + bt, args.repeat, 1000),
    }
    for k, v in res.items():
        print(f"{k:18s} {v:9.2f} us")
    print(f"chain: dyngraph/torch = {res['chain dyngraph'] / res['chain torch']:.2f}x  "
          f"(goal <= 0.60)")
    print(f"chain: dyngraph/numpy = {res['chain dyngraph'] / res['chain numpy']:.2f}x  "
          f"(goal <= 2.00)")
    print(f"add:   dyngraph/torch = {res['add dyngraph'] / res['add torch']:.2f}x  (goal <= 1.00)")


if __name__ == "__main__":
    main()
