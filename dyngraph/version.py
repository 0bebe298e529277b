"""``dg.version``: what ``torch.version`` reports (``torch.version.cuda`` is ``None`` on CPU).

>>> dg.version.cuda is None or isinstance(dg.version.cuda, str)
True
"""

from __future__ import annotations

from . import __version__ as _dg_version
from .backend import cuda_available, get_cupy

__all__ = ["__version__", "cuda", "hip", "debug", "git_version"]

__version__ = _dg_version
debug = False
hip = None
git_version = None


def _cuda_version():
    # A CUDA runtime only exists through CuPy; report its version the way PyTorch does ("12.4").

    if not cuda_available():
        return None
    v = int(get_cupy().cuda.runtime.runtimeGetVersion())
    return f"{v // 1000}.{(v % 1000) // 10}"


cuda = _cuda_version()
