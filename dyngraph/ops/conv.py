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
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..tensor import Tensor
from ._util import as_tensor_arg
from .registry import bind, primitive

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
]

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
    xp = _pad(x, padding)
    wm = w.reshape(g, og, cg * kk)
    y = np.empty((n, o, L), dtype=np.result_type(x.dtype, w.dtype))
    yv = y.reshape(n, g, og, L)
    nb = _chunk(n, c * kk * L * x.itemsize)
    bias = None if b is None else b.reshape(g, og, 1)
    if c * kk * L * x.itemsize > _TILE_BYTES:  # large image: tiles of output rows
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
    for s0 in range(0, n, nb):
        cols = np.ascontiguousarray(_windows(xp[s0:s0 + nb], k, stride, dilation, out))
        yc = yv[s0:s0 + nb]
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
    buf = np.zeros((n, cout) + full, dtype=dtype)
    # weight rows ordered (kernel offset, out channel): each offset's block of the GEMM
    # result is then contiguous, which makes the col2im adds ~5% faster (measured)
    wm = np.ascontiguousarray(w.reshape(g, cin_g, cout_g, kk).transpose(0, 3, 2, 1))
    wm = wm.reshape(g, kk * cout_g, cin_g)
    xv = x.reshape(n, g, cin_g, L)
    offsets = list(itertools.product(*(range(kd) for kd in k)))
    slices = [tuple(slice(ki * dilation[i], ki * dilation[i] + stride[i] * (sp_in[i] - 1) + 1, stride[i])
                    for i, ki in enumerate(off)) for off in offsets]
    bv = buf.reshape((n, g, cout_g) + full)
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
    xp = _pad(x, padding)
    gv = gy.reshape(n, g, og, L)
    # accumulate dw^T = im2col(x) @ gy^T: measured ~15% faster with OpenBLAS than gy @ im2col^T
    dwt = np.zeros((g, cg * kk, og), dtype=np.result_type(x.dtype, gy.dtype))
    if c * kk * L * x.itemsize > _TILE_BYTES:  # large image: tiles of output rows
        rest = _prod(out[1:])
        gr = gy.reshape((n, g, og, out[0], rest))
        for s in range(n):
            for r0, r1 in _row_tiles(out[0], c * kk * rest * x.itemsize):
                cols = _row_cols(xp, s, r0, r1, k, stride, dilation, out)
                gt = np.ascontiguousarray(gr[s, :, :, r0:r1]).reshape(g, og, (r1 - r0) * rest)
                dwt += np.matmul(cols.reshape(g, cg * kk, (r1 - r0) * rest), gt.transpose(0, 2, 1))
        return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape((o, cg) + k)
    nb = _chunk(n, c * kk * L * x.itemsize)
    for s0 in range(0, n, nb):
        cols = np.ascontiguousarray(_windows(xp[s0:s0 + nb], k, stride, dilation, out))
        cols = cols.reshape(-1, g, cg * kk, L)
        part = np.matmul(cols, gv[s0:s0 + nb].transpose(0, 1, 3, 2))
        dwt += part[0] if part.shape[0] == 1 else part.sum(0)
    return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape((o, cg) + k)


def _size(x):
    return tuple(int(s) for s in x.shape)


def _bias_grad(g):
    from .reduction import sum_p  # noqa: PLC0415

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


def _fold_params(op, kernel_size, dilation, padding, stride):
    k = _tuple(kernel_size, 2, "kernel_size", op)
    d = _tuple(dilation, 2, "dilation", op)
    p = _tuple(padding, 2, "padding", op)
    s = _tuple(stride, 2, "stride", op)
    if any(v <= 0 for v in k + d + s) or any(v < 0 for v in p):
        raise RuntimeError(
            f"{op}: kernel_size, dilation and stride must be positive and padding non-negative "
            f"(kernel_size={k}, dilation={d}, padding={p}, stride={s})")
    return {"kernel_size": k, "dilation": d, "padding": tuple((v, v) for v in p), "stride": s}


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks: (N, C, H, W) -> (N, C * prod(kernel_size), L) (im2col).

    >>> dg.nn.functional.unfold(dg.randn(1, 2, 4, 4), 2).shape
    dyngraph.Size([1, 8, 9])
    """
    op = "unfold"
    input = as_tensor_arg(input, op)
    if input._data.ndim not in (3, 4):
        raise NotImplementedError(
            f"{op}: Input Error: Only 3D or 4D input Tensors are supported (got {input._data.ndim}D "
            f"input of shape {list(input.shape)})")
    input, added = _batchify(op, input, 2)
    params = _fold_params(op, kernel_size, dilation, padding, stride)
    out = _conv_out(_size(input)[2:], params["kernel_size"], params["stride"], params["padding"],
                    params["dilation"])
    if any(v <= 0 for v in out):
        raise RuntimeError(
            f"{op}: the kernel (with dilation) does not fit in the padded input of shape "
            f"{list(input.shape)}")
    return _unbatch(bind(unfold_p, (input,), params), added)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding blocks (N, C * prod(kernel_size), L) into (N, C, *output_size), summing overlaps.

    >>> x = dg.randn(1, 2, 4, 4)
    >>> F = dg.nn.functional
    >>> F.fold(F.unfold(x, 2, stride=2), (4, 4), 2, stride=2).shape
    dyngraph.Size([1, 2, 4, 4])
    """
    op = "fold"
    input = as_tensor_arg(input, op)
    if input._data.ndim not in (2, 3):
        raise NotImplementedError(
            f"{op}: Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
            f"(got {input._data.ndim}D input of shape {list(input.shape)})")
    added = input._data.ndim == 2
    if added:
        from ..surface.shape import reshape  # noqa: PLC0415

        input = reshape(input, (1,) + _size(input))
    params = _fold_params(op, kernel_size, dilation, padding, stride)
    osize = _tuple(output_size, 2, "output_size", op)
    kk = _prod(params["kernel_size"])
    blocks = _conv_out(osize, params["kernel_size"], params["stride"], params["padding"],
                       params["dilation"])
    n, ckk, L = _size(input)
    if ckk % kk:
        raise RuntimeError(
            f"{op}: Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={ckk} and kernel_size={params['kernel_size']}")
    if L != _prod(blocks):
        raise RuntimeError(
            f"{op}: Given output_size={osize}, kernel_size={params['kernel_size']}, "
            f"dilation={params['dilation']}, padding={tuple(p for p, _ in params['padding'])}, "
            f"stride={params['stride']}, expected size of input's dimension 2 to match the calculated "
            f"number of sliding blocks {blocks[0]} * {blocks[1]} = {_prod(blocks)}, but got "
            f"input.size(2)={L}.")
    return _unbatch(bind(fold_p, (input,), dict(params, output_size=osize)), added)


