"""Exception classes that are instances of what PyTorch raises as well as of the Python class
dyngraph has always raised, so ``except RuntimeError:`` written for PyTorch and
``except ValueError:`` written for dyngraph both catch them.

>>> try:
...     dg.linalg.inv(dg.zeros(2, 2))
... except dg.linalg.LinAlgError as e:      # torch.linalg.LinAlgError is a RuntimeError too
...     print(type(e).__mro__[1].__name__)
RuntimeError
"""

from __future__ import annotations

__all__ = ["LinAlgError", "DtypeNotImplementedError", "IntegerDivisionByZeroError", "DeviceStringError",
           "RandomRangeError", "SizeMismatchError"]


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (singular, not positive-definite):
    ``torch.linalg.LinAlgError``."""


class DtypeNotImplementedError(TypeError, NotImplementedError):
    """An op that has no kernel for the input's dtype (PyTorch: ``NotImplementedError``,
    e.g. ``"bitwise_and_cpu" not implemented for 'Float'``)."""


class IntegerDivisionByZeroError(ZeroDivisionError, RuntimeError):
    """Integer division or remainder by zero (PyTorch: ``RuntimeError: ZeroDivisionError``)."""


class DeviceStringError(ValueError, RuntimeError):
    """A device string dyngraph cannot parse (PyTorch raises ``RuntimeError``)."""


class RandomRangeError(ValueError, RuntimeError):
    """``randint``/``random_`` with an empty range (PyTorch raises ``RuntimeError``)."""


class SizeMismatchError(ValueError, AssertionError):
    """Tensors that must share their first dimension do not (PyTorch's ``TensorDataset``
    asserts, raising ``AssertionError``)."""
