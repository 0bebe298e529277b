"""Indexing primitives: ``x[idx]``, ``x[idx] = v``, gather/scatter, index_*, masks, sorting.

Design for graph capture: an index expression is split into a plain-data
*spec* (a tuple of ints, ``(start, stop, step)`` slice triples, ``None``,
``Ellipsis`` and the placeholder string ``"tensor"``) and the index
*tensors*, which are ordinary inputs of the primitive.  A captured graph can
therefore replay with new index values, and the ONNX exporter reads the
structure from ``params["index"]``.

Semantics follow PyTorch, which differ from NumPy in one place: integers
(and 0-d integer tensors) select first, so advanced-index dimensions are
placed by NumPy's adjacency rule among the remaining tensor indices only
(``x[0, :, [0, 1]]`` has shape ``(3, 2)`` for ``x`` of shape ``(2, 3, 4)``).
Implementations do that in two stages: a basic (view) index, then the
advanced index.

Gradients of gathering ops scatter-add into zeros (``np.add.at``), so
repeated indices accumulate.  Rules only read index *data*; the values of
the indexed tensor are never needed, so nodes keep its shape only
(the ``light`` inputs of their ``@primitive``), which also keeps ``h[:, t] = f(x)`` loops
cheap.

Index tensors of the variadic primitives (``index``, ``index_put``...) are
integer or bool tensors, which never require grad, so they never get an edge;
the fixed-position index inputs (``gather``, ``index_select``...) are also
listed in ``nondiff_argnums``.

``x[idx] = v`` is the functional ``index_put`` primitive applied through
:func:`dyngraph.ops.inplace.apply_inplace` (version bump, leaf check, the
tensor takes over the new node); without autograd it writes straight into the
buffer.  Limitation shared with the other in-place ops: a view of ``x`` taken
before the write keeps its old graph (PyTorch replays it on the new base).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .._core.registry import LOOPS as _LOOPS
from ..tensor import Tensor
from .reduction import sum_p
from .registry import primitive
from .structural import (
    _along,
    _as1d,
    _torch_msg,
    _zeros,
    gather_p,
    getitem_backward_p,
    reshape_p,
    sum_to_shape_p,
)

TENSOR = "tensor"  # placeholder in an index spec: the next index tensor input


def _data(a):
    """The array behind a rule argument (rules run on arrays or on Tensors)."""
    return a._data if isinstance(a, Tensor) else a


# ---------------------------------------------------------------------------
# index specs
# ---------------------------------------------------------------------------

def _split(spec: tuple, arrays, ndim: int):
    """PyTorch's two stages: (basic index, advanced index or None)."""
    basic = []
    adv = []
    has_adv = False
    k = 0
    consumed = 0
    for it in spec:
        if it is None or it is Ellipsis:
            continue
        if it == TENSOR:
            a = arrays[k]
            k += 1
            consumed += a.ndim if a.dtype.kind == "b" else 1
        else:
            consumed += 1
    k = 0
    for it in spec:
        t = type(it)
        if t is int:
            basic.append(it)
        elif t is tuple:
            basic.append(slice(*it))
            adv.append(slice(None))
        elif it is None:
            basic.append(None)
            adv.append(slice(None))
        elif it is Ellipsis:
            basic.append(Ellipsis)
            adv.extend([slice(None)] * max(ndim - consumed, 0))
        else:
            a = arrays[k]
            k += 1
            if a.dtype.kind == "b":
                basic.extend([slice(None)] * a.ndim)
                adv.append(a)
                has_adv = True
            elif a.ndim == 0:
                basic.append(int(a))
            else:
                basic.append(slice(None))
                adv.append(a)
                has_adv = True
    if Ellipsis not in basic:
        basic.append(Ellipsis)
    return tuple(basic), (tuple(adv) if has_adv else None)


# ---------------------------------------------------------------------------
# advanced indexing
# ---------------------------------------------------------------------------

_ONE_TENSOR = (TENSOR,)


