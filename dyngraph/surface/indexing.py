"""The PyTorch surface of indexing: ``x[idx]``, ``x[idx] = v``, gather/scatter, ``index_*``,
masks, ``nonzero``, ``one_hot``, ``bincount``...

The primitives (forward, rules, save spec) and the index-spec design are in
:mod:`dyngraph.ops.indexing`; this module parses index expressions, checks arguments and
calls :func:`bind`.  ``x[idx] = v`` is the ``index_put`` primitive applied through
:func:`dyngraph.surface.inplace.apply_inplace`.  :mod:`dyngraph.surface.methods` attaches the
Tensor methods (``__getitem__``, ``__setitem__``, ``gather``...).
"""

from __future__ import annotations

import operator

import numpy as np

from .._core.graph import Meta, bump_version
from .._core.registry import LOOPS as _LOOPS
from .._core.state import STATE, concrete
from ..creation import tensor as _tensor
from ..ops.indexing import (
    TENSOR,
    _split,
    bincount_p,
    histc_p,
    index_add_p,
    index_copy_p,
    index_fill_p,
    index_p,
    index_put_p,
    index_select_p,
    isin_p,
    masked_fill_p,
    nonzero_p,
    one_hot_p,
    scatter_add_p,
    scatter_p,
    scatter_reduce_p,
)
from ..ops.reduction import count_nonzero_p as _count_nonzero_p
from ..ops.registry import bind
from ..ops.structural import _torch_msg, gather_p, getitem_p
from ..tensor import Tensor, _wrap_dim
from ._args import as_tensor_arg
from .inplace import _check_target, apply_inplace
from .shape import expand

__all__ = [
    "index_put", "gather", "scatter", "scatter_add", "scatter_reduce", "index_select",
    "index_add", "index_copy", "index_fill", "index_reduce", "put", "masked_fill",
    "masked_select", "masked_scatter", "take", "take_along_dim", "nonzero", "argwhere",
    "one_hot", "isin", "bincount", "histc",
]


_FULL = (None, None, None)


_INDEX_KINDS = "iub"


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


def _bind_light(prim, args, params, light):
    """``bind``, then let the node keep only the shape of the inputs in ``light``:
    their values are not read by the rules, so they are neither kept alive nor
    version-checked (``y = h[i]; h[j] = 0; y.backward()`` is fine, as in PyTorch).
    Only for ``gather`` (ops/structural.py); the primitives of ops/indexing.py declare
    the same with ``@primitive(light=...)``, which the node builders (C and Python) apply."""
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
    if type(idx) is slice and idx.step is None:
        # x[a:b] with int/None bounds: the spec parse_index builds, without its loop
        start, stop = idx.start, idx.stop
        if (start is None or type(start) is int) and (stop is None or type(stop) is int):
            return bind(getitem_p, (self,), {"index": ((start, stop, None),)})
    if type(idx) is Tensor and idx._data.dtype.kind == "i" and self._data.ndim:
        # h[src] with an integer index tensor: what parse_index and _check_index_dims make of it
        return bind(index_p, (self, idx), {"index": (TENSOR,)})
    spec, tensors = parse_index(idx)
    if not tensors:
        return bind(getitem_p, (self,), {"index": spec})
    _check_index_dims(self, spec, tensors)
    return bind(index_p, (self, *tensors), {"index": spec})


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
    return bind(index_put_p, (input, values, *tensors),
                {"index": spec, "accumulate": bool(accumulate)})


def _assign(self, spec, tensors, value, accumulate, op):
    """Write ``value`` into ``self[spec]`` in place (autograd-aware)."""
    value = _value_operand(self, value, op)
    if STATE.interpreter is not None or (STATE.grad_enabled and (
            self._rg or (isinstance(value, Tensor) and value._rg))):
        params = {"index": spec, "accumulate": accumulate}
        return apply_inplace(
            self, lambda s: bind(index_put_p, (s, value, *tensors), params), op)
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


# _speedups.gather_check (set up with the fast surfaces of surface/shape.py), or None
_GATHER_CHECK = getattr(_LOOPS, "gather_check", None)


def _all_below(ia, n) -> bool:
    """Whether every entry of the integer array ``ia`` is in ``[0, n)``, in one reduction: seen
    as unsigned, a negative entry is above any ``n`` (False means: look closer)."""
    if type(ia) is not np.ndarray or ia.dtype.kind != "i":
        return False
    if _LOOPS is not None:   # the accelerator's loop (int64/int32, any strides), else None
        below = _LOOPS.index_below(ia, n)
        if below is not None:
            return below
    return int(np.maximum.reduce(ia.view(ia.dtype.str.replace("i", "u")), axis=None)) < n


