"""An end-to-end memory network (Sukhbaatar et al. 2015) for bAbI-style QA: stories with
a variable number of sentences, bag-of-words sentence encodings with position
encoding, padded memories with a mask, a Python loop of ``HOPS`` hops of attention
computed with ``torch.bmm`` (adjacent weight tying: A_{k+1} = C_k, kept in an
``nn.ModuleList``), temporal encoding, and an answer softmax; SGD with
``clip_grad_norm_`` and a learning rate halved by ``MultiStepLR``."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    V, D, HOPS, MAXM, W = 10, 6, 3, 5, 4
    rng = np.random.default_rng(80)

    def story():
        n = int(rng.integers(2, MAXM + 1))
        s = np.zeros((MAXM, W), dtype=np.int64)
        for i in range(n):
            k = int(rng.integers(1, W + 1))
            s[i, :k] = rng.integers(1, V, k)
        return s, n

    stories = [story() for _ in range(6)]
    mem = torch.from_numpy(np.stack([s for s, _ in stories]))            # (B, M, W)
    counts = torch.tensor([n for _, n in stories])
    q = torch.from_numpy(rng.integers(1, V, (6, W)))
    ans = torch.from_numpy(rng.integers(0, V, 6))

    J = torch.arange(1, W + 1, dtype=torch.float64).unsqueeze(0)
    K = torch.arange(1, D + 1, dtype=torch.float64).unsqueeze(1)
    pos_enc = ((1 - J / W) - (K / D) * (1 - 2 * J / W)).t()               # (W, D)

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            self.embs = nn.ModuleList([nn.Embedding(V, D, padding_idx=0) for _ in range(HOPS + 1)])
            self.temporal = nn.ParameterList([nn.Parameter(torch.zeros(MAXM, D, dtype=torch.float64))
                                              for _ in range(HOPS + 1)])
            self.out = nn.Linear(D, V, bias=False)

        def encode(self, k, words):
            return (self.embs[k](words) * pos_enc).sum(-2)

        def forward(self, mem, counts, q):
            mask = torch.arange(MAXM).unsqueeze(0) < counts.unsqueeze(1)     # (B, M)
            u = self.encode(0, q)                                            # (B, D)
            attns = []
            for k in range(HOPS):
                m = self.encode(k, mem) + self.temporal[k]                   # (B, M, D)
                c = self.encode(k + 1, mem) + self.temporal[k + 1]
                scores = torch.bmm(m, u.unsqueeze(2)).squeeze(2)
                p = F.softmax(scores.masked_fill(~mask, -1e30), dim=1)
                o = torch.bmm(p.unsqueeze(1), c).squeeze(1)
                u = u + o
                attns.append(p)
            return self.out(u), torch.stack(attns, 1)

    model = MemN2N().double()
    shared.model(torch, "memn2n", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 5], gamma=0.5)
    losses, norms = [], []
    for _step in range(6):
        logits, _ = model(mem, counts, q)
        loss = F.cross_entropy(logits, ans)
        opt.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        sched.step()
        losses.append(loss.item())
    logits, attns = model(mem, counts, q)
    loss = F.cross_entropy(logits, ans)
    (g,) = torch.autograd.grad(loss, model.temporal[1], create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.embs[2].weight)
    return {"losses": losses, "norms": norms, "attns": np_of(attns), "g2": np_of(g2),
            "pred": logits.argmax(1).tolist(),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
