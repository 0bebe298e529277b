"""Forward-mode AD with PyTorch's ``torch.autograd.forward_ad`` surface.

dyngraph has no per-op forward (jvp) rules: a tangent is obtained from the
reverse-mode graph by the double-vjp trick (see :mod:`.functional`).
``make_dual`` marks a primal as a graph input and remembers its tangent;
``unpack_dual`` differentiates the recorded graph twice -- ``uᵀJ`` with a
dummy cotangent ``u``, then ``d(uᵀJ·v)/du = J v`` -- so the tangent is exact
for every op with a differentiable rule.  Each ``unpack_dual`` costs about two
backward passes over the part of the graph between the duals and the output.

Differences from PyTorch: a dual tensor requires grad (it is how its uses are
recorded), and tangents are computed when unpacked, not along the way.

>>> import dyngraph.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     x = fwAD.make_dual(dg.tensor([0.0, 1.0]), dg.tensor([1.0, 1.0]))
...     y = x.sin() * 2
...     fwAD.unpack_dual(y).tangent            # 2 cos(x)
tensor([2.0000, 1.0806])
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from ..creation import zeros_like
from ..tensor import Tensor
from .grad_mode import enable_grad

__all__ = ["dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level",
           "UnpackedDualTensor"]


class _Levels(threading.local):
    def __init__(self):
        self.stack = []   # one list of (dual tensor, tangent) per open level


_LEVELS = _Levels()


class UnpackedDualTensor(NamedTuple):
    """``(primal, tangent)``; ``tangent`` is None when the tensor does not depend on a dual."""

    primal: object
    tangent: object


def enter_dual_level() -> int:
    """Open a new dual level (``dual_level`` does this for you)."""
    if _LEVELS.stack:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _LEVELS.stack.append([])
    return len(_LEVELS.stack) - 1


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the current dual level: its tangents are forgotten."""
    if not _LEVELS.stack:
        raise RuntimeError("Trying to exit a forward AD level that was not entered")
    _LEVELS.stack.pop()


class dual_level:  # noqa: N801
    """Context manager for forward-mode AD: dual tensors live inside it.

    >>> with dual_level():
    ...     ...
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def _current(level):
    if not _LEVELS.stack:
        raise RuntimeError(
            "forward AD: no dual level is open; use `with dg.autograd.forward_ad.dual_level():`")
    if level not in (None, 0):
        raise RuntimeError(f"forward AD: level {level} is not open (only level 0 is supported)")
    return _LEVELS.stack[-1]


def make_dual(tensor, tangent, *, level: int | None = None):
    """A tensor with the values of ``tensor`` that carries ``tangent`` in this level."""
    duals = _current(level)
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects a Tensor primal and a Tensor tangent")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            f"Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while "
            f"the given forward gradient is of size {list(tangent.shape)}.")
    if not tensor.is_floating_point():
        raise ValueError(f"make_dual: expected a floating point primal, got {tensor.dtype}")
    if tensor.requires_grad:
        dual = tensor.reshape(tensor.shape)      # a differentiable alias
    else:
        dual = tensor.detach().requires_grad_(True)
    duals.append((dual, tangent.detach()))
    return dual


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``: the tangent is ``J v`` through the recorded graph."""
    from . import grad  # noqa: PLC0415  (autograd/__init__ defines grad and imports this module)

    duals = _current(level) if _LEVELS.stack else []
    primal = tensor.detach()
    if not duals or not tensor.requires_grad or not tensor.is_floating_point():
        return UnpackedDualTensor(primal, None)
    with enable_grad():
        u = zeros_like(tensor).requires_grad_(True)
        inputs = [d for d, _ in duals]
        g = grad(tensor, inputs, grad_outputs=u, retain_graph=True, create_graph=True,
                 allow_unused=True)
        pairs = [(gi, v) for gi, (_, v) in zip(g, duals, strict=True)
                 if gi is not None and gi.requires_grad]
        if not pairs:
            return UnpackedDualTensor(primal, None)
        (jv,) = grad([p for p, _ in pairs], [u], grad_outputs=[v for _, v in pairs],
                     allow_unused=True)
    if jv is None:
        jv = zeros_like(primal)
    return UnpackedDualTensor(primal, jv)
