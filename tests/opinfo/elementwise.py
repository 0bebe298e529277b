"""Op records for elementwise primitives."""

from __future__ import annotations

import numpy as np

from tests.opinfo import OpInfo, Sample, positive, randn


def _unary_samples(gen=randn, **kw):
    def samples(rng, dt):
        return [
            Sample((gen(rng, (3, 4), dt, **kw),)),
            Sample((gen(rng, (), dt, **kw),), desc="0d"),
            Sample((gen(rng, (0, 3), dt, **kw),), desc="empty"),
            Sample((gen(rng, (2, 3), dt, **kw).T,), desc="noncontig"),
        ]
    return samples


def _binary_samples(gen=randn, gen2=None, **kw):
    gen2 = gen2 or gen

    def samples(rng, dt):
        return [
            Sample((gen(rng, (3, 4), dt, **kw), gen2(rng, (3, 4), dt, **kw))),
            Sample((gen(rng, (2, 3, 4), dt, **kw), gen2(rng, (4,), dt, **kw)), desc="bcast"),
            Sample((gen(rng, (3, 1), dt, **kw), gen2(rng, (1, 4), dt, **kw)), desc="outer"),
            Sample((gen(rng, (), dt, **kw), gen2(rng, (2, 2), dt, **kw)), desc="0d"),
            Sample((gen(rng, (0, 2), dt, **kw), gen2(rng, (2,), dt, **kw)), desc="empty"),
        ]
    return samples


def _away_from_zero(rng, shape, dtype, lo=0.3, hi=2.0):
    a = rng.uniform(lo, hi, size=shape) * rng.choice([-1, 1], size=shape)
    return np.asarray(a).astype(dtype)


def _unit(rng, shape, dtype, lo=-0.9, hi=0.9):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


U = _unary_samples()
B = _binary_samples()

