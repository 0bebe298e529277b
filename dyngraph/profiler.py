"""``dg.profiler``: where the time goes, per primitive, in forward and in backward.

>>> with dg.profiler.profile() as prof:
...     with dg.profiler.record_function("train_step"):
...         loss = model(x).sum(); loss.backward()
>>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
>>> prof.export_chrome_trace("trace.json")     # chrome://tracing or ui.perfetto.dev

How it measures, and why it costs nothing when off:

* forward: while a profile is active an *interpreter* (an observing
  :class:`~dyngraph._core.interpreter.Interpreter` pushed on this thread's
  stack) times every primitive call;
* backward: the engine calls the interpreter's ``on_backward_node`` hook for
  each node on its general path; nodes created while profiling are flagged
  so the engine takes that path for them (backward of a graph built *before*
  the profile started is not timed);
* module: the ``nn.Module`` call chain on the Python stack names the module
  that ran each op (``fc1``, ``encoder.layers.0``).

Outside a ``profile`` block nothing of this is installed: the hot path is the
plain dispatcher (measured in ``docs/profiling.md``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
import warnings

from ._core.interpreter import Interpreter, pop, push
from .viz.record import ModuleScope

__all__ = ["profile", "record_function", "ProfilerActivity", "FunctionEvent", "EventList"]

_now = time.perf_counter_ns  # wall clock: the trace's timeline
_cpu = time.thread_time_ns  # this thread's CPU time: the table (robust to a busy machine)
_ACTIVE: list = []  # profiles currently running (innermost last)
_lock = threading.Lock()


class ProfilerActivity:
    CPU = "cpu"
    CUDA = "cuda"


class FunctionEvent:
    """One timed interval: a primitive call, a backward node or a ``record_function`` range."""

    __slots__ = ("name", "cat", "start_ns", "end_ns", "cpu_start", "cpu_end", "tid", "module",
                 "shapes", "child_ns", "depth", "source")

    def __init__(self, name, cat, start_ns, tid, module=None, shapes=None, depth=0):
        self.name = name
        self.cat = cat
        self.start_ns = start_ns
        self.end_ns = start_ns
        self.cpu_start = self.cpu_end = 0
        self.source = None
        self.tid = tid
        self.module = module
        self.shapes = shapes
        self.child_ns = 0
        self.depth = depth

    @property
    def cpu_time_total(self) -> float:
        """CPU time of this thread during the event, in microseconds."""
        return (self.cpu_end - self.cpu_start) / 1000.0

    @property
    def self_cpu_time_total(self) -> float:
        """CPU time minus that of nested events, in microseconds."""
        return (self.cpu_end - self.cpu_start - self.child_ns) / 1000.0

    @property
    def wall_time_total(self) -> float:
        """Wall-clock duration in microseconds (includes time the thread was not running)."""
        return (self.end_ns - self.start_ns) / 1000.0

    def __repr__(self) -> str:
        return f"<FunctionEvent {self.cat}:{self.name} {self.cpu_time_total:.1f}us>"


class _Average:
    """Totals for one key of :meth:`EventList.key_averages`."""

    __slots__ = ("key", "name", "cat", "count", "cpu_time_total", "self_cpu_time_total",
                 "modules", "input_shapes")

    def __init__(self, key, name, cat):
        self.key = key
        self.name = name
        self.cat = cat
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.modules = {}
        self.input_shapes = None

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / max(self.count, 1)

    @property
    def module(self) -> str:
        if not self.modules:
            return ""
        if len(self.modules) == 1:
            return next(iter(self.modules))
        top = max(self.modules.items(), key=lambda kv: kv[1])[0]
        return f"{top} +{len(self.modules) - 1}"

    def __repr__(self) -> str:
        return f"<{self.name} calls={self.count} total={self.cpu_time_total:.1f}us>"


_SORT_KEYS = {
    "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "cpu_time": "cpu_time", "self_cpu_time": "self_cpu_time", "count": "count",
}


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of :class:`FunctionEvent` or of averages, with ``table()`` and ``key_averages()``."""

    def key_averages(self, group_by_input_shape: bool = False, group_by_module: bool = False):
        """One row per (name, category[, input shapes][, module]) with counts and times."""
        rows: dict = {}
        for e in self:
            key = (e.name, e.cat)
            if group_by_input_shape:
                key += (e.shapes,)
            if group_by_module:
                key += (e.module,)
            a = rows.get(key)
            if a is None:
                a = rows[key] = _Average(key, e.name, e.cat)
                if group_by_input_shape:
                    a.input_shapes = e.shapes
            a.count += 1
            a.cpu_time_total += e.cpu_time_total
            a.self_cpu_time_total += e.self_cpu_time_total
            if e.module is not None:
                a.modules[e.module] = a.modules.get(e.module, 0) + 1
        return EventList(rows.values())

    def table(self, sort_by: str | None = "cpu_time_total", row_limit: int = 100,
              max_name_column_width: int = 40, header: str | None = None, top_level_events_only=False,
              **_ignored) -> str:
        """A text table like ``torch.profiler``'s, sorted by ``sort_by`` (descending).

        ``sort_by``: ``cpu_time_total``, ``self_cpu_time_total``, ``cpu_time``
        (average), ``self_cpu_time`` or ``count``.
        """
        rows = list(self)
        if rows and isinstance(rows[0], FunctionEvent):
            rows = list(EventList(rows).key_averages())
        if sort_by is not None:
            attr = _SORT_KEYS.get(sort_by)
            if attr is None:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; use one of {sorted(_SORT_KEYS)}")
            rows.sort(key=lambda r: getattr(r, attr), reverse=True)
        total_self = sum(r.self_cpu_time_total for r in rows) or 1.0
        shown = rows[:row_limit] if row_limit is not None and row_limit > 0 else rows
        w = max([len("Name")] + [min(len(r.name), max_name_column_width) for r in shown]) + 2
        has_shapes = any(getattr(r, "input_shapes", None) for r in shown)
        cols = ["Name".ljust(w), "Phase".ljust(16), "Self CPU %".rjust(11), "Self CPU".rjust(12),
                "CPU total %".rjust(12), "CPU total".rjust(12), "CPU time avg".rjust(13),
                "# of Calls".rjust(11), "  Module"]
        if has_shapes:
            cols.append("  Input Shapes")
        head = "".join(cols)
        rule = "-" * len(head)
        lines = ([header] if header else []) + [rule, head, rule]
        for r in shown:
            name = r.name if len(r.name) <= max_name_column_width else r.name[:max_name_column_width - 3] + "..."
            cells = [name.ljust(w), r.cat.ljust(16),
                     f"{100 * r.self_cpu_time_total / total_self:.2f}%".rjust(11),
                     _fmt_us(r.self_cpu_time_total).rjust(12),
                     f"{100 * r.cpu_time_total / total_self:.2f}%".rjust(12),
                     _fmt_us(r.cpu_time_total).rjust(12), _fmt_us(r.cpu_time).rjust(13),
                     str(r.count).rjust(11), "  " + r.module]
            if has_shapes:
                cells.append("  " + str(list(r.input_shapes or [])))
            lines.append("".join(cells))
        lines.append(rule)
        lines.append(f"Self CPU time total: {_fmt_us(sum(r.self_cpu_time_total for r in rows))}")
        return "\n".join(lines)

    def total_average(self):
        a = _Average(("total",), "Total", "all")
        for e in self:
            a.count += getattr(e, "count", 1)
            a.cpu_time_total += e.cpu_time_total
            a.self_cpu_time_total += e.self_cpu_time_total
        return a


