"""All layer classes owned by the core of ``dg.nn`` (re-exported by ``dg.nn``)."""

from __future__ import annotations

from .activation import *  # noqa: F403
from .activation import __all__ as _act
from .containers import *  # noqa: F403
from .containers import __all__ as _cont
from .dropout import *  # noqa: F403
from .dropout import __all__ as _drop
from .flatten import *  # noqa: F403
from .flatten import __all__ as _flat
from .linear import *  # noqa: F403
from .linear import __all__ as _lin
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .normalization import *  # noqa: F403
from .normalization import __all__ as _norm
from .padding import *  # noqa: F403
from .padding import __all__ as _pad
from .sparse import *  # noqa: F403
from .sparse import __all__ as _sparse

__all__ = [*_act, *_cont, *_drop, *_flat, *_lin, *_loss, *_norm, *_pad, *_sparse]
