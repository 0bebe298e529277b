"""``dg.jit.trace``: capture once, get a fixed graph you can inspect, run and save."""

from __future__ import annotations

from ..autograd.grad_mode import STATE
from ..tensor import Tensor
from .compiler import CompiledFunction, Variant
from .executor import GuardFailure
from .guards import InputGuard, signature
from .serialize import save
from .tracer import capture, flatten

__all__ = ["trace", "ScriptedGraph"]


class ScriptedGraph:
    """One captured graph: ``graph`` (forward IR), ``backward_graph``, ``code``, ``save``.

    Calls must satisfy the capture's guards (shapes, dtypes, data-dependent
    decisions); a call that does not raises an error saying which guard failed
    (use :func:`dyngraph.compile` for automatic recapture).
    """

    def __init__(self, fn, variant: Variant, example_inputs, input_names=None):
        self.fn = fn
        self.variant = variant
        self.example_inputs = example_inputs
        self.name = getattr(fn, "__name__", type(fn).__name__)

    @property
    def graph(self):
        return self.variant.cap.fwd

    @property
    def backward_graph(self):
        return self.variant.cap.bwd

    @property
    def code(self) -> str:
        """The generated Python source of the forward (and backward) program."""
        return self.variant.program.source

    def __str__(self) -> str:
        return str(self.graph)

    def __repr__(self) -> str:
        return f"<ScriptedGraph {self.name}: {len(self.graph.nodes)} nodes>"

    def __call__(self, *args, **kwargs):
        if STATE.interpreter is not None:
            return self.fn(*args, **kwargs)   # inside another capture: inline the Python code
        if not kwargs and all(type(a) is Tensor for a in args):
            leaves, struct = list(args), ("fast",)
        else:
            leaves = []
            flatten((args, kwargs), leaves)
            struct = None
        why = self.variant.guard.check(signature(leaves))
        if why is None and self.variant.grad_mode != STATE.grad_enabled:
            why = "grad mode differs from the traced call"
        if why is None:
            try:
                return self.variant.run(leaves)
            except GuardFailure as exc:
                why = str(exc)
        _ = struct
        raise RuntimeError(f"traced graph {self.name}: this call does not match the trace ({why}); "
                           "trace again with matching example inputs or use dg.compile")

    def save(self, path) -> None:
        """Write the graph (JSON IR) and its weights to one safetensors file (no pickle)."""
        save(self, path)


def trace(fn, example_inputs, *, example_kwargs=None, dynamic=None) -> ScriptedGraph:
    """Capture ``fn(*example_inputs)`` once and return the :class:`ScriptedGraph`.

    >>> g = dg.jit.trace(model, (dg.randn(1, 64),))
    >>> print(g.graph); g.save("model.dgraph")

    ``dynamic=["batch"]`` (or ``{input: [dims]}``) makes those dims symbolic, so the
    saved graph accepts any batch size.
    """
    if isinstance(example_inputs, Tensor):
        example_inputs = (example_inputs,)
    kwargs = example_kwargs or {}
    if dynamic:
        # capture through dg.compile's machinery, which derives the symbolic graph

        cf = CompiledFunction(fn, dynamic=dynamic, warn=False)
        cf(*example_inputs, **kwargs)
        v = next(reversed(cf.variants.values()))
        if v.eager_reason is not None:
            raise RuntimeError(f"dg.jit.trace({getattr(fn, '__name__', fn)}): cannot capture: "
                               f"{v.eager_reason}")
        if not v.guard.dynamic:
            raise RuntimeError(f"dg.jit.trace({getattr(fn, '__name__', fn)}): the dims {dynamic!r} "
                               f"cannot be made dynamic ({'; '.join(cf.history) or 'no symbolic fit'})")
        return ScriptedGraph(fn, v, example_inputs)
    cap = capture(fn, tuple(example_inputs), kwargs)
    if cap.reason is not None:
        raise RuntimeError(f"dg.jit.trace({getattr(fn, '__name__', fn)}): cannot capture: {cap.reason}")
    leaves = []
    flatten((tuple(example_inputs), kwargs), leaves)
    sig = signature(leaves)
    cap.results = None
    v = Variant(cap, InputGuard(sig), STATE.grad_enabled, None, "dg.jit.trace",
                name=getattr(fn, "__name__", "traced"))
    return ScriptedGraph(fn, v, example_inputs)
