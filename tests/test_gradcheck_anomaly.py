"""gradcheck / gradgradcheck, anomaly mode and ``autograd.graph.walk``."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import torch

import dyngraph as dg

RNG = np.random.default_rng(5)

# NaN/Inf are the point of the anomaly tests: NumPy's warnings about them are expected.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def leaf(lib, a):
    return (dg.tensor(a.copy(), requires_grad=True) if lib is dg
            else torch.tensor(a.copy(), requires_grad=True))


def make_square(lib, detach_in_backward=False, wrong=False):
    """x**2 as a custom Function; optionally with a wrong first or second derivative."""

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            if detach_in_backward:
                x = x.detach()          # first order right, second order lost
            return g * (3.0 if wrong else 2.0) * x

    return Square


# -- gradcheck -----------------------------------------------------------------------

@pytest.mark.parametrize("case", ["unary", "binary_bcast", "two_outputs", "matmul"])
def test_gradcheck_passes_on_correct_functions_like_torch(case):
    a, b = RNG.uniform(0.5, 1.5, (2, 3)), RNG.uniform(0.5, 1.5, (3,))
    w = RNG.uniform(-1, 1, (3, 2))
    fns = {
        "unary": (lambda lib, x, y: (x.sin() * x.exp()).tanh(), (a, b)),
        "binary_bcast": (lambda lib, x, y: x / y + x * y, (a, b)),
        "two_outputs": (lambda lib, x, y: (x.sqrt(), (x * y).sum()), (a, b)),
        "matmul": (lambda lib, x, y: x @ y, (a, w)),
    }
    fn, arrays = fns[case]
    for lib in (dg, torch):
        ins = tuple(leaf(lib, z) for z in arrays)
        assert lib.autograd.gradcheck(lambda *t, lib=lib: fn(lib, *t), ins) is True
        assert lib.autograd.gradgradcheck(lambda *t, lib=lib: fn(lib, *t), ins) is True


def test_gradcheck_failure_reports_both_jacobians_and_indices():
    x = leaf(dg, RNG.uniform(0.5, 1.5, (3,)))
    y = leaf(dg, RNG.uniform(0.5, 1.5, (3,)))
    bad = make_square(dg, wrong=True)
    with pytest.raises(dg.autograd.GradcheckError) as info:
        dg.autograd.gradcheck(lambda a, b: (a * b, bad.apply(b)), (x, y))
    msg = str(info.value)
    assert "Jacobian mismatch for output 1 with respect to input 1" in msg
    assert "numerical:" in msg and "analytical:" in msg
    # the analytical diagonal is 3*y, the numerical one 2*y
    assert f"{3 * y.detach().numpy()[0]:.6f}"[:5] in msg
    assert f"{2 * y.detach().numpy()[0]:.6f}"[:5] in msg


def test_gradcheck_raise_exception_false_returns_false_like_torch():
    a = RNG.uniform(0.5, 1.5, (3,))
    for lib in (dg, torch):
        x = leaf(lib, a)
        assert lib.autograd.gradcheck(make_square(lib, wrong=True).apply, (x,),
                                      raise_exception=False) is False
        assert lib.autograd.gradcheck(make_square(lib).apply, (x,)) is True


def test_gradgradcheck_catches_wrong_second_order_like_torch():
    a = RNG.uniform(0.5, 1.5, (3,))
    for lib in (dg, torch):
        x = leaf(lib, a)
        f = make_square(lib, detach_in_backward=True)
        assert lib.autograd.gradcheck(f.apply, (x,)) is True
        assert lib.autograd.gradgradcheck(f.apply, (x,), raise_exception=False) is False
        assert lib.autograd.gradgradcheck(make_square(lib).apply, (x,)) is True


def test_gradcheck_with_non_tensor_args_and_float32_warning():
    x = leaf(dg, RNG.uniform(0.5, 1.5, (2,)))
    assert dg.autograd.gradcheck(lambda t, k: t ** k, (x, 3))
    x32 = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="float64"):
        dg.autograd.gradcheck(lambda t: t * 2, (x32,), atol=1e-2, rtol=1e-2, eps=1e-3)
    with pytest.raises(ValueError, match="requires_grad"):
        dg.autograd.gradcheck(lambda t: t * 2, (dg.tensor([1.0]),))


# -- anomaly mode ------------------------------------------------------------------------

def _here():
    """The line number of the caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def test_anomaly_names_op_and_user_line_for_nan_in_backward():
    x = dg.tensor([0.0, 1.0], requires_grad=True)
    with dg.autograd.detect_anomaly():
        line = _here()
        y = dg.sqrt(x)                      # d/dx sqrt at 0 is inf; times 0 gives nan
        loss = (y * 0.0).sum()
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    msg = str(info.value)
    assert "SqrtBackward0" in msg and "'sqrt'" in msg and "nan" in msg
    assert f'{os.path.basename(__file__)}", line {line}' in msg
    assert "y = dg.sqrt(x)" in msg


