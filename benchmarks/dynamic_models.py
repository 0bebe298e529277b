"""Dynamic models: time per training step, dyngraph vs PyTorch, in one process.

Run:  .venv/bin/python benchmarks/dynamic_models.py  [--rounds 15] [--only tree_lstm_sst,...]
      [--profile NAME]   (cProfile of dyngraph on one workload instead of the comparison)

Every workload is written once against a module alias ``T`` (``torch`` or ``dyngraph``) and
is timed in three phases: forward (up to the loss), backward (``loss.backward()``) and the
optimizer (``step()`` + ``zero_grad()``).  Rounds alternate the libraries so that the load
of the shared machine hits both alike; one BLAS/OpenMP thread for both.  Printed: medians
per item (ms) of each phase and the medians of the per-round ratios dyngraph / torch.

Rows written the way the DyNet benchmark and most PyTorch users write them (float32, word and
hidden size 128, one item -- tree or sentence -- per step, SST sentences from
``../shared/data/sst`` read by ``dyngraph.data.datasets.SST``, the same items for both):
- tree_lstm_sst: binary Tree-LSTM, a separate ``nn.Linear`` per gate, ``nn.Embedding`` on
  ``tensor([index])``, ``cat`` of the two children, cross-entropy at the root, Adam;
- bilstm_tagger: ``nn.Embedding`` + bidirectional ``nn.LSTM`` over a ``(len, 1, 128)`` input,
  ``nn.Linear`` to 5 tags per word (the SST leaf labels), cross-entropy, Adam;
- bilstm_cells: the same tagger with two ``nn.LSTMCell``s stepped in Python, ``stack`` + ``cat``;
- rnnlm:        per-sentence LSTM language model (``nn.LSTM``, vocabulary of the 5000 most
  frequent words + unknown), next-word cross-entropy, SGD;
- recnn_lookup: recursive net, leaves ``E[index]`` rows of a parameter matrix, internal nodes
  ``tanh(W @ cat([l, r]) + b)``, softmax classifier at every node, Adam.

Rows kept from before (float64, the models of ``tests/port/p71``, ``p72``, ``p77``, ``p75``
at a slightly larger size; one item = the whole step):
- tree_lstm: Child-Sum Tree-LSTM over 8 random trees (``stack`` + ``sum`` over children), MSE;
- seq2seq:   GRU encoder + GRUCell decoder with attention, teacher forcing, 5 pairs;
- lstm_cells: 6 variable-length sequences through two stacked ``nn.LSTMCell``s;
- mpnn:      message passing over 4 graphs (``bmm`` messages, ``scatter_add_``, ``index_add``).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

# one thread for every BLAS/OpenMP pool, set before NumPy/PyTorch load them
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _phases(forward, opt):
    """(forward, backward, step) closures of one training item: the phases timed apart."""
    def backward(loss):
        loss.backward()

    def step():
        opt.step()
        opt.zero_grad()
    return forward, backward, step


_SST = {}
FULL_VOCAB = False   # --vocab full
GC_MODE = "on"       # --gc
SST_ROOT = None      # --sst-root (None: ../shared/data/sst next to the project)
# --clock: CPU time of this (single-threaded) process by default: on the shared machine the
# wall clock also counts the time other jobs hold the core, which is noise for a comparison
CLOCK = time.process_time


def _sst(n, min_len=4, max_len=30):
    """``n`` SST training trees of ``min_len..max_len`` words (the same for both libraries), a
    vocabulary (the words of those trees, or with ``--vocab full`` every training word) and the
    word counts of the training split.

    Why not the full vocabulary by default: with ~16k rows of 128 floats every lookup's backward
    is a dense 8 MB gradient (zero-fill + accumulate), ~4 ms in both libraries, which buries the
    model's own work; ``--vocab full`` measures that case."""
    if n not in _SST:
        from dyngraph.data.datasets import SST

        train = SST(root=SST_ROOT, split="train")
        trees = [t for t in train.trees if min_len <= len(t.leaves()) <= max_len]
        rng = np.random.default_rng(5)
        picked = [trees[i] for i in rng.choice(len(trees), n, replace=False)]
        counts = {}
        for t in train.trees:
            for w in t.leaves():
                counts[w] = counts.get(w, 0) + 1
        vocab = {}
        for t in (train.trees if FULL_VOCAB else picked):
            for w in t.leaves():
                vocab.setdefault(w, len(vocab))
        _SST[n] = (picked, vocab, counts)
    return _SST[n]


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

    def forward(i=0):
        return sum(F.mse_loss(model.out(model.node(t)[0]).squeeze(-1), y) for t, y in zip(trees, ys))
    return _phases(forward, opt)


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

    def forward(i=0):
        return sum(model.loss(s, t) for s, t in pairs)
    return _phases(forward, opt)


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

    def forward(i=0):
        return F.mse_loss(model(), y)
    return _phases(forward, opt)


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

    def forward(i=0):
        finals = []
        for s in seqs:
            h1 = c1 = h2 = c2 = s.new_zeros(1, H)
            for x in s:
                h1, c1 = l1(x, (h1, c1))
                h2, c2 = l2(h1, (h2, c2))
            finals.append(h2[0])
        return F.cross_entropy(cls(T.stack(finals)), y)
    return _phases(forward, opt)


