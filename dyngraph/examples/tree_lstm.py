"""Tree-LSTM sentiment classifier on the Stanford Sentiment Treebank, against bag-of-words.

    python -m dyngraph.examples.tree_lstm [--epochs 4] [--limit-train N] [--limit-test N] [--autobatch]

Each sentence comes with its own binary parse tree, and the network follows
it: a word's state comes from its embedding, a phrase's state from its two
children (the binary / N-ary Tree-LSTM of Tai, Socher & Manning 2015)::

    i, f_l, f_r, o, u = split(U @ [h_l; h_r] + b)
    c = σ(i) ⊙ tanh(u) + σ(f_l) ⊙ c_l + σ(f_r) ⊙ c_r ;   h = σ(o) ⊙ tanh(c)

No recursion: nodes are evaluated in order of height, and all nodes of one
height in a mini-batch of trees run together (every tree keeps its own
shape; the batch only shares the matrix multiplies).  Every node of the
treebank is labelled (0..4), so the loss covers all phrases; accuracy is
reported on the sentence (root) level, fine-grained (5 classes) and binary
(positive vs negative, neutral sentences excluded, predicted by comparing
p(3)+p(4) with p(0)+p(1)).

With ``--autobatch`` the same network is also written the naive way
(:class:`RecursiveTreeLSTM`: recursion over each tree, one sentence at a time) and
trained inside ``dg.autobatch()``, which batches it without the level bookkeeping.

The same script trains a bag-of-words baseline with the same embeddings size,
data, epochs and optimiser: a phrase is the mean of its word vectors, then an
MLP.  Word order and syntax are invisible to it.

Data: ``../shared/data/sst/{train,dev,test}.txt`` (PTB-style trees) relative
to the project root, or ``--data DIR``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import dyngraph as dg
from dyngraph import nn
from dyngraph.nn import functional as F

UNK = 0


# ---------------------------------------------------------------------------
# data: trees -> flat post-order arrays
# ---------------------------------------------------------------------------

def default_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    project = os.path.dirname(os.path.dirname(here))
    return os.path.join(project, "..", "shared", "data", "sst")


class Sentence:
    """One tree in post-order: ``label``, ``word`` (str or None), ``left``/``right`` child index."""

    __slots__ = ("label", "word", "left", "right", "height", "ids", "span")

    def __init__(self):
        self.label, self.word, self.left, self.right = [], [], [], []

    def finish(self):
        n = len(self.label)
        left, right, word = self.left, self.right, self.word
        height = [0] * n
        # span of leaves below each node, in word order (leaves appear left to right in post-order)
        lo, hi = [0] * n, [0] * n
        leaf_no = 0
        for k in range(n):
            if word[k] is not None:
                lo[k], hi[k] = leaf_no, leaf_no + 1
                leaf_no += 1
            else:
                a, b = left[k], right[k]
                height[k] = 1 + max(height[a], height[b])
                lo[k], hi[k] = lo[a], hi[b]
        self.label = np.asarray(self.label, np.int64)
        self.left = np.asarray(left, np.int64)
        self.right = np.asarray(right, np.int64)
        self.height = np.asarray(height, np.int64)
        self.span = np.stack([np.asarray(lo, np.int64), np.asarray(hi, np.int64)], axis=1)
        return self

    @property
    def root_label(self) -> int:
        return int(self.label[-1])

    def __len__(self) -> int:
        return len(self.label)


def parse(line: str) -> Sentence:
    """One PTB-format line (``(3 (2 The) (4 good))``) as post-order arrays."""
    return from_tree(dg.data.datasets.parse_tree(line))


def from_tree(tree) -> Sentence:
    """Flatten a :class:`dg.data.datasets.Tree` into post-order arrays, without recursion.

    Unary chains are collapsed into their child (which takes the upper label);
    every internal node then has two children.
    """
    s = Sentence()
    index = {}
    for node in tree.postorder():
        if node.word is not None:
            k = len(s.label)
            s.label.append(node.label)
            s.word.append(node.word)
            s.left.append(-1)
            s.right.append(-1)
        elif len(node.children) == 1:
            k = index[id(node.children[0])]
            s.label[k] = node.label
        elif len(node.children) == 2:
            k = len(s.label)
            s.label.append(node.label)
            s.word.append(None)
            s.left.append(index[id(node.children[0])])
            s.right.append(index[id(node.children[1])])
        else:
            raise ValueError(f"SST: a node with {len(node.children)} children in a binary treebank: "
                             f"{str(tree)[:60]}")
        index[id(node)] = k
    return s.finish()


def load_split(root: str, split: str, limit: int | None = None, seed: int = 0) -> list:
    """The trees of one split, read with ``dg.data.datasets.SST``; ``limit`` keeps a random
    sample (the files are sorted by label)."""
    if not os.path.exists(os.path.join(root, f"{split}.txt")):
        raise FileNotFoundError(
            f"tree_lstm: {os.path.join(root, split + '.txt')!r} not found; pass --data pointing at "
            "the SST directory holding train.txt, dev.txt and test.txt")
    trees = dg.data.datasets.SST(root=root, split=split).trees
    if limit is not None and limit < len(trees):
        keep = np.random.default_rng(seed).choice(len(trees), size=limit, replace=False)
        trees = [trees[i] for i in np.sort(keep)]
    return [from_tree(t) for t in trees]


def build_vocab(sentences, min_count: int = 1) -> dict:
    counts: dict = {}
    for s in sentences:
        for w in s.word:
            if w is not None:
                w = w.lower()
                counts[w] = counts.get(w, 0) + 1
    vocab = {"<unk>": UNK}
    for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if c >= min_count:
            vocab[w] = len(vocab)
    return vocab


def attach_ids(sentences, vocab) -> None:
    for s in sentences:
        s.ids = np.array([vocab.get(w.lower(), UNK) if w is not None else -1 for w in s.word], np.int64)


class Batch:
    """Several trees flattened and ordered by node height (level 0 = the words)."""

    def __init__(self, sentences):
        offsets = np.cumsum([0] + [len(s) for s in sentences])
        label = np.concatenate([s.label for s in sentences])
        height = np.concatenate([s.height for s in sentences])
        ids = np.concatenate([s.ids for s in sentences])
        left = np.concatenate([np.where(s.left >= 0, s.left + o, -1) for s, o in zip(sentences, offsets[:-1], strict=True)])
        right = np.concatenate([np.where(s.right >= 0, s.right + o, -1) for s, o in zip(sentences, offsets[:-1], strict=True)])
        order = np.argsort(height, kind="stable")  # global node -> processing position
        pos = np.empty_like(order)
        pos[order] = np.arange(len(order))
        self.levels = []  # per height: (slice into processing order, left pos, right pos)
        bounds = np.searchsorted(height[order], np.arange(height.max() + 2))
        for lv in range(height.max() + 1):
            nodes = order[bounds[lv]:bounds[lv + 1]]
            self.levels.append((nodes, pos[left[nodes]] if lv else None, pos[right[nodes]] if lv else None))
        self.words = dg.tensor(ids[self.levels[0][0]])
        self.labels = dg.tensor(label[order])
        self.roots = pos[offsets[1:] - 1]  # the root is the last node of each tree
        self.root_labels = label[offsets[1:] - 1]
        # bag-of-words: each node's phrase = mean of the word vectors under it
        n_leaves = [int((s.ids >= 0).sum()) for s in sentences]
        leaf_off = np.cumsum([0] + n_leaves)
        span = np.concatenate([s.span + lo for s, lo in zip(sentences, leaf_off[:-1], strict=True)])[order]
        member = np.zeros((len(order), leaf_off[-1]), np.float32)
        for k, (a, b) in enumerate(span):
            member[k, a:b] = 1.0 / (b - a)
        self.phrase_mean = dg.tensor(member)
        self.leaf_words = dg.tensor(np.concatenate([s.ids[s.ids >= 0] for s in sentences]))


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------

class BinaryTreeLSTM(nn.Module):
    def __init__(self, vocab_size: int, emb: int = 64, hidden: int = 64, classes: int = 5,
                 dropout: float = 0.3):
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocab_size, emb)
        self.leaf = nn.Linear(emb, 3 * hidden)  # i, o, u for words
        self.compose = nn.Linear(2 * hidden, 5 * hidden)  # i, f_l, f_r, o, u for phrases
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, classes)

    def forward(self, batch: Batch) -> dg.Tensor:
        """Logits for every node of every tree in ``batch`` (processing order)."""
        H = self.hidden
        g = self.leaf(self.drop(self.embed(batch.words)))
        i, o, u = g[:, :H], g[:, H:2 * H], g[:, 2 * H:]
        c = dg.sigmoid(i) * dg.tanh(u)
        h = dg.sigmoid(o) * dg.tanh(c)
        hs, cs = [h], [c]
        h_all, c_all = h, c
        for _, lpos, rpos in batch.levels[1:]:  # each level: every node whose children are done
            hl, hr = h_all[lpos], h_all[rpos]
            g = self.compose(dg.cat([hl, hr], dim=1))
            i, fl, fr, o, u = (g[:, k * H:(k + 1) * H] for k in range(5))
            c = dg.sigmoid(i) * dg.tanh(u) + dg.sigmoid(fl) * c_all[lpos] + dg.sigmoid(fr) * c_all[rpos]
            h = dg.sigmoid(o) * dg.tanh(c)
            hs.append(h)
            cs.append(c)
            h_all = dg.cat([h_all, h], dim=0)
            c_all = dg.cat([c_all, c], dim=0)
        return self.out(self.drop(h_all))


class RecursiveTreeLSTM(BinaryTreeLSTM):
    """The same network written the naive way: one tree at a time, by recursion.

    Run under ``dg.autobatch`` it executes batched anyway (no level bookkeeping by hand):
    its per-node functions are ``dg.autobatch.cell`` functions, recorded once and replayed
    as one fused group per tree height.  Same parameters as :class:`BinaryTreeLSTM`, so the
    two give the same logits (dropout aside: autobatch draws each member's own mask).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.leaf_cell = dg.autobatch.cell(self.leaf_state)
        self.phrase_cell = dg.autobatch.cell(self.phrase_state)

    def leaf_state(self, x):
        H = self.hidden
        g = self.leaf(x)
        c = dg.sigmoid(g[:, :H]) * dg.tanh(g[:, 2 * H:])
        return dg.sigmoid(g[:, H:2 * H]) * dg.tanh(c), c

    def phrase_state(self, hl, cl, hr, cr):
        H = self.hidden
        g = self.compose(dg.cat([hl, hr], dim=1))
        i, fl, fr, o, u = (g[:, k * H:(k + 1) * H] for k in range(5))
        c = dg.sigmoid(i) * dg.tanh(u) + dg.sigmoid(fl) * cl + dg.sigmoid(fr) * cr
        return dg.sigmoid(o) * dg.tanh(c), c

    def node(self, s: Sentence, k: int, hs: list):
        if s.word[k] is not None:
            h, c = self.leaf_cell(self.drop(self.embed(dg.tensor([int(s.ids[k])]))))
        else:
            hl, cl = self.node(s, int(s.left[k]), hs)
            hr, cr = self.node(s, int(s.right[k]), hs)
            h, c = self.phrase_cell(hl, cl, hr, cr)
        hs[k] = h
        return h, c

    def forward_trees(self, sentences) -> dg.Tensor:
        """Logits of every node, tree after tree in post-order (labels: ``post_order_labels``)."""
        hs_all = []
        for s in sentences:
            hs = [None] * len(s)
            self.node(s, len(s) - 1, hs)
            hs_all.extend(hs)
        return self.out(self.drop(dg.cat(hs_all, dim=0)))


def post_order_labels(sentences) -> dg.Tensor:
    return dg.tensor(np.concatenate([s.label for s in sentences]))


class BagOfWords(nn.Module):
    """Mean of the phrase's word vectors -> tanh layer -> classes (order-blind)."""

    def __init__(self, vocab_size: int, emb: int = 64, hidden: int = 64, classes: int = 5,
                 dropout: float = 0.3):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.hid = nn.Linear(emb, hidden)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, classes)

    def forward(self, batch: Batch) -> dg.Tensor:
        phrases = batch.phrase_mean @ self.drop(self.embed(batch.leaf_words))
        return self.out(self.drop(dg.tanh(self.hid(phrases))))


