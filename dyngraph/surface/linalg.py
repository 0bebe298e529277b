"""The PyTorch surface of linear algebra: ``matmul``/``@``, ``mm``/``bmm``/``addmm``,
``einsum``, ``tensordot``, ``diagonal``/``tril``, decompositions and solvers (``qr``,
``svd``, ``eigh``, ``cholesky``, ``solve``, ``lstsq``, ``det``...).

The primitives (forward, rules, save spec) are in :mod:`dyngraph.ops.linalg`;
:mod:`dyngraph.surface.methods` attaches the Tensor methods.  ``dyngraph.linalg`` adds the
``torch.linalg`` names over these.
"""

from __future__ import annotations

import builtins
import string
from collections import namedtuple

import numpy as np

from .._core.state import concrete
from ..ops import elementwise as _ew
from ..ops import structural as _st
from ..ops.linalg import (
    _cname,
    cholesky_p,
    det_p,
    diag_embed_p,
    diagonal_p,
    eigh_p,
    einsum_p,
    inv_p,
    matmul_p,
    qr_p,
    slogdet_p,
    solve_p,
    svd_p,
    tril_p,
    triu_p,
)
from ..ops.registry import bind
from ..tensor import Tensor, _wrap_dim
from . import elementwise as _sew
from . import reduction as _sred
from . import shape as _sshape
from ._args import as_tensor_arg
from .inplace import apply_inplace

__all__ = [
    "matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm", "addmv", "baddbmm",
    "addbmm", "addr", "tensordot", "inner", "kron", "diagonal", "diag", "diagflat", "diag_embed", "trace",
    "tril", "triu", "einsum", "inverse", "det", "slogdet", "logdet", "cholesky", "qr", "svd",
    "pinverse", "cross",
]


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting of batch dimensions.

    >>> (dg.ones(2, 3) @ dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)) and _sparse(input, other):
        from ..sparse import matmul as sparse_matmul  # noqa: PLC0415  (dg.sparse is built on this layer; sparse operands only)

        return sparse_matmul(input, other)
    input = as_tensor_arg(input, "matmul")
    other = as_tensor_arg(other, "matmul")
    return bind(matmul_p, (input, other))


def _sparse(*xs) -> bool:
    """Whether an operand is a ``dg.sparse`` COO tensor (not a Tensor: dg.sparse multiplies it)."""
    from ..sparse import SparseTensor  # noqa: PLC0415  (dg.sparse is built on this layer; sparse operands only)

    return any(isinstance(x, SparseTensor) for x in xs)


def _matmul_method(self, other):
    if not isinstance(other, Tensor) and _sparse(other):
        return NotImplemented   # dense @ sparse: SparseTensor.__rmatmul__
    return bind(matmul_p, (self, other if isinstance(other, Tensor) else as_tensor_arg(other, "matmul")))


def _rmatmul_method(self, other):
    return bind(matmul_p, (as_tensor_arg(other, "matmul"), self))


def _tensor(x, op):
    return x if isinstance(x, Tensor) else as_tensor_arg(x, op)


def _need_ndim(t, n, what, op):
    if t._data.ndim != n:
        raise RuntimeError(f"{op}: {what} must be a {n}D tensor{' (a matrix)' if n == 2 else ''}, "
                           f"but got a {t._data.ndim}D tensor of shape {list(t._data.shape)}")


def _same_dtype(a, b, op):
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(
            f"{op}: expected both operands to have the same dtype, but got {a.dtype} and "
            f"{b.dtype}; convert one with .to(other.dtype)")


