"""IDX files (the MNIST / Fashion-MNIST format), gzipped or raw, and the two datasets."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable

import numpy as np

from ...tensor import Tensor
from ..dataset import Dataset

__all__ = ["read_idx", "IDXError", "MNIST", "FashionMNIST"]

# IDX type byte -> big-endian dtype
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IDXError(ValueError):
    """A malformed IDX file (names the file, the byte offset and what was expected)."""


def _raw_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise IDXError(f"{path}: gzip stream is truncated or corrupted ({e}); re-download the file") from None
    return data


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (``.gz`` or raw) into a native-endian NumPy array.

    >>> images = dg.data.datasets.read_idx("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")
    >>> images.shape
    (10000, 28, 28)
    """
    path = os.fspath(path)
    data = _raw_bytes(path)
    if len(data) < 4:
        raise IDXError(f"{path}: offset 0: expected a 4-byte IDX magic number, but the file has {len(data)} bytes")
    if data[0] != 0 or data[1] != 0:
        raise IDXError(f"{path}: offset 0: expected magic bytes 0x00 0x00, got 0x{data[0]:02x} 0x{data[1]:02x} "
                       "(not an IDX file)")
    if data[2] not in _IDX_TYPES:
        raise IDXError(f"{path}: offset 2: expected an IDX type code (one of "
                       f"{', '.join(f'0x{k:02x}' for k in _IDX_TYPES)}), got 0x{data[2]:02x}")
    ndim = data[3]
    if ndim == 0:
        raise IDXError(f"{path}: offset 3: expected at least one dimension, got 0")
    head = 4 + 4 * ndim
    if len(data) < head:
        raise IDXError(f"{path}: offset 4: expected {ndim} dimension sizes ({4 * ndim} bytes), but the file "
                       f"ends at byte {len(data)}")
    shape = tuple(int(x) for x in np.frombuffer(data, ">u4", ndim, 4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - head != expected:
        raise IDXError(f"{path}: offset {head}: expected {expected} bytes of data for shape {list(shape)} and "
                       f"type {dtype.str[1:]}, found {len(data) - head} (truncated or corrupted file)")
    return np.frombuffer(data, dtype, offset=head).reshape(shape).astype(dtype.newbyteorder("="))


def _find(root: str, stem: str) -> str:
    for name in (stem, stem + ".gz"):
        p = os.path.join(root, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{stem}(.gz) not found in {root!r}")


class MNIST(Dataset):
    """MNIST-format data from IDX files in ``root`` (``train-images-idx3-ubyte[.gz]``...).

    Samples are ``(image, label)`` with ``image`` a uint8 (28, 28) NumPy array (apply
    ``dg.data.transforms.ToTensor()`` for a float (1, 28, 28) tensor in [0, 1]).
    ``.data`` is the uint8 (N, 28, 28) tensor of all images, ``.targets`` the int64 labels.

    >>> test = dg.data.datasets.MNIST("/data/mnist", train=False, transform=dg.data.transforms.ToTensor())
    """

    default_roots: tuple[str, ...] = ("/usr/share/datasets/mnist",)
    classes = [str(i) for i in range(10)]

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        if download:
            raise RuntimeError(f"{type(self).__name__}: dyngraph does not download data; install the files and "
                               f"pass root= (default locations: {', '.join(self.default_roots)})")
        self.root = self._resolve_root(root)
        prefix = "train" if train else "t10k"
        images = read_idx(_find(self.root, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(_find(self.root, f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXError(f"{self.root}: expected images (N, H, W) and labels (N,) of equal N, got "
                           f"{list(images.shape)} and {list(labels.shape)}")
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self.data = Tensor._make(images, False, None, 0)
        self.targets = Tensor._make(labels.astype(np.int64), False, None, 0)

    def _resolve_root(self, root) -> str:
        if root is not None:
            root = os.fspath(root)
            if not os.path.isdir(root):
                raise FileNotFoundError(f"{type(self).__name__}: root directory {root!r} does not exist")
            return root
        for candidate in self.default_roots:
            if os.path.isdir(candidate):
                return candidate
        raise FileNotFoundError(f"{type(self).__name__}: no root given and none of the default locations exist "
                                f"({', '.join(self.default_roots)})")

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, i: int):
        img = self.data._data[i]
        label = int(self.targets._data[i])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return img, label

    def __repr__(self) -> str:
        return f"{type(self).__name__}(root={self.root!r}, train={self.train}, n={len(self)})"


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST (IDX files); by default from Debian's ``dataset-fashion-mnist``
    package (``/usr/share/datasets/fashion-mnist``).

    >>> train = dg.data.datasets.FashionMNIST(train=True, transform=dg.data.transforms.ToTensor())
    """

    default_roots = ("/usr/share/datasets/fashion-mnist",)
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
