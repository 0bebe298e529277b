"""Short paths of the hot shape/indexing surface (issue 13, fourth pass) against PyTorch and
against the general path they skip: values, shapes, gradients, views/version counters, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.surface import indexing as _idx
from dyngraph.surface import shape as _shp


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return dg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize("shape,dim", [((2, 1, 3), 1), ((2, 1, 3), -2), ((2, 1, 3), 0), ((2, 1, 3), -1),
                                       ((1,), 0), ((1, 1), -1), ((), 0), ((), -1), ((3, 1), None)])
def test_squeeze_one_dim_matches_torch(shape, dim):
    d, t = _pair(shape)
    yd = d.squeeze() if dim is None else d.squeeze(dim)
    yt = t.squeeze() if dim is None else t.squeeze(dim)
    assert tuple(yd.shape) == tuple(yt.shape)
    assert yd._vc is d._vc and yd._base is d            # a view sharing the counter
    (yd * 2).sum().backward()
    (yt * 2).sum().backward()
    np.testing.assert_array_equal(d.grad.numpy(), t.grad.numpy())
    assert yd.grad_fn.name() == "ViewBackward0"


@pytest.mark.parametrize("dim", [3, -4, 7])
def test_squeeze_and_unsqueeze_out_of_range_errors(dim):
    d = dg.zeros(2, 1, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        d.squeeze(dim)
    with pytest.raises(IndexError, match="unsqueeze: Dimension out of range"):
        d.unsqueeze(dim + (1 if dim > 0 else -1))
    with pytest.raises(IndexError):
        torch.zeros(2, 1, 3).squeeze(dim)


@pytest.mark.parametrize("shape,dim", [((3,), 0), ((3,), 1), ((3,), -1), ((3,), -2), ((), 0), ((), -1),
                                       ((2, 3), 1)])
def test_unsqueeze_matches_torch(shape, dim):
    d, t = _pair(shape)
    yd, yt = d.unsqueeze(dim), t.unsqueeze(dim)
    assert tuple(yd.shape) == tuple(yt.shape)
    assert dg.unsqueeze(d, dim).shape == yd.shape
    assert yd._vc is d._vc
    with dg.no_grad():
        d.add_(1.0)                                     # a write through the base is seen
    assert yd._vc[0] == d._vc[0] == 1


def test_unsqueeze_with_a_numpy_integer_dim_takes_the_general_path():
    d = dg.zeros(3)
    assert d.unsqueeze(np.int64(1)).shape == (3, 1)


@pytest.mark.parametrize("shape,new", [((2, 3), (-1,)), ((2, 3), (3, -1)), ((2, 3), ((6,),)),
                                       ((2, 3), ([1, -1, 2],)), ((1,), ((),)), ((0, 3), (-1, 3)),
                                       ((2, 3), (dg.tensor(3), 2))])
def test_reshape_and_view_shapes_match_torch(shape, new):
    d, t = _pair(shape)
    tnew = tuple(x if not isinstance(x, dg.Tensor) else torch.tensor(x.item()) for x in new)
    assert tuple(d.reshape(*new).shape) == tuple(t.reshape(*tnew).shape)
    assert tuple(d.view(*new).shape) == tuple(t.view(*tnew).shape)


@pytest.mark.parametrize("new,msg", [((-1, -1), "only one dimension can be inferred"),
                                     ((4, -1), "is invalid for input of size 6"),
                                     ((0, -1), "is invalid for input of size 6"),
                                     ((5,), "is invalid for input of size 6")])
def test_reshape_errors_are_unchanged(new, msg):
    with pytest.raises(RuntimeError, match=msg):
        dg.zeros(2, 3).reshape(*new)
    with pytest.raises(RuntimeError, match=msg):
        dg.zeros(2, 3).view(*new)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).reshape(*new)


def test_view_of_a_transposed_tensor_keeps_its_stride_error():
    d, t = _pair((2, 3))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        d.t().view(6)
    with pytest.raises(RuntimeError):
        t.t().view(6)
    assert tuple(d.t().view(3, 2).shape) == tuple(t.t().view(3, 2).shape)
    y = d.view(3, 2)
    assert y._vc is d._vc and y.grad_fn.name() == "ViewBackward0"


def test_infer_shape_matches_the_plain_definition():
    rng = np.random.default_rng(1)
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(-1, 4, int(rng.integers(0, 4))))
        numel = int(rng.integers(0, 13))
        try:
            got = _shp._infer_shape(shape, numel, "op")
        except RuntimeError:
            got = None
        try:
            want = tuple(torch.empty(numel).reshape(shape).shape)
        except RuntimeError:
            want = None
        assert got == want, (shape, numel)


@pytest.mark.parametrize("chunks,dim", [(3, -1), (2, 0), (4, 1), (5, 1)])
def test_chunk_pieces_are_views_like_torch(chunks, dim):
    d, t = _pair((2, 9))
    pd, pt = d.chunk(chunks, dim), t.chunk(chunks, dim)
    assert [tuple(p.shape) for p in pd] == [tuple(p.shape) for p in pt]
    assert all(p._vc is d._vc and p._base is d for p in pd)
    sum((p * (k + 1)).sum() for k, p in enumerate(pd)).backward()
    sum((p * (k + 1)).sum() for k, p in enumerate(pt)).backward()
    np.testing.assert_array_equal(d.grad.numpy(), t.grad.numpy())
    assert dg.chunk(d, chunks, dim)[0].shape == pd[0].shape


def test_mark_views_c_and_python_agree():
    from dyngraph._core import registry

    base = dg.randn(4, 6) * 1.0
    for make in (lambda: dg.split(base, 2, 1), lambda: base.unbind(0),
                 lambda: (dg.ones(3), base)):       # a fresh tensor: not a view
        outs_c = make()
        for o in outs_c:
            o._vc, o._base = None, None
        outs_p = tuple(o for o in outs_c)
        registry.mark_views(outs_c, base)
        marks_c = [(o._vc is base._vc, o._base is base) for o in outs_c]
        for o in outs_p:
            o._vc, o._base = None, None
        registry._mark_views_py(outs_p, base)
        assert marks_c == [(o._vc is base._vc, o._base is base) for o in outs_p]


@pytest.mark.parametrize("sl", [slice(1, 3), slice(None, 2), slice(2, None), slice(None), slice(-3, -1),
                                slice(5, 10), slice(1, 3, 2), slice(3, 1)])
def test_slices_take_the_short_path_with_the_same_spec(sl):
    d, t = _pair((5, 4))
    spec, tensors = _idx.parse_index(sl)
    assert not tensors
    y = d[sl]
    assert y.grad_fn.params == {"index": spec}
    np.testing.assert_array_equal(y.detach().numpy(), t[sl].detach().numpy())
    assert y._vc is d._vc
    y.sum().backward()
    t[sl].sum().backward()
    np.testing.assert_array_equal(d.grad.numpy(), t.grad.numpy())


def test_slices_with_tensor_bounds_and_bad_steps():
    d, t = _pair((6,))
    i = dg.tensor(2)
    np.testing.assert_array_equal(d[i:i + 3].detach().numpy(), t[2:5].detach().numpy())
    with pytest.raises(ValueError, match="step must be greater than zero"):
        d[::-1]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        d[1.5:3]


@pytest.mark.parametrize("shapes", [[(3,), (4,)], [(3,), (0,), (2,)], [(0,), (0,)], [(3,), (2, 3)],
                                    [(2, 3), (0,)], [(1,), (1,), (1,)]])
@pytest.mark.parametrize("dim", [0, -1])
def test_cat_of_vectors_matches_torch(shapes, dim):
    pairs = [_pair(sh, k) for k, sh in enumerate(shapes)]
    ds, ts = [p[0] for p in pairs], [p[1] for p in pairs]
    try:
        yt = torch.cat(ts, dim)
    except (RuntimeError, IndexError) as exc:
        with pytest.raises(type(exc)):
            dg.cat(ds, dim)
        return
    yd = dg.cat(ds, dim)
    assert tuple(yd.shape) == tuple(yt.shape)
    w = np.arange(yd.numel(), dtype=np.float32).reshape(yd.shape)
    (yd * dg.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    for d, t in zip(ds, ts):
        if d.numel() == 0:      # dropped as a legacy empty input (the general path): no gradient
            assert d.grad is None or d.grad.numel() == 0
        else:
            np.testing.assert_array_equal(d.grad.numpy(), t.grad.numpy())


def test_cat_of_vectors_checks_elements_and_promotes():
    with pytest.raises(TypeError, match="expected Tensor as element 1"):
        dg.cat([dg.ones(2), np.ones(2)])
    y = dg.cat([dg.ones(2, dtype=dg.float32), dg.ones(1, dtype=dg.float64)])
    assert y.dtype == dg.float64 and y.shape == (3,)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0,)])
@pytest.mark.parametrize("dim", [0, -1, 1])
def test_stack_matches_torch_and_owns_its_memory(shape, dim):
    pairs = [_pair(shape, k) for k in range(3)]
    ds, ts = [p[0] for p in pairs], [p[1] for p in pairs]
    try:
        yt = torch.stack(ts, dim)
    except IndexError:
        with pytest.raises(IndexError):
            dg.stack(ds, dim)
        return
    yd = dg.stack(ds, dim)
    np.testing.assert_array_equal(yd.detach().numpy(), yt.detach().numpy())
    assert yd.dtype == dg.float32
    w = np.arange(yd.numel(), dtype=np.float32).reshape(yd.shape)
    (yd * dg.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    for d, t in zip(ds, ts):
        np.testing.assert_array_equal(d.grad.numpy(), t.grad.numpy())
    from dyngraph.ops.shape import stack_p

    arrays = [d._data for d in ds]
    out = stack_p.impl(*arrays, dim=0)
    assert out.flags.owndata and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.stack(arrays))
    assert not any(np.may_share_memory(out, a) for a in arrays)


def test_stack_of_mixed_dtypes_and_views():
    x = dg.arange(6.0).reshape(2, 3)
    parts = [x[0], x[1].double(), x[:, 1].repeat(2)[:3]]
    y = dg.stack(parts)
    assert y.dtype == dg.float64 and y.shape == (3, 3)
    np.testing.assert_array_equal(y.numpy(), np.stack([p.numpy().astype(np.float64) for p in parts]))


_CALLS = [("sum", (), {}), ("sum", (0,), {}), ("sum", (-1,), {}), ("sum", (1,), {"keepdim": True}),
          ("sum", (), {"dim": 0}), ("mean", (), {}), ("mean", (-1,), {}), ("mean", (0, True), {}),
          ("sum", (), {"axis": 0}), ("mean", (1,), {})]


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 0)])
@pytest.mark.parametrize("call", range(len(_CALLS)))
def test_sum_and_mean_methods_match_torch_and_the_general_path(shape, call):
    from dyngraph.surface import reduction as _red

    name, args, kwargs = _CALLS[call]
    d, t = _pair(shape)
    try:
        yt = getattr(t, name)(*args, **kwargs)
    except (IndexError, RuntimeError) as exc:
        with pytest.raises(type(exc)):
            getattr(d, name)(*args, **kwargs)
        return
    yd = getattr(d, name)(*args, **kwargs)
    yg = getattr(_red, name)(d, *args, **kwargs)          # the function's general path
    assert tuple(yd.shape) == tuple(yt.shape) == tuple(yg.shape)
    np.testing.assert_allclose(yd.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert yd.grad_fn.params == yg.grad_fn.params
    assert yd.grad_fn.name() == yg.grad_fn.name()
    yd.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), rtol=1e-6)
