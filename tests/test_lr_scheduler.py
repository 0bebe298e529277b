"""Learning-rate schedulers against PyTorch: the same rates (and momenta) step by step."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

import dyngraph as dg


def _opt(lib, name="SGD", **kw):
    p1 = lib.zeros(2, requires_grad=True)
    p2 = lib.zeros(3, requires_grad=True)
    kw.setdefault("lr", 0.1)
    if name == "SGD":
        kw.setdefault("momentum", 0.9)
    return getattr(lib.optim, name)([{"params": [p1]}, {"params": [p2], "lr": 0.05}], **kw)


def _half(epoch):
    return 0.5 ** epoch


def _mult(epoch):
    return 0.9


SCHEDULERS = [
    ("LambdaLR", lambda m, o: m.LambdaLR(o, lr_lambda=_half)),
    ("LambdaLR-list", lambda m, o: m.LambdaLR(o, lr_lambda=[_half, lambda e: 1.0 / (e + 1)])),
    ("MultiplicativeLR", lambda m, o: m.MultiplicativeLR(o, lr_lambda=_mult)),
    ("StepLR", lambda m, o: m.StepLR(o, step_size=3, gamma=0.5)),
    ("MultiStepLR", lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", lambda m, o: m.ExponentialLR(o, gamma=0.8)),
    ("CosineAnnealingLR", lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01)),
    ("OneCycleLR-cos", lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=30)),
    ("OneCycleLR-linear-3phase", lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], epochs=3, steps_per_epoch=10,
                                                          anneal_strategy="linear", three_phase=True)),
    ("LinearLR", lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6)),
    ("ConstantLR", lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=4)),
    ("SequentialLR", lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=4), m.CosineAnnealingLR(o, T_max=10),
            m.ExponentialLR(o, gamma=0.9)], milestones=[4, 12])),
]


def _run(lib, make, steps, opt_name="SGD", metrics=None):
    opt = _opt(lib, opt_name)
    sched = make(lib.optim.lr_scheduler, opt)
    lrs = [sched.get_last_lr()]
    moms = []
    for i in range(steps):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
        lrs.append(sched.get_last_lr())
        moms.append([g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups])
    return np.array(lrs, dtype=float), moms, sched, opt


@pytest.mark.parametrize("name,make", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_rates_match_torch(name, make):
    steps = 29 if name.startswith("OneCycle") else 25
    for opt_name in (["SGD", "Adam"] if name.startswith("OneCycle") else ["SGD"]):
        ld, md, _, _ = _run(dg, make, steps, opt_name)
        lt, mt, _, _ = _run(torch, make, steps, opt_name)
        np.testing.assert_allclose(ld, lt, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.array(md, float), np.array(mt, float), rtol=1e-12)


@pytest.mark.parametrize("name,make", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_state_dict_resume(name, make):
    """Save scheduler + optimizer after 6 steps, restore into fresh ones: same rates as uninterrupted."""
    ref, _, _, _ = _run(dg, make, 14)
    _, _, sched, opt = _run(dg, make, 6)
    buf = io.BytesIO()               # through a checkpoint file, as a real resume would
    dg.save({"sched": sched.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = dg.load(buf)
    s_state, o_state = ck["sched"], ck["opt"]
    opt2 = _opt(dg)
    sched2 = make(dg.optim.lr_scheduler, opt2)
    opt2.load_state_dict(o_state)
    sched2.load_state_dict(s_state)
    lrs = []
    for _ in range(8):
        opt2.step()
        sched2.step()
        lrs.append(sched2.get_last_lr())
    np.testing.assert_allclose(np.array(lrs), ref[7:], rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", threshold_mode="abs", threshold=0.1, cooldown=2,
                                             patience=1, factor=0.5, min_lr=[0.02, 0.0])])
def test_reduce_lr_on_plateau(kw):
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.9, 0.99, 1.2, 1.2, 1.2, 1.1, 1.0, 1.3] * 3
    if kw.get("mode") == "max":
        metrics = [-m for m in metrics]
    make = lambda m, o: m.ReduceLROnPlateau(o, **dict(kw, patience=kw.get("patience", 2)))
    ld, _, sched, _ = _run(dg, make, len(metrics), metrics=metrics)
    lt, _, _, _ = _run(torch, make, len(metrics), metrics=metrics)
    np.testing.assert_allclose(ld, lt, rtol=1e-12)
    assert ld[-1][0] < ld[0][0]
    state = sched.state_dict()
    assert state["num_bad_epochs"] == sched.num_bad_epochs and "optimizer" not in state


def test_closed_form_epoch_argument():
    for cls, kw in [("StepLR", dict(step_size=3, gamma=0.5)), ("ExponentialLR", dict(gamma=0.8)),
                    ("CosineAnnealingLR", dict(T_max=10)), ("MultiStepLR", dict(milestones=[2, 4], gamma=0.1))]:
        od, ot = _opt(dg), _opt(torch)
        sd = getattr(dg.optim.lr_scheduler, cls)(od, **kw)
        st = getattr(torch.optim.lr_scheduler, cls)(ot, **kw)
        with pytest.warns(UserWarning):
            st.step(7)
        sd.step(7)
        np.testing.assert_allclose(sd.get_last_lr(), st.get_last_lr(), rtol=1e-12)


def test_cosine_warm_restarts_fractional_epochs():
    od, ot = _opt(dg), _opt(torch)
    sd = dg.optim.lr_scheduler.CosineAnnealingWarmRestarts(od, T_0=2, T_mult=2)
    st = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(ot, T_0=2, T_mult=2)
    for e in np.arange(0, 9, 0.25):
        sd.step(float(e))
        st.step(float(e))
        np.testing.assert_allclose(sd.get_last_lr(), st.get_last_lr(), rtol=1e-12)


def test_scheduler_errors():
    opt = _opt(dg)
    with pytest.raises(TypeError, match="not an Optimizer"):
        dg.optim.lr_scheduler.StepLR(object(), step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        dg.optim.lr_scheduler.StepLR(opt, step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="total_steps"):
        dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="milestones"):
        dg.optim.lr_scheduler.SequentialLR(opt, [dg.optim.lr_scheduler.StepLR(opt, 2)], milestones=[3])
    sched = dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        sched.step()
    assert math.isclose(_opt(dg).param_groups[0]["lr"], 0.1)
