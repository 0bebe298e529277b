"""A Child-Sum Tree-LSTM (Tai et al. 2015) over n-ary trees with a variable number of
children: children's hidden states are ``torch.stack``ed and summed, one forget gate per
child, leaves use zero states (``new_zeros``); nodes are processed bottom-up by recursion,
and the root predicts a regression target (MSE) with gradient clipping by norm."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


class Tree:
    def __init__(self, word, children):
        self.word, self.children = word, children


def _tree(rng, depth, V):
    k = 0 if depth == 0 else int(rng.integers(0, 4))
    return Tree(int(rng.integers(V)), [_tree(rng, depth - 1, V) for _ in range(k)])


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    V, X, H = 9, 5, 7
    rng = np.random.default_rng(71)
    trees = [_tree(rng, d, V) for d in (0, 1, 2, 3, 2, 3)]
    targets = torch.from_numpy(rng.standard_normal(len(trees)))

    class ChildSumTreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, X)
            self.W_iou = nn.Linear(X, 3 * H)
            self.U_iou = nn.Linear(H, 3 * H, bias=False)
            self.W_f = nn.Linear(X, H)
            self.U_f = nn.Linear(H, H, bias=False)
            self.out = nn.Linear(H, 1)

        def node(self, tree):
            x = self.emb.weight[tree.word]
            if tree.children:
                states = [self.node(ch) for ch in tree.children]
                child_h = torch.stack([h for h, _ in states])        # (k, H)
                child_c = torch.stack([c for _, c in states])
            else:
                child_h = x.new_zeros(1, H)
                child_c = x.new_zeros(1, H)
            h_sum = torch.sum(child_h, dim=0)
            i, o, u = torch.chunk(self.W_iou(x) + self.U_iou(h_sum), 3, dim=-1)
            i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
            f = torch.sigmoid(self.W_f(x).unsqueeze(0) + self.U_f(child_h))  # one gate per child
            c = i * u + (f * child_c).sum(0)
            h = o * torch.tanh(c)
            return h, c

        def forward(self, tree):
            h, _ = self.node(tree)
            return self.out(h).squeeze(-1)

    model = ChildSumTreeLSTM().double()
    shared.model(torch, "treelstm", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, norms = [], []
    for _epoch in range(3):
        for tree, y in zip(trees, targets):
            loss = F.mse_loss(model(tree), y)
            opt.zero_grad()
            loss.backward()
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), 0.5)))
            opt.step()
            losses.append(loss.item())
    # second order through the recursion: Hessian-vector product on the output layer
    loss = sum(F.mse_loss(model(t), y) for t, y in zip(trees, targets))
    (g,) = torch.autograd.grad(loss, model.out.weight, create_graph=True)
    (hv,) = torch.autograd.grad((g * torch.ones_like(g)).sum(), model.U_f.weight)
    with torch.no_grad():
        preds = torch.stack([model(t) for t in trees])
    return {"losses": losses, "norms": norms, "preds": np_of(preds), "hv": np_of(hv),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
