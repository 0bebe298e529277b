"""``torch.optim.swa_utils`` (``AveragedModel``, ``SWALR``, ``update_bn``) against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


def _run(lib, kind: str):
    rng = np.random.default_rng(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 1)).double()
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.from_numpy(rng.uniform(-0.5, 0.5, tuple(p.shape))))
    swa = lib.optim.swa_utils
    if kind == "ema":
        avg = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9))
    elif kind == "ema_fn":
        avg = swa.AveragedModel(model, avg_fn=swa.get_ema_avg_fn(0.8), use_buffers=True)
    else:
        avg = swa.AveragedModel(model)
    opt = lib.optim.SGD(model.parameters(), lr=0.5)
    sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos" if kind != "ema" else "linear")
    X = lib.from_numpy(rng.standard_normal((16, 3)))
    y = lib.from_numpy(rng.standard_normal((16, 1)))
    lrs = []
    for _ in range(5):
        opt.zero_grad()
        lib.nn.functional.mse_loss(model(X), y).backward()
        opt.step()
        avg.update_parameters(model)
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    loader = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(X, y), batch_size=4)
    swa.update_bn(loader, avg)
    avg.eval()
    state = {k: v.detach().numpy().copy() for k, v in avg.state_dict().items()}
    return lrs, state, avg(X).detach().numpy()


@pytest.mark.parametrize("kind", ["swa", "ema", "ema_fn"])
def test_averaged_model_swalr_update_bn_match_torch(kind):
    t_lrs, t_state, t_out = _run(torch, kind)
    d_lrs, d_state, d_out = _run(dyngraph, kind)
    np.testing.assert_allclose(d_lrs, t_lrs, rtol=1e-12)
    assert d_state.keys() == t_state.keys()
    for k in t_state:
        np.testing.assert_allclose(d_state[k], t_state[k], rtol=1e-9, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(d_out, t_out, rtol=1e-9)


def test_swalr_argument_errors():
    opt = dyngraph.optim.SGD([dyngraph.nn.Parameter(dyngraph.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        dyngraph.optim.swa_utils.SWALR(opt, 0.01, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        dyngraph.optim.swa_utils.SWALR(opt, 0.01, anneal_epochs=-1)
