"""``dg.special``: PyTorch's ``torch.special`` names for the special functions
dyngraph has (each the same function as its top-level or ``nn.functional`` form,
so values and gradients are those of the primitive).

>>> dg.special.expit(dg.tensor([0.0]))
tensor([0.5000])
"""

from __future__ import annotations

import math

from .surface.elementwise import (
    digamma,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    log1p,
    logit,
    polygamma,
    round,
    sinc,
    xlogy,
)
from .surface.elementwise import digamma as psi
from .surface.elementwise import lgamma as gammaln
from .surface.elementwise import sigmoid as expit
from .surface.nn import log_softmax, softmax
from .surface.reduction import logsumexp

__all__ = ["erf", "erfc", "exp2", "expm1", "log1p", "logit", "round", "expit", "sinc", "xlogy",
           "log_softmax", "softmax", "logsumexp", "ndtr", "erfinv", "digamma", "psi", "gammaln",
           "polygamma"]


def ndtr(input):
    """The standard normal CDF, ``(1 + erf(x / sqrt(2))) / 2``."""
    return 0.5 * erfc(input * (-1.0 / math.sqrt(2.0)))
