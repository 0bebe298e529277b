"""``dg.utils.checkpoint``: activation checkpointing (see :mod:`dyngraph.autograd.checkpoint`).

The module is also callable, so both PyTorch spellings work::

    from dyngraph.utils.checkpoint import checkpoint
    y = checkpoint(block, x, use_reentrant=False)
    y = dg.utils.checkpoint(block, x, use_reentrant=False)
"""

from __future__ import annotations

import sys
import types

from ..autograd.checkpoint import checkpoint, checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential"]


class _CallableModule(types.ModuleType):
    def __call__(self, function, *args, **kwargs):
        return checkpoint(function, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
