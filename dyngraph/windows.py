"""Window functions: ``torch.hann_window``, ``hamming_window``, ``blackman_window``,
``bartlett_window``, ``kaiser_window`` (PyTorch's formulas, ``periodic=True`` by default:
the window of length ``N + 1`` without its last sample, as spectral analysis uses).

>>> dg.hann_window(4)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""

from __future__ import annotations

import numpy as np

from . import creation as _c
from . import dtypes as _dt

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool, fn):
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    if window_length == 0:
        values = np.zeros(0)
    elif window_length == 1:
        values = np.ones(1)
    else:
        n = window_length + 1 if periodic else window_length
        values = fn(np.arange(n, dtype=np.float64), n)[:window_length]
    out = _c.tensor(values, dtype=dt, device=device)
    return out.requires_grad_(True) if requires_grad else out


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False):
    """``0.5 - 0.5 cos(2 pi n / (N - 1))``.

    >>> dg.hann_window(5, periodic=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1)))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False):
    """``alpha - beta cos(2 pi n / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: alpha - beta * np.cos(2 * np.pi * k / (n - 1)))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False):
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 0.42 - 0.5 * np.cos(2 * np.pi * k / (n - 1)) + 0.08 * np.cos(4 * np.pi * k / (n - 1)))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False):
    """The triangular window ``1 - |2 n / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False):
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: np.i0(beta * np.sqrt(np.clip(1 - (2 * k / (n - 1) - 1) ** 2, 0, None)))
                   / np.i0(beta))
