"""Batching rules shared by many primitives (used by ``dg.autobatch``).

A batching rule runs one primitive for ``B`` members at once::

    rule(prim, B, args, batched, params) -> output(s) with a leading member axis

``batched[i]`` says whether ``args[i]`` carries the member axis (axis 0, size
``B``); unbatched inputs are the same for every member (a weight, a constant).
The member shapes are the batched shapes without axis 0.  Rules compute with
primitives (``bind``), so autograd records the batched computation and
``backward()`` is batched too.  A rule returns ``NotImplemented`` for an input
configuration it does not cover; the members then run one by one (correct,
counted in the stats).

Each primitive names its rule beside its definition in ``ops/<family>.py``
(``tanh_p.defbatch(elementwise)``); the generic rules live here so that the
fact recorded per primitive is one word.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..tensor import Tensor
from .registry import REGISTRY, bind, primitive, promote_arrays

__all__ = [
    "elementwise", "reduction", "shift_dim", "shift_dims", "leading", "cat_rule", "stack_rule",
    "permute_rule", "reshape_rule", "index_rule", "bool_index_shape", "expand_rule", "repeat_rule", "getitem_rule", "matmul_rule",
    "linear_rule", "embedding_rule", "nll_loss_rule", "diagonal_rule", "einsum_rule",
    "gather_like", "index_select_rule", "index_update_rule", "merge_leading", "rnn_step_rule",
    "BACKWARD_ONLY", "rows_p", "rows_backward_p", "gather_p", "gather_backward_p",
    "split_rows_p", "merge_rows_p",
]

#: fallback reason of primitives that only derivative rules call (backward runs on the
#: batched graph, outside the lazy interpreter, so these never meet a member axis)
BACKWARD_ONLY = "derivative helper: only vjp rules call it, and backward runs on the batched graph"


# --------------------------------------------------------------------------
# the scheduler's gather (dg.autobatch assembles group inputs with it)
# --------------------------------------------------------------------------

@primitive("autobatch_rows", save_inputs=True, save_for=((1,), ()), nondiff_argnums=(1,),
           torch_name="IndexSelectBackward0")
def rows_p(x, index, n=0, unique=False):
    """Rows ``index`` (1-D int array) of ``x`` (``n`` rows): the gather that assembles a
    group's input from earlier groups' outputs.  ``unique``: no row is taken twice, so
    the gradient is a plain scatter (``index_select``'s backward must use ``np.add.at``,
    which is several times slower)."""
    return x.take(index, axis=0)


@primitive("autobatch_rows_backward", save_inputs=True, save_for=((1,), ()), nondiff_argnums=(1,))
def rows_backward_p(g, index, n=0, unique=False):
    """Zeros of ``n`` rows with ``g``'s rows added at ``index`` (the vjp of ``rows_p``)."""
    z = np.zeros((n, *g.shape[1:]), dtype=g.dtype)
    if unique:
        z[index] = g
    else:
        np.add.at(z, index, g)
    return z


rows_p.defvjp(lambda g, out, x, index, n=0, unique=False:
              rows_backward_p(g, index, n=n, unique=unique), None)
rows_backward_p.defvjp(lambda g, out, gx, index, n=0, unique=False: rows_p(g, index, n=n), None)
rows_p.defbatch(fallback="the scheduler's own gather: it runs outside the lazy interpreter")
rows_backward_p.defbatch(fallback=BACKWARD_ONLY)


#: dyngraph._autobatch.fill when the C module is built (autobatch.interpreter.use_native):
#: gather_p's row copies in C; the NumPy code below stays the reference
_FILL = None


