"""``parameters_to_vector`` and ``vector_to_parameters``."""

from __future__ import annotations

from collections.abc import Iterable

from ...autograd.grad_mode import no_grad
from ...surface.shape import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor (differentiable).

    >>> vec = dg.nn.utils.parameters_to_vector(model.parameters())
    """
    if isinstance(parameters, Tensor):
        raise TypeError("expected an iterable of Tensors, got a single Tensor: wrap it in a list")
    params = list(parameters)
    if not params:
        raise RuntimeError("parameters_to_vector: got no parameters")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into each parameter (in place)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec._data.ndim != 1 or vec._data.size != total:
        raise RuntimeError(f"vector_to_parameters: vec has shape {list(vec.shape)} but the "
                           f"parameters hold {total} elements")
    offset = 0
    with no_grad():
        for p in params:
            n = p.numel()
            # like PyTorch, the parameter's data becomes a view of ``vec``
            p._data = vec._data[offset:offset + n].reshape(p._data.shape).astype(
                p._data.dtype, copy=False)
            offset += n
