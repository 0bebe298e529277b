"""Grad-mode switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

All state lives in one thread-local object, :data:`STATE`
(:mod:`dyngraph._core.state`), which the dispatcher reads on every primitive
call (one attribute look-up).  Each thread starts with
gradients enabled, as in PyTorch.
"""

from __future__ import annotations

import functools

from .state import STATE

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled",
]




def is_grad_enabled() -> bool:
    """True when operations record the graph in this thread."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _GradModeContext:
    """Base for context managers that are also decorators (like PyTorch's)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._ctor_args()):
                return fn(*args, **kwargs)

        return wrapper

    def _ctor_args(self):
        return ()

    def clone(self):
        return self.__class__(*self._ctor_args())


class no_grad(_GradModeContext):  # noqa: N801
    """Disable graph recording inside the block or decorated function.

    >>> with dg.no_grad():
    ...     y = x * 2        # y.requires_grad is False
    """

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class enable_grad(_GradModeContext):  # noqa: N801
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set grad mode on or off; usable as a function, context manager or decorator.

    >>> dg.set_grad_enabled(False)   # takes effect immediately, like PyTorch
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def _ctor_args(self):
        return (self.mode,)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # used as a decorator: undo the eager switch
        return super().__call__(fn)


class inference_mode(_GradModeContext):  # noqa: N801
    """Like ``no_grad``, and tensors made inside are marked as inference tensors.

    dyngraph's no-grad path is already free of bookkeeping, so inference mode
    costs the same as ``no_grad``; it exists so PyTorch code runs unchanged.
    """

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def _ctor_args(self):
        return (self.mode,)

    def __enter__(self):
        self._prev = (STATE.grad_enabled, STATE.inference)
        if self.mode:
            STATE.grad_enabled = False
            STATE.inference = True

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self._prev
        return False
