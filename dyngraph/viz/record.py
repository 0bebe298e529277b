"""Recording context: annotate graph nodes with shape, dtype, module path and source line.

The live graph already says which primitive ran and which tensors it used.
What it does not keep (to stay small and cycle-free) is each node's output
shape/dtype, the ``nn.Module`` that ran it and the line of user code that
created it.  Inside :func:`record` an *interpreter* sees every primitive call
(``STATE.interpreter``, see ``docs/internals.md``), runs it for real, and
writes those facts into ``node.info`` (``node.metadata``):

``seq`` creation number · ``shape`` / ``dtype`` of the output ·
``module`` dotted path (``"encoder.0"``; ``""`` is the outermost module) ·
``module_type`` · ``calls`` the chain of ``(path, call number)`` of enclosing
module calls · ``source`` ``"file:line: code"`` of the user's line.

>>> with dg.viz.record():
...     loss = model(x).sum()
>>> loss.grad_fn.metadata["source"]
'train.py:12: loss = model(x).sum()'

Module paths are found without hooks: each primitive call looks up the
``Module.__call__`` frames on the Python stack.  Nothing of this runs unless a
recording is active (the dispatcher's hot path is unchanged).
"""

from __future__ import annotations

import functools
import itertools
import linecache
import os
import sys
import threading

from .._core.interpreter import Interpreter, pop, push, stack
from .._core.state import STATE

