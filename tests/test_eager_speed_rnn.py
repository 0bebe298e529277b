"""The fused LSTM layer's fast forward paths (dyngraph/ops/rnn.py) against a plain step loop.

The layer picks, per call, one sigmoid pass over all four gates (small steps) or two passes
(large ones), and, when every step has the same rows, reads each step's state from the rows
the previous step wrote instead of copying it.  Every combination must give the values of
the textbook recurrence, and ``h_n``/``c_n`` must not share memory with the outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from dyngraph.ops import rnn


def _reference(xw, h0, c0, w_hh, w_hr, batch_sizes, reverse):
    """The LSTM recurrence written out step by step in float64."""
    hsz = c0.shape[1]
    offs = np.concatenate([[0], np.cumsum(batch_sizes)])
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    hs = np.zeros((xw.shape[0], h0.shape[1]))
    order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    for t in order:
        r = batch_sizes[t]
        a = xw[offs[t]:offs[t] + r].astype(np.float64) + h[:r] @ w_hh.T.astype(np.float64)
        sig = lambda z: 1.0 / (1.0 + np.exp(-z))
        i, f, g, o = (sig(a[:, :hsz]), sig(a[:, hsz:2 * hsz]), np.tanh(a[:, 2 * hsz:3 * hsz]),
                      sig(a[:, 3 * hsz:]))
        cn = f * c[:r] + i * g
        hn = o * np.tanh(cn)
        if w_hr is not None:
            hn = hn @ w_hr.T.astype(np.float64)
        h, c = h.copy(), c.copy()
        h[:r], c[:r] = hn, cn
        hs[offs[t]:offs[t] + r] = hn
    return hs, h, c


@pytest.mark.parametrize("one_pass", [True, False])
@pytest.mark.parametrize("batch_sizes", [(1,) * 7, (3,) * 5, (3, 3, 2, 1)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("proj", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_forward_paths_match_the_recurrence(monkeypatch, one_pass, batch_sizes, reverse,
                                                 proj, dtype):
    monkeypatch.setattr(rnn, "_ONE_PASS_GATES", 10 ** 9 if one_pass else 0)
    rng = np.random.default_rng(len(batch_sizes) + 10 * reverse + 100 * proj)
    hsz, psz, b = 5, 3, batch_sizes[0]
    out_sz = psz if proj else hsz
    xw = (rng.standard_normal((sum(batch_sizes), 4 * hsz)) * 3).astype(dtype)  # some saturate
    h0 = rng.standard_normal((b, out_sz)).astype(dtype)
    c0 = rng.standard_normal((b, hsz)).astype(dtype)
    w_hh = rng.standard_normal((4 * hsz, out_sz)).astype(dtype)
    w_hr = rng.standard_normal((psz, hsz)).astype(dtype) if proj else None
    h0_before, c0_before = h0.copy(), c0.copy()
    hs, hn, cn, acts, cs = rnn._lstm_forward(xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    want_hs, want_h, want_c = _reference(xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(hs, want_hs, rtol=tol, atol=tol)
    np.testing.assert_allclose(hn, want_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(cn, want_c, rtol=tol, atol=tol)
    assert hs.dtype == hn.dtype == cs.dtype == acts.dtype == dtype
    # the inputs are read, never written; the final states are arrays of their own
    np.testing.assert_array_equal(h0, h0_before)
    np.testing.assert_array_equal(c0, c0_before)
    for state in (hn, cn):
        assert not np.shares_memory(state, hs) and not np.shares_memory(state, cs)
        assert not np.shares_memory(state, h0) and not np.shares_memory(state, c0)
    # the saved gate activations are what the backward pass reads: i, f, o in (0, 1), g in [-1, 1]
    g = acts[:, 2 * hsz:3 * hsz]
    assert np.all(np.abs(g) <= 1) and np.all((acts[:, :2 * hsz] >= 0) & (acts[:, :2 * hsz] <= 1))


def test_lstm_layer_gradients_are_the_same_on_both_gate_paths(monkeypatch):
    import dyngraph as dg

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 1, 4)).astype(np.float32)
    grads = []
    monkeypatch.setattr(rnn, "_K", None)   # the NumPy path (tests/test_rnn_kernels.py: the C one)
    for limit in (10 ** 9, 0):
        monkeypatch.setattr(rnn, "_ONE_PASS_GATES", limit)
        dg.manual_seed(0)
        lstm = dg.nn.LSTM(4, 5, bidirectional=True)
        xt = dg.tensor(x, requires_grad=True)
        y, (h, c) = lstm(xt)
        (y.sum() + h.sum() * 2 + c.sum()).backward()
        grads.append([xt.grad.numpy()] + [p.grad.numpy() for p in lstm.parameters()])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)


def test_lstm_cell_rules_on_arrays_equal_the_recorded_rules(monkeypatch):
    """The cell rules' NumPy path (plain backward) against their primitive path (the one
    create_graph records), on the same values: equal, with zeros where a rule gives none.
    (The compiled kernels' rules are compared in tests/test_rnn_kernels.py, to a few ulp.)"""
    import dyngraph as dg

    monkeypatch.setattr(rnn, "_K", None)

    rng = np.random.default_rng(5)
    h = 6
    for dtype in (np.float32, np.float64):
        gates = (rng.standard_normal((3, 4 * h)) * 4).astype(dtype)
        c = rng.standard_normal((3, h)).astype(dtype)
        gr = rng.standard_normal((3, h)).astype(dtype)
        out = None
        for prim in (rnn.lstm_cell_state_p, rnn.lstm_cell_hidden_p):
            for rule in prim.vjp_rules:
                on_arrays = rule(gr, out, gates, c)
                on_tensors = rule(dg.tensor(gr), out, dg.tensor(gates), dg.tensor(c))
                assert type(on_arrays) is np.ndarray and on_arrays.dtype == dtype
                np.testing.assert_array_equal(on_arrays, on_tensors.numpy())
