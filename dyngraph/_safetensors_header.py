"""Reading one safetensors file and validating its layout, before dyngraph looks at its meaning.

A safetensors file is ``u64 little-endian header length N`` + ``N`` bytes of UTF-8 JSON +
the data section.  :func:`read` opens the file, decides whether it is safetensors at all
(from the length field, the file size and the first header byte; only a file that is not
plausibly safetensors is then checked for pickle / ``torch.save`` magic), reads the
header with a hard size bound, validates every entry by the safetensors rules and only
then reads the data section, whose size the validated header fixes.  Nothing in the file
is ever looked up, imported or executed; dtype names map through a fixed table.

Every failure is a :class:`CheckpointError` naming the file.

>>> raw = read("model.safetensors")
>>> sorted(raw.entries)[:2]
['fc.bias', 'fc.weight']
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from . import dtypes as _dt

__all__ = ["CheckpointError", "RawFile", "read", "MAX_HEADER", "DTYPES", "np_dtype_for"]

# A header is ~100 bytes per tensor: 100 MB is a million tensors.  The bound is what makes
# `dg.load("/dev/urandom")` fail after 8 bytes instead of reading until memory runs out.
MAX_HEADER = 100 * 1024 * 1024

MAX_DIMS = 64   # NumPy's limit on the number of dimensions

# safetensors dtype code -> little-endian NumPy dtype.  The only place a dtype name from the
# file is interpreted; names outside it are refused.
DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "U32": np.dtype("<u4"), "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"), "C64": np.dtype("<c8"),
}
# Codes the safetensors specification defines that dyngraph does not read (a clearer message
# than "unknown dtype").  BF16 is read when dyngraph has a bfloat16 dtype (see np_dtype_for).
_SPEC_ONLY = {"BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C128"}
_ENTRY_KEYS = {"dtype", "shape", "data_offsets"}
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_ZIP_MAGIC = b"PK\x03\x04"


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupted, crafted, or not a safetensors file.

    The message names the file and what is wrong with it; nothing was loaded.

    >>> try:
    ...     dg.load("notes.txt")
    ... except dg.serialization.CheckpointError as e:
    ...     print(e)     # doctest: +SKIP
    """


CheckpointError.__module__ = "dyngraph.serialization"


def fail(name: str, what: str):
    """Raise the one error type of checkpoint loading, naming the file."""
    raise CheckpointError(f"dg.load: {name}: {what}; the file was not loaded (nothing was changed)")


def np_dtype_for(code: str) -> np.dtype | None:
    """The NumPy dtype for a safetensors dtype code, or None when dyngraph cannot hold it."""
    dt = DTYPES.get(code)
    if dt is None and code == "BF16":   # only when this dyngraph has a bfloat16 dtype
        bf = _dt._BY_NAME.get("bfloat16")
        if bf is not None:
            return bf.np                # (imports ml_dtypes on the first such file)
    return dt


