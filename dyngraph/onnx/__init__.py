"""Export to ONNX: capture the model, then lower each primitive through one table.

>>> dg.onnx.export(model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
...                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})

The lowering table (:data:`LOWERINGS`, in :mod:`dyngraph.onnx.lowering`) has
one entry per primitive name; a graph that uses a primitive without an entry
fails with an error naming it.  See ``docs/static-graphs.md``.
"""

from __future__ import annotations

from .export import export
from .lowering import LOWERINGS, UnsupportedPrimitiveError, lowering

__all__ = ["export", "LOWERINGS", "lowering", "UnsupportedPrimitiveError"]
