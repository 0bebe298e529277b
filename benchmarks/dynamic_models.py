"""Dynamic models: time per training step, dyngraph vs PyTorch, in one process.

Run:  .venv/bin/python benchmarks/dynamic_models.py  [--rounds 15]

Workloads (float64, one thread, the same code run with ``T = torch`` and ``T = dyngraph``;
the models are the ones in ``tests/port/p71``, ``p72`` and ``p75``, at a slightly larger size):
- tree_lstm: Child-Sum Tree-LSTM over 8 random trees (recursion in ``forward``, ``stack`` +
  ``sum`` over children), MSE at the root, backward, Adam step;
- seq2seq:   GRU encoder + GRUCell decoder with attention, teacher forcing token by token
  on 5 pairs of length 3..7, backward, Adam step;
- lstm_cells: 6 variable-length sequences (lengths 2..12) one at a time through two stacked
  ``nn.LSTMCell``s (hidden 32) unrolled in Python, final states ``stack``ed, cross-entropy,
  backward, Adam step (``tests/port/p77``);
- mpnn:      message passing over a batch of 4 graphs (edge-conditioned ``bmm`` messages,
  ``scatter_add_``, ``index_add`` pooling, GRUCell update, 3 rounds), backward, Adam step.
Rounds alternate the libraries (same machine load); prints medians (ms) and the median
of the per-round ratios.
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


class _Tree:
    def __init__(self, word, children):
        self.word, self.children = word, children


def _tree(rng, depth, V):
    k = 0 if depth == 0 else int(rng.integers(1, 4))
    return _Tree(int(rng.integers(V)), [_tree(rng, depth - 1, V) for _ in range(k)])


def tree_lstm_step(T):
    """A closure running one training step of a Child-Sum Tree-LSTM."""
    nn, F = T.nn, T.nn.functional
    V, X, H = 20, 16, 32
    rng = np.random.default_rng(0)
    trees = [_tree(rng, 3, V) for _ in range(8)]
    ys = T.from_numpy(rng.standard_normal(len(trees)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, X)
            self.W_iou, self.U_iou = nn.Linear(X, 3 * H), nn.Linear(H, 3 * H, bias=False)
            self.W_f, self.U_f = nn.Linear(X, H), nn.Linear(H, H, bias=False)
            self.out = nn.Linear(H, 1)

        def node(self, t):
            x = self.emb.weight[t.word]
            if t.children:
                hs, cs = zip(*[self.node(c) for c in t.children], strict=True)
                ch, cc = T.stack(hs), T.stack(cs)
            else:
                ch = cc = x.new_zeros(1, H)
            i, o, u = T.chunk(self.W_iou(x) + self.U_iou(ch.sum(0)), 3, dim=-1)
            f = T.sigmoid(self.W_f(x).unsqueeze(0) + self.U_f(ch))
            c = T.sigmoid(i) * T.tanh(u) + (f * cc).sum(0)
            return T.sigmoid(o) * T.tanh(c), c

    model = Model().double()
    opt = T.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = sum(F.mse_loss(model.out(model.node(t)[0]).squeeze(-1), y) for t, y in zip(trees, ys))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def seq2seq_step(T):
    """A closure running one teacher-forced training step of a GRUCell seq2seq."""
    nn, F = T.nn, T.nn.functional
    V, H = 16, 32
    rng = np.random.default_rng(1)
    pairs = [(T.from_numpy(rng.integers(2, V, n)), rng.integers(2, V, n).tolist()) for n in (3, 4, 5, 6, 7)]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.enc = nn.GRU(H, H)
            self.dec = nn.GRUCell(H, H)
            self.out = nn.Linear(2 * H, V)

        def loss(self, src, tgt):
            enc, h = self.enc(self.emb(src).unsqueeze(1))
            enc, h = enc[:, 0], h[0]
            token, total = 0, 0
            for t in tgt:
                h = self.dec(self.emb(T.tensor([token])), h)
                ctx = F.softmax(enc @ h[0], dim=0) @ enc
                logp = F.log_softmax(self.out(T.cat([h[0], ctx])), dim=-1)
                total = total - logp[t]
                token = t
            return total / len(tgt)

    model = Model().double()
    opt = T.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = sum(model.loss(s, t) for s, t in pairs)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def mpnn_step(T):
    """A closure running one training step of an edge-conditioned MPNN on 4 graphs."""
    nn, F = T.nn, T.nn.functional
    Fn, Fe, H = 8, 4, 16
    rng = np.random.default_rng(2)
    xs, eis, eas, batch, off = [], [], [], [], 0
    for i, n in enumerate((6, 9, 7, 12)):
        m = 2 * n
        xs.append(rng.standard_normal((n, Fn)))
        eis.append(rng.integers(0, n, (2, m)) + off)
        eas.append(rng.standard_normal((m, Fe)))
        batch.append(np.full(n, i))
        off += n
    x, ei, ea = (T.from_numpy(np.concatenate(a, axis=ax)) for a, ax in ((xs, 0), (eis, 1), (eas, 0)))
    batch = T.from_numpy(np.concatenate(batch))
    y = T.from_numpy(rng.standard_normal(4))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(Fn, H)
            self.edge = nn.Sequential(nn.Linear(Fe, 32), nn.ReLU(), nn.Linear(32, H * H))
            self.update = nn.GRUCell(H, H)
            self.readout = nn.Linear(H, 1)

        def forward(self):
            h = T.relu(self.inp(x))
            W = self.edge(ea).view(-1, H, H)
            src, dst = ei[0], ei[1]
            for _ in range(3):
                msg = T.bmm(W, h[src].unsqueeze(-1)).squeeze(-1)
                agg = T.zeros_like(h)
                agg.scatter_add_(0, dst.unsqueeze(1).expand(-1, H), msg)
                h = self.update(agg, h)
            pooled = T.zeros(4, H, dtype=h.dtype).index_add(0, batch, h)
            return self.readout(pooled).squeeze(-1)

    model = Model().double()
    opt = T.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = F.mse_loss(model(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def lstm_cells_step(T):
    """A closure running one training step of stacked LSTMCells over sequences one by one."""
    nn, F = T.nn, T.nn.functional
    D, H = 16, 32
    rng = np.random.default_rng(3)
    seqs = [T.from_numpy(rng.standard_normal((n, 1, D))) for n in (2, 5, 12, 7, 3, 9)]
    y = T.from_numpy(rng.integers(0, 4, len(seqs)))
    l1, l2, cls = nn.LSTMCell(D, H).double(), nn.LSTMCell(H, H).double(), nn.Linear(H, 4).double()
    params = [*l1.parameters(), *l2.parameters(), *cls.parameters()]
    opt = T.optim.Adam(params, lr=1e-3)

    def step():
        finals = []
        for s in seqs:
            h1 = c1 = h2 = c2 = s.new_zeros(1, H)
            for x in s:
                h1, c1 = l1(x, (h1, c1))
                h2, c2 = l2(h1, (h2, c2))
            finals.append(h2[0])
        loss = F.cross_entropy(cls(T.stack(finals)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


WORKLOADS = {"tree_lstm": tree_lstm_step, "seq2seq": seq2seq_step, "lstm_cells": lstm_cells_step,
             "mpnn": mpnn_step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--inner", type=int, default=3)
    args = ap.parse_args()
    import torch

    import dyngraph

    torch.set_num_threads(1)
    for name, make in WORKLOADS.items():
        steps = {"dyngraph": make(dyngraph), "torch": make(torch)}
        for fn in steps.values():     # warm-up
            fn()
        samples = {k: [] for k in steps}
        for _ in range(args.rounds):
            for k, fn in steps.items():
                t0 = time.perf_counter()
                for _ in range(args.inner):
                    fn()
                samples[k].append((time.perf_counter() - t0) / args.inner * 1e3)
        ratio = statistics.median(a / b for a, b in zip(samples["dyngraph"], samples["torch"], strict=True))
        print(f"{name:10s} dyngraph {statistics.median(samples['dyngraph']):8.2f} ms   "
              f"torch {statistics.median(samples['torch']):8.2f} ms   ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