@primitive("index", save_inputs=True, light=(0,))
def index_p(x, *indices, index=()):
    """``x[spec]`` where ``"tensor"`` entries take the index arrays in order (a copy)."""
    try:
        if len(indices) == 1 and index == _ONE_TENSOR and x.ndim:
            a = indices[0]
            if a.ndim and a.dtype.kind in "iu":   # h[src]: what _split makes of it, x[:, ...][a]
                return x[a]
        basic, adv = _split(index, indices, x.ndim)
        v = x[basic]
        return v.copy() if adv is None else v[adv]
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None


@primitive("index_backward", save_inputs=True)
def index_backward_p(g, *indices, shape=(), index=()):
    """Zeros of ``shape`` with ``g`` added at the indexed positions (repeats accumulate)."""
    if index == (TENSOR,) and len(indices) == 1 and shape:
        rows = indices[0]  # x[rows] with one 1-D integer index (h[src]): whole rows, one flat index
        if getattr(rows, "ndim", 0) == 1 and rows.dtype.kind == "i":
            z = _zeros(g, shape)
            if _rows_add_at(z, rows, g):
                return z
    z = _zeros(g, shape)
    basic, adv = _split(index, indices, len(shape))
    view = z[basic]
    if adv is None:
        view[...] = g
    else:
        np.add.at(view, adv, g)
    return z


def _index_vjp(argnum, g, out, x, *indices, index=()):
    if argnum:
        return None
    return index_backward_p(g, *indices, shape=tuple(x.shape), index=index)


def _index_backward_vjp(argnum, g, out, gx, *indices, shape=(), index=()):
    if argnum:
        return None
    return index_p(g, *indices, index=index)


index_p.defvjp_argnum(_index_vjp)
index_backward_p.defvjp_argnum(_index_backward_vjp)


@primitive("index_put", save_inputs=True, light=(0, 1))
def index_put_p(x, values, *indices, index=(), accumulate=False):
    """A copy of ``x`` with ``values`` written (or added) at ``x[spec]``."""
    out = x.copy()
    try:
        basic, adv = _split(index, indices, x.ndim)
        view = out[basic]
        if adv is None:
            if accumulate:
                view += values
            else:
                view[...] = values
        elif accumulate:
            np.add.at(view, adv, values)
        else:
            view[adv] = values
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    except ValueError as exc:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(np.shape(values))} cannot be broadcast "
            f"to indexing result ({exc})") from None
    return out


def _fit_value(gv, shape):
    """Sum a gradient of the indexing-result shape back to the value's shape."""
    shape = tuple(shape)
    core = shape
    while len(core) > gv.ndim and core and core[0] == 1:
        core = core[1:]
    if tuple(gv.shape) != core:
        gv = sum_to_shape_p(gv, shape=core)
    if core != shape:
        gv = reshape_p(gv, shape=shape)
    return gv


def _index_put_vjp(argnum, g, out, x, values, *indices, index=(), accumulate=False):
    if argnum == 0:
        return g if accumulate else index_put_p(g, 0.0, *indices, index=index, accumulate=False)
    if argnum == 1:
        return _fit_value(index_p(g, *indices, index=index), values.shape)
    return None


index_put_p.defvjp_argnum(_index_put_vjp)


# ---------------------------------------------------------------------------
# scatter along a dimension (gather is in ops/structural.py)
# ---------------------------------------------------------------------------

def _src_block(src, index):
    if not hasattr(src, "ndim") or src.ndim == 0 or src.shape == index.shape:
        return src
    return src[tuple(slice(0, n) for n in index.shape)].reshape(index.shape)


@primitive("scatter", save_inputs=True, nondiff_argnums=(1,), light=(0, 2))
def scatter_p(x, index, src, dim=0):
    out = x.copy()
    o1, i1 = _as1d(out, index)
    try:
        o1[_along(i1, dim)] = _src_block(src, i1) if hasattr(src, "ndim") and src.ndim else src
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    return out


