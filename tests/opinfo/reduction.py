"""Op records for reductions: sum, mean, prod, max/min family, var/std, logsumexp,
norms, scans, logical and counting reductions."""

from __future__ import annotations

import numpy as np

from tests.opinfo import OpInfo, Sample, noncontig, randn

INF = float("inf")


def _ties(rng, shape, dt):
    """Small integers as floats: many exact ties (max/min/median tie rules)."""
    return rng.integers(-2, 3, size=shape).astype(dt)


def _distinct(rng, shape, dt):
    """Values far apart, so argmax/median picks are unambiguous and stable under FD steps."""
    n = int(np.prod(shape)) if shape else 1
    a = rng.permutation(n).reshape(shape) * 0.5 + rng.uniform(-0.1, 0.1, size=shape)
    return np.asarray(a).astype(dt)


def _with_zeros(rng, shape, dt, k):
    a = randn(rng, shape, dt, 0.5, 1.5) * rng.choice([-1, 1], size=shape).astype(dt)
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, size=k, replace=False)] = 0
    return a


def _red_samples(gen=randn, tuple_dims=True, zero_d=True, empty=True):
    """The standard sweep over dim (None, int, negative, tuple), keepdim, 0-d, empty, strided."""
    def samples(rng, dt):
        s = [
            Sample((gen(rng, (3, 4), dt),), desc="all"),
            Sample((gen(rng, (3, 4), dt),), {"dim": 1}, desc="dim1"),
            Sample((gen(rng, (2, 3, 4), dt),), {"dim": -2, "keepdim": True}, desc="neg_keep"),
            Sample((noncontig(rng, (3, 4), dt) if gen is randn else gen(rng, (4, 3), dt).T,),
                   {"dim": 0}, desc="noncontig"),
        ]
        if tuple_dims:
            s.append(Sample((gen(rng, (2, 3, 4), dt),), {"dim": (0, 2)}, desc="tuple"))
            s.append(Sample((gen(rng, (2, 3, 4), dt),), {"dim": (-1, 0), "keepdim": True},
                            desc="tuple_keep"))
        if zero_d:
            s.append(Sample((gen(rng, (), dt),), desc="0d"))
            s.append(Sample((gen(rng, (), dt),), {"dim": 0}, desc="0d_dim"))
        if empty:
            s.append(Sample((gen(rng, (0, 3), dt),), {"dim": 0}, desc="empty"))
        return s
    return samples


def _kw_call(name):
    def fn(m, x, **kw):
        return getattr(m, name)(x, **kw)
    return fn


def _prod_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),), desc="all"),
        Sample((randn(rng, (3, 4), dt),), {"dim": 1}, desc="dim1"),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim": -2, "keepdim": True}, desc="neg_keep"),
        Sample((noncontig(rng, (3, 4), dt),), {"dim": 0}, desc="noncontig"),
        Sample((_with_zeros(rng, (3, 4), dt, 1),), desc="all_one_zero"),
        Sample((_with_zeros(rng, (3, 4), dt, 2),), desc="all_two_zeros"),
        Sample((np.array([[0.5, 0.0, 2.0, -1.5], [0.0, 1.2, 0.0, 3.0], [0.7, 0.8, 1.1, 0.0]],
                         dtype=dt),), {"dim": 1}, desc="dim_zeros"),
        Sample((np.array([[0.0, 0.0], [2.0, 0.0], [1.5, -2.0]], dtype=dt),), {"dim": 0},
               desc="dim_zeros2"),
        Sample((randn(rng, (), dt),), desc="0d"),
        Sample((randn(rng, (0, 3), dt),), {"dim": 0}, desc="empty"),
        Sample((randn(rng, (0, 3), dt),), desc="empty_all"),
    ]


def _scan_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),), {"dim": 1}),
        Sample((randn(rng, (2, 3, 2), dt),), {"dim": -2}, desc="neg"),
        Sample((noncontig(rng, (3, 4), dt),), {"dim": 0}, desc="noncontig"),
        Sample((_with_zeros(rng, (2, 5), dt, 1),), {"dim": 1}, desc="one_zero"),
        Sample((np.array([[0.5, 0.0, 2.0, 0.0, -1.5], [0.0, 0.0, 1.2, 0.7, 3.0]], dtype=dt),),
               {"dim": 1}, desc="two_zeros"),
        Sample((np.array([[0.0, 1.5], [2.0, 0.0], [0.0, -0.5]], dtype=dt),), {"dim": 0},
               desc="zeros_dim0"),
        Sample((randn(rng, (), dt),), {"dim": 0}, desc="0d"),
        Sample((randn(rng, (0, 3), dt),), {"dim": 0}, desc="empty"),
    ]


