"""Checkpoints: ``dg.save(obj, path)`` / ``dg.load(path)`` in the safetensors format, never pickle.

``obj`` may be any nesting of dicts, lists and tuples holding tensors, NumPy
arrays, numbers, strings, booleans, ``None``, dtypes and whole modules (a
model's ``state_dict()``, an optimizer's, an epoch counter, the model itself).
The file is one standard safetensors file:

* every tensor is stored once under its flattened path (``"model.fc.weight"``,
  ``"optimizer.state.0.exp_avg"``; a plain state dict keeps its own keys, so
  ``safetensors.torch.load_file`` reads it straight into a PyTorch model);
* the non-tensor structure (dict keys and their types, lists, numbers, module
  trees by qualified class name...) is JSON in the header's
  ``__metadata__["dyngraph"]``;
* a CRC-32 in ``__metadata__["dyngraph_check"]`` covers every byte of the file:
  the length field, the whole header (metadata included) and the data;
* a safetensors file written by another program (no dyngraph metadata) loads
  as a flat ``{name: Tensor}`` dict.

Loading never executes, imports or looks up anything named by the file: the
header is validated by the safetensors rules and the structure by a fixed
schema with bounded depth; a module is rebuilt only for classes the caller
allow-listed (:func:`add_safe_globals`, :class:`safe_globals`; dyngraph's own
``nn`` classes are allowed by default), without calling their ``__init__``.
A pickle (``torch.save``) file is rejected with an explanation.  Every failure
is a :class:`CheckpointError` naming the file.  ``docs/security.md`` says what
exactly is promised and how it is tested.

Saving a path is atomic for regular files (a temporary file in the same
directory is flushed, fsynced and renamed over the target), writes through
symlinks to their target, writes devices and FIFOs directly, honours the umask
for new files and keeps an existing file's mode.

>>> dg.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, "ckpt.safetensors")
>>> ckpt = dg.load("ckpt.safetensors"); model.load_state_dict(ckpt["model"])
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import math
import os
import re
import secrets
import stat
import struct
import sys
import threading
import time
import types
import zlib
from typing import Any, BinaryIO

import numpy as np

from . import _safetensors_header as _st
from . import backend as _backend
from . import dtypes as _dt
from ._safetensors_header import CheckpointError
from ._safetensors_header import fail as _fail
from .tensor import Tensor

try:   # flock marks a temporary file as "being written by a live process" (stale-file cleanup)
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None

__all__ = ["save", "load", "CheckpointError", "add_safe_globals", "safe_globals", "get_safe_globals",
           "clear_safe_globals", "get_unsafe_globals_in_checkpoint"]

_FORMAT_VERSION = 2          # 1: data-only CRC in "dyngraph_crc32" (still read); 2: whole-file check
_READABLE_VERSIONS = (1, 2)
_MAX_DEPTH = 100             # nesting bound of the structure (saving and loading)
_CODES = {v: k for k, v in _st.DTYPES.items()}
# The check field is the first thing in the header, so its bytes are at a fixed place and the
# CRC can be computed over the whole file with those 8 hex digits read as "00000000".
_CHECK_KEY = "dyngraph_check"
_CHECK_PREFIX = b'{"__metadata__":{"' + _CHECK_KEY.encode() + b'":"crc32:'
_CHECK_AT = len(_CHECK_PREFIX)
_HEX8 = re.compile(rb"[0-9a-f]{8}")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_FLOAT_RE = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[+-]?\d+)?)")


def _code_for(dt: np.dtype) -> str | None:
    code = _CODES.get(dt) or _CODES.get(dt.newbyteorder("<"))
    if code is None and dt.name == "bfloat16" and _st.np_dtype_for("BF16") is not None:
        return "BF16"
    return code


# -- allow-list of classes and functions for whole-module checkpoints -------------------------
_lock = threading.Lock()
_user_globals: list = []


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', None)}"


def _check_global(entry):
    obj, name = entry if isinstance(entry, tuple) else (entry, None)
    if not (isinstance(obj, type) or callable(obj)) or not hasattr(obj, "__qualname__"):
        raise TypeError(f"add_safe_globals: {entry!r} is not a class or function (pass the object "
                        "itself, or an (object, 'qualified.name') tuple)")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"add_safe_globals: the name in {entry!r} must be a string")
    return entry


def add_safe_globals(safe_globals: list) -> None:
    """Allow ``dg.load`` to rebuild these classes (and reference these functions) from checkpoints.

    Entries are classes / functions, or ``(obj, "qualified.name")`` tuples for an object that
    was saved under another name.  The allow-list is process-wide, as in PyTorch.

    >>> dg.serialization.add_safe_globals([MyNet])
    >>> model = dg.load("model.safetensors")
    """
    entries = [_check_global(e) for e in safe_globals]
    with _lock:
        _user_globals.extend(entries)


def get_safe_globals() -> list:
    """The user-added allow-list (dyngraph's own ``nn`` classes are allowed in addition).

    >>> dg.serialization.get_safe_globals()
    []
    """
    with _lock:
        return list(_user_globals)


def clear_safe_globals() -> None:
    """Forget every class and function added with :func:`add_safe_globals`.

    >>> dg.serialization.clear_safe_globals()
    """
    with _lock:
        _user_globals.clear()


class safe_globals:  # noqa: N801 - PyTorch's spelling
    """Context manager: allow these classes/functions while the block runs.

    >>> with dg.serialization.safe_globals([MyNet]):
    ...     model = dg.load("model.safetensors")
    """

    def __init__(self, safe_globals: list):
        self._entries = [_check_global(e) for e in safe_globals]

    def __enter__(self):
        with _lock:
            _user_globals.extend(self._entries)
        return self

    def __exit__(self, *exc):
        # remove exactly what this block added (the last occurrence of each), so that entries
        # added meanwhile by add_safe_globals or another thread's block stay
        with _lock:
            for e in reversed(self._entries):
                for i in range(len(_user_globals) - 1, -1, -1):
                    if _user_globals[i] is e:
                        del _user_globals[i]
                        break
        return False


def _defaults() -> dict[str, Any]:
    """dyngraph's own nn classes and nn.functional functions: safe to rebuild / reference.

    Computed on each load from the classes that exist (Module's subclasses defined in
    ``dyngraph.nn``): nothing is imported to find them.
    """
    # Lazy: nn sits on the same floor and a plain state-dict checkpoint must not need it.
    from .nn import functional as F  # noqa: PLC0415  (plain state-dict checkpoints never need nn)
    from .nn.module import Module  # noqa: PLC0415  (plain state-dict checkpoints never need nn)

    table: dict[str, Any] = {}
    todo = [Module]
    while todo:
        cls = todo.pop()
        if cls.__module__ == "dyngraph.nn" or cls.__module__.startswith("dyngraph.nn."):
            table[_qualname(cls)] = cls
        todo.extend(cls.__subclasses__())
    for key, obj in vars(F).items():
        # the tensor functions of nn.functional (relu, conv2d, ...), not helpers it imports
        mod = str(getattr(obj, "__module__", ""))
        if (not key.startswith("_") and isinstance(obj, (types.FunctionType, types.BuiltinFunctionType))
                and mod.startswith(("dyngraph.nn.", "dyngraph.ops.", "dyngraph.surface."))):
            table[_qualname(obj)] = obj
            # and by its public name: a function moved between nn.functional's modules keeps
            # loading from files that named it dyngraph.nn.functional.<name>
            table.setdefault(f"dyngraph.nn.functional.{key}", obj)
            if mod.startswith("dyngraph.surface."):
                # checkpoints written before the surface layer existed name the function
                # by its old home in dyngraph.ops
                table[f"{_OLD_HOMES.get(mod, mod.replace('.surface.', '.ops.', 1))}.{obj.__qualname__}"] = obj
    return table


# surface modules whose functions lived in a differently named ops module before
_OLD_HOMES = {"dyngraph.surface.sorting": "dyngraph.ops.indexing",
              "dyngraph.surface.pooling": "dyngraph.ops.conv",
              "dyngraph.surface.resampling": "dyngraph.ops.conv"}


def _defined_modules() -> dict[str, Any]:
    """Every ``nn.Module`` subclass already defined in this process (``weights_only=False``).

    Found by walking ``Module.__subclasses__()``: nothing is imported and no module named by a
    file is looked up, so a file can only pick among classes the program itself defined.
    """
    from .nn.module import Module  # noqa: PLC0415 - same reason as in _defaults

    table: dict[str, Any] = {}
    todo = [Module]
    while todo:
        cls = todo.pop()
        table.setdefault(_qualname(cls), cls)
        todo.extend(cls.__subclasses__())
    return table


def _allowed(defined_modules: bool = False) -> dict[str, Any]:
    table = dict(_defaults())
    if defined_modules:
        for name, cls in _defined_modules().items():
            table.setdefault(name, cls)
    with _lock:
        for e in _user_globals:
            obj, name = e if isinstance(e, tuple) else (e, None)
            table[name or _qualname(obj)] = obj
    return table


# -- saving ----------------------------------------------------------------------------------
class _Nothing:
    """A class no object is an instance of (stands in for classes of modules not loaded)."""


class _Packer:
    """Flatten ``obj`` into (arrays by key, JSON structure); everything refused raises TypeError."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.by_id: dict[int, str] = {}
        self.module_ids: dict[int, int] = {}
        self.keep: list = []      # keep saved objects alive so ids stay unique

    def key_for(self, path: list[str]) -> str:
        base = ".".join(path) if path else "tensor"
        key, n = base, 1
        while key in self.arrays:
            key, n = f"{base}#{n}", n + 1
        return key

    def module_cls(self):
        # nn is on the same floor: not imported here. If dyngraph.nn is not loaded yet, no Module
        # (or Parameter) can exist, so a plain checkpoint is saved without importing it.
        mod = sys.modules.get("dyngraph.nn.module")
        return mod.Module if mod is not None else _Nothing

    @staticmethod
    def parameter_cls():
        mod = sys.modules.get("dyngraph.nn.parameter")
        return mod.Parameter if mod is not None else _Nothing

    def tensor(self, obj, path):
        arr = obj._data if isinstance(obj, Tensor) else obj
        if not isinstance(arr, np.ndarray):       # cupy and friends: bring to host
            arr = np.asarray(obj.cpu()._data)
        if _code_for(arr.dtype) is None:
            raise TypeError(f"dg.save: cannot store dtype {arr.dtype} (at {_where(path)}) in "
                            "safetensors; convert the tensor first (e.g. .float())")
        key = self.by_id.get(id(obj))
        if key is None:
            key = self.key_for(path)
            self.arrays[key] = arr
            self.by_id[id(obj)] = key
            self.keep.append(obj)
        if not isinstance(obj, Tensor):
            return {"A": key}
        if isinstance(obj, self.parameter_cls()):
            return {"P": key, "rg": bool(obj._rg)}
        return {"T": key, "rg": True} if obj._rg else {"T": key}

    def pack(self, obj, path: list[str], depth: int = 0):
        if depth > _MAX_DEPTH:
            raise TypeError(f"dg.save: the object is nested more than {_MAX_DEPTH} levels deep at "
                            f"{_where(path[:8])}... (a container that contains itself?)")
        if isinstance(obj, (Tensor, np.ndarray)):
            return self.tensor(obj, path)
        if obj is None or isinstance(obj, (bool, str)):
            return {"v": obj}
        if isinstance(obj, (int, np.integer)):
            return {"v": int(obj)}
        if isinstance(obj, (float, np.floating)):
            f = float(obj)
            return {"v": f} if math.isfinite(f) else {"f": repr(f)}
        if isinstance(obj, dict):
            return {"D": [[_key(k, path), self.pack(v, path + [str(k)], depth + 1)] for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"U": [self.pack(v, path + [str(i)], depth + 1) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return {"L": [self.pack(v, path + [str(i)], depth + 1) for i, v in enumerate(obj)]}
        if isinstance(obj, _dt.dtype):
            return {"dt": str(obj)}
        if isinstance(obj, self.module_cls()):
            return self.module(obj, path, depth)
        if (isinstance(obj, type) or type(obj).__name__ in ("function", "builtin_function_or_method")) \
                and hasattr(obj, "__qualname__"):
            # a class or function is stored by name only; loading resolves it through the allow-list
            return {"G": _qualname(obj)}
        hint = ("; save its .state_dict() instead" if callable(getattr(obj, "state_dict", None))
                else "; store the object's state as plain data")
        raise TypeError(
            f"dg.save: cannot save an object of type {type(obj).__name__} at {_where(path)}: "
            "checkpoints hold tensors, NumPy arrays, numbers, strings, booleans, None, dtypes, "
            "modules, classes/functions (by name) and dicts/lists/tuples of them (dyngraph never "
            f"pickles){hint}")

    def module(self, m, path, depth):
        if depth > _MAX_DEPTH:
            raise TypeError(f"dg.save: modules are nested more than {_MAX_DEPTH} levels deep at "
                            f"{_where(path[:8])}...")
        mid = self.module_ids.get(id(m))
        if mid is not None:
            return {"R": mid}          # the same module again (shared submodule, or a cycle)
        mid = self.module_ids[id(m)] = len(self.module_ids)
        self.keep.append(m)
        d = m.__dict__
        for k in _module_internal(self.module_cls()):
            if k not in _MODULE_TREE and d.get(k):
                raise TypeError(
                    f"dg.save: module {type(m).__name__} at {_where(path)} has {k} registered: hooks "
                    "are code and cannot be saved. Remove them (or save model.state_dict()) and "
                    "register them again after loading")
        node: dict[str, Any] = {"M": _qualname(type(m)), "id": mid, "training": bool(d.get("training", True))}
        attrs = [k for k in d if k not in _module_internal(self.module_cls())]
        for k in attrs:   # what dg.load would refuse is refused here, before a file is written
            if not isinstance(k, str) or (k.startswith("__") and k.endswith("__")) or _shadows_code(type(m), k):
                raise TypeError(f"dg.save: module {type(m).__name__} at {_where(path)} has an instance "
                                f"attribute {k!r} that replaces a method, property or special name; "
                                "checkpoints cannot hold it")
        node["attrs"] = [[k, self.pack(d[k], path + [k], depth + 1)] for k in attrs]
        node["params"] = [[k, None if p is None else self.tensor(p, path + [k])]
                          for k, p in d["_parameters"].items()]
        nonpersistent = d["_non_persistent_buffers_set"]
        node["buffers"] = [[k, None if b is None else self.tensor(b, path + [k]), k not in nonpersistent]
                           for k, b in d["_buffers"].items()]
        node["modules"] = [[k, None if s is None else self.module(s, path + [k], depth + 1)]
                           for k, s in d["_modules"].items()]
        return node


_CODE_ATTRS = (types.FunctionType, property, classmethod, staticmethod, types.MethodType)
def _shadows_code(cls, name: str) -> bool:
    """Would an instance attribute ``name`` hide a method or property of ``cls``?"""
    return isinstance(inspect.getattr_static(cls, name, None), _CODE_ATTRS)


_MODULE_TREE = ("training", "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")
_internal_names: frozenset | None = None


def _module_internal(module_cls) -> frozenset:
    """The attributes Module.__init__ creates (the rest of __dict__ is the module's own state)."""
    global _internal_names
    if _internal_names is None:
        _internal_names = frozenset(module_cls().__dict__)
    return _internal_names


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
    a = a if a.flags.c_contiguous else a.copy(order="C")
    return a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a


def _raw_bytes(a: np.ndarray) -> memoryview:
    # via a uint8 view: extension dtypes (ml_dtypes' bfloat16) do not export a typed buffer
    return memoryview(a.reshape(-1).view(np.uint8))


def _write_bytes(fh: BinaryIO, data) -> None:
    """Write one chunk (separate so tests can simulate a failure mid-write)."""
    fh.write(data)


def _encode(obj) -> tuple[bytes, list[np.ndarray]]:
    """(length field + header, data blobs) for ``obj``; all refusals happen here, before any I/O."""
    packer = _Packer()
    structure = packer.pack(obj, [])
    doc = json.dumps({"version": _FORMAT_VERSION, "root": structure}, separators=(",", ":"),
                     allow_nan=False)
    header: dict[str, Any] = {"__metadata__": {_CHECK_KEY: "crc32:00000000", "format": "pt", "dyngraph": doc}}
    arrays = {key: _contiguous(arr) for key, arr in packer.arrays.items()}
    # Data laid out by decreasing item size (as safetensors' own writer does), so that every
    # tensor starts aligned and loads as a view of the one data buffer; header order is kept.
    offsets = {}
    offset = 0
    blobs = []
    for key in sorted(arrays, key=lambda k: -arrays[k].dtype.itemsize):
        a = arrays[key]
        offsets[key] = [offset, offset + a.nbytes]
        offset += a.nbytes
        blobs.append(a)
    for key, a in arrays.items():
        header[key] = {"dtype": _code_for(a.dtype), "shape": list(a.shape), "data_offsets": offsets[key]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)       # the data section starts 8-byte aligned
    if not raw.startswith(_CHECK_PREFIX):   # pragma: no cover - json.dumps keeps insertion order
        raise AssertionError("dg.save: the checksum field is not at the start of the header")
    length = struct.pack("<Q", len(raw))
    crc = zlib.crc32(raw, zlib.crc32(length))
    for a in blobs:
        if a.size:
            crc = zlib.crc32(_raw_bytes(a), crc)
    raw = raw[:_CHECK_AT] + f"{crc:08x}".encode() + raw[_CHECK_AT + 8:]
    return length + raw, blobs


def _write_payload(fh: BinaryIO, payload) -> None:
    head, blobs = payload
    _write_bytes(fh, head)
    for a in blobs:
        if a.size:
            _write_bytes(fh, _raw_bytes(a))


def _os_error(e: OSError, path: str) -> OSError:
    """The same kind of error, naming the checkpoint path (never the temporary file)."""
    if e.errno is not None:
        return OSError(e.errno, f"dg.save: could not write checkpoint {path!r}: {e.strerror}", path)
    try:
        return type(e)(f"dg.save: could not write checkpoint {path!r}: {e}")
    except TypeError:   # an OSError subclass with its own constructor
        return OSError(f"dg.save: could not write checkpoint {path!r}: {e}")


def save(obj: Any, f: str | os.PathLike | BinaryIO, **kwargs) -> None:
    """Save ``obj`` (nested dicts/lists/tuples of tensors, plain values, modules) as a safetensors file.

    A regular file is replaced atomically (the previous file survives any failure) and keeps its
    mode; a new file gets the umask's mode; a symlink is written through (its target is replaced
    atomically); a device or FIFO is written directly.  Errors name ``f``.

    >>> dg.save(model.state_dict(), "model.safetensors")
    >>> dg.save(model, "whole-model.safetensors")      # dg.load rebuilds it (allow-listed classes)
    """
    write_file(f, _encode(obj))


def write_file(f: str | os.PathLike | BinaryIO, payload: tuple[bytes, list[np.ndarray]]) -> None:
    """Write ``payload`` (leading bytes, then raw array blobs) to ``f`` the way ``dg.save`` does.

    Shared by every dyngraph file writer (checkpoints, ``dg.jit`` graph files): atomic
    replace of regular files with the mode kept, symlinks written through, devices and
    FIFOs written directly, stale temporaries of killed saves removed, errors naming ``f``.

    >>> write_file("blob.safetensors", (safetensors.numpy.save({"x": np.ones(2)}), []))
    """
    payload = (payload[0], list(payload[1]))
    if hasattr(f, "write"):
        _write_payload(f, payload)
        return
    path = os.fsdecode(os.fspath(f))
    target = os.path.realpath(path)       # write through symlinks (and symlinked directories)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _os_error(e, path) from e
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"dg.save: {path!r} is a directory, not a checkpoint file", path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_direct(target, payload, path)
    else:
        _write_atomic(target, payload, st, path)


def _write_direct(target: str, payload, path: str) -> None:
    # A device or FIFO cannot be replaced by rename (and must not be): open it and write.
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _os_error(e, path) from e
    try:
        with os.fdopen(fd, "wb", closefd=False) as fh:
            _write_payload(fh, payload)
    except OSError as e:
        raise _os_error(e, path) from e
    finally:
        os.close(fd)


def _temp_name(base: str) -> str:
    return f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _open_temp(directory: str, base: str, mode: int) -> tuple[int, str]:
    """Create and lock a fresh temporary file next to the target."""
    for _ in range(16):
        tmp = os.path.join(directory, _temp_name(base))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
        if fcntl is None:
            return fd, tmp
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            # a file system without flock: no lock, but no cleanup there can take one either,
            # so this file is never mistaken for stale
            return fd, tmp
        # Another save's cleanup may have taken it for stale between open and flock: then it is
        # gone from the directory, and we start again with a new name.
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(errno.EEXIST, "could not create a temporary file (16 attempts)")


# Temporary files of the same target, ours (pid + 8 hex digits) and those of dyngraph before
# locking (tempfile.mkstemp: 8 characters of [a-z0-9_]).
_OLD_STALE_AGE = 600.0


def _cleanup_stale(directory: str, base: str) -> int:
    """Delete temporary files of the same target left by killed saves; returns how many.

    A temporary file is being written exactly while its writer holds an exclusive flock on it (the
    kernel drops the lock when the writer dies, however it dies), so a file whose lock we can
    take is stale.  Files named like those of older dyngraph versions (which did not lock) are
    removed only when unlocked and untouched for 10 minutes.  Best effort: never fails a save.
    """
    if fcntl is None:
        return 0
    ours = re.compile(re.escape(f".{base}.") + r"\d+\.[0-9a-f]{8}\.tmp")
    old = re.compile(re.escape(f".{base}.") + r"[a-z0-9_]{8}\.tmp")
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for entry in names:
        is_ours = ours.fullmatch(entry) is not None
        if not is_ours and old.fullmatch(entry) is None:
            continue
        p = os.path.join(directory, entry)
        try:
            # no symlinks followed; O_NONBLOCK so that a FIFO with a matching name cannot block us
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            if not is_ours and time.time() - st.st_mtime < _OLD_STALE_AGE:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue            # a live save is writing it
            if os.stat(p).st_ino == st.st_ino:
                os.unlink(p)
                removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _write_atomic(target: str, payload, st, path: str) -> None:
    directory, base = os.path.split(target)
    _cleanup_stale(directory, base)
    # A new file is created 0o666 and the kernel applies the umask (and default ACLs); an
    # existing file's mode is copied onto the temporary before any data goes in.
    try:
        fd, tmp = _open_temp(directory, base, 0o666 if st is None else 0o600)
    except OSError as e:
        raise _os_error(e, path) from e
    try:
        if st is not None:
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):   # only root (or the group owner) can keep them
                    os.fchown(fd, st.st_uid, st.st_gid)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))   # after chown, which may clear set-id bits
        with os.fdopen(fd, "wb", closefd=False) as fh:
            _write_payload(fh, payload)
            fh.flush()
        os.fsync(fd)
        os.replace(tmp, target)       # the lock is held until the file is in place
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        os.close(fd)
        if isinstance(e, OSError):
            raise _os_error(e, path) from e
        raise
    os.close(fd)
    try:   # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# -- loading ---------------------------------------------------------------------------------
def _verify_check(raw: _st.RawFile, meta: dict) -> None:
    name, h = raw.name, raw.header
    value = meta[_CHECK_KEY]
    digits = h[_CHECK_AT:_CHECK_AT + 8]
    if not (h.startswith(_CHECK_PREFIX) and _HEX8.fullmatch(digits) and h[_CHECK_AT + 8:_CHECK_AT + 9] == b'"'
            and value == "crc32:" + digits.decode()):
        _fail(name, f"the checksum field {value[:40]!r} is not where and how dyngraph writes it (the "
                    "header was edited or corrupted)")
    crc = zlib.crc32(raw.length_field)
    crc = zlib.crc32(h[:_CHECK_AT] + b"00000000" + h[_CHECK_AT + 8:], crc)
    crc = zlib.crc32(raw.data, crc)
    if f"{crc:08x}" != digits.decode():
        _fail(name, f"checksum mismatch (CRC-32 of the file {crc:08x}, header says {digits.decode()}): "
                    "the file is corrupted")


def _read_doc(raw: _st.RawFile):
    name, meta = raw.name, raw.metadata
    if _CHECK_KEY in meta:
        _verify_check(raw, meta)
        if "dyngraph" not in meta:
            _fail(name, "the header has a dyngraph checksum but no dyngraph structure: corrupted file")
    elif "dyngraph" not in meta:
        return None                     # a plain safetensors file from another program
    try:
        doc = _st.parse_json(meta["dyngraph"])
    except RecursionError:
        _fail(name, "the dyngraph structure in the header is nested too deeply: crafted file")
    except ValueError as e:
        _fail(name, f"the dyngraph structure in the header metadata is not valid JSON ({e}): corrupted file")
    if not isinstance(doc, dict) or set(doc) != {"version", "root"}:
        _fail(name, "the dyngraph structure must be an object with exactly 'version' and 'root': corrupted file")
    version = doc["version"]
    if type(version) is not int or version not in _READABLE_VERSIONS:
        _fail(name, f"format version {str(version)[:20]} is not one this dyngraph reads "
                    f"({', '.join(map(str, _READABLE_VERSIONS))}): written by a newer dyngraph, or corrupted")
    if version >= 2 and _CHECK_KEY not in meta:
        _fail(name, f"a format-{version} file must carry its '{_CHECK_KEY}' checksum: the header was "
                    "edited or corrupted")
    if version == 1:
        # Files of format 1 (dyngraph before the whole-file check) are still read: only their data
        # section is covered by the CRC; the header gets the full validation below.
        if _CHECK_KEY in meta:
            pass
        elif "dyngraph_crc32" not in meta:
            _fail(name, "a format-1 file must carry its 'dyngraph_crc32' checksum: corrupted file")
        elif str(zlib.crc32(raw.data)) != meta["dyngraph_crc32"]:
            _fail(name, f"checksum mismatch in the tensor data (CRC-32 {zlib.crc32(raw.data)}, header "
                        f"says {meta['dyngraph_crc32'][:20]}): the file is corrupted")
    return doc["root"]


class _Unpacker:
    """Validate the structure against the schema and build the objects; every failure -> CheckpointError."""

    def __init__(self, raw: _st.RawFile, allowed: dict[str, Any] | None, defined_modules: bool = False):
        self.raw = raw
        self.defined_modules = defined_modules
        self.name = raw.name
        self.allowed = allowed
        self.tensors: dict[tuple[str, str], Any] = {}
        self.modules: list = []
        self.used: set[str] = set()
        self._classes = None

    def bad(self, what: str):
        _fail(self.name, f"{what}: corrupted or crafted file")

    def array(self, key):
        if not isinstance(key, str) or key not in self.raw.entries:
            self.bad(f"the structure refers to tensor {str(key)[:80]!r}, which the file does not contain")
        self.used.add(key)
        return self.raw.array(key)

    def classes(self):
        if self._classes is None:
            # same floor, lazily: only files holding modules or parameters need nn
            from .nn.module import Module  # noqa: PLC0415  (plain state-dict checkpoints never need nn)
            from .nn.parameter import Parameter  # noqa: PLC0415  (plain state-dict checkpoints never need nn)

            self._classes = (Module, Parameter)
        return self._classes

    def tensor_node(self, node: dict, tag: str):
        key = node[tag]
        if not isinstance(key, str):
            self.bad(f"tensor entry {str(node)[:80]} names no tensor")
        memo = self.tensors.get((tag, key))
        if memo is not None:
            return memo
        if tag == "A":
            if set(node) != {"A"}:
                self.bad(f"array entry {str(node)[:80]} has unknown fields")
            obj = self.array(key)
        else:
            if set(node) - {tag, "rg"} or ("rg" in node and type(node["rg"]) is not bool):
                self.bad(f"tensor entry {str(node)[:80]} has unknown or malformed fields")
            arr = self.array(key)
            rg = node.get("rg", False)
            if rg and not (arr.dtype.kind in "fc" or arr.dtype.name == "bfloat16"):
                self.bad(f"tensor {key!r} of dtype {arr.dtype} is marked requires_grad")
            if tag == "P":
                obj = self.classes()[1](Tensor._make(arr, False, None, 0), requires_grad=rg)
            else:
                obj = Tensor._make(arr, rg, None, 0)
        self.tensors[(tag, key)] = obj
        return obj

    def unpack(self, node, depth: int = 0):
        if depth > _MAX_DEPTH:
            self.bad(f"the structure is nested more than {_MAX_DEPTH} levels deep")
        if not isinstance(node, dict) or not node:
            self.bad(f"unrecognised entry {str(node)[:80]!r} in the dyngraph structure")
        tag = next(iter(node))
        if tag in ("T", "P", "A"):
            return self.tensor_node(node, tag)
        if tag == "M":
            return self.module(node, depth)
        if len(node) != 1:
            self.bad(f"entry {str(node)[:80]!r} has unknown fields")
        value = node[tag]
        if tag == "v":
            if value is None or isinstance(value, (bool, int, str)):
                return value
            if type(value) is float and math.isfinite(value):
                return value
            self.bad(f"plain value {str(value)[:40]!r} is not a finite number, string, boolean or null")
        if tag == "f":
            if not isinstance(value, str) or value not in _NONFINITE:
                self.bad(f"non-finite float entry {str(value)[:40]!r} is not inf, -inf or nan")
            return _NONFINITE[value]
        if tag in ("L", "U"):
            if not isinstance(value, list):
                self.bad(f"list/tuple entry holds a {type(value).__name__}")
            items = [self.unpack(v, depth + 1) for v in value]
            return items if tag == "L" else tuple(items)
        if tag == "D":
            return self.dict(value, depth)
        if tag == "dt":
            # the fixed table of dtype names; never an attribute lookup
            table = _dt._BY_NAME
            if not isinstance(value, str) or not value.startswith("dyngraph.") or value[9:] not in table:
                self.bad(f"dtype entry {str(value)[:40]!r} is not a dyngraph dtype name")
            return table[value[9:]]
        if tag == "G":
            return self.global_(value, "reference")
        if tag == "R":
            if type(value) is not int or not 0 <= value < len(self.modules):
                self.bad(f"module reference {str(value)[:20]} points at no module saved before it")
            return self.modules[value]
        self.bad(f"unrecognised entry {str(node)[:80]!r} in the dyngraph structure")

    def dict(self, items, depth):
        if not isinstance(items, list):
            self.bad(f"dict entry holds a {type(items).__name__}, not a list of pairs")
        out = {}
        for pair in items:
            if not (isinstance(pair, list) and len(pair) == 2):
                self.bad(f"dict item {str(pair)[:80]} is not a [key, value] pair")
            k = self.key(pair[0], 0)
            if k in out:
                self.bad(f"dict key {k!r} appears twice")
            out[k] = self.unpack(pair[1], depth + 1)
        return out

    def key(self, k, depth):
        if isinstance(k, str):
            return k
        if depth > 16 or not isinstance(k, dict) or len(k) != 1:
            self.bad(f"dict key {str(k)[:80]} is malformed")
        tag, value = next(iter(k.items()))
        if tag == "v" and (value is None or isinstance(value, bool)):
            return value
        if tag == "i" and type(value) is int:
            return value
        if tag == "f" and isinstance(value, str) and _FLOAT_RE.fullmatch(value):
            return float(value)
        if tag == "U" and isinstance(value, list):
            return tuple(self.key(x, depth + 1) for x in value)
        self.bad(f"dict key {str(k)[:80]} is malformed")

    def global_(self, qual, what):
        if not isinstance(qual, str):
            self.bad(f"class/function name {str(qual)[:40]!r} is not a string")
        if self.allowed is None:
            self.allowed = _allowed(self.defined_modules)
        obj = self.allowed.get(qual)
        if obj is None:
            cls = qual.rsplit(".", 1)[-1]
            _fail(self.name, f"the checkpoint {what}s {qual!r}, which is not an allowed global. dyngraph "
                             "never imports or calls what a file names: if you trust this file and "
                             f"this class/function, allow it with dg.serialization.add_safe_globals([{cls}]) "
                             f"or `with dg.serialization.safe_globals([{cls}]): dg.load(...)` "
                             "(weights_only=False also allows nn.Module classes this program has "
                             "already defined)")
        return obj

    def module(self, node, depth):
        if set(node) != {"M", "id", "training", "attrs", "params", "buffers", "modules"}:
            self.bad(f"module entry with fields {sorted(node)[:10]} (expected M, id, training, attrs, "
                     "params, buffers, modules)")
        Module, Parameter = self.classes()
        cls = self.global_(node["M"], "contain")
        if not (isinstance(cls, type) and issubclass(cls, Module)):
            _fail(self.name, f"{node['M']!r} is allowed but is not a dyngraph Module subclass, so no "
                             "module can be rebuilt from it")
        if node["id"] != len(self.modules) or type(node["id"]) is not int:
            self.bad(f"module id {str(node['id'])[:20]} out of sequence")
        if type(node["training"]) is not bool:
            self.bad("module 'training' flag is not a boolean")
        for field in ("attrs", "params", "buffers", "modules"):
            if not isinstance(node[field], list):
                self.bad(f"module {field} is not a list")
        # No __init__: the file's data is never passed to code. __new__ of an allowed class, then
        # the base Module.__init__ (which only creates empty dicts), then plain assignments.
        try:
            m = cls.__new__(cls)
            Module.__init__(m)
        except Exception as e:
            _fail(self.name, f"could not create an instance of the allowed class {node['M']!r} "
                             f"({type(e).__name__}: {e})")
        self.modules.append(m)
        d = m.__dict__
        internal = _module_internal(Module)
        names: set[str] = set()

        def name_of(entry, kind, size):
            if not (isinstance(entry, list) and len(entry) == size and isinstance(entry[0], str)):
                self.bad(f"module {kind} entry {str(entry)[:80]} is malformed")
            k = entry[0]
            bad_name = (not k or len(k) > 1000 or k in names or k in internal
                        or (k.startswith("__") and k.endswith("__")) or (kind != "attrs" and "." in k))
            if bad_name:
                self.bad(f"module {kind} name {k[:80]!r} is not allowed (duplicate, internal, dunder "
                         "or dotted)")
            names.add(k)
            return k

        for entry in node["attrs"]:
            k = name_of(entry, "attrs", 2)
            # A plain attribute may override a class-level default (``dropout = 0.0``), never a
            # method or property: a file must not rewire what the allowed class's code calls.
            if _shadows_code(cls, k):
                self.bad(f"attribute {k!r} would replace the method/property {cls.__name__}.{k}")
            d[k] = self.unpack(entry[1], depth + 1)
        for entry in node["params"]:
            k = name_of(entry, "params", 2)
            v = entry[1]
            if v is not None and not (isinstance(v, dict) and next(iter(v), None) == "P"):
                self.bad(f"parameter {k!r} is not stored as a parameter")
            d["_parameters"][k] = None if v is None else self.tensor_node(v, "P")
        for entry in node["buffers"]:
            k = name_of(entry, "buffers", 3)
            v, persistent = entry[1], entry[2]
            if type(persistent) is not bool or (
                    v is not None and not (isinstance(v, dict) and next(iter(v), None) == "T")):
                self.bad(f"buffer {k!r} is malformed")
            d["_buffers"][k] = None if v is None else self.tensor_node(v, "T")
            if not persistent:
                d["_non_persistent_buffers_set"].add(k)
        for entry in node["modules"]:
            k = name_of(entry, "modules", 2)
            v = entry[1]
            if v is None:
                d["_modules"][k] = None
                continue
            if not (isinstance(v, dict) and next(iter(v), None) in ("M", "R")):
                self.bad(f"submodule {k!r} is not stored as a module")
            d["_modules"][k] = self.unpack(v, depth + 1)
        d["training"] = node["training"]
        return m


def load(f: str | os.PathLike | BinaryIO, map_location=None, *, weights_only: bool = True, **kwargs) -> Any:
    """Load what ``dg.save`` wrote (or any safetensors file, as a flat ``{name: Tensor}`` dict).

    Truncated, corrupted, crafted and pickle files raise ``CheckpointError`` naming the file and
    the problem; modules are rebuilt only for allow-listed classes (see :func:`add_safe_globals`).
    ``weights_only=False`` (PyTorch's way to load a whole model) additionally allows every
    ``nn.Module`` subclass that this process has already defined -- found by walking the class
    tree, never by importing what the file names -- and nothing else: functions and other
    objects still need :func:`add_safe_globals`.  Rebuilding never calls ``__init__``.

    >>> model.load_state_dict(dg.load("model.safetensors"))
    """
    raw = _st.read(f)
    root = _read_doc(raw)
    if root is None:
        obj = {k: Tensor._make(raw.array(k), False, None, 0) for k in raw.entries}
    else:
        un = _Unpacker(raw, None, defined_modules=weights_only is False)
        try:
            obj = un.unpack(root)
        except RecursionError:
            _fail(raw.name, "the dyngraph structure is nested too deeply: crafted file")
        unused = set(raw.entries) - un.used
        if unused:
            _fail(raw.name, f"tensor(s) {sorted(unused)[:3]} are in the file but not in the dyngraph "
                            "structure: corrupted or edited file")
    if map_location is not None:
        _backend.device(map_location)   # validates the name; data lives on the CPU until moved by the user
    return obj


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | BinaryIO) -> list[str]:
    """Qualified class/function names the checkpoint uses that are not allowed (nothing is built).

    >>> dg.serialization.get_unsafe_globals_in_checkpoint("model.safetensors")
    ['__main__.MyNet']
    """
    raw = _st.read(f)
    root = _read_doc(raw)
    allowed = _allowed()
    found: list[str] = []
    stack = [root]
    while stack:                      # iterative: a crafted file cannot exhaust the Python stack
        node = stack.pop()
        if isinstance(node, dict):
            for tag in ("M", "G"):
                q = node.get(tag)
                if isinstance(q, str) and q not in allowed and q not in found:
                    found.append(q)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found
