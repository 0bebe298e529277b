"""``torch.optim.swa_utils``: weight averaging (SWA and EMA) and the SWA learning-rate schedule.

>>> swa_model = dg.optim.swa_utils.AveragedModel(model)
>>> scheduler = dg.optim.swa_utils.SWALR(optimizer, swa_lr=0.05)
>>> for epoch in range(epochs):
...     train_one_epoch(model, optimizer)
...     if epoch >= swa_start:
...         swa_model.update_parameters(model); scheduler.step()
>>> dg.optim.swa_utils.update_bn(loader, swa_model)     # BatchNorm statistics of the averaged weights

``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))`` keeps an exponential
moving average instead of the running mean.
"""

from __future__ import annotations

import itertools
import math
from copy import deepcopy

from ..autograd.grad_mode import no_grad
from ..creation import tensor
from ..dtypes import int64
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def get_ema_multi_avg_fn(decay: float = 0.999):
    """Update every averaged tensor in place: ``ema = decay * ema + (1 - decay) * current``."""
    @no_grad()
    def ema_update(ema_param_list, current_param_list, _num_averaged):
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            p_ema.lerp_(p_model, 1 - decay)

    return ema_update


def get_swa_multi_avg_fn():
    """Update every averaged tensor in place to the running mean of the models seen."""
    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = float(num_averaged.item() if hasattr(num_averaged, "item") else num_averaged)
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            p_avg.add_((p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """Per-tensor form of :func:`get_ema_multi_avg_fn`, returning the new average."""
    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """Per-tensor form of :func:`get_swa_multi_avg_fn`, returning the new average."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and, with ``use_buffers``, buffers) hold an average
    of the weights passed to :meth:`update_parameters`; ``forward`` runs the copy.

    ``avg_fn(avg, current, n)`` returns a new average per tensor; ``multi_avg_fn(avgs, currents,
    n)`` updates lists in place; without either, the running mean (SWA).  ``n_averaged`` is an
    int64 buffer, so it travels in ``state_dict()``.
    """

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average (the first call copies them)."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.module.parameters()), list(model.parameters())
        if len(mine) != len(theirs):
            raise RuntimeError(f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to "
                               f"average, the averaged copy {len(mine)}")
        theirs = [p.detach().to(a.device) for a, p in zip(mine, theirs)]
        mine = [a.detach() for a in mine]
        n = int(self.n_averaged.item())
        if n == 0:
            for a, p in zip(mine, theirs):
                a.copy_(p)
        elif self.avg_fn is not None:
            for a, p in zip(mine, theirs):
                a.copy_(self.avg_fn(a, p, self.n_averaged.to(a.device)))
        else:
            (self.multi_avg_fn or get_swa_multi_avg_fn())(mine, theirs, self.n_averaged)
        if not self.use_buffers:
            # buffers (BatchNorm statistics) follow the source model unless they are averaged too
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged.add_(1)


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute BatchNorm running statistics with one pass over ``loader`` (cumulative averages).

    Batches that are lists/tuples contribute their first element as the input.
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate from its current value to ``swa_lr`` over ``anneal_epochs``
    steps (``"cos"`` or ``"linear"``), then hold it there.
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1):
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(optimizer.param_groups)
        if len(swa_lrs) != len(optimizer.param_groups):
            raise ValueError(f"SWALR: expected {len(optimizer.param_groups)} values for swa_lr, got {len(swa_lrs)}")
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        # The rate before this step is recovered from the group's current rate, so annealing
        # continues from wherever an earlier schedule left it.
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]
