"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes (PyTorch's API).

>>> def work(rank, n): ...
>>> dg.multiprocessing.spawn(work, args=(10,), nprocs=2)      # waits; re-raises a child's error
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback

__all__ = ["spawn", "start_processes", "ProcessContext", "ProcessRaisedException", "ProcessExitedException"]


class ProcessException(Exception):  # noqa: N818 - PyTorch's name
    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child process raised; the message carries its traceback."""


class ProcessExitedException(ProcessException):
    """A child process exited with a nonzero code (or a signal) without raising."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, errors) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put((i, traceback.format_exc()))
        sys.exit(1)


class ProcessContext:
    """The started processes; :meth:`join` waits and raises the first failure."""

    def __init__(self, processes, errors):
        self.processes = processes
        self.error_queue = errors

    def pids(self) -> list:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every process (up to ``timeout`` seconds); True when all have finished.

        A child that failed stops the others and raises :class:`ProcessRaisedException`
        (with its traceback) or :class:`ProcessExitedException`.
        """
        for p in self.processes:
            p.join(timeout)
        failed = [(i, p) for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)]
        if failed:
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
                p.join()
            i, p = failed[0]
            reported = {}
            while not self.error_queue.empty():
                idx, text = self.error_queue.get()
                reported[idx] = text
            if i in reported:
                raise ProcessRaisedException(
                    f"\n\n-- Process {i} terminated with the following error:\n{reported[i]}", i, p.pid)
            raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}",
                                         i, p.pid, p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def _under_run_torch() -> bool:
    run_torch = sys.modules.get("dyngraph.run_torch")
    return run_torch is not None and any(isinstance(f, run_torch._TorchFinder) for f in sys.meta_path)


def start_processes(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)``; with ``join`` wait for them.

    Under ``python -m dyngraph.run_torch`` a ``"spawn"`` request forks instead: a spawned
    interpreter would import the real ``torch`` (the import hook lives in this process).
    """
    if start_method == "spawn" and _under_run_torch() and "fork" in mp.get_all_start_methods():
        start_method = "fork"
    ctx = mp.get_context(start_method)
    errors = ctx.SimpleQueue()
    procs = []
    for i in range(nprocs):
        p = ctx.Process(target=_wrap, args=(fn, i, tuple(args), errors), daemon=daemon)
        p.start()
        procs.append(p)
    context = ProcessContext(procs, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False, start_method: str = "spawn"):
    """``start_processes`` with PyTorch's default ``"spawn"`` start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
