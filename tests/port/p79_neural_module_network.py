"""A neural module network (Andreas et al. 2016) on a toy visual-QA task: each example
carries its own *program* (a nested tuple such as ``("exists", ("and", ("find", 2),
("find", 0))))``), and ``forward`` assembles the network for that example by
dispatching on the program's operators to modules kept in an ``nn.ModuleDict``
(``find``, ``and``, ``or``, ``relocate``, ``exists``, ``count``), so every example
has a different computation graph; the answer head depends on the program's root."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    N, D, A = 5, 6, 4                          # regions, feature size, concepts
    rng = np.random.default_rng(79)

    class Find(nn.Module):
        def __init__(self):
            super().__init__()
            self.concepts = nn.Embedding(A, D)
            self.proj = nn.Linear(D, D)

        def forward(self, img, arg):
            q = self.concepts.weight[arg]
            return torch.sigmoid(torch.tanh(self.proj(img)) @ q)     # (N,) attention

    class Relocate(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Bilinear(D, D, 1)

        def forward(self, img, att):
            src = (att.unsqueeze(-1) * img).sum(0) / att.sum().clamp(min=1e-6)
            return torch.sigmoid(self.W(img, src.expand_as(img)).squeeze(-1))

    class Exists(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(1, 2)

        def forward(self, att):
            return self.lin(att.max().view(1))

    class Count(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(N, 3)

        def forward(self, att):
            return self.lin(att.sort(descending=True).values)

    class NMN(nn.Module):
        def __init__(self):
            super().__init__()
            self.mods = nn.ModuleDict({"find": Find(), "relocate": Relocate(),
                                       "exists": Exists(), "count": Count()})

        def execute(self, img, prog):
            op = prog[0]
            if op == "find":
                return self.mods["find"](img, prog[1])
            if op == "and":
                return torch.minimum(self.execute(img, prog[1]), self.execute(img, prog[2]))
            if op == "or":
                return torch.maximum(self.execute(img, prog[1]), self.execute(img, prog[2]))
            if op == "relocate":
                return self.mods["relocate"](img, self.execute(img, prog[1]))
            return self.mods[op](self.execute(img, prog[1]))           # answer modules

        def forward(self, img, prog):
            return self.execute(img, prog)

    programs = [("exists", ("find", 1)), ("count", ("and", ("find", 2), ("find", 0))),
                ("exists", ("relocate", ("or", ("find", 3), ("find", 1)))),
                ("count", ("relocate", ("find", 0))), ("exists", ("and", ("find", 1), ("relocate", ("find", 2))))]
    data = [(torch.from_numpy(rng.standard_normal((N, D))), p,
             int(rng.integers(0, 2 if p[0] == "exists" else 3))) for p in programs]

    model = NMN().double()
    shared.model(torch, "nmn", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    losses = []
    for _step in range(5):
        total = 0
        for img, prog, ans in data:
            total = total + F.cross_entropy(model(img, prog).unsqueeze(0), torch.tensor([ans]))
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(total.item())
    with torch.no_grad():
        answers = [model(img, prog).argmax().item() for img, prog, _ in data]
        atts = [np_of(model.execute(img, prog[1])) for img, prog, _ in data]
    img, prog, ans = data[4]
    loss = F.cross_entropy(model(img, prog).unsqueeze(0), torch.tensor([ans]))
    grads = torch.autograd.grad(loss, [model.mods["find"].concepts.weight, model.mods["relocate"].W.weight],
                                create_graph=True)
    (g2,) = torch.autograd.grad(sum(g.pow(2).sum() for g in grads), model.mods["find"].proj.weight)
    return {"losses": losses, "answers": answers, "atts": atts, "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
