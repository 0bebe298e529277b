"""Fused neural-network primitives: softmax, log_softmax, nll_loss, embedding, linear.

These are primitives (rather than compositions) for numerical stability
(``log_softmax`` subtracts the maximum before exponentiating) or speed (one
node instead of three for ``linear``; no dense one-hot for ``nll_loss`` and
``embedding``).  Every rule is written with primitives, so second-order
gradients work.  The higher-level functions (``cross_entropy``, layer
normalisation, ...) live in :mod:`dyngraph.nn.functional`.
"""

from __future__ import annotations

import numpy as np

from .._core.registry import LOOPS as _LOOPS
from ..tensor import Tensor
from ._gemm import MIN_ROWS as _GEMM_ROWS
from ._gemm import MIN_WORK as _GEMM_WORK
from ._gemm import matmul2d, try_gemm
from .elementwise import _K, _KDT, exp_p, rsqrt_p
from .linalg import _BLAS_KINDS, matmul_p, mm_rule
from .reduction import mean_p, sum_p, sum_to_shape_p
from .registry import primitive
from .shape import reshape_p


def _raw(a):
    return a._data if isinstance(a, Tensor) else a


# ---------------------------------------------------------------------------
# softmax / log_softmax
# ---------------------------------------------------------------------------

# exp() of (x - shift) neither overflows nor underflows to 0 when the spread of x is
# below these limits, so one global shift (fast full reductions) can replace the
# per-row maximum (slow strided reductions on short rows).
_SAFE_SPREAD = {np.dtype(np.float16): 8.0, np.dtype(np.float32): 60.0,
                np.dtype(np.float64): 600.0}


_SMALL = 1024  # elements: below this, per-call NumPy overhead dominates the passes

# The compiled cross-entropy rows of dyngraph/_kernels.c (cross_entropy_p's forward and
# log_softmax_p along the last axis; see _ce_kernel), or None: the NumPy code stays the
# reference (the pure-Python pass, an extension built before them).
_K_CE = _K if _K is not None and hasattr(_K, "log_softmax") else None
# Which inputs take the rows: float32 with at least _KCE_MIN_C classes.  Short rows and float64
# stay on NumPy's passes, whose bits tests/test_port_programs.py pins against PyTorch over
# whole training runs (the BiLSTM tagger, float32 with 5 tags, 2 epochs at rtol 1e-8: NumPy's
# and PyTorch's float32 exp and sums agree bit for bit there; these rows, within ~1 ulp, drift
# to 1.6e-8 over the second epoch).  The threshold is on the row length alone, so an eager
# call and its rows batched by dg.autobatch take the same path.  The kernels' float64 rows are
# tested directly (tests/test_loss_kernel.py).
_KCE_DT = (np.dtype(np.float32),)
_KCE_MIN_C = 16
_INT64 = np.dtype(np.int64)
_I64_LIM = 2 ** 63


def _shifted(x, dim):
    """``x`` minus a shift that makes ``exp`` safe: the global max when the spread allows."""
    if x.size <= _SMALL:  # one reduction instead of max, min and two isfinite checks
        return x - x.max(axis=dim, keepdims=True)
    hi, lo = x.max(), x.min()
    if np.isfinite(hi) and np.isfinite(lo) and hi - lo < _SAFE_SPREAD.get(x.dtype, 0.0):
        return x - hi
    return x - x.max(axis=dim, keepdims=True)


def _sum_keep(a, dim):
    """``a.sum(dim, keepdims=True)``; a BLAS product with ones for the last, contiguous axis."""
    if dim == a.ndim - 1 and a.size > _SMALL and a.flags.c_contiguous and a.dtype.kind == "f" \
            and a.shape[-1] > 1:
        n = a.shape[-1]
        return (a.reshape(-1, n) @ np.ones((n, 1), dtype=a.dtype)).reshape(a.shape[:-1] + (1,))
    return a.sum(axis=dim, keepdims=True)


def _shift(x, dim):
    """What ``log_softmax`` (and ``cross_entropy``) subtract before ``exp``, and how they sum.

    Returns ``(shift, one_row)``.  One contiguous row (a per-item loss): whole-array
    reductions, ~2x faster than axis/keepdims ones on tiny arrays and the same order of
    operations (the shift and the sum are scalars).  Small inputs: one ufunc reduction
    keeping ``dim`` (no ndarray.max method wrapper, no global min/max checks).  Large: the
    global maximum when the spread allows it (see ``_SAFE_SPREAD``), else per row.
    """
    if x.size == x.shape[dim] and x.flags.c_contiguous:
        return np.maximum.reduce(x, axis=None), True
    if x.size > _SMALL:
        hi, lo = np.maximum.reduce(x, axis=None), np.minimum.reduce(x, axis=None)
        # lo = -inf or a NaN makes hi - lo inf or NaN, so the test fails without isfinite(lo);
        # isfinite(hi) keeps all-+inf inputs from inf - inf (a warning)
        if np.isfinite(hi) and hi - lo < _SAFE_SPREAD.get(x.dtype, 0.0):
            return hi, False
    return np.maximum.reduce(x, axis=dim, keepdims=True), False


