"""Process group and collectives on tensors, implemented with MPI (mpi4py).

Every collective works on the tensors' NumPy buffers in place (no copies
beyond what MPI needs), is called by all ranks in the same order, and returns
``None`` -- or, with ``async_op=True``, a :class:`Work` handle whose ``wait()``
completes it.

Failing fast instead of hanging (see docs/distributed.md, "Failures"):

* Every collective is a non-blocking MPI collective (``Iallreduce``, ``Ibcast``,
  ...) completed by :func:`_wait`, a polling loop with a deadline: the
  ``timeout`` of :func:`init_process_group` (default 30 minutes, PyTorch's).
  A collective that does not complete in time raises ``RuntimeError`` naming
  the collective, the rank and the timeout, and marks the group broken.
* A rank that leaves the job (``sys.exit``, the end of its script, an exception
  it caught at top level) sends an exit notice to the others from an ``atexit``
  handler, on a private communicator; a rank waiting in a collective that sees
  it fails after ``_EXIT_GRACE_S`` (time for a collective the leaving rank did
  join to complete) instead of waiting forever.
* Before each collective (unless ``check_collectives=False``) the ranks
  all-gather 16 integers of metadata -- which collective, dtype, shape, root or
  reduction -- and every rank raises the same error, naming the op, the shapes
  and the ranks, when they differ.  The group stays usable after that error.
"""

from __future__ import annotations

import atexit
import datetime
import enum
import os
import sys
import time
import traceback
import zlib

import numpy as np

from .._core.graph import bump_version
from ..tensor import Tensor

__all__ = [
    "ReduceOp", "Work", "init_process_group", "destroy_process_group", "is_available",
    "is_initialized", "get_rank", "get_world_size", "barrier", "all_reduce", "reduce",
    "broadcast", "broadcast_object_list", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "gather", "scatter",
]

DEFAULT_TIMEOUT_S = 1800.0   # torch.distributed's default_pg_timeout (30 minutes)
_EXIT_TAG = 0x5E1F           # exit notices, on the private control communicator
_EXIT_GRACE_S = 2.0          # after a peer's exit notice: time for a collective it joined to complete
_SPIN_S = 0.2                # busy-test this long (full MPI progress speed), then nap between tests
_NAP_S = 2e-4
_yield = getattr(os, "sched_yield", None) or (lambda: None)
class ReduceOp(enum.Enum):
    """Reduction operators (``ReduceOp.SUM``, ``AVG``, ``MAX``, ``MIN``, ``PRODUCT``)."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


class _Group:
    comm = None
    ctrl = None          # a private duplicate of comm: exit notices never meet user messages
    rank = 0
    size = 1
    timeout_s = DEFAULT_TIMEOUT_S
    check = True         # collective metadata checks
    broken = None        # the error that made the group unusable (a timeout, a rank that left)
    nccl = None  # lazily created NCCL communicator for CuPy tensors


_GROUP = _Group()


def is_available() -> bool:
    """True when mpi4py can be imported."""
    try:
        import mpi4py  # noqa: F401, PLC0415  (mpi4py: optional, only for multi-process runs)
    except ImportError:
        return False
    return True


def _mpi():
    try:
        from mpi4py import MPI  # noqa: PLC0415  (mpi4py: optional, only for multi-process runs)
    except ImportError as exc:  # pragma: no cover - mpi4py is an optional dependency
        raise RuntimeError(
            "dyngraph.distributed needs mpi4py and an MPI library: pip install mpi4py mpich") from exc
    return MPI


def _abort_on_uncaught_exception(exc_type, exc, tb):
    """Print the error, then abort the whole MPI job so other ranks do not hang."""
    rank = _GROUP.rank
    _report(f"[dyngraph.distributed] rank {rank} raised an uncaught exception; aborting all ranks\n"
            + "".join(traceback.format_exception(exc_type, exc, tb)))
    if _GROUP.comm is not None:
        _abort(1)


def _report(text: str) -> None:
    """Write ``text`` to stderr in one piece and give the launcher a moment to forward it:
    output still in flight when ``mpiexec`` kills the job after MPI_Abort is lost."""
    try:
        sys.stderr.flush()
        os.write(2, text.encode(errors="backslashreplace"))
    except OSError:
        pass
    time.sleep(0.2)


def _abort(code: int) -> None:
    """MPI_Abort, then leave at once: MPICH's Abort can return before the launcher acts, and
    running on into MPI_Finalize (which waits for the other ranks) could then hang."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    _GROUP.comm.Abort(code)
    os._exit(code)


