"""``dg.utils.data``: the same objects as ``dg.data`` under PyTorch's import path
(``torch.utils.data.DataLoader`` → ``dg.utils.data.DataLoader``)."""

from ..data import *  # noqa: F401,F403
from ..data import __all__  # noqa: F401
