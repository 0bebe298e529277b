"""RNN/LSTM/GRU layers and cells, packing utilities and unpadded batches against PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.nn.utils import rnn as U
from tests.helpers import to_np
from tests.test_nn_conv import compare_modules, copy_weights

torch_U = torch.nn.utils.rnn  # noqa: N816


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


LAYERS = [
    ("LSTM", dict(num_layers=1)),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(bias=False, bidirectional=True)),
    ("GRU", dict(num_layers=2)),
    ("GRU", dict(bidirectional=True, batch_first=True, bias=False)),
    ("RNN", dict(nonlinearity="tanh", num_layers=2, bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", batch_first=True)),
]


def _call(kind):
    if kind == "LSTM":
        return lambda m, x, h, c: m(x, (h, c))
    return lambda m, x, h: m(x, h)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,kw", LAYERS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(LAYERS)])
def test_layer_matches_torch(kind, kw, dtype):
    tmod = getattr(torch.nn, kind)(3, 4, **kw)
    dmod = getattr(dg.nn, kind)(3, 4, **kw)
    assert repr(dmod) == repr(tmod)
    assert list(dmod.state_dict()) == list(tmod.state_dict())
    d = 2 if kw.get("bidirectional") else 1
    n = kw.get("num_layers", 1) * d
    x = _x(2, 5, 3) if kw.get("batch_first") else _x(5, 2, 3)
    states = [_x(n, 2, 4, seed=1)] + ([_x(n, 2, 4, seed=2)] if kind == "LSTM" else [])
    compare_modules(tmod, dmod, [x, *states], dtype, call=_call(kind))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [dict(proj_size=2), dict(proj_size=3, num_layers=2, bidirectional=True,
                                                         batch_first=True)])
def test_lstm_with_projections_matches_torch(kw, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: "LSTM with projections is not supported with oneDNN"
        tmod = torch.nn.LSTM(3, 5, **kw)
        dmod = dg.nn.LSTM(3, 5, **kw)
        assert repr(dmod) == repr(tmod)
        assert list(dmod.state_dict()) == list(tmod.state_dict())
        n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        x = _x(2, 4, 3)
        b = 2 if kw.get("batch_first") else 4
        h0, c0 = _x(n, b, kw["proj_size"], seed=1), _x(n, b, 5, seed=2)
        compare_modules(tmod, dmod, [x, h0, c0], dtype, call=_call("LSTM"))
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        dg.nn.LSTM(3, 5, proj_size=5)
    with pytest.raises(TypeError):     # as in PyTorch, GRU has no proj_size argument
        dg.nn.GRU(3, 5, proj_size=2)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_default_state_unbatched_and_eval(kind):
    tmod = getattr(torch.nn, kind)(3, 4, num_layers=2)
    dmod = getattr(dg.nn, kind)(3, 4, num_layers=2)
    compare_modules(tmod, dmod, [_x(6, 3)], "float64")          # unbatched, zero initial state
    compare_modules(tmod.eval(), dmod.eval(), [_x(6, 2, 3)], "float64")


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cells_match_torch(kind, dtype):
    tmod = getattr(torch.nn, kind)(3, 5)
    dmod = getattr(dg.nn, kind)(3, 5)
    assert repr(dmod) == repr(tmod)
    if kind == "LSTMCell":
        call = lambda m, x, h, c: m(x, (h, c))
        inputs = [_x(4, 3), _x(4, 5, seed=1), _x(4, 5, seed=2)]
    else:
        call = lambda m, x, h: m(x, h)
        inputs = [_x(4, 3), _x(4, 5, seed=1)]
    compare_modules(tmod, dmod, inputs, dtype, call=call)
    compare_modules(tmod, dmod, [_x(3)], dtype)        # unbatched, default state
    relu_t, relu_d = torch.nn.RNNCell(3, 5, nonlinearity="relu"), dg.nn.RNNCell(3, 5, nonlinearity="relu")
    compare_modules(relu_t, relu_d, [_x(4, 3)], dtype)


def test_state_dict_round_trips_both_ways():
    for kind in ("LSTM", "GRU"):
        tmod = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
        dmod = getattr(dg.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
        # dyngraph -> torch
        tmod.load_state_dict({k: torch.tensor(v.numpy()) for k, v in dmod.state_dict().items()})
        x = _x(5, 2, 3)
        np.testing.assert_allclose(dmod(dg.tensor(x))[0].detach().numpy(),
                                   tmod(torch.tensor(x))[0].detach().numpy(), rtol=1e-10, atol=1e-12)
        # torch -> dyngraph
        tmod2 = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
        copy_weights(tmod2, dmod)
        np.testing.assert_allclose(dmod(dg.tensor(x))[0].detach().numpy(),
                                   tmod2(torch.tensor(x))[0].detach().numpy(), rtol=1e-10, atol=1e-12)


def test_default_init_range():
    dg.manual_seed(0)
    lstm = dg.nn.LSTM(3, 16)
    bound = 1 / 4
    for name, p in lstm.named_parameters():
        a = p.detach().numpy()
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.8 * bound, name
    assert tuple(lstm.weight_ih_l0.shape) == (64, 3)
    assert tuple(dg.nn.GRU(3, 16).weight_hh_l0.shape) == (48, 16)


def _seqs(lengths, feat=3):
    return [_x(n, feat, seed=i) for i, n in enumerate(lengths)]


def test_pad_pack_utilities_match_torch():
    seqs = _seqs([3, 5, 2, 5])
    td = [torch.tensor(s, requires_grad=True) for s in seqs]
    dd = [dg.tensor(s).requires_grad_() for s in seqs]
    for kw in (dict(), dict(batch_first=True, padding_value=-1.0), dict(padding_side="left")):
        a = torch_U.pad_sequence(td, **kw)
        b = U.pad_sequence(dd, **kw)
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
    tp = torch_U.pack_sequence(td, enforce_sorted=False)
    dp = U.pack_sequence(dd, enforce_sorted=False)
    np.testing.assert_array_equal(dp.data.detach().numpy(), tp.data.detach().numpy())
    for f in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(to_np(getattr(dp, f)), to_np(getattr(tp, f)))
    a, la = torch_U.pad_packed_sequence(tp, batch_first=True, total_length=6)
    b, lb = U.pad_packed_sequence(dp, batch_first=True, total_length=6)
    np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
    np.testing.assert_array_equal(lb.numpy(), la.numpy())
    (a * torch.arange(a.numel()).reshape(a.shape)).sum().backward()
    (b * dg.tensor(np.arange(b.numel()).reshape(tuple(b.shape)).astype(np.float64))).sum().backward()
    for x, y in zip(td, dd, strict=True):
        np.testing.assert_array_equal(y.grad.numpy(), x.grad.numpy())
    back = U.unpack_sequence(dp)
    for s, r in zip(seqs, back, strict=True):
        np.testing.assert_array_equal(r.detach().numpy(), s)
    padded = U.pad_sequence([dg.tensor(s) for s in seqs])
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        U.pack_padded_sequence(padded, [3, 5, 2, 5])
    with pytest.raises(RuntimeError, match="greater than 0"):
        U.pack_padded_sequence(padded, [3, 0, 2, 5], enforce_sorted=False)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_packed_input_matches_torch(kind):
    tmod = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
    dmod = getattr(dg.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
    copy_weights(tmod, dmod)
    seqs = _seqs([4, 6, 2, 5])
    lengths = [len(s) for s in seqs]
    xt = torch.tensor(np.stack([np.pad(s, ((0, 6 - len(s)), (0, 0))) for s in seqs], 1), requires_grad=True)
    xd = dg.tensor(xt.detach().numpy()).requires_grad_()
    h0 = _x(4, 4, 4, seed=9)
    hx_t = (torch.tensor(h0), torch.tensor(h0 * 0.5)) if kind == "LSTM" else torch.tensor(h0)
    hx_d = (dg.tensor(h0), dg.tensor(h0 * 0.5)) if kind == "LSTM" else dg.tensor(h0)
    ot, ht = tmod(torch_U.pack_padded_sequence(xt, lengths, enforce_sorted=False), hx_t)
    od, hd = dmod(U.pack_padded_sequence(xd, lengths, enforce_sorted=False), hx_d)
    assert isinstance(od, U.PackedSequence)
    np.testing.assert_allclose(od.data.detach().numpy(), ot.data.detach().numpy(), rtol=1e-10, atol=1e-12)
    hts = ht if isinstance(ht, tuple) else (ht,)
    hds = hd if isinstance(hd, tuple) else (hd,)
    for a, b in zip(hts, hds, strict=True):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = _x(*ot.data.shape, seed=3)
    ((ot.data * torch.tensor(w)).sum() + sum(h.sum() for h in hts)).backward()
    ((od.data * dg.tensor(w)).sum() + sum(h.sum() for h in hds)).backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    tparams = dict(tmod.named_parameters())
    for name, p in dmod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_unpadded_batch_equals_packed():
    """Different-length sequences with no padding at all (docs/nn.md): same numbers as packing."""
    lstm = dg.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    seqs = [dg.tensor(s).requires_grad_() for s in _seqs([4, 6, 2, 6, 4])]
    packed_out, (hp, cp) = lstm(U.pack_sequence(seqs, enforce_sorted=False))
    padded, lengths = U.pad_packed_sequence(packed_out)
    (padded.sum() + hp.sum() + cp.sum()).backward()
    grads_packed = [s.grad.numpy().copy() for s in seqs]
    for s in seqs:
        s.grad = None
    # 1. group equal lengths into batches: no padding, no packing
    outs, (hg, cg) = U.run_by_length(lstm, seqs)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o.detach().numpy(), padded[:lengths[i].item(), i].detach().numpy(),
                                   rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hg.detach().numpy(), hp.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cg.detach().numpy(), cp.detach().numpy(), rtol=1e-12, atol=1e-14)
    (sum(o.sum() for o in outs) + hg.sum() + cg.sum()).backward()
    for s, g in zip(seqs, grads_packed, strict=True):
        np.testing.assert_allclose(s.grad.numpy(), g, rtol=1e-12, atol=1e-14)
    # 2. one sequence at a time (unbatched input): ordinary Python loop
    for i, s in enumerate(seqs):
        o, (h, _) = lstm(s)
        np.testing.assert_allclose(o.detach().numpy(), outs[i].detach().numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(h.detach().numpy(), hg[:, i].detach().numpy(), rtol=1e-12, atol=1e-14)
    # 3. a cell in a loop, per sequence (one layer, one direction)
    one = dg.nn.LSTM(3, 4).double()
    cell = dg.nn.LSTMCell(3, 4).double()
    cell.load_state_dict({k[:-3]: v for k, v in one.state_dict().items()})
    ref, _ = one(U.pack_sequence(seqs, enforce_sorted=False))
    ref_pad, _ = U.pad_packed_sequence(ref)
    for i, s in enumerate(seqs):
        h = c = None
        for t in range(s.shape[0]):
            h, c = cell(s[t], None if h is None else (h, c))
        np.testing.assert_allclose(h.detach().numpy(), ref_pad[s.shape[0] - 1, i].detach().numpy(),
                                   rtol=1e-12, atol=1e-14)


def test_lstm_1000_steps_backward():
    lstm = dg.nn.LSTM(4, 8)
    x = dg.randn(1000, 2, 4, requires_grad=True)
    out, (h, c) = lstm(x)
    (out.sum() + h.sum()).backward()
    assert x.grad.shape == x.shape
    assert np.isfinite(x.grad.numpy()).all()
    assert np.isfinite(lstm.weight_hh_l0.grad.numpy()).all()
    # a cell in a Python loop records a 1000-step graph: the iterative engine handles it
    cell = dg.nn.LSTMCell(4, 8)
    h = c = dg.zeros(2, 8)
    for t in range(1000):
        h, c = cell(x[t], (h, c))
    h.sum().backward()
    assert np.isfinite(cell.weight_ih.grad.numpy()).all()


def test_second_order_through_lstm_matches_torch():
    tmod, dmod = torch.nn.LSTM(2, 3).double(), dg.nn.LSTM(2, 3).double()
    copy_weights(tmod, dmod)
    x = _x(3, 2, 2)
    xt, xd = torch.tensor(x, requires_grad=True), dg.tensor(x).requires_grad_()
    (gt,) = torch.autograd.grad((tmod(xt)[0] ** 2).sum(), [xt], create_graph=True)
    (gd,) = dg.autograd.grad((dmod(xd)[0] ** 2).sum(), [xd], create_graph=True)
    np.testing.assert_allclose(gd.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (gt ** 2).sum().backward()
    (gd ** 2).sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dmod.weight_hh_l0.grad.numpy(), tmod.weight_hh_l0.grad.numpy(),
                               rtol=1e-9, atol=1e-12)


def test_dropout_between_layers_train_vs_eval():
    dg.manual_seed(0)
    lstm = dg.nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = dg.randn(5, 2, 3)
    lstm.eval()
    a, b = lstm(x)[0].detach().numpy(), lstm(x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    lstm.train()
    c = lstm(x)[0].detach().numpy()
    assert not np.allclose(a, c)
    with pytest.warns(UserWarning, match="dropout"):
        dg.nn.GRU(3, 4, dropout=0.2)


@pytest.mark.parametrize("make,args,pattern", [
    (lambda: dg.nn.LSTM(3, 4), (dg.randn(5, 2, 6),), r"input.size\(-1\) must be equal to input_size. Expected 3, got 6"),
    (lambda: dg.nn.GRU(3, 4), (dg.randn(5, 2, 3, 1),), r"Expected input to be 2D.*4D"),
    (lambda: dg.nn.RNN(3, 4), (dg.randn(5, 2, 3), dg.randn(2, 2, 4)), r"Expected hidden size \(1, 2, 4\), got \[2, 2, 4\]"),
    (lambda: dg.nn.LSTM(3, 4), (dg.zeros(5, 2, 3, dtype=dg.int64),), r"LSTM.*floating-point.*int64"),
    (lambda: dg.nn.LSTM(3, 4), (dg.randn(5, 2, 3, dtype=dg.float64),), r"LSTM.*float64.*float32"),
    (lambda: dg.nn.LSTMCell(3, 4), (dg.randn(2, 5),), r"LSTMCell.*inconsistent input_size: got 5 expected 3"),
])
def test_errors(make, args, pattern):
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        make()(*args)


def test_lstm_training_step_under_graph_capture():
    """dg.compile captures forward and backward of the fused layer (backward replayed on arrays)."""
    dg.manual_seed(0)
    lstm = dg.nn.GRU(3, 4, bidirectional=True)
    x = dg.randn(5, 2, 3)

    def step(x):
        out, h = lstm(x)
        loss = (out ** 2).sum() + h.sum()
        loss.backward()
        return loss

    compiled = dg.compile(step)
    results = []
    for fn in (step, compiled, compiled):
        lstm.zero_grad()
        loss = fn(x)
        results.append((loss.item(), lstm.weight_hh_l0_reverse.grad.numpy().copy()))
    for loss, grad in results[1:]:
        np.testing.assert_allclose(loss, results[0][0], rtol=1e-6)
        np.testing.assert_allclose(grad, results[0][1], rtol=1e-5, atol=1e-6)


def test_fused_layer_retain_graph_and_inplace_checks():
    lstm = dg.nn.LSTM(3, 4)
    x = dg.randn(5, 2, 3, requires_grad=True)
    y = lstm(x)[0].sum()
    y.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1, rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*lstm_layer"):
        y.backward()
    y = lstm(x)[0].sum()
    with dg.no_grad():
        lstm.weight_hh_l0.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*lstm_layer"):
        y.backward()
