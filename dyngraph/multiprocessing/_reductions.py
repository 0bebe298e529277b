"""How tensors travel through ``dg.multiprocessing`` queues, pipes and pools.

A tensor whose values are in shared memory (``share_memory_()``, ``model.share_memory()``)
is sent as a handle to that memory, so the receiver's tensor and the sender's are the same
values (in-place writes on either side are seen by the other), as in PyTorch.  Other
tensors are sent by value.  Only the values travel: never the autograd graph.
"""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

from .. import _shm
from ..nn.parameter import Buffer, Parameter
from ..tensor import Tensor

__all__ = ["init_reductions"]


def _rebuild_tensor(handle, requires_grad: bool):
    t = Tensor._make(_shm.attach(handle), False, None, 0)
    return t.requires_grad_(True) if requires_grad else t


def _rebuild_parameter(handle, requires_grad: bool):
    return Parameter(_rebuild_tensor(handle, False), requires_grad)


def _rebuild_buffer(handle, persistent: bool):
    return Buffer(_rebuild_tensor(handle, False), persistent=persistent)


def _reduce(t):
    handle = _shm.handle_of(t._data)
    if handle is None:
        return t.__reduce_ex__(2)
    if isinstance(t, Parameter):
        return _rebuild_parameter, (handle, t.requires_grad)
    if isinstance(t, Buffer):
        return _rebuild_buffer, (handle, t.persistent)
    return _rebuild_tensor, (handle, t.requires_grad)


def init_reductions() -> None:
    """Register the reducers with ``multiprocessing``'s pickler (done on import)."""
    for cls in (Tensor, Parameter, Buffer):
        ForkingPickler.register(cls, _reduce)
