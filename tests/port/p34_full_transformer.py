"""nn.Transformer as a whole (encoder-decoder, batch_first) for a copy task:
token + sinusoidal-free learned embeddings, generate_square_subsequent_mask for the
target, src/tgt/memory key-padding masks, custom activation callable, greedy decoding
in a Python loop, and the model's state_dict key layout."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    V, D, PAD, BOS = 8, 16, 0, 1

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Embedding(12, D)
            self.tf = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                                     dim_feedforward=24, dropout=0.0, activation=F.silu, batch_first=True)
            self.out = nn.Linear(D, V)

        def embed(self, x):
            return self.emb(x) + self.pos(torch.arange(x.size(1)).unsqueeze(0))

        def forward(self, src, tgt):
            tgt_mask = self.tf.generate_square_subsequent_mask(tgt.size(1), dtype=torch.float64)
            h = self.tf(self.embed(src), self.embed(tgt), tgt_mask=tgt_mask,
                        src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD,
                        memory_key_padding_mask=src == PAD)
            return self.out(h)

    rng = np.random.default_rng(34)
    src = rng.integers(2, V, (3, 5))
    src[2, 3:] = PAD
    tgt_out = src.copy()
    tgt_in = np.concatenate([np.full((3, 1), BOS), src[:, :-1]], 1)
    src_t, tin, tout = (torch.from_numpy(a) for a in (src, tgt_in, tgt_out))
    model = Seq2Seq().double()
    shared.model(torch, "tf", model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        logits = model(src_t, tin)
        loss = F.cross_entropy(logits.reshape(-1, V), tout.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        ys = torch.full((3, 1), BOS, dtype=torch.long)
        for _ in range(5):
            nxt = model(src_t, ys)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], dim=1)
    return {"losses": losses, "decoded": ys.tolist(), "keys": sorted(model.state_dict().keys()),
            "out_w": np_of(model.out.weight)}