def _leaf_labels(t):
    return [n.label for n in t.postorder() if n.word is not None]


def tree_lstm_sst_step(T, n_items):
    """Binary Tree-LSTM over SST trees, PyTorch style (one ``nn.Linear`` per gate)."""
    nn, F = T.nn, T.nn.functional
    trees, vocab, _ = _sst(n_items)
    D = H = 128

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(len(vocab), D)
            self.Wi, self.Wo, self.Wu = nn.Linear(D, H), nn.Linear(D, H), nn.Linear(D, H)
            self.Ui, self.Uo, self.Uu = nn.Linear(2 * H, H), nn.Linear(2 * H, H), nn.Linear(2 * H, H)
            self.Uf1, self.Uf2 = nn.Linear(2 * H, H), nn.Linear(2 * H, H)
            self.out = nn.Linear(H, 5)

        def node(self, t):
            if t.word is not None:
                x = self.emb(T.tensor([vocab[t.word]]))
                i, o, u = T.sigmoid(self.Wi(x)), T.sigmoid(self.Wo(x)), T.tanh(self.Wu(x))
                c = i * u
            else:
                (h1, c1), (h2, c2) = self.node(t.children[0]), self.node(t.children[1])
                h = T.cat([h1, h2], dim=1)
                i, o, u = T.sigmoid(self.Ui(h)), T.sigmoid(self.Uo(h)), T.tanh(self.Uu(h))
                f1, f2 = T.sigmoid(self.Uf1(h)), T.sigmoid(self.Uf2(h))
                c = i * u + f1 * c1 + f2 * c2
            return o * T.tanh(c), c

        def forward(self, t):
            h, _ = self.node(t)
            return F.cross_entropy(self.out(h), T.tensor([t.label]))

    model = Model()
    opt = T.optim.Adam(model.parameters(), lr=1e-3)
    return _phases(lambda i: model(trees[i]), opt)


def _tagged(T, n_items):
    trees, vocab, _ = _sst(n_items)
    return [(T.tensor([vocab[w] for w in t.leaves()]), T.tensor(_leaf_labels(t))) for t in trees], vocab


def bilstm_tagger_step(T, n_items):
    """BiLSTM tagger, one sentence at a time: ``nn.LSTM(bidirectional=True)`` on (len, 1, 128)."""
    nn, F = T.nn, T.nn.functional
    sents, vocab = _tagged(T, n_items)
    emb, lstm, out = nn.Embedding(len(vocab), 128), nn.LSTM(128, 128, bidirectional=True), nn.Linear(256, 5)
    opt = T.optim.Adam([*emb.parameters(), *lstm.parameters(), *out.parameters()], lr=1e-3)

    def forward(i):
        words, tags = sents[i]
        y, _ = lstm(emb(words).unsqueeze(1))
        return F.cross_entropy(out(y.squeeze(1)), tags)
    return _phases(forward, opt)


