"""``DataParallel``: PyTorch's single-process multi-GPU wrapper, as a pass-through on one device.

dyngraph runs a model on one device, so ``DataParallel(model)`` calls ``model``
directly (what PyTorch does when it has no GPUs to scatter to).  It keeps PyTorch's
``module.`` prefix in ``state_dict()`` keys, so checkpoints of wrapped models keep
their layout.

>>> model = dg.nn.DataParallel(Net())
>>> out = model(x)                      # Net()(x)
>>> next(iter(model.state_dict()))      # 'module.fc.weight'
"""

from __future__ import annotations

from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    """Wrap ``module``; ``forward`` runs it unchanged (one device, no scatter/gather).

    ``device_ids`` and ``output_device`` are recorded; ``dim`` is the batch dimension
    PyTorch would split along.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device if output_device is not None else (
            self.device_ids[0] if self.device_ids else None)
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """Functional form: ``module(*inputs, **module_kwargs)`` on the one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))
