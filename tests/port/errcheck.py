"""Error parity for ported programs: run a call, report the exception's built-in type."""

from __future__ import annotations


def err(fn, *keywords: str):
    """``[builtin exception type name, every keyword in the message]`` or ``"no error"``.

    The type is the first built-in class in the exception's MRO, so library-specific
    subclasses compare by what user code catches (``RuntimeError``, ``IndexError``...).
    """
    try:
        fn()
    except Exception as e:
        kind = next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")
        msg = str(e).lower()
        return [kind, all(k.lower() in msg for k in keywords)]
    return "no error"
