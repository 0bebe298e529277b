"""The one table of Tensor methods: every operation method and operator of :class:`Tensor`.

Each family of :mod:`dyngraph.surface` defines its functions; this module lists which of
them are Tensor methods (``x.exp()``, ``x.sum(dim)``, ``a + b``) and attaches them all at
once, at import (``dyngraph.surface`` imports it after every family).  A name listed twice
keeps its last entry, as the order of the sections below says.
"""

from __future__ import annotations

from .. import creation as _cr
from . import elementwise as _ew
from . import indexing as _idx
from . import inplace as _ip
from . import linalg as _lin
from . import nn as _nn
from . import reduction as _red
from . import shape as _shp
from . import sorting as _srt
from ._args import install

METHODS: dict = {}

# -- elementwise: operators, math, comparisons, logic --------------------------------------
METHODS.update({
    "to": _ew._to,
    "__add__": _ew._add, "__radd__": _ew._radd, "__sub__": _ew._sub, "__rsub__": _ew._rsub,
    "__mul__": _ew._mul, "__rmul__": _ew._rmul, "__truediv__": _ew._div, "__rtruediv__": _ew._rdiv,
    "__floordiv__": _ew._fdiv, "__rfloordiv__": _ew._rfdiv, "__mod__": _ew._mod, "__rmod__": _ew._rmod,
    "__pow__": _ew._pow, "__rpow__": _ew._rpow, "__and__": _ew._and, "__rand__": _ew._rand, "__or__": _ew._or,
    "__ror__": _ew._ror, "__xor__": _ew._xor, "__rxor__": _ew._rxor, "__neg__": _ew._neg, "__abs__": _ew._abs,
    "__invert__": _ew._invert, "__pos__": _ew._pos, "__contains__": _ew._contains, "__lshift__": _ew._lshift, "__rlshift__": _ew._rlshift,
    "__rshift__": _ew._rshift, "__rrshift__": _ew._rrshift,
    "bitwise_left_shift": _ew.bitwise_left_shift, "bitwise_right_shift": _ew.bitwise_right_shift,
    "gcd": _ew.gcd, "lcm": _ew.lcm,
    "__eq__": _ew._cmp(_ew.eq_p), "__ne__": _ew._cmp(_ew.ne_p), "__lt__": _ew._cmp(_ew.lt_p), "__le__": _ew._cmp(_ew.le_p),
    "__gt__": _ew._cmp(_ew.gt_p), "__ge__": _ew._cmp(_ew.ge_p),
    "add": _ew.add, "sub": _ew.sub, "subtract": _ew.sub, "mul": _ew.mul, "multiply": _ew.mul, "div": _ew.div,
    "divide": _ew.div, "true_divide": _ew.div, "neg": _ew.neg, "negative": _ew.neg, "pow": _ew.pow, "abs": _ew.abs,
    "absolute": _ew.abs, "sign": _ew.sign, "sgn": _ew.sign, "reciprocal": _ew.reciprocal, "exp": _ew.exp,
    "exp2": _ew.exp2, "expm1": _ew.expm1, "log": _ew.log, "log1p": _ew.log1p, "log2": _ew.log2, "log10": _ew.log10,
    "sqrt": _ew.sqrt, "rsqrt": _ew.rsqrt, "square": _ew.square, "sin": _ew.sin, "cos": _ew.cos, "tan": _ew.tan,
    "asin": _ew.asin, "acos": _ew.acos, "atan": _ew.atan, "arcsin": _ew.asin, "arccos": _ew.acos, "arctan": _ew.atan,
    "atan2": _ew.atan2, "arctan2": _ew.atan2, "sinh": _ew.sinh, "cosh": _ew.cosh, "tanh": _ew.tanh,
    "sigmoid": _ew.sigmoid, "relu": _ew.relu, "erf": _ew.erf, "erfc": _ew.erfc, "floor": _ew.floor, "ceil": _ew.ceil,
    "round": _ew.round, "trunc": _ew.trunc, "fix": _ew.trunc, "frac": _ew.frac, "clamp": _ew.clamp, "clip": _ew.clamp,
    "maximum": _ew.maximum, "minimum": _ew.minimum, "fmax": _ew.fmax, "fmin": _ew.fmin, "where":
    lambda self, condition, other: _ew.where(condition, self, other), "floor_divide": _ew.floor_divide,
    "remainder": _ew.remainder, "fmod": _ew.fmod, "eq": _ew.eq, "ne": _ew.ne, "lt": _ew.lt, "le": _ew.le, "gt": _ew.gt,
    "ge": _ew.ge, "greater": _ew.gt, "less": _ew.lt, "greater_equal": _ew.ge, "less_equal": _ew.le,
    "not_equal": _ew.ne, "equal": _ew.equal, "logical_and": _ew.logical_and, "logical_or": _ew.logical_or,
    "logical_xor": _ew.logical_xor, "logical_not": _ew.logical_not, "bitwise_and": _ew.bitwise_and,
    "bitwise_or": _ew.bitwise_or, "bitwise_xor": _ew.bitwise_xor, "bitwise_not": _ew.bitwise_not,
    "isnan": _ew.isnan, "isinf": _ew.isinf, "isfinite": _ew.isfinite, "signbit": _ew.signbit,
    "isclose": _ew.isclose, "allclose": _ew.allclose, "lerp": _ew.lerp, "hypot": _ew.hypot, "xlogy": _ew.xlogy,
    "nan_to_num": _ew.nan_to_num, "logaddexp": _ew.logaddexp, "sinc": _ew.sinc, "deg2rad": _ew.deg2rad,
    "rad2deg": _ew.rad2deg,
})
METHODS.update({name + "_": _ew._inplace_of(name) for name in _ew._INPLACE_FORMS})
METHODS.update({"heaviside": _ew.heaviside, "asinh": _ew.asinh, "acosh": _ew.acosh, "atanh": _ew.atanh, "arcsinh": _ew.asinh,
                "arccosh": _ew.acosh, "arctanh": _ew.atanh, "erfinv": _ew.erfinv, "copysign": _ew.copysign,
                "float_power": _ew.float_power, "logaddexp2": _ew.logaddexp2, "lgamma": _ew.lgamma,
                "digamma": _ew.digamma, "polygamma": lambda self, n: _ew.polygamma(n, self),
                "isposinf": _ew.isposinf, "isneginf": _ew.isneginf})
