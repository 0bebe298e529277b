"""``torch.nn.modules``: PyTorch's package of layer modules, one submodule per family.

The classes are dyngraph's own (``dg.nn.Linear`` is ``dg.nn.modules.linear.Linear``);
these modules give them PyTorch's import paths, e.g.
``from torch.nn.modules.dropout import Dropout`` or ``torch.nn.modules.batchnorm._BatchNorm``.

>>> from dyngraph.nn.modules.loss import _Loss
>>> issubclass(dg.nn.MSELoss, _Loss)
True
"""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
    utils,
)
from .activation import *  # noqa: F403
from .batchnorm import *  # noqa: F403
from .channelshuffle import *  # noqa: F403
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .flatten import *  # noqa: F403
from .fold import *  # noqa: F403
from .instancenorm import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import *  # noqa: F403
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .pixelshuffle import *  # noqa: F403
from .pooling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsampling import *  # noqa: F403
