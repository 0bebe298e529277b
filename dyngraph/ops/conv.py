"""Convolution, pooling and resampling primitives (1-d and 2-d, PyTorch semantics).

Convolution is three primitives that are each other's derivatives, so
gradients of any order are exact:

* ``conv``            y = conv(x, w) + b                      (im2col + GEMM)
* ``conv_transpose``  the adjoint of ``conv`` in its input      (GEMM + col2im)
* ``conv_weight``     the derivative of ``conv`` in its weight  (im2col + GEMM)

The implementations use a strided window view of the (padded) input, copy it
into an im2col matrix and call one batched ``np.matmul``.  The batch is
processed in chunks whose im2col matrix fits in the CPU cache (about 1 MiB):
measured, this is ~1.5x faster than one huge im2col matrix, because the GEMM
then reads the matrix from cache instead of memory.  There is no Python loop
over spatial positions; only over kernel offsets in col2im (``prod(kernel)``
strided adds) and over cache-sized chunks of the batch.

Pooling: ``max_pool`` (values and PyTorch's flat indices) with a scatter/gather
pair for its gradient, ``avg_pool`` with its adjoint, ``adaptive_max_pool``,
adaptive average pooling (as pooling matrices, or ``avg_pool`` when the
windows are regular), and ``interpolate`` (nearest / nearest-exact gathers,
linear / bilinear as separable interpolation matrices).

>>> x = dg.randn(8, 3, 28, 28, requires_grad=True)
>>> w = dg.randn(16, 3, 3, 3, requires_grad=True)
>>> dg.conv2d(x, w, padding=1).sum().backward()
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._gemm import active, matmul_batched
from ._util import compiled_kernels
from .reduction import sum_p
from .registry import primitive

# The compiled column matrices of 2-d convolution (dyngraph/_kernels.c im2col2d / col2im2d:
# each row read and written once, the padding as bounds; the same values and order of
# additions as the NumPy code below, which stays the reference), or None.
_K_COLS = compiled_kernels("im2col2d", "col2im2d")
_COLS_DT = (np.dtype(np.float32), np.dtype(np.float64))


def _cols_ok(x, k, padding) -> bool:
    """Whether :func:`_cols2d` takes ``x``: 2-d, float32/float64, C-contiguous, the same
    padding on both sides of each dimension (PyTorch's ``padding=``; "same" with an even
    kernel pads unevenly and stays on the NumPy path)."""
    return (_K_COLS is not None and len(k) == 2 and x.dtype in _COLS_DT and x.flags.c_contiguous
            and padding[0][0] == padding[0][1] and padding[1][0] == padding[1][1])


def _cols2d(x, k, stride, padding, dilation, out, buf):
    """im2col of ``x`` (N, C, H, W) by the kernel into ``buf[:N]`` (C, kh, kw, OH, OW per
    sample; :func:`_cols_ok` holds)."""
    cols = buf[:x.shape[0]]
    if not _K_COLS.im2col2d(x, cols, k[0], k[1], stride[0], stride[1], padding[0][0],
                            padding[1][0], dilation[0], dilation[1]):
        raise AssertionError("im2col2d declined an input _cols_ok accepted")  # a bug, not input
    return cols

_CHUNK_BYTES = 1 << 20  # im2col chunk that stays in cache (measured: 1 MiB is best)
# Bound on one sample's im2col (or col2im) matrix.  Above it, each sample is processed in
# tiles of output rows of at most this size (one output row at least), so peak memory
# grows by O(_TILE_BYTES) instead of C * prod(kernel) * prod(out) * itemsize: a 7x7
# kernel on a 16 MiB image needed 781 MiB of columns at once, an 11x11 kernel on
# (1, 64, 1024, 1024) 29.7 GiB.  Convolutions below it keep the single-shot path.
_TILE_BYTES = 16 << 20


def _prod(xs) -> int:
    p = 1
    for v in xs:
        p *= int(v)
    return p


def _chunk(n: int, item_bytes: int) -> int:
    return max(1, min(n, _CHUNK_BYTES // max(item_bytes, 1))) if n else 1


def _row_tiles(n_rows: int, row_bytes: int):
    """``(r0, r1)`` bounds of row tiles whose im2col has at most ``_TILE_BYTES``."""
    rows = max(1, _TILE_BYTES // max(row_bytes, 1))
    return [(r, min(r + rows, n_rows)) for r in range(0, n_rows, rows)]


def _row_cols(xp, s, r0, r1, k, stride, dilation, out):
    """im2col of sample ``s``, output rows ``r0:r1``: (1, C, *kernel, r1 - r0, *out[1:])."""
    lo = r0 * stride[0]
    hi = (r1 - 1) * stride[0] + dilation[0] * (k[0] - 1) + 1
    xs = xp[s:s + 1, :, lo:hi]
    return np.ascontiguousarray(_windows(xs, k, stride, dilation, (r1 - r0,) + tuple(out[1:])))


def _pad(x, pads, value=0.0, extra=None):
    """Pad the spatial dims of ``x`` by ``pads`` ((lo, hi) per dim); ``extra`` grows hi."""
    if extra is None:
        extra = (0,) * len(pads)
    if all(lo == 0 and hi == 0 for lo, hi in pads) and not any(extra):
        return x
    sp = x.shape[2:]
    shape = x.shape[:2] + tuple(s + lo + hi + e for s, (lo, hi), e in zip(sp, pads, extra, strict=True))
    xp = np.full(shape, value, dtype=x.dtype) if value != 0.0 else np.zeros(shape, x.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(sp, pads, strict=True))] = x
    return xp


def _windows(xp, kernel, stride, dilation, out, kernel_first=True):
    """Read-only strided view (N, C, *kernel, *out) (or (N, C, *out, *kernel)) of ``xp``."""
    s = xp.strides
    sp = s[2:]
    kshape = tuple(kernel)
    kstr = tuple(sp[i] * dilation[i] for i in range(len(kernel)))
    oshape = tuple(out)
    ostr = tuple(sp[i] * stride[i] for i in range(len(kernel)))
    if kernel_first:
        return as_strided(xp, xp.shape[:2] + kshape + oshape, s[:2] + kstr + ostr, writeable=False)
    return as_strided(xp, xp.shape[:2] + oshape + kshape, s[:2] + ostr + kstr, writeable=False)


def _conv_out(size, k, s, pad, d):
    return tuple((size[i] + pad[i][0] + pad[i][1] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                 for i in range(len(size)))


# ---------------------------------------------------------------------------
# convolution primitives
# ---------------------------------------------------------------------------

@primitive("conv", save_inputs=True, torch_name="ConvolutionBackward0")
def conv_p(x, w, b, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    """N-d cross-correlation (PyTorch's convolution) on arrays."""
    n, c = x.shape[:2]
    o = w.shape[0]
    k = w.shape[2:]
    out = _conv_out(x.shape[2:], k, stride, padding, dilation)
    if any(v <= 0 for v in out):
        raise RuntimeError(
            f"conv: the kernel size (dilated: {[dilation[i] * (k[i] - 1) + 1 for i in range(len(k))]}) "
            f"is larger than the padded input ({[x.shape[2 + i] + sum(padding[i]) for i in range(len(k))]}); "
            "use a smaller kernel or more padding")
    g = groups
    cg, og, kk, L = c // g, o // g, _prod(k), _prod(out)
    fast = _cols_ok(x, k, padding)
    xp = None if fast else _pad(x, padding)
    wm = w.reshape(g, og, cg * kk)
    y = np.empty((n, o, L), dtype=np.result_type(x.dtype, w.dtype))
    yv = y.reshape(n, g, og, L)
    nb = _chunk(n, c * kk * L * x.itemsize)
    bias = None if b is None else b.reshape(g, og, 1)
    if c * kk * L * x.itemsize > _TILE_BYTES:  # large image: tiles of output rows
        xp = _pad(x, padding) if xp is None else xp
        rest = _prod(out[1:])
        ys = y.reshape((n, g, og, out[0], rest))
        for s in range(n):
            for r0, r1 in _row_tiles(out[0], c * kk * rest * x.itemsize):
                cols = _row_cols(xp, s, r0, r1, k, stride, dilation, out)
                yt = np.matmul(wm, cols.reshape(g, cg * kk, (r1 - r0) * rest))
                if bias is not None:
                    yt += bias
                ys[s, :, :, r0:r1] = yt.reshape(g, og, r1 - r0, rest)
        return y.reshape((n, o) + out)
    buf = np.empty((nb, c) + tuple(k) + tuple(out), x.dtype) if fast else None
    for s0 in range(0, n, nb):
        if fast:
            cols = _cols2d(x[s0:s0 + nb], k, stride, padding, dilation, out, buf)
        else:
            cols = np.ascontiguousarray(_windows(xp[s0:s0 + nb], k, stride, dilation, out))
        yc = yv[s0:s0 + nb]
        if g == 1:   # one product per sample (MKL's, where ops/_gemm.py has it)
            matmul_batched(wm[0], cols.reshape(-1, cg * kk, L), yc.reshape(-1, og, L))
        else:
            np.matmul(wm, cols.reshape(-1, g, cg * kk, L), out=yc)
        if bias is not None:
            yc += bias          # while the chunk is still in cache
    return y.reshape((n, o) + out)


@primitive("conv_transpose", save_inputs=True, torch_name="ConvolutionBackward0")
def conv_transpose_p(x, w, b, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1,
                     output_size=(1,)):
    """N-d transposed convolution: the adjoint of ``conv`` in its input (GEMM + col2im)."""
    n, cin = x.shape[:2]
    sp_in = x.shape[2:]
    k = w.shape[2:]
    g = groups
    cin_g, cout_g = cin // g, w.shape[1]
    cout = cout_g * g
    kk, L = _prod(k), _prod(sp_in)
    nd = len(k)
    full = tuple(max(output_size[i] + padding[i][0],
                     (sp_in[i] - 1) * stride[i] + dilation[i] * (k[i] - 1) + 1) for i in range(nd))
    dtype = np.result_type(x.dtype, w.dtype)
    compiled = (_K_COLS is not None and nd == 2 and dtype in _COLS_DT and w.dtype == dtype
                and x.dtype == dtype and padding[0][0] == padding[0][1]
                and padding[1][0] == padding[1][1]
                and cout * kk * L * x.itemsize <= _TILE_BYTES)
    buf = None if compiled else np.zeros((n, cout) + full, dtype=dtype)
    # weight rows ordered (kernel offset, out channel): each offset's block of the GEMM
    # result is then contiguous, which makes the col2im adds ~5% faster (measured)
    wm = np.ascontiguousarray(w.reshape(g, cin_g, cout_g, kk).transpose(0, 3, 2, 1))
    wm = wm.reshape(g, kk * cout_g, cin_g)
    xv = x.reshape(n, g, cin_g, L)
    offsets = list(itertools.product(*(range(kd) for kd in k)))
    slices = [tuple(slice(ki * dilation[i], ki * dilation[i] + stride[i] * (sp_in[i] - 1) + 1, stride[i])
                    for i, ki in enumerate(off)) for off in offsets]
    bv = None if compiled else buf.reshape((n, g, cout_g) + full)
    if cout * kk * L * x.itemsize > _TILE_BYTES:  # large image: tiles of input rows
        rest = _prod(sp_in[1:])
        xr = x.reshape((n, g, cin_g, sp_in[0], rest))
        for s in range(n):
            for r0, r1 in _row_tiles(sp_in[0], cout * kk * rest * x.itemsize):
                xt = np.ascontiguousarray(xr[s, :, :, r0:r1]).reshape(g, cin_g, (r1 - r0) * rest)
                dc = np.matmul(wm, xt).reshape((g, kk, cout_g, r1 - r0) + tuple(sp_in[1:]))
                bc = bv[s]
                for j, off in enumerate(offsets):
                    lo = off[0] * dilation[0] + r0 * stride[0]
                    sl = (slice(lo, lo + stride[0] * (r1 - r0 - 1) + 1, stride[0]),) + slices[j][1:]
                    bc[(slice(None), slice(None)) + sl] += dc[:, j]
    elif compiled:
        # the compiled col2im writes each chunk's sums straight into the cropped output (the
        # same additions in the same order as the loop below, without the padded buffer)
        y = np.empty((n, cout) + tuple(output_size), dtype)
        yg = y.reshape((n * g, cout_g) + tuple(output_size))
        nb = _chunk(n, cout * kk * L * x.itemsize)
        for s0 in range(0, n, nb):
            xs = xv[s0:s0 + nb]
            if g == 1:
                dc = matmul_batched(wm[0], xs[:, 0], np.empty((xs.shape[0], kk * cout_g, L), dtype))
            else:
                dc = np.matmul(wm, xs)
            dc = dc.reshape((-1, kk, cout_g) + tuple(sp_in))
            _K_COLS.col2im2d(dc, yg[s0 * g:(s0 + nb) * g], k[0], k[1], stride[0], stride[1],
                             padding[0][0], padding[1][0], dilation[0], dilation[1])
        if b is not None:
            y += b.reshape((-1,) + (1,) * nd)
        return y
    else:
        nb = _chunk(n, cout * kk * L * x.itemsize)
        for s0 in range(0, n, nb):
            dc = np.matmul(wm, xv[s0:s0 + nb]).reshape((-1, g, kk, cout_g) + tuple(sp_in))
            bc = bv[s0:s0 + nb]
            for j, sl in enumerate(slices):
                bc[(slice(None), slice(None), slice(None)) + sl] += dc[:, :, j]
    y = buf[(slice(None), slice(None)) + tuple(slice(padding[i][0], padding[i][0] + output_size[i])
                                              for i in range(nd))]
    y = np.ascontiguousarray(y)
    if b is not None:
        y += b.reshape((-1,) + (1,) * nd)
    return y


@primitive("conv_weight", save_inputs=True)
def conv_weight_p(x, gy, kernel_size=(1,), stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    """Gradient of ``conv`` with respect to its weight: sum over the batch of gy @ im2col(x)^T."""
    n, c = x.shape[:2]
    o = gy.shape[1]
    k = tuple(kernel_size)
    out = gy.shape[2:]
    g = groups
    cg, og, kk, L = c // g, o // g, _prod(k), _prod(out)
    fast = _cols_ok(x, k, padding)
    xp = None if fast else _pad(x, padding)
    gv = gy.reshape(n, g, og, L)
    # accumulate dw^T = im2col(x) @ gy^T: measured ~15% faster with OpenBLAS than gy @ im2col^T
    dwt = np.zeros((g, cg * kk, og), dtype=np.result_type(x.dtype, gy.dtype))
    if c * kk * L * x.itemsize > _TILE_BYTES:  # large image: tiles of output rows
        xp = _pad(x, padding) if xp is None else xp
        rest = _prod(out[1:])
        gr = gy.reshape((n, g, og, out[0], rest))
        for s in range(n):
            for r0, r1 in _row_tiles(out[0], c * kk * rest * x.itemsize):
                cols = _row_cols(xp, s, r0, r1, k, stride, dilation, out)
                gt = np.ascontiguousarray(gr[s, :, :, r0:r1]).reshape(g, og, (r1 - r0) * rest)
                dwt += np.matmul(cols.reshape(g, cg * kk, (r1 - r0) * rest), gt.transpose(0, 2, 1))
        return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape((o, cg) + k)
    nb = _chunk(n, c * kk * L * x.itemsize)
    buf = np.empty((nb, c) + tuple(k) + tuple(out), x.dtype) if fast else None
    for s0 in range(0, n, nb):
        if fast:
            cols = _cols2d(x[s0:s0 + nb], k, stride, padding, dilation, out, buf)
        else:
            cols = np.ascontiguousarray(_windows(xp[s0:s0 + nb], k, stride, dilation, out))
        cols = cols.reshape(-1, g, cg * kk, L)
        gt = gv[s0:s0 + nb].transpose(0, 1, 3, 2)
        if g == 1 and active():   # MKL per sample (ops/_gemm.py), summed in sample order
            part = matmul_batched(cols[:, 0], gt[:, 0], np.empty((cols.shape[0], cg * kk, og),
                                                                 dwt.dtype))[:, None]
        else:
            part = np.matmul(cols, gt)
        dwt += part[0] if part.shape[0] == 1 else part.sum(0)
    return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape((o, cg) + k)


def _size(x):
    return tuple(int(s) for s in x.shape)


def _bias_grad(g):
    return sum_p(g, dim=(0,) + tuple(range(2, g.ndim)))


conv_p.defvjp(
    lambda g, out, x, w, b, stride, padding, dilation, groups: conv_transpose_p(
        g, w, None, stride=stride, padding=padding, dilation=dilation, groups=groups,
        output_size=_size(x)[2:]),
    lambda g, out, x, w, b, stride, padding, dilation, groups: conv_weight_p(
        x, g, kernel_size=_size(w)[2:], stride=stride, padding=padding, dilation=dilation,
        groups=groups),
    lambda g, out, x, w, b, stride, padding, dilation, groups: _bias_grad(g),
)

conv_transpose_p.defvjp(
    lambda g, out, x, w, b, stride, padding, dilation, groups, output_size: conv_p(
        g, w, None, stride=stride, padding=padding, dilation=dilation, groups=groups),
    lambda g, out, x, w, b, stride, padding, dilation, groups, output_size: conv_weight_p(
        g, x, kernel_size=_size(w)[2:], stride=stride, padding=padding, dilation=dilation,
        groups=groups),
    lambda g, out, x, w, b, stride, padding, dilation, groups, output_size: _bias_grad(g),
)

conv_weight_p.defvjp(
    lambda g, out, x, gy, kernel_size, stride, padding, dilation, groups: conv_transpose_p(
        gy, g, None, stride=stride, padding=padding, dilation=dilation, groups=groups,
        output_size=_size(x)[2:]),
    lambda g, out, x, gy, kernel_size, stride, padding, dilation, groups: conv_p(
        x, g, None, stride=stride, padding=padding, dilation=dilation, groups=groups),
)


# ---------------------------------------------------------------------------
# unfold (im2col) and fold (col2im): linear maps, each other's adjoint
# ---------------------------------------------------------------------------

@primitive("unfold", meta=True, torch_name="Im2ColBackward0")
def unfold_p(x, kernel_size=(1, 1), dilation=(1, 1), padding=((0, 0), (0, 0)), stride=(1, 1)):
    """Sliding blocks of ``x`` (N, C, H, W) as columns (N, C * kH * kW, L)."""
    out = _conv_out(x.shape[2:], kernel_size, stride, padding, dilation)
    cols = np.ascontiguousarray(_windows(_pad(x, padding), kernel_size, stride, dilation, out))
    return cols.reshape(x.shape[0], x.shape[1] * _prod(kernel_size), _prod(out))


@primitive("fold", meta=True, torch_name="Col2ImBackward0")
def fold_p(cols, output_size=(1, 1), kernel_size=(1, 1), dilation=(1, 1),
           padding=((0, 0), (0, 0)), stride=(1, 1)):
    """Sum columns (N, C * kH * kW, L) back into an (N, C, *output_size) image (col2im)."""
    nd = len(kernel_size)
    blocks = _conv_out(output_size, kernel_size, stride, padding, dilation)
    n = cols.shape[0]
    c = cols.shape[1] // _prod(kernel_size)
    full = tuple(output_size[i] + padding[i][0] + padding[i][1] for i in range(nd))
    buf = np.zeros((n, c) + full, dtype=cols.dtype)
    dc = cols.reshape((n, c) + tuple(kernel_size) + blocks)
    for off in itertools.product(*(range(k) for k in kernel_size)):
        sl = tuple(slice(o * dilation[i], o * dilation[i] + stride[i] * (blocks[i] - 1) + 1, stride[i])
                   for i, o in enumerate(off))
        buf[(slice(None), slice(None)) + sl] += dc[(slice(None), slice(None)) + off]
    crop = tuple(slice(padding[i][0], padding[i][0] + output_size[i]) for i in range(nd))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])


unfold_p.defvjp(lambda g, out, x, **kw: fold_p(g, output_size=tuple(x.shape[2:]), **kw))
fold_p.defvjp(lambda g, out, cols, output_size, **kw: unfold_p(g, **kw))


# ---------------------------------------------------------------------------
# argument handling shared by the public functions
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# max pooling
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# average pooling (a linear map and its adjoint)
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# adaptive pooling
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# resampling: nearest (a gather and its adjoint), linear (interpolation matrices)
# ---------------------------------------------------------------------------


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_conv():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    by_weight = b.merge_leading(lambda prim, params, args: args[1]._data.ndim - 2)
    R["conv"].defbatch(by_weight)
    R["conv_transpose"].defbatch(by_weight)
    R["unfold"].defbatch(fallback="column layout of (N, C*k, L) differs by rank")
    R["fold"].defbatch(fallback="column layout of (N, C*k, L) differs by rank")
    R["conv_weight"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_conv()
