"""Indexing primitives: ``x[idx]``, ``x[idx] = v``, gather/scatter, index_*, masks, sorting.

Design for graph capture: an index expression is split into a plain-data
*spec* (a tuple of ints, ``(start, stop, step)`` slice triples, ``None``,
``Ellipsis`` and the placeholder string ``"tensor"``) and the index
*tensors*, which are ordinary inputs of the primitive.  A captured graph can
therefore replay with new index values, and the ONNX exporter reads the
structure from ``params["index"]``.

Semantics follow PyTorch, which differ from NumPy in one place: integers
(and 0-d integer tensors) select first, so advanced-index dimensions are
placed by NumPy's adjacency rule among the remaining tensor indices only
(``x[0, :, [0, 1]]`` has shape ``(3, 2)`` for ``x`` of shape ``(2, 3, 4)``).
Implementations do that in two stages: a basic (view) index, then the
advanced index.

Gradients of gathering ops scatter-add into zeros (``np.add.at``), so
repeated indices accumulate.  Rules only read index *data*; the values of
the indexed tensor are never needed, so nodes keep its shape only
(:func:`_bind_light`), which also keeps ``h[:, t] = f(x)`` loops cheap.

Index tensors of the variadic primitives (``index``, ``index_put``...) are
integer or bool tensors, which never require grad, so they never get an edge;
the fixed-position index inputs (``gather``, ``index_select``...) are also
listed in ``nondiff_argnums``.

``x[idx] = v`` is the functional ``index_put`` primitive applied through
:func:`dyngraph.ops.inplace.apply_inplace` (version bump, leaf check, the
tensor takes over the new node); without autograd it writes straight into the
buffer.  Limitation shared with the other in-place ops: a view of ``x`` taken
before the write keeps its old graph (PyTorch replays it on the new base).
"""

from __future__ import annotations

import operator
import re

import numpy as np

from .. import dtypes as _dt
from .. import return_types as _rt
from .._core.graph import Meta
from .._core.state import STATE, concrete
from ..tensor import Tensor, _wrap_dim
from ._util import as_tensor_arg, install
from .inplace import _check_target, apply_inplace, bump_version
from .reduction import count_nonzero_p as _count_nonzero_p
from .registry import bind, primitive

__all__ = [
    "index_put", "gather", "scatter", "scatter_add", "scatter_reduce", "index_select",
    "index_add", "index_copy", "index_fill", "index_reduce", "put", "masked_fill", "masked_select", "masked_scatter",
    "take", "take_along_dim", "nonzero", "argwhere", "topk", "sort", "argsort", "msort",
    "kthvalue", "unique", "searchsorted", "bucketize", "one_hot", "isin", "bincount",
    "quantile", "histc", "unique_consecutive",
]

TENSOR = "tensor"  # placeholder in an index spec: the next index tensor input
_FULL = (None, None, None)
_INDEX_KINDS = "iub"


def _data(a):
    """The array behind a rule argument (rules run on arrays or on Tensors)."""
    return a._data if isinstance(a, Tensor) else a


def _zeros(like, shape):
    if type(like) is np.ndarray:
        return np.zeros(shape, like.dtype)
    from ..backend import xp  # noqa: PLC0415

    return xp(like).zeros(shape, like.dtype)


def _torch_msg(exc: Exception) -> str:
    msg = str(exc).replace("for axis", "for dimension")
    m = re.match(r"too many indices for array: array is (\d+)-dimensional, but (\d+) were indexed", msg)
    if m:
        msg = f"too many indices for tensor of dimension {m.group(1)} ({m.group(2)} were indexed)"
    return msg


# ---------------------------------------------------------------------------
# index specs
# ---------------------------------------------------------------------------

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


def _split(spec: tuple, arrays, ndim: int):
    """PyTorch's two stages: (basic index, advanced index or None)."""
    basic = []
    adv = []
    has_adv = False
    k = 0
    consumed = 0
    for it in spec:
        if it is None or it is Ellipsis:
            continue
        if it == TENSOR:
            a = arrays[k]
            k += 1
            consumed += a.ndim if a.dtype.kind == "b" else 1
        else:
            consumed += 1
    k = 0
    for it in spec:
        t = type(it)
        if t is int:
            basic.append(it)
        elif t is tuple:
            basic.append(slice(*it))
            adv.append(slice(None))
        elif it is None:
            basic.append(None)
            adv.append(slice(None))
        elif it is Ellipsis:
            basic.append(Ellipsis)
            adv.extend([slice(None)] * max(ndim - consumed, 0))
        else:
            a = arrays[k]
            k += 1
            if a.dtype.kind == "b":
                basic.extend([slice(None)] * a.ndim)
                adv.append(a)
                has_adv = True
            elif a.ndim == 0:
                basic.append(int(a))
            else:
                basic.append(slice(None))
                adv.append(a)
                has_adv = True
    if Ellipsis not in basic:
        basic.append(Ellipsis)
    return tuple(basic), (tuple(adv) if has_adv else None)


def _index_tensor(obj) -> Tensor:
    t = obj if isinstance(obj, Tensor) else as_tensor_arg(np.asarray(obj) if isinstance(obj, list) else obj, "index")
    if t._data.dtype.kind not in "iub":
        if t._data.size == 0 and t._data.dtype.kind == "f":   # x[[]] indexes with an empty long tensor
            return Tensor._make(t._data.astype(np.int64), False, None, 0)
        raise IndexError(
            f"tensors used as indices must be long, int, byte or bool tensors (got {t.dtype}, "
            f"shape {list(t.shape)})")
    if t._data.dtype == np.uint8:     # PyTorch's legacy byte masks (cast by a primitive: replayable)
        t = t.bool()
    return t


def _int(v, what="index"):
    if v is None:
        return None
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what}: slice indices must be integers or None, got {type(v).__name__}") from None


