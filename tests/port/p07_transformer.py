"""A Transformer encoder classifier (TransformerEncoderLayer(batch_first=True),
src_key_padding_mask, learned positions, [CLS] pooling), AdamW + LambdaLR warmup;
and F.scaled_dot_product_attention with a causal mask against a hand-written one."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    vocab, d_model, max_len = 12, 16, 9

    class EncoderClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model, padding_idx=0)
            self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
            layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=32, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, 2)

        def forward(self, tokens):
            pad_mask = tokens == 0
            h = self.tok(tokens) * math.sqrt(d_model) + self.pos[:, : tokens.size(1)]
            h = self.encoder(h, src_key_padding_mask=pad_mask)
            return self.head(self.norm(h[:, 0]))

    lengths = [9, 4, 6, 7]
    toks = np.zeros((4, max_len), dtype=np.int64)
    for i, L in enumerate(lengths):
        toks[i, :L] = rng.integers(1, vocab, L)
    tokens = torch.from_numpy(toks)
    y = torch.tensor([0, 1, 1, 0])
    model = EncoderClassifier().double()
    with torch.no_grad():
        model.pos.copy_(torch.from_numpy(rng.standard_normal((1, max_len, d_model)) * 0.1))
    shared.model(torch, "enc", model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 3))
    out = {"losses": [], "lr": []}
    for _step in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens), y)
        loss.backward()
        opt.step()
        sched.step()
        out["losses"].append(loss.item())
        out["lr"].append(opt.param_groups[0]["lr"])
    out["head"] = np_of(model.head.weight)

    # scaled_dot_product_attention vs the written-out formula
    q = torch.from_numpy(rng.standard_normal((2, 4, 5, 8))).requires_grad_()
    k = torch.from_numpy(rng.standard_normal((2, 4, 5, 8)))
    v = torch.from_numpy(rng.standard_normal((2, 4, 5, 8)))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    causal = torch.triu(torch.ones(5, 5), diagonal=1).bool()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    manual = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v
    (a.sum() + (manual ** 2).sum()).backward()
    out["sdpa"] = np_of(a)
    out["sdpa_matches_manual"] = bool(torch.allclose(a, manual))
    out["q_grad"] = np_of(q.grad)
    return out
