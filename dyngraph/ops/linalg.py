"""Linear algebra primitives: matmul (batched, broadcasting) and friends."""

from __future__ import annotations

import builtins

import numpy as np

from .._core.state import STATE
from ..errors import LinAlgError
from ..tensor import Tensor
from ._gemm import MIN_ROWS as _GEMM_ROWS
from ._gemm import MIN_WORK as _GEMM_WORK
from ._gemm import matmul2d
from ._util import compiled_kernels
from .registry import primitive
from .structural import expand_p, reshape_p, sum_to_shape_p


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
# dyngraph/_kernels.c outer(): mm_rule's K == 1 products (NumPy's broadcasting multiply does
# not vectorise them: float32 (512, 1) * (1, 128) ~27 us, the kernel ~8 us), or None
_K_OUTER = compiled_kernels("outer")


def mm_rule(a, b):
    """``a @ b`` inside a vjp rule (2-D or matrix-vector operands).

    On NumPy arrays (a plain ``backward()``): ``K == 1`` -- an outer product, e.g. the weight
    gradient of a batch-1 ``linear`` -- is a broadcasting multiply, 5-20x faster than NumPy's
    GEMM for ``(128, 1) @ (1, 128)`` and exactly equal to it (one product per element,
    nothing summed), run by ``_kernels.outer`` where it is built (the same values, ~3x
    NumPy's multiply); products of fewer than ``MIN_WORK`` multiply-adds ``np.dot``, the
    cheapest call (the same result as ``@``); larger ones from 3 rows up
    :func:`~dyngraph.ops._gemm.matmul2d` (MKL where it is installed and BLAS runs one
    thread), else ``@``.  Otherwise (Tensors under ``create_graph``) ``matmul_p``, which
    binds.

    >>> mm_rule(np.ones((3, 1)), np.ones((1, 2))).shape
    (3, 2)
    """
    if type(a) is np.ndarray and type(b) is np.ndarray:
        if a.ndim == 2 and b.ndim == 2:
            # K == 1: a multiply; from 3 rows up MKL where it is installed (ops/_gemm.py)
            if a.shape[1] == 1:
                if _K_OUTER is not None and a.dtype is b.dtype and b.shape[0] == 1:
                    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
                    if _K_OUTER.outer(a, b, out):   # the multiply's values, ~3x faster
                        return out
                return a * b
            if a.size * b.shape[1] >= _GEMM_WORK:
                return matmul2d(a, b) if a.shape[0] >= _GEMM_ROWS else a @ b
            # a small product: np.dot's call is ~0.2-0.3 us cheaper than @ (8x8: 0.49 vs
            # 0.67 us; against a transposed view 0.66 vs 0.96), the same BLAS result
            return np.dot(a, b)
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
        if x.ndim == 2 and y.ndim == 2 and type(x) is np.ndarray:
            if x.size * y.shape[1] < _GEMM_WORK:
                return np.dot(x, y)    # small: cheaper than np.matmul, the same result (mm_rule)
            if x.shape[0] >= _GEMM_ROWS:
                return matmul2d(x, y)  # MKL where it is installed (ops/_gemm.py)
        return np.matmul(x, y)
    except ValueError:
        _check_matmul(x, y)
        raise


def _sum_to(g, shape):
    return sum_to_shape_p(g, shape=tuple(shape))


def _unsq_last(a):
    if type(a) is np.ndarray:  # a plain backward: the view itself, no bind
        return a.reshape(a.shape + (1,))
    return reshape_p(a, shape=tuple(a.shape) + (1,))


def _unsq_second_last(a):
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


# ===========================================================================
# argument checks with PyTorch's wording (prefixed with the op name)
# ===========================================================================

_C_NAMES = {"float32": "float", "float64": "double", "float16": "Half", "int64": "long",
            "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool"}


def _cname(dt) -> str:
    return _C_NAMES.get(np.dtype(dt).name, np.dtype(dt).name)


# ===========================================================================
# products built on matmul
# ===========================================================================


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


@primitive("tril")
def tril_p(x, diagonal=0):
    return np.tril(x, diagonal)


@primitive("triu")
def triu_p(x, diagonal=0):
    return np.triu(x, diagonal)


tril_p.defvjp(lambda g, out, x, diagonal=0: tril_p(g, diagonal=diagonal))
triu_p.defvjp(lambda g, out, x, diagonal=0: triu_p(g, diagonal=diagonal))


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
        gk = reshape_p(gk, shape=tuple(size[c] if c in avail else 1 for c in uniq))
        gk = expand_p(gk, shape=tuple(size[c] for c in uniq))
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
        raise LinAlgError(
            "linalg.inv: the input matrix is singular, so the inversion could not be completed "
            f"(shape {list(x.shape)}); check the matrix or use a pseudo-inverse") from None


inv_p.defvjp(lambda g, out, x: -(out.mT @ g @ out.mT))


def _unsq2(a):
    s = tuple(a.shape)
    return reshape_p(a, shape=s + (1, 1))


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
        raise LinAlgError("linalg.solve: The solver failed because the input matrix is "
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
        raise LinAlgError(
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
    row = reshape_p(lam, shape=tuple(x.shape[:-2]) + (1, n))
    col = reshape_p(lam, shape=tuple(x.shape[:-2]) + (n, 1))
    f = (1.0 - eye) / (row - col + eye)
    vtg = v.mT @ gv
    inner = reshape_p(gl, shape=tuple(x.shape[:-2]) + (1, n)) * eye + f * (vtg - vtg.mT) * 0.5
    return v @ inner @ v.mT


eigh_p.defvjp(_eigh_vjp)


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
    s_row = reshape_p(s, shape=batch + (1, k))
    s_col = reshape_p(s, shape=batch + (k, 1))
    e = s_row * s_row - s_col * s_col + eye
    v, gv = vh.mT, gvh.mT
    utgu = u.mT @ gu
    vtgv = v.mT @ gv
    inner = ((utgu - utgu.mT) / e * s_row + s_col * ((vtgv - vtgv.mT) / e)
             + reshape_p(gs, shape=batch + (1, k)) * eye)
    ga = u @ inner @ vh
    if m > k:
        ga = ga + (gu - u @ (u.mT @ gu)) / s_row @ vh
    if n > k:
        ga = ga + u @ ((gv.mT - (gv.mT @ v) @ v.mT) / s_col)
    return ga


svd_p.defvjp(_svd_vjp)


def _np(a):
    return a._data if isinstance(a, Tensor) else a


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_linalg():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    R["matmul"].defbatch(b.matmul_rule)
    R["diagonal"].defbatch(b.diagonal_rule)
    R["einsum"].defbatch(b.einsum_rule)
    for name in ("tril", "triu", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "svd"):
        R[name].defbatch(b.leading)
    R["solve"].defbatch(fallback="b's vector-or-matrix reading depends on ranks")
    R["diagonal_scatter_zeros"].defbatch(fallback=b.BACKWARD_ONLY)
    R["einsum_embed"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_linalg()
