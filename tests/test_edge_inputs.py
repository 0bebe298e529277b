"""Edge inputs against PyTorch 2.13 CPU (issue 10, item 8): empty batches in recurrent and
normalisation layers, and clear messages for wrong arguments."""

import numpy as np
import pytest
import torch

import dyngraph as dg

# ---------------------------------------------------------------------------
# 0-size batches
# ---------------------------------------------------------------------------

_RNNS = {
    "LSTM": dict(num_layers=2, bidirectional=True, proj_size=2),
    "GRU": dict(num_layers=2),
    "RNN": dict(nonlinearity="relu"),
}


@pytest.mark.parametrize("kind", sorted(_RNNS))
@pytest.mark.parametrize("batch_first", [False, True])
def test_recurrent_layers_accept_an_empty_batch(kind, batch_first):
    shapes = {}
    for lib in (dg, torch):
        m = getattr(lib.nn, kind)(3, 4, batch_first=batch_first, **_RNNS[kind])
        x = lib.randn(*((0, 5, 3) if batch_first else (5, 0, 3)), requires_grad=True)
        out, h = m(x)
        hs = h if isinstance(h, tuple) else (h,)
        (out.sum() + sum(t.sum() for t in hs)).backward()
        grads = [p.grad for p in m.parameters()]
        assert all(g is not None and not np.any(g.numpy()) for g in grads)
        shapes[lib.__name__] = (tuple(out.shape), [tuple(t.shape) for t in hs], tuple(x.grad.shape))
    assert shapes["dyngraph"] == shapes["torch"]


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_recurrent_cells_accept_an_empty_batch(kind):
    out = getattr(dg.nn, kind)(3, 4)(dg.randn(0, 3))
    ref = getattr(torch.nn, kind)(3, 4)(torch.randn(0, 3))
    first = (lambda r: r[0]) if kind == "LSTMCell" else (lambda r: r)
    assert tuple(first(out).shape) == tuple(first(ref).shape) == (0, 4)


def test_recurrent_layer_empty_sequence_message():
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0 in RNN"):
        dg.nn.LSTM(3, 4)(dg.randn(0, 2, 3))


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 4), (2, 3, 0)])
def test_batchnorm_training_on_an_empty_batch(shape, momentum):
    """An empty result, running statistics untouched, num_batches_tracked counted: PyTorch's."""
    res = {}
    for lib in (dg, torch):
        m = (lib.nn.BatchNorm1d(3, momentum=momentum))
        with lib.no_grad():
            m.running_mean.fill_(5.0)
            m.running_var.fill_(2.0)
        x = lib.randn(*shape, requires_grad=True)
        y = m(x)
        y.sum().backward()
        res[lib.__name__] = (tuple(y.shape), m.running_mean.tolist(), m.running_var.tolist(),
                             int(m.num_batches_tracked), m.weight.grad.tolist(), m.bias.grad.tolist(),
                             tuple(x.grad.shape))
    assert res["dyngraph"] == res["torch"]


def test_batchnorm_single_value_per_channel_still_raises():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        dg.nn.BatchNorm1d(3)(dg.randn(1, 3))


def test_groupnorm_on_an_empty_batch():
    assert tuple(dg.nn.GroupNorm(1, 3)(dg.randn(0, 3, 5)).shape) == (0, 3, 5)
    x = np.random.default_rng(0).standard_normal((2, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(dg.nn.GroupNorm(3, 6)(dg.tensor(x)).detach().numpy(),
                               torch.nn.GroupNorm(3, 6)(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([1.0]) + "a",
    lambda L: "a" + L.tensor([1.0]),
    lambda L: L.tensor([1.0]) * None,
    lambda L: L.tensor([1.0]) - object(),
    lambda L: L.tensor([1.0]) / "x",
])
def test_unsupported_operands_give_pythons_message(fn):
    msgs = []
    for lib in (dg, torch):
        with pytest.raises(TypeError) as info:
            fn(lib)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("call", [
    lambda L: L.nn.Linear(3, 4)([1.0, 2.0, 3.0]),
    lambda L: L.nn.functional.linear([1.0, 2.0, 3.0], L.randn(4, 3)),
])
def test_linear_on_a_list_names_the_argument(call):
    with pytest.raises(TypeError) as ref:
        call(torch)
    with pytest.raises(TypeError) as got:
        call(dg)
    assert str(ref.value) in str(got.value)


@pytest.mark.parametrize("dim", ["a", 1.5])
def test_reduction_dim_of_the_wrong_type(dim):
    for name in ("sum", "mean", "amax"):
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'dim' must be an int or a tuple of ints"):
            getattr(dg.tensor([1.0, 2.0]), name)(dim=dim)


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_size=0), "kernel_size must be positive"),
    (dict(kernel_size=(3, 0)), "kernel_size must be positive"),
    (dict(kernel_size=3, stride=0), "stride must be positive"),
    (dict(kernel_size=3, dilation=0), "dilation must be positive"),
    (dict(kernel_size=3, padding=-1), "padding must be non-negative"),
])
def test_conv_constructor_checks(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dg.nn.Conv2d(3, 4, **kwargs)


def test_conv_functional_zero_kernel_message():
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        dg.nn.functional.conv2d(dg.randn(1, 3, 5, 5), dg.randn(4, 3, 0, 0))


@pytest.mark.parametrize("make,match", [
    (lambda: dg.nn.Linear(-3, 4), "Linear: in_features must be a non-negative int, got -3"),
    (lambda: dg.nn.Linear(3, -4), "Linear: out_features must be a non-negative int, got -4"),
    (lambda: dg.nn.Linear(3.5, 4), "Linear: in_features must be a non-negative int, got 3.5"),
    (lambda: dg.nn.Conv2d(-1, 4, 3), "Conv2d: in_channels must be a non-negative int, got -1"),
    (lambda: dg.nn.LSTM(-1, 4), "LSTM: input_size must be a positive int, got -1"),
])
def test_layer_size_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("make", [lambda: dg.nn.BatchNorm1d(-2), lambda: dg.nn.Embedding(-1, 3)])
def test_negative_parameter_sizes_say_so(make):
    with pytest.raises(RuntimeError, match="Trying to create tensor with negative dimension"):
        make()


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[[1, 2]], [[3]]], [[1, 2], [3, 4, 5]]])
def test_ragged_nested_lists_give_pytorchs_message(data):
    with pytest.raises(ValueError) as ref:
        torch.tensor(data)
    with pytest.raises(ValueError) as got:
        dg.tensor(data)
    assert str(got.value) == str(ref.value)
