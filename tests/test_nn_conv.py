"""Convolution, pooling and upsampling layers against PyTorch: values, gradients, reprs, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import to_np

TOL = {"float64": (1e-10, 1e-12), "float32": (1e-5, 1e-5)}


def copy_weights(tmod, dmod):
    """Load the torch module's state dict into the dyngraph module (through NumPy)."""
    dmod.load_state_dict({k: dg.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})


def compare_modules(tmod, dmod, inputs, dtype, call=None, seed=0, grad_tol=None):
    """Same weights, same inputs: compare outputs, input grads and parameter grads."""
    call = call or (lambda m, *a: m(*a))
    tdt = getattr(torch, dtype)
    tmod = tmod.to(tdt)
    dmod = dmod.to(getattr(dg, dtype))
    tmod.zero_grad(set_to_none=True)
    dmod.zero_grad(set_to_none=True)
    copy_weights(tmod, dmod)
    tin = [torch.tensor(a.astype(dtype), requires_grad=True) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
           else (torch.tensor(a) if isinstance(a, np.ndarray) else a) for a in inputs]
    din = [dg.tensor(a.astype(dtype)).requires_grad_() if isinstance(a, np.ndarray) and a.dtype.kind == "f"
           else (dg.tensor(a) if isinstance(a, np.ndarray) else a) for a in inputs]
    tout = call(tmod, *tin)
    dout = call(dmod, *din)
    touts = _flat(tout)
    douts = _flat(dout)
    assert len(touts) == len(douts)
    rtol, atol = TOL[dtype]
    grtol, gatol = grad_tol or (rtol, atol * 10)
    rng = np.random.default_rng(seed)
    tl = dl = 0
    for k, (a, b) in enumerate(zip(touts, douts, strict=True)):
        if a is None:
            assert b is None, f"output {k}: torch returns None"
            continue
        assert tuple(a.shape) == tuple(b.shape), f"output {k}: shape {tuple(b.shape)} vs torch {tuple(a.shape)}"
        np.testing.assert_allclose(to_np(b), to_np(a), rtol=rtol, atol=atol, err_msg=f"output {k}")
        if a.dtype.is_floating_point and a.requires_grad:
            w = rng.uniform(-1, 1, size=tuple(a.shape)).astype(dtype)
            tl = tl + (a * torch.tensor(w)).sum()
            dl = dl + (b * dg.tensor(w)).sum()
    tl.backward()
    dl.backward()
    for k, (a, b) in enumerate(zip(tin, din, strict=True)):
        if isinstance(a, torch.Tensor) and a.requires_grad and a.grad is not None:
            # (torch may skip a float mask entirely, e.g. with the is_causal hint)
            np.testing.assert_allclose(to_np(b.grad), to_np(a.grad), rtol=grtol, atol=gatol,
                                       err_msg=f"grad of input {k}")
    tparams = dict(tmod.named_parameters())
    for name, p in dmod.named_parameters():
        tp = tparams[name]
        if tp.grad is None:
            assert p.grad is None or np.all(to_np(p.grad) == 0), name
            continue
        np.testing.assert_allclose(to_np(p.grad), to_np(tp.grad), rtol=grtol, atol=gatol,
                                   err_msg=f"grad of parameter {name}")
    return dout