def _timeout_seconds(timeout) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive datetime.timedelta or number of seconds, "
                         f"got {timeout!r}")
    return float(timeout)


_EXIT_HOOK = {"registered": False, "sent": []}


def _at_exit() -> None:
    """Runs when this rank's interpreter exits, before mpi4py's MPI_Finalize."""
    g = _GROUP
    if g.comm is None or g.size == 1:
        return
    if g.broken is not None:
        # A collective failed: requests are still pending and MPI_Finalize would wait for them
        # (and for ranks that are stuck) forever.  End the job; mpiexec reports the failure.
        _report(f"[dyngraph.distributed] rank {g.rank} exits after a failed collective; "
                f"aborting all ranks ({g.broken.splitlines()[0]})\n")
        _abort(1)
    _announce_exit()


def _announce_exit() -> None:
    """Tell every other rank that this one leaves: a rank waiting for it in a collective fails."""
    g = _GROUP
    if g.ctrl is None:
        return
    note = np.array([g.rank], np.int64)
    _EXIT_HOOK["sent"].append(note)        # the buffer must outlive the sends
    for dest in range(g.size):
        if dest != g.rank:
            g.ctrl.Isend(note, dest=dest, tag=_EXIT_TAG).Free()


def init_process_group(backend: str = "mpi", init_method=None, timeout=None, world_size: int = -1,
                       rank: int = -1, store=None, group_name: str = "", pg_options=None, *,
                       abort_on_exception: bool = True, check_collectives: bool = True, **kwargs) -> None:
    """Join the job started by ``mpiexec`` (reads the MPI environment).

    ``backend`` is accepted for PyTorch compatibility (``"mpi"``, ``"gloo"`` and
    ``"nccl"`` all use MPI here; CuPy tensors then go through NCCL).  With
    ``abort_on_exception`` (default) an uncaught exception in any rank aborts
    the whole job, so the other ranks stop instead of waiting forever.
    ``timeout`` (a ``datetime.timedelta`` or seconds; default 30 minutes) bounds
    every collective: one that has not completed by then raises ``RuntimeError``
    naming the collective and the rank.  ``check_collectives`` (default) checks,
    with one small all-gather per collective, that every rank calls the same
    collective with the same shapes and dtypes.  ``world_size`` and ``rank``,
    when given, must agree with ``mpiexec``'s.

    >>> import datetime
    >>> dist.init_process_group(timeout=datetime.timedelta(seconds=60))
    """
    if backend is not None and backend not in ("mpi", "gloo", "nccl"):
        raise ValueError(f"init_process_group: unknown backend {backend!r} (use 'mpi')")
    timeout_s = _timeout_seconds(timeout)
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != comm.Get_size():
        raise ValueError(f"init_process_group: world_size={world_size}, but mpiexec started "
                         f"{comm.Get_size()} processes")
    if rank not in (-1, None) and rank != comm.Get_rank():
        raise ValueError(f"init_process_group: rank={rank}, but MPI says this process is rank {comm.Get_rank()}")
    _GROUP.comm = comm
    _GROUP.rank = comm.Get_rank()
    _GROUP.size = comm.Get_size()
    _GROUP.timeout_s = timeout_s
    _GROUP.check = bool(check_collectives)
    _GROUP.broken = None
    # Collective, like init itself: every rank gets its own, fresh control channel (notices from
    # an earlier group, destroyed since, are not seen by this one).
    _GROUP.ctrl = comm.Dup()
    os.environ.setdefault("RANK", str(_GROUP.rank))
    os.environ.setdefault("WORLD_SIZE", str(_GROUP.size))
    if abort_on_exception:
        sys.excepthook = _abort_on_uncaught_exception
    if not _EXIT_HOOK["registered"]:
        # registered after mpi4py's import, so it runs before mpi4py finalizes MPI
        atexit.register(_at_exit)
        _EXIT_HOOK["registered"] = True


