"""Per-thread dispatch state, and the one way library code reads tensor values.

:data:`STATE` is read on every primitive call (one attribute look-up): grad
mode, the innermost active interpreter (``None`` means eager, the bottom of
the stack), anomaly mode, saved-tensor hooks and backward nesting.  Each
thread starts with gradients enabled, as in PyTorch.

The functions below are the call sites of the interpreter protocol (see
:mod:`dyngraph._core.interpreter`): library code calls them, never an
interpreter's hooks directly, so an interpreter sees every value request,
in-place write and ``.grad`` assignment without patching anything.
"""

from __future__ import annotations

import threading

__all__ = ["STATE", "concrete", "note_inplace", "set_grad", "VALUE_KINDS"]


class _State(threading.local):
    """Per-thread dispatch state: grad mode, the interpreter stack, anomaly mode."""

    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        # the innermost interpreter; each one links to the one below it through
        # ``.prev`` (a stack).  None: eager, inlined in ``bind``.
        self.interpreter = None
        self.anomaly = False
        self.anomaly_check_nan = True
        self.saved_hooks = None
        self.backward_depth = 0  # nesting of running backward passes
        self.backward_callbacks = None  # run when the outermost backward finishes


STATE = _State()

# ``why`` values used by the Tensor's own conversions.  Interpreters may treat
# them specially (graph capture guards ``bool``/``item``/``tolist`` by kind and
# cannot follow ``numpy``/``repr``); any other ``why`` is a library decision
# described in words ("one_hot: the number of classes").
VALUE_KINDS = ("bool", "item", "tolist", "numpy", "repr")


def concrete(t, why: str):
    """The array behind tensor ``t``, for a decision that depends on its values.

    The one way library code may read values to decide something (a class
    count, bag offsets, an output size).  Eagerly it returns ``t._data``; under
    an interpreter the request goes to its ``on_concrete(t, why)`` hook: graph
    capture records a guard (or gives up, naming ``why``), automatic batching
    forces the value.  Shapes and dtypes never need this.

    >>> n = int(concrete(target, "one_hot: the number of classes").max()) + 1
    """
    interp = STATE.interpreter
    if interp is None:
        return t._data
    return interp.on_concrete(t, why)


def alias(src, t) -> None:
    """Tell the active interpreter that ``t`` now shares ``src``'s array (an alias maker:
    ``detach()``, the ``.data`` setter, ``Parameter(src)``, ``Tensor(src)``), so that a value
    still pending under it (``dg.autobatch``) reaches ``t`` as well.

    >>> t = src.detach()     # detach() calls alias(src, t) when an interpreter is active
    """
    interp = STATE.interpreter
    if interp is not None:
        interp.on_alias(src, t)


def note_inplace(t, value) -> None:
    """Tell the active interpreter that ``t``'s buffer now holds ``value`` (in-place write)."""
    interp = STATE.interpreter
    if interp is not None:
        interp.on_inplace(t, value)


def set_grad(t, value) -> None:
    """Assign ``t._grad = value``, telling the active interpreter first.

    Every library write of a ``.grad`` slot that user code can observe goes
    through here (the ``.grad`` setter, ``zero_grad``, gradient accumulation).
    """
    interp = STATE.interpreter
    if interp is not None:
        interp.on_set_grad(t, value)
    t._grad = value
