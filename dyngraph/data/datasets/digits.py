"""scikit-learn's bundled 8x8 handwritten digits (1,797 images): the embedded default dataset."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ...tensor import Tensor
from ..dataset import Dataset

__all__ = ["Digits", "digits"]


@functools.lru_cache(maxsize=1)
def _load_arrays():
    try:
        from sklearn.datasets import load_digits  # noqa: PLC0415  (scikit-learn: optional dependency, imported on first use)
    except ImportError as e:  # pragma: no cover - scikit-learn is a runtime dependency
        raise ImportError("the digits dataset ships with scikit-learn: pip install scikit-learn") from e
    bunch = load_digits()
    images, labels = bunch.images.astype(np.uint8), bunch.target.astype(np.int64)   # pixel values 0..16
    images.flags.writeable = False      # cached and shared between datasets: read-only
    labels.flags.writeable = False
    return images, labels


class Digits(Dataset):
    """The 8x8 digits with a deterministic, stratified train/test split.

    Each sample is ``(image, label)``: ``image`` a float32 tensor of shape (1, 8, 8)
    scaled to [0, 1] (or whatever ``transform`` makes of the uint8 (8, 8) array
    of values 0..16), ``label`` an int.  ``.data`` holds all images of the split
    as a float32 (N, 1, 8, 8) tensor and ``.targets`` the int64 labels.

    >>> train = dg.data.datasets.Digits(split="train")
    >>> len(train), train[0][0].shape
    (1437, dyngraph.Size([1, 8, 8]))
    """

    classes = list(range(10))

    def __init__(self, split: str = "train", test_fraction: float = 0.2, seed: int = 0,
                 transform: Callable | None = None, target_transform: Callable | None = None) -> None:
        if split not in ("train", "test", "all"):
            raise ValueError(f"Digits: split must be 'train', 'test' or 'all', got {split!r}")
        if not 0 < test_fraction < 1:
            raise ValueError(f"Digits: test_fraction must be in (0, 1), got {test_fraction}")
        images, labels = _load_arrays()
        idx = _split_indices(labels, test_fraction, seed, split)
        self.split = split
        self.raw = images[idx]
        self.labels = labels[idx]
        self.transform = transform
        self.target_transform = target_transform
        self.data = Tensor._make((self.raw.astype(np.float32) / 16.0)[:, None], False, None, 0)
        self.targets = Tensor._make(self.labels.copy(), False, None, 0)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        label = int(self.labels[i])
        if self.target_transform is not None:
            label = self.target_transform(label)
        if self.transform is not None:
            return self.transform(self.raw[i]), label
        return Tensor._make(self.data._data[i], False, None, 0), label

    def __getitems__(self, indices: list[int]):
        return [self[i] for i in indices]

    def __repr__(self) -> str:
        return f"Digits(split={self.split!r}, n={len(self)})"


def _split_indices(labels: np.ndarray, test_fraction: float, seed: int, split: str) -> np.ndarray:
    """Per class, a seeded shuffle puts the first ``test_fraction`` in the test set (stratified)."""
    if split == "all":
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        rng.shuffle(members)
        test.append(members[: int(round(len(members) * test_fraction))])
    test_idx = np.sort(np.concatenate(test))
    if split == "test":
        return test_idx
    mask = np.ones(len(labels), dtype=bool)
    mask[test_idx] = False
    return np.flatnonzero(mask)


def digits(split: str = "train", **kwargs) -> Digits:
    """``Digits(split=...)``: scikit-learn's 8x8 digits, deterministic stratified split.

    >>> train, test = dg.data.datasets.digits("train"), dg.data.datasets.digits("test")
    """
    return Digits(split=split, **kwargs)