def _flat(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(_flat(o))
        return res
    return [out]


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = [
    ("Conv2d", dict(in_channels=3, out_channels=4, kernel_size=3, padding=1), (2, 3, 6, 5)),
    ("Conv2d", dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=2, padding=(1, 0),
                    dilation=(1, 2), groups=2, bias=False), (2, 4, 7, 8)),
    ("Conv2d", dict(in_channels=2, out_channels=2, kernel_size=3, padding="same",
                    padding_mode="reflect"), (1, 2, 5, 5)),
    ("Conv2d", dict(in_channels=2, out_channels=3, kernel_size=3, padding=2,
                    padding_mode="circular"), (2, 5, 5)),
    ("Conv1d", dict(in_channels=3, out_channels=2, kernel_size=4, stride=2, padding=1), (2, 3, 9)),
    ("Conv1d", dict(in_channels=2, out_channels=4, kernel_size=3, padding="same", groups=2,
                    padding_mode="replicate"), (3, 2, 6)),
    ("Conv3d", dict(in_channels=2, out_channels=2, kernel_size=2, padding=1), (1, 2, 3, 3, 3)),
    ("ConvTranspose2d", dict(in_channels=4, out_channels=2, kernel_size=3, stride=2, padding=1,
                             output_padding=1), (2, 4, 3, 4)),
    ("ConvTranspose2d", dict(in_channels=4, out_channels=6, kernel_size=(2, 3), stride=(1, 2),
                             groups=2, dilation=2, bias=False), (1, 4, 3, 3)),
    ("ConvTranspose1d", dict(in_channels=2, out_channels=3, kernel_size=3, stride=2), (2, 2, 5)),
    ("MaxPool2d", dict(kernel_size=2), (2, 3, 6, 6)),
    ("MaxPool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (1, 2, 7, 6)),
    ("MaxPool1d", dict(kernel_size=2, stride=1, dilation=2), (2, 2, 7)),
    ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 7, 6)),
    ("AvgPool2d", dict(kernel_size=2, divisor_override=3), (1, 2, 4, 4)),
    ("AvgPool1d", dict(kernel_size=3, stride=2, padding=1), (2, 2, 8)),
    ("AdaptiveAvgPool2d", dict(output_size=(3, 2)), (2, 2, 7, 5)),
    ("AdaptiveAvgPool2d", dict(output_size=(None, 1)), (2, 2, 4, 6)),
    ("AdaptiveAvgPool1d", dict(output_size=3), (2, 2, 7)),
    ("AdaptiveMaxPool2d", dict(output_size=(2, 3)), (2, 2, 5, 7)),
    ("AdaptiveMaxPool1d", dict(output_size=2), (2, 2, 5)),
    ("Upsample", dict(scale_factor=2, mode="nearest"), (1, 2, 3, 4)),
    ("Upsample", dict(size=(5, 7), mode="bilinear"), (2, 1, 3, 4)),
    ("Upsample", dict(scale_factor=1.5, mode="bilinear", align_corners=True), (1, 2, 4, 3)),
    ("Upsample", dict(scale_factor=3, mode="linear"), (2, 2, 4)),
    ("Upsample", dict(size=(3, 4), mode="area"), (1, 2, 7, 9)),
    ("Upsample", dict(scale_factor=(2, 1.5), mode="bicubic"), (1, 2, 3, 4)),
    ("Upsample", dict(size=(7, 3), mode="bicubic", align_corners=True), (2, 1, 4, 5)),
    ("Upsample", dict(scale_factor=0.5, mode="area"), (1, 2, 6, 8)),
    ("UpsamplingNearest2d", dict(size=(4, 5)), (1, 1, 3, 3)),
    ("UpsamplingBilinear2d", dict(scale_factor=2), (1, 1, 3, 2)),
    ("Unfold", dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), (2, 3, 6, 7)),
    ("Fold", dict(output_size=(5, 6), kernel_size=2, padding=1, stride=2), (2, 12, 12)),
    ("PixelShuffle", dict(upscale_factor=2), (2, 8, 3, 4)),
    ("PixelUnshuffle", dict(downscale_factor=2), (2, 2, 4, 6)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs,shape", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_layer_matches_torch(name, kwargs, shape, dtype):
    tmod = getattr(torch.nn, name)(**kwargs)
    dmod = getattr(dg.nn, name)(**kwargs)
    x = _x(*shape)
    if "Max" in name:   # no ties: max pooling's gradient is only defined without them
        x = np.random.default_rng(1).permutation(x.size).reshape(shape) / x.size
    compare_modules(tmod, dmod, [x], dtype)
    assert repr(dmod) == repr(tmod)


def test_max_pool_return_indices_and_conv_transpose_output_size():
    x = np.random.default_rng(3).permutation(2 * 3 * 36).reshape(2, 3, 6, 6).astype(np.float64)
    tv, ti = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(torch.tensor(x))
    dv, di = dg.nn.MaxPool2d(3, 2, 1, return_indices=True)(dg.tensor(x))
    np.testing.assert_array_equal(di.numpy(), ti.numpy())
    assert di.dtype == dg.int64
    np.testing.assert_array_equal(dv.numpy(), tv.numpy())
    tv, ti = torch.nn.AdaptiveMaxPool2d((4, 4), return_indices=True)(torch.tensor(x))
    dv, di = dg.nn.AdaptiveMaxPool2d((4, 4), return_indices=True)(dg.tensor(x))
    np.testing.assert_array_equal(di.numpy(), ti.numpy())
    tconv = torch.nn.ConvTranspose2d(3, 2, 3, stride=2).double()
    dconv = dg.nn.ConvTranspose2d(3, 2, 3, stride=2).double()
    copy_weights(tconv, dconv)
    xin = _x(1, 3, 4, 4)
    a = tconv(torch.tensor(xin), output_size=[10, 10])
    b = dconv(dg.tensor(xin), output_size=[10, 10])
    assert tuple(b.shape) == tuple(a.shape) == (1, 2, 10, 10)
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_unpool_matches_torch(dtype):
    x = np.random.default_rng(5).permutation(2 * 2 * 30).reshape(2, 2, 5, 6).astype(dtype)
    for nd, shape in ((2, None), (2, (5, 7)), (1, None)):
        xx = x.reshape(2, 2, 30) if nd == 1 else x
        pool_t = getattr(torch.nn, f"MaxPool{nd}d")(2, stride=2, return_indices=True)
        vt, it = pool_t(torch.tensor(xx))
        dmod = getattr(dg.nn, f"MaxUnpool{nd}d")(2, 2)
        tmod = getattr(torch.nn, f"MaxUnpool{nd}d")(2, 2)
        assert repr(dmod) == repr(tmod)
        call = (lambda m, v, i, s=shape: m(v, i, output_size=s)) if shape else (lambda m, v, i: m(v, i))
        compare_modules(tmod, dmod, [vt.numpy(), it.numpy()], dtype, call=call)


def test_default_init_and_parameter_names():
    dg.manual_seed(0)
    conv = dg.nn.Conv2d(3, 8, 3)
    tconv = torch.nn.Conv2d(3, 8, 3)
    assert [n for n, _ in conv.named_parameters()] == [n for n, _ in tconv.named_parameters()]
    bound = 1 / np.sqrt(3 * 9)
    w = conv.weight.detach().numpy()
    # kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(conv.bias.detach().numpy()).max() <= bound
    assert conv.weight.dtype == dg.float32
    ct = dg.nn.ConvTranspose2d(4, 6, 2, groups=2)
    assert tuple(ct.weight.shape) == (4, 3, 2, 2)
    assert dg.nn.Conv1d(2, 4, 3, bias=False).bias is None


@pytest.mark.parametrize("layer,x,pattern", [
    (lambda: dg.nn.Conv2d(3, 4, 3), dg.randn(2, 4, 8, 8), r"Conv2d.*expected input with 3 channels.*got 4 channels.*\[2, 4, 8, 8\]"),
    (lambda: dg.nn.Conv2d(3, 4, 3), dg.randn(8, 8), r"Conv2d.*4-D input.*got a 2-D input of shape \[8, 8\]"),
    (lambda: dg.nn.Conv1d(3, 4, 3), dg.zeros(2, 3, 8, dtype=dg.int64), r"Conv1d.*floating-point.*int64"),
    (lambda: dg.nn.Conv2d(3, 4, 3), dg.randn(1, 3, 8, 8, dtype=dg.float64), r"Conv2d.*float64.*float32"),
    (lambda: dg.nn.Conv2d(3, 4, 5), dg.randn(1, 3, 3, 3), r"Kernel size can't be greater"),
    (lambda: dg.nn.MaxPool2d(2), dg.randn(2, 3, 4, 4, 4), r"MaxPool2d.*4-D input.*5-D"),
    (lambda: dg.nn.AvgPool2d(2), dg.zeros(1, 1, 4, 4, dtype=dg.int32), r"AvgPool2d.*floating-point.*int32"),
    (lambda: dg.nn.MaxPool2d(2, padding=2), dg.randn(1, 1, 4, 4), r"pad should be at most half"),
    (lambda: dg.nn.Upsample(scale_factor=2, mode="bilinear"), dg.randn(1, 2, 4), r"bilinear.*4-D"),
])
def test_bad_input_errors_name_the_layer(layer, x, pattern):
    with pytest.raises((RuntimeError, ValueError, NotImplementedError), match=pattern):
        layer()(x)


def test_conv_rejects_bad_configuration():
    with pytest.raises(ValueError, match="divisible by groups"):
        dg.nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        dg.nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode"):
        dg.nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(RuntimeError, match="weight.*same dtype"):
        dg.conv2d(dg.randn(1, 1, 4, 4), dg.randn(1, 1, 2, 2, dtype=dg.float64))


def test_conv_second_order_and_state_dict_round_trip():
    dconv = dg.nn.Conv2d(2, 3, 3, padding=1).double()
    tconv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    tconv.load_state_dict({k: torch.tensor(v.numpy()) for k, v in dconv.state_dict().items()})
    x = _x(1, 2, 4, 4)
    xd = dg.tensor(x).requires_grad_()
    xt = torch.tensor(x, requires_grad=True)
    (gd,) = dg.autograd.grad((dconv(xd) ** 2).sum(), [xd], create_graph=True)
    (gt,) = torch.autograd.grad((tconv(xt) ** 2).sum(), [xt], create_graph=True)
    (gd * gd).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dconv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_cnn_training_step_matches_torch():
    """A small CNN (conv, pool, upsample, adaptive pool) through one SGD step."""
    def build(nn):
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 4, 3, padding=1), nn.Upsample(scale_factor=2),
                             nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    tm, dm = build(torch.nn).double(), build(dg.nn).double()
    copy_weights(tm, dm)
    x = _x(4, 1, 8, 8)
    y = np.array([0, 2, 1, 0])
    for _ in range(2):
        lt = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        ld = dg.nn.functional.cross_entropy(dm(dg.tensor(x)), dg.tensor(y))
        np.testing.assert_allclose(ld.item(), lt.item(), rtol=1e-10)
        tm.zero_grad()
        dm.zero_grad()
        lt.backward()
        ld.backward()
        with torch.no_grad():
            for p in tm.parameters():
                p -= 0.1 * p.grad
        with dg.no_grad():
            for p in dm.parameters():
                p -= 0.1 * p.grad