METHODS.update({"logit": _ew.logit, "addcmul": _ew.addcmul, "addcdiv": _ew.addcdiv, "clamp_min": _ew.clamp_min,
                "clamp_max": _ew.clamp_max, "addcmul_": _ew._inplace(_ew.addcmul, "addcmul_"),
                "addcdiv_": _ew._inplace(_ew.addcdiv, "addcdiv_"), "clamp_min_": _ew._inplace(_ew.clamp_min, "clamp_min_"),
                "clamp_max_": _ew._inplace(_ew.clamp_max, "clamp_max_")})


# -- in-place methods and operators (x.add_(y), x += y, zero_, copy_) ------------------
METHODS.update({
    "add_": _ip._binary_inplace(_ew.add, "add_"),
    "sub_": _ip._binary_inplace(_ew.sub, "sub_"),
    "subtract_": _ip._binary_inplace(_ew.sub, "sub_"),
    "mul_": _ip._binary_inplace(_ew.mul, "mul_"),
    "multiply_": _ip._binary_inplace(_ew.mul, "mul_"),
    "div_": _ip._binary_inplace(_ew.div, "div_"),
    "divide_": _ip._binary_inplace(_ew.div, "div_"),
    "true_divide_": _ip._binary_inplace(_ew.div, "div_"),
    "pow_": _ip._binary_inplace(_ew.pow, "pow_"),
    "floor_divide_": _ip._binary_inplace(_ew.floor_divide, "floor_divide_"),
    "remainder_": _ip._binary_inplace(_ew.remainder, "remainder_"),
    "fmod_": _ip._binary_inplace(_ew.fmod, "fmod_"),
    "maximum_": _ip._binary_inplace(_ew.maximum, "maximum_"),
    "minimum_": _ip._binary_inplace(_ew.minimum, "minimum_"),
    "atan2_": _ip._binary_inplace(_ew.atan2, "atan2_"),
    "lerp_": _ip._binary_inplace(_ew.lerp, "lerp_"),
    "__iadd__": _ip._binary_inplace(_ew.add, "__iadd__"),
    "__isub__": _ip._binary_inplace(_ew.sub, "__isub__"),
    "__imul__": _ip._binary_inplace(_ew.mul, "__imul__"),
    "__itruediv__": _ip._binary_inplace(_ew.div, "__itruediv__"),
    "__ifloordiv__": _ip._binary_inplace(_ew.floor_divide, "__ifloordiv__"),
    "__imod__": _ip._binary_inplace(_ew.remainder, "__imod__"),
    "__ipow__": _ip._binary_inplace(_ew.pow, "__ipow__"),
    "__iand__": _ip._binary_inplace(_ew.bitwise_and, "__iand__"),
    "__ior__": _ip._binary_inplace(_ew.bitwise_or, "__ior__"),
    "__ixor__": _ip._binary_inplace(_ew.bitwise_xor, "__ixor__"),
    "clamp_": _ip._unary_inplace(_ew.clamp, "clamp_"),
    "clip_": _ip._unary_inplace(_ew.clamp, "clamp_"),
    "neg_": _ip._unary_inplace(_ew.neg, "neg_"),
    "abs_": _ip._unary_inplace(_ew.abs, "abs_"),
    "exp_": _ip._unary_inplace(_ew.exp, "exp_"),
    "log_": _ip._unary_inplace(_ew.log, "log_"),
    "sqrt_": _ip._unary_inplace(_ew.sqrt, "sqrt_"),
    "sin_": _ip._unary_inplace(_ew.sin, "sin_"),
    "cos_": _ip._unary_inplace(_ew.cos, "cos_"),
    "tanh_": _ip._unary_inplace(_ew.tanh, "tanh_"),
    "sigmoid_": _ip._unary_inplace(_ew.sigmoid, "sigmoid_"),
    "relu_": _ip._unary_inplace(_ew.relu, "relu_"),
    "floor_": _ip._unary_inplace(_ew.floor, "floor_"),
    "ceil_": _ip._unary_inplace(_ew.ceil, "ceil_"),
    "round_": _ip._unary_inplace(_ew.round, "round_"),
    "trunc_": _ip._unary_inplace(_ew.trunc, "trunc_"),
    "sign_": _ip._unary_inplace(_ew.sign, "sign_"),
    "reciprocal_": _ip._unary_inplace(_ew.reciprocal, "reciprocal_"),
    "square_": _ip._unary_inplace(_ew.square, "square_"),
    "zero_": _ip.zero_, "fill_": _ip.fill_, "copy_": _ip.copy_,
    "share_memory_": _ip.share_memory_, "is_shared": _ip.is_shared,
})


