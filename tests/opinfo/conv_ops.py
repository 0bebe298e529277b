"""Op records for convolution, pooling, resampling and fused recurrent primitives.

Shapes are tiny: finite differences cost two forward passes per input element.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.opinfo import OpInfo, Sample, randn


def _F(lib):
    return lib.nn.functional


def _s(*shapes, **kwargs):
    def samples(rng, dt):
        return [Sample(tuple(randn(rng, s, dt) for s in shapes), dict(kwargs))]
    return samples


def _distinct(rng, shape, dtype):
    """Values with no ties (max pooling's gradient is only defined without ties)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) / n * 4 - 2).astype(dtype)


def _pool_samples(shape):
    def samples(rng, dt):
        return [Sample((_distinct(rng, shape, dt),))]
    return samples


_CONV = {"atol": 1e-5, "rtol": 1e-5}

OPS = [
    OpInfo("conv2d", lambda m, x, w, b: _F(m).conv2d(x, w, b), _s((2, 2, 4, 4), (3, 2, 2, 2), (3,)), **_CONV),
    OpInfo("conv2d_stride_pad_dil", lambda m, x, w: _F(m).conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2)),
           _s((1, 2, 5, 5), (2, 2, 3, 2)), **_CONV),
    OpInfo("conv2d_groups", lambda m, x, w, b: _F(m).conv2d(x, w, b, padding=1, groups=2),
           _s((1, 4, 3, 3), (4, 2, 2, 2), (4,)), **_CONV),
    OpInfo("conv2d_same", lambda m, x, w: _F(m).conv2d(x, w, padding="same", dilation=2),
           _s((1, 1, 5, 4), (2, 1, 2, 3)), **_CONV),
    OpInfo("conv2d_unbatched", lambda m, x, w: _F(m).conv2d(x, w, padding="valid"),
           _s((2, 4, 4), (1, 2, 3, 3)), **_CONV),
    OpInfo("conv1d", lambda m, x, w, b: _F(m).conv1d(x, w, b, stride=2, padding=1),
           _s((2, 2, 7), (3, 2, 3), (3,)), **_CONV),
    OpInfo("conv1d_same_groups", lambda m, x, w: _F(m).conv1d(x, w, padding="same", groups=2),
           _s((1, 2, 6), (4, 1, 4)), **_CONV),
    OpInfo("conv_transpose2d", lambda m, x, w, b: _F(m).conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1), _s((1, 2, 3, 3), (2, 3, 3, 3), (3,)), **_CONV),
    OpInfo("conv_transpose2d_groups_dil", lambda m, x, w: _F(m).conv_transpose2d(
        x, w, stride=(1, 2), groups=2, dilation=(2, 1)), _s((1, 4, 3, 2), (4, 1, 2, 2)), **_CONV),
    OpInfo("conv_transpose1d", lambda m, x, w: _F(m).conv_transpose1d(x, w, stride=3, padding=1),
           _s((2, 2, 3), (2, 2, 3)), **_CONV),
    OpInfo("max_pool2d", lambda m, x: _F(m).max_pool2d(x, 2), _pool_samples((1, 2, 4, 4))),
    OpInfo("max_pool2d_indices", lambda m, x: _F(m).max_pool2d(
        x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True), _pool_samples((2, 1, 5, 6))),
    OpInfo("max_pool2d_dilation", lambda m, x: _F(m).max_pool2d(x, 2, stride=1, dilation=2),
           _pool_samples((1, 1, 5, 5))),
    OpInfo("max_pool1d_indices", lambda m, x: _F(m).max_pool1d(
        x, 3, stride=2, padding=1, return_indices=True), _pool_samples((2, 2, 7))),
    OpInfo("max_unpool2d", lambda m, x, i: _F(m).max_unpool2d(x, i, 2),
           lambda rng, dt: [Sample((randn(rng, (1, 2, 2, 2), dt),
                                    np.array([[[[5, 2], [12, 15]], [[0, 7], [9, 10]]]], dtype=np.int64)))]),
    OpInfo("avg_pool2d", lambda m, x: _F(m).avg_pool2d(x, 2), _s((1, 2, 4, 4))),
    OpInfo("avg_pool2d_pad_ceil", lambda m, x: _F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True),
           _s((1, 1, 6, 5))),
    OpInfo("avg_pool2d_exclude_pad", lambda m, x: _F(m).avg_pool2d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False), _s((1, 1, 6, 5))),
    OpInfo("avg_pool2d_divisor", lambda m, x: _F(m).avg_pool2d(x, 2, 1, divisor_override=3),
           _s((1, 1, 3, 4))),
    OpInfo("avg_pool1d", lambda m, x: _F(m).avg_pool1d(x, 3, 2, 1, ceil_mode=True), _s((2, 1, 8))),
    OpInfo("adaptive_avg_pool2d", lambda m, x: _F(m).adaptive_avg_pool2d(x, (2, 3)), _s((1, 2, 5, 4))),
    OpInfo("adaptive_avg_pool2d_global", lambda m, x: _F(m).adaptive_avg_pool2d(x, 1), _s((2, 2, 3, 3))),
    OpInfo("adaptive_avg_pool1d", lambda m, x: _F(m).adaptive_avg_pool1d(x, 3), _s((1, 2, 7))),
    OpInfo("adaptive_max_pool2d", lambda m, x: _F(m).adaptive_max_pool2d(x, (2, 3), return_indices=True),
           _pool_samples((1, 2, 5, 4))),
    OpInfo("adaptive_max_pool1d", lambda m, x: _F(m).adaptive_max_pool1d(x, 2), _pool_samples((1, 2, 5))),
    OpInfo("interpolate_nearest", lambda m, x: _F(m).interpolate(x, scale_factor=(2, 1.5)),
           _s((1, 2, 3, 2))),
    OpInfo("interpolate_nearest_down", lambda m, x: _F(m).interpolate(x, size=(2, 3), mode="nearest-exact"),
           _s((1, 1, 5, 4))),
    OpInfo("interpolate_bilinear", lambda m, x: _F(m).interpolate(x, size=(5, 3), mode="bilinear"),
           _s((1, 2, 3, 2))),
    OpInfo("interpolate_bilinear_align", lambda m, x: _F(m).interpolate(
        x, scale_factor=2, mode="bilinear", align_corners=True), _s((1, 1, 3, 2))),
    OpInfo("unfold", lambda m, x: _F(m).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2),
           _s((1, 2, 4, 5))),
    OpInfo("fold", lambda m, x: _F(m).fold(x, (4, 5), (2, 3), dilation=(1, 2), padding=1, stride=2),
           _s((1, 12, 6))),
    OpInfo("interpolate_linear", lambda m, x: _F(m).interpolate(x, scale_factor=1.5, mode="linear"),
           _s((2, 1, 4))),
    OpInfo("lp_pool1d", lambda m, x: _F(m).lp_pool1d(x.abs() + 0.1, 2.0, 3, stride=2), _s((1, 2, 7))),
    OpInfo("lp_pool2d", lambda m, x: _F(m).lp_pool2d(x.abs() + 0.1, 3, (2, 2)), _s((1, 1, 4, 5))),
    OpInfo("interpolate_trilinear", lambda m, x: _F(m).interpolate(x, size=(3, 2, 5), mode="trilinear"),
           _s((1, 2, 2, 3, 4))),
    OpInfo("interpolate_nearest_5d", lambda m, x: _F(m).interpolate(x, scale_factor=(2, 1, 1.5)),
           _s((1, 1, 2, 3, 2))),
]


