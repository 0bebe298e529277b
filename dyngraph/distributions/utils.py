"""``torch.distributions.utils``: the helpers custom distributions import."""

from __future__ import annotations

from functools import update_wrapper

from .distribution import broadcast_all
from .families import _clamp_probs as clamp_probs

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits"]


def logits_to_probs(logits, is_binary: bool = False):
    """``sigmoid(logits)`` if ``is_binary`` else ``softmax(logits, -1)``."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def probs_to_logits(probs, is_binary: bool = False):
    """Log-odds (``is_binary``) or log-probabilities of clamped ``probs``."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:  # noqa: N801  (PyTorch's name)
    """A property computed on first access and then stored on the instance."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
