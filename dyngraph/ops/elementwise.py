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

from .._core.state import concrete
from ..backend import device as _device
from ..backend import device_of, move_to, xp
from ..dtypes import get_default_dtype
from ..tensor import Tensor
from ._util import as_tensor_arg, install, operand, quiet_primitives
from .registry import Primitive, bind, primitive

__all__ = [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "neg",
    "negative", "pow", "abs", "absolute", "sign", "sgn", "reciprocal", "exp", "exp2", "expm1",
    "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "square", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "tanh", "sigmoid", "relu", "leaky_relu", "elu",
    "gelu", "silu", "softplus", "erf", "erfc", "erfinv", "lgamma", "digamma", "polygamma",
    "isposinf", "isneginf", "copysign", "float_power",
    "logaddexp2", "clamp", "clip", "maximum", "minimum", "fmax",
    "fmin", "where", "floor", "ceil", "round", "trunc", "frac", "floor_divide", "remainder",
    "fmod", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal",
    "less_equal", "not_equal", "equal", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
    "bitwise_right_shift", "gcd", "lcm", "isnan",
    "isinf", "isfinite", "isclose", "allclose", "lerp", "hypot", "xlogy", "nan_to_num",
    "relu6", "hardtanh", "logaddexp", "sinc", "deg2rad", "rad2deg", "signbit",
    "addcmul", "addcdiv", "clamp_min", "clamp_max", "logit", "arcsin", "arccos", "arctan",
    "arctan2", "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "heaviside",
]

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
    return g * where(y == 0, 0.0, y * pow_p(x, y - 1))


def _pow_vjp_exp(g, out, x, y):
    safe = where((x == 0) & (y >= 0), 1.0, x) if isinstance(x, Tensor) else (
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
        raise ZeroDivisionError("floor_divide: integer division by zero")
    return np.floor_divide(x, y)


@primitive("remainder", promote="same", broadcasts=True, save_inputs=True)
def remainder_p(x, y):
    if np.result_type(x, y).kind in "iub" and np.any(np.asarray(y) == 0):
        raise ZeroDivisionError("remainder: integer division by zero")
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


tanh_p.defvjp(lambda g, out, x: g * (1.0 - out * out))


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


@primitive("sigmoid", promote="float", save_output=True)
def sigmoid_p(x):
    return _sigmoid_np(x)


sigmoid_p.defvjp(lambda g, out, x: g * out * (1.0 - out))


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
    from scipy.special import gammaln  # noqa: PLC0415

    return gammaln(x).astype(x.dtype, copy=False)


@primitive("digamma", promote="float", save_inputs=True)
def digamma_p(x):
    from scipy.special import psi  # noqa: PLC0415

    # PyTorch: digamma(0) = -inf (SciPy gives NaN at the pole 0)
    return np.where(x == 0, -np.inf, psi(x)).astype(x.dtype, copy=False)


@primitive("polygamma", promote="float", save_inputs=True)
def polygamma_p(x, n=1):
    from scipy.special import polygamma as _pg  # noqa: PLC0415

    return _pg(n, x).astype(x.dtype, copy=False)


lgamma_p.defvjp(lambda g, out, x: g * digamma_p(x))
digamma_p.defvjp(lambda g, out, x: g * polygamma_p(x, n=1))
polygamma_p.defvjp(lambda g, out, x, n=1: g * polygamma_p(x, n=n + 1))


def lgamma(input):
    """``log |Gamma(input)|``.

    >>> dg.lgamma(dg.tensor([1.0, 5.0]))
    tensor([0.0000, 3.1781])
    """
    return bind(lgamma_p, (as_tensor_arg(input, "lgamma"),))


def digamma(input):
    """The derivative of :func:`lgamma` (``-inf`` at 0, as PyTorch)."""
    return bind(digamma_p, (as_tensor_arg(input, "digamma"),))


def polygamma(n: int, input):
    """The ``n``-th derivative of :func:`digamma` (``polygamma(0, x) == digamma(x)``)."""
    if int(n) < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got {n}")
    if int(n) == 0:
        return digamma(input)
    return bind(polygamma_p, (as_tensor_arg(input, "polygamma"),), {"n": int(n)})


def _erf_np(x):
    try:
        from scipy.special import erf as _erf  # noqa: PLC0415

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

@primitive("relu", promote="same", save_output=True, ufunc=(np.maximum, 0.0))
def relu_p(x):
    return np.maximum(x, 0).astype(x.dtype, copy=False)


relu_p.defvjp(lambda g, out, x: g * (out > 0))


@primitive("leaky_relu", promote="float", save_inputs=True)
def leaky_relu_p(x, negative_slope=0.01):
    return np.where(x > 0, x, x * negative_slope).astype(x.dtype, copy=False)


leaky_relu_p.defvjp(lambda g, out, x, negative_slope=0.01: where(x > 0, g, g * negative_slope))


@primitive("elu", promote="float", save_inputs=True, save_output=True)
def elu_p(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False)


elu_p.defvjp(lambda g, out, x, alpha=1.0: where(x > 0, g, g * (out + alpha)))


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
                  where(x * beta > threshold, g, g * sigmoid_p(x * beta)))


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
# dtype / device conversion (differentiable)
# ---------------------------------------------------------------------------

