"""A float32 model wrapped in torch.compile (as modern scripts do; backend="eager"
so PyTorch needs no C++ toolchain): an MLP with LayerNorm and GELU, trained with
Adam; a compiled plain function; varying batch sizes (a dynamic dimension);
then eval outputs of the original module."""

import numpy as np

from tests.port import np_of

RTOL = 2e-5
ATOL = 2e-6


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(32)
    model = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))
    shared.model(torch, "mlp", model)
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    @torch.compile(backend="eager")
    def loss_fn(logits, target):
        return nn.functional.cross_entropy(logits, target) + 1e-3 * logits.pow(2).mean()

    losses = []
    for bs in (8, 8, 5, 8, 3):
        x = torch.tensor(rng.standard_normal((bs, 6)), dtype=torch.float32)
        y = torch.from_numpy(rng.integers(0, 3, bs))
        loss = loss_fn(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        probe = torch.tensor(rng.standard_normal((4, 6)), dtype=torch.float32)
        out = model(probe)
    return {"losses": losses, "out": np_of(out), "w": np_of(model[0].weight),
            "dtype_ok": out.dtype == torch.float32}
