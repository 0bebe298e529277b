"""A hand-written optimizer (Adam with decoupled weight decay, written the way
people subclass torch.optim.Optimizer: defaults, per-parameter self.state, in-place
mul_/add_/addcmul_/addcdiv_/lerp_ under @torch.no_grad()), a custom LR schedule via
lr_scheduler.LambdaLR on it, and an EMA copy of the weights."""

import copy
import math

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn

    class MyAdamW(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    state["step"] += 1
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    bias_correction1 = 1 - beta1 ** state["step"]
                    bias_correction2 = 1 - beta2 ** state["step"]
                    step_size = group["lr"] / bias_correction1
                    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                    p.addcdiv_(exp_avg, denom, value=-step_size)
            return loss

    rng = np.random.default_rng(23)
    X = torch.from_numpy(rng.standard_normal((24, 4)))
    y = torch.from_numpy(rng.standard_normal((24, 2)))
    model = nn.Sequential(nn.Linear(4, 8), nn.Mish(), nn.Linear(8, 2)).double()
    shared.model(torch, "m", model)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = MyAdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / 6)))
    losses, lrs = [], []
    for _ in range(6):
        def closure():
            opt.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(X), y, beta=0.5)
            loss.backward()
            return loss

        loss = opt.step(closure)
        sched.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters(), strict=True):
                e.mul_(0.9).add_(p, alpha=0.1)
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    state = opt.state_dict()
    return {"losses": losses, "lrs": lrs, "params": [np_of(p) for p in model.parameters()],
            "ema": [np_of(p) for p in ema.parameters()],
            "state_steps": [s["step"] for s in state["state"].values()],
            "exp_avg_sq": np_of(opt.state[model[0].weight]["exp_avg_sq"])}