# -- reductions (x.sum(dim), x.max(), x.var()) -----------------------------------------
METHODS.update({
    "sum": _red._sum_method, "mean": _red._mean_method, "prod": _red._dim_method(_red.prod),
    "cumsum": _red.cumsum, "cumprod": _red.cumprod, "cummax": _red.cummax, "cummin": _red.cummin, "amax": _red._amax_method(_red.amax), "amin": _red._amax_method(_red.amin),
    "max": _red.max, "min": _red.min, "argmax": _red.argmax, "argmin": _red.argmin, "aminmax": _red.aminmax,
    "median": _red.median, "var": _red.var, "std": _red.std, "logsumexp": _red.logsumexp, "norm": _red.norm,
    "all": _red.all, "any": _red.any, "count_nonzero": _red.count_nonzero, "nansum": _red._dim_method(_red.nansum),
    "nanmean": _red._dim_method(_red.nanmean), "dist": _red.dist, "sum_to_size": _red.sum_to_size, "renorm": _red.renorm,
    "logcumsumexp": lambda self, dim: _red.logcumsumexp(self, dim), "mode": _red.mode,
})


# -- shape (x.view(...), x.permute(...), x.T, x.split(...)) ----------------------------
METHODS.update({
    "reshape": _shp._reshape_method, "view": _shp._view_method, "expand": _shp.expand,
    "expand_as": _shp.expand_as, "broadcast_to": _shp.broadcast_to, "permute": _shp.permute,
    "transpose": _shp.transpose, "swapaxes": _shp.transpose, "swapdims": _shp.transpose, "t": _shp.t,
    "T": property(_shp._T), "mT": property(_shp._mT), "mH": property(_shp._mT), "H": property(_shp._T),
    "reshape_as": lambda self, other: _shp.reshape(self, tuple(other.shape)),
    "view_as": lambda self, other: _shp.reshape(self, tuple(other.shape)),
    # the hot views are the functions themselves (``self`` is their first argument): no
    # wrapper frame per call
    "squeeze": _shp.squeeze, "unsqueeze": _shp.unsqueeze, "flatten": _shp._m(_shp.flatten), "ravel": _shp._m(_shp.ravel),
    "unflatten": _shp._m(_shp.unflatten), "movedim": _shp._m(_shp.movedim), "moveaxis": _shp._m(_shp.movedim),
    "narrow": _shp._m(_shp.narrow), "select": _shp._m(_shp.select), "split": _shp._split_method, "chunk": _shp.chunk,
    "unbind": _shp._m(_shp.unbind), "tensor_split": _shp._m(_shp.tensor_split), "hsplit": _shp._m(_shp.hsplit),
    "vsplit": _shp._m(_shp.vsplit), "flip": lambda self, *dims: _shp.flip(self, _shp._shape_args(dims) if dims and not
                                                          isinstance(dims[0], int) else dims),
    "fliplr": _shp._m(_shp.fliplr), "flipud": _shp._m(_shp.flipud), "roll": _shp._m(_shp.roll), "repeat": _shp._repeat_method,
    "tile": _shp._m(_shp.tile), "repeat_interleave": _shp._m(_shp.repeat_interleave), "clone": _shp._m(_shp.clone),
    "contiguous": _shp._contiguous,
})
METHODS.update({"unfold": _shp._unfold_method, "diff": _shp.diff, "dsplit": _shp.dsplit, "narrow_copy": _shp.narrow_copy,
                "rot90": lambda self, k=1, dims=(0, 1): _shp.rot90(self, k, dims),
                "is_same_size": lambda self, other: tuple(self.shape) == tuple(other.shape),
                "__reversed__": lambda self: _shp.flip(self, (0,)) if self._data.ndim else self})  # PyTorch: flip(0)