# ---------------------------------------------------------------------------
# argument handling shared by the public functions
# ---------------------------------------------------------------------------

def _tuple(v, nd, name, op):
    if isinstance(v, (list, tuple)):
        if len(v) == 1 and nd > 1:
            v = tuple(v) * nd
        if len(v) != nd:
            raise ValueError(f"{op}: {name} must be an int or a tuple of {nd} ints, got {v!r}")
        return tuple(int(a) for a in v)
    return (int(v),) * nd


def _dtype_name(t):
    return str(t.dtype).replace("dyngraph.", "")


def _check_float(op, *ts):
    for t in ts:
        if t is not None and t._data.dtype.kind != "f":
            raise RuntimeError(
                f"{op}: expected a floating-point input, got dtype {_dtype_name(t)} "
                f"(shape {list(t.shape)}); convert it with .float()")


def _batchify(op, input, nd):
    """Return (input with a batch dim, whether one was added)."""
    r = input._data.ndim
    if r == nd + 2:
        return input, False
    if r == nd + 1:
        from ..surface.shape import reshape  # noqa: PLC0415

        return reshape(input, (1,) + _size(input)), True
    raise RuntimeError(
        f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got a "
        f"{r}-D input of shape {list(input.shape)}")


def _unbatch(t, added):
    if not added:
        return t
    from ..surface.shape import reshape  # noqa: PLC0415

    return reshape(t, _size(t)[1:])


def _conv_args(op, input, weight, bias, nd, transposed, groups):
    input = as_tensor_arg(input, op)
    weight = as_tensor_arg(weight, op)
    bias = None if bias is None else as_tensor_arg(bias, op)
    _check_float(op, input, weight, bias)
    if weight._data.ndim != nd + 2:
        raise RuntimeError(
            f"{op}: expected a {nd + 2}-D weight, got shape {list(weight.shape)}")
    input, added = _batchify(op, input, nd)
    if input._data.dtype != weight._data.dtype or (bias is not None and bias._data.dtype != input._data.dtype):
        raise RuntimeError(
            f"{op}: input ({_dtype_name(input)}), weight ({_dtype_name(weight)})"
            + (f" and bias ({_dtype_name(bias)})" if bias is not None else "")
            + " must have the same dtype")
    groups = int(groups)
    c = input._data.shape[1]
    ws = weight._data.shape
    if groups < 1:
        raise RuntimeError(f"{op}: non-positive groups is not supported (groups={groups})")
    if transposed:
        if ws[0] != c:
            raise RuntimeError(
                f"{op}: input of shape {list(input.shape)} has {c} channels, but the weight of "
                f"shape {list(ws)} expects {ws[0]} input channels (weight.shape[0])")
        cout = ws[1] * groups
    else:
        if ws[1] * groups != c:
            raise RuntimeError(
                f"{op}: expected input of shape {list(input.shape)} to have {ws[1] * groups} "
                f"channels (weight of shape {list(ws)}, groups={groups}), but got {c} channels")
        cout = ws[0]
    if c % groups or cout % groups or (not transposed and ws[0] % groups):
        raise RuntimeError(
            f"{op}: channels ({c} in, {cout} out) must be divisible by groups={groups}")
    if bias is not None and _size(bias) != (cout,):
        raise RuntimeError(
            f"{op}: expected bias of shape [{cout}], got {list(bias.shape)}")
    return input, weight, bias, added


