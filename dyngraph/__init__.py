"""dyngraph: a define-by-run deep-learning framework with PyTorch's surface.

>>> import dyngraph as dg
>>> x = dg.tensor([1.0, 2.0], requires_grad=True)
>>> y = (x * x).sum() if x.sum() > 0 else x.sum()   # ordinary Python control flow
>>> y.backward(); x.grad
tensor([2., 4.])
"""

from __future__ import annotations

__version__ = "0.1.0"

from .dtypes import (  # noqa: F401
    bfloat16, bool, double, dtype, finfo, float, float16, float32, float64, get_default_dtype, half,
    iinfo, int, int8, int16, int32, int64, long, promote_types, result_type,
    set_default_dtype, short, uint8,
)
from .backend import device, cuda_available  # noqa: F401
from .size import Size  # noqa: F401
from .tensor import Tensor  # noqa: F401
from . import ops  # noqa: F401  (registers every primitive and Tensor method)
from .ops.elementwise import *  # noqa: F401,F403
from .ops.reduction import *  # noqa: F401,F403
from .ops.shape import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.nn import *  # noqa: F401,F403
from .ops.conv import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .random import Generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state  # noqa: F401
from .printing import set_printoptions  # noqa: F401
from . import autograd  # noqa: F401
from .autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .ops.elementwise import abs, pow, round  # noqa: F401,A004  (shadow builtins like torch)
from .ops.reduction import sum  # noqa: F401,A004

# Subpackages and a few top-level functions are imported on first use (PEP 562):
# `import dyngraph` stays fast, and each subpackage is owned by one module tree.
_LAZY_MODULES = {
    "nn", "optim", "data", "utils", "jit", "onnx", "viz", "tensorboard", "profiler",
    "distributed", "linalg", "serialization", "examples", "func", "accelerator", "multiprocessing",
    "version", "run_torch", "sparse", "fx", "autobatch",
}
_LAZY_ATTRS = {
    "save": ("serialization", "save"),
    "load": ("serialization", "load"),
    "compile": ("jit", "compile"),
    "sparse_coo_tensor": ("sparse", "sparse_coo_tensor"),
    "spmm": ("sparse", "spmm"),
    "sparse_coo": ("sparse", "sparse_coo"),
    "strided": ("sparse", "strided"),
}


def __getattr__(name):
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(f".{mod}", __name__), attr)
    raise AttributeError(f"module 'dyngraph' has no attribute {name!r}")

# torch.cuda / torch.backends and the preamble switches of ordinary scripts.
from . import backends, cuda  # noqa: E402,F401
from .backends import (  # noqa: E402,F401
    are_deterministic_algorithms_enabled, get_default_device, get_float32_matmul_precision,
    get_num_threads, set_default_device, set_float32_matmul_precision, set_num_threads,
    use_deterministic_algorithms,
)
from .memory_format import (  # noqa: E402,F401
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from . import distributions  # noqa: E402,F401
from . import testing  # noqa: E402,F401
from . import special  # noqa: E402,F401
from .creation import is_complex, is_floating_point, is_nonzero, matrix_power  # noqa: E402,F401
from . import amp  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from .func import vmap  # noqa: E402,F401