class _ProfInterp(Interpreter):
    """Forward and backward observer: time each primitive call and each backward node."""

    observer = True

    def __init__(self, prof):
        self.prof = prof

    def process(self, prim, args, params):
        prof = self.prof
        module = prof._module(sys._getframe(1)) if prof.with_modules else None
        shapes = None
        if prof.record_shapes:
            shapes = tuple(tuple(a._data.shape) if hasattr(a, "_data") else () for a in args)
        ev = prof._open(prim.name, "forward", module, shapes)
        if prof.with_stack:
            from .viz.record import user_source  # noqa: PLC0415  (viz sits above the profiler's floor)

            ev.source = user_source(sys._getframe(1))
        try:
            out = self.process_below(prim, args, params)
        finally:
            prof._close(ev)
        t = out[0] if type(out) is tuple and out else out
        fn = getattr(t, "_fn", None)
        if fn is not None and fn.prim is prim:
            # Route this node's backward through the engine's general path (same
            # results), where on_backward_node below times it.
            fn.special = True
            if module is not None:
                fn.metadata.setdefault("module", module)
        return out

    def on_backward_node(self, node, run):
        prof = self.prof
        info = node.info
        module = info.get("module") if type(info) is dict else None
        ev = prof._open(node.name(), "backward", module, None)
        try:
            return super().on_backward_node(node, run)
        finally:
            prof._close(ev)


