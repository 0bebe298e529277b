"""Compiled (captured) execution vs eager dyngraph, PyTorch eager and hand-written NumPy.

Run:  .venv/bin/python benchmarks/compile.py [--rounds 15] [--only chain,mlp,cnn]

Workloads (float32, one thread, one process; implementations are interleaved
round by round and the median per call is reported):

- chain: ``x = tanh(x @ W)`` 25 times on 8x8 with one shared W, then
  ``sum().backward()`` -- framework overhead;
- mlp:   one SGD training step of a 784-512-512-10 ReLU MLP, batch 128,
  cross-entropy loss (zero_grad, forward, backward, optimizer step);
- cnn:   one Adam training step of a small CNN (conv 1->16, pool, conv 16->32,
  pool, linear 128->10) on 64 8x8 images.

"compiled" is ``dg.compile`` of the whole step (forward, backward and the
optimizer update captured once, then replayed as one generated function).
"capture" is the first call of the compiled step (tracing + passes + codegen).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

import dyngraph as dg
from dyngraph import nn
from dyngraph.nn import functional as F


def measure(impls: dict, rounds: int, inner: int) -> dict:
    """Median microseconds per call of each implementation, interleaved by round."""
    for fn in impls.values():
        fn()
    samples = {k: [] for k in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - t0) / inner * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def first_call_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


# ---------------------------------------------------------------------------
def chain_bench(rounds):
    import torch

    depth, n = 25, 8
    rng = np.random.default_rng(0)
    w_np = (rng.standard_normal((n, n)) * 0.3).astype(np.float32)
    x_np = rng.standard_normal((n, n)).astype(np.float32)
    w = dg.tensor(w_np, requires_grad=True)
    x = dg.tensor(x_np)

    def step():
        w.grad = None
        h = x
        for _ in range(depth):
            h = (h @ w).tanh()
        h.sum().backward()

    compiled = dg.compile(step)
    wt = torch.tensor(w_np, requires_grad=True)
    xt = torch.tensor(x_np)

    def torch_step():
        wt.grad = None
        h = xt
        for _ in range(depth):
            h = torch.tanh(h @ wt)
        h.sum().backward()

    def numpy_step():
        hs = [x_np]
        h = x_np
        for _ in range(depth):
            h = np.tanh(h @ w_np)
            hs.append(h)
        g = np.ones_like(h)
        gw = np.zeros_like(w_np)
        for i in range(depth, 0, -1):
            g = g * (1 - hs[i] * hs[i])
            gw += hs[i - 1].T @ g
            g = g @ w_np.T
        return gw

    cap = first_call_ms(compiled)
    compiled()
    np.testing.assert_allclose(w.grad.numpy(), numpy_step(), rtol=1e-4, atol=1e-5)
    res = measure({"dyngraph eager": step, "dyngraph compiled": compiled, "torch eager": torch_step,
                   "numpy": numpy_step}, rounds, 200)
    return res, cap


def mlp_bench(rounds):
    import torch

    rng = np.random.default_rng(1)
    sizes = [784, 512, 512, 10]
    ws = [(rng.standard_normal((o, i)) * np.sqrt(2.0 / i)).astype(np.float32)
          for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
    bs = [np.zeros(o, np.float32) for o in sizes[1:]]
    x_np = rng.standard_normal((128, 784)).astype(np.float32)
    y_np = rng.integers(0, 10, 128)
    lr = 1e-3

    def build(lib, mod):
        layers = []
        for w, b in zip(ws, bs, strict=True):
            lin = mod.Linear(w.shape[1], w.shape[0])
            with lib.no_grad():
                lin.weight.copy_(lib.tensor(w))
                lin.bias.copy_(lib.tensor(b))
            layers += [lin, mod.ReLU()]
        return mod.Sequential(*layers[:-1])

    m = build(dg, nn)
    opt = dg.optim.SGD(m.parameters(), lr=lr)
    x, y = dg.tensor(x_np), dg.tensor(y_np)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = dg.compile(step)
    mt = build(torch, torch.nn)
    optt = torch.optim.SGD(mt.parameters(), lr=lr)
    xt, yt = torch.tensor(x_np), torch.tensor(y_np)

    def torch_step():
        optt.zero_grad()
        loss = torch.nn.functional.cross_entropy(mt(xt), yt)
        loss.backward()
        optt.step()

    W = [w.copy() for w in ws]
    B = [b.copy() for b in bs]

    def numpy_step():
        hs = [x_np]
        h = x_np
        for i in range(3):
            h = h @ W[i].T + B[i]
            if i < 2:
                h = np.maximum(h, 0)
            hs.append(h)
        z = h - h.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        p[np.arange(128), y_np] -= 1
        g = p / 128
        for i in range(2, -1, -1):
            gw = g.T @ hs[i]
            gb = g.sum(0)
            if i:
                g = (g @ W[i]) * (hs[i] > 0)
            W[i] -= lr * gw
            B[i] -= lr * gb

    cap = first_call_ms(compiled)
    res = measure({"dyngraph eager": step, "dyngraph compiled": compiled, "torch eager": torch_step,
                   "numpy": numpy_step}, rounds, 5)
    return res, cap


def cnn_bench(rounds):
    import torch

    rng = np.random.default_rng(2)
    x_np = rng.random((64, 1, 8, 8)).astype(np.float32)
    y_np = rng.integers(0, 10, 64)

    def build(mod):
        return mod.Sequential(mod.Conv2d(1, 16, 3, padding=1), mod.ReLU(), mod.MaxPool2d(2),
                              mod.Conv2d(16, 32, 3, padding=1), mod.ReLU(), mod.MaxPool2d(2),
                              mod.Flatten(), mod.Linear(128, 10))

    dg.manual_seed(0)
    m = build(nn)
    opt = dg.optim.Adam(m.parameters(), lr=1e-3)
    x, y = dg.tensor(x_np), dg.tensor(y_np)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = dg.compile(step)
    mt = build(torch.nn)
    optt = torch.optim.Adam(mt.parameters(), lr=1e-3)
    xt, yt = torch.tensor(x_np), torch.tensor(y_np)

    def torch_step():
        optt.zero_grad()
        loss = torch.nn.functional.cross_entropy(mt(xt), yt)
        loss.backward()
        optt.step()

    cap = first_call_ms(compiled)
    res = measure({"dyngraph eager": step, "dyngraph compiled": compiled, "torch eager": torch_step},
                  rounds, 10)
    return res, cap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="chain,mlp,cnn")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    benches = {"chain": chain_bench, "mlp": mlp_bench, "cnn": cnn_bench}
    for name in args.only.split(","):
        res, cap = benches[name](args.rounds)
        print(f"\n{name}: median us per step (capture: first compiled call {cap:.1f} ms)")
        comp = res["dyngraph compiled"]
        for impl, us in res.items():
            print(f"  {impl:18s} {us:10.1f} us   compiled/this = {comp / us:5.2f}")


if __name__ == "__main__":
    main()
