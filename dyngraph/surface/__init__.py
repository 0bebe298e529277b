"""The PyTorch-facing surface: public functions per family and the one Tensor-method table.

``dyngraph/ops/`` holds the primitives (forward, rules, save spec, flags, batching rules);
this layer holds what users call -- ``dg.tanh``, ``dg.sum``, ``dg.nn.functional.conv2d``'s
array checks -- written over those primitives with :func:`bind`, and
:mod:`dyngraph.surface.methods`, the single table that attaches every operation method to
:class:`Tensor` (``x.exp()``, ``a + b``).  It sits above ``ops/`` and below autograd, nn and
the tools (``pyproject.toml``'s import-linter contracts): ``ops/`` never imports it.

Importing this package imports every family and installs the method table (methods.py).
"""

# every family and the method table (which imports the families it lists itself)
from . import (  # noqa: F401
    conv,
    elementwise,
    indexing,
    inplace,
    linalg,
    methods,
    nn,
    pooling,
    reduction,
    resampling,
    shape,
    sorting,
)
