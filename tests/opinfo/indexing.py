"""Op records for indexing primitives (getitem/setitem, gather/scatter, index_*, masks, sorting)."""

from __future__ import annotations

import numpy as np

from tests.opinfo import OpInfo, Sample, noncontig, randn

I64 = np.int64


def _i(*v):
    return np.array(v, dtype=I64)


def _is_torch(m):
    return m.__name__ == "torch"


def _autobatch_rows(m, x, i, unique):
    if m.__name__ != "dyngraph":
        return x[i]
    from dyngraph.ops._batching import rows_p  # dyngraph only: torch runs the table too
    from dyngraph.ops.registry import bind
    return bind(rows_p, (x, i), {"n": int(x.shape[0]), "unique": unique})


def _autobatch_gather(m, x, v, rows, unique):
    if m.__name__ != "dyngraph":
        return m.stack([x[rows[0]], v, x[rows[1]], x[rows[2]]])
    from dyngraph.ops._batching import gather_p  # dyngraph only: torch runs the table too
    from dyngraph.ops.registry import bind
    return bind(gather_p, (x, v), {"B": 4, "rows": (np.array(rows, dtype=I64), None),
                                   "pos": (np.array([0, 2, 3]), slice(1, 2)),
                                   "ns": (int(x.shape[0]), 0), "uniq": (unique, True)})


def _autobatch_split(m, x):
    idx = (np.array([4, 0]), np.array([1, 2, 3]))
    if m.__name__ != "dyngraph":
        return m.cat([x[idx[0]] * 2.0, x[idx[1]]])
    from dyngraph.ops._batching import split_rows_p  # dyngraph only: torch runs the table too
    from dyngraph.ops.registry import bind
    a, b = bind(split_rows_p, (x,), {"idx": idx, "n": int(x.shape[0])})
    return m.cat([a * 2.0, b])      # its backward is autobatch_merge


def _one(*builders):
    """Samples from builder functions ``b(rng, dt) -> Sample``."""
    def make(rng, dt):
        return [b(rng, dt) for b in builders]
    return make


def _setitem(idx_fn):
    def fn(m, x, v, *idx):
        y = x.clone()
        y[idx_fn(*idx)] = v
        return y
    return fn


def _distinct(rng, shape, dt):
    """Values without ties (sort/topk gradients are then unique)."""
    n = int(np.prod(shape)) if shape else 1
    return np.asarray(rng.permutation(n).reshape(shape) * 0.37 - 1.0).astype(dt)


