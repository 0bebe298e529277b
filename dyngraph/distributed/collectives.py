"""Process group and collectives on tensors, implemented with MPI (mpi4py).

Every collective works on the tensors' NumPy buffers in place (no copies
beyond what MPI needs), is called by all ranks in the same order, and returns
``None`` -- or, with ``async_op=True``, a :class:`Work` handle whose ``wait()``
completes it.
"""

from __future__ import annotations

import enum
import os
import sys
import traceback

import numpy as np

from ..tensor import Tensor

__all__ = [
    "ReduceOp", "Work", "init_process_group", "destroy_process_group", "is_available",
    "is_initialized", "get_rank", "get_world_size", "barrier", "all_reduce", "reduce",
    "broadcast", "broadcast_object_list", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "gather", "scatter",
]


class ReduceOp(enum.Enum):
    """Reduction operators (``ReduceOp.SUM``, ``AVG``, ``MAX``, ``MIN``, ``PRODUCT``)."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


class _Group:
    comm = None
    rank = 0
    size = 1
    nccl = None  # lazily created NCCL communicator for CuPy tensors


_GROUP = _Group()


def is_available() -> bool:
    """True when mpi4py can be imported."""
    try:
        import mpi4py  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _mpi():
    try:
        from mpi4py import MPI  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - mpi4py is an optional dependency
        raise RuntimeError(
            "dyngraph.distributed needs mpi4py and an MPI library: pip install mpi4py mpich") from exc
    return MPI


def _abort_on_uncaught_exception(exc_type, exc, tb):
    """Print the error, then abort the whole MPI job so other ranks do not hang."""
    rank = _GROUP.rank
    sys.stderr.write(f"[dyngraph.distributed] rank {rank} raised an uncaught exception; "
                     "aborting all ranks\n")
    sys.stderr.write("".join(traceback.format_exception(exc_type, exc, tb)))
    sys.stderr.flush()
    if _GROUP.comm is not None:
        _GROUP.comm.Abort(1)


def init_process_group(backend: str = "mpi", *, abort_on_exception: bool = True, **kwargs) -> None:
    """Join the job started by ``mpiexec`` (reads the MPI environment).

    ``backend`` is accepted for PyTorch compatibility (``"mpi"``, ``"gloo"`` and
    ``"nccl"`` all use MPI here; CuPy tensors then go through NCCL).  With
    ``abort_on_exception`` (default) an uncaught exception in any rank aborts
    the whole job, so the other ranks stop instead of waiting forever.
    """
    if backend not in ("mpi", "gloo", "nccl"):
        raise ValueError(f"init_process_group: unknown backend {backend!r} (use 'mpi')")
    MPI = _mpi()
    _GROUP.comm = MPI.COMM_WORLD
    _GROUP.rank = _GROUP.comm.Get_rank()
    _GROUP.size = _GROUP.comm.Get_size()
    os.environ.setdefault("RANK", str(_GROUP.rank))
    os.environ.setdefault("WORLD_SIZE", str(_GROUP.size))
    if abort_on_exception:
        sys.excepthook = _abort_on_uncaught_exception


def destroy_process_group() -> None:
    _GROUP.comm = None
    _GROUP.rank, _GROUP.size = 0, 1
    if sys.excepthook is _abort_on_uncaught_exception:
        sys.excepthook = sys.__excepthook__


def is_initialized() -> bool:
    return _GROUP.comm is not None


def _comm():
    if _GROUP.comm is None:
        raise RuntimeError(
            "Default process group has not been initialized, please make sure to call "
            "dyngraph.distributed.init_process_group() (and launch with mpiexec -n N)")
    return _GROUP.comm


def get_rank() -> int:
    """This process's rank (0 when the group is not initialized)."""
    return _GROUP.rank


def get_world_size() -> int:
    """Number of processes in the job (1 when the group is not initialized)."""
    return _GROUP.size


class Work:
    """Handle of an asynchronous collective: ``wait()`` completes it."""

    def __init__(self, requests=(), finish=None):
        self._requests = list(requests)
        self._finish = finish
        self._done = False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            if self._requests:
                _mpi().Request.Waitall(self._requests)
            if self._finish is not None:
                self._finish()
            self._done = True
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if self._requests and not _mpi().Request.Testall(self._requests):
            return False
        self.wait()
        return True


def _buffer(t: Tensor, op: str) -> np.ndarray:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}")
    a = t._data
    if type(a) is not np.ndarray:
        raise TypeError(f"{op}: GPU tensors need the NCCL path (install cupy); got {type(a).__name__}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{op}: tensor must be contiguous (shape {list(a.shape)}); call .contiguous()")
    return a


def _mpi_op(op: ReduceOp):
    MPI = _mpi()
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX,
            ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.PROD}[op]


def _bump(t: Tensor) -> None:
    from ..ops.inplace import bump_version  # noqa: PLC0415

    bump_version(t)


