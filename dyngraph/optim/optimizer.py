"""The ``Optimizer`` base class: parameter groups, state, state dicts, hooks.

Subclasses implement ``_step_group(group, params)``, which updates the raw
arrays of the parameters that have a gradient (``p._data`` in place, reading
``p._grad._data``).  No graph is recorded: updates never go through the
dispatcher.  Each updated parameter has its version counter bumped, so a
graph that saved the old value raises a clear error in backward instead of
silently using the new one.

State-dict format is PyTorch's::

    {"state": {0: {"step": 3, "exp_avg": Tensor, ...}, ...},
     "param_groups": [{"lr": 0.1, ..., "params": [0, 1, ...]}, ...]}

Parameters are numbered in the order they appear across the groups.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .._core.graph import RemovableHandle
from .._core.state import STATE, set_grad
from ..autograd.grad_mode import enable_grad
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..ops.inplace import bump_version
from ..tensor import Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marker for an option that has no default (PyTorch's ``optim.optimizer.required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _buffer(like: np.ndarray, fill: float = 0.0) -> Tensor:
    """A new state tensor shaped like a parameter's array (not part of any graph)."""
    arr = np.zeros_like(like) if fill == 0 else np.full_like(like, fill)
    return Tensor._make(arr, False, None, 0)


class Optimizer:
    """Base class of all optimizers.

    >>> opt = dg.optim.SGD(model.parameters(), lr=0.1)
    >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

    ``params`` is an iterable of tensors, or of dicts with a ``"params"`` entry
    and per-group options that override ``defaults``.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], defaults: dict[str, Any]) -> None:
        name = type(self).__name__
        if defaults.get("differentiable"):
            raise NotImplementedError(
                f"{name}: differentiable=True (autograd through the optimizer update) is not supported: "
                "dyngraph optimizers update the raw arrays in place; write the update with tensor ops "
                "under autograd if you need its gradient")
        if defaults.get("fused"):
            raise NotImplementedError(f"{name}: fused=True is not supported (there is no fused CPU kernel); "
                                      "use foreach=True for fewer, larger array operations")
        self.defaults = dict(defaults)
        # defaultdict like PyTorch: hand-written optimizers do `state = self.state[p]`
        self.state: dict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._step_pre_hooks: dict[int, Callable] = {}
        self._step_post_hooks: dict[int, Callable] = {}
        self._hook_id = 0
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params argument given to the optimizer should be an iterable "
                "of Tensors or dicts, but got a Tensor; pass [tensor] or model.parameters()")
        groups = list(params)
        if len(groups) == 0:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # -- groups -----------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (e.g. a lower ``lr`` for a backbone).

        >>> opt.add_param_group({"params": head.parameters(), "lr": 1e-2})
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but "
                            "the ordering of tensors in sets will change between runs; use a list")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if p._fn is not None:
                raise ValueError("can't optimize a non-leaf Tensor (it has a grad_fn); optimize the "
                                 "leaf it was computed from, or .detach().requires_grad_() it")
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error", UserWarning, stacklevel=3)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {name}")
            group.setdefault(name, default)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # -- gradients --------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to ``None`` by default, like PyTorch)."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    set_grad(p, None)
                else:
                    if g._fn is not None:
                        g = Tensor._make(g._data, False, None, 0)
                        set_grad(p, g)
                    g._data.fill(0)
                    bump_version(g)

    # -- stepping ---------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one optimization step; ``closure`` re-evaluates the model and returns the loss.

        An active interpreter sees a step without closure through its
        ``on_optimizer_step`` hook (graph capture replays it after the program).
        """
        if closure is None and STATE.interpreter is not None:
            return STATE.interpreter.on_optimizer_step(self, self._step_now)
        return self._step_now(closure)

    def _step_now(self, closure: Callable[[], Any] | None = None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for hook in list(self._step_pre_hooks.values()):
            hook(self, (), {})
        for group in self.param_groups:
            params = [p for p in group["params"] if p._grad is not None]
            if params:
                self._step_group(group, params)
                for p in params:
                    bump_version(p)
        for hook in list(self._step_post_hooks.values()):
            hook(self, (), {})
        return loss

    def _step_group(self, group: dict[str, Any], params: list[Tensor]) -> None:  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} does not implement _step_group")

    def register_step_pre_hook(self, hook: Callable):
        """Call ``hook(optimizer, args, kwargs)`` before each ``step()``; returns a removable handle."""
        return self._add_hook(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable):
        """Call ``hook(optimizer, args, kwargs)`` after each ``step()``; returns a removable handle."""
        return self._add_hook(self._step_post_hooks, hook)

    def _add_hook(self, table: dict, hook: Callable):
        self._hook_id += 1
        key = self._hook_id
        table[key] = hook
        return RemovableHandle(table, key=key)

    # -- state dicts ------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state and options, with parameters replaced by their indices.

        The returned state holds references to the live buffers (as PyTorch does);
        ``dg.save`` it, or deep-copy it to keep a snapshot.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and state saved by ``state_dict()`` (buffers are copied and cast to
        each parameter's dtype).

        >>> opt2 = dg.optim.Adam(model.parameters()); opt2.load_state_dict(opt.state_dict())
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups but the "
                             f"optimizer has {len(self.param_groups)}")
        for i, (mine, theirs) in enumerate(zip(self.param_groups, saved_groups, strict=False)):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group ({i}) of {len(theirs['params'])} "
                    f"parameters that doesn't match the size of the optimizer's group "
                    f"({len(mine['params'])} parameters)")
        saved_state = state_dict["state"]
        new_state: dict[Tensor, dict[str, Any]] = defaultdict(dict)
        new_groups = []
        for mine, theirs in zip(self.param_groups, saved_groups, strict=False):
            for p, idx in zip(mine["params"], theirs["params"], strict=False):
                entry = saved_state.get(idx, saved_state.get(str(idx)))
                if entry is not None:
                    new_state[p] = {k: self._cast_state(p, k, v) for k, v in entry.items()}
            group = {k: _plain(v) for k, v in theirs.items() if k != "params"}
            group["params"] = mine["params"]
            new_groups.append(group)
        self.state = new_state
        self.param_groups = new_groups
        self._after_load()

    def _after_load(self) -> None:
        """Hook for subclasses to re-impose fixed options (AdamW keeps decoupled decay)."""

    @staticmethod
    def _cast_state(p: Tensor, key: str, value):
        if key == "step" or key == "mu_product":
            return _plain(value)
        if isinstance(value, Tensor):
            arr = np.array(value._data, dtype=p._data.dtype if _is_float_dtype(value._data.dtype) else None)
            return Tensor._make(arr, False, None, 0)
        if isinstance(value, np.ndarray):
            return Tensor._make(np.array(value, dtype=p._data.dtype), False, None, 0)
        return value

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


