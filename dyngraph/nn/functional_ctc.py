"""``F.ctc_loss``: connectionist temporal classification, the forward (alpha) recursion
over the blank-extended targets written with dyngraph operations, so autograd gives the
gradient.

Unreachable alignment states carry a large negative log-probability instead of ``-inf``
(so no ``nan`` reaches the gradient); a sample with no valid alignment gets an infinite
loss, or 0 with ``zero_infinity=True``, as in PyTorch.  The gradient is the true one of
the loss; with ``log_probs = logits.log_softmax(-1)`` (the documented use) the gradient
that reaches ``logits`` is PyTorch's.

>>> log_probs = dg.randn(12, 2, 5).log_softmax(2)
>>> F.ctc_loss(log_probs, dg.tensor([[1, 2, 2], [3, 1, 0]]), (12, 10), (3, 2))
"""

from __future__ import annotations

import math

import numpy as np

from .. import creation as _c
from ..surface import elementwise as _ew
from ..surface import reduction as _red
from ..surface import shape as _sh
from ..tensor import Tensor

__all__ = ["ctc_loss"]

_NEG = -1e30    # "log 0" for unreachable states: finite, so gradients stay finite


def _lengths(x, n: int, name: str) -> list[int]:
    vals = x.tolist() if isinstance(x, Tensor) else list(x)
    vals = [int(v) for v in (vals if isinstance(vals, list) else [vals])]
    if len(vals) != n:
        raise RuntimeError(f"ctc_loss: {name} must have one entry per batch element ({n}), got {len(vals)}")
    return vals


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """CTC loss of ``log_probs`` (``(T, N, C)``, or ``(T, C)`` unbatched) against ``targets``
    (``(N, S)`` padded, or the targets of all samples concatenated); ``reduction='mean'``
    divides each loss by its target length and averages over the batch.

    >>> loss = F.ctc_loss(out.log_softmax(2), targets, input_lengths, target_lengths)
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    T, N, C = log_probs.shape
    in_lens = _lengths(input_lengths, N, "input_lengths")
    tg_lens = _lengths(target_lengths, N, "target_lengths")
    if max(in_lens, default=0) > T:
        raise RuntimeError(f"ctc_loss: an input length {max(in_lens)} exceeds the time dimension {T}")
    tg = np.asarray(targets.detach().cpu().numpy()).astype(np.int64)
    if tg.ndim == 1:        # concatenated targets
        offsets = np.concatenate([[0], np.cumsum(tg_lens)])
        rows = [tg[offsets[i]:offsets[i + 1]] for i in range(N)]
    else:
        rows = [tg[i, :tg_lens[i]] for i in range(N)]
    S = max(tg_lens, default=0)
    L = 2 * S + 1
    ext = np.full((N, L), blank, dtype=np.int64)        # blank, t1, blank, t2, ..., blank
    skip = np.zeros((N, L), dtype=bool)                  # may s come from s - 2?
    for i, row in enumerate(rows):
        ext[i, 1:2 * len(row):2] = row
        for s in range(3, 2 * len(row), 2):
            skip[i, s] = ext[i, s] != ext[i, s - 2]
    ext_t = _c.from_numpy(ext)
    emit = log_probs.gather(2, ext_t.unsqueeze(0).expand(T, N, L))      # (T, N, L)
    dtype = log_probs.dtype
    neg = _c.full((N, 1), _NEG, dtype=dtype)
    skip_t = _c.from_numpy(skip)
    start = np.full((N, L), _NEG)
    start[:, 0] = 0.0
    start[[i for i in range(N) if tg_lens[i] > 0], 1] = 0.0
    alpha = _c.from_numpy(start).to(dtype) + emit[0]
    alpha = _ew.maximum(alpha, _c.full_like(alpha, _NEG))
    for t in range(1, T):
        prev1 = _sh.cat([neg, alpha[:, :-1]], 1)
        prev2 = _sh.cat([neg, neg, alpha[:, :-2]], 1) if L > 2 else _c.full_like(alpha, _NEG)
        prev2 = _ew.where(skip_t, prev2, _c.full_like(prev2, _NEG))
        new = _red.logsumexp(_sh.stack([alpha, prev1, prev2]), 0) + emit[t]
        new = _ew.maximum(new, _c.full_like(new, _NEG))
        active = _c.from_numpy(np.array([t < n for n in in_lens])).unsqueeze(1)
        alpha = _ew.where(active, new, alpha)
    last = _c.from_numpy(np.array([2 * n for n in tg_lens]))                   # index of the final blank
    lastlab = _c.from_numpy(np.array([max(2 * n - 1, 0) for n in tg_lens]))    # of the final label
    a_end = alpha.gather(1, last.unsqueeze(1)).squeeze(1)
    a_lab = alpha.gather(1, lastlab.unsqueeze(1)).squeeze(1)
    has_label = _c.from_numpy(np.array([n > 0 for n in tg_lens]))
    a_lab = _ew.where(has_label, a_lab, _c.full_like(a_lab, _NEG))
    loss = -_red.logsumexp(_sh.stack([a_end, a_lab]), 0)
    impossible = (loss > -_NEG / 2) | _c.from_numpy(np.array([n == 0 for n in in_lens]))
    if zero_infinity:
        loss = _ew.where(impossible, _c.zeros_like(loss), loss)
    else:
        loss = _ew.where(impossible, _c.full_like(loss, math.inf), loss)
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    denom = _c.tensor([max(n, 1) for n in tg_lens], dtype=dtype)
    return (loss / denom).mean()
