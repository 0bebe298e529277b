"""``dyngraph.ops.registry``: the primitive registry, re-exported from the ground floor.

The registry, :class:`Primitive`, ``bind`` and the eager dispatch path live in
:mod:`dyngraph._core.registry` (below ``ops/``, beside the graph nodes and the
interpreter protocol); the primitive families import them from here, as before.
"""

from .._core.registry import (  # noqa: F401  (the private names are the engine's and tests')
    EMPTY,
    REGISTRY,
    Primitive,
    _as_array,
    _bind_py,
    _finish,
    _mark_view,
    _op_error,
    bind,
    eager,
    missing_rule,
    primitive,
    promote_arrays,
    record,
)

__all__ = ["Primitive", "primitive", "bind", "REGISTRY", "EMPTY"]
