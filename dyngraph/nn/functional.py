"""``dg.nn.functional``: the functional forms of the layers (``torch.nn.functional``).

>>> import dyngraph.nn.functional as F
>>> F.relu(dg.tensor([-1.0, 2.0]))
tensor([0., 2.])
"""

from __future__ import annotations

# Functions built by other owners (convolution, pooling, attention) may not exist yet.
try:
    from .functional_conv import *  # noqa: F401,F403
except ImportError:
    pass
try:
    from .functional_attention import *  # noqa: F401,F403
except ImportError:
    pass
