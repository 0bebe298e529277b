"""Sparse COO tensors and ``torch.sparse``'s products, with gradients.

A :class:`SparseTensor` holds PyTorch's COO parts: ``indices`` (``(sparse_dim, nnz)``
int64), ``values`` (``(nnz, *dense_dims)``, an ordinary dyngraph tensor) and a
``size``.  Products are built from differentiable dense ops (``index_select`` of the
rows of the dense operand, scaled by the values, summed with ``index_add``), so
gradients reach both the dense operand and the values — of any order — in O(nnz·F)
work and memory, never materialising the dense matrix.

>>> adj = dg.sparse_coo_tensor(dg.tensor([[0, 1, 1], [1, 0, 2]]), dg.tensor([1.0, 2.0, 3.0]), (2, 3))
>>> h = dg.ones(3, 4, requires_grad=True)
>>> out = dg.sparse.mm(adj, h)           # (2, 4); also adj @ h, dg.mm(adj, h), dg.spmm(adj, h)
>>> out.sum().backward(); h.grad[:, 0]
tensor([2., 1., 3.])
"""

from __future__ import annotations

import re

import numpy as np

from .. import dtypes as _dt
from ..creation import tensor
from ..size import Size
from ..surface.linalg import matmul as dense_matmul
from ..surface.linalg import mm as dense_mm
from ..surface.shape import cat
from ..tensor import Tensor

__all__ = ["SparseTensor", "SparseCSRTensor", "sparse_coo_tensor", "sparse_csr_tensor", "mm", "spmm", "addmm",
           "sum", "to_sparse", "to_sparse_csr", "sparse_coo", "sparse_csr", "is_sparse", "matmul", "smm",
           "check_sparse_tensor_invariants"]


