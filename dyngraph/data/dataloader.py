"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers=0`` batches are produced in the main process.  With
``num_workers > 0`` each worker is a separate process (``multiprocessing``)
that receives lists of indices on its own queue, fetches and collates the
samples, and writes the batch to a pipe of its own (``_worker_pipe``); the main
process hands out ``prefetch_factor`` tasks per worker ahead and yields batches
in sampler order.  Tensors cross the process boundary as NumPy buffers
(``Tensor`` pickles its data only, never a graph), written and read without an
intermediate serialised copy.

* Reproducible: the sampler order comes from ``generator`` (or the default
  generator, so ``dg.manual_seed`` fixes it), and each worker is seeded with
  ``base_seed + worker_id`` (Python's ``random``, NumPy's global generator and
  dyngraph's default generator), ``base_seed`` drawn from the same generator.
* An exception in a worker is re-raised in the main process with the worker's
  traceback text.  A worker that dies (SIGKILL from the OOM killer, a segfault,
  ``os._exit``), even half-way through sending a batch, raises
  ``RuntimeError: DataLoader worker (pid N) is killed by signal: Killed.`` (or
  ``... exited unexpectedly with exit code C``) within about 0.1 s: every wait
  of the main process is a poll of the workers' pipes and their process
  sentinels, never a blocking read.
* ``timeout > 0`` bounds the wait for each batch, counted from the moment the
  main process starts waiting until the whole batch has arrived.
* Workers are shut down when the epoch ends (unless ``persistent_workers``),
  when the iterator is garbage-collected, or when the loader errors: each gets
  a stop message and its pipe is closed (a worker blocked writing a batch nobody
  will read gets ``EPIPE`` and exits); after an error the workers get 0.1 s
  before SIGTERM and 0.5 s more before SIGKILL, so the error is not delayed by
  a stuck worker.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import pickle
import queue
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..random import Generator, default_generator
from ._worker_pipe import FrameReader, enlarge_pipe, send_message
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]

_POLL_S = 0.1            # how often a waiting side re-checks that its peer is alive
_JOIN_TIMEOUT_S = 5.0    # graceful shutdown (end of epoch): idle workers exit well within this
_ERROR_GRACE_S = 0.1     # after an error: idle workers exit at once; one stuck in user code gets SIGTERM
_TERM_GRACE_S = 0.5      # ... and then SIGKILL if it has not exited
_READER_FDS: set[int] = set()   # read ends of all live worker pipes of this process (see _worker_loop)


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker process."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: its ``id``, ``num_workers``, ``seed`` and its copy of the ``dataset``.
    In the main process: ``None``.

    >>> info = dg.data.get_worker_info()
    >>> start = 0 if info is None else info.id     # shard an IterableDataset across workers
    """
    return _worker_info


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc_type = type(exc)
        try:                          # a class defined in a function cannot cross the pipe
            pickle.dumps(self.exc_type)
        except Exception:
            self.exc_type = RuntimeError
        self.message = f"Caught {type(exc).__name__} {where}.\nOriginal " + "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        msg = self.message
        if self.exc_type is KeyError:
            msg = KeyError_msg(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exc


class KeyError_msg(str):  # noqa: N801
    """KeyError quotes its message with repr(); keep the traceback readable."""

    def __repr__(self) -> str:
        return str(self)


class _StopMarker:
    """An iterable-dataset worker ran out of data."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


# -- fetching (shared by the main process and the workers) -------------------------------------
class _MapFetcher:
    def __init__(self, dataset, auto_collation: bool, collate_fn, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.getitems = getattr(dataset, "__getitems__", None)

    def fetch(self, index):
        if self.auto_collation:
            if self.getitems is not None:
                data = self.getitems(index)
            else:
                data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterFetcher:
    def __init__(self, dataset, auto_collation: bool, collate_fn, drop_last: bool) -> None:
        self.it = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.it))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.it)
        return self.collate_fn(data)


def _fetcher(dataset, auto_collation, collate_fn, drop_last):
    cls = _IterFetcher if isinstance(dataset, IterableDataset) else _MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