def destroy_process_group() -> None:
    """Leave the group.  Other ranks still waiting for this one in a collective then fail
    (as when a rank exits) instead of waiting for their timeout.

    >>> dist.barrier()                # everyone is done with collectives
    >>> dist.destroy_process_group()
    """
    if _GROUP.comm is not None and _GROUP.size > 1 and _GROUP.broken is None:
        _announce_exit()
    _GROUP.comm = None
    _GROUP.ctrl = None
    _GROUP.rank, _GROUP.size = 0, 1
    _GROUP.broken = None
    if sys.excepthook is _abort_on_uncaught_exception:
        sys.excepthook = sys.__excepthook__


def is_initialized() -> bool:
    return _GROUP.comm is not None


def _comm():
    if _GROUP.comm is None:
        raise RuntimeError(
            "Default process group has not been initialized, please make sure to call "
            "dyngraph.distributed.init_process_group() (and launch with mpiexec -n N)")
    if _GROUP.broken is not None:
        raise RuntimeError(f"rank {_GROUP.rank}: the process group is unusable after an earlier "
                           f"collective failed: {_GROUP.broken}")
    return _GROUP.comm


def get_rank() -> int:
    """This process's rank (0 when the group is not initialized)."""
    return _GROUP.rank


def get_world_size() -> int:
    """Number of processes in the job (1 when the group is not initialized)."""
    return _GROUP.size


# -- waiting with a deadline -------------------------------------------------------------------
def _fail(msg: str):
    _GROUP.broken = msg
    raise RuntimeError(msg)


def _peer_exit_notice():
    """The rank whose exit notice is waiting here, or None (never receives it: it stays visible)."""
    ctrl = _GROUP.ctrl
    if ctrl is None:
        return None
    MPI = _mpi()
    st = MPI.Status()
    if ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=_EXIT_TAG, status=st):
        return st.Get_source()
    return None


def _wait(requests: list, what, timeout_s: float | None = None) -> None:
    """Complete MPI ``requests`` like ``Waitall``, but fail instead of waiting forever.

    Tests the requests in a loop (MPI advances non-blocking collectives inside such calls):
    without pause for ``_SPIN_S`` (as fast as a blocking wait), then with ``_NAP_S`` naps.
    Raises ``RuntimeError`` (and marks the group broken) when ``timeout_s`` (default: the
    group's timeout) passes, or ``_EXIT_GRACE_S`` after another rank announced that it left.
    ``what`` (a string, or a function making it: built only for an error) names the collective.
    Between tests the CPU is yielded, as MPICH's own blocking wait does: when ranks share
    cores, a spinning rank would otherwise keep the rank it waits for off the CPU.
    """
    MPI = _mpi()
    test = MPI.Request.Testall
    if not requests or test(requests):
        return
    start = time.monotonic()
    limit = _GROUP.timeout_s if timeout_s is None else timeout_s
    deadline = start + limit
    spin_end = start + _SPIN_S
    gone = None                                   # (rank, time its notice was seen)
    napping = False
    n = 0
    while True:
        if test(requests):
            return
        n += 1
        if not napping and n & 63:                # while spinning, look at the clock every 64 tests
            _yield()
            continue
        if callable(what):
            what = what()
        now = time.monotonic()
        if gone is None:
            src = _peer_exit_notice()
            if src is not None:
                gone = (src, now)
        elif now - gone[1] > _EXIT_GRACE_S:
            _fail(f"{what}: rank {gone[0]} has left the job (sys.exit, the end of its script, or "
                  f"destroy_process_group) while rank {_GROUP.rank} waits for it in this collective; "
                  "it can never complete")
        if now >= deadline:
            _fail(f"{what} on rank {_GROUP.rank} did not complete within the process group timeout of "
                  f"{limit:g} s (init_process_group(timeout=...)): another rank has stalled, died, or "
                  "called a different collective; the group is now unusable")
        if now > spin_end:
            napping = True
            time.sleep(_NAP_S)


class Work:
    """Handle of an asynchronous collective: ``wait()`` completes it.

    >>> w = dist.all_reduce(t, async_op=True)
    >>> ...                         # compute while the reduction proceeds
    >>> w.wait()
    """

    def __init__(self, requests=(), finish=None, what: str = "collective"):
        self._requests = list(requests)
        self._finish = finish
        self._done = False
        self._what = what

    def wait(self, timeout=None) -> bool:
        """Complete the operation; ``timeout`` (timedelta or seconds) overrides the group's."""
        if not self._done:
            if self._requests:
                _wait(self._requests, self._what,
                      None if timeout is None else _timeout_seconds(timeout))
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


