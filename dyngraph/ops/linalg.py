"""Linear algebra primitives: matmul (batched, broadcasting) and friends."""

from __future__ import annotations

import builtins
import string
from collections import namedtuple

import numpy as np

from .._core.state import STATE, concrete
from ..surface import elementwise as _sew  # (moves to the surface with this family's functions)
from ..surface import reduction as _sred  # (likewise)
from ..surface import shape as _sshape  # (likewise)
from ..tensor import Tensor, _wrap_dim
from . import elementwise as _ew
from . import shape as _shape
from ._util import as_tensor_arg, install
from .registry import bind, primitive

__all__ = [
    "matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm", "addmv", "baddbmm",
    "addbmm", "addr", "tensordot", "inner", "kron", "diagonal", "diag", "diagflat", "diag_embed", "trace",
    "tril", "triu", "einsum", "inverse", "det", "slogdet", "logdet", "cholesky", "qr", "svd",
    "pinverse", "cross",
]


def _check_matmul(x, y):
    """Raise PyTorch's error for operands ``np.matmul`` refused, naming the op and shapes."""
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(
            f"matmul: both arguments to matmul need to be at least 1D, but they are {x.ndim}D "
            f"and {y.ndim}D")
    kx = x.shape[-1]
    ky = y.shape[-2] if y.ndim >= 2 else y.shape[0]
    if kx != ky:
        if x.ndim == 1 and y.ndim == 1:
            raise RuntimeError(
                f"matmul: inconsistent tensor size, expected tensor [{kx}] and src [{ky}] to have "
                f"the same number of elements, but got {kx} and {ky} elements respectively")
        if y.ndim == 1:
            raise RuntimeError(f"matmul: size mismatch, got input ({x.shape[-2]}), mat "
                               f"({_fmt(x.shape)}), vec ({ky})")
        raise RuntimeError(
            f"matmul: mat1 and mat2 shapes cannot be multiplied ({_fmt(x.shape)} and "
            f"{_fmt(y.shape)})")
    bx, by = x.shape[:-2], y.shape[:-2]
    for i in range(1, builtins.min(len(bx), len(by)) + 1):
        if bx[-i] != by[-i] and 1 not in (bx[-i], by[-i]):
            n = builtins.max(len(bx), len(by)) - i
            raise RuntimeError(
                f"matmul: The size of tensor a ({bx[-i]}) must match the size of tensor b "
                f"({by[-i]}) at non-singleton dimension {n} (shapes {list(x.shape)} and "
                f"{list(y.shape)})")


def _fmt(shape):
    if len(shape) == 1:
        return f"1x{shape[0]}"
    return "x".join(map(str, shape))


_BLAS_KINDS = frozenset("fc")


def mm_rule(a, b):
    """``a @ b`` inside a vjp rule (2-D or matrix-vector operands).

    On NumPy arrays (a plain ``backward()``): ``K == 1`` -- an outer product, e.g. the weight
    gradient of a batch-1 ``linear`` -- is a broadcasting multiply, 5-20x faster than NumPy's
    GEMM for ``(128, 1) @ (1, 128)`` and exactly equal to it (one product per element,
    nothing summed); anything else is the ``@`` operator, the cheapest call for small
    products.  Otherwise (Tensors under ``create_graph``) ``matmul_p``, which binds.

    >>> mm_rule(np.ones((3, 1)), np.ones((1, 2))).shape
    (3, 2)
    """
    if type(a) is np.ndarray and type(b) is np.ndarray:
        if a.ndim == 2 and a.shape[1] == 1 and b.ndim == 2:
            return a * b
        return a @ b
    return matmul_p(a, b)


@primitive("matmul", save_inputs=True)
def matmul_p(x, y):
    if x.dtype is not y.dtype and x.dtype != y.dtype:
        raise RuntimeError(
            f"matmul: expected m1 and m2 to have the same dtype, but got: {_cname(x.dtype)} != "
            f"{_cname(y.dtype)} (shapes {list(x.shape)} and {list(y.shape)}); convert one "
            "operand with .to(other.dtype)")
    try:
        return np.matmul(x, y)
    except ValueError:
        _check_matmul(x, y)
        raise


def _sum_to(g, shape):
    from .reduction import sum_to_shape_p  # noqa: PLC0415

    return sum_to_shape_p(g, shape=tuple(shape))


