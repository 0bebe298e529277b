"""``torch.autograd.Variable``: the pre-0.4 wrapper, kept for old research code.

Since PyTorch 0.4 every Tensor is a "Variable": ``Variable(t)`` returns a tensor sharing
``t``'s data, detached from its history, and ``Variable(t, requires_grad=True)`` a leaf
that requires grad; ``isinstance(x, Variable)`` is true for every tensor.

>>> from dyngraph.autograd import Variable
>>> w = Variable(dg.zeros(3), requires_grad=True)
>>> w.is_leaf and w.requires_grad and isinstance(w, Variable)
True
"""

from __future__ import annotations

from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)`` -> a Tensor (see module doc)."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if data is None:
            return Tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