@dataclass
class RawFile:
    """A validated safetensors file: raw header bytes, entries, metadata and the data section."""

    name: str
    length_field: bytes                # the 8 bytes of the header length, as written
    header: bytes                      # the N header bytes, as written (padding included)
    metadata: dict[str, str]
    entries: dict[str, tuple[str, tuple[int, ...], int, int]]   # key -> (code, shape, start, stop)
    data: bytearray | np.ndarray      # the data section (a uint8 array, or bytes of a stream)

    def array(self, key: str) -> np.ndarray:
        """The tensor ``key`` as a NumPy array of native byte order (a view when aligned)."""
        code, shape, start, stop = self.entries[key]
        dt = np_dtype_for(code)
        if stop == start:
            return np.empty(shape, dtype=dt.newbyteorder("="))
        # A view into the one data buffer (no second copy of the checkpoint in memory)...
        arr = np.frombuffer(self.data, dtype=dt, count=(stop - start) // dt.itemsize, offset=start)
        if not arr.flags.aligned:   # ...unless another writer left an unaligned offset
            arr = arr.copy()
        if not dt.isnative:
            arr = arr.astype(dt.newbyteorder("="))
        return arr.reshape(shape)


# -- the source: a path or a file object, with its size when it has one ----------------------
class _Source:
    def __init__(self, f: Any):
        self._own = None
        if hasattr(f, "read"):
            self.fh: BinaryIO = f
            self.name = str(getattr(f, "name", "<file object>"))
            self.size = None
            try:
                if f.seekable():
                    pos = f.tell()
                    end = f.seek(0, os.SEEK_END)
                    f.seek(pos)
                    self.size = end - pos
            except (AttributeError, OSError, ValueError):
                self.size = None
            return
        path = os.fspath(f)
        self.name = path if isinstance(path, str) else os.fsdecode(path)
        try:
            fh = open(path, "rb", buffering=0)
        except FileNotFoundError:
            raise FileNotFoundError(f"dg.load: no such checkpoint file: {self.name!r}") from None
        except IsADirectoryError:
            raise IsADirectoryError(f"dg.load: {self.name!r} is a directory, not a checkpoint file") from None
        self._own = self.fh = fh
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            fh.close()
            raise IsADirectoryError(f"dg.load: {self.name!r} is a directory, not a checkpoint file")
        # Devices, FIFOs and sockets have no usable size: they are read as bounded streams.
        self.size = st.st_size if stat.S_ISREG(st.st_mode) else None

    def close(self) -> None:
        if self._own is not None:
            self._own.close()

    def read_upto(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.fh.read(n - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def read_into(self, buf) -> int:
        view = memoryview(buf).cast("B")
        got = 0
        readinto = getattr(self.fh, "readinto", None)
        while got < len(buf):
            if readinto is not None:
                k = readinto(view[got:])
            else:
                chunk = self.fh.read(len(buf) - got)
                k = len(chunk)
                view[got:got + k] = chunk
            if not k:
                break
            got += k
        return got


# -- JSON with the checks json.loads does not do ---------------------------------------------
def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _no_constants(token):
    raise ValueError(f"{token} is not valid JSON")


def parse_json(text: str | bytes) -> Any:
    """Strict JSON: no duplicate keys, no NaN/Infinity literals (ValueError/RecursionError else)."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)


def _is_int(x) -> bool:
    return type(x) is int   # bool is an int subclass, and JSON true is not an offset


# -- the layout rules --------------------------------------------------------------------------
def _validate(header: Any, name: str):
    if not isinstance(header, dict):
        fail(name, f"the safetensors header is a JSON {type(header).__name__}, not an object: corrupted file")
    meta = header.get("__metadata__")
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        fail(name, "the header's __metadata__ must map strings to strings (safetensors rule): corrupted file")
    entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) != _ENTRY_KEYS:
            got = sorted(info) if isinstance(info, dict) else type(info).__name__
            fail(name, f"header entry for tensor {key!r} must have exactly the keys dtype, shape and "
                       f"data_offsets (got {got}): corrupted file")
        code, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or np_dtype_for(code) is None:
            spec = isinstance(code, str) and code in _SPEC_ONLY
            known = "a safetensors dtype dyngraph cannot hold" if spec else "not a safetensors dtype"
            fail(name, f"tensor {key!r} has dtype {str(code)[:40]!r} ({known}; readable: "
                       f"{', '.join(DTYPES)})")
        if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
            fail(name, f"tensor {key!r}: shape {str(shape)[:60]} must be a list of non-negative integers")
        if len(shape) > MAX_DIMS:
            fail(name, f"tensor {key!r} has {len(shape)} dimensions; arrays have at most {MAX_DIMS}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(_is_int(o) for o in offs)
                and 0 <= offs[0] <= offs[1]):
            fail(name, f"tensor {key!r}: data_offsets {str(offs)[:60]} must be two integers "
                       "0 <= begin <= end")
        nbytes = math.prod(shape) * np_dtype_for(code).itemsize
        if offs[1] - offs[0] != nbytes:
            fail(name, f"tensor {key!r}: data_offsets {offs} span {offs[1] - offs[0]} bytes but dtype "
                       f"{code} and shape {shape} need {nbytes}")
        entries[key] = (code, tuple(shape), offs[0], offs[1])
    # The tensors must tile the data section exactly: no gap (unchecked bytes), no overlap (two
    # tensors reading one byte range), in any order in the header.
    expected = 0
    for key, (_, _, start, stop) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if start != expected:
            what = "overlaps the previous tensor" if start < expected else f"leaves a gap of {start - expected} bytes"
            fail(name, f"tensor {key!r} at data_offsets [{start}, {stop}] {what} (expected to start at "
                       f"{expected}): tensors must cover the data section contiguously")
        expected = stop
    return meta, entries, expected


def _classify_failure(head: bytes, n: int, size: int | None, name: str):
    if head[:2] in _PICKLE_MAGIC or head[:4] == _ZIP_MAGIC:
        fail(name, "this is a pickle / torch.save file, which dyngraph refuses to load: unpickling can "
                   "run arbitrary code. Re-save it as safetensors in the program that wrote it, e.g. "
                   "`safetensors.torch.save_file(model.state_dict(), path)`")
    if len(head) < 9:
        fail(name, f"file is {len(head)} bytes long, too short for a safetensors file (truncated?)")
    if n > MAX_HEADER:
        fail(name, f"the header length field says {n} bytes, more than the {MAX_HEADER}-byte bound "
                   "(corrupted, or not a safetensors file)")
    if size is not None and 8 + n > size:
        fail(name, f"header length field says {n} bytes but the file has only {size - 8} bytes after "
                   "it (truncated, or not a safetensors file)")
    fail(name, f"not a safetensors file: the header (length {n}) must be a JSON object starting at "
               f"byte 8, found {head[8:9]!r}")


def read(f: Any) -> RawFile:
    """Read and validate one safetensors file (a path or a binary file object).

    >>> raw = read(io.BytesIO(safetensors.numpy.save({"x": np.ones(2)})))
    >>> raw.array("x")
    array([1., 1.])
    """
    src = _Source(f)
    try:
        return _read(src)
    finally:
        src.close()


def _read(src: _Source) -> RawFile:
    name, size = src.name, src.size
    head = src.read_upto(9)
    n = struct.unpack("<Q", head[:8])[0] if len(head) >= 8 else -1
    plausible = (len(head) == 9 and 2 <= n <= MAX_HEADER and (size is None or 8 + n <= size)
                 and head[8:9] == b"{")
    if not plausible:
        _classify_failure(head, n, size, name)
    rest = src.read_upto(n - 1)
    if len(rest) != n - 1:
        fail(name, f"the header length field says {n} bytes but the file ends after {1 + len(rest)} "
                   "(truncated file)")
    header_bytes = head[8:] + rest
    try:
        header = parse_json(header_bytes.decode("utf-8"))
    except UnicodeDecodeError as e:
        fail(name, f"the safetensors header (bytes 8..{8 + n}) is not valid UTF-8 ({e.reason} at byte "
                   f"{8 + e.start}): corrupted file")
    except RecursionError:
        fail(name, "the safetensors header is nested too deeply to be a safetensors header: crafted file")
    except ValueError as e:
        fail(name, f"the safetensors header (bytes 8..{8 + n}) is not valid JSON ({e}): corrupted file")
    meta, entries, data_len = _validate(header, name)
    if size is not None and 8 + n + data_len != size:
        have = size - 8 - n
        what = (f"the file ends {data_len - have} bytes early (truncated file)" if have < data_len
                else f"the file has {have - data_len} bytes after the last tensor (corrupted or appended to)")
        fail(name, f"the header describes {data_len} bytes of tensor data but {what}")
    if size is not None:
        # np.empty, not bytearray(n): no zero-fill pass, the pages are touched once, by the read
        data = np.empty(data_len, dtype=np.uint8)
        if src.read_into(data) != data_len:
            fail(name, "the file ended while reading the tensor data (truncated, or changed while reading)")
    else:
        # A stream (FIFO, device, pipe): read what the header declares, in chunks so that a lying
        # header cannot make us allocate more than actually arrives.
        data = bytearray()
        while len(data) < data_len:
            chunk = src.read_upto(min(data_len - len(data), 1 << 26))
            if not chunk:
                fail(name, f"the stream ended after {len(data)} of the {data_len} bytes of tensor data "
                           "the header describes (truncated)")
            data += chunk
        if src.read_upto(1):
            fail(name, f"the stream continues past the {data_len} bytes of tensor data the header "
                       "describes: not one safetensors file")
    return RawFile(name, head[:8], header_bytes, meta, entries, data)
