"""Autograd over the batched graph: grad, retain_graph, hooks, no_grad, create_graph,
in-place writes, optimizer steps and dropout inside ``dg.autobatch``."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import nn
from dyngraph.autobatch import is_pending

TOL = {"rtol": 1e-12, "atol": 1e-12}


def _setup(n=4):
    rng = np.random.default_rng(0)
    W = nn.Parameter(dg.tensor(rng.standard_normal((3, 3))))
    xs = [dg.tensor(rng.standard_normal((1, 3))) for _ in range(n)]
    return W, xs


def test_autograd_grad_wrt_parameter_and_pending_intermediates():
    W, xs = _setup()
    hs_e = [dg.tanh(x @ W) for x in xs]
    out_e = dg.stack([(h * h).sum() for h in hs_e]).sum()
    ge = dg.autograd.grad(out_e, [W, hs_e[1], hs_e[2]])
    with dg.autobatch():
        hs = [dg.tanh(x @ W) for x in xs]
        out = dg.stack([(h * h).sum() for h in hs]).sum()
        gb = dg.autograd.grad(out, [W, hs[1], hs[2]])
    for a, b in zip(gb, ge, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


def test_retain_graph_and_second_backward():
    W, xs = _setup()
    with dg.autobatch():
        out = dg.stack([dg.tanh(x @ W).sum() for x in xs]).sum()
        out.backward(retain_graph=True)
        g1 = W.grad.numpy().copy()
        out.backward()
    np.testing.assert_allclose(W.grad.numpy(), 2 * g1, **TOL)
    with pytest.raises(RuntimeError):
        out.backward()   # the batched graph was freed, as in eager


def test_hooks_and_retain_grad_on_pending_members():
    W, xs = _setup()
    seen_e, seen_b = [], []

    def run(seen):
        W.grad = None
        hs = [dg.tanh(x @ W) for x in xs]
        hs[1].register_hook(lambda g: seen.append(g.numpy().copy()))
        hs[2].register_hook(lambda g: g * 3.0)       # changes the gradient flowing on
        hs[3].retain_grad()
        out = dg.stack([(h * h).sum() for h in hs]).sum()
        out.backward()
        return W.grad.numpy().copy(), hs[3].grad.numpy().copy()

    ge, re = run(seen_e)
    with dg.autobatch():
        gb, rb = run(seen_b)
    np.testing.assert_allclose(gb, ge, **TOL)
    np.testing.assert_allclose(rb, re, **TOL)
    np.testing.assert_allclose(seen_b[0], seen_e[0], **TOL)


def test_no_grad_inside_the_context():
    W, xs = _setup()
    with dg.autobatch():
        with dg.no_grad():
            ys = [dg.tanh(x @ W) for x in xs]
        zs = [dg.tanh(x @ W) for x in xs]
        assert not ys[0].requires_grad and zs[0].requires_grad
        out = dg.stack([(y * z).sum() for y, z in zip(ys, zs, strict=True)]).sum()
        out.backward()
    W.grad, g = None, W.grad.numpy().copy()
    with dg.no_grad():
        ys = [dg.tanh(x @ W) for x in xs]
    out = dg.stack([(y * dg.tanh(x @ W)).sum() for y, x in zip(ys, xs, strict=True)]).sum()
    out.backward()
    np.testing.assert_allclose(g, W.grad.numpy(), **TOL)


def test_create_graph_second_order():
    W, xs = _setup()

    def run():
        out = dg.stack([dg.tanh(x @ W).pow(2).sum() for x in xs]).sum()
        (g,) = dg.autograd.grad(out, W, create_graph=True)
        (gg,) = dg.autograd.grad(g.sum(), W)
        return g.detach().numpy().copy(), gg.numpy().copy()

    ge, gge = run()
    with dg.autobatch():
        gb, ggb = run()
    np.testing.assert_allclose(gb, ge, **TOL)
    np.testing.assert_allclose(ggb, gge, **TOL)


def test_inplace_writes_force_and_keep_eager_semantics():
    W, xs = _setup()

    def run():
        W.grad = None
        outs = []
        for x in xs:
            h = dg.tanh(x @ W)
            h2 = h.clone()
            h2[0, 1] = 0.0              # in-place write into a pending tensor
            h2.mul_(2.0)
            outs.append((h2 * h).sum())
        out = dg.stack(outs).sum()
        out.backward()
        return float(out), W.grad.numpy().copy()

    ve, ge = run()
    with dg.autobatch():
        vb, gb = run()
    assert abs(vb - ve) < 1e-12
    np.testing.assert_allclose(gb, ge, **TOL)


def test_inplace_write_into_a_pending_view_is_refused():
    x = dg.randn(2, 3)
    with dg.autobatch():
        v = (x * 1.0)[0]
        with pytest.raises(NotImplementedError, match="view"):
            v.zero_()


def test_inplace_write_after_recording_a_reader_is_caught():
    acc = dg.zeros(3)
    with pytest.raises(RuntimeError, match="modified in place"), dg.autobatch():
        y = acc * dg.ones(3)            # pending, reads acc
        acc += 1.0                      # acc is not pending: written now
        y.sum().item()


def test_optimizer_step_runs_pending_work_first():
    W, xs = _setup()
    opt = dg.optim.SGD([W], lr=0.5)
    with dg.autobatch():
        loss = dg.stack([dg.tanh(x @ W).sum() for x in xs]).sum()
        side = dg.tanh(xs[0] @ W)       # pending, not needed by loss
        loss.backward()
        assert is_pending(side)
        opt.step()                      # evaluates ``side`` with the old W first
        assert not is_pending(side)
    W_old = W.detach() + 0.5 * W.grad
    np.testing.assert_allclose(side.numpy(force=True), dg.tanh(xs[0] @ W_old).numpy(force=True), **TOL)


def test_dropout_draws_independent_masks_per_member():
    x = dg.ones(1, 200, dtype=dg.float64)
    drop = nn.Dropout(0.5)
    with dg.autobatch(stats=True) as ab:
        ys = [drop(x * 1.0) for _ in range(4)]
        masks = [y.numpy() != 0 for y in ys]
    assert all((m != masks[0]).any() for m in masks[1:])
    assert ab.stats.per_primitive["mul"][1] >= 4


def test_module_hooks_fire_per_call():
    lin = nn.Linear(3, 3).double()
    calls = []
    lin.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    with dg.autobatch():
        ys = [lin(dg.randn(1, 3, dtype=dg.float64)) for _ in range(5)]
        dg.stack(ys).sum().backward()
    assert calls == [(1, 3)] * 5


def test_anomaly_mode_names_the_members_line():
    good = dg.tensor([1.0, 4.0], requires_grad=True)
    bad = dg.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError) as err, dg.autograd.detect_anomaly(), dg.autobatch():
        ys = [dg.sqrt(good * 1.0), dg.sqrt(good * 2.0)]
        ys.append(dg.sqrt(bad * 1.0))    # the member that makes NaN: this line is named
        dg.stack(ys).sum().backward()
    msg = str(err.value)
    assert "sqrt" in msg.lower()
    assert "ys.append(dg.sqrt(bad * 1.0))" in msg


def test_profiler_shows_groups_and_viz_draws_the_batched_graph():
    W, xs = _setup(6)
    with dg.profiler.profile(record_shapes=True) as prof, dg.autobatch():
        loss = dg.stack([dg.tanh(x @ W).sum() for x in xs]).sum()
        loss.backward()
    rows = [e for e in prof.key_averages(group_by_input_shape=True) if "tanh" in str(e.key)]
    assert len(rows) == 1 and rows[0].count == 1          # one call for the six members
    assert tuple(rows[0].input_shapes[0]) == (6, 1, 3)
    src = dg.viz.draw(loss).source                          # the batched graph: a few nodes
    assert 0 < src.count("->") < 12