def _rows_add_at(out, rows, vals):
    """``np.add.at(out, rows, vals)`` along the first axis of a C-contiguous ``out`` through one
    flat index, or False where that does not apply (the caller then takes its general path).

    ``rows`` (any shape ``(m, *r)`` with ``r`` within ``out.shape[1:]``, or ``(m,)`` meaning whole
    rows) picks the row of each entry of ``vals`` (shape ``rows.shape``, or ``(m, *out.shape[1:])``
    for whole rows).  NumPy's one-dimensional ``ufunc.at`` loop is several times faster than the
    tuple-of-index-arrays one, and the sums are the same: both visit the entries in C order, so
    repeats at one position are added in the same order (same bits).  A flat index along the
    first axis of a C-contiguous array is exact for every index the tuple form accepts: a
    negative row wraps to the same row, and a row out of range lands out of the flat range, where
    NumPy raises; the caller's general path then reports the error in the tensor's terms.
    """
    if type(out) is not np.ndarray or not out.flags.c_contiguous or out.ndim == 0 or not out.size:
        return False
    rest = out.shape[1:]
    r = 1
    for n in rest:
        r *= n
    if rows.ndim == 2 and rows.strides[1] == 0 and rows.shape[1] == r:
        rows = rows[:, 0]  # an expanded index (``dst.unsqueeze(1).expand(-1, H)``): whole rows
    if rows.ndim == 1 and _LOOPS is not None and _LOOPS.rows_add(out, rows, vals):
        return True   # the accelerator's loop: the same additions in the same order
    if rows.ndim == 1:  # whole rows (index_add): row k covers [k * r, (k + 1) * r)
        flat = rows[:, None] * r + np.arange(r) if r != 1 else rows
    elif rows.ndim == 2 == out.ndim:
        flat = rows * r + np.arange(rows.shape[1])
    else:
        if rows.ndim != out.ndim:
            return False
        base, step = 0, r
        for k in range(1, rows.ndim):  # the offset of each entry's position within its row
            step //= out.shape[k]
            shape = [1] * rows.ndim
            shape[k] = rows.shape[k]
            base = base + np.arange(0, rows.shape[k] * step, step).reshape(shape)
        flat = rows * r + base
    try:
        np.add.at(out.reshape(-1), flat.reshape(-1), vals.reshape(-1) if hasattr(vals, "ndim") else vals)
    except (IndexError, ValueError):  # out of range, or sizes that do not fit
        return False
    return True


@primitive("scatter_add", save_inputs=True, nondiff_argnums=(1,), light=(0, 2))
def scatter_add_p(x, index, src, dim=0):
    out = x.copy()
    if dim == 0 and index.ndim == x.ndim and hasattr(src, "ndim") and src.ndim:
        if _LOOPS is not None and type(out) is np.ndarray and _LOOPS.rows_add(out, index, src):
            # the accelerator's loop straight on the call's arrays (1-D, or an expanded row
            # index of src's shape): what _rows_add_at below does, without its Python steps
            return out
        if _rows_add_at(out, index, _src_block(src, index)):
            return out
    o1, i1 = _as1d(out, index)
    try:
        np.add.at(o1, _along(i1, dim), _src_block(src, i1) if hasattr(src, "ndim") and src.ndim else src)
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    return out


def _src_grad(g, index, src, dim):
    """Gradient of a scatter's ``src``: gathered at ``index``, zero outside its block."""
    gs = gather_p(g, index, dim=dim)
    shape = tuple(src.shape)
    if tuple(gs.shape) == shape:
        return gs
    if len(shape) == 0:
        return _reshape(gs, ())
    spec = tuple((0, n, None) for n in index.shape)
    return getitem_backward_p(gs, shape=shape, index=spec)


def _reshape(a, shape):
    return reshape_p(a, shape=tuple(shape))