@primitive("autobatch_gather", torch_name="IndexBackward0")
def gather_p(*sources, B=0, rows=(), pos=(), ns=(), uniq=(), full=True):
    """A group's input assembled from several sources in one call: for each source ``s``,
    ``out[pos[s]] = sources[s][rows[s]]`` (``rows[s]`` None: the source is one member's
    own value, put at every position in ``pos[s]``).  ``pos`` entries are slices or 1-D
    int arrays; ``ns[s]``: the source's row count and ``uniq[s]``: no row of it is taken
    twice (for the gradient); ``full``: the positions cover all ``B`` rows (otherwise the
    rest is 0 -- the adjoint of :func:`gather_backward_p`).  It replaces a gather per
    source, a ``cat`` and a reordering gather: one node forward and backward.

    >>> a, b = np.arange(6.).reshape(3, 2), np.array([9., 9.])
    >>> gather_p(a, b, B=3, rows=(np.array([2, 0]), None), pos=(np.array([0, 2]), slice(1, 2)),
    ...          ns=(3, 0), uniq=(True, True))
    array([[4., 5.],
           [9., 9.],
           [0., 1.]])
    """
    s0 = sources[0]
    mshape = s0.shape if rows[0] is None else s0.shape[1:]
    out = (np.empty if full else np.zeros)((B, *mshape), dtype=s0.dtype)
    if _FILL is not None and _FILL(out, sources, rows, pos):
        return out          # the same copies, row by row in C (dyngraph/_autobatch.c)
    for s, r, p in zip(sources, rows, pos, strict=True):
        if r is None:
            out[p] = s
        elif type(p) is slice:
            np.take(s, r, axis=0, out=out[p])
        else:
            out[p] = s.take(r, axis=0)
    return out


@primitive("autobatch_gather_backward")
def gather_backward_p(g, B=0, rows=None, pos=None, n=0, unique=True):
    """The gradient of one source of :func:`gather_p`: ``g[pos]`` put into ``n`` zero rows
    at ``rows`` (added where a row repeats), or summed when the source is one member's
    value (``rows`` None)."""
    gp = g[pos]
    if rows is None:
        return np.add.reduce(gp, axis=0)
    z = np.zeros((n, *g.shape[1:]), dtype=g.dtype)
    if unique:
        z[rows] = gp
    else:
        np.add.at(z, rows, gp)
    return z


#: dyngraph._autobatch.scatter when the C module is built: the row copies (and sums) of
#: :func:`_gather_backward_all` in C; the NumPy code stays the reference
_SCATTER = None

#: the gradients of the last ``gather_p`` node's sources not handed out yet:
#: ``[weakref to g, rows, grads, how many are left]`` (see :func:`_gather_vjp`)
_PENDING_GRADS: list = [None, None, None, 0]


def _gather_backward_all(g, rows, pos, ns, uniq) -> list:
    """Every source's gradient of one ``gather_p`` (arrays): what ``gather_backward_p``
    gives for each, computed in one pass (``_SCATTER``: the row copies in C)."""
    rest = g.shape[1:]
    out = []
    for r, p, n, u in zip(rows, pos, ns, uniq, strict=True):
        if r is None:
            out.append(np.add.reduce(g[p], axis=0))
        else:
            # every row written once: no zeros needed (the same values)
            out.append((np.empty if u and len(r) == n else np.zeros)((n, *rest), dtype=g.dtype))
    if _SCATTER is not None and _SCATTER(g, out, rows, pos, uniq):
        return out
    for z, r, p, u in zip(out, rows, pos, uniq, strict=True):
        if r is None:
            continue
        if u:
            z[r] = g[p]
        else:
            np.add.at(z, r, g[p])
    return out


def _gather_vjp(argnum, g, out, *inputs, B=0, rows=(), pos=(), ns=(), uniq=(), full=True):
    # The engine asks for one input's gradient at a time; for arrays (plain backward) the
    # first request computes all sources' gradients in one pass (a gather from ~4-20 source
    # groups made one gather_backward_p call each, ~5 us of dispatch and NumPy entry per
    # source) and the others are handed out from _PENDING_GRADS, each once: a second node
    # with the same g and plan (or a second request) computes afresh.
    if type(g) is np.ndarray and len(rows) > 1:
        pg = _PENDING_GRADS
        grads = pg[2]
        if grads is None or pg[1] is not rows or pg[0]() is not g or grads[argnum] is None:
            grads = _gather_backward_all(g, rows, pos, ns, uniq)
            pg[0], pg[1], pg[2], pg[3] = weakref.ref(g), rows, grads, len(grads)
        gi = grads[argnum]
        grads[argnum] = None
        pg[3] -= 1
        if not pg[3]:             # all handed out: hold nothing
            pg[0] = pg[1] = pg[2] = None
        return gi
    return gather_backward_p(g, B=B, rows=rows[argnum], pos=pos[argnum], n=ns[argnum],
                             unique=uniq[argnum])


