"""dg.compile / dg.jit.trace: capture, guards, recapture, fallbacks, dynamic shapes, training steps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn as nn
import dyngraph.nn.functional as F


def _np(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(_np(a) if isinstance(a, dg.Tensor) else a,
                               _np(b) if isinstance(b, dg.Tensor) else b, rtol=tol, atol=tol)


def _grads(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


def _check_model(model, make_input, n_calls=3, tol=1e-12):
    """Compiled forward and backward equal eager, over several calls (replays)."""
    cm = dg.compile(model)
    for i in range(n_calls):
        x = make_input(i)
        model.zero_grad()
        ye = model(x)
        ye.sum().backward()
        ge = _grads(model)
        model.zero_grad()
        yc = cm(x)
        yc.sum().backward()
        gc = _grads(model)
        _close(yc, ye, tol)
        for a, b in zip(gc, ge, strict=True):
            _close(a, b, tol)
    return cm


def test_mlp_values_and_grads_equal_eager():
    dg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).double()
    rng = np.random.default_rng(0)
    cm = _check_model(model, lambda i: dg.tensor(rng.standard_normal((4, 6))))
    assert cm.captures == 1
    v = next(iter(cm.variants.values()))
    assert v.calls == 2 and v.program.bwd is not None


def test_float32_mlp_matches_eager():
    dg.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    rng = np.random.default_rng(1)
    _check_model(model, lambda i: dg.tensor(rng.standard_normal((3, 5)).astype(np.float32)), tol=1e-6)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        h = self.pool(F.relu(self.conv(x)))
        return self.fc(h.reshape(x.shape[0], -1))


def test_small_cnn_equals_eager():
    dg.manual_seed(2)
    model = SmallCNN().double()
    rng = np.random.default_rng(2)
    _check_model(model, lambda i: dg.tensor(rng.standard_normal((2, 1, 8, 8))))


class PrimLSTMCell(nn.Module):
    """An LSTM cell written with primitives (nn.LSTMCell uses a fused primitive)."""

    def __init__(self, n_in, n_hidden):
        super().__init__()
        self.ih = nn.Linear(n_in, 4 * n_hidden)
        self.hh = nn.Linear(n_hidden, 4 * n_hidden)

    def forward(self, x, state):
        h, c = state
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, 1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c


def test_lstm_cell_loop_equals_eager():
    dg.manual_seed(3)
    cell = PrimLSTMCell(4, 6).double()

    def run(xs):
        h = dg.zeros(2, 6, dtype=dg.float64)
        c = dg.zeros(2, 6, dtype=dg.float64)
        for t in range(xs.shape[0]):
            h, c = cell(xs[t], (h, c))
        return (h * h).sum()

    crun = dg.compile(run)
    rng = np.random.default_rng(3)
    for _ in range(2):
        xs = dg.tensor(rng.standard_normal((5, 2, 4)), requires_grad=True)
        cell.zero_grad()
        le = run(xs)
        le.backward()
        ge, gx = _grads(cell), xs.grad.numpy().copy()
        cell.zero_grad()
        xs.grad = None
        lc = crun(xs)
        lc.backward()
        _close(lc, le)
        _close(xs.grad, gx)
        for a, b in zip(_grads(cell), ge, strict=True):
            _close(a, b)
    assert crun.captures == 1 and crun.fallbacks == 0


def test_fused_lstm_cell_captured_with_gradients():
    dg.manual_seed(6)
    cell = nn.LSTMCell(3, 4).double()
    cf = dg.compile(lambda x, h, c: cell(x, (h, c))[0].pow(2).sum())
    x, h, c = (dg.randn(2, n, dtype=dg.float64) for n in (3, 4, 4))
    for _ in range(2):
        cell.zero_grad()
        cf(x, h, c).backward()
        gc = _grads(cell)
        cell.zero_grad()
        cell(x, (h, c))[0].pow(2).sum().backward()
        for a, b in zip(gc, _grads(cell), strict=True):
            _close(a, b)
    assert cf.fallbacks == 0


def test_data_dependent_branch_guard_and_explain():
    calls = []

    def f(x):
        calls.append(1)
        if x.sum() > 0:
            return x * 2
        return x - 1

    cf = dg.compile(f)
    pos, neg = dg.ones(3), -dg.ones(3)
    assert _np(cf(pos)).tolist() == [2, 2, 2]
    assert _np(cf(neg)).tolist() == [-2, -2, -2]     # guard failed -> recaptured
    n = len(calls)
    assert _np(cf(pos)).tolist() == [2, 2, 2]        # both variants cached: no Python
    assert _np(cf(neg)).tolist() == [-2, -2, -2]
    assert len(calls) == n
    text = cf.explain()
    assert "bool(" in text and "== True" in text and "== False" in text
    assert "failed" in text          # why the recapture happened


def test_item_guard_recaptures_on_new_value():
    def f(x):
        k = int(x.max().item())
        return x * k

    cf = dg.compile(f)
    a = dg.tensor([1.0, 2.0])
    b = dg.tensor([1.0, 3.0])
    _close(cf(a), a * 2)
    _close(cf(b), b * 3)
    _close(cf(a), a * 2)
    assert "item(" in cf.explain()


def test_numpy_use_falls_back_to_eager_with_warning():
    def f(x):
        return dg.tensor(np.sin(x.numpy())) + x

    cf = dg.compile(f)
    x = dg.tensor([0.5, 1.0])
    with pytest.warns(UserWarning, match="runs eagerly"):
        y = cf(x)
    _close(y, f(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(cf(x), f(x))      # the fallback variant is cached: no second warning
    assert "EAGER" in cf.explain()


def test_printing_values_falls_back(capsys):
    def f(x):
        print(x)
        return x + 1

    cf = dg.compile(f)
    with pytest.warns(UserWarning, match="printed"):
        cf(dg.ones(2))
    assert "tensor" in capsys.readouterr().out


def test_shape_change_recaptures_and_cache_is_bounded():
    cf = dg.compile(lambda x: x.sum(1), dynamic=False, cache_size=2)
    for n in (2, 3, 4, 5):
        _close(cf(dg.ones(n, 2)), dg.ones(n) * 2)
    assert len(cf.variants) == 2
    assert "evicted" in cf.explain()


def test_dynamic_batch_rederives_reshape_params():
    dg.manual_seed(4)
    model = SmallCNN().double()
    cm = dg.compile(model, dynamic=["batch"])
    rng = np.random.default_rng(4)
    for b in (3, 5, 7):
        x = dg.tensor(rng.standard_normal((b, 1, 8, 8)))
        _close(cm(x), model(x))
    assert cm.captures == 1
    assert "[s, 1, 8, 8]" in cm.explain()


def test_dimension_becomes_dynamic_after_one_change():
    w = dg.randn(4, 3, dtype=dg.float64, requires_grad=True)

    def f(x):
        return (x @ w).reshape(x.shape[0] * 3).tanh()

    cf = dg.compile(f)
    for b in (2, 3, 6, 9):
        x = dg.randn(b, 4, dtype=dg.float64)
        w.grad = None
        cf(x).pow(2).sum().backward()
        gc = w.grad.numpy().copy()
        w.grad = None
        ye = f(x)
        ye.pow(2).sum().backward()
        _close(cf(x), ye)
        _close(gc, w.grad)
    assert cf.captures == 2          # first call + the change; then symbolic


def test_training_step_with_optimizer_is_replayed_exactly():
    def run(compiled, opt_cls, **kw):
        dg.manual_seed(5)
        m = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = opt_cls(m.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        rng = np.random.default_rng(5)
        losses = []
        for _ in range(5):
            x = dg.tensor(rng.standard_normal((8, 10)).astype(np.float32))
            y = dg.tensor(rng.integers(0, 4, 8))
            losses.append(f(x, y).item())
        return losses, [_np(p).copy() for p in m.parameters()], f

    for opt_cls, kw in ((dg.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (dg.optim.Adam, {"lr": 1e-2})):
        le, pe, _ = run(False, opt_cls, **kw)
        lc, pc, f = run(True, opt_cls, **kw)
        assert le == lc
        for a, b in zip(pc, pe, strict=True):
            np.testing.assert_array_equal(a, b)
        assert sum(v.calls for v in f.variants.values()) >= 3


def test_manual_update_and_grad_writes_are_side_effects():
    w = dg.randn(3, 2, dtype=dg.float64, requires_grad=True)
    w0 = w.detach().clone()

    def step(x):
        loss = (x @ w).pow(2).mean()
        loss.backward()
        with dg.no_grad():
            w.sub_(0.1 * w.grad)
        w.grad = None
        return loss

    x = dg.randn(4, 3, dtype=dg.float64)
    cs = dg.compile(step)
    lc = [cs(x).item() for _ in range(4)]
    wc = _np(w).copy()
    w.data = w0.clone()
    le = [step(x).item() for _ in range(4)]
    assert lc == le
    np.testing.assert_array_equal(wc, _np(w))
    assert w.grad is None


def test_no_grad_mode_is_a_separate_variant():
    lin = nn.Linear(3, 2).double()
    cf = dg.compile(lin)
    x = dg.randn(2, 3, dtype=dg.float64)
    with dg.no_grad():
        y = cf(x)
    assert not y.requires_grad
    y2 = cf(x)
    assert y2.requires_grad
    assert "grad mode off" in cf.explain()


def test_compiled_backward_rejects_create_graph():
    w = dg.randn(3, dtype=dg.float64, requires_grad=True)
    cf = dg.compile(lambda x: (x * w).sum())
    cf(dg.ones(3, dtype=dg.float64))
    out = cf(dg.ones(3, dtype=dg.float64))
    with pytest.raises(RuntimeError, match="create_graph"):
        dg.autograd.grad(out, w, create_graph=True)


def test_grad_inside_function_returns_gradients():
    def f(x):
        y = (x ** 3).sum()
        (g,) = dg.autograd.grad(y, x)
        return g

    cf = dg.compile(f)
    for v in ([1.0, 2.0], [3.0, -1.0]):
        x = dg.tensor(v, dtype=dg.float64, requires_grad=True)
        _close(cf(x), 3 * x.detach() ** 2)


def test_no_grad_and_detach_stop_gradients_like_eager():
    w = dg.randn(3, dtype=dg.float64, requires_grad=True)

    def f(x):
        with dg.no_grad():
            s = x * w
        return (s * w + (x * w).detach() * w).sum()

    cf = dg.compile(f)
    x = dg.randn(3, dtype=dg.float64)
    cf(x)
    w.grad = None
    cf(x).backward()
    gc = w.grad.numpy().copy()
    w.grad = None
    f(x).backward()
    _close(gc, w.grad)


def test_trace_api_graph_code_and_mismatch_error():
    lin = nn.Linear(3, 2).double()
    g = dg.jit.trace(lin, (dg.randn(4, 3, dtype=dg.float64),))
    assert "linear" in str(g.graph)
    assert "def forward" in g.code
    x = dg.randn(4, 3, dtype=dg.float64)
    _close(g(x), lin(x))
    with pytest.raises(RuntimeError, match="does not match the trace"):
        g(dg.randn(5, 3, dtype=dg.float64))


def test_passes_cse_fold_dce():
    c = dg.tensor([1.0, 2.0], dtype=dg.float64)

    def f(x):
        a = x.exp() + x.exp()          # CSE
        k = (c * 2).sum()              # constant folding (c is a temporary? no: global)
        _ = x.sin()                    # dead
        return a * k

    g = dg.jit.trace(f, (dg.ones(2, dtype=dg.float64),))
    ops = [n.op for n in g.graph.nodes]
    assert ops.count("exp") == 1 and "sin" not in ops
    x = dg.randn(2, dtype=dg.float64)
    _close(g(x), f(x))


def test_compiled_module_behaves_like_module():
    lin = nn.Linear(3, 2)
    cm = dg.compile(lin)
    x = dg.randn(2, 3)
    assert cm(x).shape == lin(x).shape
    # a replaced parameter is seen (guard on the module's parameters)
    lin.weight = nn.Parameter(dg.zeros(2, 3))
    _close(cm(x), lin(x), 1e-6)


def test_nested_compiled_function_is_inlined():
    w = dg.randn(3, dtype=dg.float64, requires_grad=True)
    inner = dg.compile(lambda x: x * w)
    inner(dg.ones(3, dtype=dg.float64))
    outer = dg.compile(lambda x: inner(x).sum())
    for v in (1.0, 2.0, 3.0):
        x = dg.full((3,), v, dtype=dg.float64)
        _close(outer(x), (x * w).sum())
    w.grad = None
    outer(dg.ones(3, dtype=dg.float64)).backward()
    _close(w.grad, dg.ones(3, dtype=dg.float64))


def test_input_mutation_is_replayed():
    def f(x):
        x.add_(1)
        return x * 2

    cf = dg.compile(f)
    a, b = dg.ones(3), dg.ones(3)
    for _ in range(3):
        _close(cf(a), f(b), 1e-6)
    _close(a, b, 1e-6)


def test_dropout_in_training_falls_back_to_eager_never_repeats_masks():
    drop = nn.Dropout(0.5)
    cf = dg.compile(drop)
    x = dg.ones(200)
    with pytest.warns(UserWarning, match="random numbers"):
        a = cf(x)
    b = cf(x)
    assert not np.array_equal(_np(a), _np(b))      # fresh masks: never a replayed constant
    drop.eval()
    _close(cf(x), x)


def test_train_eval_mode_is_guarded():
    dg.manual_seed(7)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).double()
    cm = dg.compile(model)
    x = dg.randn(6, 4, dtype=dg.float64)
    model.eval()
    _close(cm(x), model(x))
    model.train()
    y = cm(x)
    model.train()
    _close(y, nn.functional.batch_norm(model[0](x), None, None, model[1].weight, model[1].bias,
                                       training=True))

    def step(x):
        return model(x).sum()

    cs = dg.compile(step)
    model.eval()
    _close(cs(x), step(x))
    model.train()
    _close(cs(x), step(x))          # eval-mode graph not replayed in train mode
    assert "train()/eval()" in cs.explain()


def test_untraceable_buffer_updates_fall_back_instead_of_being_lost():
    import copy

    dg.manual_seed(8)
    m1 = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).double()
    m2 = copy.deepcopy(m1)
    cm = dg.compile(m1)
    with pytest.warns(UserWarning, match="running statistics"):
        for _ in range(3):
            x = dg.randn(6, 4, dtype=dg.float64)
            _close(cm(x), m2(x))
    _close(m1[1].running_mean, m2[1].running_mean)
    _close(m1[1].running_var, m2[1].running_var)
    assert int(m1[1].num_batches_tracked) == int(m2[1].num_batches_tracked) == 3


def test_numpy_array_arguments_run_eagerly():
    cf = dg.compile(lambda a, x: x * dg.tensor(a))
    x = dg.ones(2)
    with pytest.warns(UserWarning, match="NumPy array"):
        _close(cf(np.array([1.0, 2.0], np.float32), x), dg.tensor([1.0, 2.0]), 1e-6)
    _close(cf(np.array([3.0, 4.0], np.float32), x), dg.tensor([3.0, 4.0]), 1e-6)


def test_modifying_a_saved_input_before_backward_raises():
    w = dg.randn(3, dtype=dg.float64, requires_grad=True)
    cf = dg.compile(lambda x: (x * w).sum())
    x = dg.randn(3, dtype=dg.float64)
    cf(x)
    out = cf(x)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_anomaly_mode_on_a_compiled_module_names_the_users_line():
    """Replays are one node for the whole graph; under anomaly mode compiled calls run eagerly."""
    import inspect

    class SqrtOfZero(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return (self.lin(x) * 0).sqrt().sum()   # the NaN gradient comes from this line

    line = inspect.getsourcelines(SqrtOfZero.forward)[1] + 1
    m = SqrtOfZero()
    cm = dg.compile(m, warn=False)
    x = dg.randn(4, 3)
    cm(x).backward()                      # captured (and replayed) outside anomaly mode
    cm(x).backward()
    for _ in range(2):
        with dg.autograd.detect_anomaly(), pytest.raises(RuntimeError) as ei:
            cm(x).backward()
        assert f"line {line}, in forward" in str(ei.value) and "op 'mul'" in str(ei.value)
    assert cm.anomaly_calls == 2 and "anomaly mode" in cm.explain()


def test_replayed_programs_are_silent_on_fp_exceptions():
    """Like eager (and PyTorch): log(0) in a replay gives -inf without a NumPy RuntimeWarning."""
    f = dg.compile(lambda x: (x.log() * 2).sum(), warn=False)
    x = dg.tensor([0.0, 1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            y = f(x)
            y.backward()
    assert y.item() == float("-inf") and x.grad.tolist() == [float("inf"), 6.0, 3.0]
