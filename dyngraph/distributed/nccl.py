"""The GPU path: NCCL collectives on CuPy arrays, behind the same API.

The NCCL communicator is created on first use: rank 0 makes a unique id and
MPI broadcasts it.  Each rank uses the GPU ``rank % device_count``.  This path
needs CuPy built with NCCL (``pip install cupy-cuda12x``) and NVIDIA GPUs.
"""

from __future__ import annotations

from .collectives import ReduceOp, Work, _bump

_NCCL_DTYPES = {"float16": 6, "float32": 7, "float64": 8, "int32": 2, "int64": 4, "uint8": 1, "int8": 0}
_NCCL_OPS = {ReduceOp.SUM: 0, ReduceOp.PRODUCT: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3, ReduceOp.AVG: 0}


def _communicator(group):
    if group.nccl is None:
        try:
            import cupy  # noqa: PLC0415
            from cupy.cuda import nccl  # noqa: PLC0415
        except ImportError as exc:
            raise RuntimeError("GPU collectives need CuPy with NCCL: pip install cupy-cuda12x") from exc
        if group.comm is None:
            raise RuntimeError("call dyngraph.distributed.init_process_group() first")
        cupy.cuda.Device(group.rank % cupy.cuda.runtime.getDeviceCount()).use()
        uid = nccl.get_unique_id() if group.rank == 0 else None
        uid = group.comm.bcast(uid, root=0)
        group.nccl = nccl.NcclCommunicator(group.size, uid, group.rank)
    return group.nccl


def _dtype_code(a):
    try:
        return _NCCL_DTYPES[a.dtype.name]
    except KeyError as exc:
        raise TypeError(f"NCCL does not support dtype {a.dtype}") from exc


def nccl_all_reduce(group, tensor, op, async_op):
    import cupy  # noqa: PLC0415

    comm = _communicator(group)
    a = tensor._data
    stream = cupy.cuda.get_current_stream()
    comm.allReduce(a.data.ptr, a.data.ptr, a.size, _dtype_code(a), _NCCL_OPS[op], stream.ptr)

    def finish():
        stream.synchronize()
        if op is ReduceOp.AVG:
            a[...] = a / group.size
        _bump(tensor)

    work = Work([], finish)
    if not async_op:
        work.wait()
        return None
    return work


def nccl_broadcast(group, tensor, src, async_op):
    import cupy  # noqa: PLC0415

    comm = _communicator(group)
    a = tensor._data
    stream = cupy.cuda.get_current_stream()
    comm.bcast(a.data.ptr, a.size, _dtype_code(a), src, stream.ptr)
    work = Work([], lambda: (stream.synchronize(), _bump(tensor)))
    if not async_op:
        work.wait()
        return None
    return work