def _exp_sum(e, dim, one_row):
    """The sum of the exponentials along ``dim`` (kept), as ``_shift`` decided."""
    if one_row:
        return np.add.reduce(e, axis=None)
    if e.size <= _SMALL:
        return np.add.reduce(e, axis=dim, keepdims=True)
    return _sum_keep(e, dim)


@primitive("log_softmax", promote="float", save_output=True)
def log_softmax_p(x, dim=-1):
    """Primitive: stable ``log_softmax`` along ``dim`` (arrays)."""
    if x.size == 0:
        return x.copy()
    if _K_CE is not None and type(x) is np.ndarray and x.dtype in _KCE_DT \
            and dim in (-1, x.ndim - 1) and x.shape[-1] >= _KCE_MIN_C \
            and (x.ndim <= 2 or x.flags.c_contiguous):
        # the compiled rows (see _ce_kernel below): per row the operations of the fused
        # cross_entropy, so nll_loss(log_softmax(x, 1), t) and cross_entropy(x, t) agree
        out = np.empty(x.shape, x.dtype)
        if x.ndim == 2:
            _K_CE.log_softmax(x, out)
        else:
            rows = (-1, x.shape[-1])   # 1-D: one row (a view for any strides)
            _K_CE.log_softmax(x.reshape(rows), out.reshape(rows))
        return out
    shift, one_row = _shift(x, dim)
    shifted = x - shift
    shifted -= np.log(_exp_sum(np.exp(shifted), dim, one_row))
    return shifted


def _log_softmax_vjp(g, out, x, dim=-1):
    if type(g) is np.ndarray and type(out) is np.ndarray:
        # a plain backward: the same kernels without two binds (out <= 0: exp cannot overflow),
        # written into exp's buffer when the dtypes agree (no two more temporaries)
        e = np.exp(out)
        if e.dtype == g.dtype and e.shape == g.shape:
            e *= sum_p.impl(g, dim=(dim,), keepdim=True)
            return np.subtract(g, e, out=e)
        return g - e * sum_p.impl(g, dim=(dim,), keepdim=True)
    return g - exp_p(out) * sum_p(g, dim=(dim,), keepdim=True)


log_softmax_p.defvjp(_log_softmax_vjp)


# Up to this many elements softmax along the last axis runs in dyngraph._kernels (one pass
# per row: max, exp, sum in double, divide; 1.2 against 8.1 us for a float32 (1, 128) row,
# 5.5 against 14.7 us for (10, 128), CPU time); above it NumPy's vectorised reductions win
# for float32 ((20, 5001): 463 against 377 us).  The NumPy code below stays the reference
# (pure-Python pass, other dtypes and axes).
_K_SOFTMAX_MAX = 16384


@primitive("softmax", promote="float", save_output=True)
def softmax_p(x, dim=-1):
    """Primitive: stable ``softmax`` along ``dim`` (arrays)."""
    if x.size == 0:
        return x.copy()
    if (_K is not None and type(x) is np.ndarray and x.dtype in _KDT
            and x.size <= _K_SOFTMAX_MAX and dim in (-1, x.ndim - 1)):
        nd = x.ndim
        if nd == 2 or nd == 1 or (nd > 2 and x.flags.c_contiguous):
            out = np.empty(x.shape, x.dtype)
            if nd == 2:
                _K.unary("softmax", x, out)
            else:
                rows = (-1, x.shape[-1])   # 1-D: one row (a view for any strides)
                _K.unary("softmax", x.reshape(rows), out.reshape(rows))
            return out
    e = np.exp(_shifted(x, dim))
    e /= _sum_keep(e, dim)
    return e


def _softmax_vjp(g, out, x, dim=-1):
    return out * (g - sum_p(g * out, dim=(dim,), keepdim=True))


softmax_p.defvjp(_softmax_vjp)


# ---------------------------------------------------------------------------
# linear: x @ W.T + b in one node
# ---------------------------------------------------------------------------