def _complete(requests, what: str, finish, async_op: bool):
    work = Work(requests, finish, what)
    if async_op:
        return work
    work.wait()
    return None


# -- collective metadata checks ----------------------------------------------------------------
_OPS = ("all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "gather", "scatter", "barrier", "broadcast_object_list")
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
           "complex64", "complex128", "uint16", "uint32", "uint64")
_META = 16          # int64 slots: op, dtype, numel, ndim, 9 dims, root, reduction, list length
_MAX_DIMS = 9
_ROOT, _RED, _LEN = 13, 14, 15


def _dtype_code(dt) -> int:
    name = np.dtype(dt).name
    return _DTYPES.index(name) if name in _DTYPES else 1000 + zlib.crc32(name.encode())


def _dtype_name(code: int) -> str:
    return _DTYPES[code] if 0 <= code < len(_DTYPES) else f"dtype#{code}"


_RED_CODES = {op: i for i, op in enumerate(ReduceOp)}
_DTYPE_CODES: dict = {}


def _meta(op: str, shape=None, dtype=None, root: int = -1, reduce_op: ReduceOp | None = None,
          n: int = -1) -> np.ndarray:
    m = [-1] * _META
    m[0] = _OPS.index(op)
    if shape is not None:
        code = _DTYPE_CODES.get(dtype)
        if code is None:
            code = _DTYPE_CODES[dtype] = _dtype_code(dtype)
        m[1] = code
        numel = 1
        for d in shape:
            numel *= d
        m[2] = numel
        m[3] = len(shape)
        m[4:4 + min(len(shape), _MAX_DIMS)] = shape[:_MAX_DIMS]
        if len(shape) > _MAX_DIMS:      # the rest, as a checksum
            m[4 + _MAX_DIMS - 1] = zlib.crc32(repr(tuple(shape)).encode())
    m[_ROOT] = root
    m[_RED] = -1 if reduce_op is None else _RED_CODES[reduce_op]
    m[_LEN] = n
    return np.array(m, np.int64)


def _describe(row: np.ndarray) -> str:
    op = _OPS[row[0]] if 0 <= row[0] < len(_OPS) else f"op#{row[0]}"
    desc = op
    if row[3] >= 0:
        nd = int(row[3])
        dims = [int(d) for d in row[4:4 + min(nd, _MAX_DIMS)]]
        shape = str(dims) if nd <= _MAX_DIMS else f"{dims[:-1]}+... ({nd} dims)"
        desc += f" of shape {shape} {_dtype_name(int(row[1]))}"
    if row[_RED] >= 0:
        desc += f" with op={list(ReduceOp)[int(row[_RED])].name}"
    if row[_ROOT] >= 0:
        desc += f" with {'dst' if op in ('reduce', 'gather') else 'src'}={int(row[_ROOT])}"
    if row[_LEN] >= 0:
        desc += f" and a list of {int(row[_LEN])} objects"
    return desc


def _check(op: str, shape=None, dtype=None, root: int = -1, reduce_op: ReduceOp | None = None,
           n: int = -1) -> None:
    """All ranks compare what they are about to do; all raise the same error if it differs.

    One ``Iallgather`` of 16 int64 per rank.  Every rank sees every rank's row, so they all
    decide alike and the group stays usable after the error.
    """
    g = _GROUP
    if not g.check or g.size == 1:
        return
    comm = _comm()
    mine = _meta(op, shape, dtype, root, reduce_op, n)
    rows = np.empty((g.size, _META), np.int64)
    _wait([comm.Iallgather(mine, rows)], lambda: f"{_describe(mine)} (its metadata exchange)")
    if (rows == rows[0]).all():
        return
    groups: dict[bytes, list[int]] = {}
    for r in range(g.size):
        groups.setdefault(rows[r].tobytes(), []).append(r)
    parts = []
    for ranks in groups.values():
        who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
        parts.append(f"{who}: {_describe(rows[ranks[0]])}")
    raise RuntimeError(f"{op}: the ranks called mismatched collectives ({'; '.join(parts)}); "
                       "every rank must call the same collective, in the same order, with tensors "
                       "of the same shape and dtype")


# -- collectives -------------------------------------------------------------------------------
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
    if not isinstance(op, ReduceOp):
        raise TypeError(f"expected a ReduceOp (SUM, AVG, MAX, MIN, PRODUCT), got {op!r}")
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX,
            ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.PROD}[op]


