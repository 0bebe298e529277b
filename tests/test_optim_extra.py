"""LBFGS, RAdam, Rprop, ASGD and the PolynomialLR / CyclicLR / ChainedScheduler schedulers
against PyTorch, number by number (float64, 1e-10 relative), plus state-dict resumes."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch

import dyngraph as dg

RTOL = 1e-10

CASES = [
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("Rprop", dict(lr=0.02, maximize=True)),
    ("ASGD", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=5, weight_decay=0.01)),
    ("ASGD", dict(lr=0.02, t0=3, maximize=True)),
]


def _ids(cases):
    return [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in cases]


def _arrays():
    rng = np.random.default_rng(0)
    return dict(W=rng.standard_normal((5, 4)), b=rng.standard_normal(5), c=rng.standard_normal(4),
                x=rng.standard_normal((8, 4)), y=rng.standard_normal((8, 5)))


class Problem:
    """A small tanh layer plus an extra coupled parameter, built in either library."""

    def __init__(self, lib, arrays):
        mk = torch.tensor if lib is torch else dg.tensor
        self.W, self.b, self.c = (mk(arrays[k], requires_grad=True) for k in "Wbc")
        self.x, self.y = mk(arrays["x"]), mk(arrays["y"])

    def params(self):
        return [self.W, self.b, self.c]

    def groups(self):  # two groups, the second with its own learning rate
        return [{"params": [self.W, self.b]}, {"params": [self.c], "lr": 0.003}]

    def loss(self):
        h = (self.x @ self.W.T + self.b).tanh()
        return ((h - self.y) ** 2).mean() + (self.c ** 2).sum() * 0.1 + (self.c * self.W).sum()

    def bounded_loss(self):  # bounded below (a positive-definite penalty), for LBFGS
        h = (self.x @ self.W.T + self.b).tanh()
        return (((h - self.y) ** 2).mean() + (self.c ** 2).sum() * 0.1 + (self.c * self.W).sum() * 0.05
                + (self.W ** 2).sum() * 0.05)


def _train(prob, opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        prob.loss().backward()
        opt.step()


def _close(dg_params, torch_params, rtol=RTOL):
    for a, b in zip(dg_params, torch_params, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-13)


def _roundtrip(state_dict):
    buf = io.BytesIO()  # through a checkpoint, as a real resume would
    dg.save(state_dict, buf)
    buf.seek(0)
    return dg.load(buf)


@pytest.fixture(params=["float32", "float64"])
def default_dtype(request):
    """Both libraries' default dtype (ASGD keeps eta and mu at that precision, like PyTorch)."""
    old_t, old_d = torch.get_default_dtype(), dg.get_default_dtype()
    torch.set_default_dtype(getattr(torch, request.param))
    dg.set_default_dtype(getattr(dg, request.param))
    yield request.param
    torch.set_default_dtype(old_t)
    dg.set_default_dtype(old_d)


# -- first-order optimizers ---------------------------------------------------------------