def _gather_backward_vjp(gg, out, g, B=0, rows=None, pos=None, n=0, unique=True):
    return gather_p(gg, B=B, rows=(rows,), pos=(pos,), ns=(n,), uniq=(unique,), full=False)


gather_p.defvjp_argnum(_gather_vjp)
gather_backward_p.defvjp(_gather_backward_vjp)
gather_p.defbatch(fallback="the scheduler's own gather: it runs outside the lazy interpreter")
gather_backward_p.defbatch(fallback=BACKWARD_ONLY)


@primitive("autobatch_split", n_outputs=-1, torch_name="SplitWithSizesBackward0")
def split_rows_p(x, idx=(), n=0):
    """``x`` (``n`` rows) cut into pieces ``x[idx[p]]``, the ``idx`` a partition of its rows
    (each row in exactly one piece).  The scheduler splits a large group's outputs by the
    group that will read them, so that each reader's gradient is the size of its piece,
    not a full-size array for the whole group.

    >>> [p.tolist() for p in split_rows_p(np.arange(4.), idx=(np.array([1, 3]), np.array([0, 2])), n=4)]
    [[1.0, 3.0], [0.0, 2.0]]
    """
    return tuple(x.take(i, axis=0) for i in idx)


@primitive("autobatch_merge")
def merge_rows_p(*pieces, idx=(), n=0):
    """The rows of ``pieces`` put back at ``idx`` (the adjoint of :func:`split_rows_p`):
    ``out[idx[p]] = pieces[p]``, ``n`` rows in all."""
    g0 = pieces[0]
    out = np.empty((n, *g0.shape[1:]), dtype=g0.dtype)
    for g, i in zip(pieces, idx, strict=True):
        out[i] = g
    return out


split_rows_p.defvjp(lambda g, out, x, idx=(), n=0: merge_rows_p(*g, idx=idx, n=n))
merge_rows_p.defvjp_argnum(lambda argnum, gg, out, *pieces, idx=(), n=0:
                           rows_p(gg, idx[argnum], n=n, unique=True))
split_rows_p.defbatch(fallback="the scheduler's own split: it runs outside the lazy interpreter")
merge_rows_p.defbatch(fallback=BACKWARD_ONLY)


def _bind(name, args, params):
    return bind(REGISTRY[name], tuple(args), params)


def _reshape(x, shape):
    return _bind("reshape", (x,), {"shape": tuple(shape)})


def _nd(a, b) -> int:
    """Member ndim of an argument (scalars: 0)."""
    d = getattr(a, "_data", None)
    if d is None:
        return 0
    return d.ndim - 1 if b else d.ndim


def _expand_to(x, B):
    """An unbatched tensor repeated for B members (a broadcast view)."""
    shape = tuple(x._data.shape)
    return _bind("expand", (_reshape(x, (1, *shape)),), {"shape": (B, *shape)})


def _norm(d, n):
    """Member dim ``d`` of an ``n``-d member -> dim of the batched array (None if invalid)."""
    if n == 0 or not -n <= d < n:
        return None
    return d % n + 1


# --------------------------------------------------------------------------
# elementwise (broadcasting) primitives
# --------------------------------------------------------------------------

