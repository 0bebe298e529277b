"""``nn.CTCLoss``: the module form of :func:`dyngraph.nn.functional.ctc_loss`."""

from __future__ import annotations

from .functional_ctc import ctc_loss
from .loss import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """Connectionist temporal classification loss (PyTorch's ``nn.CTCLoss``).

    >>> ctc = dg.nn.CTCLoss(blank=0, zero_infinity=True)
    >>> loss = ctc(log_probs, targets, input_lengths, target_lengths)
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)