# float32 linears of this many rows (and at least _FLIP_WORK output elements) whose product
# NumPy's OpenBLAS runs (MKL not active) are computed as (W @ x.T).T, the bias added while the
# result is written out in C order: OpenBLAS's sgemm is slow for x @ W.T with few rows (the
# transposed, wide right operand) and fast with the wide operand on the left.  Measured on
# AMD Zen 4, one thread, K 128, us (x @ W.T + b against the flipped form): (20, 5001) 575 ->
# 420, (8, 1024) 100 -> 55, (32, 640) 97 -> 78, (4, 256) 4.6 -> 6.7 (hence the work floor),
# (64, 640) 147 -> 151 (hence the row ceiling); the recurrent layers' hidden products use the
# same form (ops/rnn.py).  Float64 runs faster as it is.
_FLIP_ROWS = (4, 48)
_FLIP_WORK = 2048


def _vector_bias(b, x, w) -> bool:
    """``b`` is a 1-D array of ``x``'s dtype with one entry per row of ``w`` (a bias that the
    product itself can add)."""
    return type(b) is np.ndarray and b.ndim == 1 and b.dtype == x.dtype and b.shape[0] == w.shape[0]


def _flipped_linear(x, w, b):
    """``x @ w.T (+ b)`` as ``(w @ x.T).T`` written into a C-ordered result (see _FLIP_ROWS)."""
    out = np.empty((x.shape[0], w.shape[0]), x.dtype)
    prod = np.matmul(w, x.T).T
    if b is None:
        np.copyto(out, prod)
    else:
        np.add(prod, b, out=out)
    return out


def _flip(x, w, b) -> bool:
    """Whether :func:`_flipped_linear` takes this 2-D float32 product (see _FLIP_ROWS)."""
    m = x.shape[0]
    return (x.dtype == np.float32 and _FLIP_ROWS[0] <= m <= _FLIP_ROWS[1] and w.ndim == 2
            and w.dtype == np.float32 and m * w.shape[0] >= _FLIP_WORK
            and (b is None or _vector_bias(b, x, w)))


def _linear_2d(x, w, b):
    """``x @ w.T`` for a 2-D float ndarray ``x``, with ``b`` added where the product can take
    it: ``(out, bias_added)``.  From 3 rows up MKL where it is installed and applies (ops/_gemm.py:
    OpenBLAS's x @ W.T is up to 1.8x slower), a 1-D bias inside its product (addmm: beta = 1);
    else the flipped form for few float32 rows (_FLIP_ROWS); else np.dot, which passes the
    transposed view w.T to BLAS as a flag, ~0.5 us cheaper per call than np.matmul on small
    products."""
    if type(w) is not np.ndarray or w.ndim != 2:
        return np.dot(x, w.T), False
    if x.shape[0] >= _GEMM_ROWS and x.size * w.shape[0] >= _GEMM_WORK:
        vb = b is not None and _vector_bias(b, x, w)
        out = try_gemm(x, w.T, b if vb else None)
        if out is not None:
            return out, vb
    if _flip(x, w, b):
        return _flipped_linear(x, w, b), b is not None
    return np.dot(x, w.T), False


@primitive("linear", promote="same", save_inputs=True)
def linear_p(x, w, b=None):
    """Primitive: ``x @ w.T + b``."""
    added = False
    if x.ndim > 2:
        # one 2-D GEMM instead of NumPy's loop of small per-batch products (~1.6x faster)
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        if type(x2) is np.ndarray and x2.dtype.kind in _BLAS_KINDS:
            out, added = _linear_2d(x2, w, b)
        else:
            out = matmul2d(x2, w.T)
        out = out.reshape(lead + (w.shape[0],))
    elif x.ndim == 2 and x.dtype.kind in _BLAS_KINDS and type(x) is np.ndarray:
        if x.shape[1] == 1:     # in_features == 1: an outer product (a multiply)
            out = x * w.T
        elif x.shape[0] < _GEMM_ROWS:   # one or two rows (per-node code): neither MKL nor the flip
            out = np.dot(x, w.T)
        else:
            out, added = _linear_2d(x, w, b)
    else:
        out = np.matmul(x, w.T)
    if b is not None and not added:
        out += b
    return out


def _flat2(a, last):
    return reshape_p(a, shape=(-1, last)) if a.ndim != 2 else a


def _linear_vjp_x(g, out, x, w, b=None):
    if g.ndim > 2:
        return reshape_p(matmul_p(_flat2(g, g.shape[-1]), w), shape=tuple(x.shape))
    return mm_rule(g, w) if g.ndim == 2 else matmul_p(g, w)


def _linear_vjp_w(g, out, x, w, b=None):
    if x.ndim == 1:
        return reshape_p(g, shape=(-1, 1)) * reshape_p(x, shape=(1, -1))
    gf = _flat2(g, g.shape[-1])
    xf = _flat2(x, x.shape[-1])
    return mm_rule(gf.mT, xf)


