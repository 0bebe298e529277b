"""``torch.nn.modules.utils``: the tuple helpers layers use for their size arguments.

>>> _pair(3), _pair((1, 2)), _triple(2)
((3, 3), (1, 2), (2, 2, 2))
"""

from __future__ import annotations

import collections.abc
from itertools import repeat

__all__ = ["_ntuple", "_single", "_pair", "_triple", "_quadruple", "_reverse_repeat_tuple",
           "_list_with_default", "consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse"):
    """A function turning a number into an ``n``-tuple and leaving iterables as tuples."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """Reverse ``t`` and repeat each element ``n`` times (``F.pad``'s order for conv padding)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults) -> list:
    """``out_size`` with ``None`` entries replaced by the matching trailing ``defaults``."""
    if isinstance(out_size, int):
        return [out_size]
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` in place (e.g. ``"module."`` left by
    ``DataParallel``/``DistributedDataParallel``), including its ``_metadata``."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if key == prefix.rstrip(".") or key.startswith(prefix):
                new = "" if key == prefix.rstrip(".") else key[len(prefix):]
                metadata[new] = metadata.pop(key)