@primitive("cast", save_inputs=True, torch_name="ToCopyBackward0")
def cast_p(x, dtype=None):
    if dtype == np.float16 and x.dtype.itemsize > 2:
        with np.errstate(over="ignore"):  # out-of-range values become inf silently, as in PyTorch
            return x.astype(dtype)
    return x.astype(dtype)


def _cast_vjp(g, out, x, dtype=None):
    src = x.dtype if not isinstance(x, Tensor) else x._data.dtype
    if src.kind != "f":
        return None
    return cast_p(g, dtype=src)


cast_p.defvjp(_cast_vjp)


@primitive("to_device", save_inputs=True)
def to_device_p(x, device="cpu"):
    return move_to(x, _device(device))


def _to_device_vjp(g, out, x, device="cpu"):
    src = x.device if isinstance(x, Tensor) else device_of(x)
    return to_device_p(g, device=str(src))


to_device_p.defvjp(_to_device_vjp)


def cast(x, dtype):
    return bind(cast_p, (x,), {"dtype": np.dtype(dtype)})


def to_device(x, device):
    return bind(to_device_p, (x,), {"device": device})


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
                raise TypeError(f"{name}: only integer and bool tensors are supported, got {x.dtype}")
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


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

def _un(prim):
    def fn(input):
        return bind(prim, (input if isinstance(input, Tensor) else as_tensor_arg(input, prim.name),))

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` (differentiable: {prim.differentiable})."
    return fn


def _bin(prim):
    def fn(input, other):
        if not isinstance(input, Tensor):
            input = operand(input)
            if not isinstance(input, Tensor) and not isinstance(other, Tensor):
                input = as_tensor_arg(input, prim.name)
        other = operand(other)
        try:
            return bind(prim, (input, other))
        except ValueError as exc:
            raise _broadcast_error(exc, prim.name, input, other) from exc

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` with broadcasting and PyTorch type promotion."
    return fn


def add(input, other, *, alpha=1, out=None):
    """``input + alpha * other`` with broadcasting.

    >>> dg.add(dg.ones(2), dg.ones(2), alpha=3)
    tensor([4., 4.])
    """
    other = operand(other)
    if alpha != 1:
        other = other * alpha
    return _bin(add_p)(input, other)


def sub(input, other, *, alpha=1):
    other = operand(other)
    if alpha != 1:
        other = other * alpha
    return _bin(sub_p)(input, other)


subtract = sub
mul = multiply = _bin(mul_p)


def div(input, other, *, rounding_mode=None):
    """True division (``rounding_mode=None``), or ``"floor"`` / ``"trunc"`` division."""
    if rounding_mode is None:
        return _bin(div_p)(input, other)
    if rounding_mode == "floor":
        return _bin(floor_divide_p)(input, other)
    if rounding_mode == "trunc":
        q = _bin(div_p)(input, other)
        res = trunc(q)
        it = input if isinstance(input, Tensor) else None
        if it is not None and it._data.dtype.kind in "iu":
            return res.to(it.dtype)
        return res
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


