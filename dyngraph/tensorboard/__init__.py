"""``dg.tensorboard``: TensorBoard logging with PyTorch's ``SummaryWriter`` API.

>>> from dyngraph.tensorboard import SummaryWriter
>>> w = SummaryWriter("runs/exp1")
>>> w.add_scalar("loss", 0.5, 0); w.add_graph(model, x); w.close()
"""

from __future__ import annotations

from .graph import graph_def
from .writer import SummaryWriter

__all__ = ["SummaryWriter", "graph_def"]
