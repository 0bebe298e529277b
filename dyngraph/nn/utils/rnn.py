"""Variable-length sequences: PackedSequence, padding and packing (PyTorch's ``nn.utils.rnn``).

A :class:`PackedSequence` stores the rows of all time steps one after the
other, step ``t`` holding ``batch_sizes[t]`` rows (the sequences still running
at step ``t``, longest first).  Recurrent layers accept it directly.

Because dyngraph builds the graph as the program runs, padding is optional:
:func:`run_by_length` runs a recurrent module on a list of sequences by
grouping equal lengths, with no padding and no packing, and gives the same
numbers as the packed path (see ``docs/nn.md``).

>>> seqs = [dg.randn(5, 3), dg.randn(2, 3), dg.randn(4, 3)]
>>> packed = pack_sequence(seqs, enforce_sorted=False)
>>> packed.batch_sizes
tensor([3, 3, 2, 2, 1])
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..._core.state import concrete
from ...surface.indexing import index_select
from ...surface.shape import cat, reshape, stack, transpose
from ...tensor import Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation",
           "run_by_length"]


def _const(a: np.ndarray) -> Tensor:
    return Tensor._make(a, False, None, 0)


def _as_int_array(x, name) -> np.ndarray:
    a = np.asarray(concrete(x, f"{name}: the lengths decide the packing") if isinstance(x, Tensor) else x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of ints, got shape {list(a.shape)}")
    return a.astype(np.int64)


def invert_permutation(permutation):
    """The inverse permutation (``None`` stays ``None``)."""
    if permutation is None:
        return None
    p = _as_int_array(permutation, "permutation")
    inv = np.empty_like(p)
    inv[p] = np.arange(len(p), dtype=np.int64)
    return _const(inv)


class PackedSequence(namedtuple("PackedSequence_",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Packed rows of variable-length sequences (``data``, ``batch_sizes``, sort permutations).

    ``batch_sizes``, ``sorted_indices`` and ``unsorted_indices`` are int64 tensors;
    the index tensors are ``None`` when the batch was already sorted by length.
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise ValueError("PackedSequence needs batch_sizes (use pack_padded_sequence or pack_sequence)")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _const(_as_int_array(batch_sizes, "batch_sizes"))
        for name, idx in (("sorted_indices", sorted_indices), ("unsorted_indices", unsorted_indices)):
            if idx is not None and not isinstance(idx, Tensor):
                raise TypeError(f"PackedSequence: {name} must be a Tensor or None")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self) -> PackedSequence:
        return self

    def double(self) -> PackedSequence:
        return self._with_data(self.data.double())

    def float(self) -> PackedSequence:
        return self._with_data(self.data.float())

    def half(self) -> PackedSequence:
        return self._with_data(self.data.half())

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False

    def _sizes(self) -> tuple:
        return tuple(int(b) for b in concrete(self.batch_sizes, "PackedSequence: batch sizes"))


def _check_seq_list(sequences, op):
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError(f"{op}: received an empty list of sequences")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"{op}: sequences[{i}] is a {type(s).__name__}, expected a Tensor")
        if s._data.ndim < 1 or s._data.shape[1:] != sequences[0]._data.shape[1:]:
            raise RuntimeError(
                f"{op}: all sequences must have the same trailing shape; sequences[0] has shape "
                f"{list(sequences[0].shape)} and sequences[{i}] has shape {list(s.shape)}")
    return sequences


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shape ``(L_i, *)`` into ``(L_max, B, *)`` (or ``(B, L_max, *)``).

    >>> pad_sequence([dg.ones(3), dg.ones(1)], batch_first=True)
    tensor([[1., 1., 1.],
            [1., 0., 0.]])
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = _check_seq_list(sequences, "pad_sequence")
    lengths = [s._data.shape[0] for s in seqs]
    tmax, b = max(lengths), len(seqs)
    trail = tuple(seqs[0]._data.shape[1:])
    pad_row = _const(np.full((1,) + trail, padding_value, dtype=seqs[0]._data.dtype))
    flat = cat(seqs + [pad_row], 0)
    total = sum(lengths)
    idx = np.full((b, tmax), total, dtype=np.int64)   # default: the padding row
    start = 0
    for i, n in enumerate(lengths):
        cols = slice(0, n) if padding_side == "right" else slice(tmax - n, tmax)
        idx[i, cols] = np.arange(start, start + n)
        start += n
    order = idx if batch_first else idx.T
    out = index_select(flat, 0, _const(order.reshape(-1)))
    return reshape(out, order.shape + trail)


def pack_padded_sequence(input, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``(T, B, *)`` (or ``(B, T, *)``) given each sequence's length.

    With ``enforce_sorted=False`` the batch is sorted by decreasing length
    internally and ``unsorted_indices`` restores the original order.
    """
    lens = _as_int_array(lengths, "lengths")
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    if batch_first:
        input = transpose(input, 0, 1)
    tdim, b = input._data.shape[:2]
    if len(lens) != b:
        raise ValueError(
            f"pack_padded_sequence: expected {b} lengths (the batch size of input of shape "
            f"{list(input.shape)}), got {len(lens)}")
    if np.any(lens <= 0):
        raise RuntimeError(
            "pack_padded_sequence: Length of all samples has to be greater than 0, but found an "
            f"element in 'lengths' that is <= 0 (lengths={lens.tolist()})")
    if lens.max() > tdim:
        raise RuntimeError(
            f"pack_padded_sequence: a length ({int(lens.max())}) exceeds the padded sequence "
            f"length {tdim} (input shape {list(input.shape)})")
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError(
                "pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
                "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                "pack_padded_sequence and/or pack_sequence to sidestep this requirement if you "
                "do not need ONNX exportability.")
        order = np.arange(b)
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = _const(order.astype(np.int64))
    slens = lens[order]
    tmax = int(slens[0])
    batch_sizes = np.array([(slens > t).sum() for t in range(tmax)], dtype=np.int64)
    rows = np.concatenate([t * b + order[:bs] for t, bs in enumerate(batch_sizes)])
    trail = tuple(input._data.shape[2:])
    flat = reshape(input, (tdim * b,) + trail)
    data = index_select(flat, 0, _const(rows.astype(np.int64)))
    return PackedSequence(data, _const(batch_sizes), sorted_indices,
                          invert_permutation(sorted_indices))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """Inverse of :func:`pack_padded_sequence`: ``(padded, lengths)`` in the original order."""
    sizes = sequence._sizes()
    data = sequence.data
    b, tmax = sizes[0], len(sizes)
    if total_length is not None:
        if total_length < tmax:
            raise ValueError(
                f"pad_packed_sequence: Expected total_length to be at least the length of the "
                f"longest sequence ({tmax}), but got total_length={total_length}")
        tmax = int(total_length)
    total = data._data.shape[0]
    idx = np.full((tmax, b), total, dtype=np.int64)
    start = 0
    for t, bs in enumerate(sizes):
        idx[t, :bs] = np.arange(start, start + bs)
        start += bs
    lengths = np.array([sum(1 for bs in sizes if bs > i) for i in range(b)], dtype=np.int64)
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        perm = concrete(unsorted, "pad_packed_sequence: the original order").astype(np.int64)
        idx = idx[:, perm]
        lengths = lengths[perm]
    if batch_first:
        idx = idx.T
    trail = tuple(data._data.shape[1:])
    pad_row = _const(np.full((1,) + trail, padding_value, dtype=data._data.dtype))
    out = index_select(cat([data, pad_row], 0), 0, _const(idx.reshape(-1)))
    return reshape(out, idx.shape + trail), _const(lengths)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``(L_i, *)`` tensors (longest first unless ``enforce_sorted=False``)."""
    seqs = _check_seq_list(sequences, "pack_sequence")
    lengths = [s._data.shape[0] for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """Split a padded batch back into a list of ``(L_i, *)`` tensors."""
    lens = _as_int_array(lengths, "lengths")
    if not batch_first:
        padded_sequences = transpose(padded_sequences, 0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lens)]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """A list of ``(L_i, *)`` tensors from a :class:`PackedSequence` (original order)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def run_by_length(module, sequences, hx=None):
    """Run a recurrent module on sequences of different lengths without padding.

    Sequences of equal length are stacked into one batch and run together;
    nothing is padded or packed, and the results equal those of the packed
    path.  ``sequences`` are ``(L_i, input_size)`` tensors (``batch_first`` is
    ignored: each group is fed in the module's own layout).  Returns
    ``(outputs, h_n)`` -- ``outputs`` a list of ``(L_i, D * hidden)`` tensors
    in the original order, ``h_n`` like the module's (``(h_n, c_n)`` for LSTM)
    with the batch in the original order.  ``hx`` (optional) is the initial
    state for all sequences, batch dimension 1.

    >>> lstm = dg.nn.LSTM(3, 4)
    >>> outs, (h, c) = run_by_length(lstm, [dg.randn(5, 3), dg.randn(2, 3)])
    >>> [o.shape[0] for o in outs], h.shape
    ([5, 2], dyngraph.Size([1, 2, 4]))
    """
    seqs = _check_seq_list(sequences, "run_by_length")
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(seqs):
        groups.setdefault(s._data.shape[0], []).append(i)
    batch_first = getattr(module, "batch_first", False)
    outputs = [None] * len(seqs)
    finals = []   # (indices, h_n or (h_n, c_n)) per group
    for _, members in sorted(groups.items(), reverse=True):
        batch = stack([seqs[i] for i in members], 0 if batch_first else 1)
        h = None
        if hx is not None:
            sel = _const(np.asarray(members, dtype=np.int64))
            h = tuple(index_select(x, 1, sel) for x in hx) if isinstance(hx, tuple) \
                else index_select(hx, 1, sel)
        out, hn = module(batch, h)
        for k, i in enumerate(members):
            outputs[i] = out[k] if batch_first else out[:, k]
        finals.append((members, hn))
    order = [i for members, _ in finals for i in members]
    inverse = _const(np.argsort(np.asarray(order), kind="stable").astype(np.int64))

    def merge(parts):
        return index_select(cat(parts, 1), 1, inverse)

    if isinstance(finals[0][1], tuple):
        hn = tuple(merge([f[1][j] for f in finals]) for j in range(len(finals[0][1])))
    else:
        hn = merge([f[1] for f in finals])
    return outputs, hn