@pytest.mark.parametrize("name,kw", CASES, ids=_ids(CASES))
def test_matches_torch_20_steps_and_resume(name, kw, default_dtype):
    arrays = _arrays()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    _train(pd, getattr(dg.optim, name)(pd.groups(), **kw), 20)
    _train(pt, getattr(torch.optim, name)(pt.groups(), **kw), 20)
    _close(pd.params(), pt.params())

    # save after 10 steps, restore into a fresh optimizer, continue: same as uninterrupted
    prob = Problem(dg, arrays)
    opt = getattr(dg.optim, name)(prob.groups(), **kw)
    _train(prob, opt, 10)
    saved = _roundtrip(opt.state_dict())
    opt2 = getattr(dg.optim, name)(prob.groups(), **dict(kw, lr=0.5))  # options come from the dict
    opt2.load_state_dict(saved)
    _train(prob, opt2, 10)
    for a, b in zip(prob.params(), pd.params(), strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("name,kw", [CASES[1], CASES[4], CASES[7]], ids=["RAdam", "Rprop", "ASGD"])
def test_float32_parameters(name, kw):
    arrays = {k: v.astype(np.float32) for k, v in _arrays().items()}
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    _train(pd, getattr(dg.optim, name)(pd.params(), **kw), 10)
    _train(pt, getattr(torch.optim, name)(pt.params(), **kw), 10)
    for p in pd.params():
        assert p.dtype == dg.float32
    _close(pd.params(), pt.params(), rtol=1e-5)


def test_state_keys_match_torch():
    arrays = _arrays()
    for name, kw in [("RAdam", {}), ("Rprop", {}), ("ASGD", {})]:
        pd, pt = Problem(dg, arrays), Problem(torch, arrays)
        od, ot = getattr(dg.optim, name)(pd.params(), **kw), getattr(torch.optim, name)(pt.params(), **kw)
        _train(pd, od, 2)
        _train(pt, ot, 2)
        sd, st = od.state_dict(), ot.state_dict()
        assert set(sd["state"][0]) == set(st["state"][0]), name
        assert set(st["param_groups"][0]) - {"params"} <= set(sd["param_groups"][0]), name


def test_asgd_average_matches_torch():
    arrays = _arrays()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    od = dg.optim.ASGD(pd.params(), lr=0.05, t0=4)
    ot = torch.optim.ASGD(pt.params(), lr=0.05, t0=4)
    _train(pd, od, 12)
    _train(pt, ot, 12)
    for p, q in zip(pd.params(), pt.params(), strict=True):
        np.testing.assert_allclose(od.state[p]["ax"].numpy(), ot.state[q]["ax"].numpy(), rtol=RTOL)
        assert float(od.state[p]["eta"]) == float(ot.state[q]["eta"])
        assert float(od.state[p]["mu"]) == float(ot.state[q]["mu"])


def test_option_errors():
    w = dg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="RAdam.*beta"):
        dg.optim.RAdam([w], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Rprop.*eta"):
        dg.optim.Rprop([w], etas=(1.2, 0.5))
    with pytest.raises(ValueError, match="ASGD.*learning rate"):
        dg.optim.ASGD([w], lr=-1)
    with pytest.raises(ValueError, match="LBFGS.*strong_wolfe"):
        dg.optim.LBFGS([w], line_search_fn="backtracking")
    with pytest.raises(ValueError, match="LBFGS.*parameter groups"):
        dg.optim.LBFGS([{"params": [w]}, {"params": [dg.tensor([2.0], requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="closure"):
        dg.optim.LBFGS([w]).step(None)


# -- LBFGS --------------------------------------------------------------------------------

LBFGS_CASES = [
    dict(),
    dict(lr=0.5, max_iter=4),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7),
    dict(history_size=2, max_iter=6, lr=0.8),
    dict(line_search_fn="strong_wolfe", tolerance_grad=1e-3, tolerance_change=1e-4),
    dict(max_iter=10, max_eval=6, tolerance_change=1e-3),
    dict(line_search_fn="strong_wolfe", lr=4.0, max_iter=8),
]


def _closure(prob, opt, losses):
    def closure():
        opt.zero_grad()
        loss = prob.bounded_loss()
        loss.backward()
        losses.append(loss.item())
        return loss
    return closure


@pytest.mark.parametrize("kw", LBFGS_CASES, ids=_ids([("LBFGS", kw) for kw in LBFGS_CASES]))
def test_lbfgs_matches_torch(kw):
    arrays = _arrays()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    od, ot = dg.optim.LBFGS(pd.params(), **kw), torch.optim.LBFGS(pt.params(), **kw)
    ld, lt = [], []
    for _ in range(5):
        rd = od.step(_closure(pd, od, ld))
        rt = ot.step(_closure(pt, ot, lt))
        assert rd.item() == pytest.approx(rt.item(), rel=RTOL)
    assert len(ld) == len(lt)  # same number of function evaluations
    np.testing.assert_allclose(ld, lt, rtol=RTOL)
    _close(pd.params(), pt.params())
    sd, st = od.state[pd.W], ot.state[pt.W]
    assert set(sd) == set(st)
    assert sd["func_evals"] == st["func_evals"] and sd["n_iter"] == st["n_iter"]
    assert len(sd["old_dirs"]) == len(st["old_dirs"])


@pytest.mark.parametrize("kw", [dict(history_size=4), dict(line_search_fn="strong_wolfe", max_iter=5)],
                         ids=["plain", "strong_wolfe"])
def test_lbfgs_state_dict_resume(kw):
    arrays = _arrays()
    ref = Problem(dg, arrays)
    opt = dg.optim.LBFGS(ref.params(), **kw)
    for _ in range(5):
        opt.step(_closure(ref, opt, []))

    prob = Problem(dg, arrays)
    opt = dg.optim.LBFGS(prob.params(), **kw)
    for _ in range(2):
        opt.step(_closure(prob, opt, []))
    saved = _roundtrip(opt.state_dict())
    opt.step(_closure(prob, opt, []))  # the live optimizer moves on; the saved copy must not
    # a second model at the values after 2 steps (re-run from scratch), then the restored optimizer
    prob2 = Problem(dg, arrays)
    first = dg.optim.LBFGS(prob2.params(), **kw)
    for _ in range(2):
        first.step(_closure(prob2, first, []))
    opt2 = dg.optim.LBFGS(prob2.params(), **kw)
    opt2.load_state_dict(saved)
    for _ in range(3):
        opt2.step(_closure(prob2, opt2, []))
    for a, b in zip(prob2.params(), ref.params(), strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_lbfgs_stops_at_optimum():
    w = dg.tensor([0.0, 0.0], requires_grad=True)
    opt = dg.optim.LBFGS([w])
    calls = []

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        calls.append(1)
        return loss
    opt.step(closure)
    assert len(calls) == 1 and np.all(w.detach().numpy() == 0)


# -- schedulers ---------------------------------------------------------------------------

def _sched_opt(lib, opt_name):
    a = lib.zeros(3, requires_grad=True)
    b = lib.zeros(2, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.05}]
    if opt_name == "Adam":
        return lib.optim.Adam(groups, lr=0.1)
    return lib.optim.SGD(groups, lr=0.1, momentum=0.9)


class Halving:
    """A picklable custom scale function with state (kept by CyclicLR's state dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base ** x


SCHEDULERS = {
    "poly": ("SGD", lambda S, o: S.PolynomialLR(o)),
    "poly-power2": ("SGD", lambda S, o: S.PolynomialLR(o, total_iters=12, power=2.0)),
    "poly-power0.5": ("SGD", lambda S, o: S.PolynomialLR(o, total_iters=40, power=0.5)),
    "cyclic-triangular": ("SGD", lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4)),
    "cyclic-triangular2": ("SGD", lambda S, o: S.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3],
                                                          step_size_up=3, step_size_down=5,
                                                          mode="triangular2")),
    "cyclic-exp_range": ("SGD", lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.2, step_size_up=5,
                                                        mode="exp_range", gamma=0.95, base_momentum=0.7,
                                                        max_momentum=0.95)),
    "cyclic-scale_fn": ("SGD", lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                       scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations")),
    "cyclic-scale_obj": ("SGD", lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                        scale_fn=Halving())),
    "cyclic-adam": ("Adam", lambda S, o: S.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=4)),
    "cyclic-no-momentum": ("Adam", lambda S, o: S.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=6,
                                                           cycle_momentum=False)),
    "chained": ("SGD", lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=4),
                                                        S.ExponentialLR(o, gamma=0.9)])),
    "chained-poly-step": ("SGD", lambda S, o: S.ChainedScheduler(
        [S.PolynomialLR(o, total_iters=20, power=1.5), S.MultiStepLR(o, milestones=[5, 9], gamma=0.5)],
        optimizer=o)),
}


def _momenta(opt):
    g = opt.param_groups
    return [grp["betas"][0] if "betas" in grp else grp["momentum"] for grp in g]


def _run_sched(lib, key, steps):
    opt_name, make = SCHEDULERS[key]
    opt = _sched_opt(lib, opt_name)
    sched = make(lib.optim.lr_scheduler, opt)
    lrs, moms = [], []
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(list(sched.get_last_lr()))
        moms.append(_momenta(opt))
    return opt, sched, lrs, moms


@pytest.mark.parametrize("key", list(SCHEDULERS))
def test_scheduler_matches_torch_30_steps(key):
    _, _, lrs_d, moms_d = _run_sched(dg, key, 30)
    _, _, lrs_t, moms_t = _run_sched(torch, key, 30)
    np.testing.assert_allclose(lrs_d, lrs_t, rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(moms_d, moms_t, rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("key", list(SCHEDULERS))
def test_scheduler_state_dict_resume(key):
    _, _, lrs_ref, moms_ref = _run_sched(dg, key, 30)
    opt, sched, lrs, moms = _run_sched(dg, key, 12)
    saved_opt = copy.deepcopy(opt.state_dict())
    saved_sched = copy.deepcopy(sched.state_dict())
    opt_name, make = SCHEDULERS[key]
    opt2 = _sched_opt(dg, opt_name)
    sched2 = make(dg.optim.lr_scheduler, opt2)  # then restore: optimizer first, scheduler second
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved_sched)
    for _ in range(18):
        opt2.step()
        sched2.step()
        lrs.append(list(sched2.get_last_lr()))
        moms.append(_momenta(opt2))
    np.testing.assert_allclose(lrs, lrs_ref, rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(moms, moms_ref, rtol=RTOL, atol=1e-15)


def test_scheduler_errors():
    S = dg.optim.lr_scheduler
    opt = _sched_opt(dg, "SGD")
    with pytest.raises(ValueError, match="CyclicLR.*mode"):
        S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="CyclicLR.*momentum"):
        S.CyclicLR(dg.optim.Rprop([dg.zeros(2, requires_grad=True)]), base_lr=0.01, max_lr=0.1)
    with pytest.raises(ValueError, match="ChainedScheduler.*at least one"):
        S.ChainedScheduler([])
    other = _sched_opt(dg, "SGD")
    with pytest.raises(ValueError, match="same optimizer"):
        S.ChainedScheduler([S.ExponentialLR(opt, 0.9), S.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])


def test_polynomial_closed_form_epoch():
    opt = _sched_opt(dg, "SGD")
    sched = dg.optim.lr_scheduler.PolynomialLR(opt, total_iters=10, power=2.0)
    sched.step(4)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.6 ** 2, rel=1e-12)
