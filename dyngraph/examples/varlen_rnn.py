"""Variable-length sequences without padding: each sequence runs for exactly its own length.

    python -m dyngraph.examples.varlen_rnn [--epochs 6] [--train 2000] [--test 500]

Task (synthetic): sequences of symbols ``a b c d`` of length 5..40; the label
says whether ``a`` occurs more often than ``b``.  Model: embedding ->
``nn.LSTMCell`` -> linear head on the sequence's last state.

Two ways to run a batch of sequences of different lengths:

* **dynamic** (no padding): sort the batch by length; at time step ``t`` only
  the sequences still running take part (``h[:n_t]``).  A sequence whose
  last symbol was step ``t`` hands its state to the head right there.  There
  are no pad symbols and no masks: each sequence's graph is as long as it is.
* **padded + masked**: pad every sequence to the batch's longest, run all of
  them for every step, and freeze finished ones with a mask
  ``h = m * h_new + (1 - m) * h``.

Both train the same model with the same seed and budget; the script prints
test accuracy and time per epoch of each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dyngraph as dg
from dyngraph import nn
from dyngraph.nn import functional as F

VOCAB = 4  # a b c d


def make_data(n: int, min_len: int = 5, max_len: int = 40, seed: int = 0):
    """``n`` (sequence, label) pairs: label 1 when symbol 0 occurs more often than symbol 1."""
    rng = np.random.default_rng(seed)
    seqs, labels = [], []
    while len(seqs) < n:
        L = int(rng.integers(min_len, max_len + 1))
        s = rng.integers(0, VOCAB, size=L)
        a, b = int((s == 0).sum()), int((s == 1).sum())
        if a == b:
            continue  # no ties: every label is decided by the counts
        seqs.append(s)
        labels.append(int(a > b))
    return seqs, np.asarray(labels)


class SeqClassifier(nn.Module):
    def __init__(self, emb: int = 16, hidden: int = 32):
        super().__init__()
        self.hidden_size = hidden
        self.embed = nn.Embedding(VOCAB + 1, emb)  # index VOCAB is the pad symbol (padded mode)
        self.cell = nn.LSTMCell(emb, hidden)
        self.head = nn.Linear(hidden, 2)

    def forward_dynamic(self, seqs: list) -> dg.Tensor:
        """Logits for a list of 1-d int arrays of different lengths; no padding anywhere."""
        lengths = np.array([len(s) for s in seqs])
        order = np.argsort(-lengths, kind="stable")  # longest first
        sorted_len = lengths[order]
        B = len(seqs)
        h = dg.zeros(B, self.hidden_size)
        c = dg.zeros(B, self.hidden_size)
        finals = []
        for t in range(int(sorted_len[0])):
            n_t = int((sorted_len > t).sum())  # sequences still running at step t
            tokens = dg.tensor(np.array([seqs[i][t] for i in order[:n_t]]))
            h, c = self.cell(self.embed(tokens), (h[:n_t], c[:n_t]))
            n_next = int((sorted_len > t + 1).sum())
            if n_next < n_t:  # these sequences ended at step t: their last state is final
                finals.append(h[n_next:n_t])
        last = dg.cat(finals[::-1], dim=0)  # back in sorted (longest first) order
        inverse = np.empty(B, dtype=np.int64)
        inverse[order] = np.arange(B)
        return self.head(last[dg.tensor(inverse)])

    def forward_padded(self, tokens: dg.Tensor, mask: dg.Tensor) -> dg.Tensor:
        """Logits for a padded ``(B, T)`` batch with a ``(B, T)`` 0/1 mask."""
        B, T = tokens.shape
        h = dg.zeros(B, self.hidden_size)
        c = dg.zeros(B, self.hidden_size)
        x = self.embed(tokens)
        for t in range(T):
            h_new, c_new = self.cell(x[:, t], (h, c))
            m = mask[:, t:t + 1]
            h = m * h_new + (1 - m) * h
            c = m * c_new + (1 - m) * c
        return self.head(h)


def pad(seqs: list):
    T = max(len(s) for s in seqs)
    tokens = np.full((len(seqs), T), VOCAB, dtype=np.int64)
    mask = np.zeros((len(seqs), T), dtype=np.float32)
    for i, s in enumerate(seqs):
        tokens[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return dg.tensor(tokens), dg.tensor(mask)


def _logits(model, seqs, mode):
    if mode == "dynamic":
        return model.forward_dynamic(seqs)
    return model.forward_padded(*pad(seqs))


def run(mode: str, train_data, test_data, epochs: int, batch: int = 32, lr: float = 1e-2,
        seed: int = 0, quiet: bool = False) -> dict:
    dg.manual_seed(seed)
    model = SeqClassifier()
    opt = dg.optim.Adam(model.parameters(), lr=lr)
    seqs, labels = train_data
    rng = np.random.default_rng(seed)
    epoch_times, cpu_times, losses = [], [], []
    for epoch in range(epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        perm = rng.permutation(len(seqs))
        total = 0.0
        for s in range(0, len(seqs), batch):
            idx = perm[s:s + batch]
            logits = _logits(model, [seqs[i] for i in idx], mode)
            loss = F.cross_entropy(logits, dg.tensor(labels[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        epoch_times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        losses.append(total / len(seqs))
        if not quiet:
            print(f"[{mode:7s}] epoch {epoch + 1}  loss {losses[-1]:.4f}  {epoch_times[-1]:.2f}s wall, "
                  f"{cpu_times[-1]:.2f}s CPU")
    test_seqs, test_labels = test_data
    correct = 0
    with dg.no_grad():
        for s in range(0, len(test_seqs), 256):
            logits = _logits(model, test_seqs[s:s + 256], mode)
            correct += int((logits.argmax(dim=1).numpy() == test_labels[s:s + 256]).sum())
    return {"mode": mode, "accuracy": correct / len(test_seqs), "losses": losses,
            "seconds_per_epoch": sum(epoch_times) / len(epoch_times),
            "cpu_seconds_per_epoch": sum(cpu_times) / len(cpu_times), "model": model}


def compare(epochs: int = 6, n_train: int = 2000, n_test: int = 500, batch: int = 32,
            seed: int = 0, quiet: bool = False) -> dict:
    train_data = make_data(n_train, seed=seed)
    test_data = make_data(n_test, seed=seed + 1)
    out = {}
    for mode in ("dynamic", "padded"):
        out[mode] = run(mode, train_data, test_data, epochs, batch, seed=seed, quiet=quiet)
    if not quiet:
        for mode, r in out.items():
            print(f"{mode:8s} test accuracy {r['accuracy']:.3f}   {r['seconds_per_epoch']:.2f} s/epoch wall, "
                  f"{r['cpu_seconds_per_epoch']:.2f} s/epoch CPU")
        lengths = [len(s) for s in train_data[0]]
        print(f"mean length {np.mean(lengths):.1f}, max {max(lengths)}: the padded run computes "
              f"{max(lengths) / np.mean(lengths):.2f}x the steps per sequence (within a batch, "
              "every sequence runs to the batch's longest)")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    compare(args.epochs, args.train, args.test, args.batch, args.seed)


if __name__ == "__main__":
    main()
