"""Framed messages from one DataLoader worker to the main process over a pipe of its own.

Why not a shared ``multiprocessing.Queue``: its ``get(timeout=...)`` bounds only the wait for
the *first* byte; the rest of a message is read with a blocking ``recv_bytes``.  When a worker
is SIGKILLed half-way through writing an 80 MB batch, the reader waits forever for bytes that
will never come (every other process holding the queue's write end keeps the pipe from
reaching end-of-file), and the dead worker may still hold the queue's write lock.

Here every worker has its own pipe, the main process reads it without blocking
(``O_NONBLOCK``) and reassembles messages incrementally, so each wait is a
``multiprocessing.connection.wait`` on the pipes plus the workers' sentinels, with a deadline.
A dead writer is seen through its sentinel (or end-of-file) whatever state its message is in.

Messages use pickle protocol 5 with out-of-band buffers: NumPy arrays (and so tensors) are
written straight from their memory and read straight into their final buffer, without the
extra serialised copy a queue makes.  This is process-to-process traffic between a loader and
the workers it forked itself (what ``torch.utils.data`` and ``multiprocessing`` do too); nothing
is ever unpickled from a file.

Frame: ``<Q head_len><I n_buffers>``, ``n_buffers`` x ``<Q size>``, the pickle head, the buffers.
"""

from __future__ import annotations

import os
import pickle
import struct

__all__ = ["send_message", "FrameReader", "enlarge_pipe"]

_HEAD = struct.Struct("<QI")
_SIZE = struct.Struct("<Q")
_F_SETPIPE_SZ = 1031          # Linux fcntl: bigger pipes mean fewer system calls per batch


def enlarge_pipe(fd: int, nbytes: int = 1 << 20) -> None:
    """Ask for a ``nbytes`` pipe buffer (Linux allows 1 MiB unprivileged); ignored elsewhere."""
    try:
        import fcntl  # noqa: PLC0415  (POSIX only)

        fcntl.fcntl(fd, _F_SETPIPE_SZ, nbytes)
    except (ImportError, OSError):
        pass


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send_message(fd: int, obj) -> None:
    """Write ``obj`` to the pipe ``fd`` (blocking; ``BrokenPipeError`` once the reader has gone)."""
    buffers: list = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    prefix = _HEAD.pack(len(head), len(raws)) + b"".join(_SIZE.pack(r.nbytes) for r in raws)
    if len(head) < (1 << 16):      # one write for the small parts
        _write_all(fd, prefix + head)
    else:
        _write_all(fd, prefix)
        _write_all(fd, head)
    for r in raws:
        _write_all(fd, r)


class FrameReader:
    """Reassemble messages from a non-blocking pipe, a chunk at a time.

    ``pump()`` reads whatever is available now and returns the messages it completed; it never
    blocks.  ``EOFError`` means the writer closed the pipe (or died); ``partial`` tells whether
    it did so in the middle of a message.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._start()

    def _start(self) -> None:
        self._stage = "head"
        self._cur = bytearray(_HEAD.size)
        self._pos = 0
        self._sizes: list[int] = []
        self._head = b""
        self._bufs: list[bytearray] = []

    @property
    def partial(self) -> bool:
        """True when part of a message has been read."""
        return self._stage != "head" or self._pos > 0

    def _advance(self):
        """The current piece is complete: move to the next; return a finished message or None."""
        if self._stage == "head":
            head_len, nbuf = _HEAD.unpack(self._cur)
            self._head_len = head_len
            self._stage, self._cur = "sizes", bytearray(_SIZE.size * nbuf)
        elif self._stage == "sizes":
            self._sizes = [s for (s,) in _SIZE.iter_unpack(self._cur)]
            self._stage, self._cur = "pickle", bytearray(self._head_len)
        elif self._stage == "pickle":
            self._head = bytes(self._cur)
            self._stage, self._cur = "buffers", None
        else:
            self._bufs.append(self._cur)
        self._pos = 0
        if self._stage == "buffers":
            if len(self._bufs) < len(self._sizes):
                self._cur = bytearray(self._sizes[len(self._bufs)])
                return None
            msg = pickle.loads(self._head, buffers=self._bufs)
            self._start()
            return msg
        return None

    def pump(self) -> list:
        out = []
        while True:
            if self._pos == len(self._cur):
                msg = self._advance()
                if msg is not None:
                    out.append(msg)
                    return out         # hand it over now; more is read on the next call
                continue
            try:
                n = os.readv(self.fd, [memoryview(self._cur)[self._pos:]])
            except BlockingIOError:
                return out
            except InterruptedError:
                continue
            if n == 0:
                if out:
                    return out
                raise EOFError
            self._pos += n