METHODS.update({"unsqueeze_": _shp._view_inplace(_shp.unsqueeze, "unsqueeze_"),
                "squeeze_": _shp._view_inplace(_shp.squeeze, "squeeze_"),
                "t_": _shp._view_inplace(_shp.t, "t_"), "transpose_": _shp._view_inplace(_shp.transpose, "transpose_"),
                "swapaxes_": _shp._view_inplace(_shp.transpose, "swapaxes_"),
                "swapdims_": _shp._view_inplace(_shp.transpose, "swapdims_")})


# -- indexing (x[i], x[i] = v, gather/scatter, index_*, masks, sorting) ----------------
METHODS.update({
    "__getitem__": _idx._getitem, "__setitem__": _idx._setitem,
    "index_put": lambda self, indices, values, accumulate=False: _idx.index_put(self, indices, values, accumulate),
    "index_put_": _idx.index_put_,
    "gather": _idx._method(_idx.gather), "scatter": _idx._scatter_method, "scatter_add": _idx._method(_idx.scatter_add),
    "scatter_reduce": _idx._method(_idx.scatter_reduce),
    "scatter_": _idx._inplace(_idx._scatter_method, "scatter_"),
    "scatter_add_": _idx._inplace(_idx.scatter_add, "scatter_add_"),
    "scatter_reduce_": _idx._inplace(_idx.scatter_reduce, "scatter_reduce_"),
    "index_select": _idx._method(_idx.index_select), "index_add": _idx._method(_idx.index_add),
    "index_copy": _idx._method(_idx.index_copy), "index_fill": _idx._method(_idx.index_fill),
    "index_add_": _idx._inplace(_idx.index_add, "index_add_"), "index_copy_": _idx._inplace(_idx.index_copy, "index_copy_"),
    "index_fill_": _idx._index_fill_, "index_reduce": _idx._method(_idx.index_reduce),
    "put": _idx._method(_idx.put), "put_": _idx._inplace(_idx.put, "put_"),
    "index_reduce_": _idx._inplace(_idx.index_reduce, "index_reduce_"),
    "masked_fill": _idx._method(_idx.masked_fill), "masked_fill_": _idx.masked_fill_,
    "masked_select": _idx._method(_idx.masked_select), "masked_scatter": _idx._method(_idx.masked_scatter),
    "masked_scatter_": _idx._inplace(_idx.masked_scatter, "masked_scatter_"),
    "take": _idx._method(_idx.take), "take_along_dim": _idx._method(_idx.take_along_dim),
    "nonzero": _idx._method(_idx.nonzero), "argwhere": _idx._method(_idx.argwhere),
    "sort": _idx._method(_srt.sort), "argsort": _idx._method(_srt.argsort), "msort": _idx._method(_srt.msort),
    "topk": _idx._method(_srt.topk), "kthvalue": _idx._method(_srt.kthvalue), "unique": _idx._method(_srt.unique),
    "bucketize": _idx._method(_srt.bucketize),
})
METHODS.update({"fill_diagonal_": _idx.fill_diagonal_})
METHODS.update({"isin": _idx.isin, "bincount": _idx.bincount})
METHODS.update({"quantile": _srt.quantile})
METHODS.update({"histc": _idx.histc, "unique_consecutive": _srt.unique_consecutive})