class _Layout:
    """A tensor layout token (``torch.strided``, ``torch.sparse_coo``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"dyngraph.{self.name}"


sparse_coo = _Layout("sparse_coo")
sparse_csr = _Layout("sparse_csr")
strided = _Layout("strided")


def _as_index(indices) -> Tensor:
    idx = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices))
    if idx._data.dtype.kind not in "iu":
        raise RuntimeError(f"sparse_coo_tensor: indices must be an int64 tensor, got {idx.dtype}")
    if idx.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be 2-D (sparse_dim, nnz), got shape "
                           f"{list(idx.shape)}")
    return idx.long().detach()


class SparseTensor:
    """A COO sparse tensor (``layout=torch.sparse_coo``); see the module docstring.

    ``values`` carries the autograd state: ``requires_grad``/``grad`` of the sparse tensor
    are those of its values, and ``grad`` is returned as a sparse tensor with the same
    indices, as PyTorch returns a sparse gradient.
    """

    __slots__ = ("_idx", "_vals", "_size", "_coalesced", "__weakref__")
    layout = sparse_coo
    is_sparse = True
    is_sparse_csr = False

    def __init__(self, indices: Tensor, values: Tensor, size, coalesced: bool = False):
        self._idx = indices
        self._vals = values
        self._size = tuple(int(s) for s in size)
        self._coalesced = coalesced

    # -- metadata -----------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._size)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    ndim = property(dim)

    def sparse_dim(self) -> int:
        return int(self._idx.shape[0])

    def dense_dim(self) -> int:
        return self.dim() - self.sparse_dim()

    def _nnz(self) -> int:
        return int(self._idx.shape[1])

    def numel(self) -> int:
        return int(np.prod(self._size, dtype=np.int64))

    @property
    def dtype(self):
        return self._vals.dtype

    @property
    def device(self):
        return self._vals.device

    @property
    def is_cuda(self) -> bool:
        return self._vals.is_cuda

    @property
    def is_cpu(self) -> bool:
        return not self._vals.is_cuda

    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """d(loss)/d(entry) at the stored pattern, coalesced (PyTorch's sparse gradient); every
        duplicate of an entry has that same gradient, so the first one is taken."""
        g = self._vals.grad
        if g is None:
            return None
        if self._coalesced:
            return SparseTensor(self._idx, g, self._size, True)
        new_idx, _, first = self._unique_entries()
        return SparseTensor(Tensor._make(new_idx, False, None, 0),
                            Tensor._make(g._data[first], False, None, 0), self._size, True)

    def _unique_entries(self):
        """(coalesced indices, index of each stored entry among them, first stored entry of each)."""
        nsd = self.sparse_dim()
        idx = self._idx._data
        if not idx.size:
            return np.zeros((nsd, 0), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        flat = np.ravel_multi_index(tuple(idx), self._size[:nsd])
        keys, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        new_idx = np.stack(np.unravel_index(keys, self._size[:nsd])).astype(np.int64)
        return new_idx, inverse.reshape(-1).astype(np.int64), first

    @property
    def is_leaf(self) -> bool:
        return self._vals.is_leaf

    def is_floating_point(self) -> bool:
        return self._vals.is_floating_point()

    # -- parts ----------------------------------------------------------------------
    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._vals

    def _indices(self) -> Tensor:
        """The indices, coalesced or not."""
        return self._idx

    def _values(self) -> Tensor:
        """The values, coalesced or not."""
        return self._vals

    def is_coalesced(self) -> bool:
        return self._coalesced

    def coalesce(self) -> SparseTensor:
        """Sorted, duplicate-free indices; duplicates' values are summed (differentiably)."""
        if self._coalesced:
            return self
        new_idx, inverse, _ = self._unique_entries()
        vals = self._vals.new_zeros((int(new_idx.shape[1]), *self._vals.shape[1:]))
        vals = vals.index_add(0, Tensor._make(inverse, False, None, 0), self._vals)
        return SparseTensor(Tensor._make(new_idx, False, None, 0), vals, self._size, True)

    # -- conversions -------------------------------------------------------------------
    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense tensor (duplicates summed); differentiable with respect to the values."""
        nsd = self.sparse_dim()
        flat_shape = (int(np.prod(self._size[:nsd], dtype=np.int64)), *self._size[nsd:])
        flat = np.ravel_multi_index(tuple(self._idx._data), self._size[:nsd]) if self._nnz() else \
            np.zeros(0, np.int64)
        flat = Tensor._make(np.asarray(flat, np.int64), False, None, 0)
        out = self._vals.new_zeros(flat_shape).index_add(0, flat, self._vals).reshape(self._size)
        return out if dtype is None else out.to(dtype)

    def to_sparse_csr(self, dense_dim=None) -> SparseCSRTensor:
        """The CSR form of a 2-D COO tensor (same values, row-major order)."""
        return to_sparse_csr(self)

    def to_sparse(self, *args, **kwargs) -> SparseTensor:
        return self

    to_sparse_coo = to_sparse

    def _with_values(self, values: Tensor) -> SparseTensor:
        return SparseTensor(self._idx, values, self._size, self._coalesced)

    def to(self, *args, **kwargs) -> SparseTensor:
        return SparseTensor(self._idx.to(*[a for a in args if not isinstance(a, _dt.dtype)],
                                             **{k: v for k, v in kwargs.items() if k == "device"}),
                            self._vals.to(*args, **kwargs), self._size, self._coalesced)

    def float(self) -> SparseTensor:
        return self._with_values(self._vals.float())

    def double(self) -> SparseTensor:
        return self._with_values(self._vals.double())

    def half(self) -> SparseTensor:
        return self._with_values(self._vals.half())

    def cpu(self) -> SparseTensor:
        return self.to("cpu")

    def cuda(self, device=None) -> SparseTensor:
        return self.to("cuda" if device is None else device)

    def detach(self) -> SparseTensor:
        return self._with_values(self._vals.detach())

    def clone(self) -> SparseTensor:
        return SparseTensor(self._idx.clone(), self._vals.clone(), self._size, self._coalesced)

    def t(self) -> SparseTensor:
        if self.dim() != 2 or self.sparse_dim() != 2:
            raise RuntimeError(f"t() expects a 2-D sparse tensor, got size {list(self._size)}")
        return SparseTensor(self._idx.flip(0), self._vals, self._size[::-1], False)

    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        d0, d1 = sorted((dim0 % self.dim(), dim1 % self.dim()))
        if (d0, d1) == (0, 1) and self.dim() == 2:
            return self.t()
        raise NotImplementedError("transpose of a sparse tensor: only the two dims of a 2-D matrix")

    # -- arithmetic ---------------------------------------------------------------------
    def mm(self, other):
        return mm(self, other)

    matmul = mm

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __mul__(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, Tensor) and other.ndim == 0):
            return self._with_values(self._vals * other)
        if isinstance(other, SparseTensor):
            return (self.to_dense() * other.to_dense()).to_sparse()
        raise NotImplementedError("sparse * dense: multiply by a number, or call .to_dense() first")

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, Tensor) and other.ndim == 0):
            return self._with_values(self._vals / other)
        raise NotImplementedError("sparse / tensor: divide by a number, or call .to_dense() first")

    def __neg__(self):
        return self._with_values(-self._vals)

    def __add__(self, other):
        if isinstance(other, SparseTensor):
            if other._size != self._size:
                raise RuntimeError(f"sparse add: sizes {list(self._size)} and {list(other._size)} differ")

            return SparseTensor(cat([self._idx, other._idx], 1),
                                cat([self._vals, other._vals.to(self.dtype)], 0), self._size).coalesce()
        if isinstance(other, Tensor):
            return self.to_dense() + other
        raise NotImplementedError(f"sparse + {type(other).__name__}")

    def __radd__(self, other):
        return self.__add__(other)

    def __sub__(self, other):
        return self + (-other)

    def sum(self, dim=None):
        return sum(self, dim)

    def __len__(self) -> int:
        return self._size[0]

    def __repr__(self) -> str:
        pad = " " * len("tensor(indices=")
        ind = repr(self._idx).replace("\n", "\n" + pad)
        vpad = " " * len("       values=")
        # PyTorch prints the dtype once, in the header, not in the values' repr
        vals = re.sub(r",\s*dtype=[\w.]+\)$", ")", repr(self._vals.detach())).replace("\n", "\n" + vpad)
        dt = "" if self.dtype in (_dt.get_default_dtype(), _dt.int64, _dt.bool) else f"dtype={self.dtype}, "
        grad = ""
        if self.requires_grad:
            fn = getattr(self._vals, "grad_fn", None)
            grad = ",\n       requires_grad=True" if fn is None else f",\n       grad_fn=<{fn.name()}>"
        return (f"tensor(indices={ind},\n       values={vals},\n       size={self._size}, "
                f"nnz={self._nnz()}, {dt}layout={self.layout}{grad})")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad: bool = False, check_invariants=None, is_coalesced=None) -> SparseTensor:
    """A COO tensor from ``indices`` (``(sparse_dim, nnz)``) and ``values`` (``(nnz, ...)``).

    ``size`` defaults to the smallest one holding every index, as in PyTorch.

    >>> dg.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2)).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    idx = _as_index(indices)
    vals = values if isinstance(values, Tensor) else tensor(values, dtype=dtype)
    if dtype is not None and vals.dtype != _dt.as_dtype(dtype):
        vals = vals.to(dtype)
    if device is not None:
        vals, idx = vals.to(device), idx.to(device)
    nnz = int(idx.shape[1])
    if vals.ndim == 0 or int(vals.shape[0]) != nnz:
        raise RuntimeError(f"sparse_coo_tensor: indices have {nnz} entries but values have shape "
                           f"{list(vals.shape)} (expected the first dimension to be {nnz})")
    nsd = int(idx.shape[0])
    if size is None:
        top = idx._data.max(1) + 1 if nnz else np.zeros(nsd, np.int64)
        size = (*[int(t) for t in top], *vals.shape[1:])
    size = tuple(int(s.item()) if isinstance(s, Tensor) else int(s) for s in size)
    if len(size) != nsd + vals.ndim - 1:
        raise RuntimeError(f"sparse_coo_tensor: size {list(size)} has {len(size)} dims but indices give "
                           f"{nsd} sparse and values {vals.ndim - 1} dense dims")
    if nnz and (idx._data.min() < 0 or np.any(idx._data.max(1) >= np.array(size[:nsd]))):
        raise RuntimeError(f"sparse_coo_tensor: an index is out of bounds for size {list(size)}")
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseTensor(idx, vals, size, bool(is_coalesced) or nnz <= 1)


