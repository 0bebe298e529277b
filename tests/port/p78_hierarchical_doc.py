"""A hierarchical attention network (Yang et al. 2016) for documents with a variable
number of sentences of variable length: words -> sentence vectors with a bidirectional
GRU over a ``pad_sequence``d batch of sentences and masked attention pooling; sentences
-> document with a second GRU over each document's sentences (documents padded again
with ``pad_sequence``, lengths differ), ``split`` by per-document counts, and
``BCEWithLogitsLoss`` over multi-label targets."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    V, E, H, L = 12, 5, 4, 3
    rng = np.random.default_rng(78)
    docs = [[rng.integers(1, V, int(rng.integers(1, 6))) for _ in range(n)] for n in (2, 4, 1, 3)]
    targets = torch.from_numpy(rng.integers(0, 2, (len(docs), L)).astype(np.float64))

    class AttnPool(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.ctx = nn.Linear(d, 1, bias=False)

        def forward(self, seq, mask):                     # seq (B, T, d), mask (B, T) bool
            scores = self.ctx(torch.tanh(self.proj(seq))).squeeze(-1)
            alpha = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=1)
            return (alpha.unsqueeze(-1) * seq).sum(1), alpha

    class HAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.word_rnn = nn.GRU(E, H, batch_first=True, bidirectional=True)
            self.word_att = AttnPool(2 * H)
            self.sent_rnn = nn.GRU(2 * H, H, batch_first=True, bidirectional=True)
            self.sent_att = AttnPool(2 * H)
            self.cls = nn.Linear(2 * H, L)

        def forward(self, docs):
            sents = [torch.from_numpy(s) for d in docs for s in d]
            counts = [len(d) for d in docs]
            words = pad_sequence(sents, batch_first=True)            # (S, Tw)
            wmask = words != 0
            wh, _ = self.word_rnn(self.emb(words))
            svec, walpha = self.word_att(wh, wmask)                  # (S, 2H)
            per_doc = torch.split(svec, counts)
            sents_padded = pad_sequence(list(per_doc), batch_first=True)  # (D, Ts, 2H)
            smask = pad_sequence([torch.ones(c, dtype=torch.bool) for c in counts], batch_first=True)
            sh, _ = self.sent_rnn(sents_padded)
            dvec, salpha = self.sent_att(sh, smask)
            return self.cls(dvec), walpha, salpha

    model = HAN().double()
    shared.model(torch, "han", model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    crit = nn.BCEWithLogitsLoss()
    losses = []
    for step in range(5):
        batch = [docs[(step + k) % len(docs)] for k in range(3)]
        idx = [(step + k) % len(docs) for k in range(3)]
        logits, _, _ = model(batch)
        loss = crit(logits, targets[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    logits, walpha, salpha = model(docs)
    loss = crit(logits, targets)
    (g,) = torch.autograd.grad(loss, model.cls.weight, create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.sent_att.proj.weight)
    return {"losses": losses, "logits": np_of(logits), "walpha": np_of(walpha),
            "salpha": np_of(salpha), "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