divide = true_divide = div
neg = negative = _un(neg_p)
abs = absolute = _un(abs_p)
sign = sgn = _un(sign_p)
reciprocal = _un(reciprocal_p)
exp, exp2, expm1 = _un(exp_p), _un(exp2_p), _un(expm1_p)
log, log1p, log2, log10 = _un(log_p), _un(log1p_p), _un(log2_p), _un(log10_p)
sqrt, rsqrt = _un(sqrt_p), _un(rsqrt_p)
sin, cos, tan = _un(sin_p), _un(cos_p), _un(tan_p)
asin, acos, atan = _un(asin_p), _un(acos_p), _un(atan_p)
arcsin, arccos, arctan = asin, acos, atan
sinh, cosh, tanh = _un(sinh_p), _un(cosh_p), _un(tanh_p)
asinh, acosh, atanh = _un(asinh_p), _un(acosh_p), _un(atanh_p)
arcsinh, arccosh, arctanh = asinh, acosh, atanh
sigmoid = _un(sigmoid_p)
erf, erfc = _un(erf_p), _un(erfc_p)
floor, ceil, trunc = _un(floor_p), _un(ceil_p), _un(trunc_p)
fix = trunc
atan2 = arctan2 = _bin(atan2_p)
maximum, minimum = _bin(maximum_p), _bin(minimum_p)
fmax, fmin = _bin(fmax_p), _bin(fmin_p)
floor_divide = _bin(floor_divide_p)
remainder = _bin(remainder_p)
fmod = _bin(fmod_p)
hypot = _bin(hypot_p)
xlogy = _bin(xlogy_p)
logaddexp = _bin(logaddexp_p)
eq, ne, lt, le, gt, ge = _bin(eq_p), _bin(ne_p), _bin(lt_p), _bin(le_p), _bin(gt_p), _bin(ge_p)
greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne
logical_and, logical_or, logical_xor = _bin(logical_and_p), _bin(logical_or_p), _bin(logical_xor_p)
logical_not = _un(logical_not_p)
bitwise_and, bitwise_or, bitwise_xor = _bin(bitwise_and_p), _bin(bitwise_or_p), _bin(bitwise_xor_p)
bitwise_left_shift, bitwise_right_shift = _bin(bitwise_left_shift_p), _bin(bitwise_right_shift_p)
gcd, lcm = _bin(gcd_p), _bin(lcm_p)
bitwise_not = _un(bitwise_not_p)
isnan, isinf, isfinite, signbit = _un(isnan_p), _un(isinf_p), _un(isfinite_p), _un(signbit_p)
isposinf, isneginf = _un(isposinf_p), _un(isneginf_p)


def square(input):
    return mul(input, input)


def frac(input):
    return input - trunc(input)


def round(input, *, decimals: int = 0):
    return bind(round_p, (input,), {"decimals": decimals} if decimals else {})


def pow(input, exponent):
    """``input ** exponent``; either may be a tensor or a number."""
    if not isinstance(input, Tensor):
        input = operand(input)
        if not isinstance(exponent, Tensor):
            input = as_tensor_arg(input, "pow")
    return bind(pow_p, (input, operand(exponent)))


def relu(input, inplace: bool = False):
    return bind(relu_p, (input,))


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return bind(leaky_relu_p, (input,), {"negative_slope": negative_slope})


def elu(input, alpha: float = 1.0, inplace: bool = False):
    return bind(elu_p, (input,), {"alpha": alpha})


def gelu(input, approximate: str = "none"):
    """Gaussian error linear unit, exact (``"none"``) or the ``"tanh"`` approximation."""
    return bind(gelu_p, (input,), {"approximate": approximate})


def silu(input, inplace: bool = False):
    return bind(silu_p, (input,))


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    return bind(softplus_p, (input,), {"beta": beta, "threshold": threshold})


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    return bind(hardtanh_p, (input,), {"min_val": min_val, "max_val": max_val})