def _conv_nd(op, nd, input, weight, bias, stride, padding, dilation, groups):
    input, weight, bias, added = _conv_args(op, input, weight, bias, nd, False, groups)
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    k = _size(weight)[2:]
    if any(v == 0 for v in k):
        raise RuntimeError(f"{op}: kernel size should be greater than zero, but got kernel size "
                           f"{list(k)} (weight of shape {list(weight.shape)})")
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            pads = []
            for i in range(nd):
                total = dilation[i] * (k[i] - 1)
                pads.append((total // 2, total - total // 2))
            pads = tuple(pads)
        else:
            raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
    else:
        p = _tuple(padding, nd, "padding", op)
        if any(v < 0 for v in p):
            raise RuntimeError(f"{op}: negative padding is not supported (padding={p})")
        pads = tuple((v, v) for v in p)
    if any(v < 1 for v in stride) or any(v < 1 for v in dilation):
        raise RuntimeError(f"{op}: stride and dilation must be positive (stride={stride}, dilation={dilation})")
    sp = _size(input)[2:]
    for i in range(nd):
        if sp[i] + sum(pads[i]) < dilation[i] * (k[i] - 1) + 1:
            raise RuntimeError(
                f"{op}: calculated padded input size per channel: {[sp[j] + sum(pads[j]) for j in range(nd)]}. "
                f"Kernel size: {[dilation[j] * (k[j] - 1) + 1 for j in range(nd)]}. Kernel size can't "
                "be greater than actual input size")
    params = {"stride": stride, "padding": pads, "dilation": dilation, "groups": groups}
    return _unbatch(bind(conv_p, (input, weight, bias), params), added)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution over ``(N, C, L)`` (or unbatched ``(C, L)``), PyTorch's semantics.

    ``padding`` is an int, a tuple, ``'valid'`` or ``'same'``.

    >>> dg.conv1d(dg.randn(2, 4, 10), dg.randn(8, 4, 3), padding='same').shape
    dyngraph.Size([2, 8, 10])
    """
    return _conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution over ``(N, C, H, W)`` (or unbatched ``(C, H, W)``), PyTorch's semantics.

    >>> dg.conv2d(dg.randn(2, 3, 8, 8), dg.randn(6, 3, 3, 3), padding=1).shape
    dyngraph.Size([2, 6, 8, 8])
    """
    return _conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution over ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``)."""
    return _conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose_nd(op, nd, input, weight, bias, stride, padding, output_padding, groups,
                       dilation, output_size=None):
    input, weight, bias, added = _conv_args(op, input, weight, bias, nd, True, groups)
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    p = _tuple(padding, nd, "padding", op)
    op_ = _tuple(output_padding, nd, "output_padding", op)
    k = _size(weight)[2:]
    sp = _size(input)[2:]
    base = tuple((sp[i] - 1) * stride[i] - 2 * p[i] + dilation[i] * (k[i] - 1) + 1 for i in range(nd))
    if output_size is not None:
        want = tuple(int(v) for v in output_size)[-nd:]
        op_ = tuple(want[i] - base[i] for i in range(nd))
        for i in range(nd):
            if not 0 <= op_[i] < max(stride[i], dilation[i]):
                raise ValueError(
                    f"{op}: requested an output size of {list(want)}, but valid sizes range from "
                    f"{list(base)} to {[base[j] + max(stride[j], dilation[j]) - 1 for j in range(nd)]} "
                    "(for an input of spatial size {list(sp)})")
    for i in range(nd):
        if op_[i] >= stride[i] and op_[i] >= dilation[i]:
            raise RuntimeError(
                f"{op}: output padding must be smaller than either stride or dilation, but got "
                f"output_padding={op_}, stride={stride}, dilation={dilation}")
        if op_[i] >= stride[i]:
            raise NotImplementedError(
                f"{op}: output_padding ({op_[i]}) >= stride ({stride[i]}) is not supported")
    out = tuple(base[i] + op_[i] for i in range(nd))
    if any(v <= 0 for v in out):
        raise RuntimeError(f"{op}: the computed output size {list(out)} is too small (input {list(sp)})")
    params = {"stride": stride, "padding": tuple((v, v) for v in p), "dilation": dilation,
              "groups": int(groups), "output_size": out}
    return _unbatch(bind(conv_transpose_p, (input, weight, bias), params), added)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution ("deconvolution"); weight is ``(C_in, C_out/groups, k)``."""
    return _conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution; weight is ``(C_in, C_out/groups, kH, kW)``.

    >>> dg.conv_transpose2d(dg.randn(1, 4, 5, 5), dg.randn(4, 2, 3, 3), stride=2).shape
    dyngraph.Size([1, 2, 11, 11])
    """
    return _conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


# ---------------------------------------------------------------------------
# max pooling
# ---------------------------------------------------------------------------

def _pool_out(size, k, s, p, d, ceil_mode):
    out = []
    for i in range(len(size)):
        num = size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        o = (-(-num // s[i]) if ceil_mode else num // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= size[i] + p[i]:
            o -= 1
        out.append(o)
    return tuple(out)


def _flat_index(out, kernel, stride, padding, dilation, in_size):
    """Flat input index (into prod(in_size)) for every (out..., kernel-offset) pair."""
    nd = len(out)
    idx = 0
    for i in range(nd):
        shape_o = [1] * (2 * nd)
        shape_o[i] = out[i]
        shape_k = [1] * (2 * nd)
        shape_k[nd + i] = kernel[i]
        pos = (np.arange(out[i]) * stride[i] - padding[i]).reshape(shape_o) + \
            (np.arange(kernel[i]) * dilation[i]).reshape(shape_k)
        idx = idx * in_size[i] + pos
    return np.broadcast_to(idx, tuple(out) + tuple(kernel)).reshape(tuple(out) + (-1,))


def _pool_name(kind: str, key: str):
    """PyTorch's pooling node names carry the number of spatial dims; its 1-d pooling runs
    as 2-d pooling on an unsqueezed input, so the node it returns is the final squeeze."""
    def name(params) -> str:
        n = len(params[key])
        return "SqueezeBackward1" if n == 1 else f"{kind}{n}D{'WithIndices' if kind == 'MaxPool' else ''}Backward0"
    return name


@primitive("max_pool", n_outputs=2, save_output=True, meta=True,
           torch_name=_pool_name("MaxPool", "kernel_size"))
def max_pool_p(x, kernel_size=(1,), stride=(1,), padding=(0,), dilation=(1,), ceil_mode=False):
    """Max pooling returning (values, flat indices into each input plane) like PyTorch."""
    nd = len(kernel_size)
    sp = x.shape[2:]
    out = _pool_out(sp, kernel_size, stride, padding, dilation, ceil_mode)
    if _tiled(nd, kernel_size, stride, padding, dilation, sp, out) and x.dtype.kind == "f":
        res = _max_pool_tiled(x, kernel_size, out)
        if res is not None:
            return res
    need = tuple((out[i] - 1) * stride[i] + dilation[i] * (kernel_size[i] - 1) + 1 for i in range(nd))
    extra = tuple(max(0, need[i] - (sp[i] + 2 * padding[i])) for i in range(nd))
    xp = _pad(x, tuple((p, p) for p in padding), -np.inf, extra)
    win = _windows(xp, kernel_size, stride, dilation, out, kernel_first=False)
    win = win.reshape(x.shape[:2] + tuple(out) + (-1,))
    arg = win.argmax(axis=-1)[..., None]
    vals = np.take_along_axis(win, arg, axis=-1)[..., 0]
    flat = _flat_index(out, kernel_size, stride, padding, dilation, sp)
    idx = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=-1)[..., 0]
    return vals, idx.astype(np.int64)


def _tiled(nd, kernel, stride, padding, dilation, size, out) -> bool:
    """2-d pooling whose windows tile the input (stride == kernel, no padding or dilation)."""
    return (nd == 2 and tuple(stride) == tuple(kernel) and not any(padding)
            and all(d == 1 for d in dilation)
            and all(out[i] * kernel[i] <= size[i] for i in range(2)))


def _max_pool_tiled(x, kernel, out):
    """Fast path of max pooling for tiling windows.

    The windows are laid out as ``kh*kw`` contiguous planes (one copy of the input),
    then reduced with ``kh*kw - 1`` vectorised comparisons: the first maximum wins,
    as in PyTorch's scan order.  Windows holding NaN go the general way (PyTorch
    returns the NaN and its index)."""
    kh, kw = kernel
    ho, wo = out
    n, c, _, w = x.shape
    t = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw)
    planes = np.ascontiguousarray(t.transpose(3, 5, 0, 1, 2, 4)).reshape(kh * kw, -1)
    best = planes[0].copy()
    arg = np.zeros(best.shape, np.int8)
    for j in range(1, kh * kw):
        v = planes[j]
        np.copyto(arg, j, where=v > best)
        np.maximum(best, v, out=best)
    if np.isnan(best).any():
        return None
    # flat plane index = window origin + offset of the winning element (a table look-up:
    # integer division over the whole output would cost more than the pooling itself)
    offsets = np.array([(j // kw) * w + j % kw for j in range(kh * kw)], np.int64)
    # (take on the flat array: NumPy's multi-dimensional take is ~8x slower)
    idx = _window_origins(ho, wo, kh, kw, w) + offsets.take(arg).reshape(n, c, ho, wo)
    return best.reshape(n, c, ho, wo), idx


def _window_origins(ho, wo, kh, kw, w):
    return (np.arange(ho, dtype=np.int64).reshape(ho, 1) * (kh * w)
            + np.arange(wo, dtype=np.int64).reshape(1, wo) * kw)


@primitive("pool_scatter", save_inputs=True, nondiff_argnums=(1,))
def pool_scatter_p(g, idx, in_size=(1,), window=None):
    """Adjoint of ``pool_gather``: add g[..., j] into plane position idx[..., j] (zeros elsewhere).

    ``window=(kh, kw)`` says the indices come from tiling 2-d windows (each input position
    in at most one window), which allows a scatter without ``bincount``."""
    if window is not None:
        return _scatter_tiled(g, idx, in_size, window)
    n, c = g.shape[:2]
    m = _prod(in_size)
    rows = n * c
    if rows == 0 or g.size == 0:
        return np.zeros((n, c) + tuple(in_size), dtype=g.dtype)
    base = (np.arange(rows, dtype=np.int64) * m).reshape((n, c) + (1,) * (idx.ndim - 2))
    flat = np.bincount((idx + base).ravel(), weights=g.ravel(), minlength=rows * m)
    return flat.astype(g.dtype, copy=False).reshape((n, c) + tuple(in_size))


def _scatter_tiled(g, idx, in_size, window):
    """Tiling windows never share an input position, so the scatter is a plain fancy-index
    assignment (no accumulation needed; ~2.5x faster than ``bincount``)."""
    n, c = g.shape[:2]
    m = _prod(in_size)
    out = np.zeros(n * c * m, dtype=g.dtype)
    base = (np.arange(n * c, dtype=np.int64) * m).reshape((n, c) + (1,) * (idx.ndim - 2))
    out[(idx + base).ravel()] = g.ravel()
    return out.reshape((n, c) + tuple(in_size))


@primitive("pool_gather", save_inputs=True, nondiff_argnums=(1,))
def pool_gather_p(x, idx):
    """x[n, c].flat[idx[n, c, ...]]: values at PyTorch-style pooling indices."""
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    return np.take_along_axis(flat, idx.reshape(n, c, -1), axis=-1).reshape(idx.shape)


def _max_pool_vjp(g, out, x, kernel_size, stride, padding, dilation, ceil_mode):
    in_size = tuple(x.shape[2:])
    nd = len(kernel_size)
    outsz = tuple(out[1].shape[2:])
    if _tiled(nd, kernel_size, stride, padding, dilation, in_size, outsz):
        return pool_scatter_p(g[0], out[1], in_size=in_size, window=tuple(kernel_size))
    return pool_scatter_p(g[0], out[1], in_size=in_size)


max_pool_p.defvjp(_max_pool_vjp)
pool_scatter_p.defvjp(lambda g, out, gy, idx, in_size, window=None: pool_gather_p(g, idx), None)
pool_gather_p.defvjp(lambda g, out, x, idx: pool_scatter_p(g, idx, in_size=tuple(x.shape[2:])), None)


def _max_pool_nd(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    d = _tuple(dilation, nd, "dilation", op)
    if any(v < 1 for v in k + s + d):
        raise RuntimeError(f"{op}: kernel_size, stride and dilation must be positive "
                           f"(kernel_size={k}, stride={s}, dilation={d})")
    for i in range(nd):
        if p[i] < 0 or p[i] > k[i] // 2:
            raise RuntimeError(
                f"{op}: pad should be at most half of effective kernel size, but got pad={p[i]}, "
                f"kernel_size={k[i]} and dilation={d[i]}")
    out = _pool_out(_size(input)[2:], k, s, p, d, ceil_mode)
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: given input size {list(input.shape)}, the calculated output size "
            f"{list(out)} is too small")
    vals, idx = bind(max_pool_p, (input,), {"kernel_size": k, "stride": s, "padding": p,
                                            "dilation": d, "ceil_mode": bool(ceil_mode)})
    vals, idx = _unbatch(vals, added), _unbatch(idx, added)
    return (vals, idx) if return_indices else vals


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over ``(N, C, L)``; ``return_indices=True`` also returns the argmax positions."""
    return _max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling over ``(N, C, H, W)``.

    >>> dg.max_pool2d(dg.randn(1, 1, 4, 4), 2).shape
    dyngraph.Size([1, 1, 2, 2])
    """
    return _max_pool_nd("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _max_unpool_nd(op, nd, input, indices, kernel_size, stride, padding, output_size):
    input = as_tensor_arg(input, op)
    indices = as_tensor_arg(indices, op)
    _check_float(op, input)
    if indices._data.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: indices must be an integer tensor, got {indices.dtype}")
    if _size(indices) != _size(input):
        raise RuntimeError(
            f"{op}: Expected shape of indices to be same as that of the input tensor "
            f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    input, added = _batchify(op, input, nd)
    indices, _ = _batchify(op, indices, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None else _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    sp = _size(input)[2:]
    default = tuple((sp[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in tuple(output_size)[-nd:])
        for i in range(nd):
            if not default[i] - s[i] < out[i] < default[i] + s[i]:
                raise ValueError(
                    f"{op}: invalid output_size {list(out)} (dim {i} must be between "
                    f"{default[i] - s[i] + 1} and {default[i] + s[i] - 1})")
    idx = indices._data
    if idx.size and (idx.min() < 0 or idx.max() >= _prod(out)):
        raise RuntimeError(
            f"{op}: Found an invalid max index: {int(idx.max())} (output volumes are of size "
            f"{'x'.join(map(str, out))})")
    y = bind(pool_scatter_p, (input, indices), {"in_size": out})
    return _unbatch(y, added)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of :func:`max_pool1d`: values go back to their argmax positions."""
    return _max_unpool_nd("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of :func:`max_pool2d` (zeros elsewhere).

    >>> v, i = dg.max_pool2d(dg.randn(1, 1, 4, 4), 2, return_indices=True)
    >>> dg.nn.functional.max_unpool2d(v, i, 2).shape
    dyngraph.Size([1, 1, 4, 4])
    """
    return _max_unpool_nd("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


# ---------------------------------------------------------------------------
# average pooling (a linear map and its adjoint)
# ---------------------------------------------------------------------------

def _avg_divisor(in_size, out, k, s, p, count_include_pad, divisor_override, dtype):
    if divisor_override:
        return np.asarray(float(divisor_override), dtype=dtype)
    div = np.ones((), dtype=np.float64)
    for i in range(len(out)):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], in_size[i] + p[i])
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, in_size[i]) - np.maximum(start, 0)
        div = np.multiply.outer(div, size.astype(np.float64))
    return div.astype(dtype)


def _avg_geometry(in_size, k, s, p, ceil_mode):
    nd = len(k)
    out = _pool_out(in_size, k, s, p, (1,) * nd, ceil_mode)
    need = tuple((out[i] - 1) * s[i] + k[i] for i in range(nd))
    full = tuple(max(in_size[i] + 2 * p[i], need[i]) for i in range(nd))
    return out, full


def _kernel_slices(k, s, out):
    for off in itertools.product(*(range(kd) for kd in k)):
        yield tuple(slice(o, o + s[i] * (out[i] - 1) + 1, s[i]) for i, o in enumerate(off))


@primitive("avg_pool", meta=True,
           torch_name=_pool_name("AvgPool", "kernel_size"))
def avg_pool_p(x, kernel_size=(1,), stride=(1,), padding=(0,), ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling (PyTorch's divisor rules for padding and ceil_mode)."""
    sp = x.shape[2:]
    out, full = _avg_geometry(sp, kernel_size, stride, padding, ceil_mode)
    xp = _pad(x, tuple((q, q) for q in padding), 0.0,
              tuple(full[i] - sp[i] - 2 * padding[i] for i in range(len(sp))))
    acc = np.zeros(x.shape[:2] + out, dtype=x.dtype)
    for sl in _kernel_slices(kernel_size, stride, out):
        acc += xp[(slice(None), slice(None)) + sl]
    acc /= _avg_divisor(sp, out, kernel_size, stride, padding, count_include_pad, divisor_override,
                        x.dtype)
    return acc


@primitive("avg_pool_adjoint", meta=True)
def avg_pool_adjoint_p(g, kernel_size=(1,), stride=(1,), padding=(0,), ceil_mode=False,
                       count_include_pad=True, divisor_override=None, in_size=(1,)):
    """The transpose of ``avg_pool`` (spreads each output gradient over its window)."""
    out, full = _avg_geometry(in_size, kernel_size, stride, padding, ceil_mode)
    gd = g / _avg_divisor(in_size, out, kernel_size, stride, padding, count_include_pad,
                          divisor_override, g.dtype)
    buf = np.zeros(g.shape[:2] + full, dtype=g.dtype)
    for sl in _kernel_slices(kernel_size, stride, out):
        buf[(slice(None), slice(None)) + sl] += gd
    crop = tuple(slice(padding[i], padding[i] + in_size[i]) for i in range(len(in_size)))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])