def parse_index(idx):
    """``idx`` (anything ``x[idx]`` accepts) as ``(spec, tensors)``."""
    if type(idx) is not tuple:
        if isinstance(idx, list) and any(
                isinstance(i, (Tensor, slice, list, tuple)) or i is None or i is Ellipsis for i in idx):
            idx = tuple(idx)    # legacy: a list holding tensors/slices indexes like a tuple
        else:
            idx = (idx,)
    spec = []
    tensors = []
    for it in idx:
        t = type(it)
        if t is int:
            spec.append(it)
        elif t is slice:
            step = _int(it.step)
            if step is not None and step <= 0:
                raise ValueError(f"step must be greater than zero (got slice step {step}; use .flip() "
                                 "to reverse)")
            spec.append((_int(it.start), _int(it.stop), step))
        elif it is None or it is Ellipsis:
            spec.append(it)
        elif t is bool:
            if it:
                spec.append(None)
            else:
                spec.append(TENSOR)
                tensors.append(Tensor._make(np.asarray(False), False, None, 0))
        elif isinstance(it, (Tensor, np.ndarray, list, tuple, range)):
            spec.append(TENSOR)   # a range indexes like the list of its values (x[range(3), idx])
            tensors.append(_index_tensor(list(it) if t is tuple or t is range else it))
        elif isinstance(it, (np.integer, np.bool_)):
            if isinstance(it, np.bool_):
                spec.append(None if it else TENSOR)
                if not it:
                    tensors.append(Tensor._make(np.asarray(False), False, None, 0))
            else:
                spec.append(int(it))
        else:
            try:
                spec.append(operator.index(it))
            except TypeError:
                raise IndexError(
                    "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                    f"Variables are valid indices (got {type(it).__name__})") from None
    if spec.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    return tuple(spec), tensors


# ---------------------------------------------------------------------------
# basic indexing: a view (the RNN hot path ``x[t]``)
# ---------------------------------------------------------------------------

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
# advanced indexing
# ---------------------------------------------------------------------------

@primitive("index", save_inputs=True)
def index_p(x, *indices, index=()):
    """``x[spec]`` where ``"tensor"`` entries take the index arrays in order (a copy)."""
    try:
        basic, adv = _split(index, indices, x.ndim)
        v = x[basic]
        return v.copy() if adv is None else v[adv]
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None


@primitive("index_backward", save_inputs=True)
def index_backward_p(g, *indices, shape=(), index=()):
    """Zeros of ``shape`` with ``g`` added at the indexed positions (repeats accumulate)."""
    z = _zeros(g, shape)
    basic, adv = _split(index, indices, len(shape))
    view = z[basic]
    if adv is None:
        view[...] = g
    else:
        np.add.at(view, adv, g)
    return z


def _index_vjp(argnum, g, out, x, *indices, index=()):
    if argnum:
        return None
    return index_backward_p(g, *indices, shape=tuple(x.shape), index=index)


def _index_backward_vjp(argnum, g, out, gx, *indices, shape=(), index=()):
    if argnum:
        return None
    return index_p(g, *indices, index=index)


index_p.defvjp_argnum(_index_vjp)
index_backward_p.defvjp_argnum(_index_backward_vjp)


@primitive("index_put", save_inputs=True)
def index_put_p(x, values, *indices, index=(), accumulate=False):
    """A copy of ``x`` with ``values`` written (or added) at ``x[spec]``."""
    out = x.copy()
    try:
        basic, adv = _split(index, indices, x.ndim)
        view = out[basic]
        if adv is None:
            if accumulate:
                view += values
            else:
                view[...] = values
        elif accumulate:
            np.add.at(view, adv, values)
        else:
            view[adv] = values
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    except ValueError as exc:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(np.shape(values))} cannot be broadcast "
            f"to indexing result ({exc})") from None
    return out


def _fit_value(gv, shape):
    """Sum a gradient of the indexing-result shape back to the value's shape."""
    from .reduction import sum_to_shape_p  # noqa: PLC0415
    from .shape import reshape_p  # noqa: PLC0415

    shape = tuple(shape)
    core = shape
    while len(core) > gv.ndim and core and core[0] == 1:
        core = core[1:]
    if tuple(gv.shape) != core:
        gv = sum_to_shape_p(gv, shape=core)
    if core != shape:
        gv = reshape_p(gv, shape=shape)
    return gv


def _index_put_vjp(argnum, g, out, x, values, *indices, index=(), accumulate=False):
    if argnum == 0:
        return g if accumulate else index_put_p(g, 0.0, *indices, index=index, accumulate=False)
    if argnum == 1:
        return _fit_value(index_p(g, *indices, index=index), values.shape)
    return None


index_put_p.defvjp_argnum(_index_put_vjp)


def _bind_light(prim, args, params, light):
    """``bind``, then let the node keep only the shape of the inputs in ``light``:
    their values are not read by the rules, so they are neither kept alive nor
    version-checked (``y = h[i]; h[j] = 0; y.backward()`` is fine, as in PyTorch)."""
    out = bind(prim, args, params)
    first = out[0] if type(out) is tuple and out else out
    node = first._fn if type(first) is Tensor else None
    if node is not None and node.prim is prim and node.saved is not None:
        saved = list(node.saved)
        data = list(node.saved_data)
        versions = list(node.saved_versions)
        for i in light:
            a = saved[i]
            if isinstance(a, Tensor):
                saved[i] = data[i] = Meta(a._data.shape, a._data.dtype)
                versions[i] = None
        node.saved = tuple(saved)
        node.saved_data = data
        node.saved_versions = versions
    return out


def _getitem(self, idx):
    """``x[idx]``: ints, slices, None, Ellipsis (a view), bool masks and integer tensors."""
    if type(idx) is int:
        return bind(getitem_p, (self,), {"index": (idx,)})
    spec, tensors = parse_index(idx)
    if not tensors:
        return bind(getitem_p, (self,), {"index": spec})
    _check_index_dims(self, spec, tensors)
    return _bind_light(index_p, (self, *tensors), {"index": spec}, (0,))


def _check_index_dims(x, spec, tensors):
    n = 0
    k = 0
    for it in spec:
        if it is None or it is Ellipsis:
            continue
        if it == TENSOR:
            a = tensors[k]._data
            k += 1
            if a.dtype.kind == "b":
                shape = x._data.shape
                if a.ndim and (n + a.ndim > len(shape) or a.shape != shape[n:n + a.ndim]):
                    for j, s in enumerate(a.shape):
                        if n + j >= len(shape) or s != shape[n + j]:
                            raise IndexError(
                                f"The shape of the mask {list(a.shape)} at index {j} does not match "
                                f"the shape of the indexed tensor {list(shape)} at index {n + j}")
                n += a.ndim
                continue
        n += 1
    if n > x._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x._data.ndim}")


def _value_operand(self, value, op):
    if isinstance(value, Tensor):
        if value._data.dtype != self._data.dtype:
            value = value.to(self.dtype)
        return value
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return Tensor._make(np.asarray(value, dtype=self._data.dtype), False, None, 0)


def index_put(input, indices, values, accumulate: bool = False):
    """Out of place: ``input`` with ``values`` written (or added) at ``input[indices]``.

    >>> dg.index_put(dg.zeros(3), (dg.tensor([0, 0]),), dg.tensor(1.), accumulate=True)
    tensor([2., 0., 0.])
    """
    spec, tensors = parse_index(tuple(indices))
    values = _value_operand(input, values, "index_put")
    _check_index_dims(input, spec, tensors)
    return _bind_light(index_put_p, (input, values, *tensors),
                       {"index": spec, "accumulate": bool(accumulate)}, (0, 1))


def _assign(self, spec, tensors, value, accumulate, op):
    """Write ``value`` into ``self[spec]`` in place (autograd-aware)."""
    value = _value_operand(self, value, op)
    if STATE.interpreter is not None or (STATE.grad_enabled and (
            self._rg or (isinstance(value, Tensor) and value._rg))):
        params = {"index": spec, "accumulate": accumulate}
        return apply_inplace(
            self, lambda s: _bind_light(index_put_p, (s, value, *tensors), params, (0, 1)), op)
    data = self._data
    if not data.flags.writeable:
        data = self._data = data.copy()
    v = value._data if isinstance(value, Tensor) else value
    try:
        basic, adv = _split(spec, [t._data for t in tensors], data.ndim)
        view = data[basic]
        if adv is None:
            if accumulate:
                view += v
            else:
                view[...] = v
        elif accumulate:
            np.add.at(view, adv, v)
        else:
            view[adv] = v
    except IndexError as exc:
        raise IndexError(f"{op}: {_torch_msg(exc)} (tensor of shape {list(data.shape)})") from None
    except ValueError as exc:
        raise RuntimeError(
            f"{op}: shape mismatch: value of shape {list(np.shape(v))} cannot be broadcast to the "
            f"indexing result of tensor of shape {list(data.shape)} ({exc})") from None
    bump_version(self)
    return self


def _setitem(self, idx, value):
    """``x[idx] = value`` (value: tensor or number; broadcast and cast to x's dtype)."""
    spec, tensors = parse_index(idx)
    if tensors:
        _check_index_dims(self, spec, tensors)
    _assign(self, spec, tensors, value, False, "__setitem__")


def index_put_(self, indices, values, accumulate: bool = False):
    """In place: ``self[indices] = values`` (or ``+=`` with ``accumulate=True``)."""
    spec, tensors = parse_index(tuple(indices))
    _check_index_dims(self, spec, tensors)
    return _assign(self, spec, tensors, values, bool(accumulate), "index_put_")


