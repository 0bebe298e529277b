"""Utilities: ``dg.utils.checkpoint`` (activation checkpointing), ``dg.utils.data`` (data loading),
``dg.utils.tensorboard`` (``SummaryWriter``, PyTorch's path for ``dg.tensorboard``).

``dg.utils.checkpoint`` is both the module (``dg.utils.checkpoint.checkpoint``,
``checkpoint_sequential``) and callable as the function itself.
"""

from __future__ import annotations

import importlib

from . import checkpoint

__all__ = ["checkpoint"]


def __getattr__(name):
    # Submodules other owners add (``data``) are imported on first use.
    if name in ("data", "tensorboard", "hooks", "_pytree"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dyngraph.utils' has no attribute {name!r}")
