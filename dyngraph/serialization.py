"""Checkpoints: ``dg.save(obj, path)`` / ``dg.load(path)`` in the safetensors format, never pickle.

``obj`` may be any nesting of dicts, lists and tuples holding tensors, NumPy
arrays, numbers, strings, booleans and ``None`` (a model's ``state_dict()``,
an optimizer's, an epoch counter...).  The file is one standard safetensors
file:

* every tensor is stored once under its flattened path (``"model.fc.weight"``,
  ``"optimizer.state.0.exp_avg"``; a plain state dict keeps its own keys, so
  ``safetensors.torch.load_file`` reads it straight into a PyTorch model);
* the non-tensor structure (dict keys and their types, lists, numbers...) is
  JSON in the header's ``__metadata__["dyngraph"]``, with a CRC-32 of the data
  section so corruption is detected;
* a safetensors file written by another program (no dyngraph metadata) loads
  as a flat ``{name: Tensor}`` dict.

Loading never executes code from the file: a pickle (``torch.save``) file is
rejected with an explanation.  Saving is atomic: the bytes go to a temporary
file in the same directory, which is flushed, fsynced and renamed over the
target, so a crash mid-write leaves the previous checkpoint intact.

>>> dg.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, "ckpt.safetensors")
>>> ckpt = dg.load("ckpt.safetensors"); model.load_state_dict(ckpt["model"])
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
import zlib
from typing import Any, BinaryIO

import numpy as np

from .tensor import Tensor

__all__ = ["save", "load", "CheckpointError"]

_FORMAT_VERSION = 1
_DTYPES = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "U32": np.dtype("<u4"), "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"), "C64": np.dtype("<c8"),
}
_CODES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupted, or not a safetensors file."""