# ---------------------------------------------------------------------------
# gather / scatter along a dimension
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


def _src_block(src, index):
    if not hasattr(src, "ndim") or src.ndim == 0:
        return src
    return src[tuple(slice(0, n) for n in index.shape)].reshape(index.shape)


@primitive("scatter", save_inputs=True, nondiff_argnums=(1,))
def scatter_p(x, index, src, dim=0):
    out = x.copy()
    o1, i1 = _as1d(out, index)
    try:
        o1[_along(i1, dim)] = _src_block(src, i1) if hasattr(src, "ndim") and src.ndim else src
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    return out


@primitive("scatter_add", save_inputs=True, nondiff_argnums=(1,))
def scatter_add_p(x, index, src, dim=0):
    out = x.copy()
    o1, i1 = _as1d(out, index)
    try:
        np.add.at(o1, _along(i1, dim), _src_block(src, i1) if hasattr(src, "ndim") and src.ndim else src)
    except IndexError as exc:
        raise IndexError(_torch_msg(exc)) from None
    return out


def _src_grad(g, index, src, dim):
    """Gradient of a scatter's ``src``: gathered at ``index``, zero outside its block."""
    gs = gather_p(g, index, dim=dim)
    shape = tuple(src.shape)
    if tuple(gs.shape) == shape:
        return gs
    if len(shape) == 0:
        return _reshape(gs, ())
    spec = tuple((0, n, None) for n in index.shape)
    return getitem_backward_p(gs, shape=shape, index=spec)


def _reshape(a, shape):
    from .shape import reshape_p  # noqa: PLC0415

    return reshape_p(a, shape=tuple(shape))


scatter_p.defvjp(lambda g, out, x, index, src, dim=0: scatter_p(g, index, 0.0, dim=dim), None,
                 lambda g, out, x, index, src, dim=0: _src_grad(g, index, src, dim))
scatter_add_p.defvjp(lambda g, out, x, index, src, dim=0: g, None,
                     lambda g, out, x, index, src, dim=0: _src_grad(g, index, src, dim))