def test_anomaly_checks_backward_not_forward():
    x = dg.tensor([-1.0, 2.0], requires_grad=True)
    with dg.autograd.detect_anomaly():
        y = dg.log(x)                       # forward is nan at -1: not an anomaly yet
        line = _here()
        loss = (y * y).sum()                # MulBackward0: g * y is nan -> this op is named
        with pytest.raises(RuntimeError, match="MulBackward0.*nan") as info:
            loss.backward()
    assert f"line {line}" in str(info.value)


def test_anomaly_check_inf_option():
    x = dg.tensor([0.0, 1.0], requires_grad=True)
    with dg.autograd.detect_anomaly():
        dg.log(x).sum().backward()          # inf gradient: allowed by default (PyTorch)
    assert np.isinf(x.grad.numpy()[0])
    with dg.autograd.detect_anomaly(check_inf=True):
        y = dg.log(x)
        with pytest.raises(RuntimeError, match="LogBackward0.*inf"):
            y.sum().backward()


def test_anomaly_off_by_default_and_set_detect_anomaly():
    assert not dg.autograd.anomaly.is_anomaly_enabled()
    x = dg.tensor([0.0], requires_grad=True)
    (dg.sqrt(x) * 0.0).sum().backward()     # no check: nan gradient is returned
    assert np.isnan(x.grad.numpy()[0])
    dg.autograd.set_detect_anomaly(True)
    try:
        assert dg.autograd.anomaly.is_anomaly_enabled()
        with dg.autograd.set_detect_anomaly(False):
            assert not dg.autograd.anomaly.is_anomaly_enabled()
        assert dg.autograd.anomaly.is_anomaly_enabled()
    finally:
        dg.autograd.set_detect_anomaly(False)
    assert not dg.autograd.anomaly.is_anomaly_enabled()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_anomaly_matches_torch_op_naming():
    for lib in (dg, torch):
        x = lib.tensor([0.0], requires_grad=True)
        with lib.autograd.detect_anomaly():
            y = lib.sqrt(x)
            with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values in its 0th output"):
                (y * 0.0).sum().backward()


# -- graph.walk ----------------------------------------------------------------------

def test_walk_lists_nodes_depth_first_with_leaves():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    w = dg.tensor([3.0, 4.0], requires_grad=True)
    y = (x.exp() * w).sum()
    entries = dg.autograd.graph.walk(y)
    names = [(d, n.name()) for d, n in entries]
    assert names == [(0, "SumBackward0"), (1, "MulBackward0"), (2, "ExpBackward0"),
                     (3, "AccumulateGrad"), (2, "AccumulateGrad")]
    assert entries[3][1].variable is x and entries[4][1].variable is w
    assert dg.autograd.graph.walk(x)[0][1].variable is x
    assert dg.autograd.graph.walk(dg.tensor([1.0])) == []


def test_walk_visits_shared_nodes_once_and_reports_source_in_anomaly_mode():
    x = dg.tensor([1.0], requires_grad=True)
    with dg.autograd.detect_anomaly():
        line = _here()
        s = x.sin()
        y = s * s + s
    entries = dg.autograd.graph.walk(y)
    sin_nodes = [n for _, n in entries if n.name() == "SinBackward0"]
    assert len(sin_nodes) == 1
    src = sin_nodes[0].metadata["source"]
    assert src.endswith(f":{line}: s = x.sin()") and os.path.basename(__file__) in src


def test_anomaly_adds_forward_trace_to_errors_raised_in_backward():
    class Broken(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("broken backward")

    x = dg.tensor([1.0], requires_grad=True)
    with dg.autograd.detect_anomaly():
        line = _here()
        y = Broken.apply(x)
        with pytest.raises(ValueError, match="broken backward") as info:
            y.sum().backward()
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "Error detected in BrokenBackward" in notes and f"line {line}" in notes
    with pytest.raises(ValueError) as info:
        Broken.apply(x).sum().backward()            # outside anomaly mode: no note
    assert not getattr(info.value, "__notes__", None)
