"""Guards: what must hold for a captured variant to be replayed.

A variant is valid for a call when

* the tensor arguments have the recorded shapes (dynamic dims: any size
  >= 2, equal across the marked dims), dtypes and ``requires_grad`` flags,
  and the non-tensor arguments are equal to the recorded ones;
* grad mode is the same;
* every captured tensor is still alive, is the same object the module holds
  (``compile(module)``), and has the same ``requires_grad``;
* the ``.grad`` slots that ``backward()`` accumulated into are None / not
  None as they were;
* every data-dependent decision (``bool(t)``, ``t.item()``, ``t.tolist()``)
  comes out the same -- these are checked inside the replay, right after the
  value is computed (see :mod:`.executor`), before any side effect happens.
"""

from __future__ import annotations

import numpy as np

__all__ = ["signature", "describe_signature", "InputGuard"]


def signature(leaves) -> tuple:
    """Hashable (shape, dtype, requires_grad) of every tensor argument."""
    return tuple((t._data.shape, t._data.dtype, t._rg) for t in leaves)


def describe_signature(sig, dynamic=()) -> str:
    dyn = {}
    for pos, dim in dynamic:
        dyn.setdefault(pos, set()).add(dim)
    parts = []
    for i, (shape, dtype, rg) in enumerate(sig):
        dims = ["s" if d in dyn.get(i, ()) else str(n) for d, n in enumerate(shape)]
        parts.append(f"input {i}: {np.dtype(dtype)}[{', '.join(dims)}]"
                     + (" requires_grad" if rg else ""))
    return "; ".join(parts) if parts else "no tensor inputs"


class InputGuard:
    """Checks a call's signature against a variant (static or with a size symbol)."""

    __slots__ = ("sig", "dynamic", "_dyn_by_pos")

    def __init__(self, sig, dynamic=()):
        self.sig = sig
        self.dynamic = list(dynamic)
        self._dyn_by_pos = {}
        for pos, dim in self.dynamic:
            self._dyn_by_pos.setdefault(pos, set()).add(dim)

    def check(self, sig) -> str | None:
        """None when ``sig`` matches, else the reason it does not."""
        if not self.dynamic:
            if sig == self.sig:
                return None
            return _diff(self.sig, sig)
        if len(sig) != len(self.sig):
            return f"{len(sig)} tensor inputs, the variant has {len(self.sig)}"
        size = None
        for i, ((shape, dtype, rg), (eshape, edtype, erg)) in enumerate(zip(sig, self.sig, strict=False)):
            if dtype != edtype or rg != erg or len(shape) != len(eshape):
                return _diff(self.sig, sig)
            dyn = self._dyn_by_pos.get(i, ())
            for d, (n, en) in enumerate(zip(shape, eshape, strict=False)):
                if d in dyn:
                    if size is None:
                        size = n
                    if n != size or n < 2:
                        return f"input {i} dim {d} is {n} (dynamic dims must be equal and >= 2)"
                elif n != en:
                    return f"input {i} has shape {tuple(shape)}, the variant expects dim {d} = {en}"
        return None

    def describe(self) -> str:
        return describe_signature(self.sig, self.dynamic)


def _diff(expected, got) -> str:
    if len(expected) != len(got):
        return f"{len(got)} tensor inputs instead of {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got, strict=False)):
        if e[0] != g[0]:
            return f"input {i} shape {tuple(g[0])} != {tuple(e[0])}"
        if e[1] != g[1]:
            return f"input {i} dtype {g[1]} != {e[1]}"
        if e[2] != g[2]:
            return f"input {i} requires_grad {g[2]} != {e[2]}"
    return "signature differs"