def _check_gather_like(op, input, dim, index, src=None):
    index = _index_tensor(index) if not isinstance(index, Tensor) else index
    if index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index (got {index.dtype})")
    nd = input._data.ndim
    d = _wrap_dim(dim, nd, op)
    if index._data.ndim != nd and not (max(nd, 1) == 1 and index._data.ndim <= 1):
        raise RuntimeError(
            f"{op}(): Index tensor must have the same number of dimensions as input tensor "
            f"(index shape {list(index.shape)}, input shape {list(input.shape)})")
    ish = index._data.shape
    xsh = input._data.shape
    for k in range(min(len(ish), len(xsh))):
        if k != d and ish[k] > xsh[k]:
            raise RuntimeError(
                f"{op}(): Size does not match at dimension {k} expected index {list(ish)} to be "
                f"smaller than self {list(xsh)} apart from dimension {d}")
        if src is not None and isinstance(src, Tensor) and src._data.ndim == len(ish) and ish[k] > src._data.shape[k]:
            raise RuntimeError(
                f"{op}(): Expected index {list(ish)} to be smaller than src {list(src.shape)} "
                f"at dimension {k}")
    ia = index._data
    if ia.size and type(ia) is np.ndarray:
        # PyTorch accepts no negative indices here (NumPy would wrap them silently)
        n = xsh[d] if xsh else 1
        lo, hi = int(ia.min()), int(ia.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(f"{op}(): index {lo if lo < 0 else hi} is out of bounds for dimension "
                               f"{d} with size {n}")
    return index, d


def gather(input, dim: int, index, *, sparse_grad: bool = False):
    """Values of ``input`` picked along ``dim``: ``out[i][j] = input[i][index[i][j]]`` (dim=1).

    >>> dg.gather(dg.tensor([[1., 2.], [3., 4.]]), 1, dg.tensor([[0, 0], [1, 0]]))
    tensor([[1., 1.],
            [4., 3.]])
    """
    index, d = _check_gather_like("gather", input, dim, index)
    return _bind_light(gather_p, (input, index), {"dim": d}, (0,))


def _scatter_src(input, src, value, op):
    if src is None:
        src = value
    if src is None:
        raise TypeError(f"{op}() missing the 'src' (or 'value') argument")
    if isinstance(src, Tensor):
        return src if src._data.dtype == input._data.dtype else src.to(input.dtype)
    if isinstance(src, np.generic):
        return src.item()
    return src


def scatter(input, dim: int, index, src=None, *, value=None, reduce=None):
    """A copy of ``input`` with ``src`` (tensor or number) written along ``dim`` at ``index``."""
    if reduce is not None:
        if reduce in ("add", "sum"):
            return scatter_add(input, dim, index, src if src is not None else value)
        if reduce == "multiply":
            src = _scatter_src(input, src, value, "scatter")
            if not isinstance(src, Tensor):  # a number: one per index entry
                src = Tensor._make(np.full(index.shape, src, input._data.dtype), False, None, 0)
            return scatter_reduce(input, dim, index, src, "prod")
        raise RuntimeError(f"scatter(): reduce argument must be either 'add' or 'multiply', got {reduce!r}")
    src = _scatter_src(input, src, value, "scatter")
    index, d = _check_gather_like("scatter", input, dim, index, src)
    return _bind_light(scatter_p, (input, index, src), {"dim": d}, (0, 2))


def scatter_add(input, dim: int, index, src):
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index`` (repeats accumulate)."""
    src = _scatter_src(input, src, None, "scatter_add")
    index, d = _check_gather_like("scatter_add", input, dim, index, src)
    return _bind_light(scatter_add_p, (input, index, src), {"dim": d}, (0, 2))


_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


@primitive("scatter_reduce", save_inputs=True, save_output=True, nondiff_argnums=(1,))
def scatter_reduce_p(x, index, src, dim=0, reduce="sum", include_self=True):
    out = x.copy()
    o1, i1 = _as1d(out, index)
    sel = _along(i1, dim)
    s = _src_block(src, i1)
    if not include_self:
        ident = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        o1[sel] = ident
    if reduce == "mean":
        count = np.zeros(o1.shape, np.int64)
        np.add.at(count, sel, 1)
        np.add.at(o1, sel, s)
        count = count + (1 if include_self else 0)
        o1[...] = np.where(count > 0, o1 / np.maximum(count, 1), o1) if o1.dtype.kind == "f" else \
            o1 // np.maximum(count, 1)
    else:
        _REDUCE_UFUNC[reduce].at(o1, sel, s)
    return out


def _scatter_reduce_vjp(argnum, g, out, x, index, src, dim=0, reduce="sum", include_self=True):
    if argnum == 1:
        return None
    if reduce == "sum":
        if argnum == 0:
            return g if include_self else scatter_p(g, index, 0.0, dim=dim)
        return _src_grad(g, index, src, dim)
    i = _data(index)
    i1 = i.reshape(1) if i.ndim == 0 else i
    shape = tuple(x.shape)
    if reduce == "mean":
        # constant weights: 1 / (number of values averaged into each position)
        count = np.zeros(shape, _data(out).dtype)
        np.add.at(_x1(count), _along(i1, dim), 1.0)
        count = np.maximum(count + (1.0 if include_self else 0.0), 1.0)
        gn = g / count
        if argnum == 0:
            return gn if include_self else scatter_p(gn, index, 0.0, dim=dim)
        return _src_grad(gn, index, src, dim)
    if reduce in ("amax", "amin"):
        # the winners share the gradient evenly (PyTorch's rule for ties)
        o = _data(out)
        sel = _along(i1, dim)
        if include_self:
            hit_x = (_data(x) == o).astype(o.dtype)
        else:  # positions no index reaches keep x's value: x wins there
            hit_x = np.ones_like(o)
            _x1(hit_x)[sel] = 0.0
        hit_s = (_src_block(_data(src), i1) == _x1(o)[sel]).astype(o.dtype)
        n = hit_x.copy()
        np.add.at(_x1(n), sel, hit_s)
        n = np.maximum(n, 1.0)
        if argnum == 0:
            return g * (hit_x / n)
        w = (_x1(1.0 / n)[sel] * hit_s).reshape(i.shape)
        return _src_grad_fit(gather_p(g, index, dim=dim) * w, index, src)
    if reduce == "prod":
        return _scatter_prod_vjp(argnum, g, out, x, index, src, i, i1, dim, include_self)
    raise NotImplementedError(f"scatter_reduce: the derivative for reduce={reduce!r} is not implemented")


def _scatter_prod_vjp(argnum, g, out, x, index, src, i, i1, dim, include_self):
    xs = _data(x)
    blk = _src_block(_data(src), i1)
    zero_x = include_self and bool((xs == 0).any())
    if not zero_x and not bool((blk == 0).any()):
        # no zeros: d out / d c = out / c, written with ops (second order works)
        if argnum == 0:
            return g * out / x if include_self else scatter_p(g, index, 0.0, dim=dim)
        return _src_grad_fit(gather_p(g * out, index, dim=dim) / _src_block(src, i1), index, src)
    if isinstance(g, Tensor):
        raise NotImplementedError(
            "scatter_reduce(reduce='prod'): second-order gradients are not implemented when an "
            "input or source element is zero")
    # with zeros: the product of the *other* contributors, computed exactly
    sel = _along(i1, dim)
    nz = (xs == 0).astype(np.int64) if include_self else np.zeros(xs.shape, np.int64)
    pn = np.where(xs == 0, 1, xs) if include_self else np.ones_like(xs)
    np.add.at(_x1(nz), sel, (blk == 0).astype(np.int64))
    np.multiply.at(_x1(pn), sel, np.where(blk == 0, 1, blk))

    def weight(c, nzp, pnp):
        return np.where(c != 0, np.where(nzp == 0, pnp / np.where(c == 0, 1, c), 0),
                        np.where(nzp == 1, pnp, 0))

    if argnum == 0:
        return g * weight(xs, nz, pn) if include_self else scatter_p(g, index, 0.0, dim=dim)
    w = weight(blk, _x1(nz)[sel], _x1(pn)[sel]).reshape(i.shape)
    return _src_grad_fit(gather_p(g, index, dim=dim) * w, index, src)


def _src_grad_fit(gs, index, src):
    shape = tuple(src.shape)
    if tuple(gs.shape) == shape:
        return gs
    spec = tuple((0, n, None) for n in index.shape)
    return getitem_backward_p(gs, shape=shape, index=spec)


scatter_reduce_p.defvjp_argnum(_scatter_reduce_vjp)


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """Reduce ``src`` into ``input`` along ``dim`` at ``index`` with
    ``reduce`` in ``"sum" | "prod" | "mean" | "amax" | "amin"``."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"scatter_reduce(): reduce argument must be either sum, prod, mean, amax or "
                           f"amin, got {reduce}")
    src = _scatter_src(input, src, None, "scatter_reduce")
    index, d = _check_gather_like("scatter_reduce", input, dim, index, src)
    return bind(scatter_reduce_p, (input, index, src),
                {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


# ---------------------------------------------------------------------------
# index_select / index_add / index_copy / index_fill
# ---------------------------------------------------------------------------

def _dim_sel(dim, index):
    return (slice(None),) * dim + (index,)


def _check_index_1d(op, input, dim, index):
    index = index if isinstance(index, Tensor) else _index_tensor(index)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index (got {index.dtype})")
    if index._data.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector (got shape {list(index.shape)})")
    d = _wrap_dim(dim, input._data.ndim, op)
    if input._data.ndim == 0 and index._data.size != 1:
        raise IndexError(f"{op}(): Index to scalar can have only 1 value, got {index._data.size} value(s)")
    if index._data.ndim == 0:
        index = index.reshape(1)
    n = input._data.shape[d] if input._data.ndim else 1
    if index._data.size:
        lo, hi = int(index._data.min()), int(index._data.max())
        bad = hi if hi >= n else (lo if lo < -n else None)
        if bad is not None:
            raise IndexError(f"{op}(): index {bad} is out of bounds for dimension {d} with size {n}")
    return index, d


def _x1(x):
    return x.reshape(1) if x.ndim == 0 else x


@primitive("index_select", save_inputs=True, nondiff_argnums=(1,))
def index_select_p(x, index, dim=0):
    return np.take(_x1(x), index, axis=dim) if x.ndim else np.take(x.reshape(1), index).reshape(())


@primitive("index_select_backward", save_inputs=True, nondiff_argnums=(1,))
def index_select_backward_p(g, index, shape=(), dim=0):
    """Zeros of ``shape`` with ``g`` added along ``dim`` at ``index`` (vjp of index_select)."""
    z = _zeros(g, shape)
    z1 = _x1(z)
    np.add.at(z1, _dim_sel(dim, index), g.reshape(z1.shape[:dim] + (len(index),) + z1.shape[dim + 1:]))
    return z


index_select_p.defvjp(
    lambda g, out, x, index, dim=0: index_select_backward_p(g, index, shape=tuple(x.shape), dim=dim), None)
index_select_backward_p.defvjp(lambda g, out, gx, index, shape=(), dim=0: index_select_p(g, index, dim=dim),
                               None)


def index_select(input, dim: int, index):
    """The slices of ``input`` at positions ``index`` (1-D) along ``dim``.

    >>> dg.index_select(dg.tensor([[1., 2.], [3., 4.]]), 0, dg.tensor([1, 1]))
    tensor([[3., 4.],
            [3., 4.]])
    """
    index, d = _check_index_1d("index_select", input, dim, index)
    out = _bind_light(index_select_p, (input, index), {"dim": d}, (0,))
    return out


@primitive("index_add", save_inputs=True, nondiff_argnums=(1,))
def index_add_p(x, index, src, dim=0, alpha=1):
    out = x.copy()
    o1 = _x1(out)
    s = src if alpha == 1 else src * alpha
    np.add.at(o1, _dim_sel(dim, index), s.reshape(o1.shape[:dim] + (len(index),) + o1.shape[dim + 1:]))
    return out


def _index_add_src(g, index, src, dim, alpha):
    gs = index_select_p(g, index, dim=dim)
    if tuple(gs.shape) != tuple(src.shape):
        gs = _reshape(gs, src.shape)
    return gs if alpha == 1 else gs * alpha


index_add_p.defvjp(lambda g, out, x, index, src, dim=0, alpha=1: g, None,
                   lambda g, out, x, index, src, dim=0, alpha=1: _index_add_src(g, index, src, dim, alpha))


@primitive("index_copy", save_inputs=True, nondiff_argnums=(1,))
def index_copy_p(x, index, src, dim=0):
    out = x.copy()
    o1 = _x1(out)
    o1[_dim_sel(dim, index)] = src.reshape(o1.shape[:dim] + (len(index),) + o1.shape[dim + 1:])
    return out


@primitive("index_fill", save_inputs=True, nondiff_argnums=(1,))
def index_fill_p(x, index, value, dim=0):
    out = x.copy()
    _x1(out)[_dim_sel(dim, index)] = value
    return out


def _unique_positions(index, n):
    i = _data(index)
    return np.unique(np.where(i < 0, i + n, i))


def _index_fill_value_grad(g, index, value, dim):
    from .reduction import sum_p  # noqa: PLC0415

    n = g.shape[dim] if g.ndim else 1
    return sum_p(index_select_p(g, _unique_positions(index, n), dim=dim))


index_copy_p.defvjp(lambda g, out, x, index, src, dim=0: index_fill_p(g, index, 0.0, dim=dim), None,
                    lambda g, out, x, index, src, dim=0: _index_add_src(g, index, src, dim, 1))
index_fill_p.defvjp(lambda g, out, x, index, value, dim=0: index_fill_p(g, index, 0.0, dim=dim), None,
                    lambda g, out, x, index, value, dim=0: _index_fill_value_grad(g, index, value, dim))


def _src_for(op, input, src, index, d):
    src = as_tensor_arg(src, op)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError(f"{op}(): self ({input.dtype}) and source ({src.dtype}) must have the same "
                           "scalar type")
    want = input._data.shape[:d] + (index._data.size,) + input._data.shape[d + 1:] if input._data.ndim else \
        (index._data.size,)
    if src._data.size != int(np.prod(want)) or (src._data.ndim and src._data.ndim != max(input._data.ndim, 1)
                                                  and src._data.shape != want):
        raise RuntimeError(
            f"{op}(): source of shape {list(src.shape)} does not match the expected shape {list(want)} "
            f"(self {list(input.shape)}, index of length {index._data.size}, dim {d})")
    return src


def index_add(input, dim: int, index, source, *, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added at ``index`` along ``dim`` (repeats add up)."""
    index, d = _check_index_1d("index_add", input, dim, index)
    source = _src_for("index_add", input, source, index, d)
    return _bind_light(index_add_p, (input, index, source), {"dim": d, "alpha": alpha}, (0, 2))


def index_copy(input, dim: int, index, source):
    """A copy of ``input`` with ``source``'s slices written at ``index`` along ``dim``."""
    index, d = _check_index_1d("index_copy", input, dim, index)
    source = _src_for("index_copy", input, source, index, d)
    return _bind_light(index_copy_p, (input, index, source), {"dim": d}, (0, 2))


def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """Reduce ``source``'s slices into ``input`` at ``index`` along ``dim`` with ``reduce`` in
    ``"prod" | "mean" | "amax" | "amin"`` (a ``scatter_reduce`` with the index spread over
    the slice).

    >>> dg.ones(2).index_reduce(0, dg.tensor([0, 0]), dg.tensor([2., 3.]), "prod")
    tensor([6., 1.])
    """
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): reduce argument must be one of prod, mean, amax or amin, "
                           f"got {reduce!r}")
    index, d = _check_index_1d("index_reduce", input, dim, index)
    source = _src_for("index_reduce", input, source, index, d)
    shape = [1] * source._data.ndim
    shape[d] = -1
    spread = np.broadcast_to(index._data.reshape(shape), source._data.shape).copy()
    return scatter_reduce(input, d, Tensor._make(spread, False, None, 0), source, reduce,
                          include_self=include_self)


def put(input, index, source, accumulate: bool = False):
    """A copy of ``input`` with ``source`` written (or added) at the flat (row-major)
    positions ``index``, as if ``input`` were 1-D.

    >>> dg.zeros(2, 2).put(dg.tensor([3, 0]), dg.tensor([1., 2.]))
    tensor([[2., 0.],
            [0., 1.]])
    """
    flat = input.reshape(-1)
    source = source if isinstance(source, Tensor) else Tensor._make(np.asarray(source, input._data.dtype), False, None, 0)
    res = index_put(flat, (index.reshape(-1),), source.reshape(-1), accumulate)
    return res.reshape(input.shape)


def index_fill(input, dim: int, index, value):
    """A copy of ``input`` with ``value`` (number or 0-d tensor) at ``index`` along ``dim``."""
    index, d = _check_index_1d("index_fill", input, dim, index)
    value = _fill_value(input, value, "index_fill")
    return _bind_light(index_fill_p, (input, index, value), {"dim": d}, (0, 2))


def _fill_value(input, value, op):
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(
                f"{op} only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s)")
        return value if value._data.dtype == input._data.dtype else value.to(input.dtype)
    if isinstance(value, np.generic):
        return value.item()
    return value


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------

@primitive("masked_fill", save_inputs=True, broadcasts=True, nondiff_argnums=(1,))
def masked_fill_p(x, mask, value):
    v = value if not hasattr(value, "dtype") else value.astype(x.dtype, copy=False)
    return np.where(mask, np.asarray(v, dtype=x.dtype), x)


masked_fill_p.defvjp(lambda g, out, x, mask, value: masked_fill_p(g, mask, 0.0), None,
                     lambda g, out, x, mask, value: masked_fill_p(g, ~mask, 0.0))


def _bcast(op, a, b):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise RuntimeError(f"{op}: shapes {list(a)} and {list(b)} are not broadcastable") from None


def _mask_arg(mask, op):
    mask = as_tensor_arg(mask, op)
    if mask._data.dtype.kind != "b":
        raise RuntimeError(f"{op}: expected BoolTensor for mask, got {mask.dtype}")
    return mask


def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` (broadcast) is True.

    >>> dg.tensor([1., 2., 3.]).masked_fill(dg.tensor([True, False, True]), 0.)
    tensor([0., 2., 0.])
    """
    mask = _mask_arg(mask, "masked_fill")
    value = _fill_value(input, value, "masked_fill")
    return _bind_light(masked_fill_p, (input, mask, value), {}, (0, 2))


def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` is True, as a 1-D tensor (both broadcast)."""
    from ..surface.shape import expand  # noqa: PLC0415

    mask = _mask_arg(mask, "masked_select")
    shape = _bcast("masked_select", input._data.shape, mask._data.shape)
    x = input if input._data.shape == shape else expand(input, shape)
    m = mask if mask._data.shape == shape else expand(mask, shape)
    if not shape:
        x = x.reshape(1)
        m = m.reshape(1)
    if STATE.interpreter is not None:
        concrete(bind(_count_nonzero_p, (m,)), "masked_select: the number of True values decides "
                 "the output size")
    return _bind_light(index_p, (x, m), {"index": (TENSOR,)}, (0,))


def masked_scatter(input, mask, source):
    """A copy of ``input`` with the first elements of ``source`` written where ``mask`` is True."""
    from ..surface.shape import expand  # noqa: PLC0415

    mask = _mask_arg(mask, "masked_scatter")
    shape = _bcast("masked_scatter", input._data.shape, mask._data.shape)
    x = input if input._data.shape == shape else expand(input, shape)
    m = mask if mask._data.shape == shape else expand(mask, shape)
    n = int(concrete(bind(_count_nonzero_p, (m,)), "masked_scatter: the number of True values "
                     "decides how much of source is used"))
    if source._data.size < n:
        raise RuntimeError(f"masked_scatter: expected source to have at least {n} elements (the number of "
                           f"True values in mask), got {source._data.size}")
    vals = _getitem(source.reshape(-1), slice(0, n))
    if source._data.dtype != x._data.dtype:
        vals = vals.to(x.dtype)
    return _bind_light(index_put_p, (x, vals, m), {"index": (TENSOR,), "accumulate": False}, (0, 1))


def take(input, index):
    """Elements of ``input`` viewed as 1-D at positions ``index`` (result has index's shape)."""
    index = _index_tensor(index)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {index.dtype}")
    return _bind_light(index_p, (input.reshape(-1), index), {"index": (TENSOR,)}, (0,))


def take_along_dim(input, indices, dim=None):
    """``gather`` with broadcasting of ``input`` and ``indices`` (flattened when dim is None)."""
    from ..surface.shape import expand  # noqa: PLC0415

    indices = _index_tensor(indices)
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    nd = input._data.ndim
    if indices._data.ndim != nd:
        raise RuntimeError(
            f"take_along_dim(): input and indices should have the same number of dimensions, but got "
            f"{nd} dimensions for input, and {indices._data.ndim} dimensions for indices")
    d = _wrap_dim(dim, nd, "take_along_dim")
    xs, js = list(input._data.shape), list(indices._data.shape)
    bs = list(_bcast("take_along_dim", tuple(xs[:d] + [1] + xs[d + 1:]), tuple(js[:d] + [1] + js[d + 1:])))
    xt = tuple(bs[:d] + [xs[d]] + bs[d + 1:])
    jt = tuple(bs[:d] + [js[d]] + bs[d + 1:])
    x = input if tuple(xs) == xt else expand(input, xt)
    j = indices if tuple(js) == jt else expand(indices, jt)
    return gather(x, d, j)


# ---------------------------------------------------------------------------
# nonzero / sort / topk / kthvalue / unique / searchsorted / one_hot
# ---------------------------------------------------------------------------

@primitive("nonzero", differentiable=False)
def nonzero_p(x):
    return np.argwhere(x).astype(np.int64)


def nonzero(input, *, as_tuple: bool = False):
    """Indices of the non-zero elements: ``(n, ndim)`` int64, or a tuple of 1-D tensors."""
    input = as_tensor_arg(input, "nonzero")
    out = bind(nonzero_p, (input,))
    if STATE.interpreter is not None:
        # the output's size depends on the values: the interpreter decides (a guard
        # on the count under capture); eagerly the primitive already computed it
        concrete(bind(_count_nonzero_p, (input,)), "nonzero: the number of non-zero elements "
                 "decides the output shape")
    if not as_tuple:
        return out
    if input._data.ndim == 0:
        n = int(bool(concrete(input, "nonzero: a 0-d input gives 0 or 1 indices")))
        return (Tensor._make(np.zeros(n, np.int64), False, None, 0),)
    return tuple(_getitem(out, (slice(None), k)) for k in range(input._data.ndim))


def argwhere(input):
    """Indices of the non-zero elements, shape ``(n, input.ndim)``."""
    return nonzero(input)


def _argsort_np(x, dim, descending, stable):
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    n = x.shape[dim]
    flipped = np.flip(x, dim)
    idx = np.flip(np.argsort(flipped, axis=dim, kind="stable"), dim)
    return (n - 1) - idx


@primitive("sort", meta=True, save_output=True, n_outputs=2)
def sort_p(x, dim=-1, descending=False, stable=False):
    x1 = _x1(x)
    idx = _argsort_np(x1, dim, descending, stable)
    vals = np.take_along_axis(x1, idx, axis=dim)
    return vals.reshape(x.shape), idx.astype(np.int64).reshape(x.shape)


def _sort_vjp(g, out, x, dim=-1, descending=False, stable=False):
    return gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim)


sort_p.defvjp(_sort_vjp)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Sorted values and their original indices along ``dim`` (``return_types.sort``).

    NaN sorts as the largest value, as in PyTorch.

    >>> dg.sort(dg.tensor([3., 1., 2.])).indices
    tensor([1, 2, 0])
    """
    input = as_tensor_arg(input, "sort")
    d = _wrap_dim(dim, input._data.ndim, "sort")
    v, i = bind(sort_p, (input,), {"dim": d, "descending": bool(descending), "stable": bool(stable)})
    return _rt.sort(v, i)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Indices that sort ``input`` along ``dim``."""
    return sort(input, dim, descending, stable).indices


def msort(input):
    return sort(input, 0).values


@primitive("topk", meta=True, save_output=True, n_outputs=2)
def topk_p(x, k=1, dim=-1, largest=True, sorted=True):
    x1 = _x1(x)
    idx = _argsort_np(x1, dim, largest, True)
    idx = np.take(idx, np.arange(k), axis=dim)
    vals = np.take_along_axis(x1, idx, axis=dim)
    if x.ndim == 0:
        return vals.reshape(()), idx.astype(np.int64).reshape(())
    return vals, idx.astype(np.int64)


topk_p.defvjp(lambda g, out, x, k=1, dim=-1, largest=True, sorted=True:
              gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim))


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The ``k`` largest (or smallest) values along ``dim`` and their indices (``return_types.topk``).

    >>> dg.topk(dg.tensor([1., 5., 3.]), 2)
    """
    input = as_tensor_arg(input, "topk")
    d = _wrap_dim(dim, input._data.ndim, "topk")
    n = input._data.shape[d] if input._data.ndim else 1
    k = operator.index(k)
    if not 0 <= k <= n:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, size of dimension {d} is {n})")
    v, i = bind(topk_p, (input,), {"k": k, "dim": d, "largest": bool(largest), "sorted": bool(sorted)})
    return _rt.topk(v, i)


@primitive("kthvalue", meta=True, save_output=True, n_outputs=2)
def kthvalue_p(x, k=1, dim=-1):
    """The k-th smallest along ``dim`` (kept as a size-1 dimension) and its index."""
    x1 = _x1(x)
    idx = np.take(np.argsort(x1, axis=dim, kind="stable"), [k - 1], axis=dim)
    vals = np.take_along_axis(x1, idx, axis=dim)
    if x.ndim == 0:
        return vals.reshape(()), idx.astype(np.int64).reshape(())
    return vals, idx.astype(np.int64)


kthvalue_p.defvjp(lambda g, out, x, k=1, dim=-1: gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim))


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest value along ``dim`` and its index (``return_types.kthvalue``)."""
    input = as_tensor_arg(input, "kthvalue")
    d = _wrap_dim(dim, input._data.ndim, "kthvalue")
    n = input._data.shape[d] if input._data.ndim else 1
    k = operator.index(k)
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d} (k={k}, size {n})")
    v, i = bind(kthvalue_p, (input,), {"k": k, "dim": d})
    if not keepdim and input._data.ndim:
        shape = input._data.shape[:d] + input._data.shape[d + 1:]
        v, i = v.reshape(shape), i.reshape(shape)
    return _rt.kthvalue(v, i)


