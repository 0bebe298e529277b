"""``torch.fx`` in dyngraph: importable, and every entry point explains what to use instead.

PyTorch's FX traces a module *symbolically* (``Proxy`` objects instead of tensors,
no example inputs) into an editable graph of module-level calls — ``call_module``
targets such as ``"layer1.conv"``, ``call_function`` targets such as
``torch.relu`` — and regenerates Python code from it.  dyngraph's capture
(``dg.compile``, ``dg.jit.trace``) is a different contract: it runs the function on
real example tensors and records *primitives* (``matmul``, ``add``, ``tanh``...)
with guards on shapes and data-dependent branches.  Mapping FX's API onto that IR
would produce graphs whose nodes never match what FX passes look for (module
targets, ``torch.*`` function targets), so rewrites would silently do nothing.
Rather than that, each FX entry point raises :class:`FxUnsupportedError` naming
the alternative:

* run a model as a captured static graph: ``dg.compile(model)``;
* inspect or save the captured IR: ``g = dg.jit.trace(model, (x,))``, then
  ``print(g.graph)``, ``g.code``, ``g.save(path)``;
* intermediate activations (FX feature extraction): forward hooks
  (``module.register_forward_hook``).

Importing names works (``from torch.fx import symbolic_trace``, subclasses of
``torch.fx.Tracer`` or ``Interpreter`` defined at import time, ``torch.fx.wrap``
decorators), so only code that really builds an FX graph stops, with that message.

>>> dg.fx.symbolic_trace(model)
Traceback (most recent call last):
FxUnsupportedError: torch.fx.symbolic_trace: dyngraph has no FX ...
"""

from __future__ import annotations

__all__ = ["FxUnsupportedError", "symbolic_trace", "wrap", "Graph", "GraphModule", "Interpreter",
           "Transformer", "Tracer", "Proxy", "Node", "replace_pattern", "has_side_effect"]

_ADVICE = ("use dg.compile(model) to run it as a captured static graph, dg.jit.trace(model, example_inputs) "
           "to inspect or save the captured IR (print(g.graph), g.code, g.save(path)), or forward hooks for "
           "intermediate activations; see docs/porting.md (torch.fx)")


class FxUnsupportedError(NotImplementedError):
    """Raised by every ``torch.fx`` entry point: dyngraph's graph capture is ``dg.compile``."""


def _refuse(name: str):
    raise FxUnsupportedError(
        f"torch.fx.{name}: dyngraph has no FX symbolic tracing (FX graphs are symbolic, module-level "
        f"and editable; dyngraph captures primitive-level graphs from real inputs instead); {_ADVICE}")


def symbolic_trace(root, concrete_args=None):
    """Refused: see the module docstring (raises :class:`FxUnsupportedError`)."""
    _refuse("symbolic_trace")


def replace_pattern(gm, pattern, replacement):
    """Refused: see the module docstring."""
    _refuse("replace_pattern")


def wrap(fn_or_name):
    """``torch.fx.wrap``: registers a leaf function for FX tracing; a no-op here (returned as is),
    so modules that call it at import time still import."""
    return fn_or_name


def has_side_effect(fn):
    """``torch.fx.has_side_effect``: a decorator for FX; returns ``fn`` unchanged."""
    return fn


class _FxObject:
    """Subclassable at import time; constructing one raises :class:`FxUnsupportedError`."""

    def __init__(self, *args, **kwargs):
        _refuse(type(self).__name__ if type(self).__module__ == __name__ else
                f"{_base_name(type(self))} (subclass {type(self).__name__})")


def _base_name(cls) -> str:
    for base in cls.__mro__:
        if base.__module__ == __name__ and base is not _FxObject:
            return base.__name__
    return cls.__name__


class Graph(_FxObject):
    """Refused on construction: see the module docstring."""


class GraphModule(_FxObject):
    """Refused on construction: see the module docstring."""


class Interpreter(_FxObject):
    """Refused on construction: see the module docstring."""


class Transformer(Interpreter):
    """Refused on construction: see the module docstring."""


class Tracer(_FxObject):
    """Refused on construction: see the module docstring."""


class Proxy(_FxObject):
    """Refused on construction: see the module docstring."""


class Node(_FxObject):
    """Refused on construction: see the module docstring."""
