"""Memory-augmented nets with data-dependent addressing: a Neural Turing Machine read/write
head (content addressing with ``F.cosine_similarity`` and a ``softplus`` key strength,
interpolation gate, circular shift by a ``softmax`` over {-1, 0, +1} built from
``torch.roll``, sharpening ``w ** gamma / sum``, erase/add write with ``torch.outer``),
and a differentiable neural stack (Grefenstette et al. 2015) whose push/pop strengths
are resolved with ``flip`` + ``cumsum`` + ``clamp``/``relu`` over a growing
``torch.cat``-ed value list; an LSTMCell controller over sequences of varying length."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    D, H, N, M = 3, 10, 6, 4          # input, controller, memory slots, slot width
    rng = np.random.default_rng(84)
    seqs = [torch.from_numpy(rng.standard_normal((n, D))) for n in (3, 5, 4)]
    targets = [torch.from_numpy(rng.standard_normal(D)) for _ in seqs]

    class NTMStack(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctrl = nn.LSTMCell(D + M + M, H)
            self.head = nn.Linear(H, M + 1 + 1 + 3 + 1 + M + M)   # key, beta, g, shift, gamma, erase, add
            self.stack_ctl = nn.Linear(H, 2 + M)                   # push, pop, value
            self.out = nn.Linear(H + M + M, D)
            self.register_buffer("mem0", torch.full((N, M), 1e-2, dtype=torch.float64))

        def address(self, mem, w_prev, key, beta, g, shift, gamma):
            wc = F.softmax(beta * F.cosine_similarity(mem, key.unsqueeze(0), dim=1), dim=0)
            wg = g * wc + (1 - g) * w_prev
            rolled = torch.stack([torch.roll(wg, s) for s in (-1, 0, 1)], dim=0)   # (3, N)
            ws = (shift.unsqueeze(1) * rolled).sum(0)
            w = ws ** gamma
            return w / (w.sum() + 1e-12)

        def forward(self, seq):
            h = c = seq.new_zeros(1, H)
            mem, w = self.mem0.clone(), seq.new_full((N,), 1.0 / N)
            r = seq.new_zeros(M)
            values, strengths, top = seq.new_zeros(0, M), seq.new_zeros(0), seq.new_zeros(M)
            ws = []
            for x in seq:
                h, c = self.ctrl(torch.cat([x, r, top]).unsqueeze(0), (h, c))
                p = self.head(h[0])
                key, beta, g = torch.tanh(p[:M]), F.softplus(p[M]), torch.sigmoid(p[M + 1])
                shift = F.softmax(p[M + 2:M + 5], dim=0)
                gamma = 1 + F.softplus(p[M + 5])
                erase, add = torch.sigmoid(p[M + 6:2 * M + 6]), torch.tanh(p[2 * M + 6:])
                w = self.address(mem, w, key, beta, g, shift, gamma)
                mem = mem * (1 - torch.outer(w, erase)) + torch.outer(w, add)
                r = w @ mem
                ws.append(w)
                # neural stack: pop strength u, push strength d, value v
                s = self.stack_ctl(h[0])
                d, u, v = torch.sigmoid(s[0]), torch.sigmoid(s[1]), torch.tanh(s[2:])
                if strengths.numel():
                    above = torch.flip(torch.cumsum(torch.flip(strengths, [0]), 0), [0]) - strengths
                    strengths = F.relu(strengths - F.relu(u - above))
                values = torch.cat([values, v.unsqueeze(0)])
                strengths = torch.cat([strengths, d.unsqueeze(0)])
                above = torch.flip(torch.cumsum(torch.flip(strengths, [0]), 0), [0]) - strengths
                read_w = torch.minimum(strengths, F.relu(1 - above))
                top = (read_w.unsqueeze(1) * values).sum(0)
            return self.out(torch.cat([h[0], r, top])), torch.stack(ws), strengths

    model = NTMStack().double()
    shared.model(torch, "ntm", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)   # (gamma's gradient is ~1e-13: an
    # adaptive optimizer would blow its rounding noise up to a full step in either library)
    losses = []
    for _step in range(4):
        loss = sum(F.mse_loss(model(s)[0], t) for s, t in zip(seqs, targets))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    out, ws, strengths = model(seqs[1])
    (g,) = torch.autograd.grad(F.mse_loss(out, targets[1]), model.head.weight, create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.stack_ctl.bias)
    return {"losses": losses, "ws": np_of(ws), "strengths": np_of(strengths), "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
