"""Samplers: which indices a DataLoader visits, and in which order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..random import Generator, default_generator
from ..tensor import Tensor

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _rng(generator: Generator | None) -> np.random.Generator:
    """The generator's stream, or (like PyTorch) a fresh stream seeded from the default generator,
    so ``dg.manual_seed`` makes the order reproducible."""
    if generator is not None:
        return generator.rng
    return np.random.default_rng(int(default_generator.rng.integers(0, 2**63)))


class Sampler:
    """Base class: an iterable over dataset indices (``__iter__``, optionally ``__len__``)."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation (or ``num_samples`` draws with ``replacement=True``).

    >>> list(dg.data.RandomSampler(range(5), generator=dg.Generator().manual_seed(0)))
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a boolean value, but got {replacement!r}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # The stream is chosen when iteration starts; indices are drawn lazily, a chunk at a time,
        # so ``num_samples=int(1e10)`` (an "infinite" loader) allocates nothing up front.
        return self._draw(len(self.data_source), _rng(self.generator), self.num_samples)

    _CHUNK = 32

    def _draw(self, n: int, rng: np.random.Generator, total: int):
        if self.replacement:
            for start in range(0, total, self._CHUNK):
                yield from rng.integers(0, n, size=min(self._CHUNK, total - start)).tolist()
            return
        full, rest = divmod(total, n)
        for _ in range(full):
            yield from rng.permutation(n).tolist()
        if rest:
            yield from rng.permutation(n)[:rest].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        perm = _rng(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in perm.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    >>> sampler = dg.data.WeightedRandomSampler([0.1, 0.9], num_samples=10)
    """

    def __init__(self, weights: Sequence[float] | Tensor, num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples should be a positive integer value, but "
                             f"got num_samples={num_samples}")
        w = np.asarray(weights._data if isinstance(weights, Tensor) else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1-d sequence but given weights have "
                             f"shape {list(w.shape)}")
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative, with a positive sum")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError("WeightedRandomSampler: cannot draw more samples than there are non-zero weights "
                             "without replacement")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        p = self.weights / self.weights.sum()
        idx = _rng(self.generator).choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        return iter(idx.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of ``batch_size``.

    >>> list(dg.data.BatchSampler(range(5), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
