"""``dg.nn``: modules, parameters and layers with PyTorch's names and behaviour.

>>> import dyngraph as dg
>>> model = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 2))
>>> model(dg.randn(3, 4)).shape
dyngraph.Size([3, 2])
"""

from __future__ import annotations

from . import functional, init, utils  # noqa: F401
from .layers import *  # noqa: F401,F403
from .module import Module  # noqa: F401
from .parameter import Buffer, Parameter, UninitializedParameter  # noqa: F401

# Layers built by other owners; each file may not exist yet, so their absence
# never breaks `dg.nn`.
try:
    from .conv import *  # noqa: F401,F403
except ImportError:
    pass
try:
    from .pooling import *  # noqa: F401,F403
except ImportError:
    pass
try:
    from .upsampling import *  # noqa: F401,F403
except ImportError:
    pass
try:
    from .rnn import *  # noqa: F401,F403
except ImportError:
    pass
try:
    from .transformer import *  # noqa: F401,F403
except ImportError:
    pass

# PyTorch's module layout (``torch.nn.modules.dropout.Dropout``) and ``nn.DataParallel``.
from . import modules, parallel  # noqa: E402,F401
from .parallel import DataParallel  # noqa: E402,F401
