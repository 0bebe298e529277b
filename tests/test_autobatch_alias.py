"""Tensors made from a pending tensor under ``dg.autobatch`` without a primitive call.

``detach()``, ``.data``, ``Parameter(t)``, ``Tensor(t)`` and the ``.data`` setter share
``t``'s array eagerly; under autobatch they share its pending ``Lazy``.  They must end
up holding the computed value, exactly as ``t`` does: when they are read inside the
block, and after it (where nothing can force them any more).  The others
(``as_tensor(t)``, ``requires_grad_()``) return ``t`` itself; ``clone``/``view_as`` are
primitive calls.  Values are compared with eager in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.ops.rnn import rnn_layer

# the alias makers tell the interpreter through dyngraph._core.state.alias(src, t); without
# it a tensor aliased inside the block and first read after it stayed pending


def _set_data(y):
    q = dg.zeros(1, dtype=dg.float64)
    q.data = y
    return q


MAKERS = {
    "detach": lambda y: y.detach(),
    "data": lambda y: y.data,
    "Parameter": lambda y: dg.nn.Parameter(y),
    "Tensor": lambda y: dg.Tensor(y),
    "data_setter": _set_data,
}


def _inputs():
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    h = dg.zeros(1, 4, dtype=dg.float64)
    w = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    return x, h, w


def _rnn(x, h, w):
    return rnn_layer(x, h, w, (1, 1, 1))[1]      # the second output of a multi-output node


def _tanh(x, h, w):
    return dg.tanh(x @ w)


FNS = {"rnn_layer": _rnn, "tanh": _tanh}


def _eager(fn, maker):
    x, h, w = _inputs()
    y = fn(x, h, w)
    y.sum().backward()
    z = MAKERS[maker](y)
    return z, w.grad.numpy().copy()


def _value(t):
    d = t._data
    assert type(d) is np.ndarray, type(d)
    return d


@pytest.mark.parametrize("fn", FNS)
@pytest.mark.parametrize("maker", MAKERS)
def test_alias_made_after_backward_is_computed_after_the_block(fn, maker):
    ze, ge = _eager(FNS[fn], maker)
    x, h, w = _inputs()
    with dg.autobatch():
        y = FNS[fn](x, h, w)
        y.sum().backward()
        z = MAKERS[maker](y)
    np.testing.assert_allclose(_value(z), _value(ze), rtol=1e-12, atol=1e-12)
    assert z.requires_grad == ze.requires_grad and z.grad_fn is None
    assert np.shares_memory(z._data, y._data)    # an alias, as eagerly
    np.testing.assert_allclose(w.grad.numpy(), ge, rtol=1e-12)


@pytest.mark.parametrize("maker", MAKERS)
def test_alias_outliving_its_output(maker):
    ze, _ = _eager(_rnn, maker)
    x, h, w = _inputs()
    with dg.autobatch():
        y = _rnn(x, h, w)
        z = MAKERS[maker](y)
        del y                                    # only the alias holds the pending value
    np.testing.assert_allclose(_value(z), _value(ze), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fn", FNS)
@pytest.mark.parametrize("maker", MAKERS)
def test_alias_read_inside_the_block(fn, maker):
    ze, ge = _eager(FNS[fn], maker)
    x, h, w = _inputs()
    with dg.autobatch():
        y = FNS[fn](x, h, w)
        z = MAKERS[maker](y)
        got = np.array(z.numpy(force=True))      # forces z itself, not y
        # z keeps its own autograd state: y's graph is not grafted onto it
        assert z.requires_grad == ze.requires_grad and z.grad_fn is None
        y.sum().backward()
    np.testing.assert_allclose(got, _value(ze), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_value(y), _value(ze), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), ge, rtol=1e-12)


def test_output_read_after_its_alias_inside_the_block():
    ze, ge = _eager(_rnn, "detach")
    x, h, w = _inputs()
    with dg.autobatch():
        y = _rnn(x, h, w)
        z = y.detach()
        z.numpy()
        assert y.grad_fn is not None
        y.sum().backward()
    np.testing.assert_allclose(_value(y), _value(ze), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), ge, rtol=1e-12)


def test_makers_that_return_the_tensor_or_record_a_call():
    x, h, w = _inputs()
    ye = _rnn(x, h, w)
    with dg.autobatch():
        y = _rnn(x, h, w)
        assert dg.as_tensor(y) is y
        y2 = dg.tanh(x)
        assert y2.detach().requires_grad_() is not y2
        c = y.clone()
        v = y.view_as(y)
        r = y.reshape(4)
    for t in (y, c, v):
        np.testing.assert_allclose(_value(t), ye.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_value(r), ye.detach().numpy().reshape(4), rtol=1e-12)