scatter_p.defvjp(lambda g, out, x, index, src, dim=0: scatter_p(g, index, 0.0, dim=dim), None,
                 lambda g, out, x, index, src, dim=0: _src_grad(g, index, src, dim))
scatter_add_p.defvjp(lambda g, out, x, index, src, dim=0: g, None,
                     lambda g, out, x, index, src, dim=0: _src_grad(g, index, src, dim))


_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


@primitive("scatter_reduce", save_inputs=True, save_output=True, nondiff_argnums=(1,))
def scatter_reduce_p(x, index, src, dim=0, reduce="sum", include_self=True):
    out = x.copy()
    o1, i1 = _as1d(out, index)
    sel = _along(i1, dim)
    s = _src_block(src, i1)
    if not include_self:
        ident = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        o1[sel] = ident
    if reduce == "mean":
        count = np.zeros(o1.shape, np.int64)
        np.add.at(count, sel, 1)
        np.add.at(o1, sel, s)
        count = count + (1 if include_self else 0)
        o1[...] = np.where(count > 0, o1 / np.maximum(count, 1), o1) if o1.dtype.kind == "f" else \
            o1 // np.maximum(count, 1)
    else:
        _REDUCE_UFUNC[reduce].at(o1, sel, s)
    return out


def _scatter_reduce_vjp(argnum, g, out, x, index, src, dim=0, reduce="sum", include_self=True):
    if argnum == 1:
        return None
    if reduce == "sum":
        if argnum == 0:
            return g if include_self else scatter_p(g, index, 0.0, dim=dim)
        return _src_grad(g, index, src, dim)
    i = _data(index)
    i1 = i.reshape(1) if i.ndim == 0 else i
    shape = tuple(x.shape)
    if reduce == "mean":
        # constant weights: 1 / (number of values averaged into each position)
        count = np.zeros(shape, _data(out).dtype)
        np.add.at(_x1(count), _along(i1, dim), 1.0)
        count = np.maximum(count + (1.0 if include_self else 0.0), 1.0)
        gn = g / count
        if argnum == 0:
            return gn if include_self else scatter_p(gn, index, 0.0, dim=dim)
        return _src_grad(gn, index, src, dim)
    if reduce in ("amax", "amin"):
        # the winners share the gradient evenly (PyTorch's rule for ties)
        o = _data(out)
        sel = _along(i1, dim)
        if include_self:
            hit_x = (_data(x) == o).astype(o.dtype)
        else:  # positions no index reaches keep x's value: x wins there
            hit_x = np.ones_like(o)
            _x1(hit_x)[sel] = 0.0
        hit_s = (_src_block(_data(src), i1) == _x1(o)[sel]).astype(o.dtype)
        n = hit_x.copy()
        np.add.at(_x1(n), sel, hit_s)
        n = np.maximum(n, 1.0)
        if argnum == 0:
            return g * (hit_x / n)
        w = (_x1(1.0 / n)[sel] * hit_s).reshape(i.shape)
        return _src_grad_fit(gather_p(g, index, dim=dim) * w, index, src)
    if reduce == "prod":
        return _scatter_prod_vjp(argnum, g, out, x, index, src, i, i1, dim, include_self)
    raise NotImplementedError(f"scatter_reduce: the derivative for reduce={reduce!r} is not implemented")


