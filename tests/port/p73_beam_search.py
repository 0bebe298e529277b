"""Beam search as research code writes it: an LSTMCell language model trained a few
steps, then a decoder that keeps a Python list of hypotheses ``(tokens, score, (h, c))``,
expands each with ``log_softmax(...).topk(k)``, sorts the candidates by score with
``sorted``, moves finished ones (EOS) to a separate list, and stops early when every
beam has finished; also a batched beam step with ``view(-1).topk`` and ``//``/``%`` to
recover the beam and token indices."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    SOS, EOS, V, H = 0, 1, 7, 9
    rng = np.random.default_rng(73)
    seqs = [np.concatenate([[SOS], rng.integers(2, V, n), [EOS]]) for n in (2, 4, 3, 5)]

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.cell = nn.LSTMCell(H, H)
            self.out = nn.Linear(H, V)

        def step(self, tokens, state):
            h, c = self.cell(self.emb(tokens), state)
            return F.log_softmax(self.out(h), dim=-1), (h, c)

    model = LM().double()
    shared.model(torch, "lm", model)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    losses = []
    for _step in range(5):
        total = 0
        for s in seqs:
            st = torch.from_numpy(s)
            state = (torch.zeros(1, H, dtype=torch.float64), torch.zeros(1, H, dtype=torch.float64))
            for t in range(len(s) - 1):
                logp, state = model.step(st[t:t + 1], state)
                total = total + F.nll_loss(logp, st[t + 1:t + 2])
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(total.item())

    @torch.no_grad()
    def beam_search(k, max_len):
        zero = torch.zeros(1, H, dtype=torch.float64)
        beams, finished = [([SOS], 0.0, (zero, zero))], []
        for _ in range(max_len):
            candidates = []
            for tokens, score, state in beams:
                logp, new_state = model.step(torch.tensor([tokens[-1]]), state)
                top_lp, top_ix = logp[0].topk(k)
                for lp, ix in zip(top_lp.tolist(), top_ix.tolist()):
                    candidates.append((tokens + [ix], score + lp, new_state))
            candidates = sorted(candidates, key=lambda c: c[1], reverse=True)[:k]
            beams = []
            for cand in candidates:
                (finished if cand[0][-1] == EOS else beams).append(cand)
            if not beams:
                break
        finished += beams
        finished.sort(key=lambda c: c[1] / len(c[0]), reverse=True)
        return [(c[0], c[1]) for c in finished]

    @torch.no_grad()
    def batched_beam(k, steps):
        state = (torch.zeros(k, H, dtype=torch.float64), torch.zeros(k, H, dtype=torch.float64))
        tokens = torch.full((k,), SOS, dtype=torch.long)
        scores = torch.tensor([0.0] + [float("-inf")] * (k - 1), dtype=torch.float64)
        history = tokens.unsqueeze(1)
        for _ in range(steps):
            logp, state = model.step(tokens, state)
            flat = (scores.unsqueeze(1) + logp).view(-1)
            scores, idx = flat.topk(k)
            beam, tokens = idx // V, idx % V
            state = (state[0][beam], state[1][beam])
            history = torch.cat([history[beam], tokens.unsqueeze(1)], dim=1)
        return history.tolist(), np_of(scores)

    hyps = {str(k): beam_search(k, 8) for k in (1, 3)}
    hist, bscores = batched_beam(3, 4)
    return {"losses": losses, "hyps": hyps, "batched": hist, "batched_scores": bscores,
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