def _prod_int(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def mm(input, mat2):
    """Product of two matrices (no broadcasting).

    >>> dg.mm(dg.ones(2, 3), dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    if not (isinstance(input, Tensor) and isinstance(mat2, Tensor)) and _sparse(input, mat2):
        from ..sparse import mm as sparse_mm  # noqa: PLC0415  (dg.sparse is built on this layer; sparse operands only)

        return sparse_mm(input, mat2)
    input, mat2 = _tensor(input, "mm"), _tensor(mat2, "mm")
    _need_ndim(input, 2, "self", "mm")
    _need_ndim(mat2, 2, "mat2", "mm")
    return bind(matmul_p, (input, mat2))


def bmm(input, mat2):
    """Batched matrix product of ``(b, n, m)`` and ``(b, m, p)`` tensors."""
    input, mat2 = _tensor(input, "bmm"), _tensor(mat2, "bmm")
    _need_ndim(input, 3, "batch1", "bmm")
    _need_ndim(mat2, 3, "batch2", "bmm")
    b, _, k = input._data.shape
    if mat2._data.shape[:2] != (b, k):
        raise RuntimeError(
            f"bmm: Expected size for first two dimensions of batch2 tensor to be: [{b}, {k}] but "
            f"got: [{mat2._data.shape[0]}, {mat2._data.shape[1]}].")
    return bind(matmul_p, (input, mat2))


def mv(input, vec):
    """Matrix-vector product."""
    input, vec = _tensor(input, "mv"), _tensor(vec, "mv")
    _need_ndim(input, 2, "self", "mv")
    _need_ndim(vec, 1, "vec", "mv")
    return bind(matmul_p, (input, vec))


def dot(input, other):
    """Inner product of two 1-D tensors.

    >>> dg.dot(dg.tensor([1., 2.]), dg.tensor([3., 4.]))
    tensor(11.)
    """
    input, other = _tensor(input, "dot"), _tensor(other, "dot")
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {input._data.ndim}D and "
                           f"{other._data.ndim}D tensors")
    if input._data.shape != other._data.shape:
        n, m = input._data.shape[0], other._data.shape[0]
        raise RuntimeError(
            f"dot: inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
            f"number of elements, but got {n} and {m} elements respectively")
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found "
            f"{_cname(input._data.dtype).capitalize()} and {_cname(other._data.dtype).capitalize()}")
    return bind(matmul_p, (input, other))


vdot = dot  # real tensors only: no conjugation to do


def outer(input, vec2):
    """Outer product ``input[:, None] * vec2[None, :]`` of two vectors."""
    input, vec2 = _tensor(input, "outer"), _tensor(vec2, "outer")
    if input._data.ndim != 1 or vec2._data.ndim != 1:
        raise RuntimeError(f"outer: expected 1D vectors, but got {input._data.ndim}D and "
                           f"{vec2._data.ndim}D tensors")
    return bind(_st.reshape_p, (input,), {"shape": (input._data.shape[0], 1)}) * vec2


ger = outer


def _scaled_add(input, prod, beta, alpha):
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # PyTorch ignores input's values (even NaN) when beta is 0; its grad is 0
        return bind(_ew.where_p, (_TRUE, prod, input))
    return (input if beta == 1 else input * beta) + prod


_TRUE = Tensor._make(np.ones((), bool), False, None, 0)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return _scaled_add(_tensor(input, "addmm"), mm(mat1, mat2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``."""
    return _scaled_add(_tensor(input, "addmv"), mv(mat, vec), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    return _scaled_add(_tensor(input, "baddbmm"), bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    prod = _sred.sum(bmm(batch1, batch2), 0)
    return _scaled_add(_tensor(input, "addbmm"), prod, beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    return _scaled_add(_tensor(input, "addr"), outer(vec1, vec2), beta, alpha)


def tensordot(a, b, dims=2):
    """Contract ``dims`` of ``a`` with ``dims`` of ``b`` (an int: last/first ``dims``; or two
    lists of dimensions).

    >>> dg.tensordot(dg.ones(2, 3), dg.ones(3, 4), dims=1).shape
    dyngraph.Size([2, 4])
    """
    a, b = _tensor(a, "tensordot"), _tensor(b, "tensordot")
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot: expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(na, nb):
            raise RuntimeError(f"tensordot: dims={dims} is larger than the dimensions of the "
                               f"operands (shapes {list(a.shape)} and {list(b.shape)})")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
    da = [_wrap_dim(d, na, "tensordot") for d in da]
    db = [_wrap_dim(d, nb, "tensordot") for d in db]
    sa, sb = a._data.shape, b._data.shape
    for i, j in zip(da, db, strict=True):
        if sa[i] != sb[j]:
            raise RuntimeError(
                f"tensordot: contracted dimensions need to match, but first has size {sa[i]} in "
                f"dim {i} and second has size {sb[j]} in dim {j}")
    fa = [i for i in range(na) if i not in da]
    fb = [j for j in range(nb) if j not in db]
    k = _prod_int(sa[i] for i in da)
    am = _permute_reshape(a, fa + da, (_prod_int(sa[i] for i in fa), k))
    bm = _permute_reshape(b, db + fb, (k, _prod_int(sb[j] for j in fb)))
    res = bind(matmul_p, (am, bm))
    return bind(_st.reshape_p, (res,), {"shape": tuple(sa[i] for i in fa) + tuple(sb[j] for j in fb)})


def _permute_reshape(t, perm, shape):
    if perm != list(range(len(perm))):
        t = bind(_st.permute_p, (t,), {"dims": tuple(perm)})
    return bind(_st.reshape_p, (t,), {"shape": shape})


def inner(input, other):
    """Sum-product over the last dimension of both (a plain product if either is 0-d)."""
    input, other = _tensor(input, "inner"), _tensor(other, "inner")
    if input._data.ndim == 0 or other._data.ndim == 0:
        return input * other
    if input._data.shape[-1] != other._data.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input, other):
    """Kronecker product: blocks ``input[i, j] * other``."""
    input, other = _tensor(input, "kron"), _tensor(other, "kron")
    n = builtins.max(input._data.ndim, other._data.ndim)
    sa = (1,) * (n - input._data.ndim) + input._data.shape
    sb = (1,) * (n - other._data.ndim) + other._data.shape
    a = bind(_st.reshape_p, (input,), {"shape": tuple(x for s in sa for x in (s, 1))})
    b = bind(_st.reshape_p, (other,), {"shape": tuple(x for s in sb for x in (1, s))})
    return bind(_st.reshape_p, (a * b,), {"shape": tuple(p * q for p, q in zip(sa, sb, strict=True))})


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """A view of the diagonal with ``offset`` of the planes ``(dim1, dim2)``, as the last dim.

    >>> dg.diagonal(dg.tensor([[1., 2.], [3., 4.]]))
    tensor([1., 4.])
    """
    input = _tensor(input, "diagonal")
    n = input._data.ndim
    if n < 2:
        raise RuntimeError(f"diagonal: expected a tensor with at least 2 dimensions, got {n}D")
    d1, d2 = _wrap_dim(dim1, n, "diagonal"), _wrap_dim(dim2, n, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return bind(diagonal_p, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Place the last dimension of ``input`` on the diagonal of new planes ``(dim1, dim2)``."""
    input = _tensor(input, "diag_embed")
    n = input._data.ndim + 1
    d1, d2 = _wrap_dim(dim1, n, "diag_embed"), _wrap_dim(dim2, n, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    m = input._data.shape[-1] + abs(int(offset))
    rest = list(input._data.shape[:-1])
    shape = []
    for i in range(n):
        shape.append(m if i in (d1, d2) else rest.pop(0))
    # diag_embed_p fills np.diagonal(out, offset, d1, d2), whose last axis is input's last axis
    return bind(diag_embed_p, (input,), {"shape": tuple(shape), "offset": int(offset),
                                         "dim1": d1, "dim2": d2})


def diag(input, diagonal: int = 0):
    """1-D input: a square matrix with it on a diagonal; 2-D input: that diagonal (a copy)."""
    input = _tensor(input, "diag")
    n = input._data.ndim
    if n == 1:
        m = input._data.shape[0] + abs(int(diagonal))
        return bind(diag_embed_p, (input,), {"shape": (m, m), "offset": int(diagonal),
                                             "dim1": 0, "dim2": 1})
    if n == 2:
        return _sshape.clone(diagonal_(input, diagonal))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {n}D")


def diagflat(input, offset: int = 0):
    """A square matrix with the flattened ``input`` on diagonal ``offset``.

    >>> dg.diagflat(dg.tensor([[1., 2.]]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    return diag(_sshape.reshape(_tensor(input, "diagflat"), (-1,)), offset)


def diagonal_(input, offset):
    return bind(diagonal_p, (input,), {"offset": int(offset), "dim1": 0, "dim2": 1})


def trace(input):
    """Sum of the main diagonal of a matrix."""
    input = _tensor(input, "trace")
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    return _sred.sum(diagonal_(input, 0))


def _tri(prim, input, diagonal, op):
    input = _tensor(input, op)
    if input._data.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got "
                           f"{input._data.ndim}D (shape {list(input.shape)})")
    return bind(prim, (input,), {"diagonal": int(diagonal)})


def tril(input, diagonal: int = 0):
    """Lower triangle (on and below the ``diagonal``-th diagonal) of the last two dims."""
    return _tri(tril_p, input, diagonal, "tril")


def triu(input, diagonal: int = 0):
    """Upper triangle (on and above the ``diagonal``-th diagonal) of the last two dims."""
    return _tri(triu_p, input, diagonal, "triu")


def _parse_einsum(equation: str, shapes: list) -> tuple[str, list]:
    """Canonical ``'ab,bc->ac'`` form: explicit output, letters in place of ellipses,
    plus the per-letter size each operand must be expanded to (size-1 broadcasting)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ValueError(f"einsum(): {len(subs)} operands in the equation {equation!r} but "
                         f"{len(shapes)} tensors were given")
    used = set(c for c in eq if c.isalpha())
    for c in eq:
        if not (c.isalpha() or c in ",.->"):
            raise ValueError(f"einsum(): invalid subscript {c!r} in equation {equation!r}")
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for s, shp in zip(subs, shapes, strict=True):
        if "..." in s:
            n_ell = builtins.max(n_ell, len(shp) - (len(s) - 3))
    ell = "".join(free[:n_ell])
    out_subs = []
    for i, (s, shp) in enumerate(zip(subs, shapes, strict=True)):
        if "..." in s:
            k = len(shp) - (len(s) - 3)
            if k < 0:
                raise ValueError(f"einsum(): operand {i} has {len(shp)} dims, too few for "
                                 f"subscripts {s!r}")
            s = s.replace("...", ell[n_ell - k:] if k else "")
        if len(s) != len(shp) or not all(c.isalpha() for c in s):
            raise ValueError(
                f"einsum(): the number of subscripts in the equation ({len(s)}) does not match "
                f"the number of dimensions ({len(shp)}) for operand {i} (subscripts {subs[i]!r}, "
                f"shape {list(shp)})")
        out_subs.append(s)
    if arrow:
        rhs = rhs.replace("...", ell)
        if len(set(rhs)) != len(rhs):
            raise ValueError(f"einsum(): output subscript appears more than once in {equation!r}")
        allin = set("".join(out_subs))
        for c in rhs:
            if c not in allin:
                raise ValueError(f"einsum(): output subscript {c!r} does not appear in the "
                                 f"inputs of {equation!r}")
    else:
        joined = "".join(s for s in subs)
        once = sorted(c for c in set(joined) if c.isalpha() and joined.count(c) == 1)
        rhs = ell + "".join(once)
    sizes: dict = {}
    for i, (s, shp) in enumerate(zip(out_subs, shapes, strict=True)):
        for c, n in zip(s, shp, strict=True):
            old = sizes.get(c, 1)
            if old != n and old != 1 and n != 1:
                raise RuntimeError(
                    f"einsum(): operands do not broadcast with remapped shapes: subscript {c!r} "
                    f"has size {old} in one operand and {n} in operand {i} ({equation!r})")
            sizes[c] = builtins.max(old, n)
    return ",".join(out_subs) + "->" + rhs, [tuple(sizes[c] for c in s) for s in out_subs]


def _sublist_equation(args):
    def letters(sub):
        out = []
        for i in sub:
            if i is Ellipsis:
                out.append("...")
            elif isinstance(i, int) and 0 <= i < 52:
                out.append(string.ascii_letters[i])
            else:
                raise ValueError(f"einsum(): subscript in sublist format must be an int in [0, 52) "
                                 f"or Ellipsis, got {i!r}")
        return "".join(out)

    ops, subs = list(args[0::2]), list(args[1::2])
    if len(subs) == len(ops):  # no output sublist
        return ",".join(letters(s) for s in subs), tuple(ops)
    out = ops.pop()  # the trailing item is the output sublist
    return ",".join(letters(s) for s in subs) + "->" + letters(out), tuple(ops)


def einsum(equation: str, *operands):
    """Einstein summation (``'ij,jk->ik'``, implicit output, ``...`` broadcasting,
    repeated subscripts such as ``'ii->i'``).

    >>> dg.einsum('ij,jk->ik', dg.ones(2, 3), dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    if not isinstance(equation, str):  # sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ops = [_tensor(o, "einsum") for o in operands]
    if not ops:
        raise ValueError("einsum(): must provide at least one operand")
    dt = ops[0]._data.dtype
    for o in ops[1:]:
        if o._data.dtype != dt:
            raise RuntimeError(f"einsum(): operands do not all have the same dtype ({ops[0].dtype} "
                               f"and {o.dtype}); convert them first")
    canon, targets = _parse_einsum(equation, [o._data.shape for o in ops])
    for i, (o, t) in enumerate(zip(ops, targets, strict=True)):
        if o._data.shape != t:
            ops[i] = bind(_st.expand_p, (o,), {"shape": t})
    return bind(einsum_p, tuple(ops), {"equation": canon})


_QRResult = namedtuple("qr", ["Q", "R"])


def qr(input, mode: str = "reduced"):
    """QR decomposition ``A = Q R`` (``mode``: ``'reduced'``, ``'complete'`` or ``'r'``)
    as a named tuple ``(Q, R)``; differentiable for ``m >= n`` in the reduced mode."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    q, r = bind(qr_p, (_tensor(input, "linalg.qr"),), {"mode": mode})
    return _QRResult(q, r)


_EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])


def eigh(A, UPLO: str = "L"):
    """Eigen-decomposition of symmetric matrices (only the ``UPLO`` triangle is read):
    ``(eigenvalues ascending, eigenvectors as columns)``; differentiable (eigenvalues
    assumed distinct where eigenvectors are differentiated).

    >>> L, V = dg.linalg.eigh(dg.tensor([[2., 1.], [1., 2.]]))
    >>> L
    tensor([1., 3.])
    """
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    w, v = bind(eigh_p, (_tensor(A, "linalg.eigh"),), {"UPLO": UPLO})
    return _EighResult(w, v)


def eigvalsh(A, UPLO: str = "L"):
    """Eigenvalues (ascending) of symmetric matrices; see :func:`eigh`."""
    return eigh(A, UPLO).eigenvalues


_SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])


_TorchSVDResult = namedtuple("svd", ["U", "S", "V"])


def linalg_svd(A, full_matrices: bool = True, *, driver=None):
    """Singular value decomposition ``A = U diag(S) Vh`` as ``(U, S, Vh)``, singular
    values descending; differentiable (distinct, non-zero singular values assumed where
    singular vectors are differentiated).  ``dg.linalg.svd``.

    >>> U, S, Vh = dg.linalg.svd(dg.tensor([[3., 0.], [0., 4.]]))
    >>> S
    tensor([4., 3.])
    """
    u, s, vh = bind(svd_p, (_tensor(A, "linalg.svd"),), {"full_matrices": bool(full_matrices)})
    return _SVDResult(u, s, vh)


def svdvals(A, *, driver=None):
    """Singular values (descending) of ``A``; ``dg.linalg.svdvals``."""
    return linalg_svd(A, full_matrices=False).S


def svd(input, some: bool = True, compute_uv: bool = True):
    """The older ``torch.svd``: ``(U, S, V)`` with ``V`` (not ``Vh``); ``some=True`` is
    the reduced decomposition.  Prefer ``dg.linalg.svd``."""
    if not compute_uv:  # zero-filled (m, m) and (n, n) U and V, as PyTorch returns
        s = svdvals(input)
        x = input._data
        u0 = np.zeros(x.shape[:-2] + (x.shape[-2],) * 2, x.dtype)
        v0 = np.zeros(x.shape[:-2] + (x.shape[-1],) * 2, x.dtype)
        return _TorchSVDResult(Tensor._make(u0, False, None, 0), s, Tensor._make(v0, False, None, 0))
    u, s, vh = linalg_svd(input, full_matrices=not some)
    return _TorchSVDResult(u, s, vh.mT)


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False):
    """Moore-Penrose pseudo-inverse through the SVD: singular values at or below
    ``max(atol, rtol * S_max)`` are treated as zero (default ``rtol = eps * max(m, n)``
    when neither is given, as in PyTorch).  ``dg.linalg.pinv``."""
    A = _tensor(A, "linalg.pinv")
    u, s, vh = linalg_svd(A, full_matrices=False)
    m, n = A.shape[-2], A.shape[-1]
    if rtol is None:
        rtol = float(np.finfo(A._data.dtype).eps) * max(m, n) if not atol else 0.0
    cut = _sred.amax(s, -1, keepdim=True) * rtol if s._data.size else s
    if atol:
        cut = _sew.clamp(cut, min=float(atol))
    keep = s > cut
    s_inv = _sew.where(keep, 1.0 / _sew.where(keep, s, 1.0), 0.0)
    return (vh.mT * s_inv.unsqueeze(-2)) @ u.mT


_LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of ``A X = B`` (minimum-norm when under-determined), as
    PyTorch's default CPU driver ``'gelsy'`` reports it: ``(solution, residuals=empty,
    rank, singular_values=empty)``.  Computed through the pseudo-inverse, so it is
    differentiable.  ``dg.linalg.lstsq``.

    >>> dg.linalg.lstsq(A, B).solution     # (n, k) for A (m, n), B (m, k)
    """
    A, B = _tensor(A, "linalg.lstsq"), _tensor(B, "linalg.lstsq")
    if A.ndim < 2 or B.ndim < 2 or A.shape[-2] != B.shape[-2]:
        raise RuntimeError(
            f"linalg.lstsq: expected A (*, m, n) and B (*, m, k) with the same m, got shapes "
            f"{list(A.shape)} and {list(B.shape)}")
    if driver not in (None, "gelsy"):
        raise NotImplementedError(f"linalg.lstsq: only the default 'gelsy' driver is available, "
                                  f"got driver={driver!r}")
    m, n = A.shape[-2], A.shape[-1]
    if rcond is None:
        rcond = float(np.finfo(A._data.dtype).eps) * max(m, n)
    s = concrete(svdvals(A.detach()), "lstsq: the singular values decide the rank")
    smax = s[..., :1] if s.size else s
    rank = (s > rcond * smax).sum(-1).astype(np.int64)
    empty = np.zeros((0,), A._data.dtype)
    return _LstsqResult(pinv(A, rtol=rcond) @ B, Tensor._make(empty, False, None, 0),
                        Tensor._make(np.asarray(rank), False, None, 0),
                        Tensor._make(empty.copy(), False, None, 0))


def pinverse(input, rcond: float = 1e-15):
    """``torch.pinverse``: :func:`pinv` with relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


def inverse(input):
    """Inverse of a (batch of) square matrices.

    >>> dg.inverse(dg.tensor([[2., 0.], [0., 4.]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    return bind(inv_p, (_tensor(input, "linalg.inv"),))


def det(input):
    """Determinant of a (batch of) square matrices; differentiable, also at singular ones."""
    return bind(det_p, (_tensor(input, "linalg.det"),))


def slogdet(input):
    """``(sign, logabsdet)`` of the determinant, as a named tuple."""
    return _SlogdetResult(*bind(slogdet_p, (_tensor(input, "linalg.slogdet"),)))


def logdet(input):
    """``log(det(input))``: NaN for a negative determinant, -inf for a singular matrix."""
    sign, logabs = slogdet(input)
    return _sew.where(sign < 0, float("nan"), logabs)


_SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


def cholesky(input, upper: bool = False):
    """Cholesky factor ``L`` (``L @ L.mT == input``), or the upper ``U = L.mT``."""
    L = bind(cholesky_p, (_tensor(input, "linalg.cholesky"),))
    return L.mT if upper else L


def solve(A, B, *, left: bool = True):
    """The ``X`` with ``A @ X = B`` (``X @ A = B`` when ``left=False``); ``B`` may be a vector."""
    A, B = _tensor(A, "linalg.solve"), _tensor(B, "linalg.solve")
    if not left:
        return solve(A.mT, B.mT).mT
    if B._data.ndim == 1 or (B._data.ndim == A._data.ndim - 1 and B._data.shape == A._data.shape[:-1]):
        col = bind(_st.reshape_p, (B,), {"shape": B._data.shape + (1,)})
        x = bind(solve_p, (A, col))
        return bind(_st.reshape_p, (x,), {"shape": x._data.shape[:-1]})
    return bind(solve_p, (A, B))


def _tri_inplace(fn, name):
    def method(self, diagonal: int = 0):
        return apply_inplace(self, lambda s: fn(s, diagonal), name)

    method.__name__ = name
    method.__doc__ = f"In-place ``{fn.__name__}``: ``x.{name}(diagonal=0)``."
    return method


def linalg_cross(input, other, *, dim: int = -1):
    """Cross product of 3-vectors along ``dim`` (broadcast); ``dg.linalg.cross``.

    >>> dg.linalg.cross(dg.tensor([1., 0., 0.]), dg.tensor([0., 1., 0.]))
    tensor([0., 0., 1.])
    """
    a, b = _tensor(input, "linalg.cross"), _tensor(other, "linalg.cross")
    if a.ndim != b.ndim:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        a, b = a.expand(*shape), b.expand(*shape)
    d = _wrap_dim(dim, a.ndim, "linalg.cross")
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    # (a x b)_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1}: cyclic shifts along dim
    return (_sshape.roll(a, -1, d) * _sshape.roll(b, -2, d)
            - _sshape.roll(a, -2, d) * _sshape.roll(b, -1, d))


def cross(input, other, dim=None):
    """``torch.cross``: like :func:`linalg_cross`, but without ``dim`` it uses the first
    dimension of size 3 (PyTorch's older default)."""
    if dim is None:
        a = _tensor(input, "cross")
        sizes = np.broadcast_shapes(tuple(a.shape), tuple(_tensor(other, "cross").shape))
        dim = next((i for i, n in enumerate(sizes) if n == 3), -1)
    return linalg_cross(input, other, dim=dim)