# -- saving ----------------------------------------------------------------------------------
class _Packer:
    """Flatten ``obj`` into (tensors by key, JSON structure)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.by_id: dict[int, str] = {}
        self.keep: list = []      # keep saved objects alive so ids stay unique

    def key_for(self, path: list[str]) -> str:
        base = ".".join(path) if path else "tensor"
        key, n = base, 1
        while key in self.arrays:
            key, n = f"{base}#{n}", n + 1
        return key

    def pack(self, obj, path: list[str]):
        if isinstance(obj, Tensor) or isinstance(obj, np.ndarray):
            arr = obj._data if isinstance(obj, Tensor) else obj
            if not isinstance(arr, np.ndarray):       # cupy and friends: bring to host
                arr = np.asarray(obj.cpu()._data)
            if arr.dtype not in _CODES and arr.dtype.newbyteorder("<") not in _CODES:
                raise TypeError(f"dg.save: cannot store dtype {arr.dtype} (at {_where(path)}) in "
                                "safetensors; convert the tensor first (e.g. .float())")
            key = self.by_id.get(id(obj))
            if key is None:
                key = self.key_for(path)
                self.arrays[key] = arr
                self.by_id[id(obj)] = key
                self.keep.append(obj)
            node = {"T" if isinstance(obj, Tensor) else "A": key}
            if isinstance(obj, Tensor) and obj._rg:
                node["rg"] = True
            return node
        if obj is None or isinstance(obj, (bool, str)):
            return {"v": obj}
        if isinstance(obj, (int, np.integer)):
            return {"v": int(obj)}
        if isinstance(obj, (float, np.floating)):
            f = float(obj)
            return {"v": f} if math.isfinite(f) else {"f": repr(f)}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                items.append([_key(k, path), self.pack(v, path + [str(k)])])
            return {"D": items}
        if isinstance(obj, tuple):
            return {"U": [self.pack(v, path + [str(i)]) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return {"L": [self.pack(v, path + [str(i)]) for i, v in enumerate(obj)]}
        from .dtypes import dtype as _dg_dtype  # noqa: PLC0415

        if isinstance(obj, _dg_dtype):
            return {"dt": str(obj)}
        raise TypeError(
            f"dg.save: cannot save an object of type {type(obj).__name__} at {_where(path)}: "
            "checkpoints hold tensors, NumPy arrays, numbers, strings, booleans, None and "
            "dicts/lists/tuples of them (dyngraph never pickles; store the object's state as plain data)")


def _where(path: list[str]) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _key(k, path):
    if isinstance(k, bool) or k is None:
        return {"v": k}
    if isinstance(k, str):
        return k
    if isinstance(k, (int, np.integer)):
        return {"i": int(k)}
    if isinstance(k, (float, np.floating)):
        return {"f": repr(float(k))}
    if isinstance(k, tuple):
        return {"U": [_key(x, path) for x in k]}
    raise TypeError(f"dg.save: dict key {k!r} of type {type(k).__name__} at {_where(path)} is not "
                    "supported (use str, int, float, bool, None or tuples of them)")


def _contiguous(a: np.ndarray) -> np.ndarray:
    # (np.ascontiguousarray would turn a 0-d array into shape (1,))
    return a if a.flags.c_contiguous else a.copy(order="C")


def _header(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> tuple[bytes, list[np.ndarray]]:
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for key, arr in arrays.items():
        a = _contiguous(arr)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        code = _CODES[a.dtype]
        header[key] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)       # the data section starts 8-byte aligned
    return raw, blobs


def _write_bytes(fh: BinaryIO, data) -> None:
    """Write one chunk (separate so tests can simulate a failure mid-write)."""
    fh.write(data)


def _serialize_to(fh: BinaryIO, obj) -> None:
    packer = _Packer()
    structure = packer.pack(obj, [])
    crc = 0
    views = []
    for arr in packer.arrays.values():
        a = _contiguous(arr)
        views.append(a)
    for a in views:
        crc = zlib.crc32(memoryview(a).cast("B"), crc) if a.size else crc
    metadata = {"format": "pt", "dyngraph": json.dumps({"version": _FORMAT_VERSION, "root": structure}),
                "dyngraph_crc32": str(crc)}
    head, blobs = _header(dict(zip(packer.arrays, views, strict=True)), metadata)
    _write_bytes(fh, struct.pack("<Q", len(head)))
    _write_bytes(fh, head)
    for a in blobs:
        if a.size:
            _write_bytes(fh, memoryview(a).cast("B"))


def save(obj: Any, f: str | os.PathLike | BinaryIO, **kwargs) -> None:
    """Save ``obj`` (nested dicts/lists/tuples of tensors and plain values) as a safetensors file.

    The write is atomic when ``f`` is a path: the previous file survives any failure.

    >>> dg.save(model.state_dict(), "model.safetensors")
    """
    if hasattr(f, "write"):
        _serialize_to(f, obj)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            _serialize_to(fh, obj)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:   # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# -- loading ---------------------------------------------------------------------------------
def _fail(name: str, what: str):
    raise CheckpointError(f"dg.load: {name}: {what}; the file was not loaded (nothing was changed)")


def _read_all(f) -> tuple[bytes, str]:
    if hasattr(f, "read"):
        return f.read(), getattr(f, "name", "<file object>")
    path = os.fspath(f)
    try:
        with open(path, "rb") as fh:
            return fh.read(), path
    except FileNotFoundError:
        raise FileNotFoundError(f"dg.load: no such checkpoint file: {path!r}") from None


def _check_not_pickle(buf: bytes, name: str) -> None:
    if buf[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05") or buf[:4] == b"PK\x03\x04":
        _fail(name, "this is a pickle / torch.save file, which dyngraph refuses to load: unpickling can "
                    "run arbitrary code. Re-save it as safetensors in the program that wrote it, e.g. "
                    "`safetensors.torch.save_file(model.state_dict(), path)`")


def _parse(buf: bytes, name: str):
    _check_not_pickle(buf, name)
    if len(buf) < 8:
        _fail(name, f"file is {len(buf)} bytes long, too short for a safetensors header (truncated?)")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > _MAX_HEADER or 8 + n > len(buf):
        _fail(name, f"header length field says {n} bytes but the file has only {len(buf) - 8} bytes after "
                    "it (truncated, or not a safetensors file)")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(name, f"the safetensors header (bytes 8..{8 + n}) is not valid JSON ({e}): corrupted file")
    if not isinstance(header, dict):
        _fail(name, "the safetensors header is not a JSON object: corrupted file")
    meta = header.pop("__metadata__", None) or {}
    data = memoryview(buf)[8 + n:]
    arrays: dict[str, np.ndarray] = {}
    end = 0
    for key, info in header.items():
        try:
            dt = _DTYPES[info["dtype"]]
            shape = tuple(int(s) for s in info["shape"])
            start, stop = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            if isinstance(info, dict) and info.get("dtype") not in _DTYPES:
                _fail(name, f"tensor {key!r} has dtype {info.get('dtype')!r}, which dyngraph cannot read")
            _fail(name, f"header entry for tensor {key!r} is malformed: {info!r}")
        nbytes = math.prod(shape) * dt.itemsize
        if stop - start != nbytes or start < 0:
            _fail(name, f"tensor {key!r}: data_offsets [{start}, {stop}] don't match its dtype {info['dtype']} "
                        f"and shape {list(shape)} ({nbytes} bytes)")
        if stop > len(data):
            _fail(name, f"tensor {key!r} needs bytes up to {8 + n + stop} but the file ends at {len(buf)} "
                        "(truncated file)")
        end = max(end, stop)
        arrays[key] = np.frombuffer(data[start:stop], dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
    if end != len(data):
        _fail(name, f"the data section is {len(data)} bytes but the tensors use {end}: corrupted or truncated")
    if "dyngraph_crc32" in meta:
        crc = zlib.crc32(data)
        if str(crc) != meta["dyngraph_crc32"]:
            _fail(name, f"checksum mismatch in the tensor data (CRC-32 {crc}, header says "
                        f"{meta['dyngraph_crc32']}): the file is corrupted")
    return arrays, meta


def _unpack(node, arrays, name):
    try:
        if isinstance(node, dict) and len(node) >= 1:
            if "T" in node:
                t = Tensor._make(arrays[node["T"]], False, None, 0)
                if node.get("rg"):
                    t._rg = True
                return t
            if "A" in node:
                return arrays[node["A"]]
            if "v" in node:
                return node["v"]
            if "f" in node:
                return float(node["f"])
            if "D" in node:
                return {_unkey(k): _unpack(v, arrays, name) for k, v in node["D"]}
            if "L" in node:
                return [_unpack(v, arrays, name) for v in node["L"]]
            if "U" in node:
                return tuple(_unpack(v, arrays, name) for v in node["U"])
            if "dt" in node:
                import dyngraph  # noqa: PLC0415

                return getattr(dyngraph, node["dt"].split(".")[-1])
    except KeyError as e:
        _fail(name, f"the structure refers to tensor {e} which the file does not contain: corrupted file")
    _fail(name, f"unrecognised entry {str(node)[:80]!r} in the dyngraph metadata: corrupted file")


def _unkey(k):
    if isinstance(k, str):
        return k
    if "i" in k:
        return int(k["i"])
    if "f" in k:
        return float(k["f"])
    if "U" in k:
        return tuple(_unkey(x) for x in k["U"])
    return k["v"]


def load(f: str | os.PathLike | BinaryIO, map_location=None, *, weights_only: bool = True, **kwargs) -> Any:
    """Load what ``dg.save`` wrote (or any safetensors file, as a flat ``{name: Tensor}`` dict).

    Truncated, corrupted and pickle files raise ``CheckpointError`` naming the file and the problem.

    >>> model.load_state_dict(dg.load("model.safetensors"))
    """
    buf, name = _read_all(f)
    arrays, meta = _parse(buf, name)
    if "dyngraph" not in meta:
        return {k: Tensor._make(a, False, None, 0) for k, a in arrays.items()}
    try:
        doc = json.loads(meta["dyngraph"])
        root = doc["root"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        _fail(name, f"the dyngraph structure in the header metadata is unreadable ({e}): corrupted file")
    obj = _unpack(root, arrays, name)
    if map_location is not None:
        from .backend import device as _device  # noqa: PLC0415

        _device(map_location)   # validates the name; data lives on the CPU until moved by the user
    return obj
