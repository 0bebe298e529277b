"""Grad-mode switches inside training loops: `no_grad` for metrics and EMA updates,
`enable_grad` inside `no_grad`, `set_grad_enabled(False)` as a call and as a context,
`requires_grad_()` toggling, `inference_mode`, decorators, `is_grad_enabled`."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-10


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(3)
    X = torch.from_numpy(rng.standard_normal((16, 4)))
    y = torch.from_numpy(rng.standard_normal((16, 1)))
    model = shared.model(torch, "lin", nn.Linear(4, 1).double())
    ema = shared.model(torch, "ema", nn.Linear(4, 1).double())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = {"loss": [], "metric": [], "flags": []}
    for _ in range(4):
        loss = ((model(X) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            out["metric"].append((model(X) - y).abs().mean().item())
            for pe, pm in zip(ema.parameters(), model.parameters(), strict=True):
                pe.mul_(0.5).add_(pm, alpha=0.5)
            inner = model(X)
            with torch.enable_grad():
                again = (model(X) ** 2).sum()
            out["flags"].append([inner.requires_grad, again.requires_grad, torch.is_grad_enabled()])
        out["loss"].append(loss.item())
    out["ema"] = [np_of(p) for p in ema.parameters()]
    out["ema_requires_grad"] = [p.requires_grad for p in ema.parameters()]
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    z = model(X)
    out["set_off"] = [z.requires_grad, torch.is_grad_enabled()]
    torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        out["set_ctx"] = [model(X).requires_grad, torch.is_grad_enabled()]
    with torch.set_grad_enabled(True):
        out["set_ctx_on"] = model(X).requires_grad
    out["restored"] = [torch.is_grad_enabled(), prev]

    @torch.no_grad()
    def evaluate(m):
        return m(X).sum()

    @torch.enable_grad()
    def forced(m):
        return m(X).sum()

    out["decorators"] = [evaluate(model).requires_grad, forced(model).requires_grad]
    with torch.no_grad():
        out["decorator_in_no_grad"] = forced(model).requires_grad
    with torch.inference_mode():
        out["inference"] = [model(X).requires_grad, torch.is_grad_enabled()]
    w = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out["toggle"] = [w.requires_grad, w.requires_grad_().requires_grad, w.is_leaf]
    (w * w).sum().backward()
    out["toggle_grad"] = np_of(w.grad)
    w.requires_grad_(False)
    out["toggle_off"] = [w.requires_grad, (w * 2).requires_grad, w.grad is not None]
    nl = w * torch.tensor([1.0, 1.0], dtype=torch.float64, requires_grad=True)
    out["nonleaf_toggle_err"] = err(lambda: nl.requires_grad_(False), "leaf")
    out["int_grad_err"] = err(lambda: torch.tensor([1, 2]).requires_grad_(), "floating point")
    for p in model.parameters():
        p.requires_grad_(False)
    model.bias.requires_grad_(True)
    loss = ((model(X) - y) ** 2).mean()
    loss.backward()
    out["partial_freeze"] = [model.weight.requires_grad, np_of(model.weight.grad), np_of(model.bias.grad)]
    with torch.no_grad():
        nog = (model(X) ** 2).sum()
    out["no_grad_backward_err"] = err(lambda: nog.backward(), "grad")
    m2 = nn.Linear(2, 2).double().requires_grad_(False)
    out["module_requires_grad_"] = [p.requires_grad for p in m2.parameters()]
    return out