def to_sparse(input: Tensor, sparse_dim: int | None = None) -> SparseTensor:
    """The COO form of a dense tensor (its nonzero entries); differentiable w.r.t. ``input``."""
    if isinstance(input, SparseTensor):
        return input
    nsd = input.ndim if sparse_dim is None else int(sparse_dim)
    data = input._data
    lead = data.reshape(data.shape[:nsd] + (-1,)) if nsd < data.ndim else data[..., None]
    nz = np.nonzero(np.any(lead != 0, axis=-1))
    idx = np.stack(nz).astype(np.int64) if nz else np.zeros((nsd, 0), np.int64)
    index = Tensor._make(idx, False, None, 0)
    vals = input[tuple(index[i] for i in range(nsd))] if nsd else input.unsqueeze(0)
    return SparseTensor(index, vals, tuple(input.shape), True)


def _dense_operand(x, op: str) -> Tensor:
    if isinstance(x, SparseTensor):
        return x.to_dense()
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    return x


def mm(mat1, mat2) -> Tensor:
    """``sparse @ dense`` (or ``dense @ sparse``) as a dense result, with gradients to the dense
    operand and to the sparse operand's values.

    >>> dg.sparse.mm(adj, h)
    """
    if isinstance(mat1, SparseTensor) and not isinstance(mat2, SparseTensor):
        return _spmm(mat1, mat2, "sparse.mm")
    if isinstance(mat2, SparseTensor) and not isinstance(mat1, SparseTensor):
        return _spmm(mat2.t(), mat1.t(), "sparse.mm").t()
    if isinstance(mat1, SparseTensor):
        return _spmm(mat1, mat2.to_dense(), "sparse.mm")

    return dense_mm(mat1, mat2)


