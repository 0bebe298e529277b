"""A message-passing neural network (Gilmer et al.) over a dataset of small molecules-like
graphs, each with its own node count and edge list (so every sample has a different
graph): edge-conditioned messages, aggregation with ``index_add_`` and
``scatter_add_`` into fresh zero tensors, a GRUCell node update for a fixed number of
rounds, and a readout with a per-graph ``index_add`` sum pooling over a batched
(concatenated) graph with a ``batch`` vector; trained with Adam, clipping by value."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    Fn, Fe, H, ROUNDS = 3, 2, 6, 3
    rng = np.random.default_rng(75)
    graphs = []
    for n in (3, 5, 4, 6):
        m = int(rng.integers(n, 2 * n))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        graphs.append({"x": torch.from_numpy(rng.standard_normal((n, Fn))),
                       "ei": torch.from_numpy(np.stack([src, dst])),
                       "ea": torch.from_numpy(rng.standard_normal((m, Fe))),
                       "y": float(rng.standard_normal())})

    class MPNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(Fn, H)
            self.edge_net = nn.Sequential(nn.Linear(Fe, 16), nn.ReLU(), nn.Linear(16, H * H))
            self.update = nn.GRUCell(H, H)
            self.readout = nn.Linear(H, 1)

        def forward(self, x, ei, ea, batch, num_graphs):
            h = torch.relu(self.inp(x))
            W = self.edge_net(ea).view(-1, H, H)                  # one matrix per edge
            src, dst = ei[0], ei[1]
            deg = torch.zeros(x.size(0), dtype=x.dtype)
            deg.index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
            for _ in range(ROUNDS):
                msg = torch.bmm(W, h[src].unsqueeze(-1)).squeeze(-1)
                agg = torch.zeros_like(h)
                agg.scatter_add_(0, dst.unsqueeze(1).expand(-1, H), msg)
                agg = agg / deg.clamp(min=1).unsqueeze(1)
                h = self.update(agg, h)
            pooled = torch.zeros(num_graphs, H, dtype=h.dtype).index_add(0, batch, h)
            return self.readout(pooled).squeeze(-1)

    def collate(gs):
        xs, eis, eas, batch, off = [], [], [], [], 0
        for i, g in enumerate(gs):
            xs.append(g["x"])
            eis.append(g["ei"] + off)
            eas.append(g["ea"])
            batch.append(torch.full((g["x"].size(0),), i, dtype=torch.long))
            off += g["x"].size(0)
        return torch.cat(xs), torch.cat(eis, 1), torch.cat(eas), torch.cat(batch), len(gs)

    model = MPNN().double()
    shared.model(torch, "mpnn", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(6):
        gs = graphs[step % 2 * 2: step % 2 * 2 + 2] if step < 4 else graphs
        y = torch.tensor([g["y"] for g in gs], dtype=torch.float64)
        loss = F.smooth_l1_loss(model(*collate(gs)), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        losses.append(loss.item())
    # second order through index_add_/scatter_add_/bmm
    out = model(*collate(graphs)).sum()
    (g,) = torch.autograd.grad(out, model.readout.weight, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), model.inp.weight)
    with torch.no_grad():
        single = [model(g["x"], g["ei"], g["ea"], torch.zeros(g["x"].size(0), dtype=torch.long), 1).item()
                  for g in graphs]
    return {"losses": losses, "single": single, "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
