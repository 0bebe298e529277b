"""Loss functions of ``dg.nn.functional`` (``mse_loss``, ``cross_entropy``, ...).

Compositions of primitives, numerically stable (log-sum-exp forms); ``nll_loss``
and ``log_softmax`` are fused primitives of :mod:`dyngraph.ops.nn`.  Import them
from ``dg.nn.functional``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from .._core.state import STATE, concrete
from ..ops.nn import SoftmaxResidual, cross_entropy_p
from ..ops.registry import bind
from ..surface import elementwise as E
from ..surface.indexing import gather, one_hot
from ..surface.nn import check_nll_args, log_softmax, nll_loss_nd
from ..surface.reduction import mean as _mean
from ..surface.reduction import sum as _sum
from ..surface.shape import reshape
from ..tensor import Tensor
from ._functional_common import as_tensor as _t
from ._functional_common import const as _const
from ._functional_common import logsigmoid, pairwise_distance
from ._functional_common import require_float as _require_float

__all__ = [
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "cosine_embedding_loss", "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
]



_REDUCTIONS = ("none", "mean", "sum")
_INT64 = np.dtype(np.int64)


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='mean' (or 'sum'/'none') instead.", stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return _mean(loss)
    if reduction == "sum":
        return _sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                     "(use 'none', 'mean' or 'sum')")


def _check_pair(input, target, op):
    _require_float(input, op)
    if input._data.shape != target._data.shape:
        warnings.warn(
            f"{op}: Using a target size ({list(target.shape)}) that is different to the input "
            f"size ({list(input.shape)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
             weight=None):
    """Mean squared error ``(input - target)^2``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "mse_loss"), _t(target, "mse_loss")
    _check_pair(input, target, "mse_loss")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
            weight=None):
    """Mean absolute error ``|input - target|``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "l1_loss"), _t(target, "l1_loss")
    _check_pair(input, target, "l1_loss")
    loss = E.abs(input - target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "smooth_l1_loss"), _t(target, "smooth_l1_loss")
    _check_pair(input, target, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = input - target
    ad = E.abs(d)
    if beta == 0.0:
        loss = ad
    else:
        loss = E.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    input, target = _t(input, "huber_loss"), _t(target, "huber_loss")
    _check_pair(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = input - target
    ad = E.abs(d)
    loss = E.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "huber_loss")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``.

    ``input`` is ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``; ``target`` holds class indices.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "nll_loss"), _t(target, "nll_loss")
    _require_float(input, "nll_loss")
    return nll_loss_nd(input, target, weight, reduction, ignore_index, "nll_loss")


def _fused_params(input, reduction, ignore_index) -> dict:
    """Parameters of the fused node; eagerly, when it is recorded, a holder for the
    exponentials its backward reuses (never under an interpreter: a captured graph would
    share one holder between replays)."""
    params = {"reduction": reduction, "ignore_index": int(ignore_index)}
    if STATE.interpreter is None and input._rg and STATE.grad_enabled:
        params["residual"] = SoftmaxResidual()
    return params


def _in_range_but_ignored(td, c, ignore_index) -> bool:
    """Every target is ``ignore_index`` or a class in ``[0, c)`` (all of them ignored is
    allowed: the mean is then nan and the gradient 0, as in PyTorch)."""
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        return False
    valid = td[td != ignore_index]
    return not valid.size or (0 <= int(valid.min()) and int(valid.max()) < c)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy between logits ``input`` (class dimension 1) and ``target``.

    ``target`` is either class indices (integer, shape ``(N, d1, ...)``) or class
    probabilities (float, same shape as ``input``).  Computed as
    ``nll_loss(log_softmax(input, 1))``, numerically stable; ``(N, C)`` logits with class
    indices and no ``weight``/``label_smoothing`` are one fused node (``ops.nn.cross_entropy_p``).

    >>> F.cross_entropy(dg.zeros(2, 3), dg.tensor([0, 2]))
    tensor(1.0986)
    """
    state = STATE
    if weight is None and label_smoothing == 0.0 and size_average is None and reduce is None \
            and state.interpreter is None and isinstance(input, Tensor) \
            and isinstance(target, Tensor) and reduction in _REDUCTIONS:
        # The per-item case of most training loops ((N, C) logits, int64 class indices, in
        # range or ignore_index), run eagerly: the checks below would accept it, and they cost
        # more than the kernels on small inputs (issue 13), so test just that and bind the
        # fused node, which keeps its exponentials for the backward (docs/performance.md,
        # "Loss path").  Interpreters take the checks below (no value guards), then the same
        # node without the residual.
        shape, tshape = input._data.shape, target._data.shape
        if len(shape) == 2 and target._data.dtype == _INT64 \
                and _dt.is_floating_point_dtype(input._data.dtype) \
                and tshape == shape[:1] and shape[0]:
            td = concrete(target, "cross_entropy: target classes in range")
            c = shape[1]
            if shape[0] == 1:
                lo = hi = int(td.item())
            else:  # the ufunc reductions directly: no ndarray.min/max wrapper frames
                lo = int(np.minimum.reduce(td, axis=None))
                hi = int(np.maximum.reduce(td, axis=None))
            if (0 <= lo and hi < c) or _in_range_but_ignored(td, c, ignore_index):
                # _fused_params, inline (no interpreter here)
                params = {"reduction": reduction, "ignore_index": int(ignore_index)}
                if input._rg and state.grad_enabled:
                    params["residual"] = SoftmaxResidual()
                return bind(cross_entropy_p, (input, target), params)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "cross_entropy"), _t(target, "cross_entropy")
    _require_float(input, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"cross_entropy: {reduction!r} is not a valid value for reduction")
    nd = input._data.ndim
    cdim = 0 if nd == 1 else 1
    c = input._data.shape[cdim]
    if nd == 2 and weight is None and label_smoothing == 0.0 \
            and not _dt.is_floating_point_dtype(target._data.dtype):
        # (N, C) logits and class indices: one fused node (log_softmax + nll_loss), the same
        # one the short path above binds, so eager, graph capture and dg.autobatch agree
        check_nll_args(input, target, None, reduction, ignore_index, "cross_entropy")
        return bind(cross_entropy_p, (input, target),
                    _fused_params(input, reduction, ignore_index))
    # Otherwise two fused primitives, log_softmax and nll_loss (and the smoothing terms).
    logp = log_softmax(input, cdim)
    if _dt.is_floating_point_dtype(target._data.dtype):
        return _cross_entropy_probs(logp, input, target, weight, reduction, label_smoothing, c,
                                    cdim)
    nll = nll_loss_nd(logp, target, weight, reduction, ignore_index, "cross_entropy")
    if label_smoothing == 0.0:
        return nll
    wshape = [1] * nd
    wshape[cdim] = c
    if weight is not None:
        smooth = -_sum(logp * reshape(weight, *wshape), cdim)
    else:
        smooth = -_sum(logp, cdim)
    t = concrete(target, "cross_entropy(label_smoothing): ignored positions and class weights")
    ignored = t == ignore_index
    if ignored.any():
        smooth = smooth * _const((~ignored).astype(input._data.dtype))
    if reduction == "mean":
        if weight is not None:
            wt = concrete(weight, "cross_entropy(label_smoothing): the mean's class weights")[
                np.where(ignored, 0, t)][~ignored]
            denom = wt.sum()
        else:
            denom = (~ignored).sum()
        smooth = _sum(smooth) / float(denom)
    elif reduction == "sum":
        smooth = _sum(smooth)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / c)


