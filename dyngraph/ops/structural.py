"""Structural primitives: reshape, expand, permute, sum_to_shape, cast, getitem, gather.

They are each other's adjoints (expand <-> sum_to_shape, getitem <-> getitem_backward,
gather <-> gather_backward;
reshape, permute and cast are their own), and every other family's rules use them, so
they sit at the bottom of ``ops/``: this module imports no other primitive family (an
import-linter contract in ``pyproject.toml``) and every family imports it at the top.
The engine reaches ``sum_to_shape`` and ``cast`` by name (``_core.rules.fit``).

* ``reshape``/``expand``/``permute``/``getitem`` are views (``is_view=True``): the output
  shares memory with the input and its version counter.
* ``getitem`` takes a spec of ints, ``(start, stop, step)`` slice triples, None and
  Ellipsis (see :mod:`.indexing` for the index-spec design).
"""

from __future__ import annotations

import re

import numpy as np

from .._core.registry import LOOPS as _LOOPS
from ..backend import xp
from ..tensor import Tensor
from . import _batching
from ._util import quiet_primitives
from .registry import REGISTRY, primitive

# ---------------------------------------------------------------------------
# reshape / expand / permute
# ---------------------------------------------------------------------------

# PyTorch names view/reshape/flatten nodes ViewBackward0 (the usual callers of this primitive)
@primitive("reshape", meta=True, is_view=True, torch_name="ViewBackward0")
def reshape_p(x, shape=()):
    return x.reshape(shape)


reshape_p.defvjp(lambda g, out, x, shape=(): reshape_p(g, shape=tuple(x.shape)))


# The accelerator's expand_view (the view below built in C: ~0.3 against ~1.2 us), or None
_EXPAND_VIEW = getattr(_LOOPS, "expand_view", None)


@primitive("expand", meta=True, is_view=True)
def expand_p(x, shape=()):
    if _EXPAND_VIEW is not None:
        out = _EXPAND_VIEW(x, shape)
        if out is not None:
            return out
    if type(x) is np.ndarray and x.flags.c_contiguous and len(shape) >= x.ndim:
        # a C-contiguous input (the usual ``dst.unsqueeze(1).expand(-1, H)``): the read-only
        # view np.broadcast_to makes (same strides, same base), built directly -- its nditer
        # costs several microseconds; anything else, and every error, takes broadcast_to
        lead = len(shape) - x.ndim
        strides = [0] * lead
        for o, s, st in zip(x.shape, shape[lead:], x.strides):
            if o == 1 and s >= 0:
                strides.append(0)   # (broadcast_to's stride for every size-1 dimension)
            elif o == s:
                strides.append(st)
            else:
                break
        else:
            try:
                out = np.ndarray(shape, x.dtype, x, 0, strides)
            except (TypeError, ValueError, BufferError):   # a dtype without buffer export
                return np.broadcast_to(x, shape)
            out.setflags(write=False)   # (cheaper than through the flags object)
            return out
    return np.broadcast_to(x, shape)


expand_p.defvjp(lambda g, out, x, shape=(): _sum_to(g, tuple(x.shape)))


def _sum_to(g, shape):
    return sum_to_shape_p(g, shape=shape)


def _permute_name(params) -> str:
    # a swap of two axes is what transpose/mT/swapaxes record (TransposeBackward0 in PyTorch);
    # x.permute(1, 0, 2) also swaps two and is then named TransposeBackward0 here
    dims = params.get("dims", ())
    moved = sum(1 for i, d in enumerate(dims) if i != d)
    return "TransposeBackward0" if moved == 2 else "PermuteBackward0"


@primitive("permute", is_view=True, torch_name=_permute_name)
def permute_p(x, dims=()):
    return x.transpose(dims)


permute_p.defvjp(lambda g, out, x, dims=(): permute_p(g, dims=tuple(int(i) for i in np.argsort(dims))))


# ---------------------------------------------------------------------------
# sum_to_shape: the one helper that reverses broadcasting
# ---------------------------------------------------------------------------

@primitive("sum_to_shape", meta=True)
def sum_to_shape_p(x, shape=()):
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    r = x.sum(axis=axes, keepdims=True) if axes else x
    return r.reshape(shape)


def _sum_to_shape_vjp(g, out, x, shape=()):
    return expand_p(g, shape=tuple(x.shape))


sum_to_shape_p.defvjp(_sum_to_shape_vjp)


# ---------------------------------------------------------------------------
# dtype conversion (differentiable)
# ---------------------------------------------------------------------------

@primitive("cast", save_inputs=True, torch_name="ToCopyBackward0")
def cast_p(x, dtype=None):
    if dtype == np.float16 and x.dtype.itemsize > 2:
        with np.errstate(over="ignore"):  # out-of-range values become inf silently, as in PyTorch
            return x.astype(dtype)
    return x.astype(dtype)


def _cast_vjp(g, out, x, dtype=None):
    src = x.dtype if not isinstance(x, Tensor) else x._data.dtype
    if src.kind != "f":
        return None
    return cast_p(g, dtype=src)


