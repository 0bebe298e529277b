"""``torch.nn.modules.module``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

The global hook functions live here in PyTorch too
(``torch.nn.modules.module.register_module_forward_hook``...).

>>> from dyngraph.nn.modules.module import Module, register_module_forward_hook
"""

from __future__ import annotations

from ..module import (
    Module,
    register_module_backward_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)

__all__ = ['Module', 'register_module_backward_hook', 'register_module_forward_hook',
           'register_module_forward_pre_hook', 'register_module_full_backward_hook',
           'register_module_full_backward_pre_hook']