@primitive("unique", differentiable=False, n_outputs=3)
def unique_p(x, dim=None):
    if dim is None:
        vals, inv, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(x.shape)
    else:
        vals, inv, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    return vals, inv.astype(np.int64), counts.astype(np.int64)


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """The distinct values of ``input`` (sorted), optionally with inverse indices and counts.

    >>> dg.unique(dg.tensor([2, 1, 2]), return_counts=True)
    (tensor([1, 2]), tensor([1, 2]))
    """
    input = as_tensor_arg(input, "unique")
    params = {} if dim is None else {"dim": _wrap_dim(dim, input._data.ndim, "unique")}
    vals, inv, counts = bind(unique_p, (input,), params)
    if not return_inverse and not return_counts:
        return vals
    out = (vals,)
    if return_inverse:
        out += (inv,)
    if return_counts:
        out += (counts,)
    return out


@primitive("searchsorted", differentiable=False)
def searchsorted_p(seq, values, right=False, out_int32=False):
    side = "right" if right else "left"
    if seq.ndim <= 1:
        res = np.searchsorted(seq, values, side=side)
    else:
        lead = seq.shape[:-1]
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = values.reshape(s2.shape[0], -1)
        res = np.stack([np.searchsorted(s2[r], v2[r], side=side) for r in range(s2.shape[0])])
        res = res.reshape(lead + values.shape[-1:])
    return np.asarray(res, dtype=np.int32 if out_int32 else np.int64)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,
                 side=None, sorter=None):
    """Insertion indices of ``input`` into ``sorted_sequence`` (innermost dimension).

    >>> dg.searchsorted(dg.tensor([1, 3, 5]), dg.tensor([3, 6]))
    tensor([1, 3])
    """
    seq = as_tensor_arg(sorted_sequence, "searchsorted")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side "
                               "of left while right was True")
        right = side == "right"
    if sorter is not None:
        sorter = as_tensor_arg(sorter, "searchsorted")
        seq = gather(seq, -1, sorter) if seq._data.ndim else seq
    scalar = not isinstance(input, Tensor)
    vals = as_tensor_arg(input, "searchsorted")
    if seq._data.ndim > 1 and seq._data.shape[:-1] != vals._data.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
            f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(seq.shape)} and input value tensor {list(vals.shape)}")
    out = bind(searchsorted_p, (seq, vals), {"right": bool(right), "out_int32": bool(out_int32)})
    return out.reshape(()) if scalar and out._data.ndim else out


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """Bucket index of each element of ``input`` for the 1-D ``boundaries``
    (``right=False``: ``boundaries[i-1] < x <= boundaries[i]``)."""
    boundaries = as_tensor_arg(boundaries, "bucketize")
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    vals = as_tensor_arg(input, "bucketize")
    return bind(searchsorted_p, (boundaries, vals), {"right": bool(right), "out_int32": bool(out_int32)})


