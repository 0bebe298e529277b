"""Resampling primitives: ``upsample_nearest`` (a gather along each spatial dimension) and
its adjoint ``upsample_nearest_adjoint``.  Linear, bilinear and bicubic interpolation are
products with interpolation matrices (``dyngraph.surface.resampling``), no primitive of
their own.
"""

from __future__ import annotations

import numpy as np

from .registry import primitive


@primitive("upsample_nearest", meta=True,
           torch_name=lambda p: f"UpsampleNearest{len(p['index'])}DBackward0")
def upsample_nearest_p(x, index=((0,),)):
    """Gather along each spatial dim: y[..., i, j] = x[..., index[0][i], index[1][j]]."""
    y = x
    for i, ix in enumerate(index):
        y = np.take(y, np.asarray(ix, dtype=np.intp), axis=2 + i)
    return y


@primitive("upsample_nearest_adjoint", meta=True)
def upsample_nearest_adjoint_p(g, index=((0,),), in_size=(1,)):
    """Transpose of ``upsample_nearest``: sums gradients of copies of the same source."""
    y = g
    for i, ix in enumerate(index):
        ix = np.asarray(ix, dtype=np.intp)
        axis = 2 + i
        shape = list(y.shape)
        shape[axis] = in_size[i]
        res = np.zeros(shape, dtype=g.dtype)
        if len(ix):
            # nearest indices are non-decreasing: runs of one source are contiguous
            starts = np.flatnonzero(np.r_[True, ix[1:] != ix[:-1]])
            sums = np.add.reduceat(y, starts, axis=axis)
            sel = [slice(None)] * y.ndim
            sel[axis] = ix[starts]
            res[tuple(sel)] = sums
        y = res
    return y


upsample_nearest_p.defvjp(
    lambda g, out, x, index: upsample_nearest_adjoint_p(g, index=index, in_size=tuple(x.shape[2:])))


upsample_nearest_adjoint_p.defvjp(
    lambda g, out, gy, index, in_size: upsample_nearest_p(g, index=index))


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_resampling():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    R["upsample_nearest"].defbatch(b.merge_leading(lambda prim, params, args: len(params["index"])))
    R["upsample_nearest_adjoint"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_resampling()
