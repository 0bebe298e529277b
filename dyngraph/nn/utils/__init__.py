"""``dg.nn.utils``: gradient clipping, parameter/vector conversion, weight and spectral norm,
parametrizations, RNN packing."""

from __future__ import annotations

import importlib

from .clip_grad import (  # noqa: F401
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401

try:
    from . import rnn  # noqa: F401
except ImportError:
    pass


def __getattr__(name):
    # parametrize builds on nn's containers, which load after nn.utils: imported on first use
    if name in ("parametrize", "parametrizations"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
