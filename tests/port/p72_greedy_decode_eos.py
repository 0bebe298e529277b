"""Seq2seq with a GRU encoder and a GRUCell decoder whose output length depends on its
own predictions: greedy decoding in a ``while`` loop with ``argmax().item()`` and an
early stop on EOS, per example (batch of one); training uses teacher forcing with
variable-length targets, one sequence at a time, and the losses are summed per batch."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    SOS, EOS, V, H = 0, 1, 8, 10
    rng = np.random.default_rng(72)
    pairs = []
    for n in (3, 5, 2, 4, 6):
        src = rng.integers(2, V, n)
        pairs.append((src, np.concatenate([src[::-1][: max(1, n - 1)], [EOS]])))

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.enc = nn.GRU(H, H)
            self.dec = nn.GRUCell(H, H)
            self.out = nn.Linear(2 * H, V)

        def encode(self, src):
            enc, h = self.enc(self.emb(src).unsqueeze(1))          # (T, 1, H)
            return enc.squeeze(1), h[0, 0]

        def step(self, token, h, enc):
            h = self.dec(self.emb(torch.tensor([token])), h.unsqueeze(0))[0]
            att = F.softmax(enc @ h, dim=0)
            logits = self.out(torch.cat([h, att @ enc]))
            return F.log_softmax(logits, dim=-1), h

        def loss(self, src, tgt):
            enc, h = self.encode(src)
            token, total = SOS, 0
            for t in range(len(tgt)):
                logp, h = self.step(token, h, enc)
                total = total - logp[tgt[t]]
                token = int(tgt[t])
            return total / len(tgt)

        @torch.no_grad()
        def greedy(self, src, max_len=12):
            enc, h = self.encode(src)
            token, out, score = SOS, [], 0.0
            while len(out) < max_len:
                logp, h = self.step(token, h, enc)
                token = logp.argmax().item()
                score += logp[token].item()
                if token == EOS:
                    break
                out.append(token)
            return out, score

    model = Seq2Seq().double()
    shared.model(torch, "s2s", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    losses = []
    for _step in range(6):
        loss = sum(model.loss(torch.from_numpy(s), t) for s, t in pairs) / len(pairs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    decoded = [model.greedy(torch.from_numpy(s)) for s, _ in pairs]
    return {"losses": losses, "decoded": [d for d, _ in decoded],
            "scores": [s for _, s in decoded], "lengths": [len(d) for d, _ in decoded],
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
