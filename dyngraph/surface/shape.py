"""The PyTorch surface of shape operations: ``reshape``/``view``, ``expand``, ``permute``,
``cat``/``stack``/``split``, ``flip``/``roll``/``pad``... and their argument parsing.

The primitives (forward, rules, save spec, view marks) are in :mod:`dyngraph.ops.shape`;
:mod:`dyngraph.surface.methods` attaches the Tensor methods.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as _dt
from .._core.graph import bump_version
from .._core.registry import LOOPS as _LOOPS
from .._core.registry import mark_views as _mark_views_c
from .._core.state import STATE, concrete
from ..creation import from_numpy, zeros
from ..ops.registry import bind
from ..ops.shape import (
    cat_p,
    clone_p,
    flip_p,
    pad_p,
    repeat_interleave_p,
    repeat_p,
    roll_p,
    split_p,
    stack_p,
    unbind_p,
)
from ..ops.structural import expand_p, getitem_p, permute_p, reshape_p
from ..size import Size
from ..tensor import Tensor, _wrap_dim
from ._args import normalize_dims
from .inplace import _check_target

__all__ = [
    "reshape", "expand", "broadcast_to", "permute", "transpose", "swapaxes", "swapdims", "t",
    "squeeze", "unsqueeze", "flatten", "unflatten", "ravel", "cat", "concat", "concatenate",
    "stack", "hstack", "vstack", "row_stack", "dstack", "column_stack", "split", "chunk", "unbind",
    "tensor_split", "hsplit", "vsplit", "dsplit", "narrow_copy", "flip", "fliplr", "flipud", "roll", "tile",
    "repeat_interleave", "pad", "clone", "movedim", "moveaxis", "narrow", "select", "meshgrid",
    "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "diff",
    "broadcast_shapes", "block_diag", "rot90", "cartesian_prod", "combinations",
]


def _fast_surfaces():
    """The C accelerator's fast surfaces (``_speedups.unsqueeze/view/expand/cat/stack/chunk``),
    or None (pure Python, an extension built before them, or a NumPy whose flags probe fails).

    Each does the common case of the function below that calls it -- the same checks on the
    array fields, then the same ``bind`` call with equal params, so the nodes are those of
    the Python code -- and returns NotImplemented for anything else (nothing has run then);
    the Python code that follows stays the reference and raises the errors.
    """
    if _LOOPS is None or not hasattr(_LOOPS, "surface_setup"):
        return None
    probe = np.zeros((2, 3), np.float32)
    if not _LOOPS.surface_setup(reshape_p, expand_p, cat_p, stack_p, split_p, probe, probe.T,
                                np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)):
        return None
    return _LOOPS


_C = _fast_surfaces()
_NI = NotImplemented
# the functions themselves (a global each: no module attribute look-up per call)
_C_UNSQUEEZE, _C_VIEW, _C_EXPAND, _C_CAT, _C_STACK, _C_CHUNK = (
    (_C.unsqueeze, _C.view, _C.expand, _C.cat, _C.stack, _C.chunk) if _C is not None else (None,) * 6)


def _infer_shape(shape, numel: int, op: str) -> tuple:
    # map/math.prod instead of generator loops: this runs on every view/reshape call
    if len(shape) == 1 and type(shape[0]) is int and (shape[0] == -1 or shape[0] == numel):
        return (numel,)                                    # x.view(-1), x.reshape(n): flat
    shape = tuple(map(int, shape))
    if -1 in shape:
        i = shape.index(-1)
        if -1 in shape[i + 1:]:
            raise RuntimeError(f"{op}: only one dimension can be inferred (got shape {list(shape)})")
        rest = math.prod(shape[:i]) * math.prod(shape[i + 1:])
        if rest == 0 or numel % rest:
            raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:i] + (numel // rest,) + shape[i + 1:]
    if math.prod(shape) != numel:
        raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        return tuple(shape[0])
    return tuple(map(int, shape))


def reshape(input, *shape):
    """A tensor with the same data and a new shape (one dimension may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = shape[0]
    shape = _infer_shape(shape, input._data.size, "reshape")
    if shape == input._data.shape:
        return bind(reshape_p, (input,), {"shape": shape}) if input._rg else _alias(input)
    return bind(reshape_p, (input,), {"shape": shape})


def _alias(t: Tensor) -> Tensor:
    return bind(reshape_p, (t,), {"shape": t._data.shape})


def expand(input, *sizes):
    """Broadcast to a larger shape without copying (-1 keeps a dimension)."""
    if _C_EXPAND is not None:
        r = _C_EXPAND(input, sizes)
        if r is not _NI:
            return r
    old = input._data.shape
    if len(sizes) == len(old):
        # the usual call (int sizes, one per dimension): what the loop below accepts
        shape = []
        for s, o in zip(sizes, old):
            if type(s) is not int:
                break
            if s == -1:
                s = o
            elif o != 1 and o != s:
                break
            shape.append(s)
        else:
            return bind(expand_p, (input,), {"shape": tuple(shape)})
    sizes = _shape_args(sizes)
    if len(sizes) < len(old):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(old)})")
    lead = len(sizes) - len(old)
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = old[i - lead]
        elif i >= lead and old[i - lead] not in (1, s):
            raise RuntimeError(
                f"expand: the expanded size of the tensor ({s}) must match the existing size "
                f"({old[i - lead]}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(old)}")
        shape.append(s)
    return bind(expand_p, (input,), {"shape": tuple(shape)})