def bilstm_cells_step(T, n_items):
    """The BiLSTM tagger with two ``nn.LSTMCell``s stepped in Python."""
    nn, F = T.nn, T.nn.functional
    sents, vocab = _tagged(T, n_items)
    emb, fw, bw = nn.Embedding(len(vocab), 128), nn.LSTMCell(128, 128), nn.LSTMCell(128, 128)
    out = nn.Linear(256, 5)
    opt = T.optim.Adam([*emb.parameters(), *fw.parameters(), *bw.parameters(), *out.parameters()],
                       lr=1e-3)

    def forward(i):
        words, tags = sents[i]
        xs = emb(words)
        n = xs.shape[0]
        h = c = T.zeros(1, 128)
        fs = []
        for k in range(n):
            h, c = fw(xs[k:k + 1], (h, c))
            fs.append(h)
        h = c = T.zeros(1, 128)
        bs = []
        for k in range(n - 1, -1, -1):
            h, c = bw(xs[k:k + 1], (h, c))
            bs.append(h)
        y = T.cat([T.cat(fs), T.cat(bs[::-1])], dim=1)
        return F.cross_entropy(out(y), tags)
    return _phases(forward, opt)


def rnnlm_step(T, n_items):
    """Per-sentence LSTM language model (variable lengths), 5000-word vocabulary + unknown."""
    nn, F = T.nn, T.nn.functional
    trees, _, counts = _sst(n_items)
    top = sorted(counts, key=lambda w: (-counts[w], w))[:5000]
    ids = {w: k + 1 for k, w in enumerate(top)}          # 0: unknown / sentence boundary
    V = len(ids) + 1
    sents = [T.tensor([0] + [ids.get(w, 0) for w in t.leaves()] + [0]) for t in trees]
    emb, lstm, out = nn.Embedding(V, 128), nn.LSTM(128, 128), nn.Linear(128, V)
    opt = T.optim.SGD([*emb.parameters(), *lstm.parameters(), *out.parameters()], lr=0.1)

    def forward(i):
        s = sents[i]
        y, _ = lstm(emb(s[:-1]).unsqueeze(1))
        return F.cross_entropy(out(y.squeeze(1)), s[1:])
    return _phases(forward, opt)


def recnn_lookup_step(T, n_items):
    """Recursive net over SST trees: ``E[index]`` leaves, ``tanh(W @ cat([l, r]) + b)``, a
    classifier at every node."""
    nn, F = T.nn, T.nn.functional
    trees, vocab, _ = _sst(n_items)
    E = nn.Parameter(T.randn(len(vocab), 128) * 0.1)
    W = nn.Parameter(T.randn(128, 256) * 0.05)
    b = nn.Parameter(T.zeros(128))
    Wc = nn.Parameter(T.randn(5, 128) * 0.1)
    opt = T.optim.Adam([E, W, b, Wc], lr=1e-3)

    def node(t, losses):
        if t.word is not None:
            h = E[vocab[t.word]]
        else:
            h = T.tanh(W @ T.cat([node(t.children[0], losses), node(t.children[1], losses)]) + b)
        losses.append(F.cross_entropy((Wc @ h).unsqueeze(0), T.tensor([t.label])))
        return h

    def forward(i):
        losses = []
        node(trees[i], losses)
        return T.stack(losses).mean()
    return _phases(forward, opt)


def _whole(make):
    """Adapt a whole-step workload (one item = the full step) to the per-item signature."""
    return lambda T, n_items: make(T)


WORKLOADS = {"tree_lstm_sst": tree_lstm_sst_step, "bilstm_tagger": bilstm_tagger_step,
             "bilstm_cells": bilstm_cells_step, "rnnlm": rnnlm_step, "recnn_lookup": recnn_lookup_step,
             "tree_lstm": _whole(tree_lstm_step), "seq2seq": _whole(seq2seq_step),
             "lstm_cells": _whole(lstm_cells_step), "mpnn": _whole(mpnn_step)}
