"""``dg.nn.functional``: the functional forms of the layers (``torch.nn.functional``).

>>> import dyngraph.nn.functional as F
>>> F.relu(dg.tensor([-1.0, 2.0]))
tensor([0., 2.])

Fused primitives (``softmax``, ``log_softmax``, ``linear``, ``embedding``,
``nll_loss``) live in :mod:`dyngraph.ops.nn`; everything else here is a
composition of primitives, so gradients of every order come for free.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._core.graph import bump_version
from .._core.state import concrete
from ..ops.nn import embedding_backward_p, embedding_p, layer_norm_p
from ..ops.registry import bind
from ..random import rng_of
from ..surface import elementwise as E
from ..surface.indexing import one_hot, scatter
from ..surface.inplace import apply_inplace
from ..surface.nn import embedding, embedding_renorm_, linear, log_softmax, softmax
from ..surface.reduction import mean as _mean
from ..surface.reduction import sum as _sum
from ..surface.shape import chunk, pad, reshape
from ..tensor import Tensor
from ._functional_common import (  # (shared with _functional_loss)
    _pnorm,
    as_tensor,
    const,
    logsigmoid,
    pairwise_distance,
    require_float,
)

__all__ = [
    # linear / sparse
    "linear", "bilinear", "embedding", "embedding_bag", "one_hot",
    # activations
    "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "celu", "gelu",
    "silu", "mish", "sigmoid", "tanh", "softplus", "softmax", "log_softmax", "softmin",
    "hardtanh", "hardtanh_", "hardswish", "hardsigmoid", "prelu", "logsigmoid", "softsign",
    "tanhshrink", "softshrink", "hardshrink", "threshold", "glu", "rrelu", "gumbel_softmax",
    # normalisation
    "layer_norm", "group_norm", "batch_norm", "instance_norm", "normalize", "local_response_norm",
    "rms_norm",
    # dropout
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    # distances
    "cosine_similarity", "pairwise_distance", "pdist",
    # losses
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "cosine_embedding_loss", "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    # shape
    "pad",
]


_t = as_tensor
_const = const
_require_float = require_float


# ---------------------------------------------------------------------------
# linear / bilinear / embedding_bag / one_hot
# ---------------------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = x1[..., i] * weight[o, i, j] * x2[..., j] + bias[o]``.

    >>> F.bilinear(dg.ones(2, 3), dg.ones(2, 4), dg.ones(5, 3, 4)).shape
    dyngraph.Size([2, 5])
    """
    o, i1, i2 = weight._data.shape
    s1, s2 = input1._data.shape, input2._data.shape
    if s1[-1] != i1 or s2[-1] != i2 or s1[:-1] != s2[:-1]:
        raise RuntimeError(
            f"bilinear: expected inputs of shapes [..., {i1}] and [..., {i2}] with equal batch "
            f"dimensions (weight {list(weight.shape)}), got {list(s1)} and {list(s2)}")
    lead = s1[:-1]
    x1 = reshape(input1, -1, i1)
    x2 = reshape(input2, -1, 1, i2)
    w = reshape(weight.permute(1, 0, 2), i1, o * i2)
    y = _sum(reshape(x1 @ w, -1, o, i2) * x2, -1)
    if bias is not None:
        y = y + bias
    return reshape(y, *lead, o)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sum, mean or max of the embeddings of each bag (2-D ``input``, or 1-D with ``offsets``).

    >>> F.embedding_bag(dg.tensor([[0, 1], [2, 2]]), dg.eye(3), mode="sum")
    tensor([[1., 1., 0.],
            [0., 0., 2.]])
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    idx = _t(input, "embedding_bag")
    n = weight._data.shape[0]
    if idx._data.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None")
        b, length = idx._data.shape
        flat = concrete(idx, "embedding_bag: the indices select the rows (read as values)").reshape(-1)
        bag_of = np.repeat(np.arange(b), length)
        n_bags = b
    elif idx._data.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        off = np.asarray(concrete(offsets, "embedding_bag: offsets decide the bag sizes")
                         if isinstance(offsets, Tensor) else offsets).astype(np.int64)
        flat = concrete(idx, "embedding_bag: the indices select the rows (read as values)")
        if include_last_offset:
            n_bags = len(off) - 1
            ends = off[1:]
        else:
            n_bags = len(off)
            ends = np.append(off[1:], len(flat))
        starts = off[:n_bags]
        if len(starts) and (starts[0] != 0 or np.any(np.diff(off) < 0) or ends[-1] > len(flat)):
            raise ValueError(
                f"embedding_bag: offsets must start at 0, be non-decreasing and not exceed the "
                f"input length {len(flat)}; got {off.tolist()}")
        bag_of = np.repeat(np.arange(n_bags), ends - starts)
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of "
                         f"dimension {idx._data.ndim}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub.")
    pad = -1 if padding_idx is None else (padding_idx + n if padding_idx < 0 else padding_idx)
    flat_t = _const(flat.astype(np.int64))
    keep = flat != pad
    if max_norm is not None:
        embedding_renorm_(weight, flat_t, max_norm, norm_type)
    rows = embedding(flat_t, weight, padding_idx=None if pad < 0 else pad,
                     scale_grad_by_freq=scale_grad_by_freq)
    dt = weight._data.dtype
    if mode == "max":
        return _bag_max(rows, bag_of, keep, n_bags)
    # sum / mean: a scatter-add of (scaled) rows into their bags, the embedding's own
    # backward primitive (differentiable, O(n) memory)
    scale = keep.astype(dt)
    if mode == "mean":
        counts = np.bincount(bag_of, weights=scale, minlength=n_bags)
        scale = scale / np.maximum(counts, 1)[bag_of]
    if per_sample_weights is not None:
        rows = rows * reshape(per_sample_weights, -1, 1)
    if mode == "mean" or not keep.all():
        rows = rows * _const(scale.reshape(-1, 1).astype(dt))
    return bind(embedding_backward_p, (rows, _const(bag_of.astype(np.int64))),
                {"num_weights": n_bags})


