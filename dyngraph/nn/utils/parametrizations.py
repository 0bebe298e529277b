"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as
parametrizations (see :mod:`dyngraph.nn.utils.parametrize`), with PyTorch's state-dict
keys (``parametrizations.weight.original0``/``original1`` for weight norm; the power
iteration vectors ``parametrizations.weight.0._u``/``_v`` for spectral norm).

>>> layer = weight_norm(dg.nn.Linear(4, 3))
>>> sorted(layer.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from .. import functional as F
from ..module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


def _norm_except_dim(v, dim: int):
    """2-norm of ``v`` over every dim but ``dim`` (kept as size-1 dims); ``dim == -1``: the
    norm of the whole tensor (PyTorch's ``_weight_norm`` convention)."""
    if dim == -1:
        return v.norm()
    d = dim % v.dim()
    others = tuple(i for i in range(v.dim()) if i != d)
    if not others:
        return v.abs()
    return v.pow(2).sum(others, keepdim=True).sqrt()


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        weight_g = _norm_except_dim(weight, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparameterise ``module.<name>`` as ``g * v / ||v||`` (norm over every dim but ``dim``;
    ``dim=None``: the whole tensor); ``g`` and ``v`` are ``original0`` and ``original1``.

    >>> conv = weight_norm(dg.nn.Conv2d(3, 8, 3))
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations: int) -> None:
        # the vectors are buffers updated in place, outside the graph (PyTorch's no_grad method)
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.detach().mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.detach().mT.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = (u * weight_mat.mv(v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration
    (``n_power_iterations`` steps per forward call in training mode).  ``dim`` defaults to 1
    for transposed convolutions and 0 otherwise.

    >>> disc = dg.nn.Sequential(spectral_norm(dg.nn.Linear(8, 8)), dg.nn.LeakyReLU(0.2))
    """
    from ..conv import ConvTranspose1d, ConvTranspose2d  # noqa: PLC0415  (nn loads utils first)

    weight = getattr(module, name, None)
    if weight is None or not hasattr(weight, "dim"):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