def _spmm(a: SparseTensor, b: Tensor, op: str) -> Tensor:
    b = _dense_operand(b, op)
    if a.dim() != 2 or a.sparse_dim() != 2:
        raise RuntimeError(f"{op}: the sparse operand must be a 2-D matrix, got size {list(a.shape)}")
    vec = b.ndim == 1
    if vec:
        b = b.unsqueeze(1)
    if b.ndim != 2 or int(b.shape[0]) != a._size[1]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({a._size[0]}x{a._size[1]} "
                           f"and {'x'.join(str(s) for s in b.shape)})")
    if b.dtype != a.dtype:
        raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got {a.dtype} != {b.dtype}")
    rows, cols = a._idx[0], a._idx[1]
    contrib = b.index_select(0, cols) * a._vals.unsqueeze(1)
    out = b.new_zeros((a._size[0], int(b.shape[1]))).index_add(0, rows, contrib)
    return out.squeeze(1) if vec else out


spmm = mm
smm = mm


def matmul(input, other):
    """``@`` with a sparse operand (a 2-D sparse matrix times a dense matrix or vector)."""
    if isinstance(input, SparseTensor) or isinstance(other, SparseTensor):
        if isinstance(other, Tensor) and other.ndim == 1 and isinstance(input, SparseTensor):
            return _spmm(input, other, "matmul")
        return mm(input, other)

    return dense_matmul(input, other)


def addmm(mat, mat1, mat2, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``."""
    prod = mm(mat1, mat2)
    mat = _dense_operand(mat, "sparse.addmm")
    return (mat if beta == 1 else mat * beta) + (prod if alpha == 1 else prod * alpha)


def sum(input, dim=None, dtype=None):
    """Sum of a sparse tensor's entries (all of them, or over ``dim``: a dense result here,
    where PyTorch keeps the sparse layout when sparse dims remain)."""
    if not isinstance(input, SparseTensor):
        return input.sum(dim) if dim is not None else input.sum()
    if dim is None:
        total = input._vals.sum()
        return total if dtype is None else total.to(dtype)
    out = input.to_dense().sum(dim)
    return out if dtype is None else out.to(dtype)


def is_sparse(t) -> bool:
    return isinstance(t, SparseTensor)


class check_sparse_tensor_invariants:  # noqa: N801 - PyTorch's spelling
    """PyTorch's switch for validating sparse tensors; dyngraph always checks bounds."""

    def __init__(self, enable: bool = True):
        self.enable = enable

    @staticmethod
    def is_enabled() -> bool:
        return True

    @staticmethod
    def enable() -> None:
        pass

    @staticmethod
    def disable() -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


