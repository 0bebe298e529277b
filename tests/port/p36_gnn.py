"""A graph neural network written with plain tensor ops, as GNN tutorials do: an
edge_index (2, E) tensor, symmetric degree normalisation with index_add_/bincount-free
scatter_add, message passing with index_select + scatter_add (GCN) and a GAT-style
attention with a per-node softmax built from scatter_reduce(amax), node
classification with a train mask, and graph-level mean pooling."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(36)
    N, Fin, H, C = 7, 4, 6, 3
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 0], [1, 4], [2, 5]])
    edge_index = torch.from_numpy(np.concatenate([edges, edges[:, ::-1]]).T.copy())   # (2, E) both ways
    x = torch.from_numpy(rng.standard_normal((N, Fin)))
    y = torch.from_numpy(rng.integers(0, C, N))
    train_mask = torch.tensor([True, True, False, True, False, True, False])

    def add_self_loops(ei, n):
        loops = torch.arange(n).unsqueeze(0).repeat(2, 1)
        return torch.cat([ei, loops], dim=1)

    class GCNLayer(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.lin = nn.Linear(fin, fout, bias=False)
            self.bias = nn.Parameter(torch.zeros(fout, dtype=torch.float64))

        def forward(self, h, ei):
            ei = add_self_loops(ei, h.size(0))
            src, dst = ei[0], ei[1]
            deg = torch.zeros(h.size(0), dtype=h.dtype).index_add_(0, dst, torch.ones(dst.numel(), dtype=h.dtype))
            norm = deg[src].rsqrt() * deg[dst].rsqrt()
            msg = self.lin(h).index_select(0, src) * norm.unsqueeze(-1)
            out = torch.zeros(h.size(0), msg.size(1), dtype=h.dtype).scatter_add(
                0, dst.unsqueeze(-1).expand_as(msg), msg)
            return out + self.bias

    class GATLayer(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.lin = nn.Linear(fin, fout, bias=False)
            self.att_src = nn.Parameter(torch.from_numpy(rng.standard_normal(fout) * 0.3))
            self.att_dst = nn.Parameter(torch.from_numpy(rng.standard_normal(fout) * 0.3))

        def forward(self, h, ei):
            ei = add_self_loops(ei, h.size(0))
            src, dst = ei
            z = self.lin(h)
            e = F.leaky_relu((z * self.att_src).sum(-1)[src] + (z * self.att_dst).sum(-1)[dst], 0.2)
            emax = torch.full((h.size(0),), float("-inf"), dtype=h.dtype).scatter_reduce(
                0, dst, e, reduce="amax", include_self=True)
            w = (e - emax[dst]).exp()
            denom = torch.zeros(h.size(0), dtype=h.dtype).scatter_add(0, dst, w)
            alpha = w / denom[dst]
            return torch.zeros_like(z).index_add(0, dst, z[src] * alpha.unsqueeze(-1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gcn = GCNLayer(Fin, H)
            self.gat = GATLayer(H, H)
            self.cls = nn.Linear(H, C)

        def forward(self, h, ei):
            h = F.elu(self.gcn(h, ei))
            h = F.elu(self.gat(h, ei))
            return self.cls(h), h.mean(0)

    model = Net().double()
    shared.model(torch, "gnn", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    losses = []
    for _ in range(5):
        logits, g = model(x, edge_index)
        loss = F.cross_entropy(logits[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits, g = model(x, edge_index)
        acc = (logits.argmax(1)[~train_mask] == y[~train_mask]).double().mean().item()
    return {"losses": losses, "logits": np_of(logits), "graph_emb": np_of(g), "acc": acc,
            "att": np_of(model.gat.att_src)}
