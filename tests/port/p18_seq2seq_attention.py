"""A seq2seq model with attention, written with cells: an LSTM encoder
(nn.LSTM, bidirectional=False), a GRUCell decoder unrolled in Python with Luong dot
attention (bmm + softmax + masked_fill on padding), teacher forcing, NLLLoss with
ignore_index, and greedy decoding."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    PAD, SOS = 0, 1
    V, H = 9, 12

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H, padding_idx=PAD)
            self.encoder = nn.LSTM(H, H, batch_first=True)
            self.cell = nn.GRUCell(2 * H, H)
            self.attn_out = nn.Linear(2 * H, H)
            self.proj = nn.Linear(H, V)

        def forward(self, src, tgt_in, teacher=True, max_len=None):
            enc, (h, c) = self.encoder(self.emb(src))
            src_mask = src == PAD
            hidden = h[-1]
            ctx = torch.zeros_like(hidden)
            token = tgt_in[:, 0]
            outputs = []
            steps = tgt_in.size(1) if max_len is None else max_len
            for t in range(steps):
                x = torch.cat([self.emb(token), ctx], dim=-1)
                hidden = self.cell(x, hidden)
                scores = torch.bmm(enc, hidden.unsqueeze(2)).squeeze(2)
                weights = F.softmax(scores.masked_fill(src_mask, -1e9), dim=1)
                ctx = torch.bmm(weights.unsqueeze(1), enc).squeeze(1)
                out = torch.tanh(self.attn_out(torch.cat([hidden, ctx], 1)))
                logp = F.log_softmax(self.proj(out), dim=-1)
                outputs.append(logp)
                if teacher and t + 1 < steps:
                    token = tgt_in[:, t + 1]
                else:
                    token = logp.argmax(-1)
            return torch.stack(outputs, dim=1)

    rng = np.random.default_rng(18)
    src = rng.integers(2, V, (4, 6))
    src[1, 4:] = PAD
    src[3, 3:] = PAD
    tgt = np.flip(src, axis=1).copy()          # learn to reverse
    tgt_in = np.concatenate([np.full((4, 1), SOS), tgt[:, :-1]], axis=1)
    src_t, tgt_t, tgt_in_t = (torch.from_numpy(a) for a in (src, tgt, tgt_in))
    model = Seq2Seq().double()
    shared.model(torch, "s2s", model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    crit = nn.NLLLoss(ignore_index=PAD)
    losses = []
    for _ in range(4):
        logp = model(src_t, tgt_in_t)
        loss = crit(logp.reshape(-1, V), tgt_t.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        greedy = model(src_t, tgt_in_t[:, :1], teacher=False, max_len=6).argmax(-1)
    return {"losses": losses, "greedy": greedy.tolist(), "proj": np_of(model.proj.weight)}
