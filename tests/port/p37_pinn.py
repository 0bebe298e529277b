"""A physics-informed network: u(x, t) by an MLP with Tanh, PDE residual of the heat
equation u_t = k u_xx from torch.autograd.grad(create_graph=True) twice on the
inputs, boundary/initial losses, Adam; plus a Jacobian with autograd.functional."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(37)
    net = nn.Sequential(nn.Linear(2, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 1)).double()
    shared.model(torch, "pinn", net)
    k = 0.1
    xc = torch.from_numpy(rng.uniform(0, 1, (20, 1))).requires_grad_(True)
    tc = torch.from_numpy(rng.uniform(0, 1, (20, 1))).requires_grad_(True)
    xb = torch.from_numpy(rng.uniform(0, 1, (8, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    out = {"losses": []}
    for _ in range(4):
        u = net(torch.cat([xc, tc], dim=1))
        u_x, u_t = torch.autograd.grad(u, (xc, tc), grad_outputs=torch.ones_like(u), create_graph=True)
        u_xx = torch.autograd.grad(u_x.sum(), xc, create_graph=True)[0]
        residual = u_t - k * u_xx
        u0 = net(torch.cat([xb, torch.zeros_like(xb)], 1))
        ub = net(torch.cat([torch.cat([torch.zeros(4, 1, dtype=torch.float64), torch.ones(4, 1, dtype=torch.float64)]),
                            xb[:8]], 1))
        loss = residual.pow(2).mean() + (u0 - torch.sin(math.pi * xb)).pow(2).mean() + ub.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["u_xx"] = np_of(u_xx)
    jac = torch.autograd.functional.jacobian(lambda inp: net(inp).squeeze(-1), torch.cat([xb, xb], 1)[:3])
    out["jac"] = np_of(jac)
    hess = torch.autograd.functional.hessian(lambda inp: net(inp.unsqueeze(0)).sum(), torch.tensor([0.3, 0.7], dtype=torch.float64))
    out["hess"] = np_of(hess)
    return out
