"""A tagger over an unsorted variable-length batch: ``pack_padded_sequence(...,
enforce_sorted=False)`` + 2-layer bidirectional GRU + ``pad_packed_sequence``
(``total_length``), per-token ``cross_entropy(ignore_index=-100)``; an auxiliary
loss on the sequence-final states backpropagated first with ``retain_graph=True``
and then the main loss through the same graph; a gradient-norm penalty (double
backward, ``create_graph=True``) on the embeddings; ``clip_grad_norm_`` with
``error_if_nonfinite`` and ``foreach`` left default; Adam."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    V, E, H, C = 10, 4, 5, 3
    rng = np.random.default_rng(81)
    lengths = torch.tensor([3, 6, 1, 4, 5])
    T = 7
    tokens = torch.from_numpy(rng.integers(1, V, (5, T)))
    tags = torch.from_numpy(rng.integers(0, C, (5, T)))
    pad = torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)
    tokens = tokens.masked_fill(pad, 0)
    tags = tags.masked_fill(pad, -100)
    aux_target = torch.from_numpy(rng.standard_normal(5))

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.rnn = nn.GRU(E, H, num_layers=2, bidirectional=True, batch_first=True)
            self.tag = nn.Linear(2 * H, C)
            self.aux = nn.Linear(2 * H, 1)

        def forward(self, tokens, lengths):
            e = self.emb(tokens)
            packed = rnn_utils.pack_padded_sequence(e, lengths, batch_first=True, enforce_sorted=False)
            out, h_n = self.rnn(packed)
            padded, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=T)
            final = torch.cat([h_n[-2], h_n[-1]], dim=1)             # last layer, both directions
            return self.tag(padded), self.aux(final).squeeze(-1), out_lens, e

    model = Tagger().double()
    shared.model(torch, "tagger", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses, aux_losses, norms, penalties = [], [], [], []
    for _step in range(5):
        logits, aux, out_lens, e = model(tokens, lengths)
        main = F.cross_entropy(logits.reshape(-1, C), tags.reshape(-1), ignore_index=-100)
        aux_loss = F.mse_loss(aux, aux_target)
        opt.zero_grad()
        (0.5 * aux_loss).backward(retain_graph=True)
        (ge,) = torch.autograd.grad(main, e, create_graph=True, retain_graph=True)
        penalty = ge.pow(2).sum()
        (main + 0.1 * penalty).backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.8, error_if_nonfinite=True).item())
        opt.step()
        losses.append(main.item())
        aux_losses.append(aux_loss.item())
        penalties.append(penalty.item())
    with torch.no_grad():
        logits, aux, out_lens, _ = model(tokens, lengths)
    return {"losses": losses, "aux": aux_losses, "norms": norms, "penalties": penalties,
            "out_lens": out_lens.tolist(), "pred": logits.argmax(-1).masked_fill(pad, -1).tolist(),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
