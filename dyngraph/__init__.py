"""dyngraph: a define-by-run deep-learning framework with PyTorch's surface.

>>> import dyngraph as dg
>>> x = dg.tensor([1.0, 2.0], requires_grad=True)
>>> y = (x * x).sum() if x.sum() > 0 else x.sum()   # ordinary Python control flow
>>> y.backward(); x.grad
tensor([2., 4.])
"""

from __future__ import annotations

__version__ = "0.1.0"

from .dtypes import (
    bfloat16, bool, double, dtype, finfo, float, float16, float32, float64, get_default_dtype, half,
    iinfo, int, int8, int16, int32, int64, long, promote_types,
    set_default_dtype, short, uint8,
)
from .backend import device, cuda_available
from .size import Size
from .tensor import Tensor
from . import ops
from .surface.elementwise import *
from .surface.reduction import *
from .surface.shape import *
from .surface.linalg import *
from .surface.indexing import *
from .surface.sorting import *
from .surface.nn import *
from .surface.conv import *
from .surface.pooling import *
from .creation import *
from .random import Generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state
from .printing import set_printoptions
from . import autograd
from .autograd.grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .surface.elementwise import abs, pow, round
from .surface.reduction import sum

# Subpackages and a few top-level functions are imported on first use (PEP 562):
# `import dyngraph` stays fast, and each subpackage is owned by one module tree.
_LAZY_MODULES = {
    "nn", "optim", "data", "utils", "jit", "onnx", "viz", "tensorboard", "profiler",
    "distributed", "linalg", "serialization", "examples", "func", "accelerator", "multiprocessing",
    "version", "run_torch", "sparse", "fx", "autobatch", "compiler", "_dynamo",
}
_LAZY_ATTRS = {
    "save": ("serialization", "save"),
    "load": ("serialization", "load"),
    "compile": ("jit", "compile"),
    "cholesky_solve": ("linalg", "cholesky_solve"),
    "cholesky_inverse": ("linalg", "cholesky_inverse"),
    "sparse_coo_tensor": ("sparse", "sparse_coo_tensor"),
    "spmm": ("sparse", "spmm"),
    "sparse_coo": ("sparse", "sparse_coo"),
    "sparse_csr_tensor": ("sparse", "sparse_csr_tensor"),
    **{w: ("windows", w) for w in ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                   "kaiser_window")},
    "sparse_csr": ("sparse", "sparse_csr"),
    "strided": ("sparse", "strided"),
}


def __getattr__(name):
    import importlib  # noqa: PLC0415  (only once a lazy attribute is first used)

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(f".{mod}", __name__), attr)
    raise AttributeError(f"module 'dyngraph' has no attribute {name!r}")

# torch.cuda / torch.backends and the preamble switches of ordinary scripts.
from . import backends, cuda
from .backends import (
    are_deterministic_algorithms_enabled, get_default_device, get_float32_matmul_precision,
    get_num_interop_threads, get_num_threads, set_default_device, set_float32_matmul_precision,
    set_num_interop_threads, set_num_threads,
    use_deterministic_algorithms,
)
from .memory_format import (
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from . import distributions
from . import testing
from . import special
from .creation import is_complex, is_floating_point, is_nonzero, matrix_power
from . import amp
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .func import vmap
