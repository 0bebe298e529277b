"""dg.onnx.export: checked with onnx.checker (full_check) and compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn as nn
import dyngraph.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _export_and_run(model, args, tmp_path, feeds=None, **kw):
    path = tmp_path / "model.onnx"
    proto = dg.onnx.export(model, args, path, **kw)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = feeds or args
    outs = sess.run(None, {n: (a.numpy() if isinstance(a, dg.Tensor) else a) for n, a in zip(names, feeds, strict=True)})
    return proto, outs


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b.detach().numpy() if isinstance(b, dg.Tensor) else b, rtol=tol, atol=tol)


def test_mlp_with_dynamic_batch(tmp_path):
    dg.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.LogSoftmax(dim=1))
    x = dg.randn(5, 8)
    x2 = dg.randn(11, 8)
    _, outs = _export_and_run(m, (x,), tmp_path, feeds=(x2,), input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    _close(outs[0], m(x2))


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def test_digits_cnn(tmp_path):
    dg.manual_seed(1)
    m = DigitsCNN()
    x = dg.randn(4, 1, 8, 8)
    x2 = dg.randn(7, 1, 8, 8)
    _, outs = _export_and_run(m, (x,), tmp_path, feeds=(x2,), input_names=["img"],
                              dynamic_axes={"img": {0: "n"}, "output_0": {0: "n"}})
    _close(outs[0], m(x2))


def test_lstm_unrolled(tmp_path):
    dg.manual_seed(2)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.ih = nn.Linear(3, 16)
            self.hh = nn.Linear(4, 16)
            self.out = nn.Linear(4, 2)

        def forward(self, xs):
            h = dg.zeros(xs.shape[1], 4)
            c = dg.zeros(xs.shape[1], 4)
            for t in range(xs.shape[0]):
                i, f, g, o = (self.ih(xs[t]) + self.hh(h)).chunk(4, 1)
                c = f.sigmoid() * c + i.sigmoid() * g.tanh()
                h = o.sigmoid() * c.tanh()
            return self.out(h).softmax(-1)

    m = Tagger()
    xs = dg.randn(6, 2, 3)
    _, outs = _export_and_run(m, (xs,), tmp_path)
    _close(outs[0], m(xs))


def test_transformer_encoder_layer(tmp_path):
    dg.manual_seed(3)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                       batch_first=True)
    layer.eval()
    x = dg.randn(2, 5, 8)
    _, outs = _export_and_run(layer, (x,), tmp_path)
    _close(outs[0], layer(x))


def test_data_dependent_branch_warns_and_exports_taken_branch(tmp_path):
    def f(x):
        if x.sum() > 0:
            return x.exp()
        return -x

    x = dg.ones(3)
    with pytest.warns(UserWarning, match="branch taken"):
        _, outs = _export_and_run(f, (x,), tmp_path)
    _close(outs[0], f(x))


def test_missing_lowering_names_the_primitive(tmp_path):
    def f(x):
        return dg.searchsorted(dg.tensor([0.0, 1.0, 2.0]), x)

    with pytest.raises(dg.onnx.UnsupportedPrimitiveError, match="'searchsorted'"):
        dg.onnx.export(f, (dg.ones(3),), tmp_path / "m.onnx")


def test_every_lowering_names_a_registered_primitive():
    from dyngraph.ops.registry import REGISTRY

    assert set(dg.onnx.LOWERINGS) <= set(REGISTRY)


@pytest.mark.parametrize("fn", [
    lambda x: dg.nn.functional.layer_norm(x, (4,)),
    lambda x: x.masked_fill(x > 0, 0.5),
    lambda x: dg.gather(x, 1, dg.tensor([[0, 3], [1, 1], [2, 0]])),
    lambda x: dg.index_select(x, 1, dg.tensor([3, 0])),
    lambda x: x.argmax(1).to(dg.float32) + x.max(0).values.sum(),
    lambda x: dg.einsum("ij,kj->ik", x, x),
    lambda x: x.repeat(2, 1).tril(),
    lambda x: dg.cumsum(x, 1).flip(0),
    lambda x: dg.log2(x.abs() + 1) + dg.exp2(x) + dg.erfc(x),
    lambda x: dg.lerp(x, x * 2, 0.25) + dg.hypot(x, x + 1),
], ids=["layer_norm", "masked_fill", "gather", "index_select", "arg_max", "einsum",
        "repeat_tril", "cumsum_flip", "log_exp", "lerp_hypot"])
def test_more_lowerings(fn, tmp_path):
    x = dg.randn(3, 4)
    _, outs = _export_and_run(fn, (x,), tmp_path)
    _close(outs[0], fn(x))
