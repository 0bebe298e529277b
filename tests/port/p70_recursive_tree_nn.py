"""A recursive neural network (Socher-style) over binary parse trees built from Python
objects: ``forward`` recurses over the tree, composing children with ``torch.cat`` +
Linear + tanh; each node has a sentiment classifier; the loss sums over all nodes.
Also a second-order check: the gradient norm of the loss w.r.t. the leaf embeddings,
differentiated again with ``autograd.grad(create_graph=True)``."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


class Node:
    def __init__(self, label, word=None, left=None, right=None):
        self.label, self.word, self.left, self.right = label, word, left, right


def _random_tree(rng, lo, hi, V, C):
    if hi - lo == 1:
        return Node(int(rng.integers(C)), word=int(rng.integers(V)))
    mid = int(rng.integers(lo + 1, hi))
    return Node(int(rng.integers(C)), left=_random_tree(rng, lo, mid, V, C),
                right=_random_tree(rng, mid, hi, V, C))


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    V, D, C = 11, 6, 3
    rng = np.random.default_rng(70)
    trees = [_random_tree(rng, 0, n, V, C) for n in (1, 3, 5, 4, 7)]

    class RecNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.compose = nn.Linear(2 * D, D)
            self.cls = nn.Linear(D, C)

        def encode(self, node, logits, labels):
            if node.word is not None:
                h = self.emb(torch.tensor([node.word]))[0]
            else:
                h = torch.tanh(self.compose(torch.cat([self.encode(node.left, logits, labels),
                                                       self.encode(node.right, logits, labels)])))
            logits.append(self.cls(h))
            labels.append(node.label)
            return h

        def forward(self, tree):
            logits, labels = [], []
            root = self.encode(tree, logits, labels)
            return root, torch.stack(logits), torch.tensor(labels)

    model = RecNN().double()
    shared.model(torch, "recnn", model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    losses, roots = [], []
    for _epoch in range(3):
        for tree in trees:
            root, logits, labels = model(tree)
            loss = F.cross_entropy(logits, labels, reduction="sum")
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    # second order: d/dW of ||d loss / d emb||^2
    root, logits, labels = model(trees[-1])
    loss = F.cross_entropy(logits, labels)
    (g_emb,) = torch.autograd.grad(loss, model.emb.weight, create_graph=True)
    penalty = g_emb.pow(2).sum()
    g2 = torch.autograd.grad(penalty, [model.compose.weight, model.cls.bias])
    with torch.no_grad():
        for tree in trees:
            roots.append(np_of(model(tree)[0]))
    return {"losses": losses, "roots": roots, "penalty": penalty.item(),
            "g2": [np_of(g) for g in g2],
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
