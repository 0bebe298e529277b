"""``grad_fn.name()`` and the tensor repr spell node names as PyTorch 2.13 does.

Each case runs the same expression with ``lib=torch`` and ``lib=dg`` and compares the
name of the output's node (``SumBackward0`` vs ``SumBackward1`` for a sum with a dim...).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg

_RNG = np.random.default_rng(0)
_A = _RNG.uniform(0.5, 2.0, size=(2, 3, 4))   # positive: log/sqrt are defined
_M = _RNG.uniform(-1.0, 1.0, size=(3, 3))
_IDX = np.array([[0, 2], [1, 0]])


def _F(lib):
    return lib.nn.functional


CASES = [
    ("add", lambda m, x: x + x),
    ("add_scalar", lambda m, x: x + 1.0),
    ("sub", lambda m, x: x - x.exp()),
    ("mul", lambda m, x: x * 2.0),
    ("div", lambda m, x: x / x.exp()),
    ("neg", lambda m, x: -x),
    ("pow_scalar", lambda m, x: x ** 3),
    ("exp", lambda m, x: x.exp()),
    ("log", lambda m, x: x.log()),
    ("log1p", lambda m, x: x.log1p()),
    ("sqrt", lambda m, x: x.sqrt()),
    ("tanh", lambda m, x: x.tanh()),
    ("sigmoid", lambda m, x: x.sigmoid()),
    ("relu", lambda m, x: m.relu(x)),
    ("gelu", lambda m, x: _F(m).gelu(x)),
    ("silu", lambda m, x: _F(m).silu(x)),
    ("leaky_relu", lambda m, x: _F(m).leaky_relu(x, 0.1)),
    ("clamp", lambda m, x: x.clamp(0.6, 1.5)),
    ("sum_all", lambda m, x: x.sum()),
    ("sum_dim", lambda m, x: x.sum(1)),
    ("sum_dim_keepdim", lambda m, x: x.sum(dim=(0, 2), keepdim=True)),
    ("mean_all", lambda m, x: x.mean()),
    ("mean_dim", lambda m, x: x.mean(-1)),
    ("prod_all", lambda m, x: x.prod()),
    ("prod_dim", lambda m, x: x.prod(0)),
    ("amax", lambda m, x: x.amax(1)),
    ("max_dim", lambda m, x: x.max(1).values),
    ("var", lambda m, x: x.var(1)),
    ("norm", lambda m, x: m.linalg.vector_norm(x)),
    ("logsumexp", lambda m, x: x.logsumexp(2)),
    ("cumsum", lambda m, x: x.cumsum(1)),
    ("view", lambda m, x: x.view(6, 4)),
    ("reshape", lambda m, x: x.reshape(-1)),
    ("flatten", lambda m, x: x.flatten()),
    ("permute", lambda m, x: x.permute(2, 0, 1)),
    ("transpose", lambda m, x: x.transpose(0, 2)),
    ("mT", lambda m, x: x.mT),
    ("expand", lambda m, x: x[:, :1].expand(2, 5, 4)),
    ("select", lambda m, x: x[1]),
    ("select_inner", lambda m, x: x[:, 2]),
    ("slice", lambda m, x: x[:, 1:]),
    ("newaxis", lambda m, x: x[None]),
    ("ellipsis", lambda m, x: x[...]),
    ("advanced_index", lambda m, x: x[m.tensor([1, 0])]),
    ("cat", lambda m, x: m.cat([x, x], 1)),
    ("stack", lambda m, x: m.stack([x, x])),
    ("unbind", lambda m, x: x.unbind(0)[0]),
    ("softmax", lambda m, x: x.softmax(-1)),
    ("log_softmax", lambda m, x: _F(m).log_softmax(x, 1)),
    ("where", lambda m, x: m.where(x > 1.0, x, x * 2.0)),
    ("cast_float32", lambda m, x: x.float()),
    ("gather", lambda m, x: x[0].gather(1, m.tensor(_IDX))),
    ("layer_norm", lambda m, x: _F(m).layer_norm(x, (4,))),
    ("max_pool2d", lambda m, x: _F(m).max_pool2d(x[None], 2)),
    ("avg_pool1d", lambda m, x: _F(m).avg_pool1d(x, 2)),
    ("pad_constant", lambda m, x: _F(m).pad(x, (1, 1))),
    ("pad_reflect", lambda m, x: _F(m).pad(x, (1, 2), mode="reflect")),
    ("embedding", lambda m, x: _F(m).embedding(m.tensor(_IDX), x[0])),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_node_name_matches_torch(name, fn):
    t = fn(torch, torch.tensor(_A, requires_grad=True))
    d = fn(dg, dg.tensor(_A, requires_grad=True))
    assert d.grad_fn.name() == t.grad_fn.name(), name


def test_matrix_ops_match_torch():
    for fn in (lambda m, a: m.linalg.inv(a), lambda m, a: m.linalg.det(a),
               lambda m, a: m.linalg.solve(a, a), lambda m, a: m.diag_embed(a),
               lambda m, a: m.tril(a)):
        t = fn(torch, torch.tensor(_M, requires_grad=True))
        d = fn(dg, dg.tensor(_M, requires_grad=True))
        assert d.grad_fn.name() == t.grad_fn.name()


def test_repr_uses_the_torch_name():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x.sum(0)) == repr(tx.sum(0)) == "tensor(3., grad_fn=<SumBackward1>)"
    assert repr(x * 2) == repr(tx * 2)


def test_custom_function_and_checkpoint_names():
    # custom Functions keep "<ClassName>Backward" exactly, with no overload number
    class my_Fn(dg.autograd.Function):  # noqa: N801 -- the name is spelled as written
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class my_TFn(torch.autograd.Function):  # noqa: N801
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = dg.ones(2, requires_grad=True)
    tx = torch.ones(2, requires_grad=True)
    assert my_Fn.apply(x).grad_fn.name() == "my_FnBackward"
    assert my_TFn.apply(tx).grad_fn.name() == "my_TFnBackward"
    y = dg.utils.checkpoint.checkpoint(lambda a: a.exp(), x, use_reentrant=True)
    ty = torch.utils.checkpoint.checkpoint(lambda a: a.exp(), tx, use_reentrant=True)
    assert y.grad_fn.name() == ty.grad_fn.name()


def test_name_is_computed_when_asked_not_when_recorded():
    # a primitive's torch_name function runs in name() only: recording costs nothing extra
    sum_p = dg._core.registry.REGISTRY["sum"]
    calls = []
    orig = sum_p.torch_name
    sum_p.torch_name = lambda params: calls.append(params) or orig(params)
    try:
        y = dg.ones(2, 3, requires_grad=True).sum(1)
        assert calls == []
        assert y.grad_fn.name() == "SumBackward1" and len(calls) == 1
    finally:
        sum_p.torch_name = orig
