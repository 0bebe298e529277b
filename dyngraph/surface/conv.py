"""The PyTorch surface of convolution: ``conv1d``/``conv2d``/``conv3d``,
``conv_transpose1d``/``conv_transpose2d``, ``unfold``/``fold``, and the argument checks
(shapes, groups, padding modes, dtypes) they share with pooling.

The primitives (im2col + GEMM forwards, their adjoint rules) are in
:mod:`dyngraph.ops.conv`.
"""

from __future__ import annotations

from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..ops.conv import (
    _conv_out,
    _prod,
    _size,
    conv_p,
    conv_transpose_p,
    fold_p,
    unfold_p,
)
from ..ops.registry import bind
from ._args import as_tensor_arg
from .shape import reshape

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"]


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
        if t is not None and not _is_float_dtype(t._data.dtype):
            raise RuntimeError(
                f"{op}: expected a floating-point input, got dtype {_dtype_name(t)} "
                f"(shape {list(t.shape)}); convert it with .float()")


def _batchify(op, input, nd):
    """Return (input with a batch dim, whether one was added)."""
    r = input._data.ndim
    if r == nd + 2:
        return input, False
    if r == nd + 1:
        return reshape(input, (1,) + _size(input)), True
    raise RuntimeError(
        f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got a "
        f"{r}-D input of shape {list(input.shape)}")


def _unbatch(t, added):
    if not added:
        return t

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
