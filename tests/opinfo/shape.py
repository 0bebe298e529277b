"""Op records for shape primitives (views, joins, splits, flips, pads...)."""

from __future__ import annotations

from tests.opinfo import OpInfo, Sample, noncontig, randn


def _is_torch(m):
    return m.__name__ == "torch"


def _pad(m):
    return m.nn.functional.pad if _is_torch(m) else m.pad


def _s(*samples):
    """Samples built from (shapes, kwargs, desc) specs, one random array per shape."""
    def make(rng, dt):
        out = []
        for shapes, kw, desc, *gen in samples:
            g = gen[0] if gen else randn
            out.append(Sample(tuple(g(rng, s, dt) for s in shapes), dict(kw), desc))
        return out
    return make


def _nc(rng, shape, dt):
    return noncontig(rng, shape, dt)


OPS = [
    # -- views --------------------------------------------------------------------------
    OpInfo("reshape", lambda m, x, shape: x.reshape(shape),
           _s(([(2, 6)], {"shape": (3, -1)}, ""), ([()], {"shape": (1, 1)}, "0d"),
              ([(0, 3)], {"shape": (3, 0)}, "empty"), ([(3, 4)], {"shape": (12,)}, "noncontig", _nc))),
    OpInfo("view", lambda m, x: x.view(4, 3), _s(([(2, 6)], {}, ""))),
    OpInfo("expand", lambda m, x: x.expand(2, 3, 4), _s(([(3, 1)], {}, ""), ([()], {}, "0d"))),
    OpInfo("permute", lambda m, x: x.permute(2, 0, -2), _s(([(2, 3, 4)], {}, ""), ([(2, 0, 3)], {}, "empty"))),
    OpInfo("transpose", lambda m, x: x.transpose(0, -1), _s(([(2, 3, 4)], {}, ""), ([(3, 4)], {}, "noncontig", _nc))),
    OpInfo("t", lambda m, x: x.t(), _s(([(2, 3)], {}, ""), ([(3,)], {}, "1d"))),
    OpInfo("mT", lambda m, x: x.mT, _s(([(2, 3, 4)], {}, ""))),
    OpInfo("squeeze", lambda m, x: x.squeeze(), _s(([(1, 3, 1)], {}, ""), ([()], {}, "0d"), ([(1, 0)], {}, "empty"))),
    OpInfo("squeeze_dim", lambda m, x, dim: x.squeeze(dim),
           _s(([(2, 1, 3)], {"dim": 1}, ""), ([(2, 1, 3)], {"dim": -2}, "neg"), ([(2, 1, 3)], {"dim": 0}, "noop"),
              ([()], {"dim": 0}, "0d"))),
    OpInfo("squeeze_tuple", lambda m, x: m.squeeze(x, (0, -1)), _s(([(1, 3, 1)], {}, ""), ([(1, 3, 2)], {}, "partial"))),
    OpInfo("unsqueeze", lambda m, x, dim: x.unsqueeze(dim),
           _s(([(2, 3)], {"dim": 1}, ""), ([(2, 3)], {"dim": -1}, "neg"), ([()], {"dim": 0}, "0d"),
              ([(0,)], {"dim": 0}, "empty"))),
    OpInfo("flatten", lambda m, x, **kw: m.flatten(x, **kw),
           _s(([(2, 3, 4)], {}, ""), ([(2, 3, 4)], {"start_dim": 1}, "start"), ([(2, 3, 4)], {"start_dim": 0, "end_dim": -2}, "neg"),
              ([()], {}, "0d"), ([(3, 4)], {}, "noncontig", _nc), ([(2, 0, 3)], {"start_dim": 1}, "empty"))),
    OpInfo("ravel", lambda m, x: m.ravel(x), _s(([(3, 4)], {}, "noncontig", _nc))),
    OpInfo("unflatten", lambda m, x: x.unflatten(-1, (2, -1)), _s(([(3, 4)], {}, ""), ([(0, 6)], {}, "empty"))),
    OpInfo("movedim", lambda m, x: m.movedim(x, (0, 1), (-1, 0)), _s(([(2, 3, 4)], {}, ""))),
    OpInfo("moveaxis", lambda m, x: m.moveaxis(x, 0, 2), _s(([(2, 3, 4)], {}, ""))),
    OpInfo("narrow", lambda m, x: x.narrow(-1, 1, 2), _s(([(3, 4)], {}, ""), ([(3, 4)], {}, "noncontig", _nc))),
    OpInfo("select", lambda m, x: x.select(1, -1), _s(([(3, 4)], {}, ""), ([(2, 3, 0)], {}, "empty"))),
    OpInfo("atleast_1d", lambda m, x: m.atleast_1d(x), _s(([()], {}, "0d"), ([(3,)], {}, "1d"))),
    OpInfo("atleast_2d", lambda m, x: m.atleast_2d(x), _s(([()], {}, "0d"), ([(3,)], {}, "1d"))),
    OpInfo("atleast_3d", lambda m, x, y: m.atleast_3d(x, y), _s(([(3,), (2, 3)], {}, ""))),
    OpInfo("meshgrid_ij", lambda m, x, y: m.meshgrid(x, y, indexing="ij"), _s(([(3,), (2,)], {}, ""), ([(), (2,)], {}, "0d"))),
    OpInfo("meshgrid_xy", lambda m, x, y, z: m.meshgrid(x, y, z, indexing="xy"), _s(([(3,), (2,), (2,)], {}, ""))),
    OpInfo("contiguous", lambda m, x: x.contiguous() * 1.0, _s(([(3, 4)], {}, "noncontig", _nc), ([(3,)], {}, ""))),
    OpInfo("clone", lambda m, x: m.clone(x), _s(([(3, 4)], {}, ""), ([()], {}, "0d"), ([(3, 4)], {}, "noncontig", _nc))),
    # -- joins --------------------------------------------------------------------------
    OpInfo("cat", lambda m, x, y, z, dim: m.cat([x, y, z], dim),
           _s(([(2, 3), (1, 3), (4, 3)], {"dim": 0}, ""), ([(2, 3), (2, 1), (2, 2)], {"dim": -1}, "neg"),
              ([(2, 3), (0, 3), (1, 3)], {"dim": 0}, "empty"), ([(3, 2), (3, 2), (3, 2)], {"dim": 1}, "noncontig", _nc))),
    OpInfo("cat_promote", lambda m, x, y: m.cat([x, y.float()], 1),
           _s(([(2, 3), (2, 2)], {}, "")), dtypes=("float64",), fd=False),
    OpInfo("concat", lambda m, x, y: m.concat((x, y), dim=1), _s(([(2, 3), (2, 1)], {}, ""))),
    OpInfo("concatenate", lambda m, x, y: m.concatenate((x, y), axis=0), _s(([(2, 3), (1, 3)], {}, ""))),
    OpInfo("stack", lambda m, x, y, dim: m.stack([x, y], dim),
           _s(([(2, 3), (2, 3)], {"dim": 0}, ""), ([(2, 3), (2, 3)], {"dim": -1}, "neg"), ([(), ()], {"dim": 0}, "0d"),
              ([(0, 2), (0, 2)], {"dim": 1}, "empty"))),
    OpInfo("hstack", lambda m, x, y: m.hstack([x, y]), _s(([(2,), (3,)], {}, "1d"), ([(2, 2), (2, 1)], {}, "2d"))),
    OpInfo("vstack", lambda m, x, y: m.vstack([x, y]), _s(([(3,), (3,)], {}, "1d"), ([(2, 3), (1, 3)], {}, "2d"))),
    OpInfo("dstack", lambda m, x, y: m.dstack([x, y]), _s(([(3,), (3,)], {}, "1d"), ([(2, 3), (2, 3)], {}, "2d"))),
    OpInfo("column_stack", lambda m, x, y: m.column_stack([x, y]), _s(([(3,), (3, 2)], {}, ""))),
    # -- splits -------------------------------------------------------------------------
    OpInfo("split_int", lambda m, x, s, dim: m.split(x, s, dim),
           _s(([(5, 2)], {"s": 2, "dim": 0}, ""), ([(2, 4)], {"s": 3, "dim": -1}, "neg"),
              ([(4, 3)], {"s": 2, "dim": 0}, "noncontig", _nc))),
    OpInfo("split_sizes", lambda m, x: x.split([1, 0, 3], 1), _s(([(2, 4)], {}, ""))),
    OpInfo("split_partial_use", lambda m, x: m.split(x, 2)[1] * 2.0, _s(([(5, 2)], {}, ""))),
    OpInfo("chunk", lambda m, x, c, dim: m.chunk(x, c, dim),
           _s(([(5, 2)], {"c": 3, "dim": 0}, ""), ([(2, 6)], {"c": 4, "dim": -1}, "uneven"), ([(2, 2)], {"c": 5, "dim": 0}, "many"))),
    OpInfo("unbind", lambda m, x, dim: m.unbind(x, dim), _s(([(3, 2)], {"dim": 0}, ""), ([(2, 3)], {"dim": -1}, "neg"))),
    OpInfo("unbind_partial_use", lambda m, x: x.unbind(1)[2] * 3.0, _s(([(2, 3)], {}, ""))),
    OpInfo("tensor_split", lambda m, x, ios: m.tensor_split(x, ios, 1),
           _s(([(2, 7)], {"ios": 3}, "sections"), ([(2, 7)], {"ios": (1, 4, 9)}, "indices"))),
    # -- copies -------------------------------------------------------------------------
    OpInfo("flip", lambda m, x, dims: m.flip(x, dims),
           _s(([(3, 4)], {"dims": (0,)}, ""), ([(2, 3, 2)], {"dims": (0, -1)}, "neg"), ([()], {"dims": ()}, "0d"),
              ([(3, 4)], {"dims": (1,)}, "noncontig", _nc), ([(0, 2)], {"dims": (1,)}, "empty"))),
    OpInfo("fliplr", lambda m, x: m.fliplr(x), _s(([(3, 4)], {}, ""))),
    OpInfo("flipud", lambda m, x: m.flipud(x), _s(([(3, 4)], {}, ""))),
    OpInfo("roll", lambda m, x, **kw: m.roll(x, **kw),
           _s(([(3, 4)], {"shifts": 1, "dims": 0}, ""), ([(3, 4)], {"shifts": (2, -1), "dims": (1, 0)}, "tuple"),
              ([(3, 4)], {"shifts": 5}, "flat"), ([(3, 4)], {"shifts": 3}, "noncontig_flat", _nc))),
    OpInfo("repeat", lambda m, x: x.repeat(2, 1, 3), _s(([(2, 3)], {}, ""), ([()], {}, "0d"), ([(0, 2)], {}, "empty"))),
    OpInfo("tile", lambda m, x, dims: m.tile(x, dims), _s(([(2, 3)], {"dims": (2,)}, "short"), ([(3,)], {"dims": (2, 2)}, "long"))),
    OpInfo("repeat_interleave_int", lambda m, x, **kw: m.repeat_interleave(x, 2, **kw),
           _s(([(2, 3)], {}, "flat"), ([(2, 3)], {"dim": 1}, ""), ([(2, 3)], {"dim": -2}, "neg"))),
    OpInfo("repeat_interleave_tensor", lambda m, x, r: m.repeat_interleave(x, r.long(), dim=0),
           lambda rng, dt: [Sample((randn(rng, (3, 2), dt), rng.integers(0, 3, size=3).astype("int64"))),
                            Sample((randn(rng, (3, 2), dt), __import__("numpy").array([0, 2, 1])), desc="zero")]),
    OpInfo("pad_constant", lambda m, x, **kw: _pad(m)(x, **kw),
           _s(([(2, 3)], {"pad": (1, 2)}, ""), ([(2, 3, 2)], {"pad": (1, 0, 0, 2), "value": 1.5}, "value"),
              ([(2, 4)], {"pad": (-1, 2, 1, -1)}, "negative"), ([(2, 3)], {"pad": (1, 1)}, "noncontig", _nc))),
    OpInfo("pad_reflect", lambda m, x, **kw: _pad(m)(x, mode="reflect", **kw),
           _s(([(2, 4)], {"pad": (2, 3)}, "1d"), ([(1, 3, 4)], {"pad": (1, 2, 2, 1)}, "2d"))),
    OpInfo("pad_replicate", lambda m, x, **kw: _pad(m)(x, mode="replicate", **kw),
           _s(([(2, 3)], {"pad": (2, 3)}, "1d"), ([(1, 3, 2)], {"pad": (1, 2, 2, 1)}, "2d"),
              ([(1, 2, 2, 2)], {"pad": (1, 0, 0, 1, 1, 1)}, "3d"))),
    OpInfo("pad_circular", lambda m, x, **kw: _pad(m)(x, mode="circular", **kw),
           _s(([(2, 3)], {"pad": (2, 3)}, "1d"), ([(1, 3, 4)], {"pad": (1, 2, 3, 0)}, "2d"))),
    OpInfo("broadcast_tensors", lambda m, x, y: m.broadcast_tensors(x, y),
           _s(([(3,), (2, 1)], {}, ""), ([(2, 3), (2, 3)], {}, "same"))),
    OpInfo("diff", lambda m, x, **kw: m.diff(x, **kw),
           _s(([(3, 5)], {}, ""), ([(4, 3)], {"n": 2, "dim": 0}, "n2_dim0"), ([(3, 4)], {"n": 5}, "n_past_length"))),
    OpInfo("diff_prepend_append", lambda m, x, p, a: m.diff(x, dim=1, prepend=p, append=a),
           _s(([(2, 3), (2, 1), (2, 2)], {}, ""))),
    OpInfo("tensor_unfold", lambda m, x, **kw: x.unfold(**kw),
           _s(([(2, 7)], {"dimension": 1, "size": 3, "step": 2}, ""),
              ([(5, 2)], {"dimension": 0, "size": 2, "step": 1}, "overlap"),
              ([(2, 3, 4)], {"dimension": -1, "size": 4, "step": 4}, "whole"),
              ([(4, 3)], {"dimension": 0, "size": 2, "step": 1}, "noncontig", _nc))),
    OpInfo("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), _s(([(2, 3), (2,), ()], {}, ""))),
    OpInfo("rot90", lambda m, x, **kw: m.rot90(x, **kw),
           _s(([(2, 3)], {}, ""), ([(2, 3, 4)], {"k": 3, "dims": (2, 0)}, "k3"),
              ([(2, 3)], {"k": -2}, "neg"), ([(3, 2)], {"k": 4}, "k4"))),
    OpInfo("cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b), _s(([(2,), (3,)], {}, ""))),
    OpInfo("combinations", lambda m, x, **kw: m.combinations(x, **kw),
           _s(([(4,)], {}, ""), ([(3,)], {"r": 3, "with_replacement": True}, "replacement"))),
]
