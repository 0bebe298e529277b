"""The older ``torch.nn.utils.spectral_norm`` / ``remove_spectral_norm`` (a forward pre-hook,
as GAN code written before ``parametrizations.spectral_norm`` uses): the weight is stored as
``<name>_orig`` (trained) with power-iteration buffers ``<name>_u`` and ``<name>_v``, and
``<name> = <name>_orig / sigma`` is recomputed before every forward call (one more power
iteration step per call in training mode).

>>> layer = dg.nn.utils.spectral_norm(dg.nn.Linear(4, 3))
>>> sorted(layer.state_dict())
['bias', 'weight_orig', 'weight_u', 'weight_v']
"""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]


def _normalize(x, eps):
    from .. import functional as F  # noqa: PLC0415  (nn.functional loads with nn)

    return F.normalize(x, dim=0, eps=eps)


class SpectralNorm:
    """The pre-hook: holds the options and recomputes the normalised weight."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        weight_mat = weight
        if self.dim != 0:
            weight_mat = weight_mat.permute(self.dim, *[d for d in range(weight_mat.dim()) if d != self.dim])
        return weight_mat.reshape(weight_mat.size(0), -1)

    def compute_weight(self, module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                w = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(w.t().mv(u), self.eps))
                    u.copy_(_normalize(w.mv(v), self.eps))
            u, v = u.clone(), v.clone()
        sigma = (u * weight_mat.mv(v)).sum()
        return weight / sigma

    def remove(self, module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim=None):
    """Spectrally normalise ``module.<name>`` with a forward pre-hook (``dim`` defaults to 1
    for transposed convolutions, else 0).

    >>> disc = dg.nn.Sequential(dg.nn.utils.spectral_norm(dg.nn.Conv2d(3, 8, 3)), dg.nn.LeakyReLU(0.2))
    """
    from ..conv import ConvTranspose1d, ConvTranspose2d  # noqa: PLC0415  (nn loads utils first)

    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    with no_grad():
        weight_mat = fn.reshape_weight_to_matrix(weight)
        h, w = weight_mat.size()
        u = _normalize(weight.new_empty(h).normal_(0, 1), fn.eps)
        v = _normalize(weight.new_empty(w).normal_(0, 1), fn.eps)
    delattr(module, fn.name)
    module.register_parameter(fn.name + "_orig", weight)
    setattr(module, fn.name, weight.detach())
    module.register_buffer(fn.name + "_u", u)
    module.register_buffer(fn.name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Undo :func:`spectral_norm`: ``module.<name>`` becomes a plain parameter again."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