def _check_gather_like(op, input, dim, index, src=None):
    if _GATHER_CHECK is not None:
        # the accelerator's copy of the first branch below (NotImplemented: not that case)
        d = _GATHER_CHECK(input, dim, index, src)
        if d is not NotImplemented:
            return index, d
    if type(index) is Tensor and type(dim) is int:
        # the usual call (an integer index of the input's rank, within its sizes and the
        # source's, every entry in range): what the checks below accept, in one pass
        ia = index._data
        ish, xsh = ia.shape, input._data.shape
        nd = len(xsh)
        if nd and len(ish) == nd and -nd <= dim < nd and ia.dtype.kind == "i":
            d = dim + nd if dim < 0 else dim
            ssh = src._data.shape if isinstance(src, Tensor) else None
            if ssh is not None and len(ssh) != nd:
                ssh = None
            for k in range(nd):
                if (k != d and ish[k] > xsh[k]) or (ssh is not None and ish[k] > ssh[k]):
                    break
            else:
                if not ia.size or _all_below(ia, xsh[d]):
                    return index, d
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
        if _all_below(ia, n):
            return index, d
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
    return bind(scatter_p, (input, index, src), {"dim": d})


def scatter_add(input, dim: int, index, src):
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index`` (repeats accumulate)."""
    src = _scatter_src(input, src, None, "scatter_add")
    index, d = _check_gather_like("scatter_add", input, dim, index, src)
    return bind(scatter_add_p, (input, index, src), {"dim": d})


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
    if index._data.size and not _all_below(index._data, n):
        lo, hi = int(index._data.min()), int(index._data.max())
        bad = hi if hi >= n else (lo if lo < -n else None)
        if bad is not None:
            raise IndexError(f"{op}(): index {bad} is out of bounds for dimension {d} with size {n}")
    return index, d


def index_select(input, dim: int, index):
    """The slices of ``input`` at positions ``index`` (1-D) along ``dim``.

    >>> dg.index_select(dg.tensor([[1., 2.], [3., 4.]]), 0, dg.tensor([1, 1]))
    tensor([[3., 4.],
            [3., 4.]])
    """
    index, d = _check_index_1d("index_select", input, dim, index)
    out = bind(index_select_p, (input, index), {"dim": d})
    return out


def _src_for(op, input, src, index, d):
    src = as_tensor_arg(src, op)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError(f"{op}(): self ({input.dtype}) and source ({src.dtype}) must have the same "
                           "scalar type")
    want = input._data.shape[:d] + (index._data.size,) + input._data.shape[d + 1:] if input._data.ndim else \
        (index._data.size,)
    if src._data.shape == want:  # the common case: nothing more to check
        return src
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
    return bind(index_add_p, (input, index, source), {"dim": d, "alpha": alpha})


def index_copy(input, dim: int, index, source):
    """A copy of ``input`` with ``source``'s slices written at ``index`` along ``dim``."""
    index, d = _check_index_1d("index_copy", input, dim, index)
    source = _src_for("index_copy", input, source, index, d)
    return bind(index_copy_p, (input, index, source), {"dim": d})


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
    return bind(index_fill_p, (input, index, value), {"dim": d})


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
    return bind(masked_fill_p, (input, mask, value), {})


def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` is True, as a 1-D tensor (both broadcast)."""
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
    return bind(index_p, (x, m), {"index": (TENSOR,)})


def masked_scatter(input, mask, source):
    """A copy of ``input`` with the first elements of ``source`` written where ``mask`` is True."""
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
    return bind(index_put_p, (x, vals, m), {"index": (TENSOR,), "accumulate": False})


def take(input, index):
    """Elements of ``input`` viewed as 1-D at positions ``index`` (result has index's shape)."""
    index = _index_tensor(index)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {index.dtype}")
    return bind(index_p, (input.reshape(-1), index), {"index": (TENSOR,)})


def take_along_dim(input, indices, dim=None):
    """``gather`` with broadcasting of ``input`` and ``indices`` (flattened when dim is None)."""
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


def _inplace(fn, name):
    def method(self, *args, **kwargs):
        return apply_inplace(self, fn, name, args, kwargs)

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


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Bool tensor: is each of ``elements`` in ``test_elements``? (either may be a number)

    >>> dg.isin(dg.tensor([1, 2, 3]), dg.tensor([2, 5]))
    tensor([False,  True, False])
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")

    el = elements if isinstance(elements, Tensor) else _tensor(elements)
    te = test_elements if isinstance(test_elements, Tensor) else _tensor(test_elements)
    return bind(isin_p, (el, te), {"invert": bool(invert)})


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


