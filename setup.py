"""Build the optional C accelerator; everything else is configured in pyproject.toml.

If the compiler or the Python headers are missing, the build of the extension
is skipped (``optional=True``) and dyngraph runs its pure-Python dispatch.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dyngraph._speedups", ["dyngraph/_speedups.c"], optional=True,
                             extra_compile_args=["-O2"])])