def _bump(t: Tensor) -> None:
    bump_version(t)


def _is_gpu(t) -> bool:
    return isinstance(t, Tensor) and type(t._data) is not np.ndarray


def _shape_text(a) -> str:
    return f"shape {list(a.shape)} {a.dtype}"


def _check_root(root: int, name: str, op: str) -> None:
    if not isinstance(root, (int, np.integer)) or not 0 <= root < _GROUP.size:
        raise ValueError(f"{op}: {name}={root!r} is not a rank (world size {_GROUP.size})")


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across all ranks, in place (``op``: SUM, AVG, MAX, MIN, PRODUCT).

    >>> t = dg.ones(3) * (dist.get_rank() + 1)
    >>> dist.all_reduce(t)            # every rank now holds 1 + 2 + ... + N
    """
    if _is_gpu(tensor):
        return nccl_all_reduce(_GROUP, tensor, op, async_op)
    comm = _comm()
    buf = _buffer(tensor, "all_reduce")
    mop = _mpi_op(op)
    _check("all_reduce", buf.shape, buf.dtype, reduce_op=op)
    MPI = _mpi()
    world = _GROUP.size

    def finish():
        if op is ReduceOp.AVG:
            if buf.dtype.kind == "f":
                np.divide(buf, world, out=buf)
            else:
                np.floor_divide(buf, world, out=buf)
        _bump(tensor)

    req = comm.Iallreduce(MPI.IN_PLACE, buf, op=mop)
    return _complete([req], f"all_reduce ({_shape_text(buf)})", finish, async_op)


def reduce(tensor: Tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across ranks into rank ``dst`` (others keep their input).

    >>> dist.reduce(t, dst=0)         # rank 0 holds the sum
    """
    comm = _comm()
    buf = _buffer(tensor, "reduce")
    mop = _mpi_op(op)
    _check_root(dst, "dst", "reduce")
    _check("reduce", buf.shape, buf.dtype, int(dst), op)
    MPI = _mpi()
    is_dst = _GROUP.rank == dst
    req = comm.Ireduce(MPI.IN_PLACE if is_dst else buf, buf if is_dst else None, op=mop, root=dst)
    return _complete([req], f"reduce to rank {dst} ({_shape_text(buf)})",
                     lambda: _finish_avg(tensor, buf, op, dst), async_op)