def _cummax_samples(rng, dt):
    return [
        Sample((_distinct(rng, (3, 4), dt), 1)),
        Sample((_distinct(rng, (2, 3, 2), dt), -2), desc="neg"),
        Sample((_distinct(rng, (4, 3), dt).T, 0), desc="noncontig"),
        Sample((_distinct(rng, (), dt), 0), desc="0d"),
        Sample((randn(rng, (0, 3), dt), 0), desc="empty"),
    ]


def _ints(rng, dt):
    return [
        Sample((rng.integers(-3, 4, size=(3, 4)).astype(dt),)),
        Sample((rng.integers(-3, 4, size=(3, 4)).astype(dt),), {"dim": 1}, desc="dim"),
        Sample((rng.integers(-3, 4, size=(2, 3)).astype(dt),), {"dim": 0, "keepdim": True},
               desc="keep"),
    ]


def _max_dim_samples(gen):
    def samples(rng, dt):
        return [
            Sample((gen(rng, (3, 4), dt),), {"dim": 1}),
            Sample((gen(rng, (2, 3, 4), dt),), {"dim": -2, "keepdim": True}, desc="neg_keep"),
            Sample((gen(rng, (4, 3), dt).T,), {"dim": 0}, desc="noncontig"),
            Sample((gen(rng, (), dt),), {"dim": 0}, desc="0d"),
            Sample((gen(rng, (0, 3), dt),), {"dim": 1}, desc="empty"),
        ]
    return samples


def _var_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),), desc="all"),
        Sample((randn(rng, (3, 4), dt),), {"dim": 1}, desc="dim1"),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim": (0, -1), "keepdim": True}, desc="tuple_keep"),
        Sample((randn(rng, (3, 4), dt),), {"dim": 0, "correction": 0}, desc="corr0"),
        Sample((randn(rng, (3, 4), dt),), {"dim": -1, "correction": 2}, desc="corr2"),
        Sample((randn(rng, (3, 4), dt),), {"dim": 1, "unbiased": False}, desc="unbiased_false"),
        Sample((noncontig(rng, (3, 4), dt),), {"dim": 0}, desc="noncontig"),
    ]


def _var_zero_samples(rng, dt):
    a = randn(rng, (3, 4), dt)
    a[1] = 0.7  # one row with zero spread
    return [Sample((a,), {"dim": 1}, desc="zero_row"), Sample((np.full((2, 3), 1.5, dt),), desc="const")]


def _lse_samples(rng, dt):
    a = randn(rng, (3, 4), dt)
    a[0, 1] = -INF
    a[2, :3] = -INF
    big = randn(rng, (2, 3), dt) * 400.0
    return [
        Sample((randn(rng, (3, 4), dt),), {"dim": 1}),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim": (0, 2), "keepdim": True}, desc="tuple_keep"),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim": -1}, desc="neg"),
        Sample((noncontig(rng, (3, 4), dt),), {"dim": 0}, desc="noncontig"),
        Sample((a,), {"dim": 1}, desc="neg_inf"),
        Sample((big,), {"dim": 1}, desc="large"),
        Sample((randn(rng, (), dt),), {"dim": 0}, desc="0d"),
        Sample((randn(rng, (0, 3), dt),), {"dim": 0}, desc="empty"),
    ]


def _norm_samples(rng, dt):
    s = []
    for p in (2, 1, 3, 1.5, 0.5, INF, -INF, "fro"):
        s.append(Sample((randn(rng, (3, 4), dt),), {"p": p}, desc=f"p{p}"))
        s.append(Sample((randn(rng, (2, 3, 4), dt),), {"p": p, "dim": -1, "keepdim": True},
                        desc=f"p{p}_dim"))
    s.append(Sample((randn(rng, (2, 3, 4), dt),), {"p": 2, "dim": (0, 2)}, desc="tuple"))
    s.append(Sample((noncontig(rng, (3, 4), dt),), {"p": 2, "dim": 0}, desc="noncontig"))
    s.append(Sample((randn(rng, (), dt),), {"p": 2}, desc="0d"))
    s.append(Sample((randn(rng, (0, 3), dt),), {"p": 2, "dim": 0}, desc="empty"))
    return s