def clamp(input, min=None, max=None):
    """Limit values to [min, max]; bounds may be numbers or tensors."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        lo = min if min is not None else float("-inf")
        hi = max if max is not None else float("inf")
        return bind(clamp_tensor_p, (input, operand(lo), operand(hi)))
    params = {}
    if (isinstance(min, float) or isinstance(max, float)) and input.dtype.np.kind in "iub":
        input = input.to(get_default_dtype())
    if min is not None:
        params["min"] = min
    if max is not None:
        params["max"] = max
    return bind(clamp_p, (input,), params)


clip = clamp


def where(condition, input=None, other=None):
    """``input`` where ``condition`` holds, else ``other`` (broadcast)."""
    if input is None and other is None:
        from .indexing import nonzero  # noqa: PLC0415

        return nonzero(condition, as_tuple=True)
    condition = as_tensor_arg(condition, "where")
    args = (condition, operand(input), operand(other))
    try:
        return bind(where_p, args)
    except ValueError as exc:
        raise _broadcast_error(exc, "where", *args) from exc


def lerp(input, end, weight):
    args = (input, operand(end), operand(weight))
    try:
        return bind(lerp_p, args)
    except ValueError as exc:
        raise _broadcast_error(exc, "lerp", *args) from exc


def nan_to_num(input, nan: float = 0.0, posinf=None, neginf=None):
    return bind(nan_to_num_p, (input,), {"nan": nan, "posinf": posinf, "neginf": neginf})


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    # computed outside primitives: the inputs' values are guarded under capture
    a = concrete(input, "isclose") if isinstance(input, Tensor) else np.asarray(input)
    b = concrete(other, "isclose") if isinstance(other, Tensor) else np.asarray(other)
    return Tensor._make(np.asarray(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)), False, None, 0)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(concrete(isclose(input, other, rtol, atol, equal_nan), "allclose").all())


def equal(input, other) -> bool:
    return input.shape == other.shape and bool(np.array_equal(concrete(input, "equal"),
                                                              concrete(other, "equal")))


def sinc(input):
    x = input * math.pi
    safe = where(x == 0, 1.0, x)
    return where(x == 0, 1.0, sin(safe) / safe)


def deg2rad(input):
    return input * (math.pi / 180.0)


def rad2deg(input):
    return input * (180.0 / math.pi)


# ---------------------------------------------------------------------------
# Tensor operators and methods
# ---------------------------------------------------------------------------

_FAST = {Tensor, int, float}


def _broadcast_error(exc: ValueError, name: str, *operands) -> Exception:
    """PyTorch's RuntimeError for operands whose shapes do not broadcast (NumPy raises
    ValueError); other ValueErrors pass through unchanged."""
    if "broadcast" not in str(exc):
        return exc
    shapes = [tuple(getattr(o, "shape", ())) for o in operands]
    n = max(len(sh) for sh in shapes)
    padded = [(1,) * (n - len(sh)) + sh for sh in shapes]
    for d in range(n - 1, -1, -1):
        sizes = [p[d] for p in padded if p[d] != 1]
        if len(set(sizes)) > 1:
            return RuntimeError(
                f"{name}: The size of tensor a ({sizes[0]}) must match the size of tensor b "
                f"({sizes[1]}) at non-singleton dimension {d} (shapes "
                f"{', '.join(str(list(sh)) for sh in shapes)})")
    return RuntimeError(f"{name}: {exc}")


def _op(prim):
    # try/except costs nothing in CPython >= 3.11 unless an exception is raised.
    # An operand that is not a number or array-like (a str, None, an object) returns
    # NotImplemented: Python then tries the other operand's method and, failing that,
    # raises PyTorch's "unsupported operand type(s) for +: 'Tensor' and 'str'".
    def method(self, other):
        if other.__class__ not in _FAST:
            try:
                other = operand(other)
            except TypeError:
                return NotImplemented
        try:
            return bind(prim, (self, other))
        except ValueError as exc:
            raise _broadcast_error(exc, prim.name, self, other) from exc

    def rmethod(self, other):
        if other.__class__ not in _FAST:
            try:
                other = operand(other)
            except TypeError:
                return NotImplemented
        try:
            return bind(prim, (other, self))
        except ValueError as exc:
            raise _broadcast_error(exc, prim.name, other, self) from exc

    return method, rmethod


_add, _radd = _op(add_p)
_sub, _rsub = _op(sub_p)
_mul, _rmul = _op(mul_p)
_div, _rdiv = _op(div_p)
_fdiv, _rfdiv = _op(floor_divide_p)
_mod, _rmod = _op(remainder_p)
_pow, _rpow = _op(pow_p)
_and, _rand = _op(bitwise_and_p)
_or, _ror = _op(bitwise_or_p)
_xor, _rxor = _op(bitwise_xor_p)
_lshift, _rlshift = _op(bitwise_left_shift_p)
_rshift, _rrshift = _op(bitwise_right_shift_p)


def _cmp(prim):
    def method(self, other):
        if other is None:
            return NotImplemented if prim is not ne_p else True
        if other.__class__ not in _FAST:
            try:
                other = operand(other)
            except TypeError:
                return NotImplemented
        return bind(prim, (self, other))

    return method


def _neg(self):
    return bind(neg_p, (self,))


def _abs(self):
    return bind(abs_p, (self,))


def _invert(self):
    return bind(bitwise_not_p, (self,))


def _pos(self):
    return self


def _contains(self, element) -> bool:
    """``element in tensor``: whether any entry equals ``element`` (a number or a tensor)."""
    if not isinstance(element, (Tensor, int, float, bool)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                           f"{type(element).__name__}")
    return (self == element).any().item() is True


install({
    "__add__": _add, "__radd__": _radd, "__sub__": _sub, "__rsub__": _rsub,
    "__mul__": _mul, "__rmul__": _rmul, "__truediv__": _div, "__rtruediv__": _rdiv,
    "__floordiv__": _fdiv, "__rfloordiv__": _rfdiv, "__mod__": _mod, "__rmod__": _rmod,
    "__pow__": _pow, "__rpow__": _rpow, "__and__": _and, "__rand__": _rand, "__or__": _or,
    "__ror__": _ror, "__xor__": _xor, "__rxor__": _rxor, "__neg__": _neg, "__abs__": _abs,
    "__invert__": _invert, "__pos__": _pos, "__contains__": _contains, "__lshift__": _lshift, "__rlshift__": _rlshift,
    "__rshift__": _rshift, "__rrshift__": _rrshift,
    "bitwise_left_shift": bitwise_left_shift, "bitwise_right_shift": bitwise_right_shift,
    "gcd": gcd, "lcm": lcm,
    "__eq__": _cmp(eq_p), "__ne__": _cmp(ne_p), "__lt__": _cmp(lt_p), "__le__": _cmp(le_p),
    "__gt__": _cmp(gt_p), "__ge__": _cmp(ge_p),
    "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div,
    "divide": div, "true_divide": div, "neg": neg, "negative": neg, "pow": pow, "abs": abs,
    "absolute": abs, "sign": sign, "sgn": sign, "reciprocal": reciprocal, "exp": exp,
    "exp2": exp2, "expm1": expm1, "log": log, "log1p": log1p, "log2": log2, "log10": log10,
    "sqrt": sqrt, "rsqrt": rsqrt, "square": square, "sin": sin, "cos": cos, "tan": tan,
    "asin": asin, "acos": acos, "atan": atan, "arcsin": asin, "arccos": acos, "arctan": atan,
    "atan2": atan2, "arctan2": atan2, "sinh": sinh, "cosh": cosh, "tanh": tanh,
    "sigmoid": sigmoid, "relu": relu, "erf": erf, "erfc": erfc, "floor": floor, "ceil": ceil,
    "round": round, "trunc": trunc, "fix": trunc, "frac": frac, "clamp": clamp, "clip": clamp,
    "maximum": maximum, "minimum": minimum, "fmax": fmax, "fmin": fmin, "where":
    lambda self, condition, other: where(condition, self, other), "floor_divide": floor_divide,
    "remainder": remainder, "fmod": fmod, "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt,
    "ge": ge, "greater": gt, "less": lt, "greater_equal": ge, "less_equal": le,
    "not_equal": ne, "equal": equal, "logical_and": logical_and, "logical_or": logical_or,
    "logical_xor": logical_xor, "logical_not": logical_not, "bitwise_and": bitwise_and,
    "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "signbit": signbit,
    "isclose": isclose, "allclose": allclose, "lerp": lerp, "hypot": hypot, "xlogy": xlogy,
    "nan_to_num": nan_to_num, "logaddexp": logaddexp, "sinc": sinc, "deg2rad": deg2rad,
    "rad2deg": rad2deg,
})

_ = xp  # re-exported helper for op authors


# -- composites used by hand-written optimizers and training loops -------------------
# Built from the primitives above, so values, gradients and second-order gradients
# follow from theirs.

def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2`` (broadcast).

    >>> dg.addcmul(dg.zeros(2), dg.tensor([1., 2.]), dg.tensor([3., 4.]), value=0.5)
    tensor([1.5000, 4.0000])
    """
    prod = mul(tensor1, tensor2)
    return add(input, prod if value == 1 else mul(prod, value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2`` (broadcast), as in Adam's update
    ``p.addcdiv_(exp_avg, denom, value=-step_size)``.

    >>> dg.addcdiv(dg.ones(2), dg.tensor([1., 2.]), dg.tensor([4., 4.]), value=2)
    tensor([1.5000, 2.0000])
    """
    t1 = as_tensor_arg(tensor1, "addcdiv")
    t2 = as_tensor_arg(tensor2, "addcdiv")
    if t1._data.dtype.kind in "biu" and t2._data.dtype.kind in "biu":
        raise RuntimeError(
            "addcdiv: integer division of tensors is no longer supported; convert tensor1 "
            f"({t1.dtype}) or tensor2 ({t2.dtype}) to a floating point dtype")
    quot = div(t1, t2)
    return add(input, quot if value == 1 else mul(quot, value))


def clamp_min(input, min):
    """``clamp(input, min=min)``."""
    return clamp(input, min=min)


def clamp_max(input, max):
    """``clamp(input, max=max)``."""
    return clamp(input, max=max)


def logit(input, eps=None):
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given.

    >>> dg.logit(dg.tensor([0.5, 0.75]))
    tensor([0.0000, 1.0986])
    """
    p = input if eps is None else clamp(input, eps, 1.0 - eps)
    return sub(log(p), log1p(neg(p)))


arctan2 = atan2  # NumPy-style name, as torch has

heaviside_p = Primitive("heaviside", np.heaviside, promote="same", differentiable=False)


def erfinv(input):
    """Inverse error function on (-1, 1) (±inf at ±1).

    >>> dg.erfinv(dg.tensor([0.0, 0.5]))
    tensor([0.0000, 0.4769])
    """
    return bind(erfinv_p, (as_tensor_arg(input, "erfinv"),))


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (``-0.0`` counts as negative); float result.

    >>> dg.copysign(dg.tensor([1.0, -2.0]), -1.0)
    tensor([-1., -2.])
    """
    input = as_tensor_arg(input, "copysign")
    if input.dtype.np.kind != "f":
        input = input.to(get_default_dtype())
    neg = signbit(operand(other) if isinstance(other, Tensor) else as_tensor_arg(float(other), "copysign"))
    mag = abs(input)
    out = where(neg, -mag, mag)
    if isinstance(other, Tensor) and other.requires_grad:
        # PyTorch gives ``other`` an all-zero gradient (not None): a finite zero term does that
        out = out + nan_to_num(sign(other)) * 0.0
    return out


def float_power(input, exponent):
    """``input ** exponent`` computed in float64 (PyTorch's ``float_power``)."""
    base = as_tensor_arg(input, "float_power").double()
    return base ** (exponent.double() if isinstance(exponent, Tensor) else float(exponent))


def logaddexp2(input, other):
    """``log2(2**input + 2**other)``, without overflow."""
    ln2 = math.log(2.0)
    return logaddexp(input * ln2, operand(other) * ln2) / ln2


def heaviside(input, values):
    """Step function: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where
    ``input > 0`` (not differentiable, as in PyTorch)."""
    return bind(heaviside_p, (input, operand(values)))


_INPLACE_FORMS = (
    "absolute", "acos", "arccos", "asin", "arcsin", "atan", "arctan", "arctan2", "cosh", "sinh",
    "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh",
    "tan", "erf", "erfc", "exp2", "expm1", "log10", "log1p", "log2", "logit", "rsqrt", "sinc",
    "sgn", "negative", "fix", "frac", "deg2rad", "rad2deg", "nan_to_num", "hypot", "xlogy",
    "eq", "ne", "not_equal", "lt", "le", "gt", "ge", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "cumsum", "cumprod", "addmm", "addmv", "addr",
    "addbmm", "baddbmm",
)


def _install_composites() -> None:
    def inplace(fn, name):
        def method(self, *args, **kwargs):
            from .inplace import apply_inplace  # noqa: PLC0415  (inplace imports this module)

            return apply_inplace(self, lambda s: fn(s, *args, **kwargs), name)

        method.__name__ = name
        method.__doc__ = f"In-place ``{fn.__name__}`` (autograd-aware, bumps the version counter)."
        return method

    # In-place forms of out-of-place methods (``x.erf_()``, ``x.cumsum_(0)``, ``mask.logical_not_()``):
    # the method is looked up when called, so families registered later are found too.
    def inplace_of(base):
        def method(self, *args, **kwargs):
            from .inplace import apply_inplace  # noqa: PLC0415

            return apply_inplace(self, lambda s: getattr(Tensor, base)(s, *args, **kwargs), base + "_")

        method.__name__ = base + "_"
        method.__doc__ = f"In-place ``{base}`` (autograd-aware, bumps the version counter)."
        return method

    install({name + "_": inplace_of(name) for name in _INPLACE_FORMS})
    install({"heaviside": heaviside, "asinh": asinh, "acosh": acosh, "atanh": atanh, "arcsinh": asinh,
             "arccosh": acosh, "arctanh": atanh, "erfinv": erfinv, "copysign": copysign,
             "float_power": float_power, "logaddexp2": logaddexp2, "lgamma": lgamma,
             "digamma": digamma, "polygamma": lambda self, n: polygamma(n, self),
             "isposinf": isposinf, "isneginf": isneginf})
    install({"logit": logit, "addcmul": addcmul, "addcdiv": addcdiv, "clamp_min": clamp_min,
             "clamp_max": clamp_max, "addcmul_": inplace(addcmul, "addcmul_"),
             "addcdiv_": inplace(addcdiv, "addcdiv_"), "clamp_min_": inplace(clamp_min, "clamp_min_"),
             "clamp_max_": inplace(clamp_max, "clamp_max_")})



_install_composites()

# Primitives whose forward or rules can meet log(0), x/0, 0/0, overflow or a domain error:
# silent like PyTorch (see quiet_fp).  add/sub/mul stay unwrapped: they are the hottest
# ops and warn only on inf - inf, 0 * inf or overflow (docs/debugging.md).
quiet_primitives(
    div_p, reciprocal_p, floor_divide_p, remainder_p, fmod_p, pow_p, exp_p, exp2_p, expm1_p,
    log_p, log1p_p, log2_p, log10_p, sqrt_p, rsqrt_p, sin_p, cos_p, tan_p, asin_p, acos_p, atan_p,
    atan2_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, tanh_p, sigmoid_p, erf_p, erfc_p,
    erfinv_p, lgamma_p, digamma_p, polygamma_p, elu_p, gelu_p, silu_p, softplus_p, hypot_p,
    xlogy_p, logaddexp_p, cast_p)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_elementwise():
    from ._batching import elementwise  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY  # noqa: PLC0415

    for name in ("add", "sub", "mul", "div", "neg", "pow", "abs", "sign", "reciprocal",
                 "floor_divide", "remainder", "fmod", "exp", "exp2", "expm1", "log", "log1p",
                 "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan",
                 "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "sigmoid", "erf",
                 "erfc", "erfinv", "lgamma", "digamma", "polygamma", "floor", "ceil", "round",
                 "trunc", "relu", "leaky_relu", "elu", "gelu", "silu", "softplus", "hardtanh",
                 "clamp", "clamp_tensor", "maximum", "minimum", "fmax", "fmin", "where", "lerp",
                 "hypot", "xlogy", "logaddexp", "nan_to_num", "cast", "to_device", "eq", "ne",
                 "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
                 "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf", "bitwise_and",
                 "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                 "bitwise_right_shift", "gcd", "lcm", "heaviside"):
        REGISTRY[name].defbatch(elementwise)


_defbatch_elementwise()
