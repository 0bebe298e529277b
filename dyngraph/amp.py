"""``dg.amp`` / ``dg.autocast`` / ``dg.cuda.amp``: mixed-precision entry points, so
training scripts written for automatic mixed precision port unchanged.

dyngraph computes at the precision of its tensors (NumPy has no bfloat16), so
``autocast`` regions run at full precision: disabled regions
(``enabled=False``, the usual CPU setting) behave exactly as in PyTorch; an enabled
region warns once that no down-casting happens.  ``GradScaler`` implements dynamic
loss scaling (``device="cpu"``); ``device="cuda"`` on a machine without CUDA warns and
disables itself, as in PyTorch.

>>> scaler = dg.amp.GradScaler(enabled=False)
>>> with dg.autocast(device_type="cpu", enabled=False):
...     loss = model(x).sum()
>>> scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from . import dtypes as _dt
from ._core.grad_mode import no_grad
from .backend import cuda_available

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "custom_fwd", "custom_bwd"]

_warned = False
_active: list = []          # the autocast regions entered and not yet left (innermost last)
_DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16"}


class autocast:  # noqa: N801  (PyTorch's name)
    """Context manager / decorator marking a mixed-precision region (see module doc)."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        self.device_type = device_type
        self.fast_dtype = dtype
        self.enabled = bool(enabled)

    def __enter__(self):
        global _warned
        if self.enabled and not _warned:
            _warned = True
            warnings.warn("dg.autocast: dyngraph does not down-cast inside autocast regions; the "
                          "region runs at the tensors' own precision", stacklevel=2)
        _active.append(self)
        return self

    def __exit__(self, *exc) -> bool:
        if self in _active:
            _active.remove(self)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_available(device_type: str) -> bool:
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether the innermost ``autocast`` region for ``device_type`` (default ``"cuda"``, as
    PyTorch's argument-less form) is enabled.

    >>> with dg.autocast("cpu"):
    ...     dg.is_autocast_enabled("cpu")
    True
    """
    device_type = device_type or "cuda"
    for region in reversed(_active):
        if region.device_type == device_type:
            return region.enabled
    return False


def get_autocast_dtype(device_type: str):
    """The dtype of the innermost ``autocast`` region for ``device_type`` (PyTorch's defaults
    otherwise: bfloat16 on the CPU, float16 on CUDA)."""
    for region in reversed(_active):
        if region.device_type == device_type and region.fast_dtype is not None:
            return _dt.as_dtype(region.fast_dtype)
    return getattr(_dt, _DEFAULT_DTYPES.get(device_type, "float16"))


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for a custom ``autograd.Function.forward`` under autocast.  dyngraph's
    autocast regions run at the tensors' own precision, so the forward runs as written
    (``cast_inputs`` would cast to a lower precision PyTorch's region would also use).

    >>> class Fn(dg.autograd.Function):
    ...     @staticmethod
    ...     @dg.amp.custom_fwd(device_type="cpu")
    ...     def forward(ctx, x): return x * 2
    """
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for the matching ``backward`` (see :func:`custom_fwd`)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


class GradScaler:
    """Dynamic loss scaling, as ``torch.amp.GradScaler``: ``scale(loss)`` multiplies by
    the current scale, ``step(optimizer)`` unscales the gradients and skips the step when
    any is inf/NaN, ``update()`` backs the scale off after a skipped step and grows it
    after ``growth_interval`` good ones.  With a power-of-two scale the unscaled
    gradients equal the unscaled ones exactly.  ``device="cuda"`` without a GPU warns
    and disables the scaler (a pass-through), as PyTorch does."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        if enabled and device == "cuda" and not cuda_available():
            warnings.warn("GradScaler is enabled, but CUDA is not available. Disabling.", stacklevel=2)
            enabled = False
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` (a tensor or nested list/tuple of them) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})

    def unscale_(self, optimizer) -> None:
        """Divide this optimizer's gradients by the scale in place (once per step)."""
        if not self._enabled:
            return

        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        inv = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(inv)
                        found = found or not bool(np.isfinite(p.grad._data).all())
        state["unscaled"], state["found_inf"] = True, found

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and run ``optimizer.step()`` unless a gradient is inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if not state["unscaled"]:
            self.unscale_(optimizer)
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Adjust the scale after a step (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        elif any(s["found_inf"] for s in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        self._scale = float(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._growth_tracker = state_dict["_growth_tracker"]