# ---------------------------------------------------------------------------
# fused recurrent layers: dyngraph's primitive vs the same layer unrolled in torch
# ---------------------------------------------------------------------------

def _torch_scan(cell, xw, h0s, w_hh, steps):
    states = list(h0s)
    outs = []
    for t in range(steps):
        states = cell(xw[t], states[0] @ w_hh.T, *states)
        outs.append(states[0])
    return torch.stack(outs), states


def _lstm(m, x, h0, c0, w_hh):
    t, b, _ = x.shape
    if m is torch:
        hsz = h0.shape[1]

        def cell(xt, hw, h, c):
            g = xt + hw
            i, f = torch.sigmoid(g[:, :hsz]), torch.sigmoid(g[:, hsz:2 * hsz])
            gg, o = torch.tanh(g[:, 2 * hsz:3 * hsz]), torch.sigmoid(g[:, 3 * hsz:])
            c2 = f * c + i * gg
            return [o * torch.tanh(c2), c2]
        hs, (h, c) = _torch_scan(cell, x, [h0, c0], w_hh, t)
        return hs, h, c
    from dyngraph.ops.rnn import lstm_layer

    hs, h, c = lstm_layer(x.reshape(t * b, -1), h0, c0, w_hh, (b,) * t)
    return hs.reshape(t, b, -1), h, c


def _gru(m, x, h0, w_hh, b_hh):
    t, b, _ = x.shape
    if m is torch:
        hsz = h0.shape[1]

        def cell(xt, hw, h):
            hw = hw + b_hh
            r = torch.sigmoid(xt[:, :hsz] + hw[:, :hsz])
            z = torch.sigmoid(xt[:, hsz:2 * hsz] + hw[:, hsz:2 * hsz])
            n = torch.tanh(xt[:, 2 * hsz:] + r * hw[:, 2 * hsz:])
            return [(1 - z) * n + z * h]
        hs, (h,) = _torch_scan(cell, x, [h0], w_hh, t)
        return hs, h
    from dyngraph.ops.rnn import gru_layer

    hs, h = gru_layer(x.reshape(t * b, -1), h0, w_hh, b_hh, (b,) * t)
    return hs.reshape(t, b, -1), h


def _rnn(m, x, h0, w_hh):
    t, b, _ = x.shape
    if m is torch:
        hs, (h,) = _torch_scan(lambda xt, hw, h: [torch.tanh(xt + hw)], x, [h0], w_hh, t)
        return hs, h
    from dyngraph.ops.rnn import rnn_layer

    hs, h = rnn_layer(x.reshape(t * b, -1), h0, w_hh, (b,) * t)
    return hs.reshape(t, b, -1), h


OPS += [
    OpInfo("lstm_layer", _lstm, _s((3, 2, 8), (2, 2), (2, 2), (8, 2)), atol=1e-5),
    OpInfo("gru_layer", _gru, _s((3, 2, 6), (2, 2), (6, 2), (6,)), atol=1e-5),
    OpInfo("rnn_layer", _rnn, _s((4, 2, 3), (2, 3), (3, 3)), atol=1e-5),
]


# ---------------------------------------------------------------------------
# one LSTM cell step (nn.LSTMCell): two primitives, c' then h' computed from c'
# ---------------------------------------------------------------------------

def _lstm_cell(m, gates, c):
    if m is torch:
        i, f, g, o = gates.chunk(4, 1)
        cn = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cn), cn
    from dyngraph.ops.rnn import lstm_cell

    return lstm_cell(gates, c)


def _gate_sigmoid(m, x):
    if m is torch:
        return torch.sigmoid(x)
    from dyngraph.ops.registry import bind
    from dyngraph.ops.rnn import _gate_sigmoid_p

    return bind(_gate_sigmoid_p, (x,), {})


OPS += [
    OpInfo("lstm_cell", _lstm_cell, _s((3, 8), (3, 2))),
    OpInfo("lstm_gate_sigmoid", _gate_sigmoid, _s((2, 5))),
]
