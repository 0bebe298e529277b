"""``dg.autograd.grad_mode``: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

The switches live on the ground floor (:mod:`dyngraph._core.grad_mode`, beside
the dispatch state they flip) so primitives below autograd can use them; this
module keeps PyTorch's module name.
"""

from __future__ import annotations

from .._core.grad_mode import (  # noqa: F401  (re-exported)
    STATE,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled",
]