def _linear_vjp_b(g, out, x, w, b=None):
    if type(g) is np.ndarray and g.ndim == 2 and b.ndim == 1:
        # the same reduction as sum_to_shape_p's (sum over rows), but an owning array, not
        # a reshape view of one: the engine keeps it as the first .grad instead of copying
        return np.add.reduce(g, axis=0)
    return sum_to_shape_p(g, shape=tuple(b.shape))


linear_p.defvjp(_linear_vjp_x, _linear_vjp_w, _linear_vjp_b)


# ---------------------------------------------------------------------------
# layer_norm: normalise over the trailing `ndim` dimensions, then scale and shift
# ---------------------------------------------------------------------------

@primitive("layer_norm", save_inputs=True, torch_name="NativeLayerNormBackward0")
def layer_norm_p(x, w=None, b=None, ndim=1, eps=1e-5):
    """Primitive: normalise over the last ``ndim`` dimensions, then ``* w + b``."""
    dims = tuple(range(x.ndim - ndim, x.ndim))
    xc = x - x.mean(axis=dims, keepdims=True)
    y = xc * (1.0 / np.sqrt((xc * xc).mean(axis=dims, keepdims=True) + eps))
    if w is not None:
        y *= w
    if b is not None:
        y += b
    return y


def _ln_stats(x, ndim, eps):
    """(x_hat, 1/std) written with primitives, so the rules are differentiable again."""
    dims = tuple(range(len(x.shape) - ndim, len(x.shape)))
    xc = x - mean_p(x, dim=dims, keepdim=True)
    rstd = rsqrt_p(mean_p(xc * xc, dim=dims, keepdim=True) + eps)
    return xc * rstd, rstd, dims


def _ln_vjp_x(g, out, x, w=None, b=None, ndim=1, eps=1e-5):
    xhat, rstd, dims = _ln_stats(x, ndim, eps)
    gh = g * w if w is not None else g
    return rstd * (gh - mean_p(gh, dim=dims, keepdim=True)
                   - xhat * mean_p(gh * xhat, dim=dims, keepdim=True))


def _ln_vjp_w(g, out, x, w=None, b=None, ndim=1, eps=1e-5):
    xhat, _, _ = _ln_stats(x, ndim, eps)
    return sum_to_shape_p(g * xhat, shape=tuple(w.shape))


def _ln_vjp_b(g, out, x, w=None, b=None, ndim=1, eps=1e-5):
    return sum_to_shape_p(g, shape=tuple(b.shape))


layer_norm_p.defvjp(_ln_vjp_x, _ln_vjp_w, _ln_vjp_b)


# ---------------------------------------------------------------------------
# embedding: rows of a table, and the scatter-add that is its gradient
# ---------------------------------------------------------------------------

@primitive("embedding", save_inputs=True, nondiff_argnums=(1,))
def embedding_p(weight, indices, padding_idx=-1, scale_grad_by_freq=False):
    """Primitive: rows ``weight[indices]``."""
    return weight[indices]


# below this many gradient entries the flat index costs more than it saves (measured: 50 rows
# of 16, 17 -> 19 us)
_FLAT_ADD_AT_MIN = 2048


@primitive("embedding_backward", save_inputs=True, nondiff_argnums=(1,))
def embedding_backward_p(g, indices, num_weights=0, padding_idx=-1, scale_grad_by_freq=False):
    """Primitive: scatter-add of ``g`` rows into a ``(num_weights, ...)`` table."""
    flat = indices.reshape(-1)
    # the row width from g's trailing shape, not reshape(-1): that cannot infer it when no
    # index was looked up (an empty index tensor gives a zero gradient)
    gf = g.reshape(flat.size, int(np.prod(g.shape[indices.ndim:], dtype=np.int64)))
    out = np.zeros((num_weights, gf.shape[1]), dtype=g.dtype)
    if scale_grad_by_freq:
        counts = np.bincount(flat, minlength=num_weights).astype(g.dtype)
        gf = gf / counts[flat][:, None]
    if flat.size == 1:  # one looked-up row (emb(tensor([i]))): a row write, ~10x cheaper than add.at
        out[flat[0]] = gf[0]
    elif gf.size >= _FLAT_ADD_AT_MIN:
        # NumPy's one-dimensional ufunc.at loop over one flat index is ~4x faster than the
        # row-index form for many rows (500 rows of 128: 1.86 -> 0.45 ms with the zeroing);
        # both add the entries in C order, so repeated indices sum in the same order (same
        # bits).  A negative row wraps to the same row in both forms.
        r = gf.shape[1]
        np.add.at(out.reshape(-1), (flat[:, None] * r + np.arange(r)).reshape(-1), gf.reshape(-1))
    else:
        np.add.at(out, flat, gf)
    if padding_idx >= 0:
        out[padding_idx] = 0
    shape = (num_weights,) + g.shape[indices.ndim:]
    # the array itself when its shape is already right: a reshape is a view, and the engine
    # must then copy this (often multi-MB) table into the leaf's .grad instead of keeping it
    return out if out.shape == shape else out.reshape(shape)


