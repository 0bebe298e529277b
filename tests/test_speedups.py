"""The C accelerator (dyngraph/_speedups.c) must build the same objects as the Python path."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autograd.graph import Node
from dyngraph.ops import registry
from dyngraph.ops.elementwise import add_p, exp_p, mul_p, tanh_p, where_p
from dyngraph.ops.linalg import matmul_p
from dyngraph.ops.reduction import sum_p

pytestmark = pytest.mark.skipif(registry.bind is registry._bind_py,
                                reason="C accelerator not built (pure-Python dispatch)")


def _node_summary(t):
    n = t._fn
    if n is None:
        return None
    return (n.prim.name, n.params, [None if e is None else (type(e[0]).__name__, e[1]) for e in n.edges],
            None if n.saved_versions is None else list(n.saved_versions),
            None if n.in_meta is None else [None if m is None else (m.shape, m.dtype) for m in n.in_meta],
            n.out is not None, n.out_vc is not None)


CASES = [
    (add_p, lambda a, b, c: (a, b), {}),
    (add_p, lambda a, b, c: (a, c), {}),            # broadcasting: in_meta recorded
    (add_p, lambda a, b, c: (a, 2.5), {}),          # weak scalar
    (mul_p, lambda a, b, c: (a, b), {}),
    (matmul_p, lambda a, b, c: (a, b.mT), {}),
    (tanh_p, lambda a, b, c: (a,), {}),
    (exp_p, lambda a, b, c: (a,), {}),
    (sum_p, lambda a, b, c: (a,), {"dim": (1,)}),
    (where_p, lambda a, b, c: (a > 0, a, b), {}),   # promote_from != 0: Python path
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("grad", [True, False])
def test_c_and_python_dispatch_agree(case, grad):
    prim, pick, params = CASES[case]
    rng = np.random.default_rng(case)
    a = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    b = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    c = dg.tensor(rng.standard_normal((4,)), requires_grad=grad)
    args = pick(a, b, c)
    out_c = registry.bind(prim, args, params)
    out_p = registry._bind_py(prim, args, params)
    np.testing.assert_array_equal(out_c.detach().numpy(), out_p.detach().numpy())
    assert out_c.requires_grad == out_p.requires_grad
    assert type(out_c._data) is np.ndarray
    assert _node_summary(out_c) == _node_summary(out_p)
    if grad:
        assert isinstance(out_c.grad_fn, Node)
        gc = dg.autograd.grad(out_c.sum(), [t for t in args if isinstance(t, dg.Tensor) and t.requires_grad])
        gp = dg.autograd.grad(out_p.sum(), [t for t in args if isinstance(t, dg.Tensor) and t.requires_grad])
        for x, y in zip(gc, gp):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_errors_name_the_op_in_c_path():
    from dyngraph.ops.elementwise import add_p
    from dyngraph.ops.registry import bind

    with pytest.raises(ValueError, match="add"):  # NumPy's error, renamed by the bind path
        bind(add_p, (dg.ones(2, 3), dg.ones(4)))
    with pytest.raises(RuntimeError, match="add: The size of tensor a"):  # PyTorch's class
        dg.ones(2, 3) + dg.ones(4)


def test_zero_dim_results_are_arrays():
    x = dg.tensor(2.0, requires_grad=True)
    y = x * x
    assert type(y._data) is np.ndarray and y._data.shape == ()
    y.backward()
    assert x.grad.item() == 4.0