def _scatter_prod_vjp(argnum, g, out, x, index, src, i, i1, dim, include_self):
    xs = _data(x)
    blk = _src_block(_data(src), i1)
    zero_x = include_self and bool((xs == 0).any())
    if not zero_x and not bool((blk == 0).any()):
        # no zeros: d out / d c = out / c, written with ops (second order works)
        if argnum == 0:
            return g * out / x if include_self else scatter_p(g, index, 0.0, dim=dim)
        return _src_grad_fit(gather_p(g * out, index, dim=dim) / _src_block(src, i1), index, src)
    if isinstance(g, Tensor):
        raise NotImplementedError(
            "scatter_reduce(reduce='prod'): second-order gradients are not implemented when an "
            "input or source element is zero")
    # with zeros: the product of the *other* contributors, computed exactly
    sel = _along(i1, dim)
    nz = (xs == 0).astype(np.int64) if include_self else np.zeros(xs.shape, np.int64)
    pn = np.where(xs == 0, 1, xs) if include_self else np.ones_like(xs)
    np.add.at(_x1(nz), sel, (blk == 0).astype(np.int64))
    np.multiply.at(_x1(pn), sel, np.where(blk == 0, 1, blk))

    def weight(c, nzp, pnp):
        return np.where(c != 0, np.where(nzp == 0, pnp / np.where(c == 0, 1, c), 0),
                        np.where(nzp == 1, pnp, 0))

    if argnum == 0:
        return g * weight(xs, nz, pn) if include_self else scatter_p(g, index, 0.0, dim=dim)
    w = weight(blk, _x1(nz)[sel], _x1(pn)[sel]).reshape(i.shape)
    return _src_grad_fit(gather_p(g, index, dim=dim) * w, index, src)


def _src_grad_fit(gs, index, src):
    shape = tuple(src.shape)
    if tuple(gs.shape) == shape:
        return gs
    spec = tuple((0, n, None) for n in index.shape)
    return getitem_backward_p(gs, shape=shape, index=spec)


scatter_reduce_p.defvjp_argnum(_scatter_reduce_vjp)


# ---------------------------------------------------------------------------
# index_select / index_add / index_copy / index_fill
# ---------------------------------------------------------------------------

def _dim_sel(dim, index):
    return (slice(None),) * dim + (index,)


def _x1(x):
    return x.reshape(1) if x.ndim == 0 else x


@primitive("index_select", save_inputs=True, nondiff_argnums=(1,), light=(0,))
def index_select_p(x, index, dim=0):
    return np.take(_x1(x), index, axis=dim) if x.ndim else np.take(x.reshape(1), index).reshape(())


@primitive("index_select_backward", save_inputs=True, nondiff_argnums=(1,))
def index_select_backward_p(g, index, shape=(), dim=0):
    """Zeros of ``shape`` with ``g`` added along ``dim`` at ``index`` (vjp of index_select)."""
    z = _zeros(g, shape)
    z1 = _x1(z)
    np.add.at(z1, _dim_sel(dim, index), g.reshape(z1.shape[:dim] + (len(index),) + z1.shape[dim + 1:]))
    return z


index_select_p.defvjp(
    lambda g, out, x, index, dim=0: index_select_backward_p(g, index, shape=tuple(x.shape), dim=dim), None)
index_select_backward_p.defvjp(lambda g, out, gx, index, shape=(), dim=0: index_select_p(g, index, dim=dim),
                               None)


@primitive("index_add", save_inputs=True, nondiff_argnums=(1,), light=(0, 2))
def index_add_p(x, index, src, dim=0, alpha=1):
    s = src if alpha == 1 else src * alpha
    if dim == 0 and x.ndim and index.ndim == 1:
        out = x.copy()
        if _rows_add_at(out, index, s):
            return out
    out = x.copy()
    o1 = _x1(out)
    np.add.at(o1, _dim_sel(dim, index), s.reshape(o1.shape[:dim] + (len(index),) + o1.shape[dim + 1:]))
    return out


def _index_add_src(g, index, src, dim, alpha):
    gs = index_select_p(g, index, dim=dim)
    if tuple(gs.shape) != tuple(src.shape):
        gs = _reshape(gs, src.shape)
    return gs if alpha == 1 else gs * alpha


index_add_p.defvjp(lambda g, out, x, index, src, dim=0, alpha=1: g, None,
                   lambda g, out, x, index, src, dim=0, alpha=1: _index_add_src(g, index, src, dim, alpha))


@primitive("index_copy", save_inputs=True, nondiff_argnums=(1,), light=(0, 2))
def index_copy_p(x, index, src, dim=0):
    out = x.copy()
    o1 = _x1(out)
    o1[_dim_sel(dim, index)] = src.reshape(o1.shape[:dim] + (len(index),) + o1.shape[dim + 1:])
    return out


