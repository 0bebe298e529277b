"""Optimizers against PyTorch: 20 steps on the same model and data give the same parameters."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import dyngraph as dg

RTOL = 1e-10

# (optimizer name, options) – every variant the brief names: weight decay, momentum
# variants, Nesterov, AMSGrad, maximize, centered RMSprop, lr decay, decoupled decay...
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.05, maximize=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.05)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True, betas=(0.8, 0.9))),
    ("Adam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.01, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.1, maximize=True, eps=1e-6)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.01, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.01, maximize=True, betas=(0.8, 0.99))),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.01, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
]
FOREACH = [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True)),
           ("SGD", dict(lr=0.1, foreach=True)),
           ("Adam", dict(lr=0.01, amsgrad=True, foreach=True)),
           ("AdamW", dict(lr=0.01, weight_decay=0.1, foreach=True))]


def _ids(cases):
    return [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in cases]


def _init():
    rng = np.random.default_rng(0)
    return dict(W=rng.standard_normal((5, 4)), b=rng.standard_normal(5), c=rng.standard_normal(4),
                x=rng.standard_normal((8, 4)), y=rng.standard_normal((8, 5)))


class Problem:
    """A small model (tanh layer + an extra parameter) and a loss, for either library."""

    def __init__(self, lib, arrays):
        self.lib = lib
        mk = (lambda a: torch.tensor(a, requires_grad=True)) if lib is torch else \
            (lambda a: dg.tensor(a, requires_grad=True))
        self.W, self.b, self.c = mk(arrays["W"]), mk(arrays["b"]), mk(arrays["c"])
        const = torch.tensor if lib is torch else dg.tensor
        self.x, self.y = const(arrays["x"]), const(arrays["y"])

    def groups(self, grouped):
        if grouped:   # two groups, the second with its own learning rate
            return [{"params": [self.W, self.b]}, {"params": [self.c], "lr": 0.003}]
        return [self.W, self.b, self.c]

    def loss(self):
        h = (self.x @ self.W.T + self.b).tanh()
        return ((h - self.y) ** 2).mean() + (self.c ** 2).sum() * 0.1 + (self.c * self.W).sum()

    def params(self):
        return [self.W, self.b, self.c]


def _make_opt(lib, name, kw, prob, grouped):
    return getattr(lib.optim, name)(prob.groups(grouped), **kw)


def _train(prob, opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        prob.loss().backward()
        opt.step()


def _close(dg_params, torch_params):
    for a, b in zip(dg_params, torch_params, strict=False):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=1e-13)


def _torch_kw(kw):
    return {k: v for k, v in kw.items() if k != "foreach"}


@pytest.fixture(autouse=True)
def _torch_double():
    # PyTorch keeps scalar optimizer state (step, NAdam's mu_product) in the default dtype.
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize("grouped", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("name,kw", CASES + FOREACH, ids=_ids(CASES + FOREACH))
def test_matches_torch_20_steps(name, kw, grouped):
    arrays = _init()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    od, ot = _make_opt(dg, name, kw, pd, grouped), _make_opt(torch, name, _torch_kw(kw), pt, grouped)
    _train(pd, od, 20)
    _train(pt, ot, 20)
    _close(pd.params(), pt.params())


@pytest.mark.parametrize("name,kw", CASES + FOREACH, ids=_ids(CASES + FOREACH))
def test_state_dict_restore_midway(name, kw):
    """Save after 10 steps, restore into a fresh optimizer, continue: identical to uninterrupted."""
    arrays = _init()
    ref = Problem(dg, arrays)
    _train(ref, _make_opt(dg, name, kw, ref, True), 20)
    pt = Problem(torch, arrays)
    _train(pt, _make_opt(torch, name, _torch_kw(kw), pt, True), 20)
    _close(ref.params(), pt.params())

    prob = Problem(dg, arrays)
    opt = _make_opt(dg, name, kw, prob, True)
    _train(prob, opt, 10)
    buf = io.BytesIO()                   # through a checkpoint, as a real resume would
    dg.save(opt.state_dict(), buf)
    _train(prob, opt, 3)                 # the live optimizer moves on; the saved copy must not
    buf.seek(0)
    saved = dg.load(buf)
    # a second model at the step-10 values (re-run from scratch), then the restored optimizer
    prob2 = Problem(dg, arrays)
    _train(prob2, _make_opt(dg, name, kw, prob2, True), 10)
    opt2 = _make_opt(dg, name, dict(kw, lr=0.5), prob2, True)   # options come from the state dict
    opt2.load_state_dict(saved)
    _train(prob2, opt2, 10)
    for a, b in zip(prob2.params(), ref.params(), strict=False):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_state_dict_format_is_pytorchs():
    arrays = _init()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    od = dg.optim.Adam(pd.groups(True), lr=0.01, amsgrad=True)
    ot = torch.optim.Adam(pt.groups(True), lr=0.01, amsgrad=True)
    _train(pd, od, 2)
    _train(pt, ot, 2)
    sd, st = od.state_dict(), ot.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == sorted(st["state"]) == [0, 1, 2]
    assert set(sd["state"][0]) == set(st["state"][0])
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in st["param_groups"]]
    common = set(st["param_groups"][0]) - {"params"}
    assert common <= set(sd["param_groups"][0])
    for g1, g2 in zip(sd["param_groups"], st["param_groups"], strict=False):
        assert g1["lr"] == g2["lr"] and tuple(g1["betas"]) == tuple(g2["betas"])
    assert float(st["state"][0]["step"]) == sd["state"][0]["step"] == 2
    np.testing.assert_allclose(sd["state"][1]["exp_avg_sq"].numpy(), st["state"][1]["exp_avg_sq"].numpy(),
                               rtol=RTOL)


def test_load_torch_state_dict_values():
    """A state dict with PyTorch's tensors (converted to dyngraph) continues identically."""
    arrays = _init()
    pd, pt = Problem(dg, arrays), Problem(torch, arrays)
    ot = torch.optim.RMSprop(pt.params(), lr=0.01, momentum=0.9, centered=True)
    _train(pt, ot, 5)
    for p, q in zip(pd.params(), pt.params(), strict=False):
        p._data[...] = q.detach().numpy()
    st = ot.state_dict()
    converted = {"state": {i: {k: dg.tensor(v.numpy()) for k, v in s.items()} for i, s in st["state"].items()},
                 "param_groups": st["param_groups"]}
    od = dg.optim.RMSprop(pd.params(), lr=0.01, momentum=0.9, centered=True)
    od.load_state_dict(converted)
    assert od.state[pd.W]["step"] == 5
    _train(pd, od, 5)
    _train(pt, ot, 5)
    _close(pd.params(), pt.params())


