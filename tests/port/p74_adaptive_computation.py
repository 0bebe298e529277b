"""Dynamic depth: an adaptive-computation-time (Graves 2016) cell that ponders a
data-dependent number of steps per example, halting when the accumulated halting
probability crosses ``1 - eps`` (a Python ``while`` on a tensor condition,
``.item()``), with the remainder trick and a ponder cost; plus a residual net that
applies a shared block until the update norm falls below a threshold (early exit)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    D, H, EPS, MAX_STEPS = 4, 8, 0.01, 6
    rng = np.random.default_rng(74)
    X = torch.from_numpy(rng.standard_normal((6, D)) * 3)
    Y = torch.from_numpy(rng.standard_normal(6))

    class ACT(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.RNNCell(D + 1, H)
            self.halt = nn.Linear(H, 1)
            self.halt_scale = 3.0
            self.out = nn.Linear(H, 1)
            self.block = nn.Sequential(nn.Linear(H, H), nn.Tanh())

        def forward(self, x):
            h = x.new_zeros(H)
            acc_h, acc_p, n, remainder = torch.zeros_like(h), x.new_zeros(()), 0, None
            while True:
                first = x.new_tensor([1.0 if n == 0 else 0.0])
                h = self.cell(torch.cat([x, first]).unsqueeze(0), h.unsqueeze(0)).squeeze(0)
                p = torch.sigmoid(self.halt_scale * self.halt(h) - 1.5).squeeze()
                n += 1
                if (acc_p + p).item() > 1 - EPS or n == MAX_STEPS:
                    remainder = 1 - acc_p
                    acc_h = acc_h + remainder * h
                    break
                acc_p = acc_p + p
                acc_h = acc_h + p * h
            # early-exit refinement: shared residual block until the update is small
            depth = 0
            while depth < 5:
                delta = self.block(acc_h)
                acc_h = acc_h + 0.5 * delta
                depth += 1
                if delta.norm() < 1.6:
                    break
            return self.out(acc_h).squeeze(), n + remainder, n, depth

    model = ACT().double()
    shared.model(torch, "act", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses, steps, depths = [], [], []
    for _step in range(5):
        total = 0
        for x, y in zip(X, Y):
            pred, ponder, n, depth = model(x)
            total = total + F.mse_loss(pred, y) + 0.01 * ponder
            steps.append(n)
            depths.append(depth)
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(total.item())
    # second order: gradient penalty on the input through the data-dependent loop
    x = X[0].clone().requires_grad_(True)
    pred, ponder, _, _ = model(x)
    (gx,) = torch.autograd.grad(pred, x, create_graph=True)
    gp = torch.autograd.grad(gx.pow(2).sum(), model.halt.weight, allow_unused=True)[0]
    return {"losses": losses, "steps": steps, "depths": depths, "gx": np_of(gx),
            "gp": None if gp is None else np_of(gp),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