def _unsq_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    return reshape_p(a, shape=tuple(a.shape) + (1,))


def _unsq_second_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    s = tuple(a.shape)
    return reshape_p(a, shape=s[:-1] + (1,) + s[-1:])


def _matmul_vjp_x(g, out, x, y):
    if x.ndim == 2 and y.ndim == 2:  # the common case: no batch dimensions to sum over
        return mm_rule(g, y.mT)  # arrays: NumPy directly (K == 1: a multiply); Tensors: bind
    if x.ndim == 1 and y.ndim == 1:
        return g * y
    if y.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        gx = _unsq_last(g) * y  # an outer product for a matrix x: already x's shape
        return gx if x.ndim == 2 else _sum_to(gx, x.shape)
    if x.ndim == 1 and y.ndim == 2:  # (k,) @ (k, m) -> (m,): a matrix-vector product
        return mm_rule(y, g)
    if x.ndim == 1:  # (k,) @ (..., k, m) -> (..., m)
        gx = matmul_p(y, _unsq_last(g))  # (..., k, 1)
        return _sum_to(_squeeze_last(gx), x.shape)
    gx = g @ y.mT
    return gx if gx.shape == x.shape else _sum_to(gx, x.shape)


def _squeeze_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    return reshape_p(a, shape=tuple(a.shape)[:-1])


def _matmul_vjp_y(g, out, x, y):
    if x.ndim == 2 and y.ndim == 2:
        return mm_rule(x.mT, g)
    if x.ndim == 1 and y.ndim == 1:
        return g * x
    if x.ndim == 1:  # (k,) @ (..., k, m): gy = x[:, None] * g[..., None, :]
        if y.ndim == 2:  # an outer product, already y's shape
            return _unsq_last(x) * g
        return _sum_to(_unsq_last(x) * _unsq_second_last(g), y.shape)
    if x.ndim == 2 and y.ndim == 1:  # (n, k) @ (k,) -> (n,): gy = g @ x (vector-matrix)
        return mm_rule(g, x)
    if y.ndim == 1:  # (..., n, k) @ (k,): gy = sum over ... of x^T g
        gy = matmul_p(x.mT, _unsq_last(g))  # (..., k, 1)
        return _sum_to(_squeeze_last(gy), y.shape)
    gy = x.mT @ g
    return gy if gy.shape == y.shape else _sum_to(gy, y.shape)


matmul_p.defvjp(_matmul_vjp_x, _matmul_vjp_y)


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting of batch dimensions.

    >>> (dg.ones(2, 3) @ dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)) and _sparse(input, other):
        from ..sparse import matmul as sparse_matmul  # noqa: PLC0415

        return sparse_matmul(input, other)
    input = as_tensor_arg(input, "matmul")
    other = as_tensor_arg(other, "matmul")
    return bind(matmul_p, (input, other))


def _sparse(*xs) -> bool:
    """Whether an operand is a ``dg.sparse`` COO tensor (not a Tensor: dg.sparse multiplies it)."""
    from ..sparse import SparseTensor  # noqa: PLC0415

    return any(isinstance(x, SparseTensor) for x in xs)


def _matmul_method(self, other):
    if not isinstance(other, Tensor) and _sparse(other):
        return NotImplemented   # dense @ sparse: SparseTensor.__rmatmul__
    return bind(matmul_p, (self, other if isinstance(other, Tensor) else as_tensor_arg(other, "matmul")))


def _rmatmul_method(self, other):
    return bind(matmul_p, (as_tensor_arg(other, "matmul"), self))


# ===========================================================================
# argument checks with PyTorch's wording (prefixed with the op name)
# ===========================================================================

_C_NAMES = {"float32": "float", "float64": "double", "float16": "Half", "int64": "long",
            "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool"}


def _cname(dt) -> str:
    return _C_NAMES.get(np.dtype(dt).name, np.dtype(dt).name)


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


# ===========================================================================
# products built on matmul
# ===========================================================================