@primitive("index_fill", save_inputs=True, nondiff_argnums=(1,), light=(0, 2))
def index_fill_p(x, index, value, dim=0):
    out = x.copy()
    _x1(out)[_dim_sel(dim, index)] = value
    return out


def _unique_positions(index, n):
    i = _data(index)
    return np.unique(np.where(i < 0, i + n, i))


def _index_fill_value_grad(g, index, value, dim):
    n = g.shape[dim] if g.ndim else 1
    return sum_p(index_select_p(g, _unique_positions(index, n), dim=dim))


index_copy_p.defvjp(lambda g, out, x, index, src, dim=0: index_fill_p(g, index, 0.0, dim=dim), None,
                    lambda g, out, x, index, src, dim=0: _index_add_src(g, index, src, dim, 1))
index_fill_p.defvjp(lambda g, out, x, index, value, dim=0: index_fill_p(g, index, 0.0, dim=dim), None,
                    lambda g, out, x, index, value, dim=0: _index_fill_value_grad(g, index, value, dim))


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------

@primitive("masked_fill", save_inputs=True, broadcasts=True, nondiff_argnums=(1,),
           light=(0, 2))
def masked_fill_p(x, mask, value):
    v = value if not hasattr(value, "dtype") else value.astype(x.dtype, copy=False)
    return np.where(mask, np.asarray(v, dtype=x.dtype), x)


masked_fill_p.defvjp(lambda g, out, x, mask, value: masked_fill_p(g, mask, 0.0), None,
                     lambda g, out, x, mask, value: masked_fill_p(g, ~mask, 0.0))


# ---------------------------------------------------------------------------
# nonzero / sort / topk / kthvalue / unique / searchsorted / one_hot
# ---------------------------------------------------------------------------

@primitive("nonzero", differentiable=False)
def nonzero_p(x):
    return np.argwhere(x).astype(np.int64)


# ---------------------------------------------------------------------------
# in-place forms and Tensor methods
# ---------------------------------------------------------------------------


_ = _dt


@primitive("isin", differentiable=False)
def isin_p(elements, test_elements, invert=False):
    return np.isin(elements, test_elements, invert=invert)


@primitive("bincount", differentiable=False)
def bincount_p(x, weights=None, minlength=0):
    if weights is None:
        return np.bincount(x, minlength=minlength).astype(np.int64)
    return np.bincount(x, weights=weights, minlength=minlength).astype(weights.dtype)


@primitive("histc", differentiable=False)
def histc_p(x, bins=100, min=0.0, max=0.0):
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    counts, _ = np.histogram(x, bins=bins, range=(lo, hi))
    return counts.astype(x.dtype)


@primitive("one_hot", differentiable=False)
def one_hot_p(x, num_classes=-1):
    out = np.zeros(x.shape + (num_classes,), np.int64)
    np.put_along_axis(out, x[..., None], 1, axis=-1)
    return out


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_indexing():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    for name in ("scatter", "scatter_add", "scatter_reduce"):
        R[name].defbatch(b.gather_like)
    R["index_select"].defbatch(b.index_select_rule)
    for name in ("index_add", "index_copy", "index_fill"):
        R[name].defbatch(b.index_update_rule)
    R["masked_fill"].defbatch(b.elementwise)
    R["index"].defbatch(b.index_rule, eager_if=b.bool_index_shape)
    R["index_put"].defbatch(fallback="advanced indexing with per-member index tensors")
    R["isin"].defbatch(fallback="per-member test sets")
    for name in ("index_backward", "index_select_backward"):
        R[name].defbatch(fallback=b.BACKWARD_ONLY)
    for name in ("nonzero", "bincount", "one_hot", "histc"):
        R[name].defbatch(eager="the output shape (or range) depends on the values")


_defbatch_indexing()
