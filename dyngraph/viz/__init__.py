"""``dg.viz``: see the graph a forward pass built -- draw it, diff two of them, record details.

>>> y = model(x)
>>> dg.viz.draw(y, params=dict(model.named_parameters())).render("model.svg")
>>> print(dg.viz.diff(model(x_short), model(x_long)))

Everything reads the live autograd graph (``t.grad_fn`` and its edges): no
tracing step.  :func:`record` adds output shapes, module paths and source
lines to the nodes created inside it.
"""

from __future__ import annotations

from .collapse import Group, find_groups
from .diff import GraphDiff, diff
from .dot import draw
from .extract import GraphView
from .record import is_recording, record, record_source

__all__ = ["draw", "diff", "GraphDiff", "record", "record_source", "is_recording", "GraphView",
           "find_groups", "Group"]
