"""Dynamic models that write states into preallocated tensors in place, as a lot of
research code does: a batched variable-length RNN over a padded batch that keeps
finished sequences' states with ``torch.where(mask, new, old)`` and writes each step's
output with ``outputs[t] = h`` (``copy_`` through indexing on a non-leaf); a level-by-level
batched Tree-RNN that fills a node-state table with ``index_copy`` and reads children
with ``index_select`` + ``index_add``; an external memory updated in place under
``no_grad`` (an ``nn.Module`` buffer); and the first-order + second-order gradients."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    D, H = 3, 5
    rng = np.random.default_rng(82)
    lengths = torch.tensor([4, 2, 5, 1])
    B, T = 4, 5
    x = torch.from_numpy(rng.standard_normal((T, B, D)))
    y = torch.from_numpy(rng.standard_normal((B, H)))
    # a forest of 2 trees, nodes listed bottom-up by level; children as (parent, child) pairs
    levels = [torch.tensor([0, 1, 2, 3, 4]), torch.tensor([5, 6]), torch.tensor([7])]
    pairs = torch.tensor([[5, 0], [5, 1], [6, 2], [6, 3], [6, 4], [7, 5], [7, 6]])
    words = torch.from_numpy(rng.standard_normal((8, D)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.RNNCell(D, H)
            self.tree_in = nn.Linear(D, H)
            self.tree_child = nn.Linear(H, H, bias=False)
            self.register_buffer("memory", torch.zeros(3, H, dtype=torch.float64))
            self.head = nn.Linear(2 * H, H)

        def seq(self, x, lengths):
            h = x.new_zeros(B, H)
            outputs = x.new_zeros(T, B, H)
            for t in range(T):
                alive = (lengths > t).unsqueeze(1)
                h = torch.where(alive, self.cell(x[t], h), h)
                outputs[t] = h * alive
            return outputs, h

        def tree(self, words):
            states = words.new_zeros(words.size(0), H)
            for nodes in levels:
                child_sum = words.new_zeros(words.size(0), H)
                parents, children = pairs[:, 0], pairs[:, 1]
                child_sum = child_sum.index_add(0, parents, states.index_select(0, children))
                new = torch.tanh(self.tree_in(words[nodes]) + self.tree_child(child_sum[nodes]))
                states = states.index_copy(0, nodes, new)
            return states

        def forward(self, x, lengths, words):
            outputs, h = self.seq(x, lengths)
            states = self.tree(words)
            root = states[7].expand(B, H)
            out = self.head(torch.cat([h, root], 1))
            with torch.no_grad():                       # slot memory, written in place
                self.memory.mul_(0.9).add_(0.1 * out[:3].detach())
            return out + self.memory.sum(0), outputs

    model = Net().double()
    shared.model(torch, "inplace", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _step in range(5):
        out, outputs = model(x, lengths, words)
        loss = F.mse_loss(out, y) + 0.1 * outputs.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out, outputs = model(x, lengths, words)
    loss = F.mse_loss(out, y)
    g = torch.autograd.grad(loss, [model.cell.weight_hh, model.tree_child.weight], create_graph=True)
    (g2,) = torch.autograd.grad(sum(v.pow(2).sum() for v in g), model.tree_in.weight)
    return {"losses": losses, "outputs": np_of(outputs), "memory": np_of(model.memory),
            "g": [np_of(v) for v in g], "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
