"""Small helpers shared by the op modules: NumPy floating-point reports switched off.

The argument coercion the PyTorch-facing functions use (``operand``, ``as_tensor_arg``,
``normalize_dims``) and the method installer are in :mod:`dyngraph.surface._args`.
"""

from __future__ import annotations

import os

import numpy as np


def compiled_kernels(*needed: str):
    """The optional compiled kernels (``dyngraph._kernels``), or None.

    None when the extension was not built (no C compiler at install time), when the
    pure-Python reference path was asked for (``DYNGRAPH_PURE_PYTHON``, as for
    ``dyngraph/_speedups.c``), or when a module built before lacks one of ``needed``.

    >>> k = compiled_kernels("sgd_step")   # the module, or None: callers keep a NumPy path
    """
    if os.environ.get("DYNGRAPH_PURE_PYTHON"):
        return None
    try:
        from .. import _kernels  # noqa: PLC0415  (optional: whether it imports is the question)
    except ImportError:
        return None
    return _kernels if all(hasattr(_kernels, n) for n in needed) else None

# ---------------------------------------------------------------------------
# floating-point exceptions: silent, as in PyTorch
# ---------------------------------------------------------------------------
# log(0) = -inf, 1/0 = inf, exp(100) = inf in float32, sqrt(-1) = nan: PyTorch returns
# these values without a word, NumPy adds a RuntimeWarning (an exception under
# ``python -W error``).  The primitives that can produce them run their forward and
# their array-level rules with NumPy's divide/overflow/invalid reports switched off.
# NumPy >= 2 keeps that state in a context variable; setting it directly costs ~0.1 us
# per call where ``with np.errstate(...)`` costs ~1.3 us (measured with timeit), so
# the wrapper uses the variable when it exists and the public context manager if not.
try:
    from numpy._core.umath import _extobj_contextvar as _fp_state
    from numpy._core.umath import _make_extobj

    _QUIET_FP = _make_extobj(divide="ignore", over="ignore", invalid="ignore")
except ImportError:  # pragma: no cover - NumPy 1.x
    _fp_state = None


def quiet_fp(fn):
    """``fn`` run with NumPy's divide/overflow/invalid warnings off (PyTorch is silent).

    >>> import numpy as np
    >>> quiet_fp(np.log)(np.zeros(1))
    array([-inf])
    """
    if getattr(fn, "_quiet_fp", False):
        return fn
    if _fp_state is None:  # pragma: no cover - NumPy 1.x
        run = np.errstate(divide="ignore", over="ignore", invalid="ignore")(fn)
        run._quiet_fp = True
        return run
    enter, leave, quiet = _fp_state.set, _fp_state.reset, _QUIET_FP

    def run(*args, **kwargs):
        token = enter(quiet)
        try:
            return fn(*args, **kwargs)
        finally:
            leave(token)

    run.__wrapped__ = fn
    run._quiet_fp = True
    run.__doc__ = getattr(fn, "__doc__", None)
    run.__name__ = getattr(fn, "__name__", "quiet_fp")
    return run


def quiet_primitives(*prims) -> None:
    """Make each primitive's forward and array-level rules silent on FP exceptions.

    Called once per op family after its rules are registered; rules registered later
    (``defvjp`` again) are not wrapped.
    """
    for p in prims:
        p.impl = quiet_fp(p.impl)
        if p.vjp_rules is not None:
            p.vjp_rules = tuple(None if r is None else quiet_fp(r) for r in p.vjp_rules)
        if p.vjp_argnum is not None:
            p.vjp_argnum = quiet_fp(p.vjp_argnum)