__all__ = ["record", "record_source", "is_recording", "ModuleScope", "user_source"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_EXAMPLES_DIR = _PKG_DIR + "examples" + os.sep
_seq = itertools.count()
_local = threading.local()


def _module_codes():
    """Code objects of ``nn.Module.__call__`` (frames of module calls), once nn is importable."""
    codes = getattr(_local, "codes", None)
    if codes is None:
        try:
            from ..nn.module import Module  # noqa: PLC0415  (viz and the profiler import without nn; nn is read once a module call is recorded)
        except ImportError:  # nn not available: no module paths, everything else works
            return None, frozenset()
        codes = (Module, frozenset({Module.__call__.__code__}))
        _local.codes = codes
    return codes


def _is_user_file(filename: str) -> bool:
    return not filename.startswith(_PKG_DIR) or filename.startswith(_EXAMPLES_DIR)


def user_source(frame=None) -> str | None:
    """``"file:line: code"`` of the innermost frame outside dyngraph (examples count as user code)."""
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        code = f.f_code
        if _is_user_file(code.co_filename):
            line = linecache.getline(code.co_filename, f.f_lineno).strip()
            return f"{code.co_filename}:{f.f_lineno}: {line}"
        f = f.f_back
    return None


class _ModuleTracker:
    """Finds the chain of ``Module.__call__`` frames and numbers each distinct call.

    A module call is identified by its frame object.  The tracker holds the
    frames of the chain it saw last (strong references), so a frame that is
    still the same object *is* the same call: a freed frame's address cannot be
    reused while we hold it.  Chains are compared outermost first.
    """

    def __init__(self):
        self.frames: list = []  # frames of the last chain, outermost first
        self.calls: list = []  # (path, call_no, type_name) per frame
        self.names: dict = {}  # (id(parent), id(child)) -> attribute name
        self.counter = itertools.count()

    def chain(self, frame):
        """Tuple of ``(path, call_no, type_name)`` for enclosing module calls, outermost first."""
        Module, codes = _module_codes()
        if not codes:
            return ()
        found = []
        f = frame
        while f is not None:
            if f.f_code in codes:
                found.append(f)
            f = f.f_back
        found.reverse()
        old_frames, old_calls = self.frames, self.calls
        calls = []
        same = True
        for i, fr in enumerate(found):
            if same and i < len(old_frames) and old_frames[i] is fr:
                calls.append(old_calls[i])
                continue
            same = False
            mod = fr.f_locals.get("self")
            if i == 0:
                path = ""
            else:
                parent = found[i - 1].f_locals.get("self")
                name = self._child_name(parent, mod)
                prev = calls[-1][0]
                path = name if not prev else f"{prev}.{name}"
            calls.append((path, next(self.counter), type(mod).__name__))
        self.frames = found
        self.calls = calls
        return tuple(calls)

    def _child_name(self, parent, child) -> str:
        key = (id(parent), id(child))
        name = self.names.get(key)
        if name is None:
            name = type(child).__name__
            mods = getattr(parent, "_modules", None) or {}
            for k, v in mods.items():
                if v is child:
                    name = k
                    break
            else:
                # a module kept in a plain attribute or a list: search the parent's submodules
                named = getattr(parent, "named_modules", None)
                if named is not None:
                    for k, v in named():
                        if v is child and k:
                            name = k
                            break
            self.names[key] = name
        return name

    def release(self):
        self.frames = []
        self.calls = []


class _Recorder(Interpreter):
    """Observing interpreter: runs each call (handing it below) and annotates its node."""

    observer = True

    def __init__(self, source: bool, modules: bool):
        self.source = source
        self.modules = ModuleScope() if modules else None

    def process(self, prim, args, params):
        out = self.process_below(prim, args, params)
        t = out
        if type(out) is tuple:
            t = next((o for o in out if getattr(o, "_fn", None) is not None), None)
        fn = getattr(t, "_fn", None)
        if fn is None or fn.prim is not prim:
            return out
        info = fn.metadata
        if "seq" in info:  # an op that returned an existing tensor: keep the first record
            return out
        info["seq"] = next(_seq)
        if fn.n_out == 1:
            info["shape"] = tuple(t._data.shape)
            info["dtype"] = str(t._data.dtype)
        frame = sys._getframe(1)
        if self.modules is not None:
            calls = self.modules.tracker.chain(frame)
            if calls:
                info["calls"] = calls
                info["module"] = calls[-1][0]
                info["module_type"] = calls[-1][2]
        if self.source:
            src = user_source(frame)
            if src is not None:
                info["source"] = src
        return out


class ModuleScope:
    """Module-call tracking shared by the recorder and the profiler."""

    def __init__(self):
        self.tracker = _ModuleTracker()

    def current(self, frame) -> str | None:
        calls = self.tracker.chain(frame)
        return calls[-1][0] if calls else None


def is_recording() -> bool:
    """True while a :func:`record` block is active in this thread."""
    interp = STATE.interpreter
    while interp is not None:
        if isinstance(interp, _Recorder):
            return True
        interp = interp.prev
    return False


class record:  # noqa: N801  (a context manager, lower-case like dg.no_grad)
    """Annotate every node created inside the block (shape, dtype, module, source line).

    Args:
        source: record the user's source line of each op (``node.metadata["source"]``).
        modules: record the enclosing ``nn.Module`` path and call of each op.

    Works as a context manager or a decorator; nests with the profiler and
    other interpreters (each call goes through the previous interpreter).

    >>> with dg.viz.record():
    ...     y = model(x)
    >>> dg.viz.draw(y, group_by_module=True)     # clusters per module
    """

    def __init__(self, source: bool = True, modules: bool = True):
        self.source = source
        self.modules = modules
        self._interp = None

    def __enter__(self):
        self._interp = push(_Recorder(self.source, self.modules))
        return self

    def __exit__(self, *exc):
        interp = self._interp
        pop(interp)
        if interp.modules is not None:
            interp.modules.tracker.release()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record(self.source, self.modules):
                return fn(*args, **kwargs)

        return wrapper


class record_source:  # noqa: N801
    """Turn source-line recording on (``record_source(True)``) or off, like ``set_detect_anomaly``.

    As a statement it stays on until ``record_source(False)``; as a context
    manager it restores the previous state on exit.

    >>> dg.viz.record_source(True)
    >>> y = (x * 2).sum()
    >>> y.grad_fn.metadata["source"]
    """

    def __init__(self, mode: bool = True):
        self._ctx = None
        self._was_on = is_recording()
        if mode and not self._was_on:
            self._ctx = record()
            self._ctx.__enter__()
        elif not mode:
            _stop_all_recorders()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


def _stop_all_recorders():
    """Remove recorders from the interpreter chain, keeping other interpreters in place."""
    for interp in stack():
        if isinstance(interp, _Recorder):
            pop(interp)
