"""The PyTorch surface of the elementwise family: arithmetic, unary math, activations,
comparisons, logic.

The primitives (forward, rules, save spec) are in :mod:`dyngraph.ops.elementwise`; the
functions here check and coerce arguments and call :func:`bind`.  The Tensor operators and
methods that call them are attached by :mod:`dyngraph.surface.methods`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from .._core.state import concrete
from ..backend import device as _device
from ..dtypes import get_default_dtype
from ..ops.elementwise import (
    abs_p,
    acos_p,
    acosh_p,
    add_p,
    asin_p,
    asinh_p,
    atan2_p,
    atan_p,
    atanh_p,
    bitwise_and_p,
    bitwise_left_shift_p,
    bitwise_not_p,
    bitwise_or_p,
    bitwise_right_shift_p,
    bitwise_xor_p,
    ceil_p,
    clamp_p,
    clamp_tensor_p,
    cos_p,
    cosh_p,
    digamma_p,
    div_p,
    elu_p,
    eq_p,
    erf_p,
    erfc_p,
    erfinv_p,
    exp2_p,
    exp_p,
    expm1_p,
    floor_divide_p,
    floor_p,
    fmax_p,
    fmin_p,
    fmod_p,
    gcd_p,
    ge_p,
    gelu_p,
    gt_p,
    hardtanh_p,
    heaviside_p,
    hypot_p,
    isfinite_p,
    isinf_p,
    isnan_p,
    isneginf_p,
    isposinf_p,
    lcm_p,
    le_p,
    leaky_relu_p,
    lerp_p,
    lgamma_p,
    log1p_p,
    log2_p,
    log10_p,
    log_p,
    logaddexp_p,
    logical_and_p,
    logical_not_p,
    logical_or_p,
    logical_xor_p,
    lt_p,
    maximum_p,
    minimum_p,
    mul_p,
    nan_to_num_p,
    ne_p,
    neg_p,
    polygamma_p,
    pow_p,
    reciprocal_p,
    relu_p,
    remainder_p,
    round_p,
    rsqrt_p,
    sigmoid_p,
    sign_p,
    signbit_p,
    silu_p,
    sin_p,
    sinh_p,
    softplus_p,
    sqrt_p,
    sub_p,
    tan_p,
    tanh_p,
    to_device_p,
    trunc_p,
    where_p,
    xlogy_p,
)
from ..ops.registry import bind
from ..ops.structural import cast_p
from ..tensor import Tensor, parse_to_args
from ._args import as_tensor_arg, operand
from .indexing import nonzero
from .inplace import apply_inplace

__all__ = [
    "result_type", "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "neg",
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


def cast(x, dtype):
    return bind(cast_p, (x,), {"dtype": np.dtype(dtype)})


def to_device(x, device):
    return bind(to_device_p, (x,), {"device": device})


def _to(self, *args, **kwargs) -> Tensor:
    """Convert dtype and/or device: ``t.to(dg.float64)``, ``t.to("cpu")``, ``t.to(other)``."""
    dtype, dev, copy = parse_to_args(args, kwargs)
    out = self
    if dtype is not None:
        np_dt = _dt.to_numpy_dtype(dtype)
        if np_dt != self._data.dtype:
            out = cast(out, dtype=np_dt)
    if dev is not None:
        dev = _device(dev)
        if dev != out.device:
            out = to_device(out, device=str(dev))
    if copy and out is self:
        out = self.clone()
    return out


def result_type(*operands) -> _dt.dtype:
    """PyTorch's ``result_type`` for tensors and Python scalars.

    >>> dg.result_type(dg.tensor([1, 2]), 1.5)
    dyngraph.float32
    """
    arrays = [o._data for o in operands if isinstance(o, Tensor)]
    scalars = [o for o in operands if not isinstance(o, Tensor)]
    return _dt._BY_NP[_dt.result_np_dtype(arrays, scalars)]


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
    if not _dt.is_floating_point_dtype(input.dtype.np):
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


def _inplace(fn, name):
    def method(self, *args, **kwargs):
        return apply_inplace(self, lambda s: fn(s, *args, **kwargs), name)

    method.__name__ = name
    method.__doc__ = f"In-place ``{fn.__name__}`` (autograd-aware, bumps the version counter)."
    return method

# In-place forms of out-of-place methods (``x.erf_()``, ``x.cumsum_(0)``, ``mask.logical_not_()``):
# the method is looked up when called, so families registered later are found too.
def _inplace_of(base):
    def method(self, *args, **kwargs):
        return apply_inplace(self, lambda s: getattr(Tensor, base)(s, *args, **kwargs), base + "_")

    method.__name__ = base + "_"
    method.__doc__ = f"In-place ``{base}`` (autograd-aware, bumps the version counter)."
    return method
