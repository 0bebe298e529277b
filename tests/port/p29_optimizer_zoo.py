"""Every optimizer and LR scheduler a training script commonly picks, with their
usual options, each driving the same small regression for a few steps; losses,
learning rates and final weights compared."""

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
        ("sgd", lambda p: optim.SGD(p, lr=0.05), None),
        ("sgd_mom_damp_wd", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3), None),
        ("sgd_maximize", lambda p: optim.SGD(p, lr=0.01, momentum=0.5, maximize=True), None),
        ("adam_wd", lambda p: optim.Adam(p, lr=0.01, weight_decay=1e-2), None),
        ("adamw_amsgrad", lambda p: optim.AdamW(p, lr=0.01, amsgrad=True), None),
        ("adagrad", lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1), None),
        ("rmsprop_centered", lambda p: optim.RMSprop(p, lr=0.01, centered=True, momentum=0.9), None),
        ("adadelta", lambda p: optim.Adadelta(p, lr=1.0, rho=0.8), None),
        ("adamax", lambda p: optim.Adamax(p, lr=0.02), None),
        ("nadam", lambda p: optim.NAdam(p, lr=0.02), None),
        ("multistep", lambda p: optim.SGD(p, lr=0.1), lambda o: S.MultiStepLR(o, milestones=[2, 4], gamma=0.5)),
        ("cosine", lambda p: optim.SGD(p, lr=0.1), lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.01)),
        ("linear", lambda p: optim.Adam(p, lr=0.01), lambda o: S.LinearLR(o, start_factor=0.25, total_iters=3)),
        ("constant", lambda p: optim.Adam(p, lr=0.01), lambda o: S.ConstantLR(o, factor=0.5, total_iters=2)),
        ("multiplicative", lambda p: optim.SGD(p, lr=0.1), lambda o: S.MultiplicativeLR(o, lambda e: 0.8)),
        ("sequential", lambda p: optim.SGD(p, lr=0.1),
         lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=2),
                                      S.ExponentialLR(o, gamma=0.7)], milestones=[2])),
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