def _finish_avg(tensor, buf, op, dst):
    if _GROUP.rank == dst:
        if op is ReduceOp.AVG:
            buf /= _GROUP.size
        _bump(tensor)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy ``tensor`` from rank ``src`` to every rank, in place.

    >>> dist.broadcast(weights, src=0)
    """
    if _is_gpu(tensor):
        return nccl_broadcast(_GROUP, tensor, src, async_op)
    return _broadcast(tensor, src, async_op, check=True)


def _broadcast(tensor: Tensor, src: int, async_op: bool, check: bool, what: str = "broadcast"):
    comm = _comm()
    buf = _buffer(tensor, "broadcast")
    _check_root(src, "src", "broadcast")
    if check:
        _check("broadcast", buf.shape, buf.dtype, int(src))
    return _complete([comm.Ibcast(buf, root=src)], f"{what} from rank {src} ({_shape_text(buf)})",
                     lambda: _bump(tensor), async_op)


def _bcast_bytes(data: bytes | None, src: int, what: str) -> bytes:
    comm = _comm()
    n = np.array([len(data) if _GROUP.rank == src else 0], np.int64)
    _wait([comm.Ibcast(n, root=src)], what)
    buf = np.frombuffer(data, np.uint8).copy() if _GROUP.rank == src else np.empty(int(n[0]), np.uint8)
    _wait([comm.Ibcast(buf, root=src)], what)
    return buf.tobytes()


def _allgather_bytes(data: bytes, what: str) -> list[bytes]:
    """Every rank's ``data`` (any lengths), on every rank: an all-gather of lengths, then of bytes."""
    comm = _comm()
    size = _GROUP.size
    lens = np.empty(size, np.int64)
    _wait([comm.Iallgather(np.array([len(data)], np.int64), lens)], what)
    recv = np.empty(int(lens.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    send = np.frombuffer(data, np.uint8)
    _wait([comm.Iallgatherv(send, [recv, lens, offsets, _mpi().BYTE])], what)
    return [recv[o:o + n].tobytes() for o, n in zip(offsets, lens)]


def broadcast_object_list(object_list: list, src: int = 0, group=None) -> None:
    """Broadcast picklable Python objects (small metadata only; never weights).

    Like ``torch.distributed``'s, this pickles the objects on ``src`` and unpickles them on
    the other ranks: use it only between the processes of your own job.

    >>> objs = [{"epoch": 3}] if dist.get_rank() == 0 else [None]
    >>> dist.broadcast_object_list(objs, src=0)
    """
    import pickle  # noqa: PLC0415  (process-to-process within one job, as in torch.distributed)

    _check_root(src, "src", "broadcast_object_list")
    _check("broadcast_object_list", root=int(src), n=len(object_list))
    data = pickle.dumps(list(object_list), protocol=pickle.HIGHEST_PROTOCOL) if _GROUP.rank == src else None
    got = _bcast_bytes(data, src, f"broadcast_object_list from rank {src}")
    object_list[:] = pickle.loads(got)


def _check_list(tensor_list, like: Tensor, op: str):
    if len(tensor_list) != _GROUP.size:
        raise ValueError(f"{op}: expected a list of {_GROUP.size} tensors (one per rank), "
                         f"got {len(tensor_list)}")
    for t in tensor_list:
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ValueError(f"{op}: every tensor must have shape {list(like.shape)} and dtype "
                             f"{like.dtype}; got {list(t.shape)} {t.dtype}")


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` on every rank.

    >>> out = [dg.zeros(3) for _ in range(dist.get_world_size())]
    >>> dist.all_gather(out, t)
    """
    comm = _comm()
    _check_list(tensor_list, tensor, "all_gather")
    send = _buffer(tensor, "all_gather")
    _check("all_gather", send.shape, send.dtype)
    recv = np.empty((_GROUP.size,) + send.shape, send.dtype)

    def finish():
        for r, t in enumerate(tensor_list):
            t._data[...] = recv[r]
            _bump(t)

    return _complete([comm.Iallgather(send, recv)], f"all_gather ({_shape_text(send)})", finish, async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` along dim 0 into ``output_tensor``.

    >>> out = dg.zeros(dist.get_world_size() * 3)
    >>> dist.all_gather_into_tensor(out, t)       # t has 3 elements
    """
    comm = _comm()
    send = _buffer(input_tensor, "all_gather_into_tensor")
    recv = _buffer(output_tensor, "all_gather_into_tensor")
    if recv.size != send.size * _GROUP.size:
        raise ValueError(f"all_gather_into_tensor: output has {recv.size} elements, expected "
                         f"{send.size} x {_GROUP.size}")
    if recv.dtype != send.dtype:
        raise ValueError(f"all_gather_into_tensor: output dtype {recv.dtype} differs from input dtype "
                         f"{send.dtype}")
    _check("all_gather_into_tensor", send.shape, send.dtype)
    return _complete([comm.Iallgather(send, recv)], f"all_gather_into_tensor ({_shape_text(send)})",
                     lambda: _bump(output_tensor), async_op)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """Reduce ``input_list`` element-wise across ranks; rank r receives element r.

    >>> dist.reduce_scatter(out, [dg.ones(3)] * dist.get_world_size())   # out == world_size
    """
    comm = _comm()
    _check_list(input_list, output, "reduce_scatter")
    mop = _mpi_op(op)
    recv = _buffer(output, "reduce_scatter")
    _check("reduce_scatter", recv.shape, recv.dtype, reduce_op=op, n=len(input_list))
    send = np.ascontiguousarray(np.stack([_buffer(t, "reduce_scatter") for t in input_list]))

    def finish():
        if op is ReduceOp.AVG:
            recv[...] = recv / _GROUP.size
        _bump(output)

    return _complete([comm.Ireduce_scatter_block(send, recv, op=mop)], f"reduce_scatter ({_shape_text(recv)})",
                     finish, async_op)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0, group=None,
           async_op: bool = False):
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``.

    >>> glist = [dg.zeros(3) for _ in range(world)] if dist.get_rank() == 0 else None
    >>> dist.gather(t, glist, dst=0)
    """
    comm = _comm()
    send = _buffer(tensor, "gather")
    _check_root(dst, "dst", "gather")
    is_dst = _GROUP.rank == dst
    if is_dst:
        if gather_list is None:
            raise ValueError("gather: the destination rank must pass gather_list")
        _check_list(gather_list, tensor, "gather")
    _check("gather", send.shape, send.dtype, int(dst))
    recv = np.empty((_GROUP.size,) + send.shape, send.dtype) if is_dst else None

    def finish():
        if is_dst:
            for r, t in enumerate(gather_list):
                t._data[...] = recv[r]
                _bump(t)

    return _complete([comm.Igather(send, recv, root=dst)], f"gather to rank {dst} ({_shape_text(send)})",
                     finish, async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0, group=None,
            async_op: bool = False):
    """Rank ``src`` sends ``scatter_list[r]`` to rank r (into ``tensor``).

    >>> slist = [dg.full((3,), float(r)) for r in range(world)] if dist.get_rank() == 0 else None
    >>> dist.scatter(t, slist, src=0)
    """
    comm = _comm()
    recv = _buffer(tensor, "scatter")
    _check_root(src, "src", "scatter")
    send = None
    if _GROUP.rank == src:
        if scatter_list is None:
            raise ValueError("scatter: the source rank must pass scatter_list")
        _check_list(scatter_list, tensor, "scatter")
        send = np.ascontiguousarray(np.stack([t._data for t in scatter_list]))
    _check("scatter", recv.shape, recv.dtype, int(src))
    return _complete([comm.Iscatter(send, recv, root=src)], f"scatter from rank {src} ({_shape_text(recv)})",
                     lambda: _bump(tensor), async_op)


def barrier(group=None, async_op: bool = False):
    """Wait until every rank reaches this point.

    >>> dist.barrier()
    """
    comm = _comm()
    _check("barrier")
    return _complete([comm.Ibarrier()], "barrier", None, async_op)


# ---------------------------------------------------------------------------
# The GPU path: NCCL collectives on CuPy arrays, behind the same API (was nccl.py).
# The GPU path: NCCL collectives on CuPy arrays, behind the same API.
#
# The NCCL communicator is created on first use: rank 0 makes a unique id and
# MPI broadcasts it.  Each rank uses the GPU ``rank % device_count``.  This path
# needs CuPy built with NCCL (``pip install cupy-cuda12x``) and NVIDIA GPUs.
# ---------------------------------------------------------------------------

_NCCL_DTYPES = {"float16": 6, "float32": 7, "float64": 8, "int32": 2, "int64": 4, "uint8": 1, "int8": 0}
_NCCL_OPS = {ReduceOp.SUM: 0, ReduceOp.PRODUCT: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3, ReduceOp.AVG: 0}


def _communicator(group):
    if group.nccl is None:
        try:
            import cupy  # noqa: PLC0415  (CuPy: GPU runs only)
            from cupy.cuda import nccl  # noqa: PLC0415  (CuPy: GPU runs only)
        except ImportError as exc:
            raise RuntimeError("GPU collectives need CuPy with NCCL: pip install cupy-cuda12x") from exc
        if group.comm is None:
            raise RuntimeError("call dyngraph.distributed.init_process_group() first")
        cupy.cuda.Device(group.rank % cupy.cuda.runtime.getDeviceCount()).use()
        uid = nccl.get_unique_id() if group.rank == 0 else None
        uid = group.comm.bcast(uid, root=0)
        group.nccl = nccl.NcclCommunicator(group.size, uid, group.rank)
    return group.nccl


def _nccl_dtype_code(a):
    try:
        return _NCCL_DTYPES[a.dtype.name]
    except KeyError as exc:
        raise TypeError(f"NCCL does not support dtype {a.dtype}") from exc


def nccl_all_reduce(group, tensor, op, async_op):
    import cupy  # noqa: PLC0415  (CuPy: GPU runs only)

    comm = _communicator(group)
    a = tensor._data
    stream = cupy.cuda.get_current_stream()
    comm.allReduce(a.data.ptr, a.data.ptr, a.size, _nccl_dtype_code(a), _NCCL_OPS[op], stream.ptr)

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
    import cupy  # noqa: PLC0415  (CuPy: GPU runs only)

    comm = _communicator(group)
    a = tensor._data
    stream = cupy.cuda.get_current_stream()
    comm.bcast(a.data.ptr, a.size, _nccl_dtype_code(a), src, stream.ptr)
    work = Work([], lambda: (stream.synchronize(), _bump(tensor)))
    if not async_op:
        work.wait()
        return None
    return work
