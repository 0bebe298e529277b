"""What ``dg.autobatch.cell`` returns: with the C module, a ``dyngraph._autobatch.Cell``
that records a cached template's call without a Python frame and hands every other call
to the Python wrapper; without it, the Python wrapper.  Either way it behaves as the
function it wraps: attributes, binding as a method, keyword arguments, copies, no leak,
values and gradients (float64, against eager, 1e-12), and use_native(False) switching it
to the Python reference.
"""

from __future__ import annotations

import copy
import gc
import pickle
import weakref

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autobatch import cells as C
from dyngraph.autobatch import interpreter as I

TOL = {"rtol": 1e-12, "atol": 1e-12}


class Net(dg.nn.Module):
    def __init__(self):
        super().__init__()
        dg.manual_seed(1)
        self.lin = dg.nn.Linear(4, 4).double()
        self.step = dg.autobatch.cell(self._step)

    def _step(self, h, x, scale=1.0):
        """One step."""
        return dg.tanh(self.lin(h) + x) * scale

    @dg.autobatch.cell
    def method_step(self, h, x):
        return dg.sigmoid(self.lin(h) * x)


def _xs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [dg.tensor(rng.standard_normal((1, 4)), requires_grad=True) for _ in range(n)]


def _run(net, fn, xs, auto, **kw):
    net.zero_grad()
    for x in xs:
        x.grad = None

    def go():
        ins = [x * 1.0 for x in xs]      # pending under autobatch (a leaf would be a parameter)
        h = ins[0]
        outs = []
        for x in ins[1:]:
            h = fn(h, x, **kw)
            outs.append((h * h).sum())
        loss = dg.stack(outs).sum()
        loss.backward()
        return loss.item()

    if auto:
        with dg.autobatch():
            v = go()
    else:
        v = go()
    return v, [x.grad.numpy().copy() for x in xs], net.lin.weight.grad.numpy().copy()


def _check(a, b):
    assert abs(a[0] - b[0]) < 1e-12 * max(1.0, abs(b[0]))
    for x, y in zip(a[1], b[1], strict=True):
        np.testing.assert_allclose(x, y, **TOL)
    np.testing.assert_allclose(a[2], b[2], **TOL)


def test_type_and_attributes():
    net = Net()
    f = net.step
    if I._NATIVE is not None:
        assert type(f) is I._NATIVE.Cell
    assert f.__name__ == "_step" and f.__doc__ == "One step."
    assert f.__wrapped__ == net._step and isinstance(f.__autobatch_cell__, dict)
    assert "_step" in repr(f) or "step" in repr(f)
    assert copy.copy(f) is f and copy.deepcopy(f) is f
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        pickle.dumps(f)


@pytest.mark.parametrize("native", [True, False])
def test_values_and_gradients_equal_eager(native):
    if native and I._NATIVE is None:
        pytest.skip("dyngraph._autobatch not built")
    was = I.use_native(native)
    try:
        net = Net()
        xs = _xs(9)
        _check(_run(net, net.step, xs, True), _run(net, net._step, xs, False))
        # keyword arguments take the Python wrapper (and run inline: not traced with kwargs)
        _check(_run(net, net.step, xs, True, scale=0.5), _run(net, net._step, xs, False, scale=0.5))
        # a cell in the class body binds like a function
        assert net.method_step.__self__ is net
        _check(_run(net, net.method_step, xs, True),
               _run(net, Net.method_step.__wrapped__.__get__(net), xs, False))
    finally:
        I.use_native(was)


def test_calls_are_recorded_in_c_and_python_when_switched():
    if I._NATIVE is None:
        pytest.skip("dyngraph._autobatch not built")
    net = Net()
    xs = _xs(6)
    calls = []
    orig = I.Autobatcher.call_cell

    def counting(self, *a):
        calls.append(1)
        return orig(self, *a)

    I.Autobatcher.call_cell = counting
    try:
        for native, want in ((True, 1), (False, 5)):
            calls.clear()
            was = I.use_native(native)
            try:
                n2 = Net()
                _run(n2, n2.step, xs, True)     # a fresh cell: one trace, then 4 calls
            finally:
                I.use_native(was)
            assert len(calls) == want
    finally:
        I.Autobatcher.call_cell = orig
    # outside dg.autobatch it is a plain call
    out = net.step(xs[0], xs[1])
    assert not I.is_pending(out)
    np.testing.assert_allclose(out.numpy(force=True), net._step(xs[0], xs[1]).numpy(force=True), **TOL)


def test_no_leak():
    net = Net()
    _run(net, net.step, _xs(5), True)
    r = weakref.ref(net)
    s = weakref.ref(net.step)
    del net
    gc.collect()
    assert r() is None and s() is None


def test_python_wrapper_without_c(monkeypatch):
    monkeypatch.setattr(C, "_CELL_TYPE", None)
    net = Net()
    assert type(net.step).__name__ == "function"
    xs = _xs(5)
    _check(_run(net, net.step, xs, True), _run(net, net._step, xs, False))
