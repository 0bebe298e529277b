"""Shape primitives: cat/stack, split/unbind, flip, roll, repeat, pad, clone.

reshape/view, expand and permute/transpose are structural primitives (:mod:`.structural`,
below every family).

* ``squeeze``/``unsqueeze``/``flatten``/``unflatten``/``atleast_*d``/``meshgrid``
  are compositions of ``reshape``/``expand``/``permute``, so graph capture and
  ONNX export see one static-shape primitive; ``narrow``/``select`` are the
  ``getitem`` view primitive of :mod:`.structural`.
* ``view`` raises PyTorch's error when the strides do not allow a view (NumPy's
  no-copy reshape answers that question); ``reshape`` copies in that case.
* ``split``/``chunk``/``tensor_split``/``unbind`` are one multi-output node each
  (one backward for all pieces: cheap for LSTM gate chunks); the pieces are
  views that share the input's version counter.
* ``flip``/``roll``/``repeat``/``pad``/``clone``/``cat``/``stack`` copy, as in PyTorch.
  ``cat``/``stack`` promote dtypes across inputs; each input's gradient comes back
  in its own dtype.
"""

from __future__ import annotations

import numpy as np

from .indexing import index_select_backward_p
from .reduction import sum_p
from .registry import bind, primitive
from .structural import cast_p, getitem_p, reshape_p

# ---------------------------------------------------------------------------
# views built on reshape / permute / getitem
# ---------------------------------------------------------------------------


def _getitem_p():
    # the cat/stack rules slice their gradient with getitem (ops/structural.py)
    return getitem_p


# ---------------------------------------------------------------------------
# cat / stack / split / unbind
# ---------------------------------------------------------------------------

@primitive("cat", promote="same", meta=True)
def cat_p(*xs, dim=0):
    """Concatenate arrays along ``dim`` (inputs already promoted to one dtype)."""
    return np.concatenate(xs, axis=dim)


def _cast_back(g, dtype):
    if g.dtype == dtype:
        return g

    return cast_p(g, dtype=dtype)


def _cat_vjp(argnum, g, out, *xs, dim=0):
    start = 0
    for x in xs[:argnum]:
        start += x.shape[dim]
    stop = start + xs[argnum].shape[dim]
    gi = _getitem_p()(g, index=((None, None, None),) * dim + ((start, stop, None),))
    return _cast_back(gi, xs[argnum].dtype)


cat_p.defvjp_argnum(_cat_vjp)


def cat(tensors, dim=0):
    """``cat_p`` over same-dtype Tensors along a non-negative ``dim``, without argument checks.

    For ops/rnn.py's reference loop; the PyTorch-facing ``dg.cat`` (checks, legacy empty
    tensors, promotion) is :func:`dyngraph.surface.shape.cat`.
    """
    return bind(cat_p, tuple(tensors), {"dim": dim})


@primitive("stack", promote="same", meta=True)
def stack_p(*xs, dim=0):
    """Stack same-shape arrays along a new dimension ``dim``."""
    if dim < 0:
        dim += xs[0].ndim + 1
    if dim == 0:
        # np.array of same-shape arrays stacks them along a new first axis in one C call, into
        # an array that owns its memory: 2-6x faster than the concatenation below for the
        # small inputs of dynamic models (28 0-d losses: 1.1 vs 7.6 us; 4 x (128,): 2.0 vs 3.9)
        return np.array(xs)
    # np.concatenate of views with the new axis: np.stack's argument checks (a Python
    # function) cost about as much as the copy for the small inputs of dynamic models
    idx = (slice(None),) * dim + (None,)
    return np.concatenate([x[idx] for x in xs], axis=dim)


def _stack_vjp(argnum, g, out, *xs, dim=0):
    gi = _getitem_p()(g, index=((None, None, None),) * dim + (argnum,))
    return _cast_back(gi, xs[argnum].dtype)


stack_p.defvjp_argnum(_stack_vjp)


@primitive("split", n_outputs=-1)
def split_p(x, sizes=(), dim=0):
    """Split along ``dim`` into pieces of the given sizes (views of ``x``)."""
    pre = (slice(None),) * dim
    out = []
    start = 0
    for n in sizes:
        out.append(x[pre + (slice(start, start + n),)])
        start += n
    return tuple(out)


def _pieces(g):
    """The output gradients of a multi-output node as a tuple: a node that made one piece
    (``x.chunk(1)``, ``unbind`` of a size-1 dimension) has ``n_out == 1`` and gets it bare."""
    return tuple(g) if isinstance(g, (tuple, list)) else (g,)


split_p.defvjp(lambda g, out, x, sizes=(), dim=0: cat_p(*_pieces(g), dim=dim))


@primitive("unbind", meta=True, n_outputs=-1)
def unbind_p(x, dim=0):
    """The slices of ``x`` along ``dim`` (views), dimension removed."""
    pre = (slice(None),) * dim
    return tuple(x[pre + (i, Ellipsis)] for i in range(x.shape[dim]))


unbind_p.defvjp(lambda g, out, x, dim=0: stack_p(*_pieces(g), dim=dim))


# ---------------------------------------------------------------------------
# copies: flip, roll, repeat/tile, repeat_interleave, pad, clone
# ---------------------------------------------------------------------------

@primitive("flip")
def flip_p(x, dims=()):
    """``x`` reversed along ``dims`` (a copy, as in PyTorch)."""
    return np.flip(x, dims).copy() if dims else x.copy()


flip_p.defvjp(lambda g, out, x, dims=(): flip_p(g, dims=dims))


@primitive("roll")
def roll_p(x, shifts=(), dims=None):
    """``x`` rolled by ``shifts`` along ``dims`` (flattened first when ``dims`` is None)."""
    if dims is None:
        return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return np.roll(x, shifts, axis=dims)