def elementwise(prim, B, args, batched, params):
    """Elementwise and broadcasting primitives: align member axes, broadcast shared inputs.

    A batched input of member rank k < n (the output's member rank) gets n-k unit axes
    after the member axis, so NumPy broadcasting lines members up and shared inputs
    broadcast from the right as they did per member.
    """
    n = max(_nd(a, b) for a, b in zip(args, batched, strict=True))
    if prim.promote is not None and any(b and a._data.ndim == 1 for a, b in zip(args, batched, strict=True)):
        args = _promote_as_members(prim, args, batched)
    new = []
    for a, b in zip(args, batched, strict=True):
        if b:
            shape = a._data.shape
            k = len(shape) - 1
            if k < n:
                a = _reshape(a, (B,) + (1,) * (n - k) + tuple(shape[1:]))
        new.append(a)
    return bind(prim, tuple(new), params)


def _promote_as_members(prim, args, batched):
    """0-d members stop being 0-d once stacked, and 0-d tensors promote like scalars
    (``f32 * f64_0d`` is f32): cast to the dtypes the members would have had."""
    stand = [np.empty(a._data.shape[1:] if b else a._data.shape, a._data.dtype)
             if getattr(a, "_data", None) is not None else a for a, b in zip(args, batched, strict=True)]
    target = promote_arrays(prim, stand)
    out = []
    for a, t in zip(args, target, strict=True):
        d = getattr(a, "_data", None)
        if d is not None and hasattr(t, "dtype") and t.dtype != d.dtype:
            a = _bind("cast", (a,), {"dtype": t.dtype})
        out.append(a)
    return tuple(out)


# --------------------------------------------------------------------------
# dims in params
# --------------------------------------------------------------------------

def reduction(prim, B, args, batched, params):
    """``dim`` may be None (all member axes), an int or a tuple; other params unchanged."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    n = _nd(args[0], True)
    dim = params.get("dim")
    p = dict(params)
    if dim is None:
        if prim.name in ("argmax", "argmin"):
            # the index into the flattened member; keepdim keeps n unit axes
            flat = _reshape(args[0], (B, -1))
            p["dim"] = 1
            p["keepdim"] = False
            out = bind(prim, (flat,), p)
            return _reshape(out, (B,) + (1,) * n) if params.get("keepdim") else out
        p["dim"] = tuple(range(1, n + 1))   # () for 0-d members: nothing to reduce
    elif isinstance(dim, int):
        d = _norm(dim, n)
        if d is None:
            return NotImplemented
        p["dim"] = d
    else:
        ds = tuple(_norm(d, n) for d in dim)
        if None in ds:
            return NotImplemented
        p["dim"] = ds
    return bind(prim, tuple(args), p)


def shift_dim(prim, B, args, batched, params, names=("dim",)):
    """Primitives with int dim params (``dim``, ``dim1``...): shift them past the member axis.

    Unbatched tensor inputs are expanded to B members (``gather``/``scatter`` need
    equal ranks).
    """
    if not batched[0]:
        return NotImplemented
    n = _nd(args[0], True)
    p = dict(params)
    for name in names:
        if name in p and p[name] is not None:
            d = _norm(p[name], n)
            if d is None:
                return NotImplemented
            p[name] = d
    new = [a if b or getattr(a, "_data", None) is None else _expand_to(a, B)
           for a, b in zip(args, batched, strict=True)]
    return bind(prim, tuple(new), p)


def shift_dims(prim, B, args, batched, params):
    """``dims`` as a tuple of member axes (``flip``, ``roll``): shift each one."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    n = _nd(args[0], True)
    dims = params.get("dims")
    if dims is None:
        return NotImplemented
    if isinstance(dims, int):
        dims = (dims,)
    ds = tuple(_norm(d, n) for d in dims)
    if None in ds:
        return NotImplemented
    return bind(prim, tuple(args), {**params, "dims": ds})


