"""``dg.nn``: modules, parameters and layers with PyTorch's names and behaviour.

>>> import dyngraph as dg
>>> model = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 2))
>>> model(dg.randn(3, 4)).shape
dyngraph.Size([3, 2])
"""

from __future__ import annotations

from . import functional, init, utils  # noqa: F401
from .layers import *  # noqa: F403
from .module import Module  # noqa: F401
from .parameter import Buffer, Parameter, UninitializedParameter  # noqa: F401

# plain imports: a layer file that fails to import is an error, never a silently missing layer
from .conv import *  # noqa: F403
from .pooling import *  # noqa: F403
from .upsampling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .transformer import *  # noqa: F403
from .ctc import CTCLoss  # noqa: F401

# PyTorch's module layout (``torch.nn.modules.dropout.Dropout``) and ``nn.DataParallel``.
from . import modules, parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401
