"""``torch.nn.modules.container``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.container import Sequential
"""

from __future__ import annotations

from ..containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential

__all__ = ['Sequential', 'ModuleList', 'ModuleDict', 'ParameterList', 'ParameterDict']
