"""The lowering table: primitive name -> function that emits ONNX nodes for one IR node.

Each entry is ``fn(ctx, node)``; ``ctx.arg(node, i)`` gives the ONNX name of
argument ``i`` (Python literals become typed initializers), ``ctx.out(node, k)``
the name for output ``k``, ``ctx.add(op_type, inputs, outputs, **attrs)``
emits a node and ``ctx.const(array)`` an initializer.  Add an entry with::

    @lowering("softplus")
    def _softplus(ctx, node): ...
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["LOWERINGS", "UNSUPPORTED", "lowering", "UnsupportedPrimitiveError"]

LOWERINGS: dict = {}


class UnsupportedPrimitiveError(NotImplementedError):
    """A captured primitive has no ONNX lowering."""


def lowering(*names):
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


def _simple(name, op_type, **fixed):
    def fn(ctx, node):
        ins = [ctx.arg(node, i) for i in range(len(node.args))]
        ctx.add(op_type, ins, [ctx.out(node)], **fixed)
    LOWERINGS[name] = fn


for _n, _o in {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
               "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh",
               "sigmoid": "Sigmoid", "abs": "Abs", "erf": "Erf", "reciprocal": "Reciprocal",
               "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "tan": "Tan",
               "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
               "relu": "Relu", "sign": "Sign", "maximum": "Max", "minimum": "Min",
               "where": "Where", "eq": "Equal", "lt": "Less", "le": "LessOrEqual",
               "gt": "Greater", "ge": "GreaterOrEqual", "logical_and": "And",
               "logical_or": "Or", "logical_xor": "Xor", "logical_not": "Not",
               "isnan": "IsNaN", "clone": "Identity", "matmul": "MatMul",
               "round": "Round"}.items():
    _simple(_n, _o)


@lowering("ne")
def _ne(ctx, node):
    t = ctx.add("Equal", [ctx.arg(node, 0), ctx.arg(node, 1)])
    ctx.add("Not", [t], [ctx.out(node)])


@lowering("rsqrt")
def _rsqrt(ctx, node):
    ctx.add("Reciprocal", [ctx.add("Sqrt", [ctx.arg(node, 0)])], [ctx.out(node)])


@lowering("expm1")
def _expm1(ctx, node):
    x = ctx.arg(node, 0)
    ctx.add("Sub", [ctx.add("Exp", [x]), ctx.scalar(1.0, node)], [ctx.out(node)])


@lowering("log1p")
def _log1p(ctx, node):
    x = ctx.arg(node, 0)
    ctx.add("Log", [ctx.add("Add", [x, ctx.scalar(1.0, node)])], [ctx.out(node)])


@lowering("cast")
def _cast(ctx, node):
    ctx.add("Cast", [ctx.arg(node, 0)], [ctx.out(node)], to=ctx.onnx_dtype(node.params["dtype"]))


@lowering("leaky_relu")
def _leaky(ctx, node):
    ctx.add("LeakyRelu", [ctx.arg(node, 0)], [ctx.out(node)],
            alpha=float(node.params.get("negative_slope", 0.01)))


@lowering("elu")
def _elu(ctx, node):
    ctx.add("Elu", [ctx.arg(node, 0)], [ctx.out(node)], alpha=float(node.params.get("alpha", 1.0)))


@lowering("clamp", "hardtanh")
def _clip(ctx, node):
    p = node.params
    lo = p.get("min", p.get("min_val", -1.0 if node.op == "hardtanh" else None))
    hi = p.get("max", p.get("max_val", 1.0 if node.op == "hardtanh" else None))
    ins = [ctx.arg(node, 0), "" if lo is None else ctx.scalar(lo, node),
           "" if hi is None else ctx.scalar(hi, node)]
    while ins and ins[-1] == "":
        ins.pop()
    ctx.add("Clip", ins, [ctx.out(node)])


@lowering("gelu")
def _gelu(ctx, node):
    x = ctx.arg(node, 0)
    s = lambda v: ctx.scalar(v, node)
    if node.params.get("approximate", "none") == "tanh":
        x3 = ctx.add("Mul", [ctx.add("Mul", [x, x]), x])
        inner = ctx.add("Mul", [ctx.add("Add", [x, ctx.add("Mul", [x3, s(0.044715)])]),
                                s(math.sqrt(2.0 / math.pi))])
        t = ctx.add("Add", [ctx.add("Tanh", [inner]), s(1.0)])
    else:
        t = ctx.add("Add", [ctx.add("Erf", [ctx.add("Mul", [x, s(1.0 / math.sqrt(2.0))])]), s(1.0)])
    ctx.add("Mul", [ctx.add("Mul", [x, t]), s(0.5)], [ctx.out(node)])


@lowering("silu")
def _silu(ctx, node):
    x = ctx.arg(node, 0)
    ctx.add("Mul", [x, ctx.add("Sigmoid", [x])], [ctx.out(node)])


@lowering("softplus")
def _softplus(ctx, node):
    x = ctx.arg(node, 0)
    beta = float(node.params.get("beta", 1.0))
    thr = float(node.params.get("threshold", 20.0))
    bx = ctx.add("Mul", [x, ctx.scalar(beta, node)])
    soft = ctx.add("Div", [ctx.add("Softplus", [bx]), ctx.scalar(beta, node)])
    ctx.add("Where", [ctx.add("Greater", [bx, ctx.scalar(thr, node)]), x, soft], [ctx.out(node)])


@lowering("log_softmax", "softmax")
def _softmax(ctx, node):
    op = "LogSoftmax" if node.op == "log_softmax" else "Softmax"
    ctx.add(op, [ctx.arg(node, 0)], [ctx.out(node)], axis=int(node.params.get("dim", -1)))


def _axes(node, ndim):
    dim = node.params.get("dim")
    if dim is None:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return [int(d) % max(ndim, 1) for d in dims]


def _reduce(op_type, axes_as_input):
    def fn(ctx, node):
        x = ctx.arg(node, 0)
        info = ctx.info(node.args[0])
        if info.dtype.kind in "biu" and node.op == "sum":
            x = ctx.add("Cast", [x], to=ctx.onnx_dtype(np.dtype(np.int64)))
        if node.params.get("dtype") is not None:
            x = ctx.add("Cast", [x], to=ctx.onnx_dtype(np.dtype(node.params["dtype"])))
        axes = _axes(node, len(info.shape))
        keep = int(bool(node.params.get("keepdim", False)))
        if axes is None:
            ctx.add(op_type, [x], [ctx.out(node)], keepdims=keep)
        elif axes_as_input:
            ctx.add(op_type, [x, ctx.const(np.array(axes, np.int64))], [ctx.out(node)], keepdims=keep)
        else:
            ctx.add(op_type, [x], [ctx.out(node)], keepdims=keep, axes=axes)
    return fn


LOWERINGS["sum"] = _reduce("ReduceSum", True)
LOWERINGS["mean"] = _reduce("ReduceMean", False)
LOWERINGS["amax"] = _reduce("ReduceMax", False)
LOWERINGS["amin"] = _reduce("ReduceMin", False)
LOWERINGS["logsumexp"] = _reduce("ReduceLogSumExp", False)


@lowering("var", "std")
def _var(ctx, node):
    x = ctx.arg(node, 0)
    info = ctx.info(node.args[0])
    axes = _axes(node, len(info.shape)) or list(range(len(info.shape)))
    n = int(np.prod([info.shape[a] for a in axes])) if axes else 1
    corr = float(node.params.get("correction", 1.0))
    keep = int(bool(node.params.get("keepdim", False)))
    m = ctx.add("ReduceMean", [x], keepdims=1, axes=axes)
    d = ctx.add("Sub", [x, m])
    ss = ctx.add("ReduceSum", [ctx.add("Mul", [d, d]), ctx.const(np.array(axes, np.int64))],
                 keepdims=keep)
    out = [ctx.out(node)]
    if node.op == "var":
        ctx.add("Div", [ss, ctx.scalar(max(n - corr, 0.0), node)], out)
    else:
        ctx.add("Sqrt", [ctx.add("Div", [ss, ctx.scalar(max(n - corr, 0.0), node)])], out)


@lowering("sum_to_shape")
def _sum_to_shape(ctx, node):
    x = ctx.arg(node, 0)
    shape = tuple(node.params["shape"])
    ish = ctx.info(node.args[0]).shape
    lead = len(ish) - len(shape)
    axes = list(range(lead)) + [i + lead for i, s in enumerate(shape) if s == 1 and ish[i + lead] != 1]
    if axes:
        x = ctx.add("ReduceSum", [x, ctx.const(np.array(axes, np.int64))], keepdims=1)
    ctx.add("Reshape", [x, ctx.const(np.array(shape, np.int64))], [ctx.out(node)])


@lowering("reshape")
def _reshape(ctx, node):
    shape = list(node.params["shape"])
    ish = ctx.info(node.args[0]).shape
    if ctx.dynamic_batch and shape and ish and shape[0] == ish[0]:
        shape[0] = 0  # copy the (dynamic) batch dimension from the input
    ctx.add("Reshape", [ctx.arg(node, 0), ctx.const(np.array(shape, np.int64))], [ctx.out(node)])


@lowering("expand")
def _expand(ctx, node):
    shape = list(node.params["shape"])
    ctx.add("Expand", [ctx.arg(node, 0), ctx.const(np.array(shape, np.int64))], [ctx.out(node)])


@lowering("permute")
def _permute(ctx, node):
    ctx.add("Transpose", [ctx.arg(node, 0)], [ctx.out(node)], perm=[int(d) for d in node.params["dims"]])


@lowering("linear")
def _linear(ctx, node):
    x, w = ctx.arg(node, 0), ctx.arg(node, 1)
    has_b = len(node.args) > 2 and node.args[2] is not None
    if len(ctx.info(node.args[0]).shape) == 2:
        ins = [x, w] + ([ctx.arg(node, 2)] if has_b else [])
        ctx.add("Gemm", ins, [ctx.out(node)], transB=1)
        return
    y = ctx.add("MatMul", [x, ctx.add("Transpose", [w], perm=[1, 0])])
    if has_b:
        ctx.add("Add", [y, ctx.arg(node, 2)], [ctx.out(node)])
    else:
        ctx.add("Identity", [y], [ctx.out(node)])


@lowering("embedding")
def _embedding(ctx, node):
    ctx.add("Gather", [ctx.arg(node, 0), ctx.arg(node, 1)], [ctx.out(node)], axis=0)


@lowering("nll_loss")
def _nll(ctx, node):
    p = node.params
    ins = [ctx.arg(node, 0), ctx.arg(node, 1)]
    if len(node.args) > 2 and node.args[2] is not None:
        ins.append(ctx.arg(node, 2))
    ctx.add("NegativeLogLikelihoodLoss", ins, [ctx.out(node)], reduction=p.get("reduction", "mean"),
            ignore_index=int(p.get("ignore_index", -100)))


@lowering("cross_entropy")
def _cross_entropy(ctx, node):
    # F.cross_entropy's fused node of (N, C) logits: LogSoftmax over the classes, then NLL
    p = node.params
    logp = ctx.add("LogSoftmax", [ctx.arg(node, 0)], axis=1)
    ctx.add("NegativeLogLikelihoodLoss", [logp, ctx.arg(node, 1)], [ctx.out(node)],
            reduction=p.get("reduction", "mean"), ignore_index=int(p.get("ignore_index", -100)))


@lowering("cat")
def _cat(ctx, node):
    nd = len(ctx.info(node.args[0]).shape)
    ins = [ctx.arg(node, i) for i in range(len(node.args))]
    ctx.add("Concat", ins, [ctx.out(node)], axis=int(node.params.get("dim", 0)) % max(nd, 1))


@lowering("stack")
def _stack(ctx, node):
    nd = len(ctx.info(node.args[0]).shape) + 1
    dim = int(node.params.get("dim", 0)) % nd
    ax = ctx.const(np.array([dim], np.int64))
    ins = [ctx.add("Unsqueeze", [ctx.arg(node, i), ax]) for i in range(len(node.args))]
    ctx.add("Concat", ins, [ctx.out(node)], axis=dim)


@lowering("split", "unbind")
def _split(ctx, node):
    nd = len(ctx.info(node.args[0]).shape)
    dim = int(node.params.get("dim", 0)) % max(nd, 1)
    outs = [ctx.out(node, k) for k in range(len(node.outs))]
    if node.op == "unbind":
        parts = [ctx.tmp() for _ in outs]
        ctx.add("Split", [ctx.arg(node, 0), ctx.const(np.ones(len(outs), np.int64))], parts, axis=dim)
        ax = ctx.const(np.array([dim], np.int64))
        for p, o in zip(parts, outs, strict=True):
            ctx.add("Squeeze", [p, ax], [o])
        return
    sizes = np.array([int(s) for s in node.params["sizes"]], np.int64)
    ctx.add("Split", [ctx.arg(node, 0), ctx.const(sizes)], outs, axis=dim)


@lowering("getitem")
def _getitem(ctx, node):
    x = ctx.arg(node, 0)
    shape = list(ctx.info(node.args[0]).shape)
    spec = list(node.params.get("index", ()))
    n_consumed = sum(1 for it in spec if it is not None and it is not Ellipsis)
    axis = 0
    for it in spec:
        if it is Ellipsis:
            axis = len(shape) - (n_consumed - _consumed_before(spec, it))
            continue
        if it is None:
            x = ctx.add("Unsqueeze", [x, ctx.const(np.array([axis], np.int64))])
            shape.insert(axis, 1)
            axis += 1
            continue
        if type(it) is tuple:
            start, stop, step = (list(it) + [None, None, None])[:3]
            step = 1 if step is None else step
            big = np.iinfo(np.int64).max
            start = (0 if step > 0 else -1) if start is None else start
            stop = (big if step > 0 else -big) if stop is None else stop
            x = ctx.add("Slice", [x, ctx.const(np.array([start], np.int64)),
                                  ctx.const(np.array([stop], np.int64)),
                                  ctx.const(np.array([axis], np.int64)),
                                  ctx.const(np.array([step], np.int64))])
            axis += 1
            continue
        x = ctx.add("Gather", [x, ctx.const(np.array(int(it), np.int64))], axis=axis)
        shape.pop(axis)
    ctx.add("Identity", [x], [ctx.out(node)])


def _consumed_before(spec, marker):
    n = 0
    for it in spec:
        if it is marker:
            return n
        if it is not None and it is not Ellipsis:
            n += 1
    return n


@lowering("pad")
def _pad(ctx, node):
    p = node.params
    if p.get("mode", "constant") != "constant":
        raise UnsupportedPrimitiveError(f"pad: mode {p.get('mode')!r} has no ONNX lowering yet")
    nd = len(ctx.info(node.args[0]).shape)
    pad = list(p["pad"])
    begins, ends = [0] * nd, [0] * nd
    for i in range(len(pad) // 2):
        d = nd - 1 - i
        begins[d], ends[d] = pad[2 * i], pad[2 * i + 1]
    ctx.add("Pad", [ctx.arg(node, 0), ctx.const(np.array(begins + ends, np.int64)),
                    ctx.scalar(float(p.get("value", 0.0)), node)], [ctx.out(node)], mode="constant")


@lowering("conv")
def _conv(ctx, node):
    p = node.params
    pads = [int(a) for a, _ in p["padding"]] + [int(b) for _, b in p["padding"]]
    ins = [ctx.arg(node, 0), ctx.arg(node, 1)]
    if len(node.args) > 2 and node.args[2] is not None:
        ins.append(ctx.arg(node, 2))
    ctx.add("Conv", ins, [ctx.out(node)], strides=list(p["stride"]), pads=pads,
            dilations=list(p["dilation"]), group=int(p.get("groups", 1)))


@lowering("max_pool")
def _max_pool(ctx, node):
    p = node.params
    if ctx.used(node.outs[1]):
        raise UnsupportedPrimitiveError(
            "max_pool: the indices output is used by the graph; ONNX MaxPool indices are "
            "numbered differently (export the model without return_indices)")
    pads = [int(v) for v in p["padding"]] * 2
    ctx.add("MaxPool", [ctx.arg(node, 0)], [ctx.out(node, 0)], kernel_shape=list(p["kernel_size"]),
            strides=list(p["stride"]), pads=pads, dilations=list(p["dilation"]),
            ceil_mode=int(bool(p.get("ceil_mode", False))))


@lowering("avg_pool")
def _avg_pool(ctx, node):
    p = node.params
    if p.get("divisor_override") is not None:
        raise UnsupportedPrimitiveError("avg_pool: divisor_override has no ONNX lowering")
    pads = [int(v) for v in p["padding"]] * 2
    ctx.add("AveragePool", [ctx.arg(node, 0)], [ctx.out(node)], kernel_shape=list(p["kernel_size"]),
            strides=list(p["stride"]), pads=pads, ceil_mode=int(bool(p.get("ceil_mode", False))),
            count_include_pad=int(bool(p.get("count_include_pad", True))))


# ---------------------------------------------------------------------------
# normalisation, indexing, misc
# ---------------------------------------------------------------------------

@lowering("layer_norm")
def _layer_norm(ctx, node):
    p = node.params
    x = ctx.arg(node, 0)
    info = ctx.info(node.args[0])
    nd = int(p.get("ndim", 1))
    shape = info.shape[len(info.shape) - nd:]
    has_w = len(node.args) > 1 and node.args[1] is not None
    has_b = len(node.args) > 2 and node.args[2] is not None
    w = ctx.arg(node, 1) if has_w else ctx.const(np.ones(shape, info.dtype))
    ins = [x, w] + ([ctx.arg(node, 2)] if has_b else [])
    ctx.add("LayerNormalization", ins, [ctx.out(node)], axis=-nd, epsilon=float(p.get("eps", 1e-5)))


@lowering("masked_fill")
def _masked_fill(ctx, node):
    ctx.add("Where", [ctx.arg(node, 1), ctx.arg(node, 2), ctx.arg(node, 0)], [ctx.out(node)])


@lowering("gather")
def _gather(ctx, node):
    ctx.add("GatherElements", [ctx.arg(node, 0), ctx.arg(node, 1)], [ctx.out(node)],
            axis=int(node.params.get("dim", 0)))


@lowering("index_select")
def _index_select(ctx, node):
    ctx.add("Gather", [ctx.arg(node, 0), ctx.arg(node, 1)], [ctx.out(node)],
            axis=int(node.params.get("dim", 0)))


@lowering("argmax", "argmin")
def _argmax(ctx, node):
    op = "ArgMax" if node.op == "argmax" else "ArgMin"
    dim = node.params.get("dim")
    keep = int(bool(node.params.get("keepdim", False)))
    x = ctx.arg(node, 0)
    if dim is None:
        x = ctx.add("Reshape", [x, ctx.const(np.array([-1], np.int64))])
        r = ctx.add(op, [x], axis=0, keepdims=0)
        shape = ctx.graph.values[node.outs[0]].shape
        ctx.add("Reshape", [r, ctx.const(np.array(shape, np.int64))], [ctx.out(node)])
        return
    ctx.add(op, [x], [ctx.out(node)], axis=int(dim), keepdims=keep)


@lowering("max_dim", "min_dim")
def _max_dim(ctx, node):
    red, arg = ("ReduceMax", "ArgMax") if node.op == "max_dim" else ("ReduceMin", "ArgMin")
    dim = int(node.params.get("dim", 0))
    keep = int(bool(node.params.get("keepdim", False)))
    x = ctx.arg(node, 0)
    ctx.add(red, [x], [ctx.out(node, 0)], axes=[dim], keepdims=keep)
    ctx.add(arg, [x], [ctx.out(node, 1)], axis=dim, keepdims=keep, select_last_index=0)


@lowering("einsum")
def _einsum(ctx, node):
    ins = [ctx.arg(node, i) for i in range(len(node.args))]
    ctx.add("Einsum", ins, [ctx.out(node)], equation=node.params["equation"].replace(" ", ""))


@lowering("repeat")
def _repeat(ctx, node):
    reps = [int(r) for r in node.params.get("repeats", ())]
    x = ctx.arg(node, 0)
    nd = len(ctx.info(node.args[0]).shape)
    if len(reps) > nd:
        shape = [1] * (len(reps) - nd) + list(ctx.info(node.args[0]).shape)
        x = ctx.add("Reshape", [x, ctx.const(np.array(shape, np.int64))])
    ctx.add("Tile", [x, ctx.const(np.array(reps, np.int64))], [ctx.out(node)])


@lowering("tril", "triu")
def _trilu(ctx, node):
    k = ctx.const(np.array(int(node.params.get("diagonal", 0)), np.int64))
    ctx.add("Trilu", [ctx.arg(node, 0), k], [ctx.out(node)], upper=int(node.op == "triu"))


@lowering("cumsum")
def _cumsum(ctx, node):
    ax = ctx.const(np.array(int(node.params.get("dim", 0)), np.int64))
    ctx.add("CumSum", [ctx.arg(node, 0), ax], [ctx.out(node)],
            reverse=int(bool(node.params.get("reverse", False))))


@lowering("flip")
def _flip(ctx, node):
    dims = [int(d) for d in node.params.get("dims", ())]
    big = np.iinfo(np.int64).max
    n = len(dims)
    ctx.add("Slice", [ctx.arg(node, 0), ctx.const(np.full(n, -1, np.int64)),
                      ctx.const(np.full(n, -big, np.int64)), ctx.const(np.array(dims, np.int64)),
                      ctx.const(np.full(n, -1, np.int64))], [ctx.out(node)])


@lowering("log2", "log10")
def _log_base(ctx, node):
    base = 2.0 if node.op == "log2" else 10.0
    ctx.add("Div", [ctx.add("Log", [ctx.arg(node, 0)]), ctx.scalar(math.log(base), node)],
            [ctx.out(node)])


@lowering("exp2")
def _exp2(ctx, node):
    ctx.add("Pow", [ctx.scalar(2.0, node), ctx.arg(node, 0)], [ctx.out(node)])


@lowering("erfc")
def _erfc(ctx, node):
    ctx.add("Sub", [ctx.scalar(1.0, node), ctx.add("Erf", [ctx.arg(node, 0)])], [ctx.out(node)])


@lowering("isinf")
def _isinf(ctx, node):
    ctx.add("IsInf", [ctx.arg(node, 0)], [ctx.out(node)])


@lowering("isfinite")
def _isfinite(ctx, node):
    x = ctx.arg(node, 0)
    bad = ctx.add("Or", [ctx.add("IsNaN", [x]), ctx.add("IsInf", [x])])
    ctx.add("Not", [bad], [ctx.out(node)])


@lowering("lerp")
def _lerp(ctx, node):
    a, b, w = (ctx.arg(node, i) for i in range(3))
    ctx.add("Add", [a, ctx.add("Mul", [w, ctx.add("Sub", [b, a])])], [ctx.out(node)])


@lowering("hypot")
def _hypot(ctx, node):
    a, b = ctx.arg(node, 0), ctx.arg(node, 1)
    s = ctx.add("Add", [ctx.add("Mul", [a, a]), ctx.add("Mul", [b, b])])
    ctx.add("Sqrt", [s], [ctx.out(node)])


@lowering("fmod")
def _fmod(ctx, node):
    ctx.add("Mod", [ctx.arg(node, 0), ctx.arg(node, 1)], [ctx.out(node)], fmod=1)


# ---------------------------------------------------------------------------
# primitives without a lowering, each with the reason (tests check that every registered
# primitive is either in LOWERINGS or here; export names the reason)
# ---------------------------------------------------------------------------

_ADJOINT = ("a backward-only (adjoint) primitive: it appears in gradient programs, and "
            "export writes forward programs")
_TODO = "no ONNX lowering written yet"
_NO_OP = "ONNX has no operator for it (a lowering would need a decomposition)"

UNSUPPORTED: dict = {
    **dict.fromkeys((
        "avg_pool_adjoint", "conv_weight", "diagonal_scatter_zeros", "einsum_embed",
        "embedding_backward", "gather_backward", "getitem_backward", "index_backward",
        "index_select_backward", "pad_backward", "pool_scatter", "upsample_nearest_adjoint",
    ), _ADJOINT),
    **dict.fromkeys((
        "digamma", "erfinv", "lgamma", "polygamma", "gcd", "lcm", "histc", "bincount", "isin",
        "searchsorted", "unique", "unique_consecutive", "mode", "median", "median_dim",
        "kthvalue", "cholesky", "det", "eigh", "inv", "qr", "slogdet", "solve", "svd",
    ), _NO_OP),
    **dict.fromkeys((
        "acosh", "asinh", "atanh", "atan2", "adaptive_max_pool", "all", "any", "bitwise_and",
        "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
        "clamp_tensor", "conv_transpose", "count_nonzero", "cummax", "cummin", "cumprod",
        "diagonal", "floor_divide", "fmax", "fmin", "fold", "gru_layer", "heaviside", "index",
        "index_add", "index_copy", "index_fill", "index_put", "isneginf", "isposinf",
        "linscan", "logaddexp", "lstm_cell_hidden", "lstm_cell_state", "lstm_gate_sigmoid",
        "lstm_layer", "nan_to_num", "nonzero", "one_hot", "pool_gather", "prod", "remainder",
        "repeat_interleave", "rnn_layer", "roll", "scatter", "scatter_add", "scatter_reduce",
        "shift", "signbit", "sort", "to_device", "topk", "trunc", "unfold", "upsample_nearest",
        "vector_norm", "xlogy",
    ), _TODO),
    **dict.fromkeys(("autobatch_rows", "autobatch_rows_backward", "autobatch_gather",
                     "autobatch_gather_backward", "autobatch_split", "autobatch_merge"),
                    "dg.autobatch's own gather between batched groups: never in a captured program"),
}
