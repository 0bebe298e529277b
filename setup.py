"""Build the optional C accelerator; everything else is configured in pyproject.toml.

If the compiler or the Python headers are missing, the build of the extension
is skipped (``optional=True``) and dyngraph runs its pure-Python dispatch.
"""

from setuptools import Extension, setup

# _kernels: the recurrent layers' fused gate math (ops/rnn.py).  -O3 vectorises its row
# loops (-fno-trapping-math lets it turn the branch-free selects into blends; it changes no
# result); -ffp-contract=off keeps a * b + c as two roundings, as in the NumPy reference path.
setup(ext_modules=[Extension("dyngraph._speedups", ["dyngraph/_speedups.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   # _autobatch: dg.autobatch's recording hot paths (autobatch/interpreter.py
                   # stays the reference)
                   Extension("dyngraph._autobatch", ["dyngraph/_autobatch.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("dyngraph._kernels", ["dyngraph/_kernels.c"], optional=True,
                             extra_compile_args=["-O3", "-ffp-contract=off", "-fno-trapping-math",
                                                 "-fno-math-errno"])])