# ---------------------------------------------------------------------------
# training and evaluation
# ---------------------------------------------------------------------------

def evaluate(model, batches) -> dict:
    model.eval()
    fine = binary = n_fine = n_bin = 0
    with dg.no_grad():
        for b in batches:
            probs = F.softmax(model(b), dim=1).numpy()[b.roots]
            y = b.root_labels
            fine += int((probs.argmax(1) == y).sum())
            n_fine += len(y)
            keep = y != 2
            pos = probs[:, 3] + probs[:, 4] > probs[:, 0] + probs[:, 1]
            binary += int((pos[keep] == (y[keep] > 2)).sum())
            n_bin += int(keep.sum())
    model.train()
    return {"fine": fine / max(n_fine, 1), "binary": binary / max(n_bin, 1)}


def evaluate_recursive(model, sentences) -> dict:
    """Root accuracy of :class:`RecursiveTreeLSTM` (under ``dg.autobatch``)."""
    model.eval()
    fine = binary = n_bin = 0
    with dg.no_grad(), dg.autobatch():
        for start in range(0, len(sentences), 100):
            chunk = sentences[start:start + 100]
            probs = F.softmax(model.forward_trees(chunk), dim=1).numpy()
            roots = np.cumsum([len(s) for s in chunk]) - 1
            probs = probs[roots]
            y = np.array([s.root_label for s in chunk])
            fine += int((probs.argmax(1) == y).sum())
            keep = y != 2
            pos = probs[:, 3] + probs[:, 4] > probs[:, 0] + probs[:, 1]
            binary += int((pos[keep] == (y[keep] > 2)).sum())
            n_bin += int(keep.sum())
    model.train()
    return {"fine": fine / max(len(sentences), 1), "binary": binary / max(n_bin, 1)}