def _keep_rows(indices, padding_idx, scale_grad_by_freq, num_weights, dtype, ndim_row):
    """Constant factors applied to gathered rows: 0 for padding, 1/count when scaling."""
    idx = _raw(indices)
    f = np.ones(idx.shape, dtype=dtype)
    if scale_grad_by_freq:
        counts = np.bincount(idx.reshape(-1), minlength=num_weights)
        f = f / counts[idx]
    if padding_idx >= 0:
        f = f * (idx != padding_idx)
    return f.reshape(idx.shape + (1,) * ndim_row).astype(dtype, copy=False)


def _embedding_vjp(g, out, weight, indices, padding_idx=-1, scale_grad_by_freq=False):
    return embedding_backward_p(g, indices, num_weights=weight.shape[0], padding_idx=padding_idx,
                                scale_grad_by_freq=scale_grad_by_freq)


def _embedding_backward_vjp(gg, out, g, indices, num_weights=0, padding_idx=-1,
                            scale_grad_by_freq=False):
    rows = embedding_p(gg, indices)
    if padding_idx < 0 and not scale_grad_by_freq:
        return rows
    ndim_row = len(g.shape) - _raw(indices).ndim
    return rows * _keep_rows(indices, padding_idx, scale_grad_by_freq, num_weights,
                             _raw(g).dtype, ndim_row)


embedding_p.defvjp(_embedding_vjp, None)
embedding_backward_p.defvjp(_embedding_backward_vjp, None)


# ---------------------------------------------------------------------------
# nll_loss: picks -w[t] * logp[t]; its gradient is a constant sparse mask times g
# ---------------------------------------------------------------------------

def _nll_terms(target, weight, ignore_index, dtype):
    """Per-element weights w[target] (0 where ignored) and the target with ignored -> 0."""
    valid = target != ignore_index
    if valid.all():
        safe = target
        w = np.ones(target.shape, dtype=dtype) if weight is None \
            else weight[target].astype(dtype, copy=False)
        return w, safe
    safe = np.where(valid, target, 0)
    w = valid.astype(dtype) if weight is None else weight[safe].astype(dtype, copy=False) * valid
    return w, safe


def _pick(a, safe):
    """``a[n, safe[n, ...], ...]`` along class dimension 1."""
    if a.ndim == 2:
        return a[np.arange(a.shape[0]), safe]
    return np.take_along_axis(a, np.expand_dims(safe, 1), axis=1).squeeze(1)


def _reduce_losses(losses, w, reduction, dtype):
    if reduction == "none":
        return losses
    if reduction == "sum":
        return np.asarray(losses.sum(), dtype=dtype)
    with np.errstate(invalid="ignore", divide="ignore"):  # all targets ignored: nan, as PyTorch
        return np.asarray(losses.sum() / w.sum(), dtype=dtype)


@primitive("nll_loss", save_inputs=True, nondiff_argnums=(1, 2))
def nll_loss_p(logp, target, weight=None, reduction="mean", ignore_index=-100):
    """Primitive: ``-w[t] * logp[n, t]`` reduced (class dimension 1)."""
    n = logp.shape[0] if logp.ndim == 2 else 0
    if weight is None and reduction == "mean" and n:
        # the common case (no class weights, nothing ignored): the mean of the picked
        # log-probabilities, the same sum and divisor as below without the weight arrays
        if n == 1:
            t0 = target[0]
            if t0 != ignore_index:  # -x / 1 is -x: one pick, no division
                return np.asarray(-logp[0, t0], dtype=logp.dtype)
        elif np.logical_and.reduce(target != ignore_index, axis=None):
            total = logp[np.arange(n), target].sum()
            return np.asarray(-total / logp.dtype.type(n), dtype=logp.dtype)
    w, safe = _nll_terms(target, weight, ignore_index, logp.dtype)
    return _reduce_losses(-w * _pick(logp, safe), w, reduction, logp.dtype)


def _coefs(shape, dtype, target, weight, reduction, ignore_index):
    """Per-element loss weights (divided by their total for 'mean') and the safe target."""
    t = _raw(target)
    wt = None if weight is None else _raw(weight)
    w, safe = _nll_terms(t, wt, ignore_index, dtype)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            w = w / w.sum()
    return w, safe