def mm(input, mat2):
    """Product of two matrices (no broadcasting).

    >>> dg.mm(dg.ones(2, 3), dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    if not (isinstance(input, Tensor) and isinstance(mat2, Tensor)) and _sparse(input, mat2):
        from ..sparse import mm as sparse_mm  # noqa: PLC0415

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
    return bind(_shape.reshape_p, (input,), {"shape": (input._data.shape[0], 1)}) * vec2


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
    return bind(_shape.reshape_p, (res,), {"shape": tuple(sa[i] for i in fa) + tuple(sb[j] for j in fb)})


def _permute_reshape(t, perm, shape):
    if perm != list(range(len(perm))):
        t = bind(_shape.permute_p, (t,), {"dims": tuple(perm)})
    return bind(_shape.reshape_p, (t,), {"shape": shape})


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
    a = bind(_shape.reshape_p, (input,), {"shape": tuple(x for s in sa for x in (s, 1))})
    b = bind(_shape.reshape_p, (other,), {"shape": tuple(x for s in sb for x in (1, s))})
    return bind(_shape.reshape_p, (a * b,), {"shape": tuple(p * q for p, q in zip(sa, sb, strict=True))})


# ===========================================================================
# diagonals and triangles
# ===========================================================================

@primitive("diagonal", meta=True, is_view=True)
def diagonal_p(x, offset=0, dim1=0, dim2=1):
    d = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:  # PyTorch's diagonal is a writable view
        d.flags.writeable = True
    return d


@primitive("diagonal_scatter_zeros", torch_name="DiagEmbedBackward0")
def diag_embed_p(g, shape=(), offset=0, dim1=0, dim2=1):
    """Zeros of ``shape`` with ``g`` on the given diagonal (the adjoint of ``diagonal``)."""
    out = np.zeros(shape, dtype=g.dtype)
    view = np.diagonal(out, offset, dim1, dim2)
    view.flags.writeable = True
    view[...] = g
    return out


diagonal_p.defvjp(lambda g, out, x, offset=0, dim1=0, dim2=1:
                  diag_embed_p(g, shape=tuple(x.shape), offset=offset, dim1=dim1, dim2=dim2))
diag_embed_p.defvjp(lambda g, out, x, shape=(), offset=0, dim1=0, dim2=1:
                    diagonal_p(g, offset=offset, dim1=dim1, dim2=dim2))


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


@primitive("tril")
def tril_p(x, diagonal=0):
    return np.tril(x, diagonal)


@primitive("triu")
def triu_p(x, diagonal=0):
    return np.triu(x, diagonal)


tril_p.defvjp(lambda g, out, x, diagonal=0: tril_p(g, diagonal=diagonal))
triu_p.defvjp(lambda g, out, x, diagonal=0: triu_p(g, diagonal=diagonal))


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


# ===========================================================================
# einsum
# ===========================================================================

@primitive("einsum", save_inputs=True)
def einsum_p(*ops, equation=""):
    # path optimisation (BLAS, good contraction order) pays off beyond tiny operands
    big = len(ops) > 2 or builtins.sum(o.size for o in ops) > 2048
    out = np.einsum(equation, *ops, optimize=big)
    if len(ops) == 1 and np.may_share_memory(out, ops[0]):
        out = out.copy()  # 'ii->i', 'ij->ji' give NumPy views; einsum results own their data
    return out


def _uniq(s: str) -> str:
    return "".join(dict.fromkeys(s))


def _einsum_vjp(k, g, out, *ops, equation=""):
    """Gradient for operand ``k``: an einsum of ``g`` with the other operands.

    Letters of operand ``k`` that appear nowhere else were summed out: the
    gradient is broadcast along them.  Repeated letters (``'ii'``) address a
    diagonal: the gradient is computed per distinct letter, then placed on it.
    """
    lhs, rhs = equation.split("->")
    subs = lhs.split(",")
    mine = subs[k]
    uniq = _uniq(mine)
    others = [s for j, s in enumerate(subs) if j != k]
    avail = set(rhs).union(*others)
    keep = "".join(c for c in uniq if c in avail)
    other_ops = [o for j, o in enumerate(ops) if j != k]
    eq = ",".join([rhs] + others) + "->" + keep
    gk = einsum_p(g, *other_ops, equation=eq)
    shape = tuple(ops[k].shape)
    size = {c: shape[i] for i, c in enumerate(mine)}
    if len(keep) < len(uniq):
        gk = _shape.reshape_p(gk, shape=tuple(size[c] if c in avail else 1 for c in uniq))
        gk = _shape.expand_p(gk, shape=tuple(size[c] for c in uniq))
    elif keep != uniq:  # cannot happen (keep keeps uniq's order) but stay safe
        raise AssertionError(equation)
    if len(uniq) < len(mine):
        gk = einsum_embed_p(gk, src=uniq, dst=mine, shape=shape)
    return gk


einsum_p.defvjp_argnum(_einsum_vjp)


@primitive("einsum_embed")
def einsum_embed_p(g, src="", dst="", shape=()):
    """Zeros of ``shape`` (subscripts ``dst`` with repeated letters) holding ``g`` (``src``)
    on the diagonals that the repeated letters name; the adjoint of ``einsum('dst->src')``."""
    out = np.zeros(shape, dtype=g.dtype)
    np.einsum(f"{dst}->{src}", out)[...] = g  # a writable view of those diagonals
    return out


einsum_embed_p.defvjp(lambda g, out, x, src="", dst="", shape=(): einsum_p(g, equation=f"{dst}->{src}"))


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
            ops[i] = bind(_shape.expand_p, (o,), {"shape": t})
    return bind(einsum_p, tuple(ops), {"equation": canon})


# ===========================================================================
# inverse, determinants, solve, cholesky
# ===========================================================================

def _square(x, op):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        if x.ndim < 2:
            raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{x.shape[-2]} by {x.shape[-1]} matrices")
    if x.dtype.kind != "f":
        raise RuntimeError(f"{op}: Expected a floating point tensor as input. Got {_cname(x.dtype)}")


@primitive("inv", save_output=True, torch_name="LinalgInvExBackward0")
def inv_p(x):
    _square(x, "linalg.inv")
    try:
        return np.linalg.inv(x)
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.inv: the input matrix is singular, so the inversion could not be completed "
            f"(shape {list(x.shape)}); check the matrix or use a pseudo-inverse") from None


inv_p.defvjp(lambda g, out, x: -(out.mT @ g @ out.mT))


def _unsq2(a):
    s = tuple(a.shape)
    return _shape.reshape_p(a, shape=s + (1, 1))


@primitive("det", save_inputs=True, save_output=True, torch_name="LinalgDetBackward0")
def det_p(x):
    _square(x, "linalg.det")
    return np.linalg.det(x)


def _det_vjp(g, out, x):
    # the adjugate formula needs an invertible matrix; outside graph capture a singular
    # one takes the SVD route below (a captured graph keeps the formula: loud at replay)
    if STATE.interpreter is not None or np.all(_np(out) != 0):
        return _unsq2(g * out) * inv_p(x).mT
    if isinstance(x, Tensor):
        raise NotImplementedError(
            "linalg.det: higher-order gradients at a singular matrix are not implemented "
            "(the first-order gradient is)")
    return _unsq2(g) * _cofactor(x)


def _cofactor(a):
    """The cofactor matrix (transposed adjugate), also for singular matrices, via the SVD."""
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    prods = np.empty_like(s)
    for i in range(n):
        prods[..., i] = np.prod(np.delete(s, i, axis=-1), axis=-1)
    sign = (np.linalg.det(u) * np.linalg.det(vt))[..., None, None]
    adj = (vt.mT * prods[..., None, :]) @ u.mT * sign  # adj(A) = V adj(S) U^T det(U) det(V)
    return adj.mT


det_p.defvjp(_det_vjp)


@primitive("slogdet", n_outputs=2, save_inputs=True, torch_name="LinalgSlogdetBackward0")
def slogdet_p(x):
    _square(x, "linalg.slogdet")
    sign, logabs = np.linalg.slogdet(x)
    return np.asarray(sign), np.asarray(logabs)


slogdet_p.defvjp(lambda g, out, x: _unsq2(g[1]) * inv_p(x).mT)


@primitive("solve", save_inputs=True, save_output=True, broadcasts=True,
           torch_name="LinalgSolveExBackward0")
def solve_p(a, b):
    _square(a, "linalg.solve")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
            f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    if a.dtype != b.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {_cname(a.dtype)} and B of type {_cname(b.dtype)} instead")
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.solve: The solver failed because the input matrix is "
                           f"singular (A of shape {list(a.shape)}).") from None


def _solve_vjp_a(g, out, a, b):
    return -(solve_p(a.mT, g) @ out.mT)


def _solve_vjp_b(g, out, a, b):
    return solve_p(a.mT, g)


solve_p.defvjp(_solve_vjp_a, _solve_vjp_b)


@primitive("cholesky", save_output=True, torch_name="LinalgCholeskyExBackward0")
def cholesky_p(x):
    _square(x, "linalg.cholesky")
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.cholesky: The factorization could not be completed because the input is not "
            f"positive-definite (shape {list(x.shape)}).") from None


def _cholesky_vjp(g, out, x):
    # Phi(L^T gL) with the diagonal halved, mapped back by L^{-T} . L^{-1}, symmetrised
    n = out.shape[-1]
    half = 1.0 - 0.5 * np.eye(n, dtype=_np(out).dtype)
    linv = inv_p(out)
    phi = tril_p(out.mT @ g, diagonal=0) * half
    ga = linv.mT @ phi @ linv
    return (ga + ga.mT) * 0.5


cholesky_p.defvjp(_cholesky_vjp)


@primitive("qr", n_outputs=2, meta=True, save_output=True, torch_name="LinalgQrBackward0")
def qr_p(x, mode="reduced"):
    if x.ndim < 2:
        raise RuntimeError(f"linalg.qr: The input tensor A must have at least 2 dimensions, "
                           f"got shape {list(x.shape)}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"linalg.qr: Expected a floating point tensor as input. Got {_cname(x.dtype)}")
    if mode == "r":
        r = np.linalg.qr(x, mode="r")
        return np.empty((0,), x.dtype), r
    q, r = np.linalg.qr(x, mode=mode)
    return q, r


def _copyltu(m):
    return tril_p(m, diagonal=0) + tril_p(m, diagonal=-1).mT


def _qr_vjp(g, out, x, mode="reduced"):
    m, n = x.shape[-2], x.shape[-1]
    if mode == "r":
        raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                           "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                           "you are going to differentiate through linalg.qr.")
    if m < n:
        raise NotImplementedError(
            f"linalg.qr: the gradient for wide matrices ({m}x{n}, m < n) is not implemented; "
            "differentiate the QR of the transpose or of a tall slice instead")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    gq, gr = g
    q, r = out
    # A = QR (m >= n): gA = (gQ + Q copyltu(M)) R^{-T},  M = R gR^T - gQ^T Q
    mm_ = r @ gr.mT - gq.mT @ q
    b = gq + q @ _copyltu(mm_)
    return solve_p(r, b.mT).mT  # b R^{-T}


qr_p.defvjp(_qr_vjp)


_QRResult = namedtuple("qr", ["Q", "R"])


def qr(input, mode: str = "reduced"):
    """QR decomposition ``A = Q R`` (``mode``: ``'reduced'``, ``'complete'`` or ``'r'``)
    as a named tuple ``(Q, R)``; differentiable for ``m >= n`` in the reduced mode."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    q, r = bind(qr_p, (_tensor(input, "linalg.qr"),), {"mode": mode})
    return _QRResult(q, r)