def _train(model, batches, loss_of, evaluate_fn, epochs: int, lr: float, name: str, quiet: bool) -> dict:
    """Adam over ``batches`` in a seeded random order; ``loss_of(batch)`` gives the batch loss."""
    opt = dg.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-5)
    rng = np.random.default_rng(0)
    times, cpu_times, losses = [], [], []
    for epoch in range(epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        total = count = 0.0
        for bi in rng.permutation(len(batches)):
            total += loss_of(batches[bi], opt)
            count += 1
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        losses.append(total / count)
        if not quiet:
            acc = evaluate_fn()
            print(f"[{name}] epoch {epoch + 1}: loss {losses[-1]:.4f}  {times[-1]:.1f}s wall, "
                  f"{cpu_times[-1]:.1f}s CPU  test fine {acc['fine']:.3f} binary {acc['binary']:.3f}")
    acc = evaluate_fn()
    return {"losses": losses, "seconds_per_epoch": sum(times) / len(times),
            "cpu_seconds_per_epoch": sum(cpu_times) / len(cpu_times), **acc}


def _step(loss, opt) -> float:
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def fit_recursive(model, train_groups, test_sentences, epochs: int, lr: float, quiet: bool):
    """Train :class:`RecursiveTreeLSTM` per tree inside ``dg.autobatch`` (one update per group)."""
    def loss_of(group, opt):
        with dg.autobatch():   # the whole step: the group's trees record, then run batched
            return _step(F.cross_entropy(model.forward_trees(group), post_order_labels(group)), opt)

    return _train(model, train_groups, loss_of, lambda: evaluate_recursive(model, test_sentences),
                  epochs, lr, "tree-lstm, autobatch", quiet)


def fit(model, train_batches, test_batches, epochs: int, lr: float, name: str, quiet: bool):
    """Train a hand-batched model (one update per level-by-level batch)."""
    return _train(model, train_batches, lambda b, opt: _step(F.cross_entropy(model(b), b.labels), opt),
                  lambda: evaluate(model, test_batches), epochs, lr, name, quiet)


def run(data: str | None = None, epochs: int = 4, batch: int = 25, emb: int = 64, hidden: int = 64,
        lr: float = 3e-3, limit_train: int | None = None, limit_test: int | None = None,
        seed: int = 0, quiet: bool = False, autobatch: bool = False) -> dict:
    root = data or default_root()
    train = load_split(root, "train", limit_train)
    test = load_split(root, "test", limit_test)
    vocab = build_vocab(train)
    attach_ids(train, vocab)
    attach_ids(test, vocab)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train))
    train_batches = [Batch([train[i] for i in order[s:s + batch]]) for s in range(0, len(train), batch)]
    test_batches = [Batch(test[s:s + 100]) for s in range(0, len(test), 100)]
    if not quiet:
        print(f"SST: {len(train)} training trees ({sum(len(s) for s in train)} labelled nodes), "
              f"{len(test)} test trees, vocabulary {len(vocab)}")
    results = {}
    for name, cls in (("tree-lstm", BinaryTreeLSTM), ("bag-of-words", BagOfWords)):
        dg.manual_seed(seed)
        model = cls(len(vocab), emb, hidden)
        results[name] = fit(model, train_batches, test_batches, epochs, lr, name, quiet)
        results[name]["model"] = model
    if autobatch:
        # the same network, written per tree, batched by dg.autobatch instead of by hand
        dg.manual_seed(seed)
        model = RecursiveTreeLSTM(len(vocab), emb, hidden)
        groups = [[train[i] for i in order[s:s + batch]] for s in range(0, len(train), batch)]
        results["tree-lstm (autobatch)"] = fit_recursive(model, groups, test, epochs, lr, quiet)
        results["tree-lstm (autobatch)"]["model"] = model
    if not quiet:
        print(f"{'model':22s} {'fine (5 cl.)':>13s} {'binary':>8s} {'s/epoch':>8s} {'CPU s/epoch':>12s}")
        for name, r in results.items():
            print(f"{name:22s} {r['fine']:13.3f} {r['binary']:8.3f} {r['seconds_per_epoch']:8.1f} "
                  f"{r['cpu_seconds_per_epoch']:12.1f}")
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="SST directory (default ../shared/data/sst)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--emb", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--limit-train", type=int, default=None)
    ap.add_argument("--limit-test", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autobatch", action="store_true",
                    help="also train the naive recursive model under dg.autobatch")
    args = ap.parse_args(argv)
    run(args.data, args.epochs, args.batch, args.emb, args.hidden, args.lr, args.limit_train,
        args.limit_test, args.seed, autobatch=args.autobatch)


if __name__ == "__main__":
    main()
