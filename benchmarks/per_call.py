"""Per-call cost of the ops dynamic models call most, dyngraph vs PyTorch (issue 13).

Each op is called on small float32 (or ``--f64``) tensors that require grad, so every call
records a graph node, as in a training forward.  dyngraph and PyTorch alternate per op and
round; each figure is the minimum over rounds of the mean CPU time (``time.process_time``)
of ``--calls`` calls, in microseconds; the ratio is dyngraph / PyTorch.  The minimum filters
out other jobs on a shared machine; compare two trees by alternating processes, e.g.::

    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/per_call.py --rounds 15 --calls 600
    .venv/bin/python benchmarks/per_call.py --rounds 15 --calls 600

``--only 'cat([a,b]);stack(4)'`` picks ops (names as printed, separated by ``;``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import dyngraph as dg


def _tensors(T, f64: bool) -> dict:
    rng = np.random.default_rng(0)
    dt = np.float64 if f64 else np.float32

    def P(*shape):
        return T.tensor(rng.standard_normal(shape).astype(dt), requires_grad=True)

    lin, emb = T.nn.Linear(128, 128), T.nn.Embedding(100, 128)
    if f64:
        lin, emb = lin.double(), emb.double()
    # mpnn_step's shapes (benchmarks/dynamic_models.py): 34 nodes, 68 edges, H = 16
    gru = T.nn.GRUCell(16, 16)
    if f64:
        gru = gru.double()
    mpnn = {"mh": P(34, 16), "mW": P(68, 16, 16), "mmsg": P(68, 16), "mcol": P(68, 16, 1), "gru": gru,
            "msrc": T.tensor(rng.integers(0, 34, 68)), "mdst": T.tensor(rng.integers(0, 34, 68)),
            "mbatch": T.tensor(np.sort(rng.integers(0, 4, 34)))}
    return {**mpnn, "a": P(128), "b": P(128), "x": P(10, 128), "row": P(1, 128), "W": P(128, 256),
            "c": P(256), "g": P(1, 96), "lin": lin, "emb": emb, "idx": T.tensor([3]),
            "four": [P(128) for _ in range(4)]}


# name -> (T, tensors) -> a function of no arguments making one call
OPS = {
    "a*b": lambda T, d: (lambda a=d["a"], b=d["b"]: a * b),
    "a+b": lambda T, d: (lambda a=d["a"], b=d["b"]: a + b),
    "T.add(a,b)": lambda T, d: (lambda a=d["a"], b=d["b"], f=T.add: f(a, b)),
    "T.tanh(a)": lambda T, d: (lambda a=d["a"], f=T.tanh: f(a)),
    "T.sigmoid(a)": lambda T, d: (lambda a=d["a"], f=T.sigmoid: f(a)),
    "T.relu(a)": lambda T, d: (lambda a=d["a"], f=T.relu: f(a)),
    "x[3]": lambda T, d: (lambda x=d["x"]: x[3]),
    "x[k:k+1]": lambda T, d: (lambda x=d["x"], k=4: x[k:k + 1]),
    "x[:, 0]": lambda T, d: (lambda x=d["x"]: x[:, 0]),
    "a.unsqueeze(0)": lambda T, d: (lambda a=d["a"]: a.unsqueeze(0)),
    "row.squeeze(0)": lambda T, d: (lambda r=d["row"]: r.squeeze(0)),
    "x.view(-1)": lambda T, d: (lambda x=d["x"]: x.view(-1)),
    "x.view(5,256)": lambda T, d: (lambda x=d["x"]: x.view(5, 256)),
    "cat([a,b])": lambda T, d: (lambda a=d["a"], b=d["b"], f=T.cat: f([a, b])),
    "cat(rows,1)": lambda T, d: (lambda r=d["row"], f=T.cat: f([r, r], dim=1)),
    "stack(4)": lambda T, d: (lambda xs=d["four"], f=T.stack: f(xs)),
    "chunk(g,3,-1)": lambda T, d: (lambda g=d["g"], f=T.chunk: f(g, 3, dim=-1)),
    "x.sum(0)": lambda T, d: (lambda x=d["x"]: x.sum(0)),
    "x.sum()": lambda T, d: (lambda x=d["x"]: x.sum()),
    "W@c": lambda T, d: (lambda W=d["W"], c=d["c"]: W @ c),
    "lin(row)": lambda T, d: (lambda m=d["lin"], r=d["row"]: m(r)),
    "emb(idx)": lambda T, d: (lambda m=d["emb"], i=d["idx"]: m(i)),
    "tensor([3])": lambda T, d: (lambda f=T.tensor: f([3])),
    "softmax(row,-1)": lambda T, d: (lambda r=d["row"], f=T.softmax: f(r, dim=-1)),
    # the mpnn row's forward ops (run with --f64, as the row does)
    "h[src]": lambda T, d: (lambda h=d["mh"], i=d["msrc"]: h[i]),
    "msg.unsqueeze(-1)": lambda T, d: (lambda m=d["mmsg"]: m.unsqueeze(-1)),
    "bmm(W,col)": lambda T, d: (lambda W=d["mW"], c=d["mcol"], f=T.bmm: f(W, c)),
    "col.squeeze(-1)": lambda T, d: (lambda c=d["mcol"]: c.squeeze(-1)),
    "zeros_like(h)": lambda T, d: (lambda h=d["mh"], f=T.zeros_like: f(h)),
    "dst.unsq.expand": lambda T, d: (lambda i=d["mdst"]: i.unsqueeze(1).expand(-1, 16)),
    "scatter_add_": lambda T, d: (lambda h=d["mh"], i=d["mdst"].unsqueeze(1).expand(-1, 16), m=d["mmsg"],
                                  f=T.zeros_like: f(h).scatter_add_(0, i, m)),
    "gru(agg,h)": lambda T, d: (lambda g=d["gru"], h=d["mh"], a=d["mmsg"][:34]: g(a, h)),
    "index_add": lambda T, d: (lambda h=d["mh"], i=d["mbatch"], f=T.zeros, dt=d["mh"].dtype:
                               f(4, 16, dtype=dt).index_add(0, i, h)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--only", default=None, help="op names separated by ';'")
    ap.add_argument("--f64", action="store_true", help="float64 tensors")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = list(OPS) if args.only is None else args.only.split(";")
    dd, dt = _tensors(dg, args.f64), _tensors(torch, args.f64)
    fns = {n: (OPS[n](dg, dd), OPS[n](torch, dt)) for n in names}
    best = {n: [float("inf"), float("inf")] for n in names}
    clock = time.process_time
    for _ in range(args.rounds):
        for n in names:
            for k in (0, 1):
                f = fns[n][k]
                f()
                t0 = clock()
                for _ in range(args.calls):
                    f()
                best[n][k] = min(best[n][k], (clock() - t0) / args.calls * 1e6)
    print(f"{'op':16s} {'dyngraph us':>11s} {'torch us':>9s} {'ratio':>6s}")
    for n in names:
        a, b = best[n]
        print(f"{n:16s} {a:11.2f} {b:9.2f} {a / b:5.2f}x")


if __name__ == "__main__":
    main()
