"""``default_collate`` / ``default_convert``: turn a list of samples into a batch."""

from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from ..tensor import Tensor

__all__ = ["default_collate", "default_convert"]


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    return np.stack(arrays)


def _tensor(arr: np.ndarray) -> Tensor:
    return Tensor._make(arr, False, None, 0)


def default_collate(batch: list):
    """Stack a list of samples into a batch, recursively, like PyTorch:

    * tensors and NumPy arrays → one tensor with a new first dimension;
    * Python ints → int64 tensor, floats → float64 tensor, bools → bool tensor;
    * strings and bytes → left as they are: the list of the batch, or a tuple for a column
      of tuple/list samples (as in PyTorch);
    * dicts → a dict of batches; tuples/lists → batches per position; namedtuples keep their type.

    >>> dg.data.default_collate([(dg.ones(2), 0), (dg.zeros(2), 1)])
    [tensor([[1., 1.], [0., 0.]]), tensor([0, 1])]
    """
    if not batch:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {tuple(b.shape) for b in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but got shapes "
                               f"{sorted(shapes)} in one batch; pad the samples or pass a custom collate_fn")
        return _tensor(_stack([b._data for b in batch]))
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "OUSV":
        shapes = {b.shape for b in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"default_collate: stack expects each array to be equal size, but got shapes "
                               f"{sorted(shapes)} in one batch; pad the samples or pass a custom collate_fn")
        return _tensor(_stack(batch))
    if isinstance(elem, np.ndarray) and elem.ndim == 0 and elem.dtype.kind in "OUSV":
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                        f"found numpy array of dtype {elem.dtype}")
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        return _tensor(np.array(batch))
    if isinstance(elem, bool):
        return _tensor(np.array(batch, dtype=np.bool_))
    if isinstance(elem, int):
        return _tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        return _tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, numbers.Number):
        return _tensor(np.array(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):       # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch, strict=True)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        # columns are passed on as tuples, as PyTorch does (so strings come back as tuples)
        columns = [default_collate(s) for s in zip(*batch, strict=True)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem).__name__}")


def default_convert(data):
    """Without batching (``batch_size=None``): NumPy arrays become tensors, recursively."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUSV":
        return _tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return _tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
