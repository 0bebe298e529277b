"""Layers of dg.nn against torch.nn: same weights (state-dict round trip), same inputs,
outputs, input gradients and parameter gradients in float32 and float64, train and eval."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import to_np

TOL = {"float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


def _lib_tensor(lib, a, requires_grad):
    t = dg.tensor(a.copy()) if lib is dg else torch.from_numpy(a.copy())
    if requires_grad and a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


# PyTorch computes these float64 gradients with a float32 constant (CELU: 1/alpha via
# `alpha.toFloat()`; Hardsigmoid: 1/6 as a float literal), so they are accurate to ~4e-8.
LOOSE = {"CELU": 1e-7, "Hardsigmoid": 1e-7}


def _close(a, b, dt, msg, rtol=None):
    rtol0, atol = TOL[dt]
    rtol = rtol0 if rtol is None else max(rtol, rtol0)
    a, b = to_np(a), to_np(b)
    assert a.shape == b.shape, f"{msg}: shape {a.shape} vs {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg)


def compare(make, inputs, dt, train=True, steps=1):
    """Build both layers with torch's weights, run ``steps`` forward/backward passes, compare."""
    torch.manual_seed(0)
    tm = make(torch.nn)
    dm = make(dg.nn)
    loose = LOOSE.get(type(tm).__name__)
    if dt == "float64":
        tm.double()
        dm.double()
    missing, unexpected = dm.load_state_dict(tm.state_dict())
    assert not missing and not unexpected
    tm.train(train)
    dm.train(train)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        arrays = [a.astype(dt) if a.dtype.kind == "f" else a for a in inputs]
        tin = [_lib_tensor(torch, a, True) for a in arrays]
        din = [_lib_tensor(dg, a, True) for a in arrays]
        tout = tm(*tin)
        dout = dm(*din)
        _close(dout, tout, dt, f"{type(tm).__name__} output")
        assert str(dout.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1]
        if not tout.requires_grad:
            continue
        v = rng.uniform(-1, 1, size=tuple(tout.shape)).astype(dt)
        (tout * torch.from_numpy(v)).sum().backward()
        (dout * dg.tensor(v)).sum().backward()
        for k, (a, b) in enumerate(zip(din, tin, strict=True)):
            if b.requires_grad:
                _close(a.grad, b.grad, dt, f"{type(tm).__name__} input grad {k}", loose)
        tp = dict(tm.named_parameters())
        for name, p in dm.named_parameters():
            if tp[name].grad is None:
                assert p.grad is None, name
            else:
                _close(p.grad, tp[name].grad, dt, f"{type(tm).__name__} grad of {name}")
    # buffers (running statistics) follow the same updates
    tb = dict(tm.named_buffers())
    for name, b in dm.named_buffers():
        _close(b, tb[name], dt, f"{type(tm).__name__} buffer {name}")
    # and the state dict goes back to torch
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in dm.state_dict().items()})


R = np.random.default_rng(0)


def x(*shape):
    return R.uniform(-2, 2, size=shape)