def _norm_zero_samples(rng, dt):
    a = randn(rng, (3, 4), dt)
    a[1] = 0.0
    b = randn(rng, (3, 4), dt)
    b[0, 2] = 0.0
    return [Sample((a,), {"p": 2, "dim": 1}, desc="zero_row_p2"),
            Sample((a,), {"p": 3, "dim": 1}, desc="zero_row_p3"),
            Sample((a,), {"p": 1.5, "dim": 1}, desc="zero_row_p1.5"),
            Sample((b,), {"p": 0.5, "dim": 1}, desc="zero_entry_p0.5"),
            Sample((np.zeros((2, 2), dt),), {"p": 2}, desc="all_zero")]


def _nan_samples(rng, dt):
    a = randn(rng, (3, 4), dt)
    a[0, 1] = np.nan
    a[2, 3] = np.nan
    return [Sample((a,)), Sample((a,), {"dim": 1}, desc="dim"),
            Sample((a,), {"dim": (0, 1), "keepdim": True}, desc="tuple_keep")]


def _bool_samples(rng, dt):
    a = rng.integers(0, 2, size=(3, 4)).astype(dt)
    return [
        Sample((a,)), Sample((a,), {"dim": 1}, desc="dim"),
        Sample((a,), {"dim": (0, 1), "keepdim": True}, desc="tuple_keep"),
        Sample((rng.integers(0, 2, size=(0, 2)).astype(dt),), {"dim": 0}, desc="empty"),
        Sample((np.ones((), dt),), desc="0d"),
    ]


ALL_DT = ("float32", "float64", "int64", "bool")

