"""Elementwise primitives: arithmetic, unary math, activations, comparisons, logic.

Each primitive is defined once here: its NumPy forward and one vjp rule per
input.  Rules use operators and other primitives only, so they run on arrays
(plain backward) and on Tensors (``create_graph=True``) alike.  Broadcasting
is handled by the engine (``broadcasts=True``): a rule returns the gradient
for the broadcast shape.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..backend import device as _device
from ..backend import device_of, move_to, xp
from ..errors import DtypeNotImplementedError, IntegerDivisionByZeroError
from ..tensor import Tensor
from ._util import compiled_kernels, quiet_primitives
from .registry import Primitive, primitive

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_2_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------
# arithmetic
# ---------------------------------------------------------------------------

add_p = Primitive("add", operator.add, promote="same", broadcasts=True, ufunc=np.add)


add_p.defvjp(lambda g, out, x, y: g, lambda g, out, x, y: g)


sub_p = Primitive("sub", operator.sub, promote="same", broadcasts=True, ufunc=np.subtract)


sub_p.defvjp(lambda g, out, x, y: g, lambda g, out, x, y: -g)


mul_p = Primitive("mul", operator.mul, promote="same", broadcasts=True, save_inputs=True, ufunc=np.multiply,
                  save_for=((1,), (0,)))


mul_p.defvjp(lambda g, out, x, y: g * y, lambda g, out, x, y: g * x)


div_p = Primitive("div", operator.truediv, promote="float", broadcasts=True, save_inputs=True, ufunc=np.divide,
                  save_for=((1,), (0, 1)))


div_p.defvjp(lambda g, out, x, y: g / y, lambda g, out, x, y: -g * x / (y * y))


@primitive("neg", promote="same", ufunc=np.negative)
def neg_p(x):
    if x.dtype.kind == "b":
        raise TypeError("Negation, the `-` operator, on a bool tensor is not supported; use ~ or logical_not()")
    return -x


neg_p.defvjp(lambda g, out, x: -g)


def _int_power(x, n):
    """``x ** n`` for an integer ``n >= 2`` by repeated squaring (``x * x * x`` for 3, as PyTorch)."""
    result = None
    base = x
    while True:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if not n:
            return result
        base = base * base


def _float_scalar_pow(x, y):
    """``x ** y`` for a floating array and a Python-number exponent, or None for the general case.

    Why: NumPy's float32/float64 ``power`` calls libm's ``pow`` per element (~35-70 ns each,
    worse for negative bases), 50-100x slower than a multiply.  Like PyTorch's scalar-exponent
    kernel, small integral exponents become products (``x*x*x`` for 3, ``1/(x*x)`` for -2) and
    -1, +-0.5 become reciprocal/sqrt; other exponents keep ``pow``.
    """
    if y == 2:
        return np.square(x)
    if y == 0.5:
        return np.sqrt(x)
    if y == -1:
        return np.reciprocal(x)
    if y == -0.5:
        return np.reciprocal(np.sqrt(x))
    if y == -2:
        return np.reciprocal(np.square(x))
    if y == int(y) and 2 < y <= 8:  # error grows ~y ulp: keep it within a few ulp
        return _int_power(x, int(y))
    return None


@primitive("pow", promote="same", broadcasts=True, save_inputs=True, save_output=True)
def pow_p(x, y):
    yt = type(y)
    if (yt is float or yt is int) and type(x) is np.ndarray and x.dtype.kind == "f" \
            and math.isfinite(y):
        out = _float_scalar_pow(x, y)
        if out is not None:
            return out
    if getattr(x, "dtype", np.dtype(np.float64)).kind in "iu" and np.any(np.asarray(y) < 0):
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return x ** y


def _pow_vjp_base(g, out, x, y):
    if isinstance(y, (int, float)):
        if y == 0:
            return g * 0.0
        return g * (y * pow_p(x, y - 1))
    return g * where_p(y == 0, 0.0, y * pow_p(x, y - 1))


def _pow_vjp_exp(g, out, x, y):
    safe = where_p((x == 0) & (y >= 0), 1.0, x) if isinstance(x, Tensor) else (
        np.where((x == 0) & (y >= 0), 1.0, x) if isinstance(x, np.ndarray) else (x if x != 0 else 1.0))
    return g * out * log_p(safe)


pow_p.defvjp(_pow_vjp_base, _pow_vjp_exp)


@primitive("abs", promote="same", save_inputs=True, ufunc=np.absolute)
def abs_p(x):
    return np.abs(x)


abs_p.defvjp(lambda g, out, x: g * sign_p(x))


@primitive("sign", promote="same")
def sign_p(x):
    return np.sign(x) if x.dtype.kind != "b" else x.copy()


sign_p.defvjp(lambda g, out, x: g * 0.0)


@primitive("reciprocal", promote="float", save_output=True)
def reciprocal_p(x):
    return 1.0 / x


reciprocal_p.defvjp(lambda g, out, x: -g * out * out)


@primitive("floor_divide", promote="same", differentiable=False)
def floor_divide_p(x, y):
    if np.result_type(x, y).kind in "iub" and np.any(np.asarray(y) == 0):
        raise IntegerDivisionByZeroError("floor_divide: integer division by zero")
    return np.floor_divide(x, y)


@primitive("remainder", promote="same", broadcasts=True, save_inputs=True)
def remainder_p(x, y):
    if np.result_type(x, y).kind in "iub" and np.any(np.asarray(y) == 0):
        raise IntegerDivisionByZeroError("remainder: integer division by zero")
    return np.remainder(x, y)


remainder_p.defvjp(lambda g, out, x, y: g, lambda g, out, x, y: -g * floor_p(x / y))


@primitive("fmod", promote="same", broadcasts=True, save_inputs=True)
def fmod_p(x, y):
    return np.fmod(x, y)


fmod_p.defvjp(lambda g, out, x, y: g, lambda g, out, x, y: -g * trunc_p(x / y))


# ---------------------------------------------------------------------------
# unary math
# ---------------------------------------------------------------------------

exp_p = Primitive("exp", np.exp, promote="float", save_output=True, ufunc=np.exp)


exp_p.defvjp(lambda g, out, x: g * out)


@primitive("exp2", promote="float", save_output=True)
def exp2_p(x):
    return np.exp2(x)


exp2_p.defvjp(lambda g, out, x: g * out * math.log(2.0))


expm1_p = Primitive("expm1", np.expm1, promote="float", save_output=True, ufunc=np.expm1)


expm1_p.defvjp(lambda g, out, x: g * (out + 1.0))


log_p = Primitive("log", np.log, promote="float", save_inputs=True, ufunc=np.log)


log_p.defvjp(lambda g, out, x: g / x)


log1p_p = Primitive("log1p", np.log1p, promote="float", save_inputs=True, ufunc=np.log1p,
                    torch_name="Log1PBackward0")


log1p_p.defvjp(lambda g, out, x: g / (x + 1.0))


log2_p = Primitive("log2", np.log2, promote="float", save_inputs=True)


log2_p.defvjp(lambda g, out, x: g / (x * math.log(2.0)))


log10_p = Primitive("log10", np.log10, promote="float", save_inputs=True)


log10_p.defvjp(lambda g, out, x: g / (x * math.log(10.0)))


sqrt_p = Primitive("sqrt", np.sqrt, promote="float", save_output=True, ufunc=np.sqrt)


sqrt_p.defvjp(lambda g, out, x: g / (2.0 * out))


@primitive("rsqrt", promote="float", save_output=True)
def rsqrt_p(x):
    return 1.0 / np.sqrt(x)


rsqrt_p.defvjp(lambda g, out, x: -0.5 * g * out * out * out)


sin_p = Primitive("sin", np.sin, promote="float", save_inputs=True, ufunc=np.sin)


sin_p.defvjp(lambda g, out, x: g * cos_p(x))


cos_p = Primitive("cos", np.cos, promote="float", save_inputs=True, ufunc=np.cos)


cos_p.defvjp(lambda g, out, x: -g * sin_p(x))


tan_p = Primitive("tan", np.tan, promote="float", save_output=True)


tan_p.defvjp(lambda g, out, x: g * (1.0 + out * out))


@primitive("asin", promote="float", save_inputs=True)
def asin_p(x):
    return np.arcsin(x)


asin_p.defvjp(lambda g, out, x: g * rsqrt_p(1.0 - x * x))


@primitive("acos", promote="float", save_inputs=True)
def acos_p(x):
    return np.arccos(x)


acos_p.defvjp(lambda g, out, x: -g * rsqrt_p(1.0 - x * x))


@primitive("atan", promote="float", save_inputs=True)
def atan_p(x):
    return np.arctan(x)


atan_p.defvjp(lambda g, out, x: g / (1.0 + x * x))


@primitive("atan2", promote="float", broadcasts=True, save_inputs=True)
def atan2_p(y, x):
    return np.arctan2(y, x)


def _atan2_inv_r2(y, x):
    # 1 / (x^2 + y^2), and 0 at the origin: PyTorch's gradient of atan2 there is 0, not 0/0
    r2 = x * x + y * y
    return where_p(r2 == 0, 0.0, 1.0 / where_p(r2 == 0, 1.0, r2))


atan2_p.defvjp(lambda g, out, y, x: g * x * _atan2_inv_r2(y, x),
               lambda g, out, y, x: -g * y * _atan2_inv_r2(y, x))


sinh_p = Primitive("sinh", np.sinh, promote="float", save_inputs=True)


sinh_p.defvjp(lambda g, out, x: g * cosh_p(x))


cosh_p = Primitive("cosh", np.cosh, promote="float", save_inputs=True)


cosh_p.defvjp(lambda g, out, x: g * sinh_p(x))


asinh_p = Primitive("asinh", np.arcsinh, promote="float", save_inputs=True)


asinh_p.defvjp(lambda g, out, x: g * rsqrt_p(x * x + 1.0))


acosh_p = Primitive("acosh", np.arccosh, promote="float", save_inputs=True)


acosh_p.defvjp(lambda g, out, x: g * rsqrt_p(x * x - 1.0))


atanh_p = Primitive("atanh", np.arctanh, promote="float", save_inputs=True)


atanh_p.defvjp(lambda g, out, x: g / (1.0 - x * x))


tanh_p = Primitive("tanh", np.tanh, promote="float", save_output=True, ufunc=np.tanh)


_REUSE_MIN = 1024   # elements: below, the in-place calls' keyword parsing costs more (~0.3 us)


def _same_arrays(g, out) -> bool:
    """A plain backward's arrays of one shape and dtype, large enough that the rules below
    gain by reusing their own temporaries (the same operations in the same order, so the same
    bits): float32 (50, 640) tanh vjp 17.2 -> 12.8 us; an (8, 8) or (1, 128) row keeps the
    expression (1.04 against 1.36 us in place)."""
    # (0-d operands are left out too: their products are NumPy scalars, which have no buffer)
    return (type(g) is np.ndarray and type(out) is np.ndarray and g.size >= _REUSE_MIN
            and g.shape == out.shape and g.dtype == out.dtype)


def _tanh_vjp(g, out, x):
    if _same_arrays(g, out):
        t = out * out
        np.subtract(1.0, t, out=t)
        t *= g          # g * (1 - out^2): one temporary instead of three
        return t
    return g * (1.0 - out * out)


tanh_p.defvjp(_tanh_vjp)


def _sigmoid_np(x):
    # PyTorch's formula 1 / (1 + exp(-x)) in one buffer: 4 passes instead of the 10 of a
    # per-sign select (3-5x faster, measured).  For x below about -88 (float32) exp overflows
    # to inf and the result is exactly 0, as in PyTorch; sigmoid_p and silu_p are quiet
    # primitives (quiet_primitives below), so that overflow raises no NumPy warning.
    if x.ndim == 0:
        return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=x.dtype)
    e = np.negative(x)
    np.exp(e, out=e)
    e += 1.0
    return np.reciprocal(e, out=e)


# The optional compiled kernels (dyngraph/_kernels.c, as in ops/rnn.py): their sigmoid is
# one pass (1 / (1 + exp(-x)) with their own exp, <= 3 ulp in float64, ~1 ulp in float32)
# instead of NumPy's four.  _sigmoid_np stays the reference: the pure-Python pass
# (DYNGRAPH_PURE_PYTHON), other dtypes, 0-d, empty and non-contiguous N-d inputs use it.
_K = compiled_kernels()
_KDT = (np.dtype(np.float32), np.dtype(np.float64))
# a _kernels build without sigmoid() (an older .so): unary's 2-D path below
_sigmoid_c = getattr(_K, "sigmoid", lambda x, out: False)


def _sigmoid_k(x):
    # the kernel reads 2-D inputs of any strides and writes a C-contiguous 2-D output; its rows
    # are the input's last axis, so an eager row and the same row inside a batch (autobatch)
    # go through the same loop and agree bit for bit.  _K.sigmoid is that loop for a
    # C-contiguous x of any shape (empty too), ~1.5 us cheaper per call than unary's 2-D
    # entry; it returns False, writing nothing, for other layouts: 1-D and 2-D strided x go
    # through unary, strided N-d x through unary on a 2-D view when one exists, else NumPy
    if type(x) is np.ndarray and x.dtype in _KDT and x.ndim:
        out = np.empty(x.shape, x.dtype)
        if _sigmoid_c(x, out):
            return out
        nd = x.ndim
        if nd == 2:
            _K.unary("sigmoid", x, out)
            return out
        if nd == 1:
            _K.unary("sigmoid", x[None], out[None])
            return out
        if x.size:
            # a strided N-d x whose leading axes collapse without a copy (autobatch's fused
            # gates: column blocks of a (B, 1, 3H) result) runs unary on that 2-D view; the
            # shape assignment raises where a copy would be needed
            rows = x.view()
            try:
                rows.shape = (-1, x.shape[-1])
            except AttributeError:
                return _sigmoid_np(x)
            _K.unary("sigmoid", rows, out.reshape(rows.shape))
            return out
    return _sigmoid_np(x)


# the forward is the kernel function itself (no wrapper frame per call)
sigmoid_p = Primitive("sigmoid", _sigmoid_np if _K is None else _sigmoid_k, promote="float",
                      save_output=True)


def _sigmoid_vjp(g, out, x):
    if _same_arrays(g, out):
        t = g * out
        t *= 1.0 - out  # (g * out) * (1 - out): two temporaries instead of three
        return t
    return g * out * (1.0 - out)


sigmoid_p.defvjp(_sigmoid_vjp)


@primitive("erf", promote="float", save_inputs=True)
def erf_p(x):
    return _erf_np(x)


erf_p.defvjp(lambda g, out, x: g * (_2_OVER_SQRT_PI * exp_p(-(x * x))))


@primitive("erfc", promote="float", save_inputs=True)
def erfc_p(x):
    return (1.0 - _erf_np(x.astype(np.float64))).astype(x.dtype)


erfc_p.defvjp(lambda g, out, x: -g * (_2_OVER_SQRT_PI * exp_p(-(x * x))))


@primitive("erfinv", promote="float", save_output=True)
def erfinv_p(x):
    from scipy.special import erfinv as _erfinv  # noqa: PLC0415  (scipy: a runtime dependency)

    return _erfinv(x).astype(x.dtype, copy=False)


# d/dx erfinv(x) = sqrt(pi)/2 * exp(erfinv(x)^2)
erfinv_p.defvjp(lambda g, out, x: g * (math.sqrt(math.pi) / 2.0 * exp_p(out * out)))


# The gamma family: lgamma' = digamma, digamma' = polygamma(1), polygamma(n)' = polygamma(n + 1),
# so every order of derivative is again a primitive of this family.
@primitive("lgamma", promote="float", save_inputs=True)
def lgamma_p(x):
    from scipy.special import gammaln  # noqa: PLC0415  (scipy: imported on first use, import dyngraph stays fast)

    return gammaln(x).astype(x.dtype, copy=False)


@primitive("digamma", promote="float", save_inputs=True)
def digamma_p(x):
    from scipy.special import psi  # noqa: PLC0415  (scipy: imported on first use, import dyngraph stays fast)

    # PyTorch: digamma(0) = -inf (SciPy gives NaN at the pole 0)
    return np.where(x == 0, -np.inf, psi(x)).astype(x.dtype, copy=False)


@primitive("polygamma", promote="float", save_inputs=True)
def polygamma_p(x, n=1):
    from scipy.special import polygamma as _pg  # noqa: PLC0415  (scipy: imported on first use, import dyngraph stays fast)

    return _pg(n, x).astype(x.dtype, copy=False)


lgamma_p.defvjp(lambda g, out, x: g * digamma_p(x))
digamma_p.defvjp(lambda g, out, x: g * polygamma_p(x, n=1))
polygamma_p.defvjp(lambda g, out, x, n=1: g * polygamma_p(x, n=n + 1))


def _erf_np(x):
    try:
        from scipy.special import erf as _erf  # noqa: PLC0415  (scipy: imported on first use, import dyngraph stays fast)

        return _erf(x).astype(x.dtype, copy=False)
    except ImportError:  # pragma: no cover - scipy is a dependency of scikit-learn
        return np.vectorize(math.erf, otypes=[x.dtype])(x)


@primitive("floor", promote="same")
def floor_p(x):
    return np.floor(x) if x.dtype.kind == "f" else x.copy()


floor_p.defvjp(lambda g, out, x: g * 0.0)


@primitive("ceil", promote="same")
def ceil_p(x):
    return np.ceil(x) if x.dtype.kind == "f" else x.copy()


ceil_p.defvjp(lambda g, out, x: g * 0.0)


@primitive("round", promote="same")
def round_p(x, decimals=0):
    return np.round(x, decimals) if x.dtype.kind == "f" else x.copy()


round_p.defvjp(lambda g, out, x, decimals=0: g * 0.0)


@primitive("trunc", promote="same")
def trunc_p(x):
    return np.trunc(x) if x.dtype.kind == "f" else x.copy()


trunc_p.defvjp(lambda g, out, x: g * 0.0)


# ---------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------

# Rows of zeros for relu, by (dtype, row length).  NumPy 2.x runs np.maximum against a scalar
# through a loop that is ~2x slower than its SIMD loop against an array operand (float32
# (128, 512): 60-78 us against 31-39 us hot, 71 -> 56 us per call inside the MLP benchmark's
# step; (64, 64, 14, 14) viewed as rows of 196: 1.2 -> 0.53 ms); a broadcast row of zeros
# takes the fast loop and gives the same bits (-0.0 -> +0.0, NaN kept, as the scalar form).
# Arrays of >= 4096 elements whose last axis has 64-16384 use it; C-contiguous ones of >= 16384
# elements with a shorter last axis are viewed as rows of the shortest run of trailing axes of
# >= 128 elements (rows of 32 are slower broadcast, and the views cost ~1.5 us).  Anything
# else stays scalar: on small arrays the tests would cost more than they save.  The cache is
# bounded (dynamic models see many widths).
_RELU_ZEROS: dict = {}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _relu_zeros(dt, n):
    z = _RELU_ZEROS.get((dt, n))
    if z is None:
        z = np.zeros(n, dt)
        z.flags.writeable = False
        if len(_RELU_ZEROS) < 32:
            _RELU_ZEROS[(dt, n)] = z
    return z


@primitive("relu", promote="same", save_output=True, ufunc=(np.maximum, 0.0))
def relu_p(x):
    if type(x) is np.ndarray and x.size >= 4096 and (x.dtype is _F32 or x.dtype is _F64):
        shape = x.shape
        n = shape[-1]
        if 64 <= n <= 16384:
            return np.maximum(x, _relu_zeros(x.dtype, n))
        if n < 64 and x.size >= 16384 and x.flags.c_contiguous:
            k = len(shape) - 1
            while n < 128:           # ends: the product of all axes is x.size >= 16384
                k -= 1
                n *= shape[k]
            if n <= 16384:
                out = np.empty(shape, x.dtype)
                np.maximum(x.reshape(-1, n), _relu_zeros(x.dtype, n), out=out.reshape(-1, n))
                return out
    return np.maximum(x, 0).astype(x.dtype, copy=False)


relu_p.defvjp(lambda g, out, x: g * (out > 0))


@primitive("leaky_relu", promote="float", save_inputs=True)
def leaky_relu_p(x, negative_slope=0.01):
    return np.where(x > 0, x, x * negative_slope).astype(x.dtype, copy=False)


leaky_relu_p.defvjp(lambda g, out, x, negative_slope=0.01: where_p(x > 0, g, g * negative_slope))


@primitive("elu", promote="float", save_inputs=True, save_output=True)
def elu_p(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False)


elu_p.defvjp(lambda g, out, x, alpha=1.0: where_p(x > 0, g, g * (out + alpha)))


@primitive("gelu", promote="float", save_inputs=True)
def gelu_p(x, approximate="none"):
    if approximate == "tanh":
        return (0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))).astype(x.dtype, copy=False)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return (0.5 * x * (1.0 + _erf_np(x * _INV_SQRT_2))).astype(x.dtype, copy=False)


def _gelu_vjp(g, out, x, approximate="none"):
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = tanh_p(inner)
        dinner = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
        return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)
    cdf = 0.5 * (1.0 + erf_p(x * _INV_SQRT_2))
    pdf = _INV_SQRT_2PI * exp_p(-0.5 * x * x)
    return g * (cdf + x * pdf)


gelu_p.defvjp(_gelu_vjp)


@primitive("silu", promote="float", save_inputs=True)
def silu_p(x):
    return x * _sigmoid_np(x)


def _silu_vjp(g, out, x):
    s = sigmoid_p(x)
    return g * (s * (1.0 + x * (1.0 - s)))


silu_p.defvjp(_silu_vjp)


@primitive("softplus", promote="float", save_inputs=True)
def softplus_p(x, beta=1.0, threshold=20.0):
    bx = x * beta
    soft = np.logaddexp(0.0, bx) / beta
    return np.where(bx > threshold, x, soft).astype(x.dtype, copy=False)


softplus_p.defvjp(lambda g, out, x, beta=1.0, threshold=20.0:
                  where_p(x * beta > threshold, g, g * sigmoid_p(x * beta)))


@primitive("hardtanh", promote="same", save_inputs=True)
def hardtanh_p(x, min_val=-1.0, max_val=1.0):
    return np.clip(x, min_val, max_val).astype(x.dtype, copy=False)


hardtanh_p.defvjp(lambda g, out, x, min_val=-1.0, max_val=1.0:
                  g * ((x > min_val) & (x < max_val)))


# PyTorch: clamp with number bounds is ClampBackward1, with tensor bounds ClampBackward0
@primitive("clamp", promote="same", save_inputs=True, torch_name="ClampBackward1")
def clamp_p(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    if min is not None and max is not None:
        return np.minimum(np.maximum(x, min), max).astype(x.dtype, copy=False)
    if min is not None:
        return np.maximum(x, min).astype(x.dtype, copy=False)
    return np.minimum(x, max).astype(x.dtype, copy=False)


def _clamp_vjp(g, out, x, min=None, max=None):
    if min is not None and max is not None:
        return g * ((x >= min) & (x <= max))
    if min is not None:
        return g * (x >= min)
    return g * (x <= max)


clamp_p.defvjp(_clamp_vjp)


@primitive("clamp_tensor", promote="same", broadcasts=True, save_inputs=True,
           torch_name="ClampBackward0")
def clamp_tensor_p(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


clamp_tensor_p.defvjp(
    lambda g, out, x, lo, hi: g * ((x >= lo) & (x <= hi)),
    lambda g, out, x, lo, hi: g * ((x < lo) & (lo <= hi)),
    lambda g, out, x, lo, hi: g * ((x > hi) | (lo > hi)),
)


@primitive("maximum", promote="same", broadcasts=True, save_inputs=True, ufunc=np.maximum)
def maximum_p(x, y):
    return np.maximum(x, y)


maximum_p.defvjp(lambda g, out, x, y: g * ((x > y) + (x == y) * 0.5),
                 lambda g, out, x, y: g * ((y > x) + (x == y) * 0.5))


@primitive("minimum", promote="same", broadcasts=True, save_inputs=True, ufunc=np.minimum)
def minimum_p(x, y):
    return np.minimum(x, y)


minimum_p.defvjp(lambda g, out, x, y: g * ((x < y) + (x == y) * 0.5),
                 lambda g, out, x, y: g * ((y < x) + (x == y) * 0.5))


@primitive("fmax", promote="same", broadcasts=True, save_inputs=True)
def fmax_p(x, y):
    return np.fmax(x, y)


fmax_p.defvjp(lambda g, out, x, y: g * ((x >= y) | isnan_p(y)),
              lambda g, out, x, y: g * ((y > x) | isnan_p(x) & ~isnan_p(y)))


@primitive("fmin", promote="same", broadcasts=True, save_inputs=True)
def fmin_p(x, y):
    return np.fmin(x, y)


fmin_p.defvjp(lambda g, out, x, y: g * ((x <= y) | isnan_p(y)),
              lambda g, out, x, y: g * ((y < x) | isnan_p(x) & ~isnan_p(y)))


@primitive("where", promote="same", promote_from=1, broadcasts=True, save_inputs=True)
def where_p(cond, x, y):
    if cond.dtype.kind != "b":
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
    return np.where(cond, x, y)


where_p.defvjp(None, lambda g, out, c, x, y: where_p(c, g, 0.0),
               lambda g, out, c, x, y: where_p(c, 0.0, g))


@primitive("lerp", promote="same", broadcasts=True, save_inputs=True)
def lerp_p(start, end, weight):
    return start + weight * (end - start)


lerp_p.defvjp(lambda g, out, s, e, w: g * (1.0 - w), lambda g, out, s, e, w: g * w,
              lambda g, out, s, e, w: g * (e - s))


@primitive("hypot", promote="float", broadcasts=True, save_inputs=True, save_output=True)
def hypot_p(x, y):
    return np.hypot(x, y)


hypot_p.defvjp(lambda g, out, x, y: g * x / out, lambda g, out, x, y: g * y / out)


@primitive("xlogy", promote="float", broadcasts=True, save_inputs=True)
def xlogy_p(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(x == 0, 0.0, x * np.log(y))
    return np.where(np.isnan(y), np.nan, r).astype(np.result_type(x, y), copy=False)


xlogy_p.defvjp(lambda g, out, x, y: where_p(x == 0, 0.0, g * log_p(y)),
               lambda g, out, x, y: where_p(x == 0, 0.0, g * x / y))


@primitive("logaddexp", promote="float", broadcasts=True, save_inputs=True, save_output=True)
def logaddexp_p(x, y):
    return np.logaddexp(x, y)


logaddexp_p.defvjp(lambda g, out, x, y: g * exp_p(x - out), lambda g, out, x, y: g * exp_p(y - out))


@primitive("nan_to_num", promote="same", save_inputs=True)
def nan_to_num_p(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


nan_to_num_p.defvjp(lambda g, out, x, nan=0.0, posinf=None, neginf=None: g * isfinite_p(x))


# ---------------------------------------------------------------------------
# device conversion (differentiable; the dtype cast is in ops/structural.py)
# ---------------------------------------------------------------------------

@primitive("to_device", save_inputs=True)
def to_device_p(x, device="cpu"):
    return move_to(x, _device(device))


def _to_device_vjp(g, out, x, device="cpu"):
    src = x.device if isinstance(x, Tensor) else device_of(x)
    return to_device_p(g, device=str(src))


to_device_p.defvjp(_to_device_vjp)


# ---------------------------------------------------------------------------
# non-differentiable: comparisons, logic, predicates
# ---------------------------------------------------------------------------

def _nondiff(name, fn, promote="same"):
    return primitive(name, promote=promote, differentiable=False)(fn)


eq_p = _nondiff("eq", lambda x, y: np.equal(x, y))
ne_p = _nondiff("ne", lambda x, y: np.not_equal(x, y))
lt_p = _nondiff("lt", lambda x, y: np.less(x, y))
le_p = _nondiff("le", lambda x, y: np.less_equal(x, y))
gt_p = _nondiff("gt", lambda x, y: np.greater(x, y))
ge_p = _nondiff("ge", lambda x, y: np.greater_equal(x, y))
logical_and_p = _nondiff("logical_and", lambda x, y: np.logical_and(x, y), None)
logical_or_p = _nondiff("logical_or", lambda x, y: np.logical_or(x, y), None)
logical_xor_p = _nondiff("logical_xor", lambda x, y: np.logical_xor(x, y), None)
logical_not_p = _nondiff("logical_not", lambda x: np.logical_not(x), None)
isnan_p = _nondiff("isnan", lambda x: np.isnan(x), None)
isinf_p = _nondiff("isinf", lambda x: np.isinf(x), None)
isfinite_p = _nondiff("isfinite", lambda x: np.isfinite(x), None)
signbit_p = _nondiff("signbit", lambda x: np.signbit(x), None)
isposinf_p = _nondiff("isposinf", lambda x: np.isposinf(x), None)
isneginf_p = _nondiff("isneginf", lambda x: np.isneginf(x), None)


def _int_or_bool(name, fn):
    def impl(*xs):
        for x in xs:
            if getattr(x, "dtype", np.dtype(np.int64)).kind == "f":
                raise DtypeNotImplementedError(f"{name}: only integer and bool tensors are supported, got {x.dtype}")
        return fn(*xs)

    return _nondiff(name, impl)


bitwise_and_p = _int_or_bool("bitwise_and", np.bitwise_and)
bitwise_or_p = _int_or_bool("bitwise_or", np.bitwise_or)
bitwise_xor_p = _int_or_bool("bitwise_xor", np.bitwise_xor)
bitwise_not_p = _int_or_bool("bitwise_not", lambda x: np.logical_not(x) if x.dtype.kind == "b" else np.invert(x))
# Shifts are arithmetic on signed integers (``-8 >> 1 == -4``), as in PyTorch.
bitwise_left_shift_p = _int_or_bool("bitwise_left_shift", np.left_shift)
bitwise_right_shift_p = _int_or_bool("bitwise_right_shift", np.right_shift)
gcd_p = _int_or_bool("gcd", np.gcd)
lcm_p = _int_or_bool("lcm", np.lcm)


_ = xp  # re-exported helper for op authors

# ops/rnn.py's reference loops call ``E.sigmoid`` / ``E.tanh`` / ``E.relu`` on Tensors: the
# primitive objects, which bind (the PyTorch-facing functions are in dyngraph.surface).
sigmoid, tanh, relu = sigmoid_p, tanh_p, relu_p

heaviside_p = Primitive("heaviside", np.heaviside, promote="same", differentiable=False)


# Primitives whose forward or rules can meet log(0), x/0, 0/0, overflow or a domain error:
# silent like PyTorch (see quiet_fp).  add/sub/mul stay unwrapped: they are the hottest
# ops and warn only on inf - inf, 0 * inf or overflow (docs/debugging.md).
quiet_primitives(
    div_p, reciprocal_p, floor_divide_p, remainder_p, fmod_p, pow_p, exp_p, exp2_p, expm1_p,
    log_p, log1p_p, log2_p, log10_p, sqrt_p, rsqrt_p, sin_p, cos_p, tan_p, asin_p, acos_p, atan_p,
    atan2_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, tanh_p, sigmoid_p, erf_p, erfc_p,
    erfinv_p, lgamma_p, digamma_p, polygamma_p, elu_p, gelu_p, silu_p, softplus_p, hypot_p,
    xlogy_p, logaddexp_p)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_elementwise():
    from ._batching import elementwise  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY  # noqa: PLC0415  (as above)

    for name in ("add", "sub", "mul", "div", "neg", "pow", "abs", "sign", "reciprocal",
                 "floor_divide", "remainder", "fmod", "exp", "exp2", "expm1", "log", "log1p",
                 "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan",
                 "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "sigmoid", "erf",
                 "erfc", "erfinv", "lgamma", "digamma", "polygamma", "floor", "ceil", "round",
                 "trunc", "relu", "leaky_relu", "elu", "gelu", "silu", "softplus", "hardtanh",
                 "clamp", "clamp_tensor", "maximum", "minimum", "fmax", "fmin", "where", "lerp",
                 "hypot", "xlogy", "logaddexp", "nan_to_num", "to_device", "eq", "ne",
                 "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
                 "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf", "bitwise_and",
                 "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                 "bitwise_right_shift", "gcd", "lcm", "heaviside"):
        REGISTRY[name].defbatch(elementwise)


_defbatch_elementwise()
