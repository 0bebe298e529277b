"""A variable-length sequence classifier: pad_sequence, pack_padded_sequence
(enforce_sorted=False) through a bidirectional GRU, pad_packed_sequence, masked mean
pooling, BCEWithLogitsLoss, Adagrad."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence  # noqa: F401

    rnn_utils = torch.nn.utils.rnn
    rng = np.random.default_rng(4)
    lengths = [5, 2, 7, 3, 6]
    seqs = [torch.from_numpy(rng.standard_normal((L, 3))) for L in lengths]
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0], dtype=torch.float64)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 6, batch_first=True, bidirectional=True)
            self.out = nn.Linear(12, 1)

        def forward(self, padded, lens):
            packed = rnn_utils.pack_padded_sequence(padded, lens, batch_first=True, enforce_sorted=False)
            packed_out, h_n = self.rnn(packed)
            out, out_lens = rnn_utils.pad_packed_sequence(packed_out, batch_first=True)
            mask = (torch.arange(out.size(1))[None, :] < out_lens[:, None]).unsqueeze(-1)
            pooled = (out * mask).sum(1) / out_lens.unsqueeze(1).to(out.dtype)
            return self.out(pooled).squeeze(-1), h_n

    padded = rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=0.0)
    lens = torch.tensor(lengths)
    model = Classifier().double()
    shared.model(torch, "clf", model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    crit = nn.BCEWithLogitsLoss()
    out = {"losses": [], "padded_shape": list(padded.shape)}
    for _step in range(4):
        opt.zero_grad()
        logits, h_n = model(padded, lens)
        loss = crit(logits, labels)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["h_n"] = np_of(h_n)
    out["probs"] = np_of(torch.sigmoid(logits))
    out["weights"] = {k: np_of(v) for k, v in model.state_dict().items()}
    return out