def _cross_entropy_probs(logp, input, target, weight, reduction, label_smoothing, c, cdim):
    if target._data.shape != input._data.shape:
        raise RuntimeError(
            f"cross_entropy: class-probability targets must have the same shape as the input "
            f"{list(input.shape)}, got {list(target.shape)}")
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / c
    prod = logp * target
    if weight is not None:
        wshape = [1] * input._data.ndim
        wshape[cdim] = c
        prod = prod * reshape(weight, *wshape)
    loss = -_sum(prod, cdim)
    if reduction == "mean":
        n = input._data.size // c if c else 0
        return _sum(loss) / float(n) if n else _sum(loss) * float("nan")
    if reduction == "sum":
        return _sum(loss)
    return loss


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``-(t log(x) + (1 - t) log(1 - x))`` for probabilities ``x`` (logs clamped at -100)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "binary_cross_entropy"), _t(target, "binary_cross_entropy")
    _require_float(input, "binary_cross_entropy")
    if input._data.shape != target._data.shape:
        raise ValueError(
            f"binary_cross_entropy: Using a target size ({list(target.shape)}) that is "
            f"different to the input size ({list(input.shape)}) is deprecated. Please ensure "
            "they have the same size.")
    x = input._data
    if x.size and (np.nanmin(x) < 0 or np.nanmax(x) > 1):
        raise RuntimeError(
            "binary_cross_entropy: all elements of input should be between 0 and 1 (they are "
            "probabilities); for logits use binary_cross_entropy_with_logits / BCEWithLogitsLoss")
    loss = -(target * E.clamp(E.log(input), min=-100.0)
             + (1.0 - target) * E.clamp(E.log(1.0 - input), min=-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    """Sigmoid + binary cross entropy in one stable expression (log-sum-exp form)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input = _t(input, "binary_cross_entropy_with_logits")
    target = _t(target, "binary_cross_entropy_with_logits")
    _require_float(input, "binary_cross_entropy_with_logits")
    if input._data.shape != target._data.shape:
        raise ValueError(
            f"binary_cross_entropy_with_logits: Target size ({list(target.shape)}) must be the "
            f"same as input size ({list(input.shape)})")
    # softplus(-x) = log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0), exact and stable
    sp = E.log1p(E.exp(-E.abs(input))) + E.relu(-input)
    if pos_weight is not None:
        log_weight = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * input + log_weight * sp
    else:
        loss = (1.0 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    """Kullback-Leibler divergence ``target * (log(target) - input)``; ``input`` is log-probabilities."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _t(input, "kl_div"), _t(target, "kl_div")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.", stacklevel=2)
    if log_target:
        loss = E.exp(target) * (target - input)
    else:
        loss = E.xlogy(target, target) - target * input
    if reduction == "batchmean":
        if input._data.ndim == 0:
            return _sum(loss)
        return _sum(loss) / float(input._data.shape[0])
    return _reduce(loss, reduction, "kl_div")


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, size_average=None,
                          reduce=None, reduction: str = "mean"):
    """``1 - cos(x1, x2)`` for ``target == 1``; ``max(0, cos(x1, x2) - margin)`` for ``-1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    eps = 1e-12
    dim = input1._data.ndim - 1
    prod = _sum(input1 * input2, dim)
    mag = E.sqrt((_sum(input1 * input1, dim) + eps) * (_sum(input2 * input2, dim) + eps))
    cos = prod / mag
    zeros = cos * 0.0
    pos = E.where(target == 1, 1.0 - cos, zeros)
    neg = E.where(target == -1, E.clamp(cos - margin, min=0.0), zeros)
    return _reduce(pos + neg, reduction, "cosine_embedding_loss")


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean"):
    """``max(0, -target * (x1 - x2) + margin)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = E.clamp(-target * (input1 - input2) + margin, min=0.0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    z = -target * input
    loss = E.log1p(E.exp(-E.abs(z))) + E.relu(z)
    return _reduce(loss, reduction, "soft_margin_loss")


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean"):
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j])^p / C`` per
    sample (times ``weight[y]`` when given), for ``input`` (N, C) or (C,).

    >>> F.multi_margin_loss(dg.tensor([[0.1, 0.2, 0.4, 0.8]]), dg.tensor([3]))
    tensor(0.3250)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got p={p}")
    x = _t(input, "multi_margin_loss")
    _require_float(x, "multi_margin_loss")
    squeeze = x.ndim <= 1
    x2 = x.reshape(1, -1) if squeeze else x
    y = _t(target, "multi_margin_loss").reshape(-1)
    if x2.ndim != 2 or y.shape[0] != x2.shape[0]:
        raise ValueError(f"multi_margin_loss: expected input (N, C) and target (N,), got shapes "
                         f"{list(x.shape)} and {list(_t(target, 'multi_margin_loss').shape)}")

    c = x2.shape[1]
    x_y = gather(x2, 1, y.unsqueeze(1))
    z = E.clamp(margin - x_y + x2, min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * _t(weight, "multi_margin_loss").to(x2.dtype)[y].unsqueeze(1)
    not_target = 1.0 - one_hot(y, c).to(x2.dtype)
    loss = _sum(z * not_target, 1) / c
    if squeeze:
        loss = loss.reshape(())
    return _reduce(loss, reduction, "multi_margin_loss")


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = input * 0.0
    margin_clamp = E.clamp(margin - input, min=0.0)
    loss = E.where(target == 1, input, zeros) + E.where(target == -1, margin_clamp, zeros)
    return _reduce(loss, reduction, "hinge_embedding_loss")


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    """Poisson negative log-likelihood (optionally with Stirling's term)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = E.exp(input) - target * input
    else:
        loss = input - target * E.log(input + eps)
    if full:
        t = target
        stirling = t * E.log(t) - t + E.log(t * (2 * math.pi)) * 0.5
        loss = loss + E.where(t > 1, stirling, t * 0.0)
    return _reduce(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean"):
    """``0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps))`` (+ const if ``full``)."""
    if var._data.shape != input._data.shape:
        if input._data.shape[:-1] == var._data.shape:
            var = reshape(var, *var.shape, 1)
        elif not (input._data.shape[:-1] == var._data.shape[:-1] and var._data.shape[-1:] == (1,)):
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size {list(var.shape)} for "
                             f"input of shape {list(input.shape)}")
    if np.any(var._data < 0):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    v = E.clamp(var.detach(), min=eps)
    v = var + (v - var).detach()  # clamp without blocking the gradient, as PyTorch does
    d = input - target
    loss = (E.log(v) + d * d / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``pairwise_distance``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    dp = pairwise_distance(anchor, positive, p, eps)
    dn = pairwise_distance(anchor, negative, p, eps)
    if swap:
        ds = pairwise_distance(positive, negative, p, eps)
        dn = E.minimum(dn, ds)
    loss = E.clamp(dp - dn + margin, min=0.0)
    return _reduce(loss, reduction, "triplet_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None,
                           reduction: str = "mean"):
    """Multi-label hinge loss: each row of ``target`` lists the sample's classes (int64),
    ended by the first ``-1``; every (listed class ``j``, other class ``k``) pair adds
    ``max(0, 1 - (x[j] - x[k])) / C``.

    >>> F.multilabel_margin_loss(dg.tensor([[0.1, 0.2, 0.4, 0.8]]), dg.tensor([[3, 0, -1, 1]]))
    tensor(0.8500)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    # the target only selects entries (no gradient), as values
    x, t = input, concrete(target, "multilabel_margin_loss: the target lists the classes")
    if x._data.ndim not in (1, 2) or t.shape != x._data.shape or t.dtype.kind not in "iu":
        raise RuntimeError(
            f"multilabel_margin_loss: expected input of shape (C) or (N, C) and an int64 target "
            f"of the same shape, got input {list(x.shape)} and target {list(t.shape)} ({t.dtype})")
    one = x._data.ndim == 1
    if one:
        x, t = reshape(x, (1, -1)), t.reshape(1, -1)
    n, c = t.shape
    if np.any(t >= c) or np.any(t < -1):
        raise RuntimeError(f"multilabel_margin_loss: target values must lie in [-1, {c - 1}]")
    listed = np.cumprod(t >= 0, axis=1).astype(bool)  # entries before the first -1
    safe = np.where(listed, t, 0)
    is_target = np.zeros((n, c), bool)
    rows = np.repeat(np.arange(n), c)[listed.reshape(-1)]
    is_target[rows, safe[listed]] = True
    pair = listed[:, :, None] & ~is_target[:, None, :]  # (N, listed j, other class k)
    xj = x.gather(1, _const(safe.astype(np.int64)))
    margins = E.clamp(1.0 - xj.unsqueeze(2) + x.unsqueeze(1), min=0.0)
    loss = _sum(margins * _const(pair.astype(x._data.dtype)), (1, 2)) / c
    if one:
        loss = reshape(loss, ())
    return _reduce(loss, reduction, "multilabel_margin_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """Mean over classes of the binary cross entropy of ``sigmoid(input)`` and ``target``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = _mean(loss, input._data.ndim - 1)
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")
