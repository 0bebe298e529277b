"""``torch._dynamo.config``: settings scripts assign; recorded, with PyTorch's defaults.

>>> dg._dynamo.config.suppress_errors
False
"""

from __future__ import annotations

suppress_errors = False
cache_size_limit = 8
accumulated_cache_size_limit = 256
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
assume_static_by_default = True