def _onehot_mask(shape, dtype, w, safe):
    """Array of ``shape`` holding ``-w`` at each target class, 0 elsewhere."""
    mask = np.zeros(shape, dtype=dtype)
    if len(shape) == 2:
        mask[np.arange(shape[0]), safe] = -w
    else:
        np.put_along_axis(mask, np.expand_dims(safe, 1), np.expand_dims(-w, 1), axis=1)
    return mask


def _g_with_class_dim(g, reduction):
    if reduction == "none":
        shape = tuple(g.shape)
        return reshape_p(g, shape=shape[:1] + (1,) + shape[1:])
    return g


def _nll_vjp(g, out, logp, target, weight=None, reduction="mean", ignore_index=-100):
    dtype = logp.dtype if not isinstance(logp, Tensor) else logp._data.dtype
    shape = tuple(logp.shape)
    t = _raw(target)
    scalar_g = type(g) is np.ndarray and g.ndim == 0 and g.dtype == dtype
    if weight is None and reduction == "mean" and len(shape) == 2 and shape[0] == 1 \
            and t[0] != ignore_index:
        # one row (per-item losses): the gradient is -g at the target class
        mask = np.zeros(shape, dtype=dtype)
        if scalar_g:  # written directly: -(g * 1) is -g, no multiply over the row
            mask[0, t[0]] = -g
            return mask
        mask[0, t[0]] = -1
        return g * mask
    if weight is None and reduction == "mean" and len(shape) == 2 and shape[0] \
            and np.logical_and.reduce(t != ignore_index, axis=None):
        # every row weighs 1/N (the fast case of nll_loss_p): no weight arrays
        mask = np.zeros(shape, dtype=dtype)
        coef = -(dtype.type(1) / dtype.type(shape[0]))
        if scalar_g:
            # g * coef at the N targets instead of g times the whole (N, C) mask: one pass over
            # the array less (zeros elsewhere, as PyTorch's nll_loss backward writes them)
            mask[np.arange(shape[0]), t] = g * coef
            return mask
        mask[np.arange(shape[0]), t] = coef
        return g * mask
    w, safe = _coefs(shape, dtype, target, weight, reduction, ignore_index)
    return _g_with_class_dim(g, reduction) * _onehot_mask(tuple(logp.shape), dtype, w, safe)


nll_loss_p.defvjp(_nll_vjp, None, None)


# ---------------------------------------------------------------------------
# cross_entropy: log_softmax + nll_loss of (N, C) logits and class indices in one node
# ---------------------------------------------------------------------------

class SoftmaxResidual:
    """The exponentials ``exp(x - shift)`` and their row sums that one ``cross_entropy`` call
    computed, kept for its backward so that it does not compute ``exp`` again.

    ``F.cross_entropy`` passes a fresh holder (parameter ``residual``) only when it records a
    node; the first backward takes the arrays out (and writes the gradient into them), so they
    live from the forward to the first backward, like PyTorch's saved tensors.  A later
    backward (``retain_graph=True``) finds it empty and recomputes them from the saved logits.
    """

    __slots__ = ("e", "s")

    def __init__(self):
        self.e = None
        self.s = None

    def take(self):
        """``(e, s)``, or ``(None, None)`` once taken; the holder no longer refers to them."""
        e, s = self.e, self.s
        self.e = self.s = None
        return e, s

    def __repr__(self):
        return f"SoftmaxResidual({'kept' if self.e is not None else 'empty'})"


@primitive("cross_entropy", save_inputs=True, nondiff_argnums=(1,),
           torch_name="NllLossBackward0")
def cross_entropy_p(x, target, reduction="mean", ignore_index=-100, residual=None):
    """Primitive: ``nll_loss(log_softmax(x, 1), target)`` of (N, C) logits and (N,) class indices
    (no class weights), in one node.

    The log-probabilities are formed only at the targets, by the same operations as the two
    primitives (the same bits).  With a :class:`SoftmaxResidual` the exponentials are kept for
    the backward, which is then one pass: ``softmax * g - g`` at the targets (only eager
    calls get one; graph capture, ``dg.autobatch`` and ONNX export see the node without).
    """
    if x.size == 0:  # no rows or no classes: the composition's empty-input results
        return nll_loss_p.impl(log_softmax_p.impl(x, dim=1), target, None, reduction,
                               ignore_index)
    # (the length test first: short rows, e.g. a per-node (1, 5) loss, skip the call)
    k = _ce_kernel(x, target, ignore_index) if x.shape[-1] >= _KCE_MIN_C else None
    if k is not None:
        return _ce_loss_k(x, target, reduction, ignore_index, residual, *k)
    if x.shape[0] == 1 and reduction != "none" and _LOOPS is not None:
        loss = _ce_one_row(x, target, ignore_index, residual)
        if loss is not None:
            return loss
    e, s, shift = _ce_exp(x)
    if residual is not None:
        residual.e, residual.s = e, s
    logs = np.log(s)
    n = x.shape[0]
    dtype = x.dtype
    if n == 1 and reduction != "none":
        t0 = target[0]
        if t0 != ignore_index:  # one pick: -(logp[0, t]) as nll_loss_p computes it
            lp = (x[0, t0] - (shift if shift.ndim == 0 else shift[0, 0])) \
                - (logs if s.ndim == 0 else logs[0, 0])
            return np.asarray(-lp, dtype=dtype)
    logs = logs.reshape(n)
    if shift.ndim:
        shift = shift.reshape(n)
    if reduction == "mean" and np.logical_and.reduce(target != ignore_index, axis=None):
        # np.add.reduce is what ndarray.sum calls (the same bits), without its wrapper frame
        total = np.add.reduce((x[np.arange(n), target] - shift) - logs, axis=None)
        return np.asarray(-total / dtype.type(n), dtype=dtype)
    w, safe = _nll_terms(target, None, ignore_index, dtype)
    picked = (x[np.arange(n), safe] - shift) - logs
    return _reduce_losses(-w * picked, w, reduction, dtype)


