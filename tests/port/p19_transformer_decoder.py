"""A decoder-only language model with nn.TransformerDecoderLayer over a memory,
nn.Transformer.generate_square_subsequent_mask, tgt_key_padding_mask, a
hand-rolled causal self-attention block with nn.MultiheadAttention
(need_weights=True), weight tying, and sinusoidal position encodings in a buffer."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    V, D, T = 11, 16, 7

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=32):
            super().__init__()
            pe = torch.zeros(max_len, d_model, dtype=torch.float64)
            position = torch.arange(0, max_len, dtype=torch.float64).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).double() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return x + self.pe[:, : x.size(1)]

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = PositionalEncoding(D)
            self.mha = nn.MultiheadAttention(D, num_heads=2, dropout=0.0, batch_first=True)
            self.ln = nn.LayerNorm(D)
            self.dec = nn.TransformerDecoderLayer(D, 2, 32, dropout=0.0, activation="gelu",
                                                  batch_first=True, norm_first=True)
            self.out = nn.Linear(D, V, bias=False)
            self.out.weight = self.emb.weight       # weight tying

        def forward(self, tokens, pad_mask):
            t = tokens.size(1)
            causal = nn.Transformer.generate_square_subsequent_mask(t).to(torch.float64)
            h = self.pos(self.emb(tokens))
            a, w = self.mha(h, h, h, attn_mask=causal, need_weights=True)
            memory = self.ln(h + a)
            causal_bool = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            h = self.dec(h, memory, tgt_mask=causal_bool, tgt_key_padding_mask=pad_mask,
                         memory_key_padding_mask=pad_mask, tgt_is_causal=True)
            return self.out(h), w

    rng = np.random.default_rng(19)
    toks = rng.integers(1, V, (3, T))
    toks[2, 5:] = 0
    tokens = torch.from_numpy(toks)
    pad_mask = tokens == 0
    model = LM().double()
    shared.model(torch, "lm", model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        logits, w = model(tokens[:, :-1], pad_mask[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"losses": losses, "attn_w": np_of(w), "tied": model.out.weight is model.emb.weight,
           "n_params": sum(p.numel() for p in model.parameters()),
           "emb": np_of(model.emb.weight)}
    return out
