"""``dg.linalg``: PyTorch's ``torch.linalg`` namespace (norms, inverse, determinants,
solve, Cholesky...).  The primitives live in :mod:`dyngraph.ops.linalg` and
:mod:`dyngraph.ops.reduction`; this module adds the ``torch.linalg`` names and
argument conventions on top.

>>> import dyngraph as dg
>>> dg.linalg.norm(dg.tensor([[3., 0.], [0., 4.]]))
tensor(5.)
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import dtypes as _dt
from .creation import eye, tensor, zeros, zeros_like
from .errors import LinAlgError
from .surface import elementwise as _ew
from .surface import linalg as _lin
from .surface import reduction as _red
from .surface._args import as_tensor_arg
from .surface.shape import stack
from .tensor import Tensor, _wrap_dim

__all__ = [
    "LinAlgError",
    "norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky",
    "matmul", "multi_dot", "vecdot", "diagonal", "tensordot", "qr", "matrix_power", "eigh",
    "eigvalsh", "svd", "svdvals", "pinv",
    "lstsq", "cross", "solve_triangular", "cholesky_ex", "inv_ex", "matrix_rank", "cond",
]

vector_norm = _red.vector_norm
inv = _lin.inverse
det = _lin.det
slogdet = _lin.slogdet
solve = _lin.solve
matmul = _lin.matmul
tensordot = _lin.tensordot
qr = _lin.qr
eigh = _lin.eigh
eigvalsh = _lin.eigvalsh
svd = _lin.linalg_svd
svdvals = _lin.svdvals
pinv = _lin.pinv
lstsq = _lin.lstsq
cross = _lin.linalg_cross
_INF = float("inf")


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """Lower Cholesky factor ``L`` with ``L @ L.mT == A`` (``upper=True``: ``L.mT``)."""
    return _lin.cholesky(A, upper)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Diagonal of the last two dimensions (``torch.linalg.diagonal`` defaults)."""
    return _lin.diagonal(A, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """Dot product of vectors along ``dim`` (with broadcasting)."""
    return _red.sum(x * y, dim)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (``n < 0``: powers of the inverse; ``n = 0``: I).

    Repeated squaring, so ``log2(n)`` products; differentiable through them.
    """
    A = as_tensor_arg(A, "linalg.matrix_power")
    if A._data.ndim < 2 or A._data.shape[-1] != A._data.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, got "
                           f"shape {list(A.shape)}")
    n = int(n)
    if n == 0:
        eye = np.broadcast_to(np.eye(A._data.shape[-1], dtype=A._data.dtype), A._data.shape)
        # the identity, still connected to A (zero gradient, as in PyTorch)
        return _ew.where(Tensor._make(np.ones((), bool), False, None, 0),
                         Tensor._make(np.array(eye), False, None, 0), A)
    if n < 0:
        A, n = _lin.inverse(A), -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else _lin.matmul(result, base)
        n >>= 1
        if n:
            base = _lin.matmul(base, base)
    return result


def multi_dot(tensors) -> Tensor:
    """Chained matrix product ``A @ B @ C ...``; first/last may be vectors."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = _lin.matmul(out, t)
    return out


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """Matrix norm over the two dims ``dim``: ``'fro'``, ``'nuc'``, ``2``, ``-2``, ``1``, ``-1``,
    ``inf``, ``-inf`` (``'nuc'`` and ``+-2`` from the singular values).

    >>> dg.linalg.matrix_norm(dg.tensor([[1., -2.], [3., 4.]]), ord=1)
    tensor(6.)
    """
    A = as_tensor_arg(A, "linalg.matrix_norm")
    n = A._data.ndim
    if n < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                           f"dimensions, got shape {list(A.shape)}")
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = (_wrap_dim(d, n, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord == "fro":
        return _red.vector_norm(A, 2, (d0, d1), keepdim, dtype=dtype)
    if ord in ("nuc", 2, -2):
        # from the singular values: their sum, the largest or the smallest (gradients through
        # the SVD, as in PyTorch)
        if dtype is not None:
            A = A.to(dtype)
        if not _dt.is_floating_point_dtype(A._data.dtype):
            raise RuntimeError("linalg.matrix_norm: Expected a floating point or complex tensor as "
                               f"input. Got {A.dtype}")
        sv = _lin.svdvals(A.movedim((d0, d1), (-2, -1)))
        out = _red.sum(sv, -1) if ord == "nuc" else (_red.amax(sv, -1) if ord == 2 else _red.amin(sv, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    if ord not in (1, -1, _INF, -_INF):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if dtype is not None:
        A = A.to(dtype)
    if not _dt.is_floating_point_dtype(A._data.dtype):
        raise RuntimeError("linalg.matrix_norm: Expected a floating point or complex tensor as "
                           f"input. Got {A.dtype}")
    # ord=+-1: max/min column sum; ord=+-inf: max/min row sum
    summed, picked = (d0, d1) if ord in (1, -1) else (d1, d0)
    col = _red.sum(abs(A), summed, keepdim=True)
    red = _red.amax if ord > 0 else _red.amin
    out = red(col, picked, keepdim=True)
    if keepdim:
        return out
    shape = tuple(s for i, s in enumerate(out.shape) if i not in (d0, d1))
    return out.reshape(shape)


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Vector or matrix norm, chosen like ``torch.linalg.norm``.

    ``dim`` an int (or ``ord=None`` and ``dim=None``: the flattened tensor) gives a vector
    norm; a 2-tuple ``dim`` (or a 2-D input with ``ord`` given) gives a matrix norm.
    """
    A = as_tensor_arg(A, "linalg.norm")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        if len(dim) == 1:
            return _red.vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {dim}")
    if ord is None:
        return _red.vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A._data.ndim == 1:
        return _red.vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A._data.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(
        f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
        f"{A._data.ndim}D")


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """The ``X`` with ``A @ X = B`` (``X @ A = B`` for ``left=False``) for a triangular ``A``;
    only the triangle ``upper`` names is read (so its gradient is triangular, as in PyTorch),
    and ``unitriangular=True`` takes the diagonal as ones.

    >>> L = dg.tensor([[2., 0.], [1., 1.]])
    >>> dg.linalg.solve_triangular(L, dg.tensor([[2.], [2.]]), upper=False)
    tensor([[1.],
            [1.]])
    """
    A = as_tensor_arg(A, "linalg.solve_triangular")
    B = as_tensor_arg(B, "linalg.solve_triangular")
    if A.dim() < 2 or B.dim() < 2:
        raise RuntimeError(f"linalg.solve_triangular: The input tensor A must have at least 2 dimensions "
                           f"(got A of shape {list(A.shape)} and B of shape {list(B.shape)})")
    tri = A.triu() if upper else A.tril()
    if unitriangular:
        d = _lin.diagonal(tri, 0, -2, -1)
        tri = tri - _lin.diag_embed(d) + _lin.diag_embed(d.detach() * 0 + 1)
    if left:
        return _lin.solve(tri, B)
    return _lin.solve(tri.mT, B.mT).mT


_CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
_InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])


def _ex(fn, A: Tensor, check_errors: bool):
    """``fn(A)`` with PyTorch's ``*_ex`` contract: an int32 ``info`` per matrix, 0 on success.
    A matrix that fails gets ``info = 1`` and a zero result instead of an error, unless
    ``check_errors``."""
    batch = tuple(A.shape[:-2])
    try:
        return fn(A), zeros(batch, dtype=_dt.int32)
    except LinAlgError:
        if check_errors:
            raise
    flat = A.reshape(-1, *A.shape[-2:])
    outs, infos = [], []
    for i in range(flat.shape[0]):       # only after a failure: find which matrices failed
        try:
            outs.append(fn(flat[i]))
            infos.append(0)
        except LinAlgError:
            outs.append(zeros_like(flat[i]))
            infos.append(1)
    return stack(outs).reshape(*A.shape), tensor(infos, dtype=_dt.int32).reshape(batch)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)``: the Cholesky factor and, per matrix, 0 (success) or 1 (not
    positive-definite; that ``L`` is zeros) instead of an error.

    >>> L, info = dg.linalg.cholesky_ex(K)
    >>> if info.any(): K = K + 1e-6 * dg.eye(len(K))
    """
    L, info = _ex(lambda M: cholesky(M, upper=upper), as_tensor_arg(A, "linalg.cholesky_ex"), check_errors)
    return _CholeskyExResult(L, info)


def inv_ex(A: Tensor, *, check_errors: bool = False):
    """``(inverse, info)``: the inverse and, per matrix, 0 or 1 (singular; that inverse is zeros)."""
    Ainv, info = _ex(inv, as_tensor_arg(A, "linalg.inv_ex"), check_errors)
    return _InvExResult(Ainv, info)


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The number of singular values above ``max(atol, rtol * S_max)`` (default
    ``rtol = eps * max(m, n)`` when neither is given, as in PyTorch); an int64 tensor.

    >>> dg.linalg.matrix_rank(dg.ones(3, 3))
    tensor(1)
    """
    A = as_tensor_arg(A, "linalg.matrix_rank")
    sv = _lin.svdvals(A).detach()
    eps = float(np.finfo(A._data.dtype).eps)
    if atol is None and rtol is None:
        rtol = eps * max(A.shape[-2], A.shape[-1])
    smax = _red.amax(sv, -1, keepdim=True)
    tol = smax * 0.0
    if atol is not None:
        tol = _ew.maximum(tol, tol * 0.0 + atol)
    if rtol is not None:
        tol = _ew.maximum(tol, smax * rtol)
    return _red.sum(sv > tol, -1)


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number of ``A`` in the norm ``p`` (``None``/``2``: ratio of the extreme
    singular values; ``-2``: its inverse; ``'fro'``, ``'nuc'``, ``1``, ``inf``...:
    ``norm(A, p) * norm(inv(A), p)``).

    >>> dg.linalg.cond(dg.tensor([[1., 0.], [0., 4.]]))
    tensor(4.)
    """
    A = as_tensor_arg(A, "linalg.cond")
    if p is None or p in (2, -2):
        sv = _lin.svdvals(A)
        big, small = _red.amax(sv, -1), _red.amin(sv, -1)
        return big / small if p in (None, 2) else small / big
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_solve``: the ``X`` with ``A @ X = B`` for ``A = L @ L.mT`` given its
    Cholesky factor (``upper=True``: ``A = U.mT @ U``), by two triangular solves.

    >>> L = dg.linalg.cholesky(K)
    >>> alpha = dg.cholesky_solve(y, L)        # K^-1 y
    """
    L = as_tensor_arg(L, "cholesky_solve")
    if upper:
        return solve_triangular(L, solve_triangular(L.mT, B, upper=False), upper=True)
    return solve_triangular(L.mT, solve_triangular(L, B, upper=False), upper=True)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_inverse``: ``A^-1`` for ``A = L @ L.mT`` given ``L`` (``upper``: ``U``)."""
    L = as_tensor_arg(L, "cholesky_inverse")
    identity = eye(L.shape[-1], dtype=L.dtype).expand(*L.shape)
    return cholesky_solve(identity, L, upper)
