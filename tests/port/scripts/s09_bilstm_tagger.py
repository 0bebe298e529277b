"""A part-of-speech tagger in the style of the DyNet benchmarks: one sentence at a time,
word embeddings for frequent words and a character BiLSTM for rare ones, a sentence-level
BiLSTM, an MLP over each position, summed cross-entropy, plain SGD; evaluation counts
correct tags.  Every sentence builds a different graph.

    python s09_bilstm_tagger.py --epochs 2 --out tagger.json
"""

import argparse
import json
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

WORDS = {"DET": ["the", "a", "every"], "NOUN": ["dog", "cat", "fox", "river", "zebra", "quokka"],
         "VERB": ["runs", "sees", "jumps", "sleeps"], "ADJ": ["lazy", "quick", "brown"], "ADV": ["slowly", "often"]}
PATTERNS = [["DET", "NOUN", "VERB"], ["DET", "ADJ", "NOUN", "VERB", "ADV"], ["DET", "ADJ", "ADJ", "NOUN", "VERB"],
            ["NOUN", "VERB", "DET", "NOUN"]]


def make_corpus(n, rng):
    sents = []
    for _ in range(n):
        tags = PATTERNS[rng.integers(len(PATTERNS))]
        sents.append([(WORDS[t][rng.integers(len(WORDS[t]))], t) for t in tags])
    return sents


class Tagger(nn.Module):
    def __init__(self, nwords, nchars, ntags, wemb=8, cemb=4, hidden=10, mlp=12):
        super().__init__()
        self.wembed = nn.Embedding(nwords, wemb)
        self.cembed = nn.Embedding(nchars, cemb)
        self.char_lstm = nn.LSTM(cemb, wemb // 2, bidirectional=True)
        self.lstm = nn.LSTM(wemb, hidden, bidirectional=True)
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, mlp), nn.Tanh(), nn.Linear(mlp, ntags))

    def word_rep(self, w, wid, counts, c2i):
        if counts[w] > 5:
            return self.wembed(torch.tensor([wid]))[0]
        chars = torch.tensor([c2i["<w>"]] + [c2i[c] for c in w] + [c2i["</w>"]])
        _, (h, _) = self.char_lstm(self.cembed(chars).unsqueeze(1))
        return torch.cat([h[0, 0], h[1, 0]])

    def forward(self, words, wids, counts, c2i):
        reps = torch.stack([self.word_rep(w, i, counts, c2i) for w, i in zip(words, wids)])
        out, _ = self.lstm(reps.unsqueeze(1))
        return self.mlp(out.squeeze(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--train-size", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train, dev = make_corpus(args.train_size, rng), make_corpus(10, rng)
    counts = Counter(w for s in train for w, _ in s)
    w2i = {w: i for i, w in enumerate(sorted(counts))}
    w2i["<unk>"] = len(w2i)
    t2i = {t: i for i, t in enumerate(sorted(WORDS))}
    c2i = {c: i for i, c in enumerate(sorted({c for ws in WORDS.values() for w in ws for c in w} | {"<w>", "</w>"}))}
    model = Tagger(len(w2i), len(c2i), len(t2i))
    init = np.random.default_rng(1)
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(prm.shape))))
    trainer = torch.optim.SGD(model.parameters(), lr=args.lr)
    history = []
    for _ in range(args.epochs):
        total = 0.0
        for sent in train:
            words = [w for w, _ in sent]
            wids = [w2i.get(w, w2i["<unk>"]) for w in words]
            tags = torch.tensor([t2i[t] for _, t in sent])
            loss = F.cross_entropy(model(words, wids, counts, c2i), tags, reduction="sum")
            trainer.zero_grad()
            loss.backward()
            trainer.step()
            total += loss.item()
        good = bad = 0
        with torch.no_grad():
            for sent in dev:
                words = [w for w, _ in sent]
                pred = model(words, [w2i.get(w, w2i["<unk>"]) for w in words], counts, c2i).argmax(1).tolist()
                for (_, t), q in zip(sent, pred):
                    good, bad = (good + 1, bad) if t2i[t] == q else (good, bad + 1)
        history.append([total, good / (good + bad)])
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"history": history, "vocab": len(w2i)}, f)


if __name__ == "__main__":
    main()
