"""``torch.utils.data._utils``: the collate helpers some programs import from PyTorch's private path."""

from . import collate  # noqa: F401
