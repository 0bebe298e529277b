"""Losses of dg.nn against torch.nn: values and gradients, every reduction, float32/float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import to_np

TOL = {"float32": (2e-5, 1e-6), "float64": (1e-10, 1e-12)}
R = np.random.default_rng(0)


def u(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape)


def probs(*shape):
    return R.uniform(0.05, 0.95, size=shape)


def signs(*shape):
    return R.choice([-1.0, 1.0], size=shape)


def soft(*shape):
    p = R.uniform(0.1, 1.0, size=shape)
    return p / p.sum(axis=1, keepdims=True)


def _to(lib, a, dt, grad):
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype.kind == "f":
        a = a.astype(dt)
    t = dg.tensor(a.copy()) if lib is dg else torch.from_numpy(a.copy())
    if grad and a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


# (name, make(nn) -> module, args, index of args needing grad)
CASES = [
    ("MSELoss", lambda nn, **k: nn.MSELoss(**k), (u(3, 4), u(3, 4)), (0, 1)),
    ("L1Loss", lambda nn, **k: nn.L1Loss(**k), (u(3, 4), u(3, 4)), (0, 1)),
    ("SmoothL1Loss", lambda nn, **k: nn.SmoothL1Loss(beta=0.7, **k), (u(3, 4), u(3, 4)), (0, 1)),
    ("SmoothL1Loss-beta0", lambda nn, **k: nn.SmoothL1Loss(beta=0.0, **k), (u(3, 4), u(3, 4)),
     (0,)),
    ("HuberLoss", lambda nn, **k: nn.HuberLoss(delta=0.8, **k), (u(3, 4), u(3, 4)), (0, 1)),
    ("CrossEntropyLoss", lambda nn, **k: nn.CrossEntropyLoss(**k), (u(5, 4), np.array([0, 3, 1, 2, 3])),
     (0,)),
    ("CrossEntropyLoss-weight-ignore",
     lambda nn, **k: nn.CrossEntropyLoss(weight=_w(nn, [0.2, 1.0, 2.0, 0.7]), ignore_index=1, **k),
     (u(5, 4), np.array([0, 3, 1, 2, 3])), (0,)),
    ("CrossEntropyLoss-smoothing",
     lambda nn, **k: nn.CrossEntropyLoss(label_smoothing=0.15, **k),
     (u(5, 4), np.array([0, 3, 1, 2, 3])), (0,)),
    ("CrossEntropyLoss-smoothing-weight-ignore",
     lambda nn, **k: nn.CrossEntropyLoss(weight=_w(nn, [0.2, 1.0, 2.0, 0.7]), ignore_index=3,
                                         label_smoothing=0.3, **k),
     (u(5, 4), np.array([0, 3, 1, 2, 3])), (0,)),
    ("CrossEntropyLoss-nd", lambda nn, **k: nn.CrossEntropyLoss(**k),
     (u(2, 3, 4, 2), R.integers(0, 3, size=(2, 4, 2))), (0,)),
    ("CrossEntropyLoss-unbatched", lambda nn, **k: nn.CrossEntropyLoss(**k),
     (u(4), np.array(2)), (0,)),
    ("CrossEntropyLoss-probs", lambda nn, **k: nn.CrossEntropyLoss(**k), (u(5, 4), soft(5, 4)),
     (0, 1)),
    ("CrossEntropyLoss-probs-weight-smooth",
     lambda nn, **k: nn.CrossEntropyLoss(weight=_w(nn, [0.2, 1.0, 2.0, 0.7]), label_smoothing=0.1,
                                         **k), (u(5, 4), soft(5, 4)), (0, 1)),
    ("CrossEntropyLoss-large-logits", lambda nn, **k: nn.CrossEntropyLoss(**k),
     (u(3, 4) * 500, np.array([0, 1, 2])), (0,)),
    ("NLLLoss", lambda nn, **k: nn.NLLLoss(**k), (u(5, 4), np.array([0, 3, 1, 2, 3])), (0,)),
    ("NLLLoss-weight-ignore",
     lambda nn, **k: nn.NLLLoss(weight=_w(nn, [0.2, 1.0, 2.0, 0.7]), ignore_index=0, **k),
     (u(5, 4), np.array([0, 3, 1, 2, 3])), (0,)),
    ("NLLLoss-nd", lambda nn, **k: nn.NLLLoss(**k),
     (u(2, 3, 4), R.integers(0, 3, size=(2, 4))), (0,)),
    ("BCELoss", lambda nn, **k: nn.BCELoss(**k), (probs(3, 4), probs(3, 4)), (0, 1)),
    ("BCELoss-weight", lambda nn, **k: nn.BCELoss(weight=_w(nn, [0.5, 1.0, 2.0, 3.0]), **k),
     (probs(3, 4), probs(3, 4)), (0,)),
    ("BCEWithLogitsLoss", lambda nn, **k: nn.BCEWithLogitsLoss(**k), (u(3, 4) * 5, probs(3, 4)),
     (0, 1)),
    ("BCEWithLogitsLoss-posweight-weight",
     lambda nn, **k: nn.BCEWithLogitsLoss(weight=_w(nn, [0.5, 1.0, 2.0, 3.0]),
                                          pos_weight=_w(nn, [1.0, 2.0, 0.5, 4.0]), **k),
     (u(3, 4) * 5, probs(3, 4)), (0, 1)),
    ("BCEWithLogitsLoss-extreme", lambda nn, **k: nn.BCEWithLogitsLoss(**k),
     (np.array([[-800.0, 800.0, 30.0]]), np.array([[1.0, 0.0, 0.5]])), (0,)),
    ("KLDivLoss", lambda nn, **k: nn.KLDivLoss(**k), (u(3, 4, lo=-3, hi=-0.1), soft(3, 4)), (0, 1)),
    ("KLDivLoss-logtarget", lambda nn, **k: nn.KLDivLoss(log_target=True, **k),
     (u(3, 4, lo=-3, hi=-0.1), u(3, 4, lo=-3, hi=-0.1)), (0, 1)),
    ("CosineEmbeddingLoss", lambda nn, **k: nn.CosineEmbeddingLoss(margin=0.1, **k),
     (u(4, 5), u(4, 5), np.array([1.0, -1.0, 1.0, -1.0])), (0, 1)),
    ("MarginRankingLoss", lambda nn, **k: nn.MarginRankingLoss(margin=0.3, **k),
     (u(6), u(6), signs(6)), (0, 1)),
    ("SoftMarginLoss", lambda nn, **k: nn.SoftMarginLoss(**k), (u(3, 4), signs(3, 4)), (0,)),
    ("HingeEmbeddingLoss", lambda nn, **k: nn.HingeEmbeddingLoss(margin=0.5, **k),
     (u(3, 4), signs(3, 4)), (0,)),
    ("PoissonNLLLoss", lambda nn, **k: nn.PoissonNLLLoss(**k), (u(3, 4), probs(3, 4) * 4), (0,)),
    ("PoissonNLLLoss-full", lambda nn, **k: nn.PoissonNLLLoss(log_input=False, full=True, **k),
     (probs(3, 4) * 3, probs(3, 4) * 4), (0,)),
    ("GaussianNLLLoss", lambda nn, **k: nn.GaussianNLLLoss(**k),
     (u(3, 4), u(3, 4), probs(3, 4)), (0, 2)),
    ("GaussianNLLLoss-full-bcast", lambda nn, **k: nn.GaussianNLLLoss(full=True, **k),
     (u(3, 4), u(3, 4), probs(3, 1)), (0, 2)),
    ("TripletMarginLoss", lambda nn, **k: nn.TripletMarginLoss(margin=2.0, **k),
     (u(4, 5), u(4, 5), u(4, 5)), (0, 1, 2)),
    ("TripletMarginLoss-swap-p1", lambda nn, **k: nn.TripletMarginLoss(p=1.0, swap=True, **k),
     (u(4, 5), u(4, 5), u(4, 5)), (0, 1, 2)),
    ("MultiLabelSoftMarginLoss", lambda nn, **k: nn.MultiLabelSoftMarginLoss(**k),
     (u(3, 4), R.integers(0, 2, size=(3, 4)).astype(float)), (0,)),
]

# PoissonNLLLoss(full=True): PyTorch adds Stirling's term only where target > 1, as here.


def _w(nn, values):
    return (dg.tensor if nn is dg.nn else torch.tensor)(values, dtype=(
        dg.float64 if nn is dg.nn else torch.float64))


def _cases():
    out = []
    for name, make, args, grads in CASES:
        for red in ("mean", "sum", "none"):
            for dt in ("float32", "float64"):
                out.append(pytest.param(make, args, grads, red, dt, id=f"{name}-{red}-{dt}"))
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("make,args,grads,red,dt", _cases())
def test_loss_matches_torch(make, args, grads, red, dt):
    tm = make(torch.nn, reduction=red)
    dm = make(dg.nn, reduction=red)
    if dt == "float32":
        tm.float()
        dm.float()
    tin = [_to(torch, a, dt, i in grads) for i, a in enumerate(args)]
    din = [_to(dg, a, dt, i in grads) for i, a in enumerate(args)]
    tout = tm(*tin)
    dout = dm(*din)
    rtol, atol = TOL[dt]
    np.testing.assert_allclose(to_np(dout), to_np(tout), rtol=rtol, atol=atol)
    assert dout.dtype.name == str(tout.dtype).split(".")[-1]
    v = np.random.default_rng(3).uniform(0.5, 1.5, size=tuple(tout.shape)).astype(dt)
    (tout * torch.from_numpy(v)).sum().backward()
    (dout * dg.tensor(v)).sum().backward()
    for i in grads:
        np.testing.assert_allclose(to_np(din[i].grad), to_np(tin[i].grad), rtol=rtol, atol=atol,
                                   err_msg=f"grad of argument {i}")


def test_kl_div_batchmean():
    a, b = u(3, 4, lo=-3, hi=-0.1), soft(3, 4)
    d = dg.nn.KLDivLoss(reduction="batchmean")(dg.tensor(a), dg.tensor(b))
    t = torch.nn.KLDivLoss(reduction="batchmean")(torch.from_numpy(a), torch.from_numpy(b))
    assert d.item() == pytest.approx(t.item(), rel=1e-12)


def test_cross_entropy_errors_name_loss_index_and_classes():
    loss = dg.nn.CrossEntropyLoss()
    with pytest.raises(IndexError, match=r"cross_entropy: target class index 5 is out of range "
                                         r"for 3 classes"):
        loss(dg.randn(2, 3), dg.tensor([0, 5]))
    with pytest.raises(IndexError, match="index -2"):
        dg.nn.NLLLoss()(dg.randn(2, 3), dg.tensor([0, -2]))
    with pytest.raises(RuntimeError, match=r"^CrossEntropyLoss\(\): cross_entropy: expected a "
                                           r"floating-point input, got dyngraph.int64"):
        loss(dg.tensor([[1, 2]]), dg.tensor([0]))
    with pytest.raises(ValueError, match=r"expected target of shape \[2\]"):
        loss(dg.randn(2, 3), dg.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        dg.nn.BCELoss()(dg.tensor([1.5]), dg.tensor([1.0]))


def test_cross_entropy_all_ignored_is_nan_like_torch():
    d = dg.nn.functional.cross_entropy(dg.randn(2, 3), dg.tensor([-100, -100]))
    t = torch.nn.functional.cross_entropy(torch.randn(2, 3), torch.tensor([-100, -100]))
    assert np.isnan(d.item()) and np.isnan(t.item())


def test_loss_repr_and_buffers():
    w = dg.tensor([1.0, 2.0])
    loss = dg.nn.CrossEntropyLoss(weight=w)
    assert repr(loss) == "CrossEntropyLoss()"
    assert list(loss.state_dict()) == list(torch.nn.CrossEntropyLoss(
        weight=torch.tensor([1.0, 2.0])).state_dict()) == ["weight"]
