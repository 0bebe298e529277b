"""Per-call cost of ``F.cross_entropy`` (forward, forward + backward) against PyTorch eager.

The shapes of the issue-13 workloads: (1, 5) per tree node (``recnn_lookup``), (32, 10) a
small batch, (20, 5001) one sentence of the LSTM language model (``rnnlm``).  CPU time of this
thread (``time.thread_time``: the shared machine's other jobs do not count), dyngraph and
PyTorch alternated round by round; per call, the minimum and the median over the rounds, and
the median of the per-round ratios.

    .venv/bin/python benchmarks/loss_path.py --rounds 9
    .venv/bin/python benchmarks/loss_path.py --dtype float64 --only 20x5001
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPES = {"1x5": ((1, 5), 3000), "32x10": ((32, 10), 1500), "20x5001": ((20, 5001), 100)}


def _per_call(fn, n):
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn()
    return (time.thread_time_ns() - t0) / n / 1e3


def _calls(lib, F, x, t, grad):
    xt = lib.tensor(x, requires_grad=True)
    tt = lib.tensor(t)
    if grad:
        def fwd_bwd():
            F.cross_entropy(xt, tt).backward()
        return fwd_bwd

    def fwd():
        return F.cross_entropy(xt, tt)
    return fwd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--only", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES))
    args = ap.parse_args(argv)

    import torch

    import dyngraph as dg
    import dyngraph.nn.functional as F

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"cross_entropy per call, us (CPU time), {args.dtype}: min / median of {args.rounds} "
          "rounds; ratio = median of per-round ratios dyngraph / torch")
    for key in args.only.split(","):
        (shape, n) = SHAPES[key]
        x = rng.standard_normal(shape).astype(args.dtype)
        t = rng.integers(0, shape[1], shape[0])
        for label, grad in (("fwd", False), ("fwd+bwd", True)):
            fd = _calls(dg, F, x, t, grad)
            ft = _calls(torch, torch.nn.functional, x, t, grad)
            fd(), ft()  # warm-up
            d, p = [], []
            for r in range(args.rounds):
                pair = ((d, fd), (p, ft)) if r % 2 == 0 else ((p, ft), (d, fd))
                for out, fn in pair:
                    out.append(_per_call(fn, n))
            ratios = [a / b for a, b in zip(d, p, strict=True)]
            print(f"{key:8s} {label:8s} dyngraph {min(d):7.1f} / {statistics.median(d):7.1f}   "
                  f"torch {min(p):7.1f} / {statistics.median(p):7.1f}   "
                  f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