def _bag_max(rows, bag_of, keep, n_bags):
    """Per-bag, per-column maximum of ``rows`` (empty bags give 0), differentiably."""
    # which row wins each bag depends on the weights' values
    r = concrete(rows, "embedding_bag(mode='max'): the maxima pick the rows")
    n, d = r.shape
    masked = np.where(keep[:, None], r, -np.inf)
    best = np.full((n_bags, d), -np.inf, dtype=r.dtype)
    np.maximum.at(best, bag_of, masked)
    # the first row reaching each maximum: its flat index in rows, gathered by `embedding`
    hit = (masked == best[bag_of]) & keep[:, None]
    first = np.full((n_bags, d), n, dtype=np.int64)
    np.minimum.at(first, bag_of, np.where(hit, np.arange(n)[:, None], n))
    empty = first == n
    flat_idx = np.where(empty, 0, first) * d + np.arange(d)
    picked = embedding_p(reshape(rows, n * d, 1), _const(flat_idx))
    out = reshape(picked, n_bags, d)
    if empty.any():
        out = out * _const((~empty).astype(r.dtype))
    return out


# ---------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------

def _inplace_graph(input, fn, name):
    return apply_inplace(input, fn, name)


def _apply(input, fn, inplace: bool, name: str):
    """``fn(input)``, or with ``inplace`` written back into ``input`` (autograd-aware).

    ``fn`` may be a composition: it runs on a clone when ``input`` requires grad, so no
    inner node keeps the buffer that is then overwritten.
    """
    if not inplace:
        return fn(input)
    return _inplace_graph(input, lambda s: fn(s.clone()) if s._rg else fn(s), name)


def relu(input, inplace: bool = False):
    """max(0, x). ``inplace=True`` overwrites ``input``."""
    if inplace:
        return _inplace_graph(input, E.relu, "relu_")
    return E.relu(input)


