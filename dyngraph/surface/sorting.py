"""The PyTorch surface of sorting: ``sort``/``argsort``/``msort``, ``topk``, ``kthvalue``,
``unique``/``unique_consecutive``, ``searchsorted``/``bucketize`` and ``quantile``.

The primitives are in :mod:`dyngraph.ops.sorting`; :mod:`dyngraph.surface.methods`
attaches the Tensor methods.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import return_types as _rt
from ..creation import from_numpy
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..ops.registry import bind
from ..ops.sorting import (
    kthvalue_p,
    searchsorted_p,
    sort_p,
    topk_p,
    unique_consecutive_p,
    unique_p,
)
from ..tensor import Tensor, _wrap_dim
from ._args import as_tensor_arg
from .elementwise import where
from .indexing import (
    concrete,
    gather,
    index_select,
)
from .shape import movedim, reshape

__all__ = [
    "sort", "argsort", "msort", "topk", "kthvalue", "unique", "unique_consecutive", "searchsorted",
    "bucketize", "quantile",
]


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Sorted values and their original indices along ``dim`` (``return_types.sort``).

    NaN sorts as the largest value, as in PyTorch.

    >>> dg.sort(dg.tensor([3., 1., 2.])).indices
    tensor([1, 2, 0])
    """
    input = as_tensor_arg(input, "sort")
    d = _wrap_dim(dim, input._data.ndim, "sort")
    v, i = bind(sort_p, (input,), {"dim": d, "descending": bool(descending), "stable": bool(stable)})
    return _rt.sort(v, i)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Indices that sort ``input`` along ``dim``."""
    return sort(input, dim, descending, stable).indices


def msort(input):
    return sort(input, 0).values


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The ``k`` largest (or smallest) values along ``dim`` and their indices (``return_types.topk``).

    >>> dg.topk(dg.tensor([1., 5., 3.]), 2)
    """
    input = as_tensor_arg(input, "topk")
    d = _wrap_dim(dim, input._data.ndim, "topk")
    n = input._data.shape[d] if input._data.ndim else 1
    k = operator.index(k)
    if not 0 <= k <= n:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, size of dimension {d} is {n})")
    v, i = bind(topk_p, (input,), {"k": k, "dim": d, "largest": bool(largest), "sorted": bool(sorted)})
    return _rt.topk(v, i)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest value along ``dim`` and its index (``return_types.kthvalue``)."""
    input = as_tensor_arg(input, "kthvalue")
    d = _wrap_dim(dim, input._data.ndim, "kthvalue")
    n = input._data.shape[d] if input._data.ndim else 1
    k = operator.index(k)
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d} (k={k}, size {n})")
    v, i = bind(kthvalue_p, (input,), {"k": k, "dim": d})
    if not keepdim and input._data.ndim:
        shape = input._data.shape[:d] + input._data.shape[d + 1:]
        v, i = v.reshape(shape), i.reshape(shape)
    return _rt.kthvalue(v, i)


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """The distinct values of ``input`` (sorted), optionally with inverse indices and counts.

    >>> dg.unique(dg.tensor([2, 1, 2]), return_counts=True)
    (tensor([1, 2]), tensor([1, 2]))
    """
    input = as_tensor_arg(input, "unique")
    params = {} if dim is None else {"dim": _wrap_dim(dim, input._data.ndim, "unique")}
    vals, inv, counts = bind(unique_p, (input,), params)
    if not return_inverse and not return_counts:
        return vals
    out = (vals,)
    if return_inverse:
        out += (inv,)
    if return_counts:
        out += (counts,)
    return out


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,
                 side=None, sorter=None):
    """Insertion indices of ``input`` into ``sorted_sequence`` (innermost dimension).

    >>> dg.searchsorted(dg.tensor([1, 3, 5]), dg.tensor([3, 6]))
    tensor([1, 3])
    """
    seq = as_tensor_arg(sorted_sequence, "searchsorted")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side "
                               "of left while right was True")
        right = side == "right"
    if sorter is not None:
        sorter = as_tensor_arg(sorter, "searchsorted")
        seq = gather(seq, -1, sorter) if seq._data.ndim else seq
    scalar = not isinstance(input, Tensor)
    vals = as_tensor_arg(input, "searchsorted")
    if seq._data.ndim > 1 and seq._data.shape[:-1] != vals._data.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
            f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(seq.shape)} and input value tensor {list(vals.shape)}")
    out = bind(searchsorted_p, (seq, vals), {"right": bool(right), "out_int32": bool(out_int32)})
    return out.reshape(()) if scalar and out._data.ndim else out


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """Bucket index of each element of ``input`` for the 1-D ``boundaries``
    (``right=False``: ``boundaries[i-1] < x <= boundaries[i]``)."""
    boundaries = as_tensor_arg(boundaries, "bucketize")
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    vals = as_tensor_arg(input, "bucketize")
    return bind(searchsorted_p, (boundaries, vals), {"right": bool(right), "out_int32": bool(out_int32)})


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The ``q``-th quantiles of ``input`` along ``dim`` (all elements when None).

    ``q`` is a number or a 1-D tensor of numbers in [0, 1]; with a tensor, the quantiles
    form a new leading dimension.  Built from ``sort`` and ``index_select``, so it is
    differentiable; a slice holding NaN gives NaN, as in PyTorch.

    >>> dg.quantile(dg.tensor([1., 2., 3., 4.]), 0.5)
    tensor(2.5000)
    """
    x = as_tensor_arg(input, "quantile")
    if not _is_float_dtype(x._data.dtype):
        raise RuntimeError(f"quantile() input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_QUANTILE_MODES)}. "
                         f"Got '{interpolation}'")
    scalar_q = not isinstance(q, Tensor)
    qs = np.atleast_1d(np.asarray(concrete(q, "quantile: q values become positions")
                                  if isinstance(q, Tensor) else q, dtype=np.float64))
    if qs.ndim > 1:
        raise RuntimeError(f"quantile() q must be a scalar or 1D tensor, got shape {list(qs.shape)}")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    shape = tuple(x.shape)
    if dim is None:
        flat, d = reshape(x, -1), 0
    else:
        d = _wrap_dim(dim, max(x.ndim, 1), "quantile")
        flat = x if x.ndim else reshape(x, 1)
    rows = movedim(flat, d, -1)                                 # (..., n)
    n = rows.shape[-1]
    if n == 0:
        raise IndexError("quantile() input tensor must be non-empty")
    srt = sort(rows, -1).values
    pos = qs * (n - 1)
    lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    elif interpolation == "nearest":
        lo = hi = np.round(pos).astype(np.int64)
    v_lo = index_select(srt, -1, from_numpy(lo))              # (..., len(q))
    v_hi = index_select(srt, -1, from_numpy(hi))
    if interpolation == "midpoint":
        out = v_lo + (v_hi - v_lo) * 0.5
    elif interpolation == "linear":
        frac = (pos - lo).astype(x._data.dtype)
        out = v_lo + (v_hi - v_lo) * Tensor._make(frac, False, None, 0)
    else:
        out = v_lo
    if np.isnan(concrete(rows, "quantile: NaN rows give NaN")).any():
        out = where(rows.isnan().any(-1, keepdim=True), float("nan"), out)
    out = movedim(out, -1, 0)                                   # (len(q), ...)
    if keepdim:
        kept = [1] * len(shape) if dim is None else [1 if i == d else s for i, s in enumerate(shape)]
        out = reshape(out, len(qs), *kept)
    return reshape(out, tuple(out.shape[1:])) if scalar_q else out


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse runs of equal consecutive elements (or slices along ``dim``), like
    ``itertools.groupby``; optionally the run index of each input element and run lengths.

    >>> dg.unique_consecutive(dg.tensor([1, 1, 2, 2, 3, 1]))
    tensor([1, 2, 3, 1])
    """
    x = as_tensor_arg(input, "unique_consecutive")
    d = None if dim is None else _wrap_dim(dim, x.ndim, "unique_consecutive")
    values, inverse, counts = bind(unique_consecutive_p, (x,), {"dim": d})
    if not return_inverse and not return_counts:
        return values
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out
