"""``nn.utils.weight_norm`` / ``remove_weight_norm``: reparameterise a weight as
``w = g * v / ||v||`` (norm over every dimension except ``dim``), with ``g``
(``<name>_g``) and ``v`` (``<name>_v``) the trained parameters, as in PyTorch.

>>> layer = dg.nn.utils.weight_norm(dg.nn.Linear(3, 4))
>>> sorted(n for n, _ in layer.named_parameters())
['bias', 'weight_g', 'weight_v']
"""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...surface.reduction import vector_norm
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def _norm_except_dim(v, dim):
    """2-norm of ``v`` over all dimensions but ``dim`` (kept as size-1 dims elsewhere)."""
    if dim is None:
        return vector_norm(v)
    d = dim % v.ndim
    others = tuple(i for i in range(v.ndim) if i != d)
    return vector_norm(v, 2, dim=others, keepdim=True) if others else v.abs()


class _WeightNorm:
    def __init__(self, name: str, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """Apply weight normalisation to ``module.<name>`` (``dim=None``: one norm for the
    whole tensor); the weight is recomputed before every forward call."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    if dim == -1:
        dim = None  # PyTorch's convention: -1 means "the whole tensor"
    weight = getattr(module, name)
    fn = _WeightNorm(name, dim)
    with no_grad():
        g = _norm_except_dim(weight, dim).detach().clone()
        v = weight.detach().clone()
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(g))
    module.register_parameter(name + "_v", Parameter(v))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo :func:`weight_norm`: fold ``g`` and ``v`` back into one parameter."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module).detach().clone()
            delattr(module, name)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.register_parameter(name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