def relu_(input):
    """In-place ``relu``."""
    return relu(input, inplace=True)


def relu6(input, inplace: bool = False):
    """``min(max(0, x), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``x`` if ``x > 0`` else ``negative_slope * x``."""
    if inplace:
        return _inplace_graph(input, lambda s: E.leaky_relu(s, negative_slope), "leaky_relu_")
    return E.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope: float = 0.01):
    """In-place ``leaky_relu``."""
    return leaky_relu(input, negative_slope, True)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    if inplace:
        return _inplace_graph(input, lambda s: E.elu(s, alpha), "elu_")
    return E.elu(input, alpha)


def elu_(input, alpha: float = 1.0):
    """In-place ``elu``."""
    return elu(input, alpha, True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace: bool = False):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _apply(input, lambda s: E.elu(s, _SELU_ALPHA) * _SELU_SCALE, inplace, "selu_")


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _apply(input, lambda s: E.elu(s / alpha, 1.0) * alpha, inplace, "celu_")


def gelu(input, approximate: str = "none"):
    """Gaussian error linear unit, exact (``'none'``) or the ``'tanh'`` approximation.

    >>> F.gelu(dg.tensor([0.0]))
    tensor([0.])
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return E.gelu(input, approximate)


def silu(input, inplace: bool = False):
    """``x * sigmoid(x)`` (swish)."""
    return _apply(input, E.silu, inplace, "silu_")


def mish(input, inplace: bool = False):
    """``x * tanh(softplus(x))``."""
    return _apply(input, lambda s: s * E.tanh(E.softplus(s)), inplace, "mish_")


def sigmoid(input):
    """``1 / (1 + exp(-x))``."""
    return E.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent."""
    return E.tanh(input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """``log(1 + exp(beta * x)) / beta`` (linear above ``threshold``)."""
    return E.softplus(input, beta, threshold)


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``softmax(-input)``."""
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """Clamp to ``[min_val, max_val]``."""
    if min_val > max_val:
        raise ValueError("hardtanh: min_val cannot be greater than max_val")
    if inplace:
        return _inplace_graph(input, lambda s: E.hardtanh(s, min_val, max_val), "hardtanh_")
    return E.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    """In-place ``hardtanh``."""
    return hardtanh(input, min_val, max_val, True)


def hardswish(input, inplace: bool = False):
    """``x * relu6(x + 3) / 6``."""
    return _apply(input, lambda s: s * E.hardtanh(s + 3.0, 0.0, 6.0) * (1.0 / 6.0), inplace,
                  "hardswish_")


def hardsigmoid(input, inplace: bool = False):
    """``relu6(x + 3) / 6``."""
    return _apply(input, lambda s: E.hardtanh(s + 3.0, 0.0, 6.0) * (1.0 / 6.0), inplace,
                  "hardsigmoid_")


def prelu(input, weight):
    """``max(0, x) + weight * min(0, x)``; ``weight`` has 1 or C (= ``input.shape[1]``) entries."""
    n = weight._data.size
    if input._data.ndim >= 2 and n > 1:
        c = input._data.shape[1]
        if n != c:
            raise RuntimeError(
                f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                f"numbers = {n} and channel size = {c}.")
        w = reshape(weight, c, *([1] * (input._data.ndim - 2)))
    elif input._data.ndim == 1 and n > 1:
        if n != input._data.shape[0]:
            raise RuntimeError(f"prelu: {n} parameters for an input of shape {list(input.shape)}")
        w = weight
    else:
        w = reshape(weight, ()) if n == 1 else weight
    return E.where(input > 0, input, w * input)


def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (E.abs(input) + 1.0)


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - E.tanh(input)


def softshrink(input, lambd: float = 0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    return E.where(input > lambd, input - lambd, E.where(input < -lambd, input + lambd, input * 0.0))


def hardshrink(input, lambd: float = 0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return E.where((input > lambd) | (input < -lambd), input, input * 0.0)


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """``x if x > threshold else value``."""
    return _apply(input, lambda s: E.where(s > threshold, s, value), inplace, "threshold_")


def glu(input, dim: int = -1):
    """``a * sigmoid(b)`` where ``a, b`` are the two halves of ``input`` along ``dim``."""
    nd = input._data.ndim
    d = dim % nd
    size = input._data.shape[d]
    if size % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {size}")

    a, b = chunk(input, 2, d)
    return a * E.sigmoid(b)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, generator=None):
    """Randomised leaky ReLU: random slopes in training, their mean in evaluation."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slopes = rng_of(generator).uniform(lower, upper, size=input._data.shape).astype(input._data.dtype)
    return E.where(input >= 0, input, input * _const(slopes))


# ---------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------

def _var_mean(x, dims):
    m = _mean(x, dims, keepdim=True)
    c = x - m
    return _mean(c * c, dims, keepdim=True), m, c


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalise over the last ``len(normalized_shape)`` dimensions, then scale and shift."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = tuple(normalized_shape)
    shape = input._data.shape
    if shape[len(shape) - len(ns):] != ns or len(ns) > len(shape):
        raise RuntimeError(
            f"layer_norm: Given normalized_shape={list(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size {list(shape)}")
    _require_float(input, "layer_norm")
    dt = input._data.dtype
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t._data.shape != ns or t._data.dtype != dt):
            raise RuntimeError(
                f"layer_norm: {name} must have shape {list(ns)} and dtype {input.dtype}, got "
                f"shape {list(t.shape)} and dtype {t.dtype}")
    return bind(layer_norm_p, (input, weight, bias), {"ndim": len(ns), "eps": float(eps)})


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimensions."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    nd = len(tuple(normalized_shape))
    dims = tuple(range(input._data.ndim - nd, input._data.ndim))
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps)
    y = input * E.rsqrt(_mean(input * input, dims, keepdim=True) + eps)
    return y * weight if weight is not None else y


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalise over groups of channels (dimension 1) and the spatial dimensions."""
    shape = input._data.shape
    if input._data.ndim < 2:
        raise RuntimeError(f"group_norm: expected an input with at least 2 dimensions (N, C, *), "
                           f"got shape {list(shape)}")
    n, c = shape[0], shape[1]
    if c % num_groups:
        raise RuntimeError(
            f"group_norm: Expected number of channels in input to be divisible by num_groups, "
            f"but got input of shape {list(shape)} and num_groups={num_groups}")
    _require_float(input, "group_norm")
    # the group size is spelled out (not -1): an empty batch (n = 0) cannot infer it
    x = reshape(input, n, num_groups, (c // num_groups) * math.prod(shape[2:]))
    y = reshape(bind(layer_norm_p, (x, None, None), {"ndim": 1, "eps": float(eps)}), *shape)
    bshape = (c,) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = y * reshape(weight, *bshape)
    if bias is not None:
        y = y + reshape(bias, *bshape)
    return y


def batch_norm(input, running_mean, running_var, weight=None, bias=None,
               training: bool = False, momentum: float | None = 0.1, eps: float = 1e-5):
    """Batch normalisation over dimension 1 (``(N, C)`` or ``(N, C, *)`` inputs).

    In training the batch statistics normalise the input and update
    ``running_mean``/``running_var`` in place (unbiased variance, weight
    ``momentum``); otherwise the running statistics are used.
    """
    shape = input._data.shape
    if input._data.ndim < 2:
        raise ValueError(f"batch_norm: expected 2D or higher input (N, C, *), got shape "
                         f"{list(shape)}")
    _require_float(input, "batch_norm")
    c = shape[1]
    dims = (0,) + tuple(range(2, len(shape)))
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if training and input._data.size == 0:
        # PyTorch: an empty batch gives an empty result (zero gradients for weight and
        # bias) and leaves running_mean / running_var as they are
        y = input
    elif training:
        count = input._data.size // c if c else 0
        if count <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size "
                f"{list(shape)}")
        var, mean, cx = _var_mean(input, dims)
        y = cx * E.rsqrt(var + eps)
        if running_mean is not None or running_var is not None:
            m = 0.0 if momentum is None else momentum
            _update_running(running_mean, running_var, mean._data.reshape(c),
                            var._data.reshape(c) * (count / (count - 1)), m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var must be given when "
                             "training=False")
        rm = reshape(running_mean, *bshape)
        rv = reshape(running_var, *bshape)
        y = (input - rm) * E.rsqrt(rv + eps)
    if weight is not None:
        y = y * reshape(weight, *bshape)
    if bias is not None:
        y = y + reshape(bias, *bshape)
    return y


def _update_running(running_mean, running_var, mean, var_unbiased, momentum):
    for buf, new in ((running_mean, mean), (running_var, var_unbiased)):
        if buf is None:
            continue
        d = buf._data
        d *= (1.0 - momentum)
        d += (momentum * new).astype(d.dtype, copy=False)
        bump_version(buf)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each (sample, channel) over its spatial dimensions."""
    shape = input._data.shape
    c = shape[1]
    dims = tuple(range(2, len(shape)))
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if use_input_stats:
        var, mean, cx = _var_mean(input, dims)
        y = cx * E.rsqrt(var + eps)
        if running_mean is not None:
            count = int(np.prod(shape[2:]))
            _update_running(running_mean, running_var, mean._data.mean(axis=0).reshape(c),
                            (var._data * (count / max(count - 1, 1))).mean(axis=0).reshape(c),
                            momentum)
    else:
        y = (input - reshape(running_mean, *bshape)) * E.rsqrt(reshape(running_var, *bshape) + eps)
    if weight is not None:
        y = y * reshape(weight, *bshape)
    if bias is not None:
        y = y + reshape(bias, *bshape)
    return y


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0):
    """Normalise each channel by the energy of its ``size`` neighbouring channels."""
    c = input._data.shape[1]
    sq = input * input
    # sum over a window of channels as a banded (C x C) matrix product on dimension 1
    band = np.zeros((c, c), dtype=input._data.dtype)
    for i in range(c):
        lo, hi = max(0, i - size // 2), min(c, i + (size - 1) // 2 + 1)
        band[i, lo:hi] = 1.0
    moved = sq.transpose(1, -1)
    summed = (moved @ _const(band.T)).transpose(1, -1)
    div = (summed * (alpha / size) + k) ** beta
    return input / div


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    norm = _pnorm(input, p, dim, keepdim=True)
    return input / E.clamp(norm, min=eps)


# ---------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------

def _check_p(p, op):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, p, dtype, generator=None):
    return (rng_of(generator).random(shape) >= p).astype(dtype)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Uses dyngraph's RNG (``dg.manual_seed``); the identity when ``training`` is False.
    """
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    _require_float(input, "dropout")
    if p == 1.0:
        scale = _const(np.zeros((), input._data.dtype))
    else:
        mask = _keep_mask(input._data.shape, p, input._data.dtype)
        mask *= 1.0 / (1.0 - p)
        scale = _const(mask)
    return _apply(input, lambda s: s * scale, inplace, "dropout_")


def _feature_dropout(input, p, training, inplace, op, min_dim):
    _check_p(p, op)
    if not training or p == 0.0:
        return input
    shape = input._data.shape
    if input._data.ndim < min_dim:
        raise RuntimeError(f"{op}: expected an input with at least {min_dim} dimensions, got "
                           f"shape {list(shape)}")
    mshape = shape[:2] + (1,) * (len(shape) - 2)
    if p == 1.0:
        scale = _const(np.zeros((), input._data.dtype))
    else:
        mask = _keep_mask(mshape, p, input._data.dtype) * (1.0 / (1.0 - p))
        scale = _const(mask.astype(input._data.dtype))
    return _apply(input, lambda s: s * scale, inplace, op + "_")


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of an ``(N, C, L)`` input."""
    return _feature_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of an ``(N, C, H, W)`` input.

    A 2-D input warns and drops element-wise (PyTorch's deprecated behaviour: each
    "channel" of an ``(N, C)`` input is one element)."""
    if input.ndim == 2:
        warnings.warn("dropout2d: Received a 2-D input to dropout2d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please "
                      "use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      "inputs with 2 spatial dimensions, a channel dimension, and an optional batch "
                      "dimension (i.e. 3D or 4D inputs).", UserWarning, stacklevel=3)
        return _feature_dropout(input, p, training, inplace, "dropout2d", 2)
    return _feature_dropout(input, p, training, inplace, "dropout2d", 3)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of an ``(N, C, D, H, W)`` input."""
    return _feature_dropout(input, p, training, inplace, "dropout3d", 4)


