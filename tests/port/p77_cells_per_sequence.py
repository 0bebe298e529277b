"""A variable-length batch processed one sequence at a time, the way people write it
before reaching for packing: a Python loop over the examples, an inner loop over each
sequence's own length with ``nn.LSTMCell`` (stacked 2 layers) and ``nn.GRUCell``, the
final states ``torch.stack``ed into a batch, concatenated and classified;
``CrossEntropyLoss`` + SGD with Nesterov momentum and a ``StepLR`` schedule."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    D, H, C = 3, 6, 3
    rng = np.random.default_rng(77)
    lengths = [4, 1, 6, 3, 5, 2]
    seqs = [torch.from_numpy(rng.standard_normal((n, D))) for n in lengths]
    labels = torch.from_numpy(rng.integers(0, C, len(seqs)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.LSTMCell(D, H)
            self.l2 = nn.LSTMCell(H, H)
            self.gru = nn.GRUCell(D, H)
            self.cls = nn.Linear(2 * H, C)

        def encode(self, seq):
            h1 = c1 = h2 = c2 = g = seq.new_zeros(1, H)
            for x in seq:                     # iterate over time steps
                h1, c1 = self.l1(x.unsqueeze(0), (h1, c1))
                h2, c2 = self.l2(h1, (h2, c2))
                g = self.gru(x.unsqueeze(0), g)
            return torch.cat([h2, g], dim=1).squeeze(0)

        def forward(self, batch):
            return self.cls(torch.stack([self.encode(s) for s in batch]))

    model = Net().double()
    shared.model(torch, "cells", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    crit = nn.CrossEntropyLoss()
    losses, lrs = [], []
    for _step in range(5):
        for i in (0, 3):
            loss = crit(model(seqs[i:i + 3]), labels[i:i + 3])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    loss = crit(model(seqs), labels)
    grads = torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
    gnorm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
    (g2,) = torch.autograd.grad(gnorm, model.gru.weight_hh)
    with torch.no_grad():
        logits = model(seqs)
    return {"losses": losses, "lrs": lrs, "logits": np_of(logits), "gnorm": gnorm.item(),
            "g2": np_of(g2), "params": {k: np_of(v) for k, v in model.state_dict().items()}}
