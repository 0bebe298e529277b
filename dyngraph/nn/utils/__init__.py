"""``dg.nn.utils``: gradient clipping, parameter/vector conversion, RNN packing."""

from __future__ import annotations

try:
    from . import rnn  # noqa: F401
except ImportError:
    pass