class profile:  # noqa: N801
    """Context manager that records forward primitives, backward nodes and user ranges.

    Args (PyTorch's names):
        activities: accepted for compatibility; only CPU activity exists here.
        record_shapes: keep input shapes (``key_averages(group_by_input_shape=True)``).
        with_stack: keep the user's source line of each forward op (trace ``args``).
        with_modules: name the ``nn.Module`` that ran each op.
        on_trace_ready: called with the profile when the block exits.
        enabled: ``False`` makes the block a no-op.
        profile_memory / with_flops: not measured (a warning says so).
        schedule: not supported (an error says so): profile the steps you want.
    """

    def __init__(self, activities=None, *, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = True,
                 schedule=None, on_trace_ready=None, enabled: bool = True, use_cuda=None):
        if schedule is not None:
            raise NotImplementedError(
                "dg.profiler.profile: schedule= is not supported; put only the steps you want "
                "to measure inside the `with profile()` block")
        if profile_memory or with_flops:
            warnings.warn("dg.profiler.profile: profile_memory/with_flops are not measured; "
                          "the profile records times only", stacklevel=2)
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.enabled = enabled
        self.on_trace_ready = on_trace_ready
        self._events: list = []
        self._stack: list = []
        self._interp = None
        self._scope = None
        self._t0 = None
        self._tid = threading.get_ident()

    # -- recording ----------------------------------------------------------------
    def _module(self, frame):
        calls = self._scope.tracker.chain(frame)
        if not calls:
            return None
        path, _, typ = calls[-1]
        return path or typ  # the outermost module is named by its class

    def _open(self, name, cat, module, shapes):
        stack = self._stack
        ev = FunctionEvent(name, cat, 0, threading.get_ident(), module, shapes, len(stack))
        stack.append(ev)
        ev.start_ns = _now()
        ev.cpu_start = _cpu()
        return ev

    def _close(self, ev):
        ev.cpu_end = cpu = _cpu()
        ev.end_ns = _now()
        stack = self._stack
        if stack and stack[-1] is ev:
            stack.pop()
        if stack:
            stack[-1].child_ns += cpu - ev.cpu_start
        self._events.append(ev)

    def __enter__(self):
        if not self.enabled:
            return self

        self._scope = ModuleScope()
        self._t0 = _now()
        self._interp = push(_ProfInterp(self))
        with _lock:
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        pop(self._interp)  # unlinks it even when another interpreter was pushed on top
        with _lock:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
        self._scope.tracker.release()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)
        return False

    def step(self) -> None:
        """Mark a step boundary (kept for ``torch.profiler`` compatibility; records a marker)."""
        if self._t0 is not None:
            ev = self._open("ProfilerStep", "user_annotation", None, None)
            self._close(ev)

    # -- results --------------------------------------------------------------------
    def events(self) -> EventList:
        """Every recorded event in completion order."""
        return EventList(self._events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_module: bool = False):
        """Per-op totals: ``prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)``."""
        return EventList(self._events).key_averages(group_by_input_shape, group_by_module)

    def table(self, sort_by="cpu_time_total", row_limit=100, **kw) -> str:
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kw)

    def export_chrome_trace(self, path) -> None:
        """Write a Chrome trace-event JSON file (chrome://tracing, ui.perfetto.dev).

        Every event is a complete event (``"ph": "X"``) with ``ts``/``dur`` in
        microseconds of wall-clock time since the profile started (the table
        reports CPU time), category ``forward``,
        ``backward`` or ``user_annotation``, and the module in ``args``.
        """
        t0 = self._t0 or 0
        pid = os.getpid()
        events = []
        for e in sorted(self._events, key=lambda ev: (ev.start_ns, -ev.end_ns)):
            rec = {"name": e.name, "cat": e.cat, "ph": "X", "ts": (e.start_ns - t0) / 1000.0,
                   "dur": (e.end_ns - e.start_ns) / 1000.0, "pid": pid, "tid": e.tid}
            args = {}
            if e.module is not None:
                args["module"] = e.module
            if e.shapes is not None:
                args["input_shapes"] = [list(s) for s in e.shapes]
            if e.source is not None:
                args["source"] = e.source
            if args:
                rec["args"] = args
            events.append(rec)
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": "dyngraph"}}]
        with open(path, "w") as f:
            json.dump({"traceEvents": meta + events, "displayTimeUnit": "ms"}, f)


class record_function:  # noqa: N801
    """Label a region in the profile (context manager or decorator); free when not profiling.

    >>> with dg.profiler.record_function("attention"):
    ...     y = attn(x)
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._ev = None
        self._prof = None

    def __enter__(self):
        if _ACTIVE:
            prof = self._prof = _ACTIVE[-1]
            module = prof._module(sys._getframe(1)) if prof.with_modules else None
            self._ev = prof._open(self.name, "user_annotation", module, None)
        return self

    def __exit__(self, *exc):
        if self._ev is not None:
            self._prof._close(self._ev)
            self._ev = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)

        return wrapper
