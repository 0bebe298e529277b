"""``F.affine_grid`` and ``F.grid_sample`` (2-D): the sampling pair of spatial transformer
networks, written with dyngraph operations so gradients reach both the input and the grid
(PyTorch's bilinear formulas: the weights are differentiable in the coordinates, the
corner indices are not).

>>> theta = dg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])       # identity
>>> grid = F.affine_grid(theta, (1, 1, 4, 4), align_corners=False)
>>> x = dg.arange(16.0).view(1, 1, 4, 4)
>>> dg.allclose(F.grid_sample(x, grid, align_corners=False), x)
True
"""

from __future__ import annotations

from .. import creation as _c
from ..surface import shape as _sh
from ..tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]


def _linspace(n: int, align_corners: bool, like: Tensor) -> Tensor:
    if n <= 1:
        return _c.zeros(max(n, 0), dtype=like.dtype)
    pts = _c.linspace(-1.0, 1.0, n, dtype=like.dtype)
    # align_corners=False: pixel centres, so the extreme values are -1 + 1/n and 1 - 1/n
    return pts if align_corners else pts * ((n - 1) / n)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``(N, H, W, 2)`` of the affine maps ``theta`` (``(N, 2, 3)``) for an
    output of ``size = (N, C, H, W)``; each entry is ``theta @ [x, y, 1]`` in ``[-1, 1]`` coordinates.

    >>> F.affine_grid(dg.eye(2, 3).unsqueeze(0), (1, 3, 8, 8), align_corners=False).shape
    dyngraph.Size([1, 8, 8, 2])
    """
    if align_corners is None:
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(int(s) for s in size)
    if len(size) != 4:
        raise NotImplementedError(
            f"affine_grid: dyngraph supports 4-D sizes (N, C, H, W); got {len(size)}-D size {list(size)}")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {list(size)}. "
                         f"Got {list(theta.shape)}.")
    N, _, H, W = size
    if theta.shape[0] != N:
        raise ValueError(f"affine_grid: theta has batch size {theta.shape[0]} but size asks for {N}")
    xs = _linspace(W, align_corners, theta)
    ys = _linspace(H, align_corners, theta)
    gy, gx = _sh.meshgrid(ys, xs, indexing="ij")
    base = _sh.stack([gx, gy, _c.ones_like(gx)], -1).reshape(1, H * W, 3)
    grid = base @ theta.transpose(1, 2)          # (N, H*W, 2)
    return grid.reshape(N, H, W, 2)


def _unnormalize(coord: Tensor, n: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (n - 1)
    return ((coord + 1) * n - 1) / 2


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` (``(N, C, H, W)``) at the ``[-1, 1]`` locations of ``grid``
    (``(N, Ho, Wo, 2)``, ``x`` then ``y``): output ``(N, C, Ho, Wo)``.  ``mode``:
    ``'bilinear'`` or ``'nearest'``; ``padding_mode``: ``'zeros'`` or ``'border'``.

    >>> out = F.grid_sample(img, F.affine_grid(theta, img.size()), align_corners=False)
    """
    if align_corners is None:
        align_corners = False
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"grid_sample: mode={mode!r} is not supported by dyngraph "
                                  "(use 'bilinear' or 'nearest')")
    if padding_mode not in ("zeros", "border"):
        raise NotImplementedError(f"grid_sample: padding_mode={padding_mode!r} is not supported by dyngraph "
                                  "(use 'zeros' or 'border')")
    if input.dim() != 4:
        raise NotImplementedError(f"grid_sample: dyngraph supports 4-D input (N, C, H, W); got shape "
                                  f"{list(input.shape)}")
    if grid.dim() != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sample(): expected grid of shape (N, H_out, W_out, 2) with N = "
                           f"{input.shape[0]}, but got grid with sizes {list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sample(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    N, C, H, W = input.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    ix = _unnormalize(grid[..., 0], W, align_corners)
    iy = _unnormalize(grid[..., 1], H, align_corners)
    if padding_mode == "border":
        ix = ix.clamp(0, W - 1)
        iy = iy.clamp(0, H - 1)
    flat = input.reshape(N, C, H * W)

    def corner(x_idx: Tensor, y_idx: Tensor) -> Tensor:
        """``input[n, :, y, x]`` for integer-valued coordinate tensors, zero outside."""
        inside = (x_idx >= 0) & (x_idx <= W - 1) & (y_idx >= 0) & (y_idx <= H - 1)
        lin = (y_idx.clamp(0, H - 1) * W + x_idx.clamp(0, W - 1)).long().reshape(N, 1, Ho * Wo)
        vals = flat.gather(2, lin.expand(N, C, Ho * Wo)).reshape(N, C, Ho, Wo)
        return vals * inside.unsqueeze(1).to(input.dtype)

    if mode == "nearest":
        out = corner(ix.detach().round(), iy.detach().round())
        # PyTorch gives the grid a zero gradient in this mode (not none at all)
        return out + grid.sum() * 0 if grid.requires_grad else out
    x0, y0 = ix.detach().floor(), iy.detach().floor()
    x1, y1 = x0 + 1, y0 + 1
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    out = corner(x0, y0) * (wx0 * wy0).unsqueeze(1)
    out = out + corner(x1, y0) * (wx1 * wy0).unsqueeze(1)
    out = out + corner(x0, y1) * (wx0 * wy1).unsqueeze(1)
    out = out + corner(x1, y1) * (wx1 * wy1).unsqueeze(1)
    return out