avg_pool_p.defvjp(lambda g, out, x, **kw: avg_pool_adjoint_p(g, in_size=tuple(x.shape[2:]), **kw))
avg_pool_adjoint_p.defvjp(
    lambda g, out, gy, in_size, **kw: avg_pool_p(g, **kw))


def _avg_pool_nd(op, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    if any(v < 1 for v in k + s):
        raise RuntimeError(f"{op}: kernel_size and stride must be positive (kernel_size={k}, stride={s})")
    for i in range(nd):
        if p[i] < 0 or p[i] > k[i] // 2:
            raise RuntimeError(
                f"{op}: pad should be at most half of kernel size, but got pad={p[i]} and "
                f"kernel_size={k[i]}")
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    out = _pool_out(_size(input)[2:], k, s, p, (1,) * nd, ceil_mode)
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: given input size {list(input.shape)}, the calculated output size "
            f"{list(out)} is too small")
    params = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
              "count_include_pad": bool(count_include_pad),
              "divisor_override": None if divisor_override is None else int(divisor_override)}
    return _unbatch(bind(avg_pool_p, (input,), params), added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over ``(N, C, L)``."""
    return _avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling over ``(N, C, H, W)``.

    >>> dg.avg_pool2d(dg.ones(1, 1, 4, 4), 2)
    tensor([[[[1., 1.],
              [1., 1.]]]])
    """
    return _avg_pool_nd("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override)


# ---------------------------------------------------------------------------
# adaptive pooling
# ---------------------------------------------------------------------------

def _adaptive_bounds(n_in, n_out):
    o = np.arange(n_out)
    start = (o * n_in) // n_out
    end = -((-(o + 1) * n_in) // n_out)
    return start, end


def _adaptive_size(op, input, output_size, nd):
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nd:
            raise ValueError(f"{op}: output_size must have {nd} elements, got {output_size!r}")
        sizes = tuple(input._data.shape[-nd + i] if v is None else int(v) for i, v in enumerate(output_size))
    else:
        sizes = (int(output_size),) * nd
    if any(v < 0 for v in sizes):
        raise ValueError(f"{op}: output_size must be non-negative, got {sizes}")
    for i in range(nd):
        if input._data.shape[-nd + i] == 0:
            raise RuntimeError(f"{op}: expected input with non-zero spatial sizes, got {list(input.shape)}")
    return sizes


def _pool_matrix(n_in, n_out, dtype):
    start, end = _adaptive_bounds(n_in, n_out)
    m = np.zeros((n_out, n_in), dtype=np.float64)
    for o in range(n_out):  # n_out is a small spatial size: this builds a constant matrix
        m[o, start[o]:end[o]] = 1.0 / (end[o] - start[o])
    return Tensor._make(m.astype(dtype), False, None, 0)


def _adaptive_avg_nd(op, nd, input, output_size):
    from ..surface.linalg import matmul  # noqa: PLC0415
    from ..surface.shape import transpose  # noqa: PLC0415

    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    sizes = _adaptive_size(op, input, output_size, nd)
    sp = _size(input)[2:]
    if all(sp[i] % sizes[i] == 0 for i in range(nd)) and all(sizes):
        k = tuple(sp[i] // sizes[i] for i in range(nd))
        params = {"kernel_size": k, "stride": k, "padding": (0,) * nd, "ceil_mode": False,
                  "count_include_pad": True, "divisor_override": None}
        return _unbatch(bind(avg_pool_p, (input,), params), added)
    dt = input._data.dtype
    y = input
    # separable: pool the last dim with P_w^T, then (2-d) the height with P_h
    y = matmul(y, transpose(_pool_matrix(sp[-1], sizes[-1], dt), 0, 1))
    if nd == 2:
        y = matmul(_pool_matrix(sp[0], sizes[0], dt), y)
    return _unbatch(y, added)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to a fixed output length (windows as PyTorch computes them)."""
    return _adaptive_avg_nd("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size; ``None`` keeps that dimension.

    >>> dg.adaptive_avg_pool2d(dg.randn(2, 3, 7, 9), (1, 1)).shape
    dyngraph.Size([2, 3, 1, 1])
    """
    return _adaptive_avg_nd("adaptive_avg_pool2d", 2, input, output_size)


@primitive("adaptive_max_pool", n_outputs=2, save_output=True, meta=True,
           torch_name=_pool_name("AdaptiveMaxPool", "output_size"))
def adaptive_max_pool_p(x, output_size=(1,)):
    """Max over PyTorch's adaptive windows; returns (values, flat plane indices)."""
    nd = len(output_size)
    sp = x.shape[2:]
    idx_dims = []
    for i in range(nd):
        start, end = _adaptive_bounds(sp[i], output_size[i])
        kmax = int((end - start).max()) if output_size[i] else 1
        # repeat the last valid position where a window is shorter: it cannot change the max
        pos = np.minimum(start[:, None] + np.arange(kmax), (end - 1)[:, None])
        idx_dims.append(pos)
    # flat index per (out..., kernel...) pair
    flat = 0
    for i in range(nd):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = idx_dims[i].shape
        flat = flat * sp[i] + idx_dims[i].reshape(shape)
    oshape = tuple(output_size)
    kshape = tuple(p.shape[1] for p in idx_dims)
    flat = np.broadcast_to(flat, oshape + kshape).reshape(oshape + (-1,))
    planes = x.reshape(x.shape[:2] + (-1,))
    win = planes[:, :, flat]  # (N, C, *out, kk)
    arg = win.argmax(axis=-1)[..., None]
    vals = np.take_along_axis(win, arg, axis=-1)[..., 0]
    idx = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=-1)[..., 0]
    return vals, idx.astype(np.int64)


adaptive_max_pool_p.defvjp(
    lambda g, out, x, output_size: pool_scatter_p(g[0], out[1], in_size=tuple(x.shape[2:])))


def _adaptive_max_nd(op, nd, input, output_size, return_indices):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    sizes = _adaptive_size(op, input, output_size, nd)
    vals, idx = bind(adaptive_max_pool_p, (input,), {"output_size": sizes})
    vals, idx = _unbatch(vals, added), _unbatch(idx, added)
    return (vals, idx) if return_indices else vals


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to a fixed output length."""
    return _adaptive_max_nd("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed output size; ``return_indices=True`` also returns argmax positions."""
    return _adaptive_max_nd("adaptive_max_pool2d", 2, input, output_size, return_indices)


# ---------------------------------------------------------------------------
# resampling: nearest (a gather and its adjoint), linear (interpolation matrices)
# ---------------------------------------------------------------------------

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


def _nearest_index(n_in, n_out, scale, exact):
    # PyTorch computes the source index in float32 (``floorf(dst * scale)``): do the same
    o = np.arange(n_out)
    s = np.float32((n_in / n_out) if scale is None else 1.0 / scale)
    if n_out == n_in and not exact:
        src = o
    elif exact:
        src = np.floor(((o + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(o.astype(np.float32) * s)
    return tuple(int(v) for v in np.minimum(src, n_in - 1).astype(np.int64))


def _linear_matrix(n_in, n_out, scale, align_corners, dtype):
    o = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = (n_in / n_out) if scale is None else 1.0 / scale
        src = np.maximum((o + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam1 = src - i0
    lam0 = 1.0 - lam1
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    np.add.at(m, (rows, i0), lam0)
    np.add.at(m, (rows, i1), lam1)
    return Tensor._make(m.astype(dtype), False, None, 0)


def _cubic_matrix(n_in, n_out, scale, align_corners, dtype):
    """PyTorch's bicubic weights (cubic convolution, A = -0.75, borders clamped) as a matrix."""
    a = -0.75
    o = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = (n_in / n_out) if scale is None else 1.0 / scale
        src = (o + 0.5) * s - 0.5          # no clamping at 0 for cubic, as in PyTorch
    i0 = np.floor(src).astype(np.int64)
    t = src - i0

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    coeffs = (far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t))
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    for k, c in enumerate(coeffs):
        np.add.at(m, (rows, np.clip(i0 - 1 + k, 0, n_in - 1)), c)
    return Tensor._make(m.astype(dtype), False, None, 0)


_MODES = {"nearest": 0, "nearest-exact": 0, "area": 0, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize ``(N, C, L)`` / ``(N, C, H, W)`` / ``(N, C, D, H, W)`` inputs; PyTorch's index
    and weight rules.

    Modes: ``'nearest'``, ``'nearest-exact'``, ``'area'`` (not 5-D), ``'linear'`` (3-D input),
    ``'bilinear'`` and ``'bicubic'`` (4-D input), ``'trilinear'`` (5-D input), with
    ``align_corners`` both ways.

    >>> dg.nn.functional.interpolate(dg.randn(1, 3, 4, 4), scale_factor=2, mode='bilinear').shape
    dyngraph.Size([1, 3, 8, 8])
    """
    op = "interpolate"
    input = as_tensor_arg(input, op)
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use one of {sorted(_MODES)}")
    nd = input._data.ndim - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(
            f"{op}: expected a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W) input, got "
            f"shape {list(input.shape)}")
    if nd == 3 and mode == "area":
        raise NotImplementedError(f"{op}: mode 'area' is not supported for 5-D input "
                                  f"(shape {list(input.shape)}); there is no 3-D adaptive pooling")
    if _MODES[mode] and _MODES[mode] != nd:
        raise NotImplementedError(
            f"{op}: mode {mode!r} needs a {_MODES[mode] + 2}-D input, got a {nd + 2}-D input of "
            f"shape {list(input.shape)}")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(
            f"{op}: align_corners option can only be set with the interpolating modes: linear | "
            "bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    _check_float(op, input)
    sp = _size(input)[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size or scale_factor should be defined")
    if size is not None:
        out = _tuple(size, nd, "size", op)
        scales = (None,) * nd
    else:
        sf = scale_factor if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * nd
        if len(sf) != nd:
            raise ValueError(f"{op}: scale_factor must have {nd} elements, got {scale_factor!r}")
        out = tuple(int(math.floor(float(sp[i]) * float(sf[i]))) for i in range(nd))
        scales = (None,) * nd if recompute_scale_factor else tuple(float(v) for v in sf)
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: output size {list(out)} must be positive (input {list(input.shape)})")
    if mode == "area":   # PyTorch: adaptive average pooling to the output size
        return _adaptive_avg_nd("interpolate", nd, input, out)
    if mode.startswith("nearest"):
        index = tuple(_nearest_index(sp[i], out[i], scales[i], mode == "nearest-exact") for i in range(nd))
        return bind(upsample_nearest_p, (input,), {"index": index})
    from ..surface.linalg import matmul  # noqa: PLC0415
    from ..surface.shape import transpose  # noqa: PLC0415

    ac = bool(align_corners)
    dt = input._data.dtype
    make = _cubic_matrix if mode == "bicubic" else _linear_matrix
    y = matmul(input, transpose(make(sp[-1], out[-1], scales[-1], ac, dt), 0, 1))
    if nd >= 2:
        y = matmul(make(sp[-2], out[-2], scales[-2], ac, dt), y)
    if nd == 3:  # depth: bring it next to the end, weight it like the height, move it back
        y = transpose(matmul(make(sp[0], out[0], scales[0], ac, dt), transpose(y, 2, 3)), 2, 3)
    return y


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_conv():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415

    by_weight = b.merge_leading(lambda prim, params, args: args[1]._data.ndim - 2)
    R["conv"].defbatch(by_weight)
    R["conv_transpose"].defbatch(by_weight)
    R["max_pool"].defbatch(b.merge_leading(lambda prim, params, args: len(params["kernel_size"])))
    R["avg_pool"].defbatch(b.merge_leading(lambda prim, params, args: len(params["kernel_size"])))
    R["adaptive_max_pool"].defbatch(
        b.merge_leading(lambda prim, params, args: len(params["output_size"])))
    R["upsample_nearest"].defbatch(b.merge_leading(lambda prim, params, args: len(params["index"])))
    R["unfold"].defbatch(fallback="column layout of (N, C*k, L) differs by rank")
    R["fold"].defbatch(fallback="column layout of (N, C*k, L) differs by rank")
    for name in ("conv_weight", "pool_scatter", "pool_gather", "avg_pool_adjoint",
                 "upsample_nearest_adjoint"):
        R[name].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_conv()