OPS = [
    OpInfo("sum", _kw_call("sum"), _red_samples()),
    OpInfo("sum_mean_numpy_kwargs", lambda m, x: m.sum(x, axis=1) + x.mean(axis=(0, 1), keepdims=True)[0]
           + x.sum(axis=0, keepdims=True).mean(axis=1, keepdims=True).reshape(()),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt),))]),
    OpInfo("sum_method", lambda m, x, **kw: x.sum(**kw), _red_samples(zero_d=False, empty=False)),
    OpInfo("sum_int", _kw_call("sum"), _ints, dtypes=("int32", "int64", "bool", "uint8"),
           grad=False),
    OpInfo("mean", _kw_call("mean"), _red_samples()),
    OpInfo("prod", _kw_call("prod"), _prod_samples),
    OpInfo("prod_int", _kw_call("prod"), lambda rng, dt: [s for s in _ints(rng, dt)],
           dtypes=("int32", "int64", "bool"), grad=False),
    OpInfo("cumsum", _kw_call("cumsum"), _scan_samples),
    OpInfo("cumsum_int", lambda m, x: m.cumsum(x, 1), lambda rng, dt: _ints(rng, dt)[:1],
           dtypes=("int32", "int64"), grad=False),
    OpInfo("cumprod", _kw_call("cumprod"), _scan_samples),
    OpInfo("cummax", lambda m, x, dim: m.cummax(x, dim), _cummax_samples),
    OpInfo("cummin", lambda m, x, dim: x.cummin(dim), _cummax_samples),
    OpInfo("cummax_ties", lambda m, x, dim: m.cummax(x, dim),
           lambda rng, dt: [Sample((_ties(rng, (3, 5), dt), 1)), Sample((_ties(rng, (4, 2), dt), 0), desc="dim0")],
           fd=False),
    OpInfo("cummin_ties", lambda m, x, dim: m.cummin(x, dim),
           lambda rng, dt: [Sample((_ties(rng, (3, 5), dt), 1))], fd=False),
    # (var(x, ()) also reduces everything; PyTorch's gradient for it is inf: see the extra tests)
    OpInfo("reduce_all_with_empty_dim_tuple", lambda m, x: m.sum(x, ()) + x.mean(()),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt),))]),
    OpInfo("amax", _kw_call("amax"), _red_samples(empty=False)),
    OpInfo("amin", _kw_call("amin"), _red_samples(empty=False)),
    OpInfo("amax_ties", _kw_call("amax"), _red_samples(_ties, empty=False), fd=False),
    OpInfo("amin_ties", _kw_call("amin"), _red_samples(_ties, empty=False), fd=False),
    OpInfo("amax_empty_kept_dim", lambda m, x: m.amax(x, 1), lambda rng, dt: [Sample((randn(rng, (0, 3), dt),))]),
    OpInfo("max_all", lambda m, x: m.max(x), lambda rng, dt: [Sample((randn(rng, (3, 4), dt),)),
                                                               Sample((randn(rng, (), dt),), desc="0d")]),
    OpInfo("max_all_ties", lambda m, x: x.max(), lambda rng, dt: [Sample((_ties(rng, (3, 4), dt),))],
           fd=False),
    OpInfo("min_all_ties", lambda m, x: x.min(), lambda rng, dt: [Sample((_ties(rng, (3, 4), dt),))],
           fd=False),
    OpInfo("max_dim", lambda m, x, **kw: m.max(x, **kw), _max_dim_samples(_distinct)),
    OpInfo("min_dim", lambda m, x, **kw: x.min(**kw), _max_dim_samples(_distinct)),
    OpInfo("max_binary", lambda m, x, y: m.max(x, y),
           lambda rng, dt: [Sample((_distinct(rng, (3, 4), dt), _distinct(rng, (3, 4), dt) + 0.25))]),
    OpInfo("max_int", lambda m, x: m.max(x, 1), lambda rng, dt: _ints(rng, dt)[:1],
           dtypes=("int32", "int64"), grad=False),
    OpInfo("argmax", _kw_call("argmax"), _max_dim_samples(_distinct), grad=False),
    OpInfo("argmin", _kw_call("argmin"), _max_dim_samples(_distinct), grad=False),
    OpInfo("argmax_flat", lambda m, x, **kw: x.argmax(**kw),
           lambda rng, dt: [Sample((_distinct(rng, (3, 4), dt),)),
                            Sample((_distinct(rng, (3, 4), dt),), {"keepdim": True}, desc="keep")],
           grad=False),
    OpInfo("aminmax", lambda m, x, **kw: tuple(m.aminmax(x, **kw)),
           lambda rng, dt: [Sample((_distinct(rng, (3, 4), dt),)),
                            Sample((_distinct(rng, (3, 4), dt),), {"dim": -1, "keepdim": True},
                                   desc="dim_keep")]),
    OpInfo("median", lambda m, x: m.median(x),
           lambda rng, dt: [Sample((_distinct(rng, (3, 4), dt),)),
                            Sample((_distinct(rng, (5,), dt),), desc="odd"),
                            Sample((_distinct(rng, (), dt),), desc="0d")]),
    OpInfo("median_ties", lambda m, x: x.median(), lambda rng, dt: [Sample((_ties(rng, (3, 4), dt),))],
           fd=False),
    OpInfo("median_dim", lambda m, x, **kw: m.median(x, **kw), _max_dim_samples(_distinct)),
    OpInfo("mode", lambda m, x, **kw: tuple(m.mode(x, **kw)), lambda rng, dt: [
        Sample((_ties(rng, (3, 6), dt),)), Sample((_ties(rng, (4, 3), dt),), {"dim": 0, "keepdim": True}, desc="dim0"),
        Sample((np.array(2.5, dt),), desc="0d")], fd=False),
    OpInfo("var", _kw_call("var"), _var_samples),
    OpInfo("std", _kw_call("std"), _var_samples),
    OpInfo("std_zero", _kw_call("std"), _var_zero_samples, fd=False),
    OpInfo("var_mean", lambda m, x, **kw: tuple(m.var_mean(x, **kw)), _var_samples),
    OpInfo("std_mean", lambda m, x, **kw: tuple(m.std_mean(x, **kw)), _var_samples),
    OpInfo("var_positional_unbiased", lambda m, x: m.var(x, 1, False),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt),))]),
    OpInfo("logsumexp", _kw_call("logsumexp"), _lse_samples),
    OpInfo("logsumexp_int", lambda m, x: m.logsumexp(x, 1), lambda rng, dt: _ints(rng, dt)[:1],
           dtypes=("int64",), grad=False),
    OpInfo("norm", _kw_call("norm"), _norm_samples),
    # Second order at a zero norm: PyTorch's double backward gives NaN there, dyngraph 0.
    OpInfo("norm_at_zero", _kw_call("norm"), _norm_zero_samples, fd=False, gradgrad=False),
    OpInfo("dist", lambda m, x, y, **kw: m.dist(x, y, **kw), lambda rng, dt: [
        Sample((randn(rng, (2, 3), dt), randn(rng, (3,), dt)), desc="bcast"),
        Sample((randn(rng, (4,), dt), randn(rng, (4,), dt)), {"p": 1}, desc="p1")]),
    OpInfo("cdist", lambda m, x, y, **kw: m.cdist(x, y, **kw), lambda rng, dt: [
        Sample((randn(rng, (3, 2), dt), randn(rng, (4, 2), dt)), desc="p2"),
        Sample((randn(rng, (2, 3, 2), dt), randn(rng, (2, 2), dt)), {"p": 1.0}, desc="batch_bcast_p1"),
        Sample((randn(rng, (3, 2), dt), randn(rng, (2, 2), dt)), {"p": 3.0}, desc="p3"),
        Sample((randn(rng, (2, 2), dt), randn(rng, (3, 2), dt)), {"p": float("inf")}, desc="pinf")],
           gradgrad=False),  # PyTorch has no double backward for cdist ("_cdist_backward")
    OpInfo("cov", lambda m, x, *w, **kw: m.cov(x, **kw), lambda rng, dt: [
        Sample((randn(rng, (3, 5), dt),)), Sample((randn(rng, (4,), dt),), desc="1d"),
        Sample((randn(rng, (2, 4), dt),), {"correction": 0}, desc="biased"),
        Sample((randn(rng, (2, 4), dt),), {"fweights": np.array([1, 2, 1, 3]),
                                            "aweights": np.array([0.5, 1.0, 0.2, 0.7], dt)}, desc="weights")],
           grad_argnums=(0,)),
    OpInfo("logcumsumexp", lambda m, x, d: m.logcumsumexp(x, d), lambda rng, dt: [
        Sample((randn(rng, (3, 4), dt, -5.0, 5.0), 1)), Sample((randn(rng, (4, 2), dt), 0), desc="dim0")]),
    OpInfo("renorm", lambda m, x, **kw: m.renorm(x, **kw), lambda rng, dt: [
        Sample((randn(rng, (3, 4), dt),), {"p": 2, "dim": 0, "maxnorm": 1.0}),
        Sample((randn(rng, (2, 3, 2), dt),), {"p": 1, "dim": 1, "maxnorm": 1.5}, desc="p1_dim1")]),
    OpInfo("trapezoid", lambda m, y, *x, **kw: m.trapezoid(y, *x, **kw), lambda rng, dt: [
        Sample((randn(rng, (3, 4), dt),)), Sample((randn(rng, (3, 4), dt),), {"dx": 0.5, "dim": 0}, desc="dx"),
        Sample((randn(rng, (2, 3), dt), np.array([0.0, 0.5, 2.0], dt)), desc="x1d")], grad_argnums=(0,)),
    OpInfo("cumulative_trapezoid", lambda m, y, **kw: m.cumulative_trapezoid(y, **kw), lambda rng, dt: [
        Sample((randn(rng, (3, 4), dt),)), Sample((randn(rng, (3, 4), dt),), {"dx": 2.0, "dim": 0}, desc="dx")]),
    OpInfo("pdist", lambda m, x, **kw: (m.nn.functional.pdist(x, **kw)), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt),)), Sample((randn(rng, (3, 2), dt),), {"p": 1.0}, desc="p1")],
           gradgrad=False),  # PyTorch has no double backward for pdist
    OpInfo("corrcoef", lambda m, x: m.corrcoef(x), lambda rng, dt: [Sample((randn(rng, (3, 5), dt),))]),
    OpInfo("sum_to_size", lambda m, x: x.sum_to_size(3, 1) * 2.0,
           lambda rng, dt: [Sample((randn(rng, (2, 3, 4), dt),))]),
    OpInfo("nansum", _kw_call("nansum"), _nan_samples),
    OpInfo("nanmean", _kw_call("nanmean"), _nan_samples),
    OpInfo("all", _kw_call("all"), _bool_samples, dtypes=ALL_DT, grad=False),
    OpInfo("any", _kw_call("any"), _bool_samples, dtypes=ALL_DT + ("uint8",), grad=False),
    OpInfo("count_nonzero", _kw_call("count_nonzero"),
           lambda rng, dt: [s for s in _bool_samples(rng, dt) if "keepdim" not in s.kwargs],
           dtypes=ALL_DT, grad=False),
]
