"""Autograd idioms: a custom autograd.Function (clamp with a straight-through
gradient), a WGAN-style gradient penalty with autograd.grad(create_graph=True),
register_hook on an intermediate and on a leaf, retain_grad, and a Hessian-vector
product."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn

    class StraightThroughClamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lo, hi):
            ctx.save_for_backward(x)
            ctx.lo, ctx.hi = lo, hi
            return x.clamp(min=lo, max=hi)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            # pass gradients straight through, but damp them outside the range
            outside = (x < ctx.lo) | (x > ctx.hi)
            return grad_output * torch.where(outside, 0.1, 1.0).to(grad_output.dtype), None, None

    rng = np.random.default_rng(6)
    out = {}
    x = torch.from_numpy(rng.standard_normal((3, 4)) * 2).requires_grad_(True)
    y = StraightThroughClamp.apply(x, -1.0, 1.0)
    (y * torch.arange(12, dtype=torch.float64).view(3, 4)).sum().backward()
    out["ste_y"] = np_of(y)
    out["ste_grad"] = np_of(x.grad)

    # gradient penalty on a small critic
    critic = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)).double()
    shared.model(torch, "critic", critic)
    opt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    real = torch.from_numpy(rng.standard_normal((6, 4)) + 1)
    fake = torch.from_numpy(rng.standard_normal((6, 4)))
    alpha = torch.from_numpy(rng.uniform(size=(6, 1)))
    losses = []
    for _step in range(3):
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        score = critic(interp)
        grads = torch.autograd.grad(outputs=score, inputs=interp,
                                    grad_outputs=torch.ones_like(score),
                                    create_graph=True, retain_graph=True)[0]
        gp = ((grads.norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["gp_losses"] = losses
    out["critic"] = [np_of(p) for p in critic.parameters()]

    # hooks
    seen = []
    w = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    h = w * 2
    h.retain_grad()
    h.register_hook(lambda g: seen.append(g.tolist()))
    w.register_hook(lambda g: g * 0.5)  # a leaf hook may replace the gradient
    (h ** 2).sum().backward()
    out["hook_seen"] = seen
    out["h_grad"] = h.grad.tolist()
    out["w_grad"] = w.grad.tolist()

    # Hessian-vector product via double backward
    p = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    f = (p ** 3).sum() + (p[0] * p[1] * p[2])
    (g,) = torch.autograd.grad(f, p, create_graph=True)
    v = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    (hv,) = torch.autograd.grad(g @ v, p)
    out["hvp"] = hv.tolist()
    out["requires_grad"] = [g.requires_grad, hv.requires_grad, h.is_leaf, w.is_leaf]
    return out