LAYERS = [
    ("Linear", lambda nn: nn.Linear(4, 3), [x(2, 4)]),
    ("Linear-batched", lambda nn: nn.Linear(4, 3), [x(2, 5, 4)]),
    ("Linear-1d", lambda nn: nn.Linear(4, 3), [x(4)]),
    ("Linear-nobias", lambda nn: nn.Linear(4, 3, bias=False), [x(2, 4)]),
    ("Bilinear", lambda nn: nn.Bilinear(3, 4, 2), [x(5, 3), x(5, 4)]),
    ("Identity", lambda nn: nn.Identity(), [x(2, 3)]),
    ("Flatten", lambda nn: nn.Flatten(), [x(2, 3, 4)]),
    ("Unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [x(2, 6)]),
    ("LayerNorm", lambda nn: nn.LayerNorm(4), [x(3, 4)]),
    ("LayerNorm-2d", lambda nn: nn.LayerNorm((3, 4)), [x(2, 3, 4)]),
    ("LayerNorm-noaffine", lambda nn: nn.LayerNorm(4, elementwise_affine=False), [x(3, 4)]),
    ("LayerNorm-nobias", lambda nn: nn.LayerNorm(4, bias=False), [x(3, 4)]),
    ("RMSNorm", lambda nn: nn.RMSNorm(4, eps=1e-6), [x(3, 4)]),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [x(3, 4, 5)]),
    ("GroupNorm-4d", lambda nn: nn.GroupNorm(3, 6, affine=False), [x(2, 6, 2, 2)]),
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(4), [x(6, 4)]),
    ("BatchNorm1d-3d", lambda nn: nn.BatchNorm1d(3), [x(4, 3, 5)]),
    ("BatchNorm1d-cumulative", lambda nn: nn.BatchNorm1d(4, momentum=None), [x(6, 4)]),
    ("BatchNorm1d-notrack", lambda nn: nn.BatchNorm1d(4, track_running_stats=False), [x(6, 4)]),
    ("BatchNorm1d-noaffine", lambda nn: nn.BatchNorm1d(4, affine=False), [x(6, 4)]),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), [x(2, 3, 4, 4)]),
    ("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(3, affine=True), [x(2, 3, 5)]),
    ("InstanceNorm2d-track", lambda nn: nn.InstanceNorm2d(3, track_running_stats=True),
     [x(2, 3, 3, 3)]),
    ("LocalResponseNorm", lambda nn: nn.LocalResponseNorm(3), [x(2, 5, 4)]),
    ("PReLU", lambda nn: nn.PReLU(), [x(3, 5)]),
    ("PReLU-channels", lambda nn: nn.PReLU(3, init=0.1), [x(2, 3, 4)]),
    ("Softmax", lambda nn: nn.Softmax(dim=1), [x(3, 5)]),
    ("LogSoftmax", lambda nn: nn.LogSoftmax(dim=-1), [x(2, 3, 5) * 20]),
    ("Softmin", lambda nn: nn.Softmin(dim=0), [x(3, 5)]),
    ("Softmax2d", lambda nn: nn.Softmax2d(), [x(2, 3, 2, 2)]),
    ("Embedding", lambda nn: nn.Embedding(10, 4), [np.array([[1, 2, 3], [9, 1, 1]])]),
    ("Embedding-padding", lambda nn: nn.Embedding(10, 4, padding_idx=1),
     [np.array([[1, 2, 3], [9, 1, 1]])]),
    ("Embedding-scale", lambda nn: nn.Embedding(5, 2, scale_grad_by_freq=True),
     [np.array([0, 0, 3, 4, 0])]),
    ("EmbeddingBag-mean-2d", lambda nn: nn.EmbeddingBag(10, 3), [np.array([[1, 2], [3, 3]])]),
    ("EmbeddingBag-sum-offsets", lambda nn: nn.EmbeddingBag(10, 3, mode="sum"),
     [np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4, 4])]),
    ("EmbeddingBag-max-offsets", lambda nn: nn.EmbeddingBag(10, 3, mode="max"),
     [np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 3])]),
    ("EmbeddingBag-mean-padding", lambda nn: nn.EmbeddingBag(10, 3, padding_idx=2),
     [np.array([1, 2, 4, 2, 2, 3]), np.array([0, 2, 4])]),
    ("Sequential-inplace-relu", lambda nn: nn.Sequential(nn.Linear(4, 5), nn.ReLU(inplace=True),
                                                         nn.Linear(5, 2), nn.LeakyReLU(0.1, True)),
     [x(3, 4)]),
    ("Sequential-MLP", lambda nn: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.LayerNorm(8),
                                                 nn.Linear(8, 2)), [x(3, 4)]),
]

ACTIVATIONS = [
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid",
    "Tanh", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid", "LogSigmoid", "Softsign",
    "Tanhshrink", "Softshrink", "Hardshrink",
]
ACT_ARGS = {"LeakyReLU": (0.2,), "ELU": (0.7,), "CELU": (1.3,), "Softplus": (2.0, 5.0),
            "Hardtanh": (-0.5, 1.5)}

for _name in ACTIVATIONS:
    LAYERS.append((_name, lambda nn, n=_name: getattr(nn, n)(*ACT_ARGS.get(n, ())),
                   [x(3, 5) * 2]))
LAYERS.append(("GELU-tanh", lambda nn: nn.GELU(approximate="tanh"), [x(3, 5)]))
LAYERS.append(("Threshold", lambda nn: nn.Threshold(0.3, -1.0), [x(3, 5)]))
LAYERS.append(("GLU", lambda nn: nn.GLU(dim=1), [x(3, 4, 2)]))

TRAIN_EVAL = {"BatchNorm1d", "BatchNorm1d-3d", "BatchNorm1d-cumulative", "BatchNorm1d-notrack",
              "BatchNorm1d-noaffine", "BatchNorm2d", "InstanceNorm2d-track"}


