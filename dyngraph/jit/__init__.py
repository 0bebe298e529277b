"""Graph capture: from define-by-run code to static graphs (``dg.compile``, ``dg.jit.trace``).

>>> import dyngraph as dg
>>> @dg.compile
... def f(x, w):
...     return (x @ w).tanh().sum()
>>> loss = f(dg.randn(4, 3), dg.randn(3, 2, requires_grad=True))   # captured
>>> loss.backward()                                                  # replays the captured backward
>>> print(f.explain())

See ``docs/static-graphs.md``.
"""

from __future__ import annotations

from .compiler import CompiledFunction, Variant
from .executor import GuardFailure
from .ir import Graph, Node, Sym, Var
from .script_api import (
    Final,
    ScriptFunction,
    _script_module,
    annotate,
    export,
    ignore,
    interface,
    is_scripting,
    is_tracing,
    script,
    script_method,
    unused,
)
from .scripted import ScriptedGraph, trace
from .serialize import GraphFileError, LoadedGraph, load, save
from .tracer import Uncapturable

__all__ = [
    "compile", "trace", "load", "save", "CompiledFunction", "ScriptedGraph", "LoadedGraph",
    "Graph", "Node", "Var", "Sym", "Variant", "GuardFailure", "GraphFileError", "Uncapturable",
    "script", "script_method", "ScriptModule", "ScriptFunction", "annotate", "ignore", "unused",
    "export", "interface", "is_scripting", "is_tracing", "Final",
]


def compile(fn=None, *, dynamic=None, cache_size: int = 8, optimize: int = 2,
            warn: bool = True, **_ignored):
    """Compile a function or Module to cached static graphs.

    Usable as ``dg.compile(f)``, ``@dg.compile`` or ``@dg.compile(dynamic=["batch"])``.
    The first call captures the graph (the function really runs, so Python control
    flow works); later calls whose guards hold replay it as one flat program, with
    the backward pass captured too.  ``dynamic``: ``["batch"]`` / ``True`` (dim 0 of
    every input), ``{input_index: [dims]}``, ``False`` (never symbolic); by default a
    dimension becomes dynamic after it changes once.  ``cache_size`` bounds the number
    of variants kept (least recently used evicted).  Extra PyTorch options (``mode=``,
    ``fullgraph=``, ``backend=``) are accepted and ignored; ``disable=True`` returns the
    function itself, as PyTorch does.

    >>> model_c = dg.compile(model)           # model_c(x) behaves like model(x)
    >>> model_c.explain()                     # variants, guards, calls, recaptures
    """
    def wrap(f):
        if _ignored.get("disable"):
            return f
        return CompiledFunction(f, dynamic=dynamic, cache_size=cache_size, optimize=optimize,
                                warn=warn)

    if fn is None:
        return wrap
    return wrap(fn)


def _explain(self) -> str:
    lines = [f"{type(self).__name__}({self.name}): {len(self.variants)} variant(s) "
             f"(cache size {self.cache_size}), {self.captures} capture(s), "
             f"{self.fallbacks} eager fallback(s)"]
    for i, v in enumerate(self.variants.values()):
        status = "EAGER: " + v.eager_reason if v.eager_reason else "compiled"
        lines.append(f"variant {i}: {status}; ran {v.calls} time(s) after capture; "
                     f"captured because: {v.reason}")
        for g in v.describe_guards():
            lines.append(f"    guard: {g}")
        if v.eager_reason is None:
            f = v.stats.get("forward", {})
            b = v.stats.get("backward")
            line = (f"    forward: {f.get('nodes_out', 0)} nodes ({f.get('cse', 0)} merged, "
                    f"{f.get('folded', 0)} folded, {f.get('dce', 0)} dead, {f.get('fused', 0)} fused, "
                    f"{f.get('reused', 0)} buffers reused)")
            if b:
                line += f"; backward: {b.get('nodes_out', 0)} nodes"
            lines.append(line)
    if self.anomaly_calls:
        lines.append(f"{self.anomaly_calls} call(s) ran eagerly because anomaly mode was on "
                     "(so that errors name the op and your line)")
    if self.history:
        lines.append("recaptures / cache events:")
        lines.extend(f"    {h}" for h in self.history)
    return "\n".join(lines)


CompiledFunction.explain = _explain


def __getattr__(name):
    # ScriptModule subclasses nn.Module: created on first use so that importing dyngraph.jit
    # (e.g. to load a saved graph) does not import dyngraph.nn.
    if name == "ScriptModule":
        return _script_module()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
