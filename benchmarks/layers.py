"""Layer benchmarks: Conv2d, LSTM and MultiheadAttention fwd+bwd, dyngraph vs PyTorch.

Run:  .venv/bin/python benchmarks/layers.py  [--repeat 15] [--threads 1] [--only conv,lstm,mha]

Workloads (float32, one process, the same BLAS/OpenMP thread count for both):
- conv: ``nn.Conv2d(32, 64, 3, padding=1)`` on a (64, 32, 28, 28) batch;
- lstm: ``nn.LSTM(128, 256)`` over 50 steps, batch 32;
- mha:  ``nn.MultiheadAttention(256, 4, batch_first=True)`` self-attention, batch 16, 64 tokens.
Each step is forward, ``sum()`` of the output, backward (input and parameter
gradients).  The two frameworks alternate run by run, so load from other
processes hits both alike; medians and the ratio dyngraph / PyTorch are printed
(below 1.0: dyngraph is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _setup_threads(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


def _workloads(torch, dg, np, only):
    rng = np.random.default_rng(0)

    def sync(tmod, dmod):
        dmod.load_state_dict({k: dg.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})

    def pair(tmod, dmod, x, call):
        sync(tmod, dmod)
        xt = torch.tensor(x, requires_grad=True)
        xd = dg.tensor(x).requires_grad_()

        def t_step():
            tmod.zero_grad()
            xt.grad = None
            call(tmod, xt).sum().backward()

        def d_step():
            dmod.zero_grad()
            xd.grad = None
            call(dmod, xd).sum().backward()
        return t_step, d_step

    out = {}
    if "conv" in only:
        x = rng.standard_normal((64, 32, 28, 28)).astype(np.float32)
        out["Conv2d 32->64 3x3, 64x28x28"] = pair(
            torch.nn.Conv2d(32, 64, 3, padding=1), dg.nn.Conv2d(32, 64, 3, padding=1), x,
            lambda m, v: m(v))
    if "lstm" in only:
        x = rng.standard_normal((50, 32, 128)).astype(np.float32)
        out["LSTM 128->256, 50 steps, batch 32"] = pair(
            torch.nn.LSTM(128, 256), dg.nn.LSTM(128, 256), x, lambda m, v: m(v)[0])
    if "mha" in only:
        x = rng.standard_normal((16, 64, 256)).astype(np.float32)
        out["MultiheadAttention 256/4 heads, 16x64"] = pair(
            torch.nn.MultiheadAttention(256, 4, batch_first=True),
            dg.nn.MultiheadAttention(256, 4, batch_first=True), x, lambda m, v: m(v, v, v)[0])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="conv,lstm,mha")
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="CPU time of the process (default with one thread: robust to other jobs) "
                         "or the wall clock (default with several threads)")
    args = ap.parse_args(argv)
    _setup_threads(args.threads)
    clock = time.process_time if (args.clock or ("cpu" if args.threads == 1 else "wall")) == "cpu" \
        else time.perf_counter
    import numpy as np
    import torch

    import dyngraph as dg

    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} repeat={args.repeat} torch={torch.__version__} numpy={np.__version__}")
    print(f"{'workload':40s} {'torch ms':>10s} {'dyngraph ms':>12s} {'ratio':>7s}")
    for name, (t_step, d_step) in _workloads(torch, dg, np, args.only.split(",")).items():
        t_step()
        d_step()
        ts, ds = [], []
        for _ in range(args.repeat):
            t0 = clock()
            t_step()
            t1 = clock()
            d_step()
            t2 = clock()
            ts.append((t1 - t0) * 1e3)
            ds.append((t2 - t1) * 1e3)
        tm, dm = statistics.median(ts), statistics.median(ds)
        print(f"{name:40s} {tm:10.2f} {dm:12.2f} {dm / tm:7.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