@primitive("one_hot", differentiable=False)
def one_hot_p(x, num_classes=-1):
    out = np.zeros(x.shape + (num_classes,), np.int64)
    np.put_along_axis(out, x[..., None], 1, axis=-1)
    return out


def one_hot(tensor, num_classes: int = -1):
    """int64 class indices -> int64 one-hot rows (``num_classes=-1``: max + 1).

    >>> dg.one_hot(dg.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    tensor = as_tensor_arg(tensor, "one_hot")
    d = tensor._data
    if d.dtype != np.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (got {tensor.dtype})")
    if num_classes == -1:
        if d.size == 0:
            raise RuntimeError("one_hot: Can not infer total number of classes from empty tensor.")
        num_classes = int(concrete(tensor, "one_hot: num_classes=-1 counts the classes (max + 1)").max()) + 1
    if d.size:
        if int(d.min()) < 0:
            raise RuntimeError("one_hot: Class values must be non-negative.")
        if int(d.max()) >= num_classes:
            raise RuntimeError(f"one_hot: Class values must be smaller than num_classes ({num_classes}); "
                               f"got {int(d.max())}.")
    return bind(one_hot_p, (tensor,), {"num_classes": int(num_classes)})


# ---------------------------------------------------------------------------
# in-place forms and Tensor methods
# ---------------------------------------------------------------------------

def _inplace(fn, name):
    def method(self, *args, **kwargs):
        return apply_inplace(self, lambda s: fn(s, *args, **kwargs), name)

    method.__name__ = name
    method.__doc__ = f"In-place form of ``{fn.__name__}`` (autograd-aware, bumps the version counter)."
    return method


def masked_fill_(self, mask, value):
    """In place: ``value`` where ``mask`` is True (mask broadcasts to ``self``)."""
    mask = _mask_arg(mask, "masked_fill_")
    if not STATE.grad_enabled or not (self._rg or (isinstance(value, Tensor) and value._rg)):
        if STATE.interpreter is None:
            _check_target(self, "masked_fill_")
            try:
                m = np.broadcast_to(mask._data, self._data.shape)
            except ValueError:
                raise RuntimeError(
                    f"masked_fill_: the mask of shape {list(mask.shape)} must be broadcastable to the "
                    f"tensor of shape {list(self.shape)}") from None
            v = value.item() if isinstance(value, Tensor) else value
            if not self._data.flags.writeable:
                self._data = self._data.copy()
            self._data[m] = v
            bump_version(self)
            return self
    return apply_inplace(self, lambda s: masked_fill(s, mask, value), "masked_fill_")


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


def _scatter_method(self, dim, index, src=None, *, value=None, reduce=None):
    return scatter(self, dim, index, src, value=value, reduce=reduce)


def _index_fill_(self, dim, index, value):
    return apply_inplace(self, lambda s: index_fill(s, dim, index, value), "index_fill_")


install({
    "__getitem__": _getitem, "__setitem__": _setitem,
    "index_put": lambda self, indices, values, accumulate=False: index_put(self, indices, values, accumulate),
    "index_put_": index_put_,
    "gather": _method(gather), "scatter": _scatter_method, "scatter_add": _method(scatter_add),
    "scatter_reduce": _method(scatter_reduce),
    "scatter_": _inplace(_scatter_method, "scatter_"),
    "scatter_add_": _inplace(scatter_add, "scatter_add_"),
    "scatter_reduce_": _inplace(scatter_reduce, "scatter_reduce_"),
    "index_select": _method(index_select), "index_add": _method(index_add),
    "index_copy": _method(index_copy), "index_fill": _method(index_fill),
    "index_add_": _inplace(index_add, "index_add_"), "index_copy_": _inplace(index_copy, "index_copy_"),
    "index_fill_": _index_fill_, "index_reduce": _method(index_reduce),
    "put": _method(put), "put_": _inplace(put, "put_"),
    "index_reduce_": _inplace(index_reduce, "index_reduce_"),
    "masked_fill": _method(masked_fill), "masked_fill_": masked_fill_,
    "masked_select": _method(masked_select), "masked_scatter": _method(masked_scatter),
    "masked_scatter_": _inplace(masked_scatter, "masked_scatter_"),
    "take": _method(take), "take_along_dim": _method(take_along_dim),
    "nonzero": _method(nonzero), "argwhere": _method(argwhere),
    "sort": _method(sort), "argsort": _method(argsort), "msort": _method(msort),
    "topk": _method(topk), "kthvalue": _method(kthvalue), "unique": _method(unique),
    "bucketize": _method(bucketize),
})

_ = _dt


def fill_diagonal_(self, fill_value, wrap: bool = False):
    """Write ``fill_value`` on the main diagonal in place (all dims equal when ndim > 2;
    for a tall matrix ``wrap=True`` restarts the diagonal every ``ncols + 1`` rows).

    >>> dg.zeros(2, 3).fill_diagonal_(1.0)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    shape = self._data.shape
    if self.ndim < 2 or (self.ndim > 2 and len(set(shape)) != 1):
        raise RuntimeError(
            f"fill_diagonal_: dimensions must be at least 2 and all of equal length when more "
            f"than 2, got a tensor of shape {list(shape)}")
    mask = np.zeros(shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return masked_fill_(self, Tensor._make(mask, False, None, 0), fill_value)


install({"fill_diagonal_": fill_diagonal_})


@primitive("isin", differentiable=False)
def isin_p(elements, test_elements, invert=False):
    return np.isin(elements, test_elements, invert=invert)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Bool tensor: is each of ``elements`` in ``test_elements``? (either may be a number)

    >>> dg.isin(dg.tensor([1, 2, 3]), dg.tensor([2, 5]))
    tensor([False,  True, False])
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")
    from ..creation import tensor as _tensor  # noqa: PLC0415

    el = elements if isinstance(elements, Tensor) else _tensor(elements)
    te = test_elements if isinstance(test_elements, Tensor) else _tensor(test_elements)
    return bind(isin_p, (el, te), {"invert": bool(invert)})


@primitive("bincount", differentiable=False)
def bincount_p(x, weights=None, minlength=0):
    if weights is None:
        return np.bincount(x, minlength=minlength).astype(np.int64)
    return np.bincount(x, weights=weights, minlength=minlength).astype(weights.dtype)


def bincount(input, weights=None, minlength: int = 0):
    """Count occurrences of each value in a 1-D tensor of non-negative ints (summing
    ``weights`` instead of ones when given); length ``max(max(input) + 1, minlength)``.

    >>> dg.bincount(dg.tensor([0, 2, 2]), minlength=4)
    tensor([1, 0, 2, 0])
    """
    x = as_tensor_arg(input, "bincount")
    d = concrete(x, "bincount: the output length is max(input) + 1")
    if d.ndim != 1 or d.dtype.kind not in "iu" or (d.size and d.min() < 0):
        raise RuntimeError(
            f"bincount only supports 1-d non-negative integral inputs, got shape {list(x.shape)} "
            f"dtype {x.dtype}")
    if weights is not None:
        weights = as_tensor_arg(weights, "bincount")
        if weights.shape != x.shape:
            raise RuntimeError(f"bincount: weights {list(weights.shape)} and input {list(x.shape)} "
                               "should have the same length")
        return bind(bincount_p, (x, weights), {"minlength": int(minlength)})
    return bind(bincount_p, (x,), {"minlength": int(minlength)})


install({"isin": isin, "bincount": bincount})


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The ``q``-th quantiles of ``input`` along ``dim`` (all elements when None).

    ``q`` is a number or a 1-D tensor of numbers in [0, 1]; with a tensor, the quantiles
    form a new leading dimension.  Built from ``sort`` and ``index_select``, so it is
    differentiable; a slice holding NaN gives NaN, as in PyTorch.

    >>> dg.quantile(dg.tensor([1., 2., 3., 4.]), 0.5)
    tensor(2.5000)
    """
    from ..creation import from_numpy  # noqa: PLC0415
    from ..surface.elementwise import where  # noqa: PLC0415
    from ..surface.shape import movedim, reshape  # noqa: PLC0415

    x = as_tensor_arg(input, "quantile")
    if x._data.dtype.kind != "f":
        raise RuntimeError(f"quantile() input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_QUANTILE_MODES)}. "
                         f"Got '{interpolation}'")
    scalar_q = not isinstance(q, Tensor)
    qs = np.atleast_1d(np.asarray(concrete(q, "quantile: q values become positions")
                                  if isinstance(q, Tensor) else q, dtype=np.float64))
    if qs.ndim > 1:
        raise RuntimeError(f"quantile() q must be a scalar or 1D tensor, got shape {list(qs.shape)}")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    shape = tuple(x.shape)
    if dim is None:
        flat, d = reshape(x, -1), 0
    else:
        d = _wrap_dim(dim, max(x.ndim, 1), "quantile")
        flat = x if x.ndim else reshape(x, 1)
    rows = movedim(flat, d, -1)                                 # (..., n)
    n = rows.shape[-1]
    if n == 0:
        raise IndexError("quantile() input tensor must be non-empty")
    srt = sort(rows, -1).values
    pos = qs * (n - 1)
    lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    elif interpolation == "nearest":
        lo = hi = np.round(pos).astype(np.int64)
    v_lo = index_select(srt, -1, from_numpy(lo))              # (..., len(q))
    v_hi = index_select(srt, -1, from_numpy(hi))
    if interpolation == "midpoint":
        out = v_lo + (v_hi - v_lo) * 0.5
    elif interpolation == "linear":
        frac = (pos - lo).astype(x._data.dtype)
        out = v_lo + (v_hi - v_lo) * Tensor._make(frac, False, None, 0)
    else:
        out = v_lo
    if np.isnan(concrete(rows, "quantile: NaN rows give NaN")).any():
        out = where(rows.isnan().any(-1, keepdim=True), float("nan"), out)
    out = movedim(out, -1, 0)                                   # (len(q), ...)
    if keepdim:
        kept = [1] * len(shape) if dim is None else [1 if i == d else s for i, s in enumerate(shape)]
        out = reshape(out, len(qs), *kept)
    return reshape(out, tuple(out.shape[1:])) if scalar_q else out


install({"quantile": quantile})


@primitive("histc", differentiable=False)
def histc_p(x, bins=100, min=0.0, max=0.0):
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    counts, _ = np.histogram(x, bins=bins, range=(lo, hi))
    return counts.astype(x.dtype)


def histc(input, bins: int = 100, min: float = 0, max: float = 0):
    """Histogram with ``bins`` equal-width bins over [min, max] (the data's range when
    ``min == max``); values outside are ignored.

    >>> dg.histc(dg.tensor([1., 2., 1.]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    x = as_tensor_arg(input, "histc")
    if x._data.dtype.kind != "f":
        raise RuntimeError(f"histc: expected a floating point tensor, got {x.dtype}")
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, got {bins}")
    if max < min:
        raise RuntimeError(f"histc: max must be larger than min, got min={min} max={max}")
    return bind(histc_p, (x,), {"bins": int(bins), "min": float(min), "max": float(max)})


@primitive("unique_consecutive", n_outputs=3, differentiable=False)
def unique_consecutive_p(x, dim=None):
    if dim is None:
        flat = x.reshape(-1)
        change = np.ones(flat.shape[0], dtype=bool)
        change[1:] = flat[1:] != flat[:-1]
        values = flat[change]
        inverse = (np.cumsum(change) - 1).reshape(x.shape)
    else:
        moved = np.moveaxis(x, dim, 0)
        rows = moved.reshape(moved.shape[0], -1)
        change = np.ones(rows.shape[0], dtype=bool)
        change[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        values = np.moveaxis(moved[change], 0, dim)
        inverse = np.cumsum(change) - 1
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, change.shape[0]))
    return values, inverse.astype(np.int64), counts.astype(np.int64)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse runs of equal consecutive elements (or slices along ``dim``), like
    ``itertools.groupby``; optionally the run index of each input element and run lengths.

    >>> dg.unique_consecutive(dg.tensor([1, 1, 2, 2, 3, 1]))
    tensor([1, 2, 3, 1])
    """
    x = as_tensor_arg(input, "unique_consecutive")
    d = None if dim is None else _wrap_dim(dim, x.ndim, "unique_consecutive")
    values, inverse, counts = bind(unique_consecutive_p, (x,), {"dim": d})
    if not return_inverse and not return_counts:
        return values
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out


install({"histc": histc, "unique_consecutive": unique_consecutive})


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_indexing():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415

    R["getitem"].defbatch(b.getitem_rule)
    for name in ("gather", "scatter", "scatter_add", "scatter_reduce"):
        R[name].defbatch(b.gather_like)
    R["index_select"].defbatch(b.index_select_rule)
    for name in ("index_add", "index_copy", "index_fill"):
        R[name].defbatch(b.index_update_rule)
    R["masked_fill"].defbatch(b.elementwise)
    for name in ("sort", "topk", "kthvalue"):
        R[name].defbatch(b.shift_dim)
    R["index"].defbatch(b.index_rule, eager_if=b.bool_index_shape)
    R["index_put"].defbatch(fallback="advanced indexing with per-member index tensors")
    R["isin"].defbatch(fallback="per-member test sets")
    R["searchsorted"].defbatch(fallback="per-member sorted sequences")
    for name in ("getitem_backward", "index_backward", "gather_backward", "index_select_backward"):
        R[name].defbatch(fallback=b.BACKWARD_ONLY)
    for name in ("nonzero", "unique", "unique_consecutive", "bincount", "one_hot", "histc"):
        R[name].defbatch(eager="the output shape (or range) depends on the values")


_defbatch_indexing()