@primitive("eigh", n_outputs=2, meta=True, save_output=True, torch_name="LinalgEighBackward0")
def eigh_p(x, UPLO="L"):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"linalg.eigh: A must be batches of square matrices, but they are "
                           f"{x.shape[-2] if x.ndim >= 2 else ''} by {x.shape[-1] if x.ndim else ''} matrices"
                           f" (shape {list(x.shape)})")
    if x.dtype.kind != "f":
        raise RuntimeError(f"linalg.eigh: Expected a floating point tensor as input. Got {_cname(x.dtype)}")
    w, v = np.linalg.eigh(x, UPLO=UPLO)
    return w.astype(x.dtype, copy=False), v.astype(x.dtype, copy=False)


def _eigh_vjp(g, out, x, UPLO="L"):
    # A = V diag(L) V^T: gA = V (diag(gL) + F * skew(V^T gV)) V^T, F_ij = 1 / (L_j - L_i)
    # off the diagonal (PyTorch's symmetric form; distinct eigenvalues assumed).
    gl, gv = g
    lam, v = out
    n = x.shape[-1]
    eye = np.eye(n, dtype=x.dtype)
    row = _shape.reshape_p(lam, shape=tuple(x.shape[:-2]) + (1, n))
    col = _shape.reshape_p(lam, shape=tuple(x.shape[:-2]) + (n, 1))
    f = (1.0 - eye) / (row - col + eye)
    vtg = v.mT @ gv
    inner = _shape.reshape_p(gl, shape=tuple(x.shape[:-2]) + (1, n)) * eye + f * (vtg - vtg.mT) * 0.5
    return v @ inner @ v.mT


