"""``dg.multiprocessing``: the standard library's ``multiprocessing`` with PyTorch's additions.

Every name of :mod:`multiprocessing` is here (``Process``, ``Queue``, ``Pool``,
``set_start_method``...), plus ``spawn`` / ``start_processes`` and the sharing-strategy
calls.  ``Tensor.share_memory_()`` / ``Module.share_memory()`` move values into a
shared anonymous mapping, so processes started with the ``fork`` method (Linux's
default) train one set of weights — Hogwild::

    model.share_memory()
    procs = [mp.Process(target=train, args=(rank, model)) for rank in range(4)]
    for p in procs: p.start()
    for p in procs: p.join()

A shared tensor sent through a ``Queue``, a ``Pipe`` or a ``Pool`` arrives as a view of the
same shared memory (writes on either side are seen by the other), as in PyTorch; a tensor
that was not shared is sent by value (PyTorch would move it to shared memory first).
"""

from __future__ import annotations

import multiprocessing as _mp
from multiprocessing import *  # noqa: F403

from ._reductions import init_reductions
from .spawn import (
    ProcessContext,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

__all__ = [*_mp.__all__, "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
           "ProcessExitedException", "set_sharing_strategy", "get_sharing_strategy",
           "get_all_sharing_strategies"]

init_reductions()

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = "file_descriptor"


def get_all_sharing_strategies() -> set:
    """The strategy names PyTorch accepts (dyngraph shares memory one way: anonymous mappings)."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _strategy


def set_sharing_strategy(new_strategy: str) -> None:
    """Record the strategy; shared tensors use an anonymous shared mapping either way."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: expected one of {sorted(_STRATEGIES)}, got {new_strategy!r}")
    _strategy = new_strategy
