"""A mixed-precision-ready training loop as modern scripts write it:
torch.amp.GradScaler("cpu") with dynamic loss scaling, autocast(enabled=False) on
CPU, scaler.scale(loss).backward(), scaler.unscale_ + clip_grad_norm_, scaler.step,
scaler.update, a step skipped on an inf gradient (scale backs off), and the scaler's
state_dict in the checkpoint."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(39)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    shared.model(torch, "m", model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
    X = torch.from_numpy(rng.standard_normal((16, 4)))
    y = torch.from_numpy(rng.standard_normal((16, 1)))
    out = {"losses": [], "scales": [], "norms": []}
    for step in range(8):
        with torch.autocast(device_type="cpu", enabled=False):
            loss = nn.functional.mse_loss(model(X), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss * (float("inf") if step == 4 else 1.0)).backward()
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        out["losses"].append(loss.item())
        out["scales"].append(scaler.get_scale())
        out["norms"].append(float(norm))
    state = scaler.state_dict()
    out["state"] = {k: state[k] for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")}
    out["params"] = [np_of(p) for p in model.parameters()]
    return out