def _cases():
    out = []
    for name, make, inputs in LAYERS:
        for dt in ("float32", "float64"):
            modes = (True, False) if name in TRAIN_EVAL else (True,)
            for train in modes:
                out.append(pytest.param(make, inputs, dt, train,
                                        id=f"{name}-{dt}-{'train' if train else 'eval'}"))
    return out


@pytest.mark.parametrize("make,inputs,dt,train", _cases())
def test_layer_matches_torch(make, inputs, dt, train):
    compare(make, inputs, dt, train, steps=2 if train else 1)


def test_batchnorm_eval_after_training_uses_running_stats():
    def make(nn):
        return nn.BatchNorm1d(3, momentum=0.3)

    torch.manual_seed(0)
    tm, dm = make(torch.nn).double(), make(dg.nn).double()
    for i in range(3):
        a = np.random.default_rng(i).normal(size=(5, 3))
        tm(torch.from_numpy(a))
        dm(dg.tensor(a))
    assert int(dm.num_batches_tracked.item()) == 3
    tm.eval()
    dm.eval()
    a = np.random.default_rng(9).normal(size=(4, 3))
    _close(dm(dg.tensor(a)), tm(torch.from_numpy(a)), "float64", "eval output")
    _close(dm.running_var, tm.running_var, "float64", "running_var (unbiased)")


def test_batchnorm_errors_name_the_layer():
    bn = dg.nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(dg.randn(1, 3))
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3.*expected 2D or 3D input"):
        bn(dg.randn(2, 3, 4, 5))


def test_dropout_train_eval_and_rng():
    d = dg.nn.Dropout(0.25)
    xin = dg.ones(2000, requires_grad=True)
    dg.manual_seed(3)
    y1 = d(xin)
    dg.manual_seed(3)
    y2 = d(xin)
    assert np.array_equal(y1.detach().numpy(), y2.detach().numpy())
    vals = np.unique(y1.detach().numpy())
    assert np.allclose(vals, [0.0, 1 / 0.75])
    kept = (y1.detach().numpy() != 0).mean()
    assert 0.7 < kept < 0.8
    y1.sum().backward()
    np.testing.assert_allclose(xin.grad.numpy(), y1.detach().numpy())  # grad = mask / (1 - p)
    d.eval()
    assert d(xin) is xin
    assert repr(d) == repr(torch.nn.Dropout(0.25))


def test_dropout2d_zeroes_whole_channels():
    dg.manual_seed(0)
    y = dg.nn.Dropout2d(0.5)(dg.ones(4, 6, 3, 3)).numpy()
    per_channel = y.reshape(4, 6, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))


def test_alpha_dropout_keeps_moments():
    dg.manual_seed(0)
    xin = dg.randn(200000)
    y = dg.nn.AlphaDropout(0.2)(xin).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    assert dg.nn.AlphaDropout(0.2).eval()(xin) is xin


def test_embedding_max_norm_renormalises_in_place():
    w = np.random.default_rng(0).normal(size=(6, 3)) * 3
    te = torch.nn.Embedding.from_pretrained(torch.from_numpy(w.copy()), max_norm=1.0)
    de = dg.nn.Embedding.from_pretrained(dg.tensor(w.copy()), max_norm=1.0)
    idx = np.array([0, 2, 2, 5])
    _close(de(dg.tensor(idx)), te(torch.from_numpy(idx)), "float64", "max_norm output")
    _close(de.weight, te.weight, "float64", "renormalised table")
    assert not de.weight.requires_grad


def test_embedding_errors():
    emb = dg.nn.Embedding(5, 2)
    with pytest.raises(IndexError, match="index 7 is out of range.*5 rows"):
        emb(dg.tensor([1, 7]))
    with pytest.raises(RuntimeError, match="integer tensor of indices"):
        emb(dg.tensor([1.0]))


def test_linear_error_names_layer_and_path():
    model = dg.nn.Sequential()
    model.add_module("encoder", dg.nn.Sequential())
    model.encoder.add_module("fc", dg.nn.Linear(4, 3))
    with pytest.raises(RuntimeError) as info:
        model(dg.randn(2, 5))
    assert str(info.value) == ("Linear(in_features=4, out_features=3, bias=True) at 'encoder.fc': "
                               "expected input with last dimension 4 (in_features), got shape "
                               "[2, 5]")
    with pytest.raises(RuntimeError, match=r"^Linear\(.*\): input dtype dyngraph.int64"):
        dg.nn.Linear(2, 2)(dg.tensor([[1, 2]]))
    with pytest.raises(RuntimeError, match="LayerNorm.*floating-point input, got dyngraph.int64"):
        dg.nn.LayerNorm(2)(dg.tensor([[1, 2]]))


