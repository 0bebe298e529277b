"""The ground floor of dyngraph: dispatch state and the interpreter protocol.

Nothing here imports the rest of the package at module level except the
floors below it (``dtypes``, ``backend``); ``tensor.py`` and everything above
build on it.  Import the submodules directly (``from dyngraph._core.state
import STATE, concrete``): this package file stays empty so that importing one
floor never drags in the ones above it.
"""