PER_ITEM = {"tree_lstm_sst", "bilstm_tagger", "bilstm_cells", "rnnlm", "recnn_lookup"}
PHASES = ("fwd", "bwd", "opt")


def _run_round(phases, n):
    forward, backward, step = phases
    tot = [0.0, 0.0, 0.0]
    clock = CLOCK
    for i in range(n):
        t0 = clock()
        loss = forward(i)
        t1 = clock()
        backward(loss)
        t2 = clock()
        step()
        t3 = clock()
        tot[0] += t1 - t0
        tot[1] += t2 - t1
        tot[2] += t3 - t2
    return [x / n * 1e3 for x in tot]


def compare(name, rounds, n_items, inner):
    import torch

    import dyngraph

    n = n_items if name in PER_ITEM else inner
    libs = {"dyngraph": WORKLOADS[name](dyngraph, n_items), "torch": WORKLOADS[name](torch, n_items)}
    for ph in libs.values():          # warm-up: lazy imports, optimizer state
        _run_round(ph, min(n, 3))
    samples = {k: [] for k in libs}
    gc.collect()
    if GC_MODE == "freeze":
        gc.freeze()
    elif GC_MODE == "off":
        gc.disable()
    try:
        for _ in range(rounds):
            for k, ph in libs.items():
                samples[k].append(_run_round(ph, n))
    finally:
        gc.enable()
        gc.unfreeze()
    d, t = samples["dyngraph"], samples["torch"]
    cols = []
    for j, phase in enumerate(PHASES):
        md, mt = statistics.median(r[j] for r in d), statistics.median(r[j] for r in t)
        ratio = statistics.median(a[j] / b[j] for a, b in zip(d, t, strict=True))
        cols.append(f"{phase} {md:7.3f}/{mt:7.3f} {ratio:4.2f}x")
    total = statistics.median(sum(a) / sum(b) for a, b in zip(d, t, strict=True))
    print(f"{name:14s} " + "   ".join(cols) + f"   step {statistics.median(sum(r) for r in d):7.3f}/"
          f"{statistics.median(sum(r) for r in t):7.3f} {total:4.2f}x", flush=True)


def profile(name, n_items, inner, rounds):
    import cProfile
    import pstats

    import dyngraph

    ph = WORKLOADS[name](dyngraph, n_items)
    n = n_items if name in PER_ITEM else inner
    _run_round(ph, min(n, 3))
    pr = cProfile.Profile(CLOCK)
    pr.enable()
    for _ in range(rounds):
        _run_round(ph, n)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--items", type=int, default=20, help="SST trees/sentences per round")
    ap.add_argument("--inner", type=int, default=3, help="steps per round of the whole-step rows")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--profile", default="", help="cProfile dyngraph on this workload instead")
    ap.add_argument("--vocab", choices=("items", "full"), default="items",
                    help="embedding table: the words of the sampled sentences, or all of SST train")
    ap.add_argument("--gc", choices=("on", "freeze", "off"), default="on",
                    help="Python's cyclic GC during the rounds: on (as users run), freeze (gc.freeze() "
                         "after setup: the collector no longer rescans the imported modules and data), off")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="time.process_time (default: robust to other jobs on the machine) or "
                         "time.perf_counter")
    ap.add_argument("--sst-root", default=None, help="directory of SST's train.txt")
    args = ap.parse_args()
    global GC_MODE, CLOCK, SST_ROOT
    SST_ROOT = args.sst_root
    GC_MODE = args.gc
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    global FULL_VOCAB
    FULL_VOCAB = args.vocab == "full"
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.profile:
        profile(args.profile, args.items, args.inner, args.rounds)
        return
    names = args.only.split(",") if args.only else list(WORKLOADS)
    print("per item, ms: dyngraph/torch and the median of per-round ratios (dyngraph / torch)")
    for name in names:
        compare(name, args.rounds, args.items, args.inner)


if __name__ == "__main__":
    main()