def test_default_initialisation_bounds():
    dg.manual_seed(0)
    lin = dg.nn.Linear(16, 300)
    bound = 1 / np.sqrt(16)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    emb = dg.nn.Embedding(1000, 8, padding_idx=3)
    e = emb.weight.detach().numpy()
    assert abs(e.std() - 1) < 0.05 and np.all(e[3] == 0)
    bil = dg.nn.Bilinear(5, 4, 3)
    assert np.abs(bil.weight.detach().numpy()).max() <= 1 / np.sqrt(5)
    bn = dg.nn.BatchNorm2d(3)
    assert bn.num_batches_tracked.dtype == dg.int64 and bn.running_var.numpy().tolist() == [1, 1, 1]
    assert dg.nn.PReLU().weight.item() == pytest.approx(0.25)


def test_second_order_through_layers():
    lin = dg.nn.Linear(3, 2).double()
    xin = dg.tensor(np.random.default_rng(0).normal(size=(4, 3)), requires_grad=True)
    y = dg.nn.functional.log_softmax(dg.tanh(lin(xin)), 1).sum()
    (g,) = dg.autograd.grad(y, xin, create_graph=True)
    (gg,) = dg.autograd.grad((g * g).sum(), xin)
    tl = torch.nn.Linear(3, 2).double()
    tl.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in lin.state_dict().items()})
    tx = torch.from_numpy(xin.detach().numpy().copy()).requires_grad_(True)
    ty = torch.log_softmax(torch.tanh(tl(tx)), 1).sum()
    (tg,) = torch.autograd.grad(ty, tx, create_graph=True)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    _close(gg, tgg, "float64", "second-order grad")


def test_functional_extras_match_torch():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    for fn, args in [("cosine_similarity", (a, b)), ("pairwise_distance", (a, b)),
                     ("normalize", (a,))]:
        d = getattr(dg.nn.functional, fn)(*[dg.tensor(v) for v in args])
        t = getattr(torch.nn.functional, fn)(*[torch.from_numpy(v) for v in args])
        _close(d, t, "float64", fn)
    d = dg.softmax(dg.tensor(a), dim=0)
    _close(d, torch.softmax(torch.from_numpy(a), 0), "float64", "dg.softmax")


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_functional_options(mode):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 3))
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 7])
    off = np.array([0, 3, 3, 8])  # an empty bag and include_last_offset
    psw = rng.uniform(0.5, 2, size=8)
    kw = {"mode": mode, "include_last_offset": True}
    dw, tw = dg.tensor(w, requires_grad=True), torch.from_numpy(w.copy()).requires_grad_(True)
    extra_d = {"per_sample_weights": dg.tensor(psw)} if mode == "sum" else {}
    extra_t = {"per_sample_weights": torch.from_numpy(psw)} if mode == "sum" else {}
    d = dg.nn.functional.embedding_bag(dg.tensor(idx), dw, dg.tensor(off), **kw, **extra_d)
    t = torch.nn.functional.embedding_bag(torch.from_numpy(idx), tw, torch.from_numpy(off), **kw,
                                          **extra_t)
    _close(d, t, "float64", "embedding_bag")
    d.sum().backward()
    t.sum().backward()
    _close(dw.grad, tw.grad, "float64", "embedding_bag grad")


@pytest.mark.parametrize("name", ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "silu",
                                  "mish", "hardtanh", "hardswish", "hardsigmoid"])
def test_inplace_functional_variants_match_torch(name):
    a = np.random.default_rng(0).normal(size=(3, 4)) * 3
    x = dg.tensor(a.copy())
    assert getattr(dg.nn.functional, name)(x, inplace=True) is x
    tx = torch.from_numpy(a.copy())
    getattr(torch.nn.functional, name)(tx, inplace=True)
    _close(x, tx, "float64", f"{name} in place")
    # on a non-leaf inside the graph: same gradients as PyTorch
    w, tw = dg.tensor(a.copy(), requires_grad=True), torch.from_numpy(a.copy()).requires_grad_(True)
    h, th = w * 1.0, tw * 1.0
    assert getattr(dg.nn.functional, name)(h, inplace=True) is h
    getattr(torch.nn.functional, name)(th, inplace=True)
    (h * h).sum().backward()
    (th * th).sum().backward()
    _close(w.grad, tw.grad, "float64", f"{name} in-place grad",
           {"celu": LOOSE["CELU"], "hardsigmoid": LOOSE["Hardsigmoid"]}.get(name))