# -- linear algebra (a @ b, x.mm(y), x.diagonal(), x.tril_()) --------------------------
METHODS.update({
    "matmul": _lin.matmul, "__matmul__": _lin._matmul_method, "__rmatmul__": _lin._rmatmul_method,
    "mm": _lin.mm, "bmm": _lin.bmm, "mv": _lin.mv, "dot": _lin.dot, "vdot": _lin.vdot, "outer": _lin.outer, "ger": _lin.ger,
    "addmm": _lin.addmm, "addmv": _lin.addmv, "baddbmm": _lin.baddbmm, "addbmm": _lin.addbmm, "addr": _lin.addr,
    "inner": _lin.inner, "kron": _lin.kron, "diagonal": _lin.diagonal, "diag": _lin.diag, "diagflat": _lin.diagflat, "diag_embed": _lin.diag_embed,
    "trace": _lin.trace, "tril": _lin.tril, "triu": _lin.triu, "inverse": _lin.inverse, "det": _lin.det,
    "slogdet": _lin.slogdet, "logdet": _lin.logdet, "cholesky": _lin.cholesky, "qr": _lin.qr,
})
METHODS.update({"tril_": _lin._tri_inplace(_lin.tril, "tril_"), "triu_": _lin._tri_inplace(_lin.triu, "triu_")})
METHODS.update({"svd": _lin.svd, "pinverse": _lin.pinverse})
METHODS.update({"cross": _lin.cross})


# -- fused nn functions (x.softmax(dim), x.log_softmax(dim)) ---------------------------
METHODS.update({
    "softmax": lambda self, dim=None, dtype=None: _nn.softmax(self, dim, dtype=dtype),
    "log_softmax": lambda self, dim=None, dtype=None: _nn.log_softmax(self, dim, dtype=dtype),
})


# -- creation and random sampling (x.new_zeros(), x.normal_(), x.bernoulli()), device and layout
#    predicates (x.is_cpu, x.layout): last, as creation.py installed them after the families
METHODS["__init__"] = _cr._legacy_init
METHODS.update({"multinomial": _cr.multinomial, "bernoulli": _cr.bernoulli, "matrix_power": _cr._matrix_power_method, "is_nonzero": _cr.is_nonzero,
                "is_complex": _cr.is_complex,
                "pin_memory": _cr._pin_memory, "is_pinned": lambda self, device=None: False,
                "is_signed": lambda self: self._data.dtype.kind in "if",
                "positive": lambda self: self,
                "bfloat16": lambda self, memory_format=None: self.to(_cr._dt.bfloat16),
                "to_sparse": _cr._to_sparse, "to_sparse_coo": _cr._to_sparse, "to_sparse_csr": _cr._to_sparse_csr,
                "to_dense": lambda self, dtype=None, masked_grad=None: self if dtype is None else self.to(dtype)})
METHODS["is_cpu"] = property(lambda self: self.device.type == "cpu", doc="True for a CPU tensor.")
# PyTorch's other device and layout predicates: dyngraph's dense tensors live on the CPU
# or a CUDA GPU, so each is False (sparse tensors override ``is_sparse``).
for name in ("is_xpu", "is_mps", "is_meta", "is_mkldnn", "is_vulkan", "is_ipu", "is_hpu", "is_mtia",
             "is_maia", "is_xla", "is_quantized", "is_nested", "is_sparse", "is_sparse_csr"):
    METHODS[name] = property(lambda self: False, doc=f"False: {name[3:]} tensors are not dyngraph's.")
METHODS["layout"] = property(_cr._layout, doc="``dg.strided``: every dense tensor (``dg.sparse`` tensors: ``sparse_coo``).")
METHODS.update({"new_tensor": _cr.new_tensor, "new_zeros": _cr.new_zeros, "new_ones": _cr.new_ones,
                "new_empty": _cr.new_empty, "new_full": _cr.new_full, "normal_": _cr.normal_,
                "uniform_": _cr.uniform_, "bernoulli_": _cr.bernoulli_, "exponential_": _cr.exponential_})


# -- attach -------------------------------------------------------------------------------
install(METHODS)
