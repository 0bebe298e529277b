"""``torch.utils.tensorboard``: dyngraph's ``SummaryWriter`` (``dg.tensorboard``) under
PyTorch's import path.

>>> from dyngraph.utils.tensorboard import SummaryWriter
>>> with SummaryWriter("runs/exp") as w:
...     w.add_scalar("loss", 0.5, 0)
"""

from __future__ import annotations

from ...tensorboard import SummaryWriter
from . import writer  # noqa: F401

__all__ = ["SummaryWriter"]