# The compiled cross-entropy rows (dyngraph/_kernels.c, "cross-entropy rows"): per row the
# max, exp written into the kept-exponentials buffer, a double-precision sum, log and the pick
# at the target in one pass (float32 (20, 5001): ~140 us against ~230-320 us for the NumPy
# passes below, whose float32 exp alone is ~190 us).  Its results are within ~1 ulp of the
# NumPy path (its own exp; per-row shift; the sum in double), which stays the reference: the
# pure-Python pass, other dtypes, non-int64 targets.  Each row's results depend on that row
# alone, so an eager call and the same rows batched by dg.autobatch give the same bits; and
# log_softmax_p runs the same row operations, so nll_loss(log_softmax(x, 1), t) and this
# fused loss agree exactly on both paths.


def _ce_kernel(x, target, ignore_index):
    """``(e, s, picked, rows ignored)`` from the compiled rows, or None where they do not apply.

    ``e`` (N, C) and ``s`` (N, 1) are the exponentials and row sums (what ``_ce_exp`` gives,
    with the row maximum as shift), ``picked`` (N,) the log-probability at each row's target
    (class 0 for ignored rows, as ``_nll_terms`` picks).
    """
    if _K_CE is None or type(x) is not np.ndarray or x.dtype not in _KCE_DT or x.ndim != 2 \
            or x.shape[1] < _KCE_MIN_C or type(target) is not np.ndarray \
            or target.dtype != _INT64 or target.ndim != 1:
        return None
    ign = int(ignore_index)
    if not -_I64_LIM <= ign < _I64_LIM:   # the kernel takes a C long long
        return None
    n, c = x.shape
    e = np.empty((n, c), x.dtype)
    s = np.empty((n, 1), x.dtype)
    picked = np.empty((n, 1), x.dtype)
    ignored = _K_CE.cross_entropy(x, target, ign, e, s, picked)
    return e, s, picked.reshape(n), ignored


def _ce_loss_k(x, target, reduction, ignore_index, residual, e, s, picked, ignored):
    """The loss from the kernel's per-row picks: the reductions of the NumPy path below."""
    if residual is not None:
        residual.e, residual.s = e, s
    dtype = x.dtype
    n = x.shape[0]
    if not ignored and reduction != "none":
        if n == 1:
            return np.asarray(-picked[0], dtype=dtype)
        if reduction == "mean":
            total = np.add.reduce(picked, axis=None)
            return np.asarray(-total / dtype.type(n), dtype=dtype)
    w, _ = _nll_terms(target, None, ignore_index, dtype)
    return _reduce_losses(-w * picked, w, reduction, dtype)


def _ce_one_row(x, target, ignore_index, residual):
    """The loss of one row of logits (a per-item loss) with the NumPy path's bits and fewer
    calls, or None: the accelerator's loops take the max and the shift (``row_shift``: IEEE
    subtractions) and the sum in ``np.add.reduce``'s order (``row_sum``), and NumPy's own
    ``exp`` and ``log`` run between them; so the exponentials, sums and losses are those of
    ``_ce_exp`` below, bit for bit (tests/test_small_ops_rows.py)."""
    t0 = int(target[0])
    if t0 == ignore_index or type(x) is not np.ndarray:
        return None
    dtype = x.dtype
    e = _np_empty(x.shape, dtype)
    d = _LOOPS.row_shift(x, e, t0)   # None: not contiguous, another dtype, target out of range
    if d is None:
        return None
    _np_exp(e, out=e)
    s = dtype.type(_LOOPS.row_sum(e))
    if residual is not None:
        residual.e, residual.s = e, s
    # -(d - log s) in Python floats, rounded once to float32 by asarray: the same bits as the
    # float32 subtraction (a double holds > 2 * 24 + 2 bits, so rounding twice changes nothing)
    return _np_asarray(-(d - float(_np_log(s))), dtype=dtype)