def test_zero_grad_and_skipping_params_without_grad():
    w = dg.tensor([1.0, 2.0], requires_grad=True)
    unused = dg.tensor([3.0], requires_grad=True)
    opt = dg.optim.SGD([w, unused], lr=0.5, momentum=0.9)
    (w * w).sum().backward()
    opt.step()
    assert unused.grad is None and unused.detach().numpy().tolist() == [3.0]
    assert unused not in opt.state
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])
    opt.zero_grad(set_to_none=False)
    assert w.grad.numpy().tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_step_bumps_version_and_records_no_graph():
    w = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()          # saves w for backward
    y.backward(retain_graph=True)
    before = w._version
    opt = dg.optim.Adam([w], lr=0.1)
    opt.step()
    assert w._version > before
    assert w.grad_fn is None and w.is_leaf
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        y.backward()


def test_closure_and_hooks():
    w = dg.tensor([1.0, -1.0], requires_grad=True)
    opt = dg.optim.SGD([w], lr=0.1)
    calls = []
    h = opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    with dg.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 2.0
    np.testing.assert_allclose(w.detach().numpy(), [0.8, -0.8])
    assert calls == ["pre", "post"]
    h.remove()
    opt.step(closure)
    assert calls == ["pre", "post", "post"]


def test_add_param_group_and_errors():
    a = dg.tensor([1.0], requires_grad=True)
    b = dg.tensor([1.0], requires_grad=True)
    opt = dg.optim.SGD([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.01, "momentum": 0.5})
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[1]["nesterov"] is False
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="Invalid learning rate"):
        dg.optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        dg.optim.Adam([a], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        dg.optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        dg.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        dg.optim.SGD(a, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        dg.optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="parameter group"):
        dg.optim.SGD([a], lr=0.1).load_state_dict({"state": {}, "param_groups": []})
    assert "SGD (" in repr(opt) and "Parameter Group 1" in repr(opt)


def test_adamw_keeps_decoupled_after_load():
    a = dg.tensor([1.0], requires_grad=True)
    opt = dg.optim.AdamW([a])
    sd = opt.state_dict()
    sd["param_groups"][0]["decoupled_weight_decay"] = False
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_unsupported_flags_are_loud():
    a = dg.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="Adam: differentiable=True"):
        dg.optim.Adam([a], differentiable=True)
    with pytest.raises(NotImplementedError, match="SGD: fused=True"):
        dg.optim.SGD([a], lr=0.1, fused=True)
