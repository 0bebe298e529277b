"""``dg.backends.cuda``: PyTorch's CUDA math switches (``matmul.allow_tf32``, the SDPA kernels).

The switches are recorded so preambles port; none changes a result.  As in PyTorch,
``matmul.allow_tf32`` is another view of :func:`dg.set_float32_matmul_precision`
(``True`` means ``"high"``), and dyngraph's float32 matmuls stay full precision.

>>> import dyngraph.backends.cuda
>>> dg.backends.cuda.matmul.allow_tf32 = True
>>> dg.get_float32_matmul_precision()
'high'
"""

from __future__ import annotations

import contextlib

from ._precision import get_float32_matmul_precision, set_float32_matmul_precision

__all__ = ["matmul", "is_built", "flash_sdp_enabled", "enable_flash_sdp", "mem_efficient_sdp_enabled",
           "enable_mem_efficient_sdp", "math_sdp_enabled", "enable_math_sdp", "cudnn_sdp_enabled",
           "enable_cudnn_sdp", "sdp_kernel", "preferred_linalg_library", "preferred_blas_library"]


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: reduced-precision switches of float matmuls."""

    def __init__(self):
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")

    @property
    def fp32_precision(self) -> str:
        return "tf32" if self.allow_tf32 else "ieee"

    @fp32_precision.setter
    def fp32_precision(self, value: str) -> None:
        if value not in ("tf32", "ieee", "none"):
            raise ValueError(f"backends.cuda.matmul.fp32_precision: expected 'tf32', 'ieee' or 'none', "
                             f"got {value!r}")
        self.allow_tf32 = value == "tf32"

    def __repr__(self) -> str:
        return (f"matmul(allow_tf32={self.allow_tf32}, allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction})")


matmul = _MatmulFlags()

# Which scaled_dot_product_attention kernels PyTorch may pick; dyngraph has one (the math one).
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether this build has CUDA kernels of its own: dyngraph's GPU path is CuPy (``dg.cuda``)."""
    return False


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    """Record the switch; dyngraph's attention is always the math formula."""
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The (deprecated in PyTorch) context manager choosing attention kernels; recorded only."""
    old = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _sdp.update(old)


def preferred_linalg_library(backend=None) -> str:
    """Linear algebra goes through NumPy/SciPy's LAPACK; the choice is accepted and ignored."""
    return "default"


def preferred_blas_library(backend=None) -> str:
    return "default"