OPS = [
    # -- x[idx] ----------------------------------------------------------------------
    OpInfo("getitem_int", lambda m, x: (x[1], x[-1], x[0, 2], x[1][-2]),
           _one(lambda r, d: Sample((randn(r, (3, 4), d),)),
                lambda r, d: Sample((noncontig(r, (3, 4), d),), desc="noncontig"))),
    OpInfo("getitem_slice", lambda m, x: (x[1:, ::2], x[-2:], x[:, 1:-1:2], x[5:], x[..., :0]),
           _one(lambda r, d: Sample((randn(r, (3, 4), d),)),
                lambda r, d: Sample((noncontig(r, (3, 4), d),), desc="noncontig"))),
    OpInfo("getitem_none_ellipsis", lambda m, x: (x[None], x[..., None, 1], x[1, ..., None], x[...], x[True]),
           _one(lambda r, d: Sample((randn(r, (2, 3, 2), d),)))),
    OpInfo("getitem_0d", lambda m, x: (x[...], x[None], x[()]), _one(lambda r, d: Sample((randn(r, (), d),), desc="0d"))),
    OpInfo("getitem_mask", lambda m, x, mask: x[mask],
           _one(lambda r, d: Sample((randn(r, (3, 4), d), r.random((3, 4)) > 0.5)),
                lambda r, d: Sample((randn(r, (3, 4), d), np.array([True, False, True])), desc="rows"),
                lambda r, d: Sample((randn(r, (3, 4), d), np.zeros((3, 4), bool)), desc="none"),
                lambda r, d: Sample((randn(r, (), d), np.array(True)), desc="0d")),
           grad_argnums=(0,)),
    OpInfo("getitem_mask_mixed", lambda m, x, mask: x[1:, mask],
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([True, False, True, True])))), grad_argnums=(0,)),
    OpInfo("getitem_tensor", lambda m, x, i: x[i],
           _one(lambda r, d: Sample((randn(r, (3, 4), d), _i(2, 0, 2, -1))),
                lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 1], [1, 1]], I64)), desc="2d"),
                lambda r, d: Sample((randn(r, (3, 4), d), np.zeros(0, I64)), desc="empty"),
                lambda r, d: Sample((noncontig(r, (3, 4), d), _i(1, 1)), desc="noncontig")),
           grad_argnums=(0,)),
    OpInfo("getitem_tensor_list", lambda m, x: (x[[0, 2, 0]], x[[1, 0], [2, 2]], x[[[0], [1]], [1, 2]]),
           _one(lambda r, d: Sample((randn(r, (3, 4), d),)))),
    OpInfo("getitem_adv_adjacent", lambda m, x, i, j: (x[:, i, j], x[:, i], x[..., i]),
           _one(lambda r, d: Sample((randn(r, (2, 3, 4), d), _i(0, 2, 2), _i(1, 3, 1)))), grad_argnums=(0,)),
    OpInfo("getitem_adv_separated", lambda m, x, i, j: (x[i, :, j], x[i, 1:, j], x[0, :, j]),
           _one(lambda r, d: Sample((randn(r, (2, 3, 4), d), _i(0, 1, 1), _i(3, 3, 0)))), grad_argnums=(0,)),
    OpInfo("getitem_adv_0d_tensor", lambda m, x, t, j: (x[t], x[t, :, j], x[j, t]),
           _one(lambda r, d: Sample((randn(r, (2, 3, 4), d), np.array(1, I64), _i(0, 1)))), grad_argnums=(0,)),
    OpInfo("getitem_adv_broadcast", lambda m, x, i, j: x[i[:, None], j],
           _one(lambda r, d: Sample((randn(r, (3, 4), d), _i(0, 2), _i(1, 3, 3)))), grad_argnums=(0,)),
    # -- x[idx] = v (functional through clone) ---------------------------------------------
    OpInfo("setitem_slice", _setitem(lambda: (slice(None), 1)),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), randn(r, (3,), d))),
                lambda r, d: Sample((randn(r, (3, 4), d), randn(r, (1,), d)), desc="bcast"),
                lambda r, d: Sample((randn(r, (3, 4), d), randn(r, (), d)), desc="0d_value"))),
    OpInfo("setitem_tensor", _setitem(lambda i: i),
           _one(lambda r, d: Sample((randn(r, (4, 3), d), randn(r, (2, 3), d), _i(3, 0))),
                lambda r, d: Sample((randn(r, (4, 3), d), randn(r, (3,), d), _i(1, 2)), desc="bcast"),
                lambda r, d: Sample((noncontig(r, (4, 3), d), randn(r, (2, 1), d), _i(0, -1)), desc="noncontig")),
           grad_argnums=(0, 1)),
    OpInfo("setitem_mask", _setitem(lambda mk: mk),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), randn(r, (), d), np.eye(3, 4, dtype=bool)))),
           grad_argnums=(0, 1)),
    OpInfo("setitem_number", lambda m, x: _setitem(lambda: (Ellipsis, slice(1, None)))(m, x, 2.5),
           _one(lambda r, d: Sample((randn(r, (2, 3), d),)))),
    OpInfo("index_put_accumulate", lambda m, x, v, i: m.index_put(x, (i,), v, accumulate=True),
           _one(lambda r, d: Sample((randn(r, (4, 2), d), randn(r, (3, 2), d), _i(1, 1, 3))),
                lambda r, d: Sample((randn(r, (4, 2), d), randn(r, (2,), d), _i(0, 0, 0)), desc="bcast")),
           grad_argnums=(0, 1)),
    OpInfo("index_put", lambda m, x, v, i, j: m.index_put(x, (i, j), v),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), randn(r, (2,), d), _i(1, 2), _i(0, 3)))),
           grad_argnums=(0, 1)),
    # -- gather / scatter -----------------------------------------------------------------
    OpInfo("gather", lambda m, x, i, dim: m.gather(x, dim, i),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 0], [3, 1], [2, 2]], I64), 1)),
                lambda r, d: Sample((randn(r, (3, 4), d), np.array([[2, 0, 2, 1], [2, 2, 0, 0]], I64), -2), desc="neg"),
                lambda r, d: Sample((randn(r, (), d), np.array(0, I64), 0), desc="0d"),
                lambda r, d: Sample((noncontig(r, (3, 4), d), np.zeros((0, 4), I64), 0), desc="empty")),
           grad_argnums=(0,)),
    OpInfo("scatter", lambda m, x, i, src: m.scatter(x, 1, i, src),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 3], [1, 2], [2, 0]], I64), randn(r, (3, 2), d))),
), grad_argnums=(0, 2)),
    # torch's own backward rejects a src larger than index; values only (gradients: test_indexing_extra)
    OpInfo("scatter_bigsrc", lambda m, x, i, src: m.scatter(x, 1, i, src),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0], [3]], I64), randn(r, (3, 3), d)))), grad=False),
    OpInfo("scatter_value", lambda m, x, i: x.scatter(0, i, 1.5),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 2, 1, 0]], I64)))), grad_argnums=(0,)),
    OpInfo("scatter_add", lambda m, x, i, src: m.scatter_add(x, 0, i, src),
           _one(lambda r, d: Sample((randn(r, (3, 2), d), np.array([[0, 2], [0, 2], [1, 2]], I64), randn(r, (3, 2), d))),
), grad_argnums=(0, 2)),
    OpInfo("scatter_add_bigsrc", lambda m, x, i, src: m.scatter_add(x, 0, i, src),
           _one(lambda r, d: Sample((randn(r, (3, 2), d), np.array([[1], [1]], I64), randn(r, (2, 2), d)))), grad=False),
    OpInfo("scatter_reduce_sum", lambda m, x, i, src: m.scatter_reduce(x, 0, i, src, "sum", include_self=False),
           _one(lambda r, d: Sample((randn(r, (3, 2), d), np.array([[0, 2], [0, 2]], I64), randn(r, (2, 2), d)))),
           grad_argnums=(0, 2)),
    OpInfo("scatter_reduce_mean", lambda m, x, i, src: m.scatter_reduce(x, 1, i, src, "mean"),
           _one(lambda r, d: Sample((randn(r, (2, 3), d), np.array([[0, 0, 2], [1, 1, 1]], I64), randn(r, (2, 3), d)))),
           grad_argnums=(0, 2)),
    OpInfo("scatter_reduce_amax", lambda m, x, i, src: m.scatter_reduce(x, 0, i, src, "amax"),
           _one(lambda r, d: Sample((randn(r, (3, 2), d), np.array([[0, 2], [0, 2], [1, 0]], I64), randn(r, (3, 2), d)))),
           grad_argnums=(0, 2), gradgrad=False),
    OpInfo("scatter_reduce_prod", lambda m, x, i, src: m.scatter_reduce(x, 1, i, src, "prod"),
           _one(lambda r, d: Sample((randn(r, (2, 3), d), np.array([[0, 0], [2, 1]], I64), randn(r, (2, 2), d)))),
           grad_argnums=(0, 2)),
    OpInfo("scatter_reduce_prod_zeros", lambda m, x, i, src: m.scatter_reduce(x, 0, i, src, "prod", include_self=False),
           _one(lambda r, d: Sample((randn(r, (3, 2), d), np.array([[0, 2], [0, 2], [0, 1]], I64),
                                     np.array([[0.0, 1.5], [2.0, 0.0], [0.0, -1.0]], d)))),
           grad_argnums=(0, 2), gradgrad=False, fd=False),
    OpInfo("index_select", lambda m, x, i, dim: m.index_select(x, dim, i),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), _i(2, 0, 2), 0)),
                lambda r, d: Sample((randn(r, (3, 4), d), _i(3, 1), -1), desc="neg"),
                lambda r, d: Sample((randn(r, (3, 4), d), np.zeros(0, I64), 1), desc="empty"),
                lambda r, d: Sample((noncontig(r, (3, 4), d), _i(1), 1), desc="noncontig")),
           grad_argnums=(0,)),
    OpInfo("index_add", lambda m, x, i, src: m.index_add(x, 1, i, src, alpha=2.0),
           _one(lambda r, d: Sample((randn(r, (2, 4), d), _i(3, 0, 3), randn(r, (2, 3), d)))), grad_argnums=(0, 2)),
    OpInfo("index_copy", lambda m, x, i, src: x.index_copy(0, i, src),
           _one(lambda r, d: Sample((randn(r, (4, 2), d), _i(3, 0), randn(r, (2, 2), d)))), grad_argnums=(0, 2)),
    OpInfo("index_reduce_amax", lambda m, x, i, src: x.index_reduce(0, i, src, "amax", include_self=False),
           _one(lambda r, d: Sample((randn(r, (4, 2), d), _i(3, 0, 3), randn(r, (3, 2), d)))), grad_argnums=(0, 2)),
    OpInfo("index_reduce_prod", lambda m, x, i, src: x.index_reduce(1, i, src, "prod"),
           _one(lambda r, d: Sample((randn(r, (2, 3), d), _i(2, 2), randn(r, (2, 2), d)))), grad_argnums=(0, 2)),
    OpInfo("put_accumulate", lambda m, x, i, src: x.put(i, src, accumulate=True),
           _one(lambda r, d: Sample((randn(r, (2, 3), d), _i(5, 0, 5), randn(r, (3,), d)))), grad_argnums=(0, 2)),
    OpInfo("index_fill", lambda m, x, i: x.index_fill(1, i, -1.0),
           _one(lambda r, d: Sample((randn(r, (2, 4), d), _i(3, 0, 3)))), grad_argnums=(0,)),
    OpInfo("index_fill_tensor", lambda m, x, i, v: x.index_fill(1, i, v),
           _one(lambda r, d: Sample((randn(r, (2, 4), d), _i(3, 0, 3, 1), randn(r, (), d)))), grad_argnums=(0, 2)),
    # -- masks ----------------------------------------------------------------------------
    OpInfo("masked_fill", lambda m, x, mask: x.masked_fill(mask, 0.5),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), r.random((3, 4)) > 0.5)),
                lambda r, d: Sample((randn(r, (3, 4), d), r.random((4,)) > 0.5), desc="bcast"),
                lambda r, d: Sample((randn(r, (), d), np.array(True)), desc="0d")),
           grad_argnums=(0,)),
    OpInfo("masked_fill_tensor", lambda m, x, mask, v: m.masked_fill(x, mask, v),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), r.random((3, 1)) > 0.3, randn(r, (), d)))),
           grad_argnums=(0, 2)),
    OpInfo("masked_select", lambda m, x, mask: m.masked_select(x, mask),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), r.random((3, 4)) > 0.5)),
                lambda r, d: Sample((randn(r, (4,), d), r.random((3, 4)) > 0.5), desc="bcast")),
           grad_argnums=(0,)),
    OpInfo("masked_scatter", lambda m, x, mask, src: x.masked_scatter(mask, src),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.eye(3, 4, dtype=bool), randn(r, (2, 4), d)))),
           grad_argnums=(0, 2)),
    OpInfo("take", lambda m, x, i: m.take(x, i),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 11], [5, 5]], I64))),
                lambda r, d: Sample((noncontig(r, (3, 4), d), _i(-1, 2)), desc="noncontig")),
           grad_argnums=(0,)),
    OpInfo("take_along_dim", lambda m, x, i, **kw: m.take_along_dim(x, i, **kw),
           _one(lambda r, d: Sample((randn(r, (3, 4), d), np.array([[0, 3]], I64)), {"dim": 1}),
                lambda r, d: Sample((randn(r, (3, 4), d), _i(0, 5, 5)), desc="flat")),
           grad_argnums=(0,)),
    # -- sorting & friends ------------------------------------------------------------------
    OpInfo("sort", lambda m, x, **kw: m.sort(x, **kw),
           _one(lambda r, d: Sample((_distinct(r, (3, 4), d),), {"dim": 1}),
                lambda r, d: Sample((_distinct(r, (3, 4), d),), {"dim": 0, "descending": True}, desc="desc"),
                lambda r, d: Sample((_distinct(r, (), d),), {}, desc="0d"),
                lambda r, d: Sample((_distinct(r, (0, 3), d),), {}, desc="empty"))),
    OpInfo("sort_stable_ties", lambda m, x: (m.sort(x, stable=True).indices, m.sort(x, descending=True, stable=True).indices),
           _one(lambda r, d: Sample((np.array([2, 1, 2, 0, 1, 2, np.nan, 1], d),))), grad=False),
    OpInfo("argsort", lambda m, x: (m.argsort(x), x.argsort(dim=0, descending=True)),
           _one(lambda r, d: Sample((_distinct(r, (3, 4), d),))), grad=False),
    OpInfo("topk", lambda m, x, k, **kw: m.topk(x, k, **kw),
           _one(lambda r, d: Sample((_distinct(r, (3, 5), d), 2)),
                lambda r, d: Sample((_distinct(r, (3, 5), d), 2), {"dim": 0, "largest": False}, desc="smallest"),
                lambda r, d: Sample((_distinct(r, (3, 5), d), 0), desc="k0"))),
    OpInfo("kthvalue", lambda m, x, k, **kw: m.kthvalue(x, k, **kw),
           _one(lambda r, d: Sample((_distinct(r, (3, 5), d), 2)),
                lambda r, d: Sample((_distinct(r, (3, 5), d), 3), {"dim": 0, "keepdim": True}, desc="keepdim"))),
    OpInfo("unique", lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
           _one(lambda r, d: Sample((np.array([[3, 1, 3], [0, 1, 7]], d),))), grad=False),
    OpInfo("unique_plain", lambda m, x: m.unique(x), _one(lambda r, d: Sample((np.array([2, 2, -1], d),))), grad=False),
    OpInfo("nonzero", lambda m, x: (m.nonzero(x), m.nonzero(x, as_tuple=True), m.argwhere(x)),
           _one(lambda r, d: Sample((np.array([[0, 1.5, 0], [2, 0, -1]], d),)),
                lambda r, d: Sample((np.zeros((0, 2), d),), desc="empty")), grad=False),
    OpInfo("searchsorted", lambda m, s, v, **kw: m.searchsorted(s, v, **kw),
           _one(lambda r, d: Sample((np.array([1, 3, 5, 7], d), np.array([[3, 6], [0, 9]], d))),
                lambda r, d: Sample((np.array([1, 3, 5, 7], d), np.array([3, 7, 4], d)), {"right": True}, desc="right"),
                lambda r, d: Sample((np.array([[1, 3, 5], [2, 4, 6]], d), np.array([[3], [3]], d)), {"side": "right"},
                                    desc="batched")), grad=False),
    OpInfo("bucketize", lambda m, x, b, **kw: m.bucketize(x, b, **kw),
           _one(lambda r, d: Sample((np.array([[1, 3], [9, 4]], d), np.array([1, 3, 5], d))),
                lambda r, d: Sample((np.array([1, 3, 5], d), np.array([1, 3, 5], d)), {"right": True}, desc="right")),
           grad=False),
    OpInfo("one_hot", lambda m, x, **kw: (m.nn.functional.one_hot if _is_torch(m) else m.one_hot)(x, **kw),
           _one(lambda r, d: Sample((_i(0, 2, 1),)),
                lambda r, d: Sample((np.array([[0, 1], [3, 0]], I64),), {"num_classes": 5}, desc="classes")),
           grad=False, dtypes=("float32",)),
    OpInfo("isin", lambda m, x, t, **kw: m.isin(x, t, **kw),
           _one(lambda r, d: Sample((np.array([[1, 2], [3, 5]], d), np.array([2, 5, 7], d))),
                lambda r, d: Sample((np.array([1, 2, 3], d), np.array([2], d)), {"invert": True}, desc="invert")),
           grad=False),
    OpInfo("bincount", lambda m, x, *w, **kw: m.bincount(x, *w, **kw),
           _one(lambda r, d: Sample((np.array([0, 3, 3, 1], I64),)),
                lambda r, d: Sample((np.array([0, 3, 3, 1], I64),), {"minlength": 6}, desc="minlength"),
                lambda r, d: Sample((np.array([], I64),), desc="empty"),
                lambda r, d: Sample((np.array([2, 0, 2], I64), np.array([0.5, 1.0, 2.0], d)), desc="weights")),
           grad=False),
    OpInfo("quantile", lambda m, x, q, **kw: m.quantile(x, q, **kw),
           _one(lambda r, d: Sample((r.permutation(12).reshape(3, 4).astype(d) * 0.25, 0.3), {"dim": 1}),
                lambda r, d: Sample((r.permutation(6).astype(d) * 0.5, 0.5), {"interpolation": "midpoint"},
                                    desc="flat_midpoint"),
                lambda r, d: Sample((r.permutation(12).reshape(2, 6).astype(d), 0.75),
                                    {"dim": 0, "keepdim": True, "interpolation": "nearest"}, desc="keepdim_nearest")),
           grad_argnums=(0,)),
    OpInfo("quantile_qtensor", lambda m, x, q: m.quantile(x, q, dim=-1),
           _one(lambda r, d: Sample((r.permutation(10).reshape(2, 5).astype(d) * 0.5,
                                     np.array([0.1, 0.5, 0.95], d)))),
           grad_argnums=(0,)),
    OpInfo("histc", lambda m, x, **kw: m.histc(x, **kw),
           _one(lambda r, d: Sample((np.array([1.0, 2.0, 1.0, 4.0, 5.0, -1.0], d),), {"bins": 4, "min": 0, "max": 3}),
                lambda r, d: Sample((r.standard_normal(20).astype(d),), {"bins": 5}, desc="data_range"),
                lambda r, d: Sample((np.array([2.0, 2.0], d),), {"bins": 3}, desc="constant")),
           grad=False),
    OpInfo("unique_consecutive", lambda m, x, **kw: m.unique_consecutive(x, **kw),
           _one(lambda r, d: Sample((np.array([1, 1, 2, 2, 3, 1, 1, 2], d),),
                                    {"return_inverse": True, "return_counts": True}),
                lambda r, d: Sample((np.array([[1, 1], [1, 1], [2, 3]], d),), {"dim": 0}, desc="dim0"),
                lambda r, d: Sample((np.array([[1, 1, 2], [1, 1, 3]], d),), {"dim": 1, "return_counts": True},
                                    desc="dim1_counts")),
           grad=False),
    # dg.autobatch's own gather (ops/_batching.rows_p; no PyTorch counterpart): rows of x,
    # with the plain-scatter backward when no row repeats (unique=True) and np.add.at if not
    OpInfo("autobatch_rows", lambda m, x, i, unique: _autobatch_rows(m, x, i, unique),
           _one(lambda r, d: Sample((randn(r, (4, 3), d), _i(3, 0, 2), True)),
                lambda r, d: Sample((randn(r, (4, 3), d), _i(1, 1, 3, 1), False), desc="repeated")),
           grad_argnums=(0,), skip_torch=True, reference=lambda x, i, unique: x[i]),
    # dg.autobatch's gather from several sources (ops/_batching.gather_p): rows of x at
    # positions 0, 2, 3 and the one-member value v at position 1, in one call
    OpInfo("autobatch_gather", lambda m, x, v, rows, unique: _autobatch_gather(m, x, v, rows, unique),
           _one(lambda r, d: Sample((randn(r, (4, 3), d), randn(r, (3,), d), (3, 0, 2), True)),
                lambda r, d: Sample((randn(r, (4, 3), d), randn(r, (3,), d), (1, 1, 3), False),
                                    desc="repeated")),
           skip_torch=True,
           reference=lambda x, v, rows, unique: np.stack([x[rows[0]], v, x[rows[1]], x[rows[2]]])),
    # dg.autobatch's split of a group's rows by reader (ops/_batching.split_rows_p; backward
    # autobatch_merge): rows 4, 0 doubled, then rows 1, 2, 3
    OpInfo("autobatch_split", lambda m, x: _autobatch_split(m, x),
           _one(lambda r, d: Sample((randn(r, (5, 3), d),))),
           skip_torch=True,
           reference=lambda x: np.concatenate([x[[4, 0]] * 2.0, x[[1, 2, 3]]])),
]