def leading(prim, B, args, batched, params):
    """Primitives that act on trailing axes and treat leading ones as a batch (linalg,
    ``tril``, ``pad``, ``layer_norm``): the member axis is one more leading axis.
    Only the first input may be batched."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    return bind(prim, tuple(args), params)


def permute_rule(prim, B, args, batched, params):
    n = _nd(args[0], True)
    return bind(prim, (args[0],), {"dims": (0, *(d % n + 1 for d in params["dims"]))}) if n \
        else args[0]


def reshape_rule(prim, B, args, batched, params):
    return bind(prim, (args[0],), {"shape": (B, *params["shape"])})


def expand_rule(prim, B, args, batched, params):
    x = args[0]
    shape = tuple(params["shape"])
    n = _nd(x, True)
    if len(shape) > n:
        x = _reshape(x, (B,) + (1,) * (len(shape) - n) + tuple(x._data.shape[1:]))
    return bind(prim, (x,), {"shape": (B, *shape)})


def repeat_rule(prim, B, args, batched, params):
    x = args[0]
    reps = tuple(params["repeats"])
    n = _nd(x, True)
    if len(reps) < n:
        return NotImplemented
    if len(reps) > n:
        x = _reshape(x, (B,) + (1,) * (len(reps) - n) + tuple(x._data.shape[1:]))
    return bind(prim, (x,), {**params, "repeats": (1, *reps)})


_FULL = (None, None, None)   # a ``:`` in an index spec (slice triple)


def getitem_rule(prim, B, args, batched, params):
    """Basic indexing: one more ``:`` in front for the member axis."""
    index = params["index"]
    if not isinstance(index, tuple):
        index = (index,)
    return bind(prim, (args[0],), {**params, "index": (_FULL, *index)})


def index_rule(prim, B, args, batched, params):
    """``x[t]`` with ONE integer index tensor (other entries ``:``/None/...): a batched
    source with a shared index gets a ``:`` in front; a shared table with per-member
    indices at the first axis (a lookup) selects all members' indices at once.
    (Several advanced indices move axes in NumPy's rules: members then run one by one.)"""
    spec = params["index"]
    if len(args) != 2 or sum(1 for e in spec if e == "tensor") != 1 \
            or any(not (e == "tensor" or e is None or e is Ellipsis or e == _FULL) for e in spec):
        return NotImplemented
    x, idx = args
    if idx._data.dtype.kind not in "iu":
        return NotImplemented
    if batched[0] and not batched[1]:
        return bind(prim, (x, idx), {**params, "index": (_FULL, *spec)})
    if not batched[0] and batched[1] and spec == ("tensor",):
        out = bind(prim, (x, _reshape(idx, (-1,))), params)
        return _reshape(out, (B, *idx._data.shape[1:], *x._data.shape[1:]))
    if all(batched) and spec == ("tensor",) and x._data.ndim > 1:
        # member b indexes its own rows (``h[src]`` in message passing): select once
        # from all members' rows with member b's indices offset by b * n
        n = x._data.shape[1]
        flat = _member_rows(idx, B, n)
        return bind(prim, (_reshape(x, (B * n, *x._data.shape[2:])), flat), params)
    return NotImplemented


def _member_rows(index, B, n):
    """Member b's integer indices into its ``n`` rows (negative ones counted from the end,
    as eager allows) -> indices into the ``B * n`` rows of all members.  Eager checked
    the range when the op was recorded, so ``index mod n`` is the non-negative index."""
    dt, k = index._data.dtype, index._data.ndim - 1
    offs = Tensor._make((np.arange(B, dtype=dt) * n).reshape((B,) + (1,) * k), False, None, 0)
    mod = Tensor._make(np.asarray(max(n, 1), dtype=dt), False, None, 0)   # n = 0: no indices
    return _bind("add", (_bind("remainder", (index, mod), {}), offs), {})


def bool_index_shape(args):
    """``eager_if`` of advanced indexing: a boolean mask makes the size value-dependent."""
    for a in args[1:]:
        d = getattr(a, "_data", None)
        if d is not None and d.dtype.kind == "b":
            return "a boolean mask: the output size depends on the values"
    return None


def cat_rule(prim, B, args, batched, params):
    n = max(_nd(a, b) for a, b in zip(args, batched, strict=True))
    d = _norm(params.get("dim", 0), n)
    if d is None:
        return NotImplemented
    new = [a if b else _expand_to(a, B) for a, b in zip(args, batched, strict=True)]
    return bind(prim, tuple(new), {**params, "dim": d})


def stack_rule(prim, B, args, batched, params):
    n = max(_nd(a, b) for a, b in zip(args, batched, strict=True)) + 1
    d = _norm(params.get("dim", 0), n)
    if d is None:
        return NotImplemented
    new = [a if b else _expand_to(a, B) for a, b in zip(args, batched, strict=True)]
    return bind(prim, tuple(new), {**params, "dim": d})


def diagonal_rule(prim, B, args, batched, params):
    return shift_dim(prim, B, args, batched, params, names=("dim1", "dim2"))


# --------------------------------------------------------------------------
# products, lookups, losses
# --------------------------------------------------------------------------

def matmul_rule(prim, B, args, batched, params):
    """``x @ y``: a shared 2-d weight takes all members' rows in one GEMM; otherwise
    1-d members become matrices and the member axis is one more broadcast batch axis."""
    x, y = args
    bx, by = batched
    xs = x._data.shape[1:] if bx else x._data.shape
    ys = y._data.shape[1:] if by else y._data.shape
    if bx and not by and len(ys) <= 2:
        return bind(prim, (x, y), params)
    xm, ym = len(xs), len(ys)
    x2 = xs if xm >= 2 else (1, *xs)
    y2 = ys if ym >= 2 else (*ys, 1)
    r = max(len(x2), len(y2))
    if bx:
        x = _reshape(x, (B,) + (1,) * (r - len(x2)) + tuple(x2))
    elif xm < 2:
        x = _reshape(x, x2)
    if by:
        y = _reshape(y, (B,) + (1,) * (r - len(y2)) + tuple(y2))
    elif ym < 2:
        y = _reshape(y, y2)
    out = bind(prim, (x, y), params)
    mshape = (*np.broadcast_shapes(tuple(xs[:-2]), tuple(ys[:-2])),
              *((xs[-2],) if xm >= 2 else ()), *((ys[-1],) if ym >= 2 else ()))
    return _reshape(out, (B, *mshape))


def linear_rule(prim, B, args, batched, params):
    """``linear(x, w, b)`` with shared weights: one GEMM over all members' rows."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    return bind(prim, tuple(args), params)


def embedding_rule(prim, B, args, batched, params):
    """Shared table, per-member indices: one gather."""
    if batched[0] or not batched[1]:
        return NotImplemented
    return bind(prim, tuple(args), params)


def nll_loss_rule(prim, B, args, batched, params):
    """Per-member losses from one ``reduction='none'`` call over all members' rows.

    ``mean`` divides each member's sum by its own count (or weight total) of
    targets that are not ``ignore_index``, as PyTorch does per call.
    """
    logp, target = args[0], args[1]
    weight = args[2] if len(args) > 2 else params.get("weight")
    if not (batched[0] and batched[1]) or (len(args) > 2 and batched[2]):
        return NotImplemented
    ls = logp._data.shape[1:]
    if len(ls) != 2 and len(ls) != 1:
        return NotImplemented
    C = ls[-1]
    flat_lp = _reshape(logp, (-1, C))
    flat_t = _reshape(target, (-1,))
    p = {**params, "reduction": "none"}
    rest = tuple(args[2:])
    loss = bind(prim, (flat_lp, flat_t, *rest), p)      # (B * N,)
    red = params.get("reduction", "mean")
    n = 1 if len(ls) == 1 else ls[0]
    loss = _reshape(loss, (B, n))
    if red == "none":
        return _reshape(loss, (B,) if len(ls) == 1 else (B, n))
    total = _reshape(loss, (B,)) if n == 1 else \
        _bind("sum", (loss,), {"dim": (1,), "keepdim": False, "dtype": None})
    if red == "sum":
        return total
    # each member's own divisor (count or weight total of targets not ignored): a
    # constant, as in eager where the weights get no gradient
    t = flat_t._data.reshape(B, n)
    valid = t != params.get("ignore_index", -100)
    if weight is not None:
        w = weight._data[np.where(valid, t, 0)] * valid
        den = w.sum(axis=1)
    else:
        if valid.all():
            return total if n == 1 else _bind("div", (total, float(n)), {})
        den = valid.sum(axis=1)
    den = Tensor._make(np.asarray(den, dtype=loss._data.dtype), False, None, 0)
    return _bind("div", (total, den), {})


def einsum_rule(prim, B, args, batched, params):
    """Add one new subscript letter for the member axis to every batched operand."""
    eq = params["equation"].replace(" ", "")
    if "->" not in eq:
        return NotImplemented   # implicit output order: rewrite would change it
    lhs, rhs = eq.split("->")
    used = set(eq)
    letter = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in used)
    terms = lhs.split(",")
    terms = [letter + t if b else t for t, b in zip(terms, batched, strict=True)]
    return bind(prim, tuple(args), {**params, "equation": ",".join(terms) + "->" + letter + rhs})


def gather_like(prim, B, args, batched, params):
    """``gather``/``scatter*``: expand shared tensors to B members, shift ``dim``."""
    if not any(batched):
        return NotImplemented
    n = max(_nd(a, b) for a, b in zip(args, batched, strict=True) if getattr(a, "_data", None) is not None)
    d = _norm(params.get("dim", 0), n)
    if d is None:
        return NotImplemented
    new = [a if b or getattr(a, "_data", None) is None else _expand_to(a, B)
           for a, b in zip(args, batched, strict=True)]
    return bind(prim, tuple(new), {**params, "dim": d})


def index_select_rule(prim, B, args, batched, params):
    """Batched source with shared indices: shift ``dim``; a shared table with per-member
    indices along dim 0 (a lookup): one selection of all members' indices."""
    x, index = args
    bx, bi = batched
    dim = params.get("dim", 0)
    if bx and not bi:
        d = _norm(dim, _nd(x, True))
        return NotImplemented if d is None else bind(prim, (x, index), {**params, "dim": d})
    if not bx and bi and dim in (0, -x._data.ndim) and index._data.ndim == 2:
        k = index._data.shape[1]
        out = bind(prim, (x, _reshape(index, (-1,))), {**params, "dim": 0})
        return _reshape(out, (B, k, *x._data.shape[1:]))
    if bx and bi and index._data.ndim == 2:
        # member b selects from its own rows: move the dim first, offset member b's
        # indices by b * n, select once from all members' rows, move the dim back
        n_m = _nd(x, True)
        d = _norm(dim, n_m)
        if d is None:
            return NotImplemented
        if d != 1:
            perm = list(range(n_m + 1))
            perm.insert(1, perm.pop(d))
            x = _bind("permute", (x,), {"dims": tuple(perm)})
        n = x._data.shape[1]
        k = index._data.shape[1]
        rest = x._data.shape[2:]
        offs = Tensor._make((np.arange(B, dtype=index._data.dtype) * n)[:, None], False, None, 0)
        flat = _reshape(_bind("add", (index, offs), {}), (-1,))
        out = bind(prim, (_reshape(x, (-1, *rest)), flat), {**params, "dim": 0})
        out = _reshape(out, (B, k, *rest))
        if d != 1:
            inv = list(range(n_m + 1))
            inv.insert(d, inv.pop(1))
            out = _bind("permute", (out,), {"dims": tuple(inv)})
        return out
    return NotImplemented


def index_update_rule(prim, B, args, batched, params):
    """``index_add``/``index_copy``/``index_fill``: shared indices, shift ``dim``;
    per-member indices (``index_add``/``index_copy``): one update of all members' rows."""
    if len(args) > 1 and batched[1]:
        return _index_update_member_indices(prim, B, args, batched, params)
    if len(args) > 2 and batched[2] and prim.name == "index_fill":
        return NotImplemented
    n = _nd(args[0], batched[0])
    d = _norm(params.get("dim", 0), n)
    if d is None:
        return NotImplemented
    new = list(args)
    if not batched[0]:
        new[0] = _expand_to(args[0], B)
    if len(args) > 2 and prim.name != "index_fill" and not batched[2] and getattr(args[2], "_data", None) is not None:
        new[2] = _expand_to(args[2], B)
    return bind(prim, tuple(new), {**params, "dim": d})



def _index_update_member_indices(prim, B, args, batched, params):
    """Member b updates its own rows along ``dim`` with its own indices (sum aggregation
    in message passing): move the dim first, offset member b's indices by b * n, run
    one update on all members' rows, and move the dim back."""
    if prim.name not in ("index_add", "index_copy") or len(args) != 3 \
            or getattr(args[2], "_data", None) is None:
        return NotImplemented
    x, index, src = (a if b else _expand_to(a, B) for a, b in zip(args, batched, strict=True))
    n_m = x._data.ndim - 1
    d = _norm(params.get("dim", 0), n_m)
    if d is None or index._data.ndim != 2 or src._data.ndim != x._data.ndim:
        return NotImplemented
    perm = list(range(n_m + 1))
    perm.insert(1, perm.pop(d))
    if d != 1:
        x, src = (_bind("permute", (t,), {"dims": tuple(perm)}) for t in (x, src))
    n, k, rest = x._data.shape[1], src._data.shape[1], tuple(x._data.shape[2:])
    flat = _reshape(_member_rows(index, B, n), (-1,))
    out = bind(prim, (_reshape(x, (B * n, *rest)), flat, _reshape(src, (B * k, *rest))),
               {**params, "dim": 0})
    out = _reshape(out, (B, n, *rest))
    if d != 1:
        out = _bind("permute", (out,), {"dims": tuple(int(i) for i in np.argsort(perm))})
    return out

def merge_leading(spatial):
    """Rule for primitives on ``(N, C, *spatial)`` inputs (conv, pooling, the LSTM cell
    pieces): members with their own N axis are merged into one N axis of B*N rows;
    members without one are a batch of B as they are.

    ``spatial(prim, params, args)`` is the number of trailing axes the primitive works on
    besides C (or None when the rank tells).
    """

    def rule(prim, B, args, batched, params):
        if not batched[0] or any(batched[1:]):
            if not (prim.name.startswith("lstm_cell") and all(batched)):
                return NotImplemented
        x = args[0]
        k = spatial(prim, params, args)
        n = _nd(x, True)
        if n == k + 1:
            return bind(prim, tuple(args), params)
        if n != k + 2:
            return NotImplemented
        new = [_reshape(a, (-1, *a._data.shape[2:])) if b else a for a, b in zip(args, batched, strict=True)]
        out = bind(prim, tuple(new), params)
        N = x._data.shape[1]
        if isinstance(out, tuple):
            return tuple(_reshape(o, (B, N, *o._data.shape[1:])) for o in out)
        return _reshape(out, (B, N, *out._data.shape[1:]))

    return rule


def rnn_step_rule(prim, B, args, batched, params):
    """Fused recurrent layers over ONE time step (``nn.GRUCell``): all members' rows form
    one batch of the step (weights shared)."""
    bs = params.get("batch_sizes", ())
    if len(bs) != 1:
        return NotImplemented
    n_state = 2 if prim.name == "lstm_layer" else 1
    if not batched[0] or not all(batched[1:1 + n_state]) or any(batched[1 + n_state:]):
        return NotImplemented
    N = args[0]._data.shape[1]
    new = [_reshape(a, (-1, *a._data.shape[2:])) if b else a for a, b in zip(args, batched, strict=True)]
    out = bind(prim, tuple(new), {**params, "batch_sizes": (B * N,)})
    return tuple(_reshape(o, (B, N, *o._data.shape[1:])) for o in out)