_ALPHA_PRIME = 1.7580993408473766  # SELU scale * alpha


def _alpha_dropout(input, p, training, mask_shape):
    _check_p(p, "alpha_dropout")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    dt = input._data.dtype
    keep = _keep_mask(mask_shape, p, dt)
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    b = (keep - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
    return input * _const((keep * a).astype(dt)) + _const(b.astype(dt))


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Dropout that keeps the self-normalising property of SELU networks."""
    return _alpha_dropout(input, p, training, input._data.shape)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Alpha dropout of whole channels."""
    s = input._data.shape
    return _alpha_dropout(input, p, training, s[:2] + (1,) * (len(s) - 2))


# ---------------------------------------------------------------------------
# distances
# ---------------------------------------------------------------------------

def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``x1 . x2 / max(||x1|| * ||x2||, eps)`` along ``dim`` (broadcasting)."""
    w12 = _sum(x1 * x2, dim)
    n1 = _sum(x1 * x1, dim)
    n2 = _sum(x2 * x2, dim)
    return w12 / E.sqrt(E.clamp(n1 * n2, min=eps * eps))


def pdist(input, p: float = 2.0):
    """``p``-norm distances between all pairs of rows ``i < j`` of an (N, M) input, in
    row-major order of the upper triangle (length N (N - 1) / 2).

    >>> F.pdist(dg.tensor([[0., 0.], [3., 4.], [6., 8.]]))
    tensor([ 5., 10.,  5.])
    """
    if input._data.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input._data.ndim}D "
                           f"(shape {list(input.shape)})")
    i, j = np.triu_indices(input._data.shape[0], 1)
    rows = input[_const(i.astype(np.int64))] - input[_const(j.astype(np.int64))]
    return _pnorm(rows, p, -1)




from ._functional_loss import (  # noqa: E402
    _legacy_reduction,  # noqa: F401  (used by nn.loss)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)


def gumbel_softmax(logits, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """A differentiable sample from the categorical distribution ``softmax(logits)``:
    ``softmax((logits + g) / tau)`` with Gumbel(0, 1) noise ``g`` from dyngraph's
    generator.  ``hard=True`` returns one-hot vectors whose gradient is the soft
    sample's (straight-through).  ``eps`` is unused, as in PyTorch.

    >>> y = F.gumbel_softmax(logits, tau=0.5, hard=True)   # rows are one-hot
    """
    logits = as_tensor(logits, "gumbel_softmax")
    require_float(logits, "gumbel_softmax")
    u = rng_of(None).exponential(1.0, logits._data.shape).astype(logits._data.dtype)
    gumbels = Tensor._make(-np.log(u), False, None, 0)           # -log(Exp(1)) ~ Gumbel(0, 1)
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft

    index = y_soft.argmax(dim, keepdim=True)
    y_hard = scatter(y_soft.detach() * 0.0, dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# convolution, pooling, sampling and attention live in their own modules
from .functional_attention import *  # noqa: E402, F403
from .functional_conv import *  # noqa: E402, F403
from .functional_ctc import *  # noqa: E402, F403
from .functional_sampling import *  # noqa: E402, F403
