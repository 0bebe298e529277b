"""Training-loop schedules: gradient accumulation over micro-batches, AdamW with
OneCycleLR, SGD with CosineAnnealingLR and a warm restart, ReduceLROnPlateau on a
validation loss, early stopping, and the best-model state_dict copy."""

import copy

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(14)
    X = torch.from_numpy(rng.standard_normal((40, 6)))
    w_true = rng.standard_normal((6, 1))
    Y = torch.from_numpy(np.tanh(X.numpy() @ w_true) + 0.05 * rng.standard_normal((40, 1)))
    Xtr, Ytr, Xva, Yva = X[:32], Y[:32], X[32:], Y[32:]
    out = {}

    def make():
        m = nn.Sequential(nn.Linear(6, 12), nn.Softplus(), nn.Linear(12, 1)).double()
        return m

    # 1) gradient accumulation + AdamW + OneCycleLR
    model = shared.model(torch, "m1", make())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    accum, micro = 4, 4
    steps = 32 // (accum * micro) * 3
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-2, total_steps=steps)
    losses, lrs = [], []
    for _epoch in range(3):
        opt.zero_grad()
        for i in range(0, 32, micro):
            loss = nn.functional.mse_loss(model(Xtr[i:i + micro]), Ytr[i:i + micro]) / accum
            loss.backward()
            losses.append(loss.item())
            if (i // micro + 1) % accum == 0:
                opt.step()
                sched.step()
                opt.zero_grad()
                lrs.append(sched.get_last_lr()[0])
    out["accum_losses"] = losses
    out["onecycle_lrs"] = lrs
    out["m1"] = [np_of(p) for p in model.parameters()]

    # 2) SGD + CosineAnnealingWarmRestarts, ReduceLROnPlateau, early stopping, best copy
    model = shared.model(torch, "m2", make())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.8)
    cosine = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-3)
    best, best_state, patience, bad = float("inf"), None, 3, 0
    history = []
    for epoch in range(12):
        model.train()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(Xtr), Ytr)
        loss.backward()
        opt.step()
        cosine.step()
        model.eval()
        with torch.no_grad():
            val = nn.functional.l1_loss(model(Xva), Yva).item()
        history.append((epoch, loss.item(), val, opt.param_groups[0]["lr"]))
        if val < best - 1e-4:
            best, bad = val, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                break
    out["history"] = history
    model.load_state_dict(best_state)
    with torch.no_grad():
        out["best_val"] = nn.functional.l1_loss(model(Xva), Yva).item()

    model = shared.model(torch, "m3", make())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1)
    lrs = []
    for _epoch in range(8):
        opt.zero_grad()
        loss = nn.functional.huber_loss(model(Xtr), Ytr, delta=0.5)
        loss.backward()
        opt.step()
        plateau.step(round(loss.item(), 1))   # coarse metric so the plateau triggers
        lrs.append(opt.param_groups[0]["lr"])
    out["plateau_lrs"] = lrs
    return out
