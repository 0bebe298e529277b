"""Automatic batching: the Tree-LSTM of the DyNet benchmark, trained per tree and batched.

Run:  .venv/bin/python benchmarks/autobatch.py [--trees 1000] [--size 128] [--group 50]
                                                [--only eager,autobatch,torch,dynet,hand,single]

One thread, float32.  Model (dynet-benchmark's treelstm): binary Tree-LSTM, word and
hidden size ``--size``, a separate ``nn.Linear`` per gate (i, o, u from the word at a
leaf; i, o, f_l, f_r, u from ``cat(h_l, h_r)`` at a phrase), ``nn.Embedding``, a
softmax loss on every node, Adam.  Data: the first ``--trees`` SST training trees.

Rows (training sentences per second, median of ``--rounds`` passes after a warm-up):
- ``dyngraph eager``: the recursive per-tree code, one update per tree;
- ``dyngraph eager, group``: the same code, ``--group`` trees per update (one backward);
- ``dyngraph autobatch``: the same code inside ``dg.autobatch()``, ``--group`` trees per
  update;
- ``dyngraph autobatch, cell``: the node function wrapped in ``dg.autobatch.cell`` (recorded
  once per shape, replayed as one fused group);
- ``dyngraph hand-batched``: ``dyngraph/examples/tree_lstm.py``'s level-by-level model
  (batch ``--hand-batch``);
- ``pytorch``: the recursive code with ``torch``, one update per tree;
- ``dynet``/``dynet autobatch`` when ``import dynet`` works (``pip install dynet38``);
- ``single``: one tree per update, eager vs autobatch (nothing to batch: the overhead);
- ``tagger``/``charlm``: a BiLSTM tagger and a character-level LSTM language model over
  the first 200 sentences (size 64), one sentence per update eagerly vs ``--group``
  sentences per update under autobatch (``nn.LSTMCell`` steps as cells).

Times are CPU seconds of this process (``time.process_time``): the machine is shared,
and CPU time is less disturbed by other jobs than wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def load(n):
    import dyngraph as dg

    trees = dg.data.datasets.SST(split="train").trees[:n]
    vocab = {}
    for t in trees:
        for w in t.leaves():
            vocab.setdefault(w, len(vocab))
    return trees, vocab


def make_model(T, vocab, size):
    """The per-tree Tree-LSTM written once for ``T`` = dyngraph or torch."""
    nn, F = T.nn, T.nn.functional

    class TreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(len(vocab), size)
            self.Wi, self.Wo, self.Wu = (nn.Linear(size, size) for _ in range(3))
            self.Ui, self.Uo, self.Uu = (nn.Linear(2 * size, size) for _ in range(3))
            self.Uf1, self.Uf2 = (nn.Linear(2 * size, size) for _ in range(2))
            self.out = nn.Linear(size, 5)

        def leaf(self, x):
            i = T.sigmoid(self.Wi(x))
            o = T.sigmoid(self.Wo(x))
            u = T.tanh(self.Wu(x))
            c = i * u
            return o * T.tanh(c), c

        def phrase(self, h1, c1, h2, c2):
            e = T.cat([h1, h2], dim=1)
            i = T.sigmoid(self.Ui(e))
            o = T.sigmoid(self.Uo(e))
            f1 = T.sigmoid(self.Uf1(e))
            f2 = T.sigmoid(self.Uf2(e))
            u = T.tanh(self.Uu(e))
            c = i * u + f1 * c1 + f2 * c2
            return o * T.tanh(c), c

        def node(self, t, losses):
            if t.word is not None:
                h, c = self.leaf(self.emb(T.tensor([vocab[t.word]])))
            else:
                h1, c1 = self.node(t.children[0], losses)
                h2, c2 = self.node(t.children[1], losses)
                h, c = self.phrase(h1, c1, h2, c2)
            losses.append(self.node_loss(h, T.tensor([t.label])))
            return h, c

        def node_loss(self, h, y):
            return F.cross_entropy(self.out(h), y)

        def loss(self, trees):
            """The summed node losses of ``trees`` (DyNet's ``esum`` over all of them)."""
            losses = []
            for tree in trees:
                self.node(tree, losses)
            return T.stack(losses).sum()

    return TreeLSTM()




SCHEDULER = "depth"
PHASES = None   # --phases: {"record": [...], "evaluate": [...], "backward": [...]} per pass


def run_dg(trees, vocab, size, group, mode, rounds):
    return _rounds(dg_pass(trees, vocab, size, group, mode), rounds)


def dg_pass(trees, vocab, size, group, mode):
    """One training pass over ``trees`` (returns sent/s) for the dyngraph row ``mode``."""
    import dyngraph as dg

    dg.manual_seed(0)
    model = make_model(dg, vocab, size)
    if mode == "cell":
        model.leaf = dg.autobatch.cell(model.leaf)
        model.phrase = dg.autobatch.cell(model.phrase)
        model.node_loss = dg.autobatch.cell(model.node_loss)
    opt = dg.optim.Adam(model.parameters(), lr=1e-3)

    def one_pass():
        t0 = time.process_time()
        if mode == "eager":
            for t in trees:
                loss = model.loss([t])
                opt.zero_grad()
                loss.backward()
                opt.step()
        elif mode == "eager-group":
            for s in range(0, len(trees), group):
                loss = model.loss(trees[s:s + group])
                opt.zero_grad()
                loss.backward()
                opt.step()
        elif mode == "single":
            for t in trees:
                with dg.autobatch():
                    loss = model.loss([t])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        else:
            ph = [0.0, 0.0, 0.0]
            for s in range(0, len(trees), group):
                with dg.autobatch(scheduler=SCHEDULER):
                    c0 = time.process_time()
                    loss = model.loss(trees[s:s + group])
                    c1 = time.process_time()
                    if PHASES is not None:
                        loss.item()           # evaluation, timed apart from backward
                    c2 = time.process_time()
                    opt.zero_grad()
                    loss.backward()
                    c3 = time.process_time()
                    opt.step()
                ph[0] += c1 - c0
                ph[1] += c2 - c1
                ph[2] += c3 - c2
            if PHASES is not None and mode == "cell":
                for k, v in zip(("record", "evaluate", "backward"), ph, strict=True):
                    PHASES.setdefault(k, []).append(v)
        return len(trees) / (time.process_time() - t0)

    return one_pass


def run_torch(trees, vocab, size, rounds):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make_model(torch, vocab, size)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def one_pass():
        t0 = time.process_time()
        for t in trees:
            loss = model.loss([t])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return len(trees) / (time.process_time() - t0)

    return _rounds(one_pass, rounds)


def run_hand(trees, size, batch, rounds):
    return _rounds(hand_pass(trees, size, batch), rounds)


def hand_pass(trees, size, batch):
    """One training pass of the hand-batched example (returns sent/s)."""
    import dyngraph as dg
    from dyngraph.examples import tree_lstm as ex

    sents = [ex.from_tree(t) for t in trees]
    vocab = ex.build_vocab(sents)
    ex.attach_ids(sents, vocab)
    batches = [ex.Batch(sents[s:s + batch]) for s in range(0, len(sents), batch)]
    dg.manual_seed(0)
    model = ex.BinaryTreeLSTM(len(vocab), size, size, dropout=0.0)
    opt = dg.optim.Adam(model.parameters(), lr=1e-3)
    F = dg.nn.functional

    def one_pass():
        t0 = time.process_time()
        for b in batches:
            loss = F.cross_entropy(model(b), b.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return len(sents) / (time.process_time() - t0)

    return one_pass


def run_pair(trees, vocab, size, group, hand_batch, rounds):
    """The cell row and the hand-batched example alternated pass by pass in this process
    (the machine's load drifts by 10-25% between passes, so rows run one after the other
    compare badly); returns both medians and the median of the per-pair ratios."""
    cell = dg_pass(trees, vocab, size, group, "cell")
    hand = hand_pass(trees, size, hand_batch)
    cell(), hand()   # warm-up
    pairs = []
    for r in range(rounds):
        if r % 2 == 0:      # the order alternates too (the second pass runs on a warmer heap)
            a = cell()
            b = hand()
        else:
            b = hand()
            a = cell()
        pairs.append((a, b))
    return (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
            statistics.median(a / b for a, b in pairs))


def run_dynet(trees, vocab, size, group, autobatch, rounds):
    """dynet-benchmark's treelstm, per tree or ``group`` trees per graph."""
    import dynet_config

    dynet_config.set(autobatch=int(autobatch), mem=2048)
    import dynet as dy

    pc = dy.ParameterCollection()
    E = pc.add_lookup_parameters((len(vocab), size))
    W = [pc.add_parameters((size, size)) for _ in range(3)]
    U = [pc.add_parameters((size, 2 * size)) for _ in range(5)]
    bs = [pc.add_parameters(size) for _ in range(8)]
    Wout, bout = pc.add_parameters((5, size)), pc.add_parameters(5)
    trainer = dy.AdamTrainer(pc, 1e-3)

    def node(t, losses):
        if t.word is not None:
            x = E[vocab[t.word]]
            i = dy.logistic(dy.affine_transform([bs[0], W[0], x]))
            o = dy.logistic(dy.affine_transform([bs[1], W[1], x]))
            u = dy.tanh(dy.affine_transform([bs[2], W[2], x]))
            c = dy.cmult(i, u)
        else:
            h1, c1 = node(t.children[0], losses)
            h2, c2 = node(t.children[1], losses)
            e = dy.concatenate([h1, h2])
            i = dy.logistic(dy.affine_transform([bs[3], U[0], e]))
            o = dy.logistic(dy.affine_transform([bs[4], U[1], e]))
            f1 = dy.logistic(dy.affine_transform([bs[5], U[2], e]))
            f2 = dy.logistic(dy.affine_transform([bs[6], U[3], e]))
            u = dy.tanh(dy.affine_transform([bs[7], U[4], e]))
            c = dy.cmult(i, u) + dy.cmult(f1, c1) + dy.cmult(f2, c2)
        h = dy.cmult(o, dy.tanh(c))
        losses.append(dy.pickneglogsoftmax(dy.affine_transform([bout, Wout, h]), t.label))
        return h, c

    step = group if autobatch else 1

    def one_pass():
        t0 = time.process_time()
        for s in range(0, len(trees), step):
            dy.renew_cg()
            losses = []
            for t in trees[s:s + step]:
                node(t, losses)
            loss = dy.esum(losses)
            loss.value()
            loss.backward()
            trainer.update()
        return len(trees) / (time.process_time() - t0)

    result = _rounds(one_pass, rounds)
    del pc  # kept referenced until here: DyNet frees parameters under the trainer otherwise
    return result


def run_seq(trees, kind, size, group, batched, rounds):
    """Per-sentence sequence models: a BiLSTM tagger (a tag per word: its SST label) and a
    character-level LSTM language model; ``batched``: ``group`` sentences per update inside
    ``dg.autobatch`` with the LSTMCell steps as cells, else one sentence per update, eager."""
    import dyngraph as dg

    nn, F = dg.nn, dg.nn.functional
    dg.manual_seed(0)
    if kind == "tagger":
        vocab = {}
        data = []
        for t in trees:
            words = [n for n in t.postorder() if n.word is not None]
            ids = [vocab.setdefault(n.word, len(vocab)) for n in words]
            data.append((ids, [n.label for n in words]))
        emb = nn.Embedding(len(vocab), size)
        fwd, bwd = nn.LSTMCell(size, size), nn.LSTMCell(size, size)
        out = nn.Linear(2 * size, 5)
        mods = [emb, fwd, bwd, out]
    else:
        chars = {}
        data = []
        for t in trees:
            text = " ".join(t.leaves())[:80]
            ids = [chars.setdefault(c, len(chars)) for c in text]
            data.append((ids[:-1], ids[1:]))
        emb = nn.Embedding(len(chars), size)
        fwd = nn.LSTMCell(size, size)
        bwd = None
        out = nn.Linear(size, len(chars))
        mods = [emb, fwd, out]
    params = [p for m in mods for p in m.parameters()]
    opt = dg.optim.Adam(params, lr=1e-3)
    step_f = dg.autobatch.cell(lambda x, h, c: fwd(x, (h, c))) if batched else (lambda x, h, c: fwd(x, (h, c)))
    step_b = None
    if bwd is not None:
        step_b = dg.autobatch.cell(lambda x, h, c: bwd(x, (h, c))) if batched else (lambda x, h, c: bwd(x, (h, c)))
    zero = dg.zeros(1, size)

    def sentence_loss(ids, ys):
        xs = [emb(dg.tensor([i])) for i in ids]
        h = c = zero
        hf = []
        for x in xs:
            h, c = step_f(x, h, c)
            hf.append(h)
        if step_b is not None:
            h = c = zero
            hb = [None] * len(xs)
            for k in range(len(xs) - 1, -1, -1):
                h, c = step_b(xs[k], h, c)
                hb[k] = h
            feats = [dg.cat([a, b], dim=1) for a, b in zip(hf, hb, strict=True)]
        else:
            feats = hf
        return F.cross_entropy(out(dg.cat(feats, dim=0)), dg.tensor(ys), reduction="sum")

    def one_pass():
        t0 = time.process_time()
        if batched:
            for s in range(0, len(data), group):
                with dg.autobatch():
                    loss = dg.stack([sentence_loss(i, y) for i, y in data[s:s + group]]).sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        else:
            for i, y in data:
                loss = sentence_loss(i, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return len(data) / (time.process_time() - t0)

    return _rounds(one_pass, rounds)


def _rounds(fn, rounds):
    fn()  # warm-up (caches, allocator)
    return statistics.median(fn() for _ in range(rounds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--group", type=int, default=50)
    ap.add_argument("--hand-batch", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scheduler", default="depth", choices=("depth", "agenda"))
    ap.add_argument("--dynet-autobatch", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--only", default="eager,eager-group,autobatch,cell,hand,torch,dynet,single,tagger,charlm")
    ap.add_argument("--pair", action="store_true",
                    help="only the cell row and the hand-batched example, alternated pass by "
                         "pass for --rounds pairs; prints the median of the per-pair ratios")
    ap.add_argument("--phases", action="store_true",
                    help="cell row: print the CPU seconds of recording, evaluation (forced by "
                         "loss.item()) and backward, minimum over the passes")
    args = ap.parse_args()
    import dyngraph as dg

    dg.set_num_threads(1)
    global SCHEDULER, PHASES
    SCHEDULER = args.scheduler
    PHASES = {} if args.phases else None
    trees, vocab = load(args.trees)
    want = set(args.only.split(","))
    rows = []
    if args.pair:
        c, h, ratio = run_pair(trees, vocab, args.size, args.group, args.hand_batch, args.rounds)
        print(f"Tree-LSTM, SST train first {len(trees)} trees, size {args.size}, float32, one "
              f"thread, {args.rounds} alternated pairs of passes")
        print(f"dyngraph autobatch + cell, {args.group} trees per update  {c:9.1f} sent/s")
        print(f"dyngraph hand-batched example, batch {args.hand_batch}        {h:9.1f} sent/s")
        print(f"cell / hand-batched, median of the per-pair ratios        {ratio:9.3f}x")
        if PHASES:
            print("cell row, CPU s per pass (min over passes incl. warm-up): " + ", ".join(
                f"{k} {min(v):.3f}" for k, v in PHASES.items()))
        return
    if "eager" in want:
        rows.append(("dyngraph eager, per tree", run_dg(trees, vocab, args.size, args.group, "eager", args.rounds)))
    if "eager-group" in want:
        rows.append((f"dyngraph eager, {args.group} trees per update",
                     run_dg(trees, vocab, args.size, args.group, "eager-group", args.rounds)))
    if "autobatch" in want:
        rows.append((f"dyngraph autobatch, {args.group} trees per update",
                     run_dg(trees, vocab, args.size, args.group, "autobatch", args.rounds)))
    if "cell" in want:
        rows.append((f"dyngraph autobatch + cell, {args.group} trees per update",
                     run_dg(trees, vocab, args.size, args.group, "cell", args.rounds)))
    if "hand" in want:
        rows.append((f"dyngraph hand-batched example, batch {args.hand_batch}",
                     run_hand(trees, args.size, args.hand_batch, args.rounds)))
    if "torch" in want:
        rows.append(("pytorch, per tree", run_torch(trees, vocab, args.size, args.rounds)))
    if "_dynet" in want:   # a child process: DyNet's autobatch flag is fixed at import
        print("DYNET", run_dynet(trees, vocab, args.size, args.group, args.dynet_autobatch, args.rounds))
        return
    if "dynet" in want:
        import importlib.util
        import subprocess

        if importlib.util.find_spec("dynet_config") is None:
            print("dynet: not installed (pip install dynet38); rows skipped")
        else:
            for ab, name in ((0, "dynet, per tree"), (1, f"dynet autobatch, {args.group} trees per graph")):
                out = subprocess.run(
                    [sys.executable, __file__, "--only", "_dynet", "--dynet-autobatch", str(ab),
                     "--trees", str(args.trees), "--size", str(args.size), "--group", str(args.group),
                     "--rounds", str(args.rounds)], capture_output=True, text=True, check=False)
                vals = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("DYNET")]
                if vals:
                    rows.append((name, float(vals[0])))
                else:
                    print(f"dynet ({name}) failed: {out.stderr.strip()[-300:]}")
    if "single" in want:
        few = trees[: max(1, len(trees) // 5)]
        e = run_dg(few, vocab, args.size, 1, "eager", args.rounds)
        a = run_dg(few, vocab, args.size, 1, "single", args.rounds)
        rows.append(("one tree per update, eager", e))
        rows.append(("one tree per update, autobatch", a))
    for kind, label in (("tagger", "BiLSTM tagger"), ("charlm", "char-LSTM language model")):
        if kind in want:
            few = trees[: min(len(trees), 200)]
            e = run_seq(few, kind, 64, args.group, False, args.rounds)
            a = run_seq(few, kind, 64, args.group, True, args.rounds)
            rows.append((f"{label}, eager per sentence", e))
            rows.append((f"{label}, autobatch + cells ({a / e:.1f}x its eager)", a))
    base = dict(rows).get("pytorch, per tree")
    print(f"Tree-LSTM, SST train first {len(trees)} trees, size {args.size}, float32, one thread")
    print(f"{'code':52s} {'sent/s':>9s} {'vs pytorch':>11s}")
    for name, v in rows:
        ratio = f"{v / base:10.2f}x" if base else ""
        print(f"{name:52s} {v:9.1f} {ratio}")
    if PHASES:
        print("cell row, CPU s per pass (min over passes incl. warm-up): " + ", ".join(
            f"{k} {min(v):.3f}" for k, v in PHASES.items()))


if __name__ == "__main__":
    main()
