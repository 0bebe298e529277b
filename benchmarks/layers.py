"""Layer benchmarks: Conv2d, LSTM and MultiheadAttention fwd+bwd, dyngraph vs PyTorch.

Run:  .venv/bin/python benchmarks/layers.py  [--repeat 15] [--threads 1] [--only conv,lstm,mha]
      .venv/bin/python benchmarks/layers.py --lstm-parts  (the LSTM row's phases alone)

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


def lstm_parts(np, rounds: int, clock) -> None:
    """The LSTM row's step taken apart (dyngraph's kernel path on arrays, hot loops): each
    phase alone, CPU ms, median and range of ``rounds`` runs (docs/performance.md, "GEMM-bound
    steps")."""
    from dyngraph.ops import rnn

    k = rnn._K
    if k is None:
        print("the compiled kernels are not built (or DYNGRAPH_PURE_PYTHON is set)")
        return
    rng = np.random.default_rng(0)
    t_, b_, i_, h_ = 50, 32, 128, 256
    f = np.float32
    x = rng.standard_normal((t_ * b_, i_)).astype(f)
    wih = (rng.standard_normal((4 * h_, i_)) * 0.1).astype(f)
    whh = (rng.standard_normal((4 * h_, h_)) * 0.06).astype(f)
    bias = rng.standard_normal(4 * h_).astype(f)
    h0, c0, sizes = np.zeros((b_, h_), f), np.zeros((b_, h_), f), (b_,) * t_
    xw = np.dot(x, wih.T) + bias
    out = rnn._lstm_forward_k(xw, h0, c0, whh, None, sizes, False)
    ghs = np.broadcast_to(np.ones((1, 1), f), (t_ * b_, h_))   # the gradient of out.sum()
    dgates = rnn._lstm_backward_k([ghs, None, None], out, xw, h0, c0, whh, None, sizes, False)[0]
    hbuf, p2, prod_t, dh = h0.copy(), np.empty((b_, 4 * h_), f), np.empty((4 * h_, b_), f), np.empty((b_, h_), f)
    acts, hs, cs, dc, dgb = (np.empty(xw.shape, f), np.empty((t_ * b_, h_), f), np.empty((t_ * b_, h_), f),
                             np.zeros((b_, h_), f), np.empty_like(dgates))
    packed = getattr(k, "packed_gemm", False)
    bp, bpb = (rnn._packed(whh), rnn._packed(whh.T)) if packed else (None, None)

    def steps(fn):
        return lambda: [fn(t) for t in range(t_)]

    def bwd_gates():
        for t in range(t_ - 1, -1, -1):
            sl = slice(t * b_, t * b_ + b_)
            cp = c0 if t == 0 else out[4][(t - 1) * b_:t * b_]
            k.lstm_backward(dh, ghs[sl], dc, out[3][sl], out[4][sl], cp, dgb[sl], dc)

    cases = {
        "layer forward (kernel path)": lambda: rnn._lstm_forward_k(xw, h0, c0, whh, None, sizes, False),
        "layer backward (kernel path)": lambda: rnn._lstm_backward_k([ghs, None, None], out, xw, h0, c0, whh,
                                                                     None, sizes, False),
        "forward products, OpenBLAS W_hh @ h.T (50)": steps(lambda t: np.matmul(whh, hbuf.T, out=prod_t)),
        "backward products, OpenBLAS dgates @ W_hh (50)": steps(
            lambda t: np.matmul(dgates[t * b_:(t + 1) * b_], whh, out=dh)),
        "forward gates alone (lstm_sequence, no product)": lambda: k.lstm_sequence(
            (lambda a, b, out=None: None, hbuf, hbuf, p2), p2, xw, c0, acts, hs, cs, hbuf, False),
        "backward gates alone (50 lstm_backward)": bwd_gates,
        "input projection x @ W_ih^T": lambda: np.dot(x, wih.T),
        "its bias add": lambda: np.add(xw, bias, out=acts),
        "dW_hh (2 GEMMs)": lambda: (dgates[b_:].T @ out[0][:-b_], dgates[:b_].T @ h0),
        "dx = dgates @ W_ih": lambda: dgates @ wih,
        "dW_ih = dgates^T @ x": lambda: dgates.T @ x,
        "bias gradient (sum of dgates)": lambda: np.add.reduce(dgates, axis=0),
    }
    if packed:
        cases["forward products, packed (50)"] = steps(lambda t: k.gemm_packed(hbuf, bp, p2))
        cases["backward products, packed (50)"] = steps(lambda t: k.gemm_packed(dgates[t * b_:(t + 1) * b_], bpb, dh))
        cases["packing W_hh and W_hh^T"] = lambda: (rnn._packed(whh), rnn._packed(whh.T))
    res = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = clock()
            fn()
            res[name].append((clock() - t0) * 1e3)
    print(f"{'LSTM 128->256, 50 x 32, parts alone':50s} {'median ms':>10s}  range")
    for name, v in res.items():
        print(f"{name:50s} {statistics.median(v):10.2f}  {min(v):.2f}-{max(v):.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="conv,lstm,mha")
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="CPU time of the process (default with one thread: robust to other jobs) "
                         "or the wall clock (default with several threads)")
    ap.add_argument("--lstm-parts", action="store_true",
                    help="instead: the LSTM row's phases alone (dyngraph's kernel path, hot loops)")
    args = ap.parse_args(argv)
    _setup_threads(args.threads)
    clock = time.process_time if (args.clock or ("cpu" if args.threads == 1 else "wall")) == "cpu" \
        else time.perf_counter
    import numpy as np
    import torch

    import dyngraph as dg

    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} repeat={args.repeat} torch={torch.__version__} numpy={np.__version__}")
    if args.lstm_parts:
        lstm_parts(np, args.repeat, clock)
        return 0
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