# (module globals: a NumPy attribute lookup per call costs more than these loops' work)
_np_empty, _np_exp, _np_log, _np_asarray = np.empty, np.exp, np.log, np.asarray


def _ce_exp(x):
    """``(exp(x - shift), its row sums, shift)`` with log_softmax's shift and sums, in one
    (N, C) buffer: the log-probabilities are only needed at the targets, where
    ``x[n, t] - shift`` is the same subtraction log_softmax makes."""
    shift, one_row = _shift(x, 1)
    e = np.subtract(x, shift)
    np.exp(e, out=e)
    return e, _exp_sum(e, 1, one_row), shift


def _ce_row_coefs(t, n, dtype, reduction, ignore_index):
    """Per-row weights of the loss (1 / rows counted for 'mean', else 1; 0 for ignored rows)
    and the target with ignored rows -> 0, or ``(None, t)`` when no row is ignored."""
    valid = t != ignore_index
    if np.logical_and.reduce(valid, axis=None):
        return None, t
    w = valid.astype(dtype)
    if reduction == "mean":
        count = np.add.reduce(w, axis=None)
        # every row ignored: the loss is nan (0/0) and the gradient 0, as in PyTorch
        w = w / count if count else w
    return w, np.where(valid, t, 0)


def _cross_entropy_vjp(g, out, x, target, reduction="mean", ignore_index=-100, residual=None):
    n = x.shape[0]
    if type(g) is np.ndarray and type(x) is np.ndarray:
        t = target
        if x.size == 0:
            return np.zeros(x.shape, dtype=x.dtype)
        e, s = residual.take() if residual is not None else (None, None)
        if e is None:   # recomputed as the forward computed them (the kernel's, or NumPy's)
            k = _ce_kernel(x, t, ignore_index) if x.shape[-1] >= _KCE_MIN_C else None
            e, s = k[:2] if k is not None else _ce_exp(x)[:2]
        if n == 1 and reduction != "none" and s.size == 1 and t[0] != ignore_index:
            # one row (a per-item loss): g / 1 is g, so the same bits as below, fewer calls
            e *= g / s
            e[0, t[0]] -= g
            return e
        dtype = e.dtype
        w, safe = _ce_row_coefs(t, n, dtype, reduction, ignore_index)
        if reduction == "none":
            c = g if w is None else g * w            # (N,): each row's own cotangent
        elif w is None:
            c = g / dtype.type(n) if reduction == "mean" else g   # 0-d: the same for all rows
        else:
            c = g * w
        # softmax * c - c at the target: the softmax is e / s, so e is scaled in place (the
        # holder gave it up, or it was just recomputed): one pass, no temporary
        if s.ndim == 0:
            e *= c / s
        else:
            e *= (c.reshape(n, 1) if c.ndim else c) / s
        e[np.arange(n), safe] -= c
        return e
    # create_graph: written with primitives, so the gradient is differentiable again.  The
    # one-hot and row-weight constants are NumPy arrays from the target's values, so graph
    # capture replaces this rule by one opaque node (the array path above at replay: the same
    # bits as eager)
    t = _raw(target)
    dtype = x.dtype if not isinstance(x, Tensor) else x._data.dtype
    w, safe = _ce_row_coefs(t, n, dtype, reduction, ignore_index)
    if w is None:
        w = np.full(n, dtype.type(1) / dtype.type(n) if reduction == "mean" else 1, dtype=dtype)
    onehot = np.zeros(tuple(x.shape), dtype=dtype)
    onehot[np.arange(n), safe] = w
    gg = reshape_p(g, shape=(n, 1)) if reduction == "none" else g
    return gg * (softmax_p(x, dim=1) * w.reshape(n, 1) - onehot)


cross_entropy_p.defvjp(_cross_entropy_vjp, None)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_nn():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    R["log_softmax"].defbatch(b.shift_dim)
    R["softmax"].defbatch(b.shift_dim)
    R["linear"].defbatch(b.linear_rule)
    R["layer_norm"].defbatch(b.leading)
    R["embedding"].defbatch(b.embedding_rule)
    R["nll_loss"].defbatch(b.nll_loss_rule)
    # the same signature and reductions as nll_loss: one reduction='none' call over all rows
    R["cross_entropy"].defbatch(b.nll_loss_rule)
    R["embedding_backward"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_nn()