def _is_gpu(t) -> bool:
    return isinstance(t, Tensor) and type(t._data) is not np.ndarray


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across all ranks, in place (``op``: SUM, AVG, MAX, MIN, PRODUCT).

    >>> t = dg.ones(3) * (dist.get_rank() + 1)
    >>> dist.all_reduce(t)            # every rank now holds 1 + 2 + ... + N
    """
    if _is_gpu(tensor):
        from .nccl import nccl_all_reduce  # noqa: PLC0415

        return nccl_all_reduce(_GROUP, tensor, op, async_op)
    comm = _comm()
    buf = _buffer(tensor, "all_reduce")
    MPI = _mpi()
    world = _GROUP.size

    def finish():
        if op is ReduceOp.AVG:
            if buf.dtype.kind == "f":
                np.divide(buf, world, out=buf)
            else:
                np.floor_divide(buf, world, out=buf)
        _bump(tensor)

    if async_op:
        req = comm.Iallreduce(MPI.IN_PLACE, buf, op=_mpi_op(op))
        return Work([req], finish)
    comm.Allreduce(MPI.IN_PLACE, buf, op=_mpi_op(op))
    finish()
    return None


def reduce(tensor: Tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across ranks into rank ``dst`` (others keep their input)."""
    comm = _comm()
    buf = _buffer(tensor, "reduce")
    MPI = _mpi()
    send = MPI.IN_PLACE if _GROUP.rank == dst else buf
    if async_op:
        req = comm.Ireduce(send, buf if _GROUP.rank == dst else None, op=_mpi_op(op), root=dst)
        return Work([req], lambda: _finish_avg(tensor, buf, op, dst))
    comm.Reduce(send, buf if _GROUP.rank == dst else None, op=_mpi_op(op), root=dst)
    _finish_avg(tensor, buf, op, dst)
    return None


def _finish_avg(tensor, buf, op, dst):
    if _GROUP.rank == dst:
        if op is ReduceOp.AVG:
            buf /= _GROUP.size
        _bump(tensor)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy ``tensor`` from rank ``src`` to every rank, in place."""
    if _is_gpu(tensor):
        from .nccl import nccl_broadcast  # noqa: PLC0415

        return nccl_broadcast(_GROUP, tensor, src, async_op)
    comm = _comm()
    buf = _buffer(tensor, "broadcast")
    if async_op:
        return Work([comm.Ibcast(buf, root=src)], lambda: _bump(tensor))
    comm.Bcast(buf, root=src)
    _bump(tensor)
    return None


def broadcast_object_list(object_list: list, src: int = 0, group=None) -> None:
    """Broadcast picklable Python objects (small metadata only; never weights)."""
    comm = _comm()
    data = comm.bcast(object_list if _GROUP.rank == src else None, root=src)
    object_list[:] = data


def _check_list(tensor_list, like: Tensor, op: str):
    if len(tensor_list) != _GROUP.size:
        raise ValueError(f"{op}: expected a list of {_GROUP.size} tensors (one per rank), "
                         f"got {len(tensor_list)}")
    for t in tensor_list:
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ValueError(f"{op}: every tensor must have shape {list(like.shape)} and dtype "
                             f"{like.dtype}; got {list(t.shape)} {t.dtype}")


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` on every rank."""
    comm = _comm()
    _check_list(tensor_list, tensor, "all_gather")
    send = _buffer(tensor, "all_gather")
    recv = np.empty((_GROUP.size,) + send.shape, send.dtype)

    def finish():
        for r, t in enumerate(tensor_list):
            t._data[...] = recv[r]
            _bump(t)

    if async_op:
        return Work([comm.Iallgather(send, recv)], finish)
    comm.Allgather(send, recv)
    finish()
    return None


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` along dim 0 into ``output_tensor``."""
    comm = _comm()
    send = _buffer(input_tensor, "all_gather_into_tensor")
    recv = _buffer(output_tensor, "all_gather_into_tensor")
    if recv.size != send.size * _GROUP.size:
        raise ValueError(f"all_gather_into_tensor: output has {recv.size} elements, expected "
                         f"{send.size} x {_GROUP.size}")
    if async_op:
        return Work([comm.Iallgather(send, recv)], lambda: _bump(output_tensor))
    comm.Allgather(send, recv)
    _bump(output_tensor)
    return None


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """Reduce ``input_list`` element-wise across ranks; rank r receives element r."""
    comm = _comm()
    _check_list(input_list, output, "reduce_scatter")
    send = np.ascontiguousarray(np.stack([_buffer(t, "reduce_scatter") for t in input_list]))
    recv = _buffer(output, "reduce_scatter")

    def finish():
        if op is ReduceOp.AVG:
            recv[...] = recv / _GROUP.size
        _bump(output)

    if async_op:
        return Work([comm.Ireduce_scatter_block(send, recv, op=_mpi_op(op))], finish)
    comm.Reduce_scatter_block(send, recv, op=_mpi_op(op))
    finish()
    return None


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0, group=None,
           async_op: bool = False):
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    comm = _comm()
    send = _buffer(tensor, "gather")
    is_dst = _GROUP.rank == dst
    if is_dst:
        if gather_list is None:
            raise ValueError("gather: the destination rank must pass gather_list")
        _check_list(gather_list, tensor, "gather")
    recv = np.empty((_GROUP.size,) + send.shape, send.dtype) if is_dst else None

    def finish():
        if is_dst:
            for r, t in enumerate(gather_list):
                t._data[...] = recv[r]
                _bump(t)

    if async_op:
        return Work([comm.Igather(send, recv, root=dst)], finish)
    comm.Gather(send, recv, root=dst)
    finish()
    return None


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0, group=None,
            async_op: bool = False):
    """Rank ``src`` sends ``scatter_list[r]`` to rank r (into ``tensor``)."""
    comm = _comm()
    recv = _buffer(tensor, "scatter")
    send = None
    if _GROUP.rank == src:
        if scatter_list is None:
            raise ValueError("scatter: the source rank must pass scatter_list")
        _check_list(scatter_list, tensor, "scatter")
        send = np.ascontiguousarray(np.stack([t._data for t in scatter_list]))
    if async_op:
        return Work([comm.Iscatter(send, recv, root=src)], lambda: _bump(tensor))
    comm.Scatter(send, recv, root=src)
    _bump(tensor)
    return None


def barrier(group=None, async_op: bool = False):
    """Wait until every rank reaches this point."""
    comm = _comm()
    if async_op:
        return Work([comm.Ibarrier()])
    comm.Barrier()
    return None