OPS = [
    OpInfo("add", lambda m, x, y: x + y, B),
    OpInfo("add_alpha", lambda m, x, y: m.add(x, y, alpha=2.5), B),
    OpInfo("add_scalar", lambda m, x: x + 1.5, U),
    OpInfo("radd_scalar", lambda m, x: 2 + x, U),
    OpInfo("sub", lambda m, x, y: x - y, B),
    OpInfo("rsub_scalar", lambda m, x: 3.0 - x, U),
    OpInfo("mul", lambda m, x, y: x * y, B),
    OpInfo("mul_scalar", lambda m, x: x * 0.5, U),
    OpInfo("div", lambda m, x, y: x / y, _binary_samples(randn, _away_from_zero)),
    OpInfo("rdiv_scalar", lambda m, x: 2.0 / x, _unary_samples(_away_from_zero)),
    OpInfo("neg", lambda m, x: -x, U),
    OpInfo("pow_scalar", lambda m, x: x ** 3, U),
    # the product/sqrt kernels of small scalar exponents (ops/elementwise.py: _float_scalar_pow)
    OpInfo("pow_int_even", lambda m, x: m.pow(x, 4.0), U),
    OpInfo("pow_int_odd", lambda m, x: x ** 5, U),
    OpInfo("pow_neg_two", lambda m, x: x ** -2, _unary_samples(_away_from_zero)),
    OpInfo("pow_neg_one", lambda m, x: x ** -1.0, _unary_samples(_away_from_zero)),
    OpInfo("pow_half", lambda m, x: x ** 0.5, _unary_samples(positive)),
    OpInfo("pow_neg_half", lambda m, x: x ** -0.5, _unary_samples(positive)),
    OpInfo("pow_frac", lambda m, x: x ** 2.5, _unary_samples(positive)),
    OpInfo("pow_tensor", lambda m, x, y: m.pow(x, y), _binary_samples(positive)),
    OpInfo("rpow_scalar", lambda m, x: 2.0 ** x, U),
    OpInfo("abs", lambda m, x: m.abs(x), _unary_samples(_away_from_zero)),
    OpInfo("sign", lambda m, x: m.sign(x), _unary_samples(_away_from_zero), gradgrad=False),
    OpInfo("reciprocal", lambda m, x: m.reciprocal(x), _unary_samples(_away_from_zero)),
    OpInfo("exp", lambda m, x: m.exp(x), U),
    OpInfo("exp2", lambda m, x: m.exp2(x), U),
    OpInfo("expm1", lambda m, x: m.expm1(x), U),
    OpInfo("log", lambda m, x: m.log(x), _unary_samples(positive)),
    OpInfo("log1p", lambda m, x: m.log1p(x), _unary_samples(positive)),
    OpInfo("log2", lambda m, x: m.log2(x), _unary_samples(positive)),
    OpInfo("log10", lambda m, x: m.log10(x), _unary_samples(positive)),
    OpInfo("sqrt", lambda m, x: m.sqrt(x), _unary_samples(positive)),
    OpInfo("rsqrt", lambda m, x: m.rsqrt(x), _unary_samples(positive)),
    OpInfo("square", lambda m, x: m.square(x), U),
    OpInfo("sin", lambda m, x: m.sin(x), U),
    OpInfo("cos", lambda m, x: m.cos(x), U),
    OpInfo("tan", lambda m, x: m.tan(x), _unary_samples(_unit)),
    OpInfo("asin", lambda m, x: m.asin(x), _unary_samples(_unit)),
    OpInfo("acos", lambda m, x: m.acos(x), _unary_samples(_unit)),
    OpInfo("atan", lambda m, x: m.atan(x), U),
    OpInfo("atan2", lambda m, x, y: m.atan2(x, y), _binary_samples(_away_from_zero)),
    OpInfo("sinh", lambda m, x: m.sinh(x), U),
    OpInfo("cosh", lambda m, x: m.cosh(x), U),
    OpInfo("tanh", lambda m, x: m.tanh(x), U),
    OpInfo("sigmoid", lambda m, x: m.sigmoid(x), U),
    OpInfo("sigmoid_extreme", lambda m, x: m.sigmoid(x * 50), U, fd_atol=1e-4),
    OpInfo("relu", lambda m, x: m.relu(x), _unary_samples(_away_from_zero)),
    OpInfo("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x, 0.1) if m.__name__ == "torch" else m.leaky_relu(x, 0.1),
           _unary_samples(_away_from_zero)),
    OpInfo("elu", lambda m, x: m.nn.functional.elu(x, 0.7) if m.__name__ == "torch" else m.elu(x, 0.7),
           _unary_samples(_away_from_zero)),
    OpInfo("gelu", lambda m, x: m.nn.functional.gelu(x) if m.__name__ == "torch" else m.gelu(x), U),
    OpInfo("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh") if m.__name__ == "torch" else m.gelu(x, approximate="tanh"), U),
    OpInfo("silu", lambda m, x: m.nn.functional.silu(x) if m.__name__ == "torch" else m.silu(x), U),
    OpInfo("softplus", lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=3.0) if m.__name__ == "torch" else m.softplus(x, 2.0, 3.0),
           _unary_samples(_away_from_zero)),
    OpInfo("erf", lambda m, x: m.erf(x), U),
    OpInfo("erfc", lambda m, x: m.erfc(x), U),
    OpInfo("erfinv", lambda m, x: m.erfinv(x), _unary_samples(_unit)),
    OpInfo("lgamma", lambda m, x: m.lgamma(x), _unary_samples(_away_from_zero)),
    OpInfo("digamma", lambda m, x: m.digamma(x), _unary_samples(positive)),
    OpInfo("polygamma2", lambda m, x: m.polygamma(2, x), _unary_samples(positive)),
    OpInfo("isposinf_isneginf", lambda m, x: m.isposinf(x) | x.isneginf(), lambda rng, dt: [Sample((np.array([1., np.inf, -np.inf, np.nan], dt),))], grad=False),
    OpInfo("copysign", lambda m, x, y: m.copysign(x, y), _binary_samples(gen2=_away_from_zero), fd=False),
    OpInfo("float_power", lambda m, x: m.float_power(x, 1.5), _unary_samples(positive), dtypes=("float64",)),
    OpInfo("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), B),
    OpInfo("clamp", lambda m, x: m.clamp(x, -0.5, 0.7), _unary_samples(_away_from_zero)),
    OpInfo("clamp_min", lambda m, x: m.clamp(x, min=0.4), _unary_samples(_away_from_zero)),
    OpInfo("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo, hi),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt), randn(rng, (4,), dt, -2, -0.5), randn(rng, (3, 1), dt, 0.5, 2)))]),
    OpInfo("maximum", lambda m, x, y: m.maximum(x, y), B),
    OpInfo("minimum", lambda m, x, y: m.minimum(x, y), B),
    OpInfo("fmax", lambda m, x, y: m.fmax(x, y), B),
    OpInfo("fmin", lambda m, x, y: m.fmin(x, y), B),
    OpInfo("fmax_fmin_nan", lambda m, x, y: m.fmax(x, y) + m.fmin(y, x),
           lambda rng, dt: [Sample((np.array([1., np.nan, 3., np.nan], dt), np.array([np.nan, 2., 1., np.nan], dt)))],
           grad=False),
    # to_device: the dispatch primitive behind .to(device); cpu -> cpu here (no GPU needed)
    OpInfo("to_device", lambda m, x: (x.to("cpu") if m.__name__ == "torch" else
                                      m.surface.elementwise.to_device(x, "cpu")) * 2.0, U),
    OpInfo("where", lambda m, c, x, y: m.where(c, x, y),
           lambda rng, dt: [Sample((rng.random((3, 4)) > 0.5, randn(rng, (3, 4), dt), randn(rng, (4,), dt))),
                            Sample((rng.random((3, 1)) > 0.5, randn(rng, (1, 4), dt), randn(rng, (), dt)), desc="bcast")],
           grad_argnums=(1, 2)),
    OpInfo("where_scalar", lambda m, c, x: m.where(c, x, 0.0),
           lambda rng, dt: [Sample((rng.random((3, 4)) > 0.5, randn(rng, (3, 4), dt)))], grad_argnums=(1,)),
    OpInfo("floor", lambda m, x: m.floor(x), U, gradgrad=False),
    OpInfo("ceil", lambda m, x: m.ceil(x), U, gradgrad=False),
    OpInfo("round", lambda m, x: m.round(x), U, gradgrad=False),
    OpInfo("trunc", lambda m, x: m.trunc(x), U, gradgrad=False),
    OpInfo("remainder", lambda m, x, y: x % y, _binary_samples(_away_from_zero), gradgrad=False),
    OpInfo("floor_divide", lambda m, x, y: x // y, _binary_samples(_away_from_zero), grad=False),
    OpInfo("fmod", lambda m, x, y: m.fmod(x, y), _binary_samples(_away_from_zero), gradgrad=False),
    OpInfo("lerp", lambda m, x, y, w: m.lerp(x, y, w),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt), randn(rng, (3, 4), dt), randn(rng, (4,), dt)))]),
    OpInfo("hypot", lambda m, x, y: m.hypot(x, y), _binary_samples(_away_from_zero)),
    OpInfo("addcmul", lambda m, x, a, b: m.addcmul(x, a, b, value=0.5),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt), randn(rng, (4,), dt), randn(rng, (3, 1), dt)))]),
    OpInfo("addcdiv", lambda m, x, a, b: x.addcdiv(a, b, value=-2),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt), randn(rng, (3, 4), dt), _away_from_zero(rng, (4,), dt)))]),
    OpInfo("addcdiv_", lambda m, x, a, b: (x * 1.0).addcdiv_(a, b, value=0.1),
           lambda rng, dt: [Sample((randn(rng, (3, 4), dt), randn(rng, (3, 4), dt), positive(rng, (3, 4), dt)))]),
    OpInfo("clamp_max", lambda m, x: x.clamp_max(0.3) + m.clamp_min(x, -0.2), _unary_samples(_away_from_zero)),
    OpInfo("logit", lambda m, x: m.logit(x), _unary_samples(randn, lo=0.1, hi=0.9)),
    OpInfo("asinh", lambda m, x: m.asinh(x), _unary_samples(randn)),
    OpInfo("heaviside", lambda m, x, v: m.heaviside(x, v),
           lambda rng, dt: [Sample((np.array([-1.0, 0.0, 2.0, 0.0], dt), np.array([0.5], dt))),
                            Sample((np.array([[0.0, 3.0], [-2.0, 0.0]], dt), np.array([0.25, 0.75], dt)), desc="bcast")],
           grad=False),
    OpInfo("acosh", lambda m, x: x.arccosh(), _unary_samples(randn, lo=1.2, hi=3.0)),
    OpInfo("atanh", lambda m, x: m.arctanh(x), _unary_samples(randn, lo=-0.8, hi=0.8)),
    OpInfo("logit_eps", lambda m, x: x.logit(eps=0.2), _unary_samples(randn, lo=0.05, hi=0.6)),
    OpInfo("xlogy", lambda m, x, y: m.xlogy(x, y), _binary_samples(randn, positive)),
    OpInfo("logaddexp", lambda m, x, y: m.logaddexp(x, y), B),
    OpInfo("cast_f64", lambda m, x: x.double(), U, dtypes=("float32",), compare_dtype=True),
    OpInfo("cast_f32", lambda m, x: x.float() * 1.0, U, dtypes=("float64",), fd=False),
    # non-differentiable
    OpInfo("eq", lambda m, x, y: x == y, lambda rng, dt: [Sample((np.array([1., 2., 3.], dt), np.array([1., 0., 3.], dt)))], grad=False),
    OpInfo("lt", lambda m, x, y: x < y, B, grad=False),
    OpInfo("ne", lambda m, x, y: x != y, lambda rng, dt: [Sample((np.array([1., 2., 3.], dt), np.array([1., 0., 3.], dt)))], grad=False),
    OpInfo("ge", lambda m, x, y: x >= y, B, grad=False),
    OpInfo("isnan", lambda m, x: m.isnan(x), lambda rng, dt: [Sample((np.array([1., np.nan, np.inf], dt),))], grad=False),
    OpInfo("isinf", lambda m, x: m.isinf(x), lambda rng, dt: [Sample((np.array([1., np.nan, -np.inf], dt),))], grad=False),
    OpInfo("isfinite", lambda m, x: m.isfinite(x), lambda rng, dt: [Sample((np.array([1., np.nan, np.inf], dt),))], grad=False),
    OpInfo("logical_and", lambda m, x, y: m.logical_and(x, y), lambda rng, dt: [Sample((rng.random(5) > .5, rng.random(5) > .5))], grad=False, dtypes=("float32",)),
    OpInfo("logical_or_xor", lambda m, x, y: m.logical_or(x, y) ^ m.logical_xor(x, y), lambda rng, dt: [Sample((rng.random(6) > .5, rng.random(6) > .5))], grad=False, dtypes=("float32",)),
    OpInfo("logical_or_xor_float", lambda m, x, y: m.logical_or(x, y).float() + m.logical_xor(x, y).float(), lambda rng, dt: [Sample((np.array([0., 1., 2., 0.], dt), np.array([0., 0., 3., 5.], dt)))], grad=False),
    OpInfo("bitwise_ops", lambda m, x, y: (x & y) | (~x ^ y), lambda rng, dt: [Sample((rng.random(5) > .5, rng.random(5) > .5))], grad=False, dtypes=("float32",)),
    OpInfo("shifts", lambda m, x, y: (x << y) + (x >> y) + m.bitwise_left_shift(x, 2) - (5 >> y), lambda rng, dt: [Sample((np.array([-8, 3, 12, 1]), np.array([1, 0, 2, 3])))], grad=False, dtypes=("float32",)),
    OpInfo("gcd_lcm", lambda m, x, y: m.gcd(x, y) * 100 + m.lcm(x, y), lambda rng, dt: [Sample((np.array([12, -18, 0, 4]), np.array([8, 12, 5, 6])))], grad=False, dtypes=("float32",)),
    OpInfo("int_scalar_rfloordiv_clamp_float", lambda m, x: (-7 // x) + (7 % x) + x.clamp(min=0.5), lambda rng, dt: [Sample((np.array([2, -3, 4]),))], grad=False, dtypes=("float32",)),
    OpInfo("int_div_true", lambda m, x, y: x / y, lambda rng, dt: [Sample((np.array([1, 2, 7]), np.array([2, 2, 3])))], grad=False, dtypes=("float32",)),
    OpInfo("int_plus_float_scalar", lambda m, x: x + 1.5, lambda rng, dt: [Sample((np.array([1, 2, 7]),))], grad=False, dtypes=("float32",)),
    OpInfo("int_floordiv", lambda m, x, y: x // y, lambda rng, dt: [Sample((np.array([-7, 2, 7]), np.array([2, 2, -3])))], grad=False, dtypes=("float32",)),
    OpInfo("int_exp", lambda m, x: m.exp(x), lambda rng, dt: [Sample((np.array([0, 1, 2]),))], grad=False, dtypes=("float32",)),
    OpInfo("f32_times_f64_0d", lambda m, x, y: x * y, lambda rng, dt: [Sample((randn(rng, (3,), np.float32), np.array(2.0)))], dtypes=("float64",), fd=False),
]
