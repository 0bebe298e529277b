"""The PyTorch surface of the fused neural-network primitives: ``softmax``/``log_softmax``,
``linear``, ``embedding`` (and its ``max_norm`` renormalisation), ``nll_loss`` over any
number of dimensions.

The primitives are in :mod:`dyngraph.ops.nn`; ``dyngraph.nn.functional`` builds on these.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._core.graph import bump_version
from ..ops.nn import (
    _raw,
    embedding_p,
    linear_p,
    log_softmax_p,
    nll_loss_p,
    softmax_p,
)
from ..ops.registry import bind
from ..ops.structural import reshape_p
from ..tensor import Tensor, _wrap_dim
from ._args import as_tensor_arg

# Only names whose top-level PyTorch form has the same signature are exported as dg.*;
# linear/embedding/nll_loss are reached through dg.nn.functional.
__all__ = ["softmax", "log_softmax"]


def _softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when dim is not given (with a deprecation warning)

    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_args(input, dim, dtype, op):
    input = as_tensor_arg(input, op)
    if dtype is not None:
        input = input.to(dtype)
    nd = input._data.ndim
    if dim is None:
        dim = _softmax_dim(nd)
    d = _wrap_dim(dim, nd, op) if nd else 0
    return input, d


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``log(softmax(input))`` along ``dim``, computed stably in one primitive.

    >>> dg.log_softmax(dg.tensor([1.0, 2.0, 3.0]), dim=0)
    tensor([-2.4076, -1.4076, -0.4076])
    """
    input, d = _softmax_args(input, dim, dtype, "log_softmax")
    if input._data.ndim == 0:
        return bind(log_softmax_p, (reshape_p(input, shape=(1,)),), {"dim": 0}).reshape(())
    return bind(log_softmax_p, (input,), {"dim": d})


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``exp(x) / exp(x).sum(dim)``, computed stably (the maximum is subtracted first).

    >>> dg.softmax(dg.tensor([1.0, 1.0]), dim=0)
    tensor([0.5000, 0.5000])
    """
    if type(dim) is int and dtype is None and type(input) is Tensor:
        # the usual call (a Tensor, an int dim in range, no dtype): _softmax_args' result inline
        nd = input._data.ndim
        if nd and -nd <= dim < nd:
            return bind(softmax_p, (input,), {"dim": dim + nd if dim < 0 else dim})
    input, d = _softmax_args(input, dim, dtype, "softmax")
    if input._data.ndim == 0:
        return bind(softmax_p, (reshape_p(input, shape=(1,)),), {"dim": 0}).reshape(())
    return bind(softmax_p, (input,), {"dim": d})


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (one fused node).

    >>> dg.linear(dg.ones(2, 3), dg.ones(4, 3)).shape
    dyngraph.Size([2, 4])
    """
    for pos, (arg, t) in enumerate((("input", input), ("weight", weight)), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"linear(): argument '{arg}' (position {pos}) must be Tensor, not "
                            f"{type(t).__name__}")
    xs, ws = input._data.shape, weight._data.shape
    if weight._data.ndim != 2 or not xs or xs[-1] != ws[1]:
        raise RuntimeError(
            f"linear: expected input with last dimension {ws[-1] if ws else '?'} to match "
            f"weight of shape {list(ws)} (out_features x in_features), got input of shape "
            f"{list(xs)}")
    if input._data.dtype != weight._data.dtype:
        raise RuntimeError(
            f"linear: input dtype {input.dtype} and weight dtype {weight.dtype} differ: "
            "convert one with .to(dtype) (e.g. model.double() or x.float())")
    if bias is None:
        return bind(linear_p, (input, weight))
    if bias._data.shape not in ((ws[0],), (), (1,)):
        raise RuntimeError(
            f"linear: bias of shape {list(bias.shape)} does not match out_features={ws[0]}")
    return bind(linear_p, (input, weight, bias))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` selected by the integer tensor ``input`` (functional form).

    >>> dg.embedding(dg.tensor([0, 2]), dg.eye(3))
    tensor([[1., 0., 0.],
            [0., 0., 1.]])
    """
    idx = as_tensor_arg(input, "embedding")
    if idx._data.dtype.kind not in "iu":
        raise RuntimeError(
            f"embedding: expected an integer tensor of indices (int64 or int32), got "
            f"{idx.dtype} of shape {list(idx.shape)}; convert it with .long()")
    n = weight._data.shape[0]
    lo, hi = index_range(idx._data)
    if lo < 0 or hi >= n:
        bad = hi if hi >= n else lo
        raise IndexError(
            f"embedding: index {bad} is out of range for an embedding table with "
            f"{n} rows (num_embeddings={n}); indices must be in [0, {n - 1}]")
    if max_norm is not None:
        embedding_renorm_(weight, idx, max_norm, norm_type)
    return bind(embedding_p, (weight, idx), embedding_params(n, padding_idx, scale_grad_by_freq))


def index_range(indices: np.ndarray) -> tuple:
    """``(min, max)`` of an integer index array, ``(0, 0)`` when it is empty: the range
    check of an embedding lookup (one index: no reductions)."""
    if indices.size == 1:
        v = int(indices.item())
        return v, v
    if indices.size:
        return int(indices.min()), int(indices.max())
    return 0, 0


def embedding_params(n: int, padding_idx, scale_grad_by_freq) -> dict:
    """``embedding_p``'s params for a table of ``n`` rows: ``padding_idx`` as a row (-1 for
    none; a negative one counts from the end)."""
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += n
    return {"padding_idx": int(padding_idx), "scale_grad_by_freq": bool(scale_grad_by_freq)}


def embedding_renorm_(weight, indices, max_norm: float, norm_type: float = 2.0):
    """Rescale, in place, the rows of ``weight`` used by ``indices`` whose norm exceeds ``max_norm``."""
    rows = np.unique(_raw(indices).reshape(-1))
    w = weight._data
    sub = w[rows]
    norms = np.linalg.norm(sub.reshape(len(rows), -1), ord=norm_type, axis=1) \
        if np.isfinite(norm_type) else np.abs(sub.reshape(len(rows), -1)).max(axis=1)
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
    w[rows] = sub * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    bump_version(weight)
    return weight


def nll_loss_nd(logp: Tensor, target: Tensor, weight=None, reduction: str = "mean",
                ignore_index: int = -100, op: str = "nll_loss") -> Tensor:
    """Negative log-likelihood over class dimension 1 of ``logp`` ``(N, C, d1, ...)``.

    Checks the target (integer dtype, shape, class range) and names ``op`` in errors.
    """
    if logp._data.ndim == 1:
        check_nll_target(logp, target, op)
        out = nll_loss_nd(reshape_p(logp, shape=(1,) + logp._data.shape),
                          reshape_p(target, shape=(1,)), weight, reduction,
                          ignore_index, op)
        return reshape_p(out, shape=()) if reduction == "none" else out
    weight = check_nll_args(logp, target, weight, reduction, ignore_index, op)
    params = {"reduction": reduction, "ignore_index": int(ignore_index)}
    return bind(nll_loss_p, (logp, target, weight), params)


def check_nll_target(logp: Tensor, target: Tensor, op: str) -> None:
    """The target's dtype (int64 or uint8) and, for an unbatched ``(C,)`` input, its shape."""
    if target._data.dtype not in (np.int64, np.uint8):  # PyTorch: "expected ... Long or Byte"
        raise RuntimeError(
            f"{op}: expected target of class indices with dtype int64 (Long) or uint8 (Byte), "
            f"got {target.dtype} of shape {list(target.shape)}; use .long(), or pass class "
            "probabilities with the same shape as the input")
    if logp._data.ndim == 1 and target._data.ndim != 0:
        raise ValueError(
            f"{op}: for an unbatched input of shape {list(logp.shape)} the target must be a "
            f"0-d tensor of one class index, got shape {list(target.shape)}")


def check_nll_args(logp: Tensor, target: Tensor, weight, reduction: str, ignore_index: int,
                   op: str):
    """The checks of ``nll_loss_nd`` for an ``(N, C, d1, ...)`` input (target shape and class
    range, weight shape, reduction); returns the weight in the input's dtype (or None).

    The class-range check reads the target's values only to raise an error.
    """
    check_nll_target(logp, target, op)
    ld, td = logp._data, target._data
    if ld.ndim < 1 or td.shape != ld.shape[:1] + ld.shape[2:]:
        # PyTorch: a batch-size mismatch is a ValueError, any other target shape a RuntimeError
        kind = ValueError if td.ndim == ld.ndim - 1 and td.shape[:1] != ld.shape[:1] else RuntimeError
        raise kind(
            f"{op}: expected target of shape {list(ld.shape[:1] + ld.shape[2:])} for input of "
            f"shape {list(ld.shape)} (N, C, d1, ...), got target of shape {list(td.shape)}")
    c = ld.shape[1]
    if td.size:
        # one target (a per-item loss): no reductions for the range check
        lo, hi = (int(td.item()),) * 2 if td.size == 1 else (int(td.min()), int(td.max()))
        if lo < 0 or hi >= c:
            valid = td[td != ignore_index]
            lo, hi = (int(valid.min()), int(valid.max())) if valid.size else (0, 0)
            if lo < 0 or hi >= c:
                bad = hi if hi >= c else lo
                raise IndexError(
                    f"{op}: target class index {bad} is out of range for {c} classes "
                    f"(valid indices are 0..{c - 1}, or ignore_index={ignore_index})")
    if weight is not None:
        if weight._data.shape != (c,):
            raise RuntimeError(
                f"{op}: weight should be a 1D tensor of size {c} (one per class), got shape "
                f"{list(weight.shape)}")
        if weight._data.dtype != ld.dtype:
            weight = weight.to(logp.dtype)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction")
    return weight
