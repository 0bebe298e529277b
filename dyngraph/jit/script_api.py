"""TorchScript's Python surface (``torch.jit.script``, ``ScriptModule``, ``script_method``,
``annotate``, ``ignore``...), so programs written for TorchScript run unchanged.

dyngraph executes Python directly (define-by-run), so there is nothing to compile:
``script(obj)`` returns ``obj`` itself and the decorators return their function. The
results are the values the Python code computes -- what a scripted PyTorch function
returns too. For graph capture and replay use :func:`dyngraph.compile` or
:func:`dyngraph.jit.trace`.

>>> @dg.jit.script
... def gate(x, y):
...     return x.sigmoid() * y.tanh()
>>> gate(dg.ones(2), dg.ones(2)).shape
dyngraph.Size([2])
"""

from __future__ import annotations

import typing

__all__ = ["script", "script_method", "ScriptFunction", "annotate", "ignore",
           "unused", "export", "is_scripting", "is_tracing", "Final", "interface"]

Final = typing.Final


def script(obj=None, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Return ``obj`` (a function or ``nn.Module``) unchanged: dyngraph runs it as Python."""
    return obj


def script_method(fn):
    """Decorator of ``ScriptModule`` methods; returns ``fn``."""
    return fn


def ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """``@torch.jit.unused``: the function unchanged."""
    return fn


def export(fn):
    """``@torch.jit.export``: the method unchanged."""
    return fn


def interface(obj):
    """``@torch.jit.interface``: the class unchanged."""
    return obj


def annotate(the_type, the_value):
    """``torch.jit.annotate(List[Tensor], [])``: returns ``the_value``."""
    return the_value


def is_scripting() -> bool:
    """False: code never runs under TorchScript in dyngraph."""
    return False


def is_tracing() -> bool:
    """False: dyngraph's capture (``dg.jit.trace``, ``dg.compile``) records real Python
    execution, so code needs no tracing-specific path."""
    return False


_SCRIPT_MODULE = []


def _script_module():
    """``ScriptModule``, created on first use: importing ``dyngraph.jit`` must not import
    ``dyngraph.nn`` (a saved graph loads in a process without model code)."""
    if not _SCRIPT_MODULE:
        from ..nn.module import Module  # noqa: PLC0415  (importing dyngraph.jit must not import dyngraph.nn)

        class ScriptModule(Module):
            """Base class of TorchScript modules in PyTorch; here an ordinary ``nn.Module``."""

        ScriptModule.__module__, ScriptModule.__qualname__ = "dyngraph.jit", "ScriptModule"
        _SCRIPT_MODULE.append(ScriptModule)
    return _SCRIPT_MODULE[0]


def __getattr__(name):
    if name == "ScriptModule":
        return _script_module()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ScriptFunction:
    """Type name only (``isinstance`` checks in PyTorch code); scripted functions are plain
    Python functions in dyngraph."""
