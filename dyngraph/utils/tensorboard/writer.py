"""``torch.utils.tensorboard.writer``: ``SummaryWriter`` under PyTorch's module path."""

from __future__ import annotations

from ...tensorboard.writer import SummaryWriter

__all__ = ["SummaryWriter"]
