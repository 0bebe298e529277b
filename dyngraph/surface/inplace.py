"""In-place operations (``add_``, ``mul_``, ``x += y``, ``zero_``, ``fill_``, ``copy_``,
``share_memory_``...) and the machinery behind them.

An in-place op is computed out of place through the ordinary primitive, then
written into the tensor's own buffer (so NumPy arrays and views that share
that memory see the change), and the tensor takes over the new graph node.
PyTorch's rules apply:

- a leaf that requires grad cannot be modified in place while grad mode is on;
- the version counter (shared with views) is bumped, so a node that saved the
  old value raises a clear error in backward instead of using wrong data;
- when the op's own rule needs the old value of the tensor, that value is kept
  (cloned) for the node before the buffer is overwritten.

:func:`apply_inplace` does that for every in-place method and ``x[idx] = v``;
:mod:`dyngraph.surface.methods` attaches the methods.
"""

from __future__ import annotations

import mmap

import numpy as np

from .._core.graph import FREED, Node, bump_version
from .._core.state import STATE, note_inplace
from ..backend import device_of, move_to
from ..tensor import Tensor
from ._args import operand


def _check_target(self: Tensor, op: str) -> None:
    if self._rg and self._fn is None and STATE.grad_enabled:
        raise RuntimeError(
            f"{op}: a leaf Variable that requires grad (shape {list(self.shape)}) is being used in "
            "an in-place operation. Wrap the update in `with dg.no_grad():` (as optimizers do), "
            "or use the out-of-place form.")


def _notify(t: Tensor, value) -> None:
    """Tell an active interpreter that ``t`` now holds ``value`` (its ``on_inplace`` hook)."""
    note_inplace(t, value)


def apply_inplace(self: Tensor, compute, op: str, args: tuple = (), kwargs: dict | None = None) -> Tensor:
    """Run ``compute(self, *args, **kwargs)`` out of place and store the result in ``self``.

    >>> x = dg.zeros(3)
    >>> apply_inplace(x, lambda s: s + 1.0, "add_") is x, x.tolist()
    (True, [1.0, 1.0, 1.0])
    """
    state = STATE
    if self._rg and self._fn is None:   # (_check_target's first test, without its call)
        _check_target(self, op)
    old_fn, old_nr = self._fn, self._nr
    res = compute(self, *args, **kwargs) if kwargs else compute(self, *args)
    on_view = res._rg and self._base is not None and state.grad_enabled
    node = res._fn
    if node is not None:
        # Does the node keep ``self`` among its saved arguments?  An autograd Node's are read
        # from its slots without building the tuple (``in`` would compare with ==); other
        # nodes (dg.autobatch's pending ones) through ``saved``.
        if type(node) is Node:
            sn = node._sn
            keeps = sn is not None and sn is not FREED and (
                node._s0 is self or node._s1 is self or node._s2 is self
                or (node._sx is not None and any(a is self for a in node._sx)))
        else:
            saved = node.saved
            keeps = saved is not None and saved is not FREED and any(a is self for a in saved)
        if keeps:
            saved = node.saved
            # The rule of this op reads the value being overwritten: keep a copy for it.
            stand_in = Tensor._make(self._data.copy(), self._rg, old_fn, old_nr)
            node.saved_data = [stand_in._data if a is self else d
                               for a, d in zip(saved, node.saved_data)]
            node.saved_versions = [0 if a is self else v
                                   for a, v in zip(saved, node.saved_versions)]
            node.saved = tuple(stand_in if a is self else a for a in saved)
    if on_view:
        res = _rebase_view(self, res, op)
    data, value = self._data, res._data
    if type(data) is np.ndarray and type(value) is np.ndarray and value.dtype is data.dtype \
            and value.shape == data.shape and data.flags.writeable:
        data[...] = value   # the common case of _write: nothing to check or cast
    else:
        _write(self, value, op)
    bump_version(self)
    if state.interpreter is not None:   # (what note_inplace checks first, without its call)
        _notify(self, res)
    if res._rg:
        self._fn = res._fn
        self._nr = res._nr
        self._rg = True
    return self


def _offsets(a: np.ndarray) -> np.ndarray:
    """Byte offset of every element of ``a`` from its first element."""
    off = np.zeros(a.shape, np.int64)
    for d, (n, st) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[d] = n
        off = off + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return off


