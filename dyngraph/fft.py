"""``torch.fft``: the real-valued helpers (sample frequencies and spectrum shifts).

The transforms themselves (``fft``, ``rfft``, ``ifft``, ``irfft``, ``fftn``...) return or take
complex tensors, and dyngraph has no complex dtypes, so they are not provided; a program
that calls one through ``dyngraph.run_torch`` stops with an error saying so.  What is here
works on real tensors with PyTorch's results and gradients:

>>> dg.fft.fftfreq(4)
tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
>>> dg.fft.fftshift(dg.arange(5))
tensor([3, 4, 0, 1, 2])
"""

from __future__ import annotations

from . import creation as _c
from . import dtypes as _dt
from .surface import shape as _sh

__all__ = ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _freq_tensor(values, n: int, d: float, dtype, device, requires_grad: bool):
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"fftfreq: n must be a non-negative integer, got {n!r}")
    out = _c.tensor(values, dtype=dtype or _dt.get_default_dtype(), device=device)
    if not out.dtype.is_floating_point:
        raise RuntimeError(f"fftfreq: expected a floating point dtype, got {out.dtype}")
    if values:
        out = out / (d * n)    # rfftfreq(0) is [0 / 0] = [nan], as in PyTorch
    return out.requires_grad_(requires_grad) if requires_grad else out


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False,
            layout=None, pin_memory: bool = False):
    """The sample frequencies of an ``n``-point FFT with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``.

    >>> dg.fft.fftfreq(5, d=0.5)
    tensor([ 0.0000,  0.4000,  0.8000, -0.8000, -0.4000])
    """
    values = [float(k) for k in range((n - 1) // 2 + 1)] + [float(k) for k in range(-(n // 2), 0)] \
        if isinstance(n, int) and n > 0 else []
    return _freq_tensor(values, n, d, dtype, device, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False,
             layout=None, pin_memory: bool = False):
    """The non-negative sample frequencies of an ``n``-point real FFT: ``[0, ..., n // 2] / (d * n)``.

    >>> dg.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    values = [float(k) for k in range(n // 2 + 1)] if isinstance(n, int) and n >= 0 else []
    return _freq_tensor(values, n, d, dtype, device, requires_grad)


def _dims(input, dim):
    if dim is None:
        return tuple(range(input.dim()))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def fftshift(input, dim=None):
    """Move the zero-frequency entry to the centre (roll each ``dim`` by ``size // 2``).

    >>> dg.fft.fftshift(dg.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    dims = _dims(input, dim)
    if not dims:
        return input.clone()
    return _sh.roll(input, [input.shape[d] // 2 for d in dims], list(dims))


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift` (roll each ``dim`` by ``-(size // 2)``).

    >>> x = dg.arange(5)
    >>> dg.equal(dg.fft.ifftshift(dg.fft.fftshift(x)), x)
    True
    """
    dims = _dims(input, dim)
    if not dims:
        return input.clone()
    return _sh.roll(input, [-(input.shape[d] // 2) for d in dims], list(dims))