def _plain(value):
    """Turn 0-d tensors/arrays (e.g. a ``step`` loaded from a file) into Python numbers,
    and lists (tuples after a JSON round trip) back into tuples for options like ``betas``."""
    if isinstance(value, Tensor):
        value = value._data
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
        return tuple(value)
    return value


def check_options(name: str, lr=None, eps=None, weight_decay=None, momentum=None, betas=None) -> None:
    """Validate common options with PyTorch's messages (naming the optimizer)."""
    if lr is not None and not (isinstance(lr, (int, float)) and lr >= 0.0):
        raise ValueError(f"{name}: Invalid learning rate: {lr}")
    if eps is not None and not eps >= 0.0:
        raise ValueError(f"{name}: Invalid epsilon value: {eps}")
    if weight_decay is not None and not weight_decay >= 0.0:
        raise ValueError(f"{name}: Invalid weight_decay value: {weight_decay}")
    if momentum is not None and not momentum >= 0.0:
        raise ValueError(f"{name}: Invalid momentum value: {momentum}")
    if betas is not None:
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{name}: Invalid beta parameter at index {i}: {b}")


def grad_of(p: Tensor, group: dict[str, Any]) -> np.ndarray:
    """The gradient array to use for ``p``: negated for ``maximize``, plus L2 weight decay.

    Returns the parameter's own gradient array when no change is needed (never
    modify it in place), else a new array.
    """
    g = p._grad._data
    if group.get("maximize", False):
        g = np.negative(g)
    wd = group.get("weight_decay", 0)
    if wd != 0 and not group.get("decoupled_weight_decay", False):
        g = g + wd * p._data
    return g


def lerp_(buf: np.ndarray, target: np.ndarray, weight: float) -> None:
    """``buf += weight * (target - buf)`` in place (PyTorch's ``lerp_``)."""
    tmp = np.subtract(target, buf)
    tmp *= weight
    buf += tmp


def adam_moments_(m: np.ndarray, v: np.ndarray, g: np.ndarray, beta1: float, beta2: float) -> np.ndarray:
    """Adam-family moment updates in place: ``m = lerp(m, g, 1 - beta1)``,
    ``v = beta2 * v + (1 - beta2) * g * g``.  Returns the ``(1 - beta2) * g * g``
    temporary so the caller can reuse it as scratch space."""
    lerp_(m, g, 1 - beta1)
    v *= beta2
    sq = np.asarray(np.multiply(g, g))   # asarray: for a 0-d parameter NumPy returns a scalar
    sq *= 1 - beta2
    v += sq
    return sq


def addcmul_(buf: np.ndarray, a: np.ndarray, b: np.ndarray, value: float) -> None:
    """``buf += value * a * b`` in place."""
    tmp = np.multiply(a, b)
    if value != 1:
        tmp *= value
    buf += tmp