def _positions_in(root: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Flat (row-major) index into ``root`` of every element of ``view``, which shares its memory."""
    start = view.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    ro = _offsets(root).reshape(-1)
    order = np.argsort(ro, kind="stable")
    return order[np.searchsorted(ro[order], _offsets(view) + start)]


def _rebase_view(self: Tensor, res: Tensor, op: str) -> Tensor:
    """An in-place op on a view inside the graph: the base tensor becomes ``base`` with the
    view's elements replaced by ``res`` (an out-of-place ``index_put``), so gradients flow
    to whatever the base and the new values depend on; the view then reads from that new
    base.  Returns the view's new value, with its graph node."""
    from .indexing import index_put  # noqa: PLC0415  (surface.indexing imports this module at the top)

    root = self._base
    if root._rg and root._fn is None:
        raise RuntimeError(
            f"{op}: a view of a leaf Variable that requires grad (shape {list(root.shape)}) is "
            "being used in an in-place operation. Wrap the update in `with dg.no_grad():`, or "
            "clone the leaf first.")
    pos = Tensor._make(_positions_in(root._data, self._data).reshape(-1), False, None, 0)
    new_root = index_put(root.reshape(-1), (pos,), res.reshape(-1)).reshape(root.shape)
    root._fn, root._nr, root._rg = new_root._fn, new_root._nr, True
    return new_root.reshape(-1)[pos].reshape(self.shape)


def _write(self: Tensor, value, op: str) -> None:
    data = self._data
    if value.dtype != data.dtype and not np.can_cast(value.dtype, data.dtype, "same_kind"):
        raise RuntimeError(
            f"{op}: result type {value.dtype} can't be cast to the desired output type "
            f"{data.dtype} (tensor of shape {list(data.shape)})")
    if value.shape != data.shape:
        if np.broadcast_shapes(value.shape, data.shape) != data.shape:
            raise RuntimeError(
                f"{op}: output with shape {list(data.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(value.shape, data.shape))}")
    if data.flags.writeable:
        np.copyto(data, value, casting="unsafe")
    else:
        if any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape)):
            raise RuntimeError(
                f"{op}: unsupported operation: more than one element of the written-to tensor "
                f"(shape {list(data.shape)}, an expand()ed view) refers to a single memory "
                "location. Please clone() the tensor before performing the operation.")
        self._data = np.array(np.broadcast_to(value, data.shape), dtype=data.dtype)


def _binary_inplace(fn, name):
    def method(self, other, *args, **kwargs):
        other = operand(other)
        return apply_inplace(self, lambda s: fn(s, other, *args, **kwargs), name)

    method.__name__ = name
    return method


def _unary_inplace(fn, name):
    def method(self, *args, **kwargs):
        return apply_inplace(self, lambda s: fn(s, *args, **kwargs), name)

    method.__name__ = name
    return method


def zero_(self: Tensor) -> Tensor:
    """Fill with zeros in place."""
    return fill_(self, 0)


def fill_(self: Tensor, value) -> Tensor:
    """Fill with ``value`` (a number or a 0-d tensor) in place."""
    if isinstance(value, Tensor) and value._rg and STATE.grad_enabled:
        return apply_inplace(self, lambda s: s * 0 + value.to(s.dtype), "fill_")
    v = value.item() if isinstance(value, Tensor) else value
    _check_target(self, "fill_")
    if self._rg and STATE.grad_enabled:
        return apply_inplace(self, lambda s: s * 0 + v, "fill_")
    if self._data.flags.writeable:
        self._data.fill(v)
    else:
        _write(self, np.asarray(v, self._data.dtype), "fill_")  # read-only: copies, or refuses expands
    bump_version(self)
    _notify(self, v)
    return self


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast, cast to this dtype) into this tensor in place.

    Any dtype converts to any dtype, as in PyTorch: floats are truncated toward zero
    into integers, nonzero values become ``True`` in a bool tensor.

    >>> dg.zeros((), dtype=dg.long).copy_(dg.tensor(3.7))
    tensor(3)
    """
    src = operand(src)
    if not isinstance(src, Tensor):
        return fill_(self, src)
    if src._rg and STATE.grad_enabled or (self._rg and STATE.grad_enabled):
        def compute(s):
            v = src if src._data.dtype == s._data.dtype else src.to(s.dtype)
            if tuple(v.shape) != tuple(s.shape):
                v = v.expand(*s.shape)
            return s * 0 + v

        return apply_inplace(self, compute, "copy_")
    _check_target(self, "copy_")
    value = src._data

    if device_of(value) != device_of(self._data):
        value = move_to(value, device_of(self._data))
    if value.dtype != self._data.dtype:
        with np.errstate(over="ignore", invalid="ignore"):   # PyTorch converts silently
            value = value.astype(self._data.dtype)   # copy_ converts across every dtype pair
    _write(self, value, "copy_")
    bump_version(self)
    _notify(self, src)
    return self


def share_memory_(self: Tensor) -> Tensor:
    """Move this tensor's values into shared memory (a named POSIX segment, ``dyngraph._shm``).

    Processes forked afterwards (``dg.multiprocessing.Process`` with the default ``fork``
    start method) see each other's in-place writes, which is what Hogwild-style training
    needs; a shared tensor sent through a ``dg.multiprocessing`` queue arrives as a view of
    the same memory.  Already-shared tensors and GPU tensors are returned as they are.

    >>> w = dg.zeros(3).share_memory_(); w.is_shared()
    True
    """
    data = self._data
    if is_shared(self) or not isinstance(data, np.ndarray):
        return self
    from .._shm import shared_empty  # noqa: PLC0415  (only when a tensor is shared)

    shared = shared_empty(data.shape, data.dtype)
    shared[...] = data
    self._data = shared
    return self


def is_shared(self: Tensor) -> bool:
    """Whether :meth:`share_memory_` moved this tensor (or the tensor it views) to shared memory."""
    base = self._data
    while base is not None:
        if isinstance(base, mmap.mmap):
            return True
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return False


def requires_grad_leaf_check(self):  # pragma: no cover - kept for API symmetry
    return self


