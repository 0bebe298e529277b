"""Sorting primitives: ``sort``, ``topk``, ``kthvalue``, ``unique``, ``unique_consecutive``,
``searchsorted``.

Values and indices come out together (``n_outputs``); the gradient of a sort-like
primitive scatters into zeros through the indexing family's ``gather_backward``.
"""

from __future__ import annotations

import numpy as np

from .indexing import _x1
from .registry import primitive
from .structural import gather_backward_p


def _argsort_np(x, dim, descending, stable):
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    n = x.shape[dim]
    flipped = np.flip(x, dim)
    idx = np.flip(np.argsort(flipped, axis=dim, kind="stable"), dim)
    return (n - 1) - idx


@primitive("sort", meta=True, save_output=True, n_outputs=2)
def sort_p(x, dim=-1, descending=False, stable=False):
    x1 = _x1(x)
    idx = _argsort_np(x1, dim, descending, stable)
    vals = np.take_along_axis(x1, idx, axis=dim)
    return vals.reshape(x.shape), idx.astype(np.int64).reshape(x.shape)


def _sort_vjp(g, out, x, dim=-1, descending=False, stable=False):
    return gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim)


sort_p.defvjp(_sort_vjp)


@primitive("topk", meta=True, save_output=True, n_outputs=2)
def topk_p(x, k=1, dim=-1, largest=True, sorted=True):
    x1 = _x1(x)
    idx = _argsort_np(x1, dim, largest, True)
    idx = np.take(idx, np.arange(k), axis=dim)
    vals = np.take_along_axis(x1, idx, axis=dim)
    if x.ndim == 0:
        return vals.reshape(()), idx.astype(np.int64).reshape(())
    return vals, idx.astype(np.int64)


topk_p.defvjp(lambda g, out, x, k=1, dim=-1, largest=True, sorted=True:
              gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim))


@primitive("kthvalue", meta=True, save_output=True, n_outputs=2)
def kthvalue_p(x, k=1, dim=-1):
    """The k-th smallest along ``dim`` (kept as a size-1 dimension) and its index."""
    x1 = _x1(x)
    idx = np.take(np.argsort(x1, axis=dim, kind="stable"), [k - 1], axis=dim)
    vals = np.take_along_axis(x1, idx, axis=dim)
    if x.ndim == 0:
        return vals.reshape(()), idx.astype(np.int64).reshape(())
    return vals, idx.astype(np.int64)


kthvalue_p.defvjp(lambda g, out, x, k=1, dim=-1: gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim))


@primitive("unique", differentiable=False, n_outputs=3)
def unique_p(x, dim=None):
    if dim is None:
        vals, inv, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(x.shape)
    else:
        vals, inv, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    return vals, inv.astype(np.int64), counts.astype(np.int64)


@primitive("searchsorted", differentiable=False)
def searchsorted_p(seq, values, right=False, out_int32=False):
    side = "right" if right else "left"
    if seq.ndim <= 1:
        res = np.searchsorted(seq, values, side=side)
    else:
        lead = seq.shape[:-1]
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = values.reshape(s2.shape[0], -1)
        res = np.stack([np.searchsorted(s2[r], v2[r], side=side) for r in range(s2.shape[0])])
        res = res.reshape(lead + values.shape[-1:])
    return np.asarray(res, dtype=np.int32 if out_int32 else np.int64)


@primitive("unique_consecutive", n_outputs=3, differentiable=False)
def unique_consecutive_p(x, dim=None):
    if dim is None:
        flat = x.reshape(-1)
        change = np.ones(flat.shape[0], dtype=bool)
        change[1:] = flat[1:] != flat[:-1]
        values = flat[change]
        inverse = (np.cumsum(change) - 1).reshape(x.shape)
    else:
        moved = np.moveaxis(x, dim, 0)
        rows = moved.reshape(moved.shape[0], -1)
        change = np.ones(rows.shape[0], dtype=bool)
        change[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        values = np.moveaxis(moved[change], 0, dim)
        inverse = np.cumsum(change) - 1
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, change.shape[0]))
    return values, inverse.astype(np.int64), counts.astype(np.int64)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_sorting():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    for name in ("sort", "topk", "kthvalue"):
        R[name].defbatch(b.shift_dim)
    R["searchsorted"].defbatch(fallback="per-member sorted sequences")
    for name in ("unique", "unique_consecutive"):
        R[name].defbatch(eager="the output shape (or range) depends on the values")


_defbatch_sorting()
