"""Small image transforms (torchvision's names): ToTensor, Normalize, RandomCrop,
RandomHorizontalFlip, Compose, Lambda.

Images are (C, H, W) tensors after ``ToTensor``; random transforms draw from
dyngraph's default generator (seeded per DataLoader worker), or from the
``generator`` given to them.

>>> tf = Compose([ToTensor(), RandomCrop(28, padding=2), Normalize((0.286,), (0.353,))])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..random import Generator, rng_of
from ..tensor import Tensor

__all__ = ["Compose", "Lambda", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip"]


def _arr(img) -> np.ndarray:
    return img._data if isinstance(img, Tensor) else np.asarray(img)


def _like(img, arr: np.ndarray):
    return Tensor._make(arr, False, None, 0) if isinstance(img, Tensor) else arr


class Compose:
    """Apply transforms in order."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({inner}\n)"


class Lambda:
    """Wrap a function as a transform: ``Lambda(lambda x: x * 2)``."""

    def __init__(self, lambd: Callable) -> None:
        if not callable(lambd):
            raise TypeError(f"Lambda: argument should be callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self) -> str:
        return "Lambda()"


class ToTensor:
    """uint8 (H, W) or (H, W, C) arrays with values 0..255 → float32 (C, H, W) tensors in [0, 1].
    Float arrays are only moved to (C, H, W)."""

    def __call__(self, pic) -> Tensor:
        a = _arr(pic)
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3:
            raise ValueError(f"ToTensor: expected an image of shape (H, W) or (H, W, C), got {list(a.shape)}")
        chw = np.ascontiguousarray(a.transpose(2, 0, 1))
        if chw.dtype == np.uint8:
            out = chw.astype(np.float32)
            out *= 1.0 / 255.0
        else:
            out = chw.astype(np.float32, copy=False)
        return Tensor._make(out, False, None, 0)

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel of a (C, H, W) or (N, C, H, W) tensor."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = tuple(float(m) for m in np.atleast_1d(mean))
        self.std = tuple(float(s) for s in np.atleast_1d(std))
        if any(s == 0 for s in self.std):
            raise ValueError(f"Normalize: std evaluated to zero after conversion ({self.std}), leading to "
                             "division by zero")
        self.inplace = inplace

    def __call__(self, tensor):
        a = _arr(tensor)
        if a.ndim < 3 or a.dtype.kind != "f":
            raise ValueError(f"Normalize: expected a float tensor of shape (C, H, W) or (N, C, H, W), got "
                             f"shape {list(a.shape)} dtype {a.dtype}")
        c = a.shape[-3]
        if len(self.mean) not in (1, c) or len(self.std) not in (1, c):
            raise ValueError(f"Normalize: {len(self.mean)} means / {len(self.std)} stds for {c} channels")
        mean = np.asarray(self.mean, a.dtype).reshape(-1, 1, 1)
        std = np.asarray(self.std, a.dtype).reshape(-1, 1, 1)
        if self.inplace:
            a -= mean
            a /= std
            return tensor
        return _like(tensor, (a - mean) / std)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


class RandomCrop:
    """Crop a random ``size`` window of a (C, H, W) image, after optional ``padding``
    (int, (lr, tb) or (l, t, r, b)); ``padding_mode`` is 'constant' (with ``fill``),
    'edge', 'reflect' or 'symmetric'."""

    def __init__(self, size: int | Sequence[int], padding: int | Sequence[int] | None = None,
                 pad_if_needed: bool = False, fill: float = 0, padding_mode: str = "constant",
                 generator: Generator | None = None) -> None:
        self.size = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding_mode must be constant, edge, reflect or symmetric, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        self.generator = generator

    def _pad(self, a: np.ndarray, left: int, top: int, right: int, bottom: int) -> np.ndarray:
        widths = [(0, 0)] * (a.ndim - 2) + [(top, bottom), (left, right)]
        if self.padding_mode == "constant":
            return np.pad(a, widths, mode="constant", constant_values=self.fill)
        return np.pad(a, widths, mode=self.padding_mode)

    def __call__(self, img):
        a = _arr(img)
        if self.padding is not None:
            p = self.padding
            if isinstance(p, (int, np.integer)):
                pads = (p, p, p, p)
            elif len(p) == 2:
                pads = (p[0], p[1], p[0], p[1])
            else:
                pads = tuple(p)
            a = self._pad(a, *pads)
        th, tw = self.size
        h, w = a.shape[-2:]
        if self.pad_if_needed and (h < th or w < tw):
            a = self._pad(a, max(tw - w, 0), max(th - h, 0), max(tw - w, 0), max(th - h, 0))
            h, w = a.shape[-2:]
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: required crop size {(th, tw)} is larger than the input image size "
                             f"{(h, w)}")
        rng = rng_of(self.generator)
        i = int(rng.integers(0, h - th + 1))
        j = int(rng.integers(0, w - tw + 1))
        return _like(img, np.ascontiguousarray(a[..., i:i + th, j:j + tw]))

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror the image left-right with probability ``p``."""

    def __init__(self, p: float = 0.5, generator: Generator | None = None) -> None:
        self.p = p
        self.generator = generator

    def __call__(self, img):
        if rng_of(self.generator).random() < self.p:
            return _like(img, np.ascontiguousarray(_arr(img)[..., ::-1]))
        return img

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"