roll_p.defvjp(lambda g, out, x, shifts=(), dims=None: roll_p(g, shifts=tuple(-s for s in shifts), dims=dims))


@primitive("repeat", meta=True)
def repeat_p(x, repeats=()):
    """``x`` tiled ``repeats`` times per dimension (``len(repeats) >= x.ndim``)."""
    return np.tile(x, repeats) if repeats else x.copy()


def _repeat_vjp(g, out, x, repeats=()):

    xs = (1,) * (len(repeats) - len(x.shape)) + tuple(x.shape)
    inter = []
    for r, s in zip(repeats, xs, strict=True):
        inter += [r, s]
    gi = reshape_p(g, shape=tuple(inter))
    gi = sum_p(gi, dim=tuple(range(0, 2 * len(repeats), 2)))
    return reshape_p(gi, shape=tuple(x.shape))


repeat_p.defvjp(_repeat_vjp)


@primitive("repeat_interleave", meta=True, save_inputs=True, nondiff_argnums=(1,))
def repeat_interleave_p(x, repeats, dim=0):
    """Each slice of ``x`` along ``dim`` repeated ``repeats`` times (an int or one count per slice)."""
    return np.repeat(x, repeats, axis=dim)


def _repeat_interleave_vjp(g, out, x, repeats, dim=0):

    shape = tuple(x.shape)
    if isinstance(repeats, int):    # sum each run of `repeats` slices: a reshape and a sum
        inter = shape[:dim] + (shape[dim], repeats) + shape[dim + 1:]
        return sum_p(reshape_p(g, shape=inter), dim=(dim + 1,))
    # the source slice of every output slice, from the counts (an input of this primitive)
    idx = repeat_interleave_p(np.arange(shape[dim]), repeats, dim=0)
    return index_select_backward_p(g, idx, shape=shape, dim=dim)


repeat_interleave_p.defvjp(_repeat_interleave_vjp, None)


def _pad_map(n, lo, hi, mode):
    src = np.arange(-lo, n + hi)
    if mode == "reflect":
        src = np.abs(src)
        src = np.where(src > n - 1, 2 * (n - 1) - src, src)
    elif mode == "replicate":
        src = np.clip(src, 0, n - 1)
    elif mode == "circular":
        src = np.mod(src, n)
    return src


def _pad_name(params) -> str:
    mode = params.get("mode", "constant")
    n = len(params.get("pad", ())) // 2
    if mode == "reflect":
        return f"ReflectionPad{n}DBackward0"
    if mode == "replicate":
        return f"ReplicationPad{n}DBackward0"
    return "ConstantPadNdBackward0" if mode == "constant" else "PadBackward0"


@primitive("pad", meta=True, torch_name=_pad_name)
def pad_p(x, pad=(), mode="constant", value=0.0):
    """``x`` padded; ``pad`` pairs start from the last dimension (PyTorch's order)."""
    nd = x.ndim
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    if mode == "constant":
        crop = [slice(None)] * nd
        widths = [(0, 0)] * nd
        for i, (lo, hi) in enumerate(pairs):
            d = nd - 1 - i
            crop[d] = slice(max(-lo, 0), x.shape[d] - max(-hi, 0))
            widths[d] = (max(lo, 0), max(hi, 0))
        return np.pad(x[tuple(crop)], widths, mode="constant", constant_values=value)
    out = x
    for i, (lo, hi) in enumerate(pairs):
        d = nd - 1 - i
        out = np.take(out, _pad_map(x.shape[d], lo, hi, mode), axis=d)
    return out


@primitive("pad_backward")
def pad_backward_p(g, shape=(), pad=(), mode="reflect"):
    """Gradient of a non-constant pad: each output position adds into its source."""
    nd = len(shape)
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    cur = g
    for i in reversed(range(len(pairs))):
        d = nd - 1 - i
        lo, hi = pairs[i]
        tgt = list(cur.shape)
        tgt[d] = shape[d]
        z = np.zeros(tgt, g.dtype)
        np.add.at(z, (slice(None),) * d + (_pad_map(shape[d], lo, hi, mode),), cur)
        cur = z
    return cur


def _pad_vjp(g, out, x, pad=(), mode="constant", value=0.0):
    if mode == "constant":
        return pad_p(g, pad=tuple(-p for p in pad), mode="constant", value=0.0)
    return pad_backward_p(g, shape=tuple(x.shape), pad=pad, mode=mode)


pad_p.defvjp(_pad_vjp)
pad_backward_p.defvjp(lambda g, out, gx, shape=(), pad=(), mode="reflect": pad_p(g, pad=pad, mode=mode))


@primitive("clone")
def clone_p(x):
    """A copy of ``x`` (C-contiguous)."""
    return np.array(x, copy=True, order="C")


clone_p.defvjp(lambda g, out, x: g)


# -- composites: broadcast_tensors, diff, Tensor.unfold ------------------------------
# Built from expand / narrow / index_select, so gradients come from those rules.


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_shape():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    R["cat"].defbatch(b.cat_rule)
    R["stack"].defbatch(b.stack_rule)
    R["split"].defbatch(b.shift_dim)
    R["unbind"].defbatch(b.shift_dim)
    R["flip"].defbatch(b.shift_dims)
    R["roll"].defbatch(b.shift_dims)
    R["repeat"].defbatch(b.repeat_rule)
    R["repeat_interleave"].defbatch(eager="the output size depends on the repeat counts")
    R["pad"].defbatch(b.leading)
    R["pad_backward"].defbatch(fallback=b.BACKWARD_ONLY)
    R["clone"].defbatch(b.elementwise)


_defbatch_shape()
