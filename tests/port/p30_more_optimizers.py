"""The less common optimizers and schedulers (RAdam, Rprop, ASGD, PolynomialLR,
CyclicLR, ChainedScheduler), driving the same small regression as p29."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    optim = torch.optim
    S = torch.optim.lr_scheduler
    rng = np.random.default_rng(29)
    X = torch.from_numpy(rng.standard_normal((16, 3)))
    Y = torch.from_numpy(rng.standard_normal((16, 2)))
    configs = [
        ("radam", lambda p: optim.RAdam(p, lr=0.01), None),
        ("rprop", lambda p: optim.Rprop(p, lr=0.01), None),
        ("asgd", lambda p: optim.ASGD(p, lr=0.01), None),
        ("poly", lambda p: optim.SGD(p, lr=0.1), lambda o: S.PolynomialLR(o, total_iters=5, power=2.0)),
        ("cyclic", lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
         lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2)),
        ("chained", lambda p: optim.SGD(p, lr=0.1),
         lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)])),
    ]
    out = {}
    for name, make_opt, make_sched in configs:
        model = shared.model(torch, name, nn.Linear(3, 2).double())
        opt = make_opt(model.parameters())
        sched = make_sched(opt) if make_sched else None
        losses, lrs = [], []
        for _ in range(6):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(X), Y)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
            lrs.append(opt.param_groups[0]["lr"])
        out[name] = {"losses": losses, "lrs": lrs, "w": np_of(model.weight), "b": np_of(model.bias)}
    return out