class _InfiniteConstantSampler(Sampler):
    """For iterable datasets: an endless stream of ``None`` (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


# -- worker process ----------------------------------------------------------------------------
def _seed_worker(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    default_generator.manual_seed(seed)


def _send(conn, idx, data, worker_id) -> None:
    try:
        send_message(conn.fileno(), (idx, data))
    except OSError:
        raise
    except Exception as e:            # e.g. a batch that cannot be pickled: report it, don't vanish
        send_message(conn.fileno(), (idx, _ExceptionWrapper(
            e, f"in DataLoader worker process {worker_id} while sending batch {idx} to the main process")))


def _parent_alive(parent_pid: int, direct: bool) -> bool:
    if direct:                     # fork / spawn: a dead parent means a new OS parent
        return os.getppid() == parent_pid
    # forkserver: the OS parent is the fork server; multiprocessing knows the real parent
    parent = mp.parent_process()
    return parent is None or parent.is_alive()


def _worker_loop(dataset, index_queue, conn, stop_flag, auto_collation, collate_fn, drop_last,
                 seed, init_fn, worker_id, num_workers, parent_pid, inherited_fds=()):
    global _worker_info
    direct = os.getppid() == parent_pid
    # A forked worker inherits the main process's read ends of every worker pipe (its own too);
    # holding them would keep a write to a pipe the main process closed from failing with EPIPE.
    # They are replaced by /dev/null rather than closed, so that the numbers are not reused while
    # the copied Connection objects that own them still exist.
    if inherited_fds:
        null = os.open(os.devnull, os.O_RDONLY)
        for fd in inherited_fds:
            try:
                os.dup2(null, fd)
            except OSError:
                pass
        os.close(null)
    try:
        _seed_worker(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _fetcher(dataset, auto_collation, collate_fn, drop_last)
        except Exception as e:
            init_error = _ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
        while True:
            try:
                task = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not _parent_alive(parent_pid, direct):   # the main process died: leave quietly
                    return
                continue
            if task is None or stop_flag.value:
                return
            idx, index = task
            if init_error is not None:
                _send(conn, idx, init_error, worker_id)
                init_error = None
                continue
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                data = _StopMarker(worker_id)
            except Exception as e:
                data = _ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
            _send(conn, idx, data, worker_id)
            del data
    except (KeyboardInterrupt, BrokenPipeError):
        # BrokenPipeError: the main process closed our pipe (shutdown, or it died): nothing to do.
        pass


# -- iterators ---------------------------------------------------------------------------------
class _BaseIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        # Like PyTorch, every iterator (single- or multi-process) draws the workers' base seed
        # first, so the sampler order for a given generator does not depend on num_workers.
        self._base_seed = int((loader.generator.rng if loader.generator is not None else default_generator.rng)
                              .integers(0, 2**62))
        self._sampler_iter = iter(self._index_sampler)
        self._timeout = loader.timeout
        self._num_yielded = 0
        self._length = _safe_len(loader)

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return self._length

    def _next_index(self):
        return next(self._sampler_iter)

    def _reset(self, loader: DataLoader) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0


def _safe_len(loader):
    try:
        return len(loader)
    except TypeError:
        return -1


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = _fetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)

    def __next__(self):
        index = self._next_index()
        data = self._fetcher.fetch(index)
        self._num_yielded += 1
        return data


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor or 2
        self._persistent = loader.persistent_workers
        self._in_order = loader.in_order
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        elif isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        self._ctx = ctx
        self._shutdown = False
        # A lock-free flag: a worker killed while holding an Event's lock would deadlock set().
        self._stop_flag = ctx.RawValue("b", 0)
        self._index_queues = []
        self._workers = []
        self._readers: list[FrameReader] = []
        self._conns = []
        self._arrived: collections.deque = collections.deque()
        base_seed = self._base_seed
        try:
            for wid in range(self._num_workers):
                iq = ctx.Queue()
                r, w_end = ctx.Pipe(duplex=False)
                enlarge_pipe(w_end.fileno())
                self._index_queues.append(iq)
                self._conns.append(r)
                self._readers.append(FrameReader(r.fileno()))
                _READER_FDS.add(r.fileno())
                # fd numbers mean the same thing in the child only when it is forked
                inherited = tuple(_READER_FDS) if ctx.get_start_method() == "fork" else ()
                w = ctx.Process(
                    target=_worker_loop, daemon=True,
                    args=(self._dataset, iq, w_end, self._stop_flag, self._auto_collation,
                          self._collate_fn, self._drop_last, base_seed + wid, loader.worker_init_fn, wid,
                          self._num_workers, os.getpid(), inherited))
                try:
                    w.start()
                finally:
                    # Only the worker may hold its write end: then its death is also end-of-file
                    # here, and workers started later do not inherit it.
                    w_end.close()
                self._workers.append(w)
        except BaseException:
            self._shutdown_workers(graceful=False)
            raise
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict[int, tuple] = {}   # idx -> (worker_id,) pending, or (worker_id, data) arrived
        self._outstanding = 0
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        self._sampler_done = False
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _reset(self, loader: DataLoader) -> None:
        # persistent workers: drain what the previous (possibly abandoned) epoch left in flight
        while self._outstanding > 0:
            self._get_result()
        super()._reset(loader)
        self._start_epoch()

    def _try_put_index(self) -> None:
        if self._sampler_done or not any(self._active):
            return
        try:
            index = self._next_index()
        except StopIteration:
            self._sampler_done = True
            return
        for _ in range(self._num_workers):
            wid = next(self._worker_cycle)
            if self._active[wid]:
                break
        else:
            return
        self._index_queues[wid].put((self._send_idx, index))
        self._task_info[self._send_idx] = (wid,)
        self._send_idx += 1
        self._outstanding += 1

    def _fail(self, msg: str):
        self._shutdown_workers(graceful=False)
        raise RuntimeError(msg) from None

    def _dead_worker_error(self, w) -> str:
        w.join(timeout=_POLL_S)          # reap it, so the exit code is known
        code = w.exitcode
        if code is not None and code < 0:
            try:
                desc = signal.strsignal(-code) or signal.Signals(-code).name
            except ValueError:
                desc = f"signal {-code}"
            what = (f"is killed by signal: {desc}. It may have run out of memory (the OOM killer sends "
                    "SIGKILL) or crashed in native code")
        else:
            what = (f"exited unexpectedly with exit code {code}. Dataset, collate_fn or worker_init_fn "
                    "code may have called sys.exit() or os._exit()")
        return f"DataLoader worker (pid {w.pid}) {what}; the batch it was producing or sending is lost."

    def _get_result(self):
        """Wait for the next message from any worker; every wait is bounded (no blocking reads)."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            if self._arrived:
                self._outstanding -= 1
                return self._arrived.popleft()
            wait_s = _POLL_S
            if deadline is not None:
                wait_s = max(0.0, min(wait_s, deadline - time.monotonic()))
            fds = {r.fd: (wid, r) for wid, r in enumerate(self._readers)}
            sentinels = {w.sentinel: w for w in self._workers}
            ready = mp_connection.wait(list(fds) + list(sentinels), timeout=wait_s)
            for fd in ready:
                if fd in fds:
                    wid, reader = fds[fd]
                    try:
                        self._arrived.extend(reader.pump())
                    except EOFError:
                        self._fail(self._dead_worker_error(self._workers[wid]))
            if self._arrived:
                continue
            for w in self._workers:
                if w.sentinel in ready or not w.is_alive():
                    self._fail(self._dead_worker_error(w))
            if deadline is not None and time.monotonic() >= deadline:
                self._fail(f"DataLoader timed out after {self._timeout} seconds waiting for a batch from "
                           f"its workers (pids {', '.join(str(w.pid) for w in self._workers)})")

    def __next__(self):
        while True:
            # drop leading slots of workers that ran out of data (iterable datasets)
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._active[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            if self._rcvd_idx >= self._send_idx:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            if self._shutdown:
                raise StopIteration
            idx, data = self._get_result()
            if isinstance(data, _StopMarker):
                self._active[data.worker_id] = False
                self._task_info.pop(idx, None)
                continue
            if idx not in self._task_info:      # a late reply for a slot already skipped
                continue
            if not self._in_order:              # in_order=False: hand out batches as they arrive
                del self._task_info[idx]
                return self._process(data)
            if idx == self._rcvd_idx:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process(data)
            self._task_info[idx] += (data,)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            self._shutdown_workers(graceful=False)
            data.reraise()
        self._num_yielded += 1
        return data

    def _shutdown_workers(self, graceful: bool = True) -> None:
        """Stop the workers.  ``graceful``: they are idle (end of epoch) and get time to exit;
        otherwise (an error, a dead or stuck worker) they get ``_ERROR_GRACE_S`` before SIGTERM."""
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._stop_flag.value = 1
            for iq in self._index_queues:
                try:
                    iq.put(None)
                except (OSError, ValueError):
                    pass
            # Close our read ends first: a worker blocked writing a batch gets EPIPE and exits.
            for c in self._conns:
                _READER_FDS.discard(c.fileno())
                c.close()
            self._conns, self._readers = [], []
            end = time.monotonic() + (_JOIN_TIMEOUT_S if graceful else _ERROR_GRACE_S)
            for w in self._workers:
                w.join(timeout=max(0.0, end - time.monotonic()))
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    try:                        # a stopped (SIGSTOP) worker acts on SIGTERM only once continued
                        os.kill(w.pid, signal.SIGCONT)
                    except (OSError, TypeError):
                        pass
            end = time.monotonic() + _TERM_GRACE_S
            for w in self._workers:
                w.join(timeout=max(0.0, end - time.monotonic()))
                if w.is_alive():                # ignored SIGTERM
                    w.kill()
                    w.join()
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
        finally:
            self._workers = []

    def __del__(self):
        if not getattr(self, "_shutdown", True) and sys is not None:
            self._shutdown_workers()


# -- the loader --------------------------------------------------------------------------------
class DataLoader:
    """Iterate over ``dataset`` in batches (``torch.utils.data.DataLoader``'s arguments and behaviour).

    >>> loader = dg.data.DataLoader(dataset, batch_size=64, shuffle=True,
    ...                             generator=dg.Generator().manual_seed(0))
    >>> for x, y in loader: ...
    >>> loader = dg.data.DataLoader(dataset, batch_size=64, num_workers=2)   # worker processes
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable | None = None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing; "
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None")
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError("DataLoader: prefetch_factor option should be a positive integer")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = (2 if num_workers > 0 else None) if prefetch_factor is None else prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)          # TypeError if the stream has no length, as in PyTorch
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __del__(self):
        it = getattr(self, "_iterator", None)
        if it is not None and sys is not None:
            it._shutdown_workers()