def broadcast_to(input, shape):
    return expand(input, tuple(shape))


def expand_as(input, other):
    return expand(input, tuple(other.shape))


def permute(input, *dims):
    """Reorder dimensions: ``x.permute(2, 0, 1)``."""
    dims = _shape_args(dims)
    n = input._data.ndim
    if len(dims) != n:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal "
            f"to len(dims) = {len(dims)}")
    dims = tuple(_wrap_dim(d, n, "permute") for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError(f"permute: repeated dim in {list(dims)}")
    return bind(permute_p, (input,), {"dims": dims})


def transpose(input, dim0: int, dim1: int):
    """Swap two dimensions."""
    n = input._data.ndim
    if n == 0:
        return _alias(input)
    d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return bind(permute_p, (input,), {"dims": tuple(dims)})


swapaxes = swapdims = transpose


def t(input):
    """Transpose a matrix (0-d and 1-d tensors are returned as they are)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    return transpose(input, 0, 1) if input._data.ndim == 2 else _alias(input)


def _reshape_method(self, *shape):
    return reshape(self, *shape)


def _view_method(self, *shape):
    """``x.view(*shape)`` (a view; PyTorch's error when the strides do not allow one) or
    ``x.view(dtype)`` (reinterpret the bytes, not differentiable)."""
    if shape and type(shape[0]) is int:
        # x.view(a, b, ...) on a C-contiguous tensor (the usual call): always a view
        if _C_VIEW is not None:
            r = _C_VIEW(self, shape)
            if r is not _NI:
                return r
        d = self._data
        if d.flags.c_contiguous:
            return bind(reshape_p, (self,), {"shape": _infer_shape(shape, d.size, "view")})
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list, Size, np.integer)):
        np_dt = _dt.to_numpy_dtype(shape[0])
        if np_dt == self._data.dtype:
            return _alias(self)
        if self._data.ndim == 0 and np_dt.itemsize != self._data.itemsize:
            raise RuntimeError("self.dim() cannot be 0 to view a tensor as a dtype of different size")
        # a bit-level reinterpretation outside primitives: the values are guarded
        return Tensor._make(concrete(self, "view(dtype): reinterpreting the bits").view(np_dt),
                            False, None, 0)
    if not self._data.flags.c_contiguous and self._data.size > 1:
        target = _infer_shape(_shape_args(shape), self._data.size, "view")
        try:
            self._data.reshape(target, copy=False)
        except TypeError:       # array libraries without reshape(copy=...): reshape semantics
            pass
        except ValueError:
            raise RuntimeError(
                f"view size is not compatible with input tensor's size and stride (at least one "
                f"dimension spans across two contiguous subspaces): tensor of shape "
                f"{list(self.shape)} with strides {list(self.stride())} cannot be viewed as "
                f"{list(target)}. Use .reshape(...) instead.") from None
    return reshape(self, *shape)


def _T(self):
    n = self._data.ndim
    return bind(permute_p, (self,), {"dims": tuple(range(n - 1, -1, -1))}) if n >= 2 else self


def _mT(self):
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(self, -2, -1)


def squeeze(input, dim=None):
    """Remove dimensions of size 1 (all of them, or those in ``dim``: an int or a tuple).

    >>> dg.zeros(2, 1, 3).squeeze(1).shape
    dyngraph.Size([2, 3])
    """
    shape = input._data.shape
    if type(dim) is int:
        # one dimension (the usual call): wrapped here, the checks of normalize_dims otherwise
        n = len(shape)
        if -n <= dim < n:
            d = dim + n if dim < 0 else dim
            new = shape[:d] + shape[d + 1:] if shape[d] == 1 else shape
            return bind(reshape_p, (input,), {"shape": new})
    if dim is None:
        new = tuple(s for s in shape if s != 1)
    else:
        dims = normalize_dims(dim, len(shape), "squeeze")
        new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return bind(reshape_p, (input,), {"shape": new})


def unsqueeze(input, dim: int):
    """Insert a dimension of size 1 at ``dim`` (``-1`` appends).

    >>> dg.zeros(2, 3).unsqueeze(-1).shape
    dyngraph.Size([2, 3, 1])
    """
    if _C_UNSQUEEZE is not None:
        r = _C_UNSQUEEZE(input, dim)
        if r is not _NI:
            return r
    shape = input._data.shape
    n = len(shape) + 1
    if type(dim) is int and -n <= dim < n:      # _wrap_dim's check, inline (the usual call)
        d = dim + n if dim < 0 else dim
    else:
        d = _wrap_dim(dim, n, "unsqueeze")
    return bind(reshape_p, (input,), {"shape": shape[:d] + (1,) + shape[d:]})


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    """Merge dimensions ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-d).

    >>> dg.zeros(2, 3, 4).flatten(1).shape
    dyngraph.Size([2, 12])
    """
    shape = input._data.shape
    if not shape:
        _wrap_dim(start_dim, 1, "flatten")  # a 0-d tensor accepts dims -1 and 0
        _wrap_dim(end_dim, 1, "flatten")
        return bind(reshape_p, (input,), {"shape": (1,)})
    s = _wrap_dim(start_dim, len(shape), "flatten")
    e = _wrap_dim(end_dim, len(shape), "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    n = 1
    for v in shape[s:e + 1]:
        n *= v
    return bind(reshape_p, (input,), {"shape": shape[:s] + (n,) + shape[e + 1:]})


def ravel(input):
    """The elements as a 1-D tensor."""
    return bind(reshape_p, (input,), {"shape": (input._data.size,)})


def unflatten(input, dim: int, sizes):
    """Split dimension ``dim`` into ``sizes`` (one entry may be -1).

    >>> dg.zeros(2, 12).unflatten(1, (3, 4)).shape
    dyngraph.Size([2, 3, 4])
    """
    shape = input._data.shape
    d = _wrap_dim(dim, len(shape), "unflatten")
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    try:
        inner = _infer_shape(sizes, shape[d], "unflatten")
    except RuntimeError:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
            f"({shape[d]}) in the input tensor") from None
    return bind(reshape_p, (input,), {"shape": shape[:d] + inner + shape[d + 1:]})


def movedim(input, source, destination):
    """Move dimension(s) ``source`` to position(s) ``destination`` (a view)."""
    n = input._data.ndim
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the "
            f"same number of dims as destination ({list(dst)} dims)")
    src = tuple(_wrap_dim(d, n, "movedim") for d in src)
    dst = tuple(_wrap_dim(d, n, "movedim") for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in source {list(src)} or destination {list(dst)}")
    if n == 0:
        return _alias(input)
    order = [None] * n
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = tuple(o if o is not None else next(rest) for o in order)
    return bind(permute_p, (input,), {"dims": order})


moveaxis = movedim


def narrow(input, dim: int, start, length: int):
    """The slice ``start:start+length`` of dimension ``dim`` (a view)."""
    shape = input._data.shape
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, len(shape), "narrow")
    start = int(start.item()) if isinstance(start, Tensor) else int(start)
    n = shape[d]
    if not -n <= start <= n:
        raise IndexError(f"narrow(): start ({start}) is out of bounds for dimension {d} with size {n}")
    if start < 0:
        start += n
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return bind(getitem_p, (input,), {"index": ((None, None, None),) * d + ((start, start + length, None),)})


def select(input, dim: int, index: int):
    """The slice at position ``index`` of dimension ``dim``, which is removed (a view)."""
    shape = input._data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, len(shape), "select")
    index = int(index)
    if not -shape[d] <= index < shape[d]:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(shape)} at dimension {d}")
    return bind(getitem_p, (input,), {"index": ((None, None, None),) * d + (index,)})


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (0-d becomes shape ``(1,)``)."""
    return _atleast(tensors, lambda s: (1,) if not s else s)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions (``(n,)`` becomes ``(1, n)``)."""
    return _atleast(tensors, lambda s: (1, 1) if not s else ((1,) + s if len(s) == 1 else s))


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions (``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``)."""
    def grow(s):
        if len(s) == 0:
            return (1, 1, 1)
        if len(s) == 1:
            return (1, s[0], 1)
        if len(s) == 2:
            return s + (1,)
        return s

    return _atleast(tensors, grow)


def _atleast(tensors, grow):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = []
    for x in tensors:
        s = x._data.shape
        g = grow(s)
        out.append(x if g == s else bind(reshape_p, (x,), {"shape": g}))
    return out[0] if single else tuple(out)


def meshgrid(*tensors, indexing: str | None = None):
    """Coordinate grids from 1-D tensors (``indexing='ij'``, the default, or ``'xy'``).

    >>> a, b = dg.meshgrid(dg.tensor([1, 2]), dg.tensor([3, 4, 5]), indexing="ij")
    >>> a.shape
    dyngraph.Size([2, 3])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    indexing = indexing or "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for k, t_ in enumerate(tensors):
        if t_._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: "
                               f"tensor {k} of shape {list(t_.shape)}")
    sizes = [t_._data.size for t_ in tensors]
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
        axes[0], axes[1] = 1, 0
    out = []
    for t_, ax in zip(tensors, axes, strict=True):
        shape = [1] * len(tensors)
        shape[ax] = t_._data.size
        r = bind(reshape_p, (t_,), {"shape": tuple(shape)})
        out.append(bind(expand_p, (r,), {"shape": tuple(sizes)}))
    return tuple(out)


_SEQ = (list, tuple)  # exact types of the argument the one-pass cat/stack checks accept


def _tensor_list(tensors, op):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' must be a tuple or list of Tensors, not Tensor")
    tensors = list(tensors)
    if not tensors:
        kind = ValueError if op == "cat" else RuntimeError  # PyTorch's classes for these two
        raise kind(f"{op}(): expected a non-empty list of Tensors")
    for k, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {k} in argument 0, but got "
                            f"{type(x).__name__}")
    return tensors


def cat(tensors, dim: int = 0, *, axis=None):
    """Concatenate along an existing dimension; dtypes are promoted like PyTorch.

    >>> dg.cat([dg.zeros(2, 3), dg.ones(1, 3)]).shape
    dyngraph.Size([3, 3])
    """
    if axis is not None:
        dim = axis
    if _C_CAT is not None:
        r = _C_CAT(tensors, dim)
        if r is not _NI:
            return r
    if type(tensors) in _SEQ and len(tensors) > 1 and type(dim) is int:
        # One pass for the common case (Tensors of one rank, equal sizes off ``dim``, no
        # legacy empty 1-D input); anything else takes the checks below and their errors.
        ref = tensors[0]
        if isinstance(ref, Tensor):
            s0 = ref._data.shape
            nd = len(s0)
            if nd == 1 and (dim == 0 or dim == -1):
                # vectors end to end (the usual call): only their rank and emptiness to check
                for x in tensors:
                    if not isinstance(x, Tensor):
                        break
                    s = x._data.shape
                    if len(s) != 1 or not s[0]:
                        break
                else:
                    return bind(cat_p, tuple(tensors), {"dim": 0})
            elif nd and -nd <= dim < nd:
                d = dim + nd if dim < 0 else dim
                head, tail = s0[:d], s0[d + 1:]
                for x in tensors:
                    if not isinstance(x, Tensor):
                        break
                    s = x._data.shape
                    if s == s0:     # the usual call (children, gates): no slices to build
                        continue
                    if len(s) != nd or s[:d] != head or s[d + 1:] != tail or s == (0,):
                        break
                else:
                    return bind(cat_p, tuple(tensors), {"dim": d})
    tensors = _tensor_list(tensors, "cat")
    # legacy: 1-D empty tensors are skipped when concatenating other shapes
    full = [x for x in tensors if not (x._data.ndim == 1 and x._data.shape[0] == 0)]
    if full and len(full) != len(tensors):
        tensors = full
    ref = tensors[0]._data
    if ref.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = _wrap_dim(dim, ref.ndim, "cat")
    for k, x in enumerate(tensors):
        s = x._data.shape
        if len(s) != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {len(s)} "
                f"(tensor 0 has shape {list(ref.shape)}, tensor {k} has shape {list(s)})")
        for i in range(ref.ndim):
            if i != d and s[i] != ref.shape[i]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[i]} but got size {s[i]} for tensor number {k} in the list "
                    f"(shapes: {[list(x._data.shape) for x in tensors]}).")
    if len(tensors) == 1:
        return bind(cat_p, (tensors[0],), {"dim": d})
    return bind(cat_p, tuple(tensors), {"dim": d})


concat = cat


def concatenate(tensors, axis: int = 0, dim=None):
    return cat(tensors, axis if dim is None else dim)


def stack(tensors, dim: int = 0):
    """Join same-shape tensors along a new dimension.

    >>> dg.stack([dg.zeros(3), dg.ones(3)], dim=1).shape
    dyngraph.Size([3, 2])
    """
    if _C_STACK is not None:
        r = _C_STACK(tensors, dim)
        if r is not _NI:
            return r
    if type(tensors) in _SEQ and tensors and type(dim) is int:
        # one pass for the common case (Tensors of one shape); else the checks below
        ref = tensors[0]
        if isinstance(ref, Tensor):
            s0 = ref._data.shape
            nd = len(s0) + 1
            if -nd <= dim < nd:
                for x in tensors:
                    if not isinstance(x, Tensor) or x._data.shape != s0:
                        break
                else:
                    return bind(stack_p, tuple(tensors), {"dim": dim + nd if dim < 0 else dim})
    tensors = _tensor_list(tensors, "stack")
    ref = tensors[0]._data.shape
    for k, x in enumerate(tensors):
        if x._data.shape != ref:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref)} at entry 0 and "
                f"{list(x._data.shape)} at entry {k}")
    d = _wrap_dim(dim, len(ref) + 1, "stack")
    return bind(stack_p, tuple(tensors), {"dim": d})


def hstack(tensors):
    """Concatenate column-wise (1-D tensors end to end)."""
    tensors = atleast_1d(*_tensor_list(tensors, "hstack"))
    tensors = tensors if isinstance(tensors, tuple) else (tensors,)
    return cat(tensors, 0 if tensors[0]._data.ndim == 1 else 1)


def vstack(tensors):
    """Concatenate row-wise (1-D tensors become rows)."""
    tensors = atleast_2d(*_tensor_list(tensors, "vstack"))
    return cat(tensors if isinstance(tensors, tuple) else (tensors,), 0)


row_stack = vstack


def dstack(tensors):
    """Concatenate along the third dimension (after ``atleast_3d``)."""
    tensors = atleast_3d(*_tensor_list(tensors, "dstack"))
    return cat(tensors if isinstance(tensors, tuple) else (tensors,), 2)


def column_stack(tensors):
    """Stack 0-d/1-d tensors as columns and concatenate 2-D ones along dim 1."""
    cols = []
    for x in _tensor_list(tensors, "column_stack"):
        cols.append(bind(reshape_p, (x,), {"shape": (x._data.size, 1)}) if x._data.ndim <= 1 else x)
    return cat(cols, 1)


def _mark_views(outs, base):
    """Each Tensor of ``outs`` (pieces of one split) shares ``base``'s version counter when it
    is a view of it (``registry.mark_views``: the C accelerator's loop when it is built)."""
    return _mark_views_c(outs, base)


def _split_sizes(sizes, input, d, op):
    sizes = tuple(int(s) for s in sizes)
    n = input._data.shape[d]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise RuntimeError(
            f"{op}: split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
            f"dimension {d}), but got split_sizes={list(sizes)}")
    return sizes


def split(tensor, split_size_or_sections, dim: int = 0):
    """Split into pieces of ``split_size`` (the last may be smaller) or of the listed sizes.

    >>> [p.shape[0] for p in dg.arange(5).split(2)]
    [2, 2, 1]
    """
    if tensor._data.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _wrap_dim(dim, tensor._data.ndim, "split")
    n = tensor._data.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(f"split: split_size can only be 0 if dimension size is 0, but got "
                               f"split_size={size} for dimension {d} of size {n}")
        sizes = (size,) * (n // size) + ((n % size,) if n % size else ()) if size else (0,)
    else:
        sizes = _split_sizes(split_size_or_sections, tensor, d, "split")
    return _mark_views(bind(split_p, (tensor,), {"sizes": sizes, "dim": d}), tensor)


def chunk(input, chunks: int, dim: int = 0):
    """Split into ``chunks`` pieces of ``ceil(n / chunks)`` (fewer when they run out).

    >>> [p.shape[1] for p in dg.zeros(1, 7).chunk(3, dim=-1)]
    [3, 3, 1]
    """
    if _C_CHUNK is not None:
        r = _C_CHUNK(input, chunks, dim)
        if r is not _NI:
            return r
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    d = _wrap_dim(dim, input._data.ndim, "chunk")
    n = input._data.shape[d]
    size = -(-n // chunks)
    if size == 0:
        return split(input, (0,) * chunks if n == 0 else (), d) if n == 0 else ()
    return split(input, size, d)


def tensor_split(input, indices_or_sections, dim: int = 0):
    """Split into ``n`` nearly equal pieces, or at the given indices (like ``np.array_split``)."""
    if input._data.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = _wrap_dim(dim, input._data.ndim, "tensor_split")
    n = input._data.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios._data.ndim == 0 else ios.tolist()
    if isinstance(ios, (int, np.integer)):
        k = int(ios)
        if k <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        sizes = tuple(q + 1 if i < r else q for i in range(k))
    else:
        bounds = [0]
        for i in ios:
            i = int(i)
            i = i + n if i < 0 else i
            bounds.append(min(max(i, bounds[-1]), n))
        bounds.append(n)
        sizes = tuple(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=False))
    return _mark_views(bind(split_p, (input,), {"sizes": sizes, "dim": d}), input)


def hsplit(input, indices_or_sections):
    return tensor_split(input, indices_or_sections, 1 if input._data.ndim > 1 else 0)


def vsplit(input, indices_or_sections):
    return tensor_split(input, indices_or_sections, 0)


def dsplit(input, indices_or_sections):
    """Split a tensor of 3 or more dims along dim 2 (depth)."""
    if input._data.ndim < 3:
        raise RuntimeError(f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor "
                           f"with {input._data.ndim} dimensions!")
    return tensor_split(input, indices_or_sections, 2)


def narrow_copy(input, dim: int, start, length: int):
    """:func:`narrow`, as a new tensor (not a view)."""
    return clone(narrow(input, dim, start, length))


def unbind(input, dim: int = 0):
    """The slices along ``dim`` as a tuple, with that dimension removed."""
    if input._data.ndim == 0:
        raise IndexError("unbind(): Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, input._data.ndim, "unbind")
    return _mark_views(bind(unbind_p, (input,), {"dim": d}), input)


def flip(input, dims):
    """Reverse the order of elements along ``dims``.

    >>> dg.tensor([1, 2, 3]).flip(0)
    tensor([3, 2, 1])
    """
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    nd = input._data.ndim
    w = tuple(_wrap_dim(d, nd, "flip") for d in dims)
    if len(set(w)) != len(w):
        raise RuntimeError(f"flip: dim {list(dims)} appears multiple times in the list of dims")
    if nd == 0:
        w = ()
    return bind(flip_p, (input,), {"dims": w})


def fliplr(input):
    """Reverse the columns (dimension 1); needs at least 2 dimensions."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    """Reverse the rows (dimension 0); needs at least 1 dimension."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    """Roll elements along ``dims`` (or over the flattened tensor when ``dims`` is None).

    >>> dg.tensor([1, 2, 3, 4]).roll(1)
    tensor([4, 1, 2, 3])
    """
    shifts = (int(shifts),) if isinstance(shifts, (int, np.integer)) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
        return bind(roll_p, (input,), {"shifts": shifts, "dims": None})
    dims = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(int(d) for d in dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    nd = input._data.ndim
    dims = tuple(_wrap_dim(d, nd, "roll") for d in dims)
    if nd == 0:
        return bind(roll_p, (input,), {"shifts": shifts[:1], "dims": None})
    return bind(roll_p, (input,), {"shifts": shifts, "dims": dims})


def _repeat_method(self, *sizes):
    """Tile the tensor: ``x.repeat(2, 1)`` (``len(sizes) >= x.dim()``)."""
    sizes = _shape_args(sizes)
    if len(sizes) < self._data.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor "
            f"(repeat dims {list(sizes)}, tensor shape {list(self.shape)})")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeat dims {list(sizes)}")
    return bind(repeat_p, (self,), {"repeats": sizes})


def tile(input, dims):
    """Like ``repeat`` but ``dims`` may be shorter than ``input.ndim`` (padded with ones)."""
    dims = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(int(d) for d in dims)
    if len(dims) < input._data.ndim:
        dims = (1,) * (input._data.ndim - len(dims)) + dims
    return _repeat_method(input, dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or each slice along ``dim``) ``repeats`` times.

    >>> dg.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    >>> dg.repeat_interleave(dg.tensor([2, 1]))     # indices repeated by counts
    tensor([0, 0, 1])
    """
    if repeats is None:
        counts = input
        idx = Tensor._make(np.arange(counts._data.size, dtype=np.int64), False, None, 0)
        return repeat_interleave(idx, counts, 0)
    if dim is None:
        input = bind(reshape_p, (input,), {"shape": (input._data.size,)})
        d = 0
    else:
        d = _wrap_dim(dim, input._data.ndim, "repeat_interleave")
    if input._data.ndim == 0:
        input = bind(reshape_p, (input,), {"shape": (1,)})
    if isinstance(repeats, Tensor):
        r = concrete(repeats, "repeat_interleave: the counts decide the output size")
        if r.ndim > 1:
            raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
        if r.size and int(r.min()) < 0:
            raise RuntimeError("repeat_interleave: repeats can not be negative")
        if r.ndim == 1 and r.size not in (1, input._data.shape[d]):
            raise RuntimeError(
                f"repeat_interleave: repeats must have the same size as input along dim, but got "
                f"repeats.size(0) = {r.size} and input.size({d}) = {input._data.shape[d]}")
        if r.ndim == 0 or r.size == 1:
            repeats = int(r.reshape(-1)[0])
    elif int(repeats) < 0:
        raise RuntimeError("repeat_interleave: repeats can not be negative")
    else:
        repeats = int(repeats)
    return bind(repeat_interleave_p, (input, repeats), {"dim": d})


def pad(input, pad, mode: str = "constant", value=None):
    """Pad ``input``; ``pad = (left, right, top, bottom, ...)`` starts from the last dimension.

    ``mode``: ``"constant"`` (``value``, default 0; negative pads crop), ``"reflect"``,
    ``"replicate"`` or ``"circular"`` (PyTorch's shape rules for those).

    >>> dg.pad(dg.ones(2, 2), (1, 1)).shape
    dyngraph.Size([2, 4])
    """
    pad = tuple(int(p) for p in pad)
    nd = input._data.ndim
    shape = input._data.shape
    if len(pad) % 2:
        raise RuntimeError(f"pad: Padding length must be divisible by 2 (got {len(pad)})")
    if len(pad) // 2 > nd:
        raise RuntimeError(f"pad: Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension {nd}")
    if mode == "constant":
        for i in range(len(pad) // 2):
            d = nd - 1 - i
            if shape[d] + pad[2 * i] + pad[2 * i + 1] < 0:
                raise RuntimeError(
                    f"pad: The input size {shape[d]}, plus negative padding {pad[2 * i]} and "
                    f"{pad[2 * i + 1]} resulted in a negative output size, which is invalid. Check "
                    f"dimension {d} of your input.")
        v = 0.0 if value is None else value
        if isinstance(v, Tensor):
            v = v.item()
        return bind(pad_p, (input,), {"pad": pad, "mode": "constant", "value": v})
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: unsupported padding mode {mode!r} (use constant, reflect, "
                                  "replicate or circular)")
    if value not in (None, 0, 0.0):
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    k = len(pad) // 2
    if not (1 <= k <= 3 and nd in (k + 1, k + 2)):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {nd}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    for i in range(k):
        n = shape[nd - 1 - i]
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                f"got: padding ({lo}, {hi}) at dimension {nd - 1 - i} of input {list(shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError(
                f"Padding value causes wrapping around more than once (padding ({lo}, {hi}) at dimension "
                f"{nd - 1 - i} of input {list(shape)})")
        if n == 0:
            raise RuntimeError(f"pad: {mode} padding of an empty dimension {nd - 1 - i} (input {list(shape)})")
    return bind(pad_p, (input,), {"pad": pad, "mode": mode})


def clone(input, *, memory_format=None):
    """A copy that is part of the graph (gradients flow back to ``input``)."""
    return bind(clone_p, (input,))


def _contiguous(self, memory_format=None):
    """``self`` when already C-contiguous, else a contiguous copy."""
    if self._data.flags.c_contiguous:
        return self
    return bind(clone_p, (self,))


def _m(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _split_method(self, split_size, dim=0):
    return split(self, split_size, dim)


def broadcast_tensors(*tensors):
    """Expand every tensor to the common broadcast shape (views, like ``expand``).

    >>> a, b = dg.broadcast_tensors(dg.ones(3), dg.zeros(2, 1)); a.shape, b.shape
    (dyngraph.Size([2, 3]), dyngraph.Size([2, 3]))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except ValueError:
        raise RuntimeError(
            "broadcast_tensors: shapes " + ", ".join(str(list(t.shape)) for t in tensors)
            + " are not broadcastable") from None
    return tuple(t if tuple(t.shape) == shape else expand(t, *shape) for t in tensors)


def broadcast_shapes(*shapes):
    """The shape that tensors of ``shapes`` broadcast to (ints count as 1-D shapes).

    >>> dg.broadcast_shapes((2, 1), (3,))
    dyngraph.Size([2, 3])
    """
    try:
        return Size(np.broadcast_shapes(*((s,) if isinstance(s, int) else tuple(s) for s in shapes)))
    except ValueError:
        raise RuntimeError(f"broadcast_shapes: shapes {[tuple(s) if not isinstance(s, int) else s for s in shapes]} "
                           "are not broadcastable") from None


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """``n``-th forward difference along ``dim`` (``out[i] = x[i+1] - x[i]``), after
    concatenating ``prepend``/``append`` along ``dim``.

    >>> dg.diff(dg.tensor([1, 4, 9, 16]))
    tensor([3, 5, 7])
    """
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, input.ndim, "diff")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        later, earlier = narrow(x, d, 1, length - 1), narrow(x, d, 0, length - 1)
        x = later ^ earlier if x._data.dtype == np.bool_ else later - earlier  # bool: xor, as in PyTorch
    return x


def _unfold_method(self, dimension: int, size: int, step: int):
    """Sliding windows of ``size`` with stride ``step`` along ``dimension``; the windows
    become a new last dimension (``x.unfold(0, 2, 1)`` on ``[1, 2, 3]`` -> ``[[1, 2], [2, 3]]``).
    """
    from .indexing import index_select  # noqa: PLC0415  (indexing imports this module)

    d = _wrap_dim(dimension, max(self.ndim, 1), "unfold")
    length = self.shape[d] if self.ndim else 1
    if size > length or size < 0:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    if self.ndim == 0:
        return reshape(self, 1)
    n = (length - size) // step + 1
    idx = (np.arange(n)[:, None] * step + np.arange(size)[None, :]).reshape(-1)

    picked = index_select(self, d, from_numpy(idx))                    # (..., n*size, ...)
    shape = tuple(self.shape)
    picked = reshape(picked, *shape[:d], n, size, *shape[d + 1:])
    return movedim(picked, d + 1, -1)


def block_diag(*tensors):
    """A block-diagonal matrix of the given tensors (0-d -> 1x1, 1-D -> one row).

    >>> dg.block_diag(dg.ones(1, 2), dg.tensor(3.))
    tensor([[1., 1., 0.],
            [0., 0., 3.]])
    """
    mats = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in tensors]
    if any(m.ndim != 2 for m in mats):
        raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer dimensions. Got shapes "
                           + ", ".join(str(list(t.shape)) for t in tensors))
    if not mats:
        return zeros(1, 0)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        rows.append(pad(m, (left, width - left - m.shape[1])))
        left += m.shape[1]
    return cat(rows, 0)   # cat promotes mixed dtypes


def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``dims`` (from the first axis
    towards the second), as ``numpy.rot90``."""
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (_wrap_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, [d1]), d0, d1)
    if k == 2:
        return flip(input, [d0, d1])
    if k == 3:
        return flip(transpose(input, d0, d1), [d1])
    return input.clone()


def cartesian_prod(*tensors):
    """All combinations of one element from each 1-D tensor, as rows (like
    ``itertools.product``); a single tensor is returned as is."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, -1) for g in grids], 1)


def combinations(input, r: int = 2, with_replacement: bool = False):
    """Length-``r`` combinations of the elements of a 1-D tensor, as rows (like
    ``itertools.combinations`` / ``combinations_with_replacement``)."""
    from .indexing import index_select  # noqa: PLC0415  (surface.indexing imports this module)

    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(make(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return reshape(index_select(input, 0, from_numpy(idx.reshape(-1))), 0, r)
    return reshape(index_select(input, 0, from_numpy(idx.reshape(-1))), idx.shape[0], r)


def _view_inplace(fn, name):
    """``x.unsqueeze_(0)`` and friends: ``x`` itself takes the new shape (a view of the
    same memory) and, inside a graph, the view's node; the version counter is bumped."""
    def method(self, *args, **kwargs):
        _check_target(self, name)
        res = fn(self, *args, **kwargs)
        self._data = res._data
        if res._rg and STATE.grad_enabled:
            self._fn, self._nr, self._rg = res._fn, res._nr, True
        bump_version(self)
        return self

    method.__name__ = name
    method.__doc__ = f"In-place ``{fn.__name__}``: this tensor takes the new shape."
    return method