class SparseCSRTensor(SparseTensor):
    """A 2-D compressed-sparse-row tensor (``layout=torch.sparse_csr``): ``crow_indices``
    (``nrows + 1`` offsets), ``col_indices`` and ``values``.  It keeps the equivalent COO
    row indices too, so every product and gradient of :class:`SparseTensor` applies; the
    gradient of its values has the CSR's order.

    >>> a = dg.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    >>> a @ dg.ones(3)
    tensor([3., 3.])
    """

    __slots__ = ("_crow",)
    layout = sparse_csr
    is_sparse = False
    is_sparse_csr = True

    def __init__(self, crow: Tensor, col: Tensor, values: Tensor, size):
        rows = np.repeat(np.arange(len(crow._data) - 1, dtype=np.int64), np.diff(crow._data))
        idx = Tensor._make(np.stack([rows, col._data.astype(np.int64)]), False, None, 0)
        super().__init__(idx, values, size, coalesced=True)
        self._crow = crow

    def crow_indices(self) -> Tensor:
        return self._crow

    def col_indices(self) -> Tensor:
        return self._idx[1]

    def indices(self) -> Tensor:
        raise RuntimeError("indices expected sparse coordinate tensor layout but got SparseCsr; "
                           "use crow_indices() and col_indices()")

    def to_sparse_csr(self, dense_dim=None) -> SparseCSRTensor:
        return self

    def to_sparse(self, *args, **kwargs) -> SparseTensor:
        """The COO form (same indices and values)."""
        return SparseTensor(self._idx, self._vals, self._size, True)

    def _with_values(self, values: Tensor) -> SparseCSRTensor:
        return SparseCSRTensor(self._crow, self._idx[1], values, self._size)

    def __repr__(self) -> str:
        vals = re.sub(r",\s*dtype=[\w.]+\)$", ")", repr(self._vals.detach()))
        dt = "" if self.dtype in (_dt.get_default_dtype(), _dt.int64, _dt.bool) else f"dtype={self.dtype}, "
        grad = ""
        if self.requires_grad:
            fn = getattr(self._vals, "grad_fn", None)
            grad = ",\n       requires_grad=True" if fn is None else f",\n       grad_fn=<{fn.name()}>"
        return (f"tensor(crow_indices={self._crow!r},\n       col_indices={self._idx[1]!r},\n       "
                f"values={vals}, size={self._size}, nnz={self._nnz()}, {dt}layout={self.layout}{grad})")


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad: bool = False, check_invariants=None) -> SparseCSRTensor:
    """A 2-D CSR tensor from row offsets, column indices and values (``size`` defaults to
    ``(len(crow_indices) - 1, max(col_indices) + 1)``, as in PyTorch).

    >>> dg.sparse_csr_tensor([0, 1, 2], [1, 0], [5.0, 6.0]).to_dense()
    tensor([[0., 5.],
            [6., 0.]])
    """
    crow = crow_indices if isinstance(crow_indices, Tensor) else tensor(np.asarray(crow_indices))
    col = col_indices if isinstance(col_indices, Tensor) else tensor(np.asarray(col_indices))
    if crow._data.dtype.kind not in "iu" or col._data.dtype.kind not in "iu":
        raise RuntimeError("sparse_csr_tensor: crow_indices and col_indices must be integer tensors, got "
                           f"{crow.dtype} and {col.dtype}")
    crow, col = crow.long().detach(), col.long().detach()
    vals = values if isinstance(values, Tensor) else tensor(values, dtype=dtype)
    if dtype is not None and vals.dtype != _dt.as_dtype(dtype):
        vals = vals.to(dtype)
    c, k = crow._data, col._data
    if c.ndim != 1 or len(c) < 1 or c[0] != 0 or np.any(np.diff(c) < 0):
        raise RuntimeError("sparse_csr_tensor: crow_indices must be a non-decreasing 1-D tensor starting at 0, "
                           f"got {c.tolist()}")
    nnz = int(c[-1])
    if k.ndim != 1 or len(k) != nnz or vals.ndim < 1 or int(vals.shape[0]) != nnz:
        raise RuntimeError(f"sparse_csr_tensor: crow_indices give {nnz} entries but col_indices have shape "
                           f"{list(k.shape)} and values {list(vals.shape)}")
    if size is None:
        size = (len(c) - 1, int(k.max()) + 1 if nnz else 0)
    size = tuple(int(x.item()) if isinstance(x, Tensor) else int(x) for x in size)
    if len(size) != 2 or size[0] != len(c) - 1:
        raise RuntimeError(f"sparse_csr_tensor: size {list(size)} must be 2-D with {len(c) - 1} rows "
                           "(dyngraph's CSR tensors are matrices)")
    if nnz and (k.min() < 0 or k.max() >= size[1]):
        raise RuntimeError(f"sparse_csr_tensor: a column index is out of bounds for size {list(size)}")
    if device is not None:
        vals = vals.to(device)
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseCSRTensor(crow, col, vals, size)


def to_sparse_csr(input) -> SparseCSRTensor:
    """The CSR form of a 2-D dense or COO tensor (differentiable with respect to its values).

    >>> dg.eye(2).to_sparse_csr().crow_indices()
    tensor([0, 1, 2])
    """
    if isinstance(input, SparseCSRTensor):
        return input
    coo = input.coalesce() if isinstance(input, SparseTensor) else to_sparse(input)
    if coo.dim() != 2 or coo.sparse_dim() != 2:
        raise RuntimeError(f"to_sparse_csr: dyngraph's CSR tensors are 2-D matrices, got size {list(coo.shape)}")
    rows = coo._idx._data[0]
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=coo._size[0]))]).astype(np.int64)
    return SparseCSRTensor(Tensor._make(crow, False, None, 0), coo._idx[1], coo._vals, coo._size)
