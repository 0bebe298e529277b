"""Named POSIX shared-memory segments that back ``Tensor.share_memory_()``.

A shared tensor's values live in a ``multiprocessing.shared_memory`` segment, so they are
shared both with processes forked afterwards (the mapping is inherited) and with any
process that receives the tensor through a ``dg.multiprocessing`` queue or pipe (it is
sent as the segment's name, offset, shape and strides, and the receiver maps the same
memory).  The creating process unlinks its segments at exit; a process that attached
keeps its mapping valid until it drops it.  No file descriptor stays open per segment.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from multiprocessing import resource_tracker, shared_memory

import numpy as np

__all__ = ["shared_empty", "handle_of", "attach"]

# id(mmap) -> SharedMemory: keeps each segment mapped while arrays use it, and maps an
# array's base buffer back to the segment's name.
_SEGMENTS: dict[int, shared_memory.SharedMemory] = {}
# segments this process created: (segment, creating pid); unlinked at exit by their creator
_CREATED: list = []


@atexit.register
def _unlink_created() -> None:
    pid = os.getpid()
    for shm, owner in _CREATED:
        if owner == pid:
            with contextlib.suppress(FileNotFoundError):
                shm.unlink()


def _drop_fd(shm: shared_memory.SharedMemory) -> None:
    fd = getattr(shm, "_fd", -1)
    if fd >= 0:
        os.close(fd)
        shm._fd = -1


def _as_array(shm, shape, dtype, offset: int = 0, strides=None) -> np.ndarray:
    return np.ndarray(tuple(shape), dtype=np.dtype(dtype), buffer=shm.buf, offset=offset,
                      strides=None if strides is None else tuple(strides))


def shared_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array in a new shared segment."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    shm = shared_memory.SharedMemory(create=True, size=max(nbytes, 1))
    _drop_fd(shm)
    _SEGMENTS[id(shm._mmap)] = shm
    _CREATED.append((shm, os.getpid()))
    return _as_array(shm, shape, dtype)


def _segment_of(a: np.ndarray):
    base = a
    while base is not None:
        shm = _SEGMENTS.get(id(base))       # NumPy records the segment's mmap as the base
        if shm is not None:
            return shm
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return None


def handle_of(a) -> tuple | None:
    """``(name, byte offset, shape, dtype, strides)`` of an array that lives in one of this
    process's segments, else ``None``."""
    if not isinstance(a, np.ndarray):
        return None
    shm = _segment_of(a)
    if shm is None:
        return None
    start = np.frombuffer(shm.buf, dtype=np.uint8).__array_interface__["data"][0]
    offset = a.__array_interface__["data"][0] - start
    return (shm.name, int(offset), tuple(a.shape), a.dtype.str, tuple(a.strides))


@contextlib.contextmanager
def _untracked():
    # attaching must not register the segment with the resource tracker: the tracker is
    # shared with the creator (fork), which owns the segment and unlinks it at exit
    register = resource_tracker.register
    resource_tracker.register = lambda name, rtype: None
    try:
        yield
    finally:
        resource_tracker.register = register


def attach(handle: tuple) -> np.ndarray:
    """The array a :func:`handle_of` handle describes, mapped from the same segment."""
    name, offset, shape, dtype, strides = handle
    for shm in _SEGMENTS.values():
        if shm.name == name:
            return _as_array(shm, shape, dtype, offset, strides)
    with _untracked():
        shm = shared_memory.SharedMemory(name=name)
    _drop_fd(shm)
    _SEGMENTS[id(shm._mmap)] = shm
    return _as_array(shm, shape, dtype, offset, strides)
