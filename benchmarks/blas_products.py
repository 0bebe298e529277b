"""Float32 matrix products of dynamic models: NumPy's OpenBLAS, MKL through dyngraph, PyTorch.

The shapes are those of ``linear`` layers (``x @ W.T``, the weight a transposed view) and
of their backward products, at the batch sizes of per-sentence and per-tree models.  One
thread each, the three contenders alternated call by call, medians of ``--repeat`` rounds.
Without ``mkl`` installed (``pip install mkl``) the MKL column is NumPy's again.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/blas_products.py --repeat 200
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from dyngraph.ops import _gemm

# (label, M, K, N, layout): "nt" = a (M, K) @ W.T with W (N, K); "nn" = a (M, K) @ b (K, N)
SHAPES = [
    ("LM output layer x @ W.T", 20, 128, 5001, "nt"),
    ("LM output backward g @ W", 20, 5001, 128, "nn"),
    ("tree gates, 25 nodes, x @ W.T", 25, 128, 640, "nt"),
    ("tree gates, 50 nodes, x @ W.T", 50, 128, 640, "nt"),
    ("LSTM input proj., 32 x 128 -> 1024", 32, 128, 1024, "nt"),
    ("MLP 784 -> 512, batch 128", 128, 784, 512, "nt"),
    ("MLP 512 -> 512, batch 128", 128, 512, 512, "nt"),
    ("MLP weight grad g.T @ x", 512, 128, 784, "tn"),
]


def _operands(m, k, n, layout, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    if layout == "nt":
        return a, rng.standard_normal((n, k)).astype(np.float32).T
    if layout == "tn":
        return rng.standard_normal((k, m)).astype(np.float32).T, rng.standard_normal((k, n)).astype(np.float32)
    return a, rng.standard_normal((k, n)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    _gemm.set_single_thread(True)
    lib = _gemm.library()
    print(f"one thread; MKL: {lib or 'not installed (pip install mkl): the column repeats NumPy'}")
    print(f"{'product':38s} {'M x K x N':>16s} {'OpenBLAS':>9s} {'MKL':>8s} {'torch':>8s}  MKL/torch  OpenBLAS/torch")
    rng = np.random.default_rng(0)
    for label, m, k, n, layout in SHAPES:
        a, b = _operands(m, k, n, layout, rng)
        # PyTorch gets the same layouts: a transposed view where NumPy has one
        ta = torch.from_numpy(np.ascontiguousarray(a.T)).T if layout == "tn" else torch.from_numpy(a)
        tb = torch.from_numpy(np.ascontiguousarray(b.T)).T if layout == "nt" else torch.from_numpy(b)
        np.testing.assert_allclose(_gemm.matmul2d(a, b), a @ b, rtol=1e-3, atol=1e-3)
        calls = (lambda a=a, b=b: np.dot(a, b), lambda a=a, b=b: _gemm.matmul2d(a, b),
                 lambda ta=ta, tb=tb: ta @ tb)
        times = [[], [], []]
        for f in calls:
            f()
        for _ in range(args.repeat):
            for i, f in enumerate(calls):
                t0 = time.perf_counter()
                f()
                times[i].append(time.perf_counter() - t0)
        med = [float(np.median(t)) * 1e6 for t in times]
        print(f"{label:38s} {f'{m}x{k}x{n}':>16s} {med[0]:8.1f}u {med[1]:7.1f}u {med[2]:7.1f}u"
              f"  {med[1] / med[2]:8.2f}x  {med[0] / med[2]:8.2f}x")


if __name__ == "__main__":
    main()
