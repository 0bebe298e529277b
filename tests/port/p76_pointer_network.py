"""A pointer network (Vinyals et al. 2015) that learns to sort variable-size sets of
numbers: an LSTM encoder over each set (one set at a time, sizes differ), an
LSTMCell decoder whose additive attention over the inputs is the output distribution,
already-chosen positions masked with ``masked_fill(mask, float('-inf'))``, and
``log_softmax``; training with teacher forcing, then greedy pointing with a mask
that grows by ``index_fill`` / in-place bool assignment."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    H = 8
    rng = np.random.default_rng(76)
    sets = [rng.uniform(0, 1, n) for n in (3, 5, 4, 6, 2)]

    class PtrNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(1, H)
            self.enc = nn.LSTM(H, H, batch_first=True)
            self.dec = nn.LSTMCell(H, H)
            self.W1 = nn.Linear(H, H, bias=False)
            self.W2 = nn.Linear(H, H, bias=False)
            self.v = nn.Parameter(torch.linspace(-0.5, 0.5, H, dtype=torch.float64))
            self.start = nn.Parameter(torch.zeros(H, dtype=torch.float64))

        def forward(self, xs, order=None):
            n = xs.size(0)
            e = self.embed(xs.unsqueeze(-1)).unsqueeze(0)           # (1, n, H)
            enc, (h, c) = self.enc(e)
            enc = enc[0]
            state = (h[0], c[0])
            inp = self.start.unsqueeze(0)
            mask = torch.zeros(n, dtype=torch.bool)
            logps, picks = [], []
            keys = self.W1(enc)
            for t in range(n):
                state = self.dec(inp, state)
                scores = torch.tanh(keys + self.W2(state[0])) @ self.v
                logp = F.log_softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
                idx = order[t] if order is not None else int(logp.argmax())
                logps.append(logp)
                picks.append(idx)
                mask = mask.clone()
                mask[idx] = True
                inp = e[0, idx].unsqueeze(0)
            return torch.stack(logps), picks

    model = PtrNet().double()
    shared.model(torch, "ptr", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _step in range(4):
        total = 0
        for s in sets:
            order = np.argsort(s).tolist()
            logps, _ = model(torch.from_numpy(s), order)
            # masked entries are -inf; nll only reads the target entries
            total = total + F.nll_loss(logps, torch.tensor(order))
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(total.item())
    with torch.no_grad():
        outs = [model(torch.from_numpy(s)) for s in sets]
    finite = [np_of(torch.where(torch.isinf(lp), torch.zeros_like(lp), lp)) for lp, _ in outs]
    ninf = [int(torch.isinf(lp).sum()) for lp, _ in outs]
    # second order through masked log_softmax
    lp, _ = model(torch.from_numpy(sets[1]), np.argsort(sets[1]).tolist())
    loss = F.nll_loss(lp, torch.tensor(np.argsort(sets[1]).tolist()))
    (g,) = torch.autograd.grad(loss, model.v, create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.W2.weight)
    return {"losses": losses, "picks": [p for _, p in outs], "logps": finite, "ninf": ninf,
            "g2": np_of(g2), "params": {k: np_of(v) for k, v in model.state_dict().items()}}
