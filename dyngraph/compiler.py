"""``torch.compiler``: the names programs use around ``torch.compile``.

dyngraph's ``dg.compile`` captures by running the real Python function, so code needs no
compile-only path: :func:`is_compiling` is ``False``, and :func:`disable` returns the
function unchanged (its operations run, and are captured, like any other).

>>> @dg.compiler.disable
... def log_stats(x): print(x.mean())
>>> dg.compiler.is_compiling()
False
"""

from __future__ import annotations

__all__ = ["disable", "is_compiling", "is_dynamo_compiling", "reset", "allow_in_graph", "assume_constant_result",
           "compile"]


def disable(fn=None, recursive: bool = True, *, reason=None):
    """``@torch.compiler.disable`` (with or without arguments): the function itself."""
    if fn is None:
        return lambda f: f
    return fn


def is_compiling() -> bool:
    """False: ``dg.compile`` runs the Python function itself while capturing."""
    return False


is_dynamo_compiling = is_compiling


def reset() -> None:
    """Nothing to reset: compiled variants are kept per ``dg.compile`` object (and freed with it)."""


def allow_in_graph(fn):
    """The function itself: every dyngraph operation can be captured."""
    return fn


def assume_constant_result(fn):
    """The function itself (its result is recomputed on every call)."""
    return fn


def compile(*args, **kwargs):
    """``torch.compiler.compile`` is ``torch.compile``: ``dg.compile``."""
    from .jit import compile as _compile  # noqa: PLC0415  (dg.jit loads on first use)

    return _compile(*args, **kwargs)