eigh_p.defvjp(_eigh_vjp)


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


@primitive("svd", n_outputs=3, meta=True, save_output=True, torch_name="LinalgSvdBackward0")
def svd_p(x, full_matrices=True):
    if x.ndim < 2:
        raise RuntimeError(f"linalg.svd: The input tensor A must have at least 2 dimensions, "
                           f"got shape {list(x.shape)}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"linalg.svd: Expected a floating point tensor as input. Got {_cname(x.dtype)}")
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return u.astype(x.dtype, copy=False), s.astype(x.dtype, copy=False), vh.astype(x.dtype, copy=False)


def _svd_vjp(g, out, x, full_matrices=True):
    # A = U S Vh (first k = min(m, n) singular vectors; with full_matrices the others
    # get no gradient, as in PyTorch):
    # gA = U [skew(U^T gU) / E * S_row + S_col * skew(V^T gV) / E + diag(gS)] Vh
    #      + (I - U U^T) gU S^-1 Vh + U S^-1 gV^T (I - V V^T),  E_jk = S_k^2 - S_j^2 (1 on the diagonal)
    gu, gs, gvh = g
    u, s, vh = out
    m, n = x.shape[-2], x.shape[-1]
    k = min(m, n)
    if full_matrices and m != n:
        u, gu = u[..., :, :k], gu[..., :, :k]
        vh, gvh = vh[..., :k, :], gvh[..., :k, :]
    batch = tuple(x.shape[:-2])
    eye = np.eye(k, dtype=x.dtype)
    s_row = _shape.reshape_p(s, shape=batch + (1, k))
    s_col = _shape.reshape_p(s, shape=batch + (k, 1))
    e = s_row * s_row - s_col * s_col + eye
    v, gv = vh.mT, gvh.mT
    utgu = u.mT @ gu
    vtgv = v.mT @ gv
    inner = ((utgu - utgu.mT) / e * s_row + s_col * ((vtgv - vtgv.mT) / e)
             + _shape.reshape_p(gs, shape=batch + (1, k)) * eye)
    ga = u @ inner @ vh
    if m > k:
        ga = ga + (gu - u @ (u.mT @ gu)) / s_row @ vh
    if n > k:
        ga = ga + u @ ((gv.mT - (gv.mT @ v) @ v.mT) / s_col)
    return ga


svd_p.defvjp(_svd_vjp)


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


def _np(a):
    return a._data if isinstance(a, Tensor) else a


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
        col = bind(_shape.reshape_p, (B,), {"shape": B._data.shape + (1,)})
        x = bind(solve_p, (A, col))
        return bind(_shape.reshape_p, (x,), {"shape": x._data.shape[:-1]})
    return bind(solve_p, (A, B))


install({
    "matmul": matmul, "__matmul__": _matmul_method, "__rmatmul__": _rmatmul_method,
    "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "vdot": vdot, "outer": outer, "ger": ger,
    "addmm": addmm, "addmv": addmv, "baddbmm": baddbmm, "addbmm": addbmm, "addr": addr,
    "inner": inner, "kron": kron, "diagonal": diagonal, "diag": diag, "diagflat": diagflat, "diag_embed": diag_embed,
    "trace": trace, "tril": tril, "triu": triu, "inverse": inverse, "det": det,
    "slogdet": slogdet, "logdet": logdet, "cholesky": cholesky, "qr": qr,
})


def _tri_inplace(fn, name):
    def method(self, diagonal: int = 0):
        from .inplace import apply_inplace  # noqa: PLC0415  (inplace imports this family)

        return apply_inplace(self, lambda s: fn(s, diagonal), name)

    method.__name__ = name
    method.__doc__ = f"In-place ``{fn.__name__}``: ``x.{name}(diagonal=0)``."
    return method


install({"tril_": _tri_inplace(tril, "tril_"), "triu_": _tri_inplace(triu, "triu_")})


install({"svd": svd, "pinverse": pinverse})


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


install({"cross": cross})


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_linalg():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415

    R["matmul"].defbatch(b.matmul_rule)
    R["diagonal"].defbatch(b.diagonal_rule)
    R["einsum"].defbatch(b.einsum_rule)
    for name in ("tril", "triu", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "svd"):
        R[name].defbatch(b.leading)
    R["solve"].defbatch(fallback="b's vector-or-matrix reading depends on ranks")
    R["diagonal_scatter_zeros"].defbatch(fallback=b.BACKWARD_ONLY)
    R["einsum_embed"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_linalg()