cast_p.defvjp(_cast_vjp)


# ---------------------------------------------------------------------------
# getitem: basic indexing (a view)
# ---------------------------------------------------------------------------

def _zeros(like, shape):
    if type(like) is np.ndarray:
        return np.zeros(shape, like.dtype)

    return xp(like).zeros(shape, like.dtype)


def _torch_msg(exc: Exception) -> str:
    msg = str(exc).replace("for axis", "for dimension")
    m = re.match(r"too many indices for array: array is (\d+)-dimensional, but (\d+) were indexed", msg)
    if m:
        msg = f"too many indices for tensor of dimension {m.group(1)} ({m.group(2)} were indexed)"
    return msg


_NPIDX: dict = {}


def _np_basic(spec: tuple) -> tuple:
    """A spec without tensors as a NumPy basic index (always with an Ellipsis, so
    indexing returns a view even when every dimension is selected)."""
    out = _NPIDX.get(spec)
    if out is not None:
        return out
    items = []
    ell = False
    for it in spec:
        if type(it) is tuple:
            items.append(slice(*it))
        else:
            if it is Ellipsis:
                ell = True
            items.append(it)
    if not ell:
        items.append(Ellipsis)
    out = tuple(items)
    if len(_NPIDX) > 4096:
        _NPIDX.clear()
    _NPIDX[spec] = out
    return out


def _getitem_name(params) -> str:
    # PyTorch applies the index left to right; the node is that of the last step that is not a
    # full slice or Ellipsis: an int selects, a slice slices, None unsqueezes; x[...] aliases
    for c in reversed(params.get("index", ())):
        if c is None:
            return "UnsqueezeBackward0"
        if isinstance(c, tuple):
            if c != (None, None, None):
                return "SliceBackward0"
        elif c is not Ellipsis:
            return "SelectBackward0"
    return "AliasBackward0"


@primitive("getitem", meta=True, is_view=True, torch_name=_getitem_name)
def getitem_p(x, index=()):
    """``x[index]`` for a spec of ints, slice triples, None and Ellipsis (a view)."""
    try:
        return x[_NPIDX.get(index) or _np_basic(index)]
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None


@primitive("getitem_backward")
def getitem_backward_p(g, shape=(), index=()):
    """Zeros of ``shape`` with ``g`` written at ``index`` (the vjp of ``getitem``)."""
    z = _zeros(g, shape)
    z[_np_basic(index)] = g
    return z


getitem_p.defvjp(lambda g, out, x, index=(): getitem_backward_p(g, shape=tuple(x.shape), index=index))
getitem_backward_p.defvjp(lambda g, out, gx, shape=(), index=(): getitem_p(g, index=index))


# ---------------------------------------------------------------------------
# gather along a dimension (its adjoint scatters: reduction, sorting and indexing rules use it)
# ---------------------------------------------------------------------------

def _along(index, dim):
    """An advanced index that picks ``index`` along ``dim`` and the identity elsewhere."""
    nd = index.ndim
    out = []
    for d in range(nd):
        if d == dim:
            out.append(index)
        else:
            shape = [1] * nd
            shape[d] = index.shape[d]
            out.append(np.arange(index.shape[d]).reshape(shape))
    return tuple(out)


def _as1d(x, index):
    return (x.reshape(1) if x.ndim == 0 else x), (index.reshape(1) if index.ndim == 0 else index)


@primitive("gather", save_inputs=True, nondiff_argnums=(1,))
def gather_p(x, index, dim=0):
    x1, i1 = _as1d(x, index)
    try:
        out = x1[_along(i1, dim)]
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    return out.reshape(index.shape)


@primitive("gather_backward", save_inputs=True, nondiff_argnums=(1,))
def gather_backward_p(g, index, shape=(), dim=0):
    """Zeros of ``shape`` with ``g`` scatter-added along ``dim`` (the vjp of gather)."""
    z = _zeros(g, shape)
    z1, i1 = _as1d(z, index)
    np.add.at(z1, _along(i1, dim), g.reshape(i1.shape))
    return z


gather_p.defvjp(lambda g, out, x, index, dim=0: gather_backward_p(g, index, shape=tuple(x.shape), dim=dim),
                None)
gather_backward_p.defvjp(lambda g, out, gx, index, shape=(), dim=0: gather_p(g, index, dim=dim), None)


# A cast to float16 can overflow to inf: silent, as in PyTorch (see ops/_util.py:quiet_fp).
quiet_primitives(cast_p)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_structural():
    b, R = _batching, REGISTRY

    R["reshape"].defbatch(b.reshape_rule)
    R["expand"].defbatch(b.expand_rule)
    R["permute"].defbatch(b.permute_rule)
    R["sum_to_shape"].defbatch(fallback=b.BACKWARD_ONLY)
    R["cast"].defbatch(b.elementwise)
    R["getitem"].defbatch(b.getitem_rule)
    R["getitem_backward"].defbatch(fallback=b.BACKWARD_ONLY)
    R["gather"].defbatch(b.gather_like)
    R["gather_backward"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_structural()
