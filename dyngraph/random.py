"""Random number generation: ``manual_seed``, ``Generator`` and the default generator.

dyngraph uses NumPy's PCG64 bit generator.  Streams are reproducible for a
given seed but are not PyTorch's numbers (PyTorch uses Philox/MT19937).

Float32 (and float16) samples are drawn in float32 directly (NumPy's
``Generator.standard_normal`` / ``random`` with ``dtype=float32``), not drawn in
float64 and rounded: a float32 ``randn`` then needs the result's memory, not ~3x
it.  The float32 streams therefore differ from the float64 ones for the same seed
(``dg.manual_seed(0); dg.randn(3)`` and ``dg.randn(3, dtype=dg.float64)`` are not
the same numbers rounded); each is reproducible for a given seed.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "default_generator",
           "get_rng_state", "set_rng_state", "fork_rng", "standard_normal", "uniform", "normal"]


class Generator:
    """A random-number generator with PyTorch's methods.

    >>> g = dg.Generator().manual_seed(0)
    >>> dg.rand(2, generator=g)
    """

    def __init__(self, device="cpu"):
        self._seed = int(np.random.SeedSequence().entropy % (2**63))
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        self.device = device

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        return self.manual_seed(int(np.random.SeedSequence().entropy % (2**63)))._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        from .creation import tensor  # noqa: PLC0415  (creation imports this module)

        state = json.dumps(self.rng.bit_generator.state).encode()
        return tensor(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state) -> Generator:
        raw = bytes(np.asarray(state).astype(np.uint8).tobytes())
        self.rng.bit_generator.state = json.loads(raw.decode())
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and NumPy's legacy global one, for user code)."""
    default_generator.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda"):
    """Run a block with the default generator's state saved and put back afterwards.

    Draws inside the block do not change the numbers drawn after it (PyTorch's
    ``torch.random.fork_rng``).  ``devices``/``device_type`` name accelerator generators:
    dyngraph's one generator serves every device, so they need no separate saving.
    ``enabled=False`` makes the block a no-op.

    >>> dg.manual_seed(0)
    >>> with dg.random.fork_rng():
    ...     _ = dg.rand(3)          # does not advance the stream outside
    >>> a = dg.rand(1)              # the same number as right after manual_seed(0)
    """
    if not enabled:
        yield
        return
    state = default_generator.rng.bit_generator.state
    seed_before = default_generator._seed
    try:
        yield
    finally:
        default_generator.rng.bit_generator.state = state
        default_generator._seed = seed_before


def rng_of(generator) -> np.random.Generator:
    return (generator or default_generator).rng


# -- sampling without a float64 intermediate ------------------------------------------

def _native(dtype: np.dtype):
    """The dtype NumPy can sample directly that represents ``dtype`` (None: not a float)."""
    if dtype.kind != "f":
        return None
    return np.dtype(np.float64) if dtype.itemsize > 4 else np.dtype(np.float32)


def _draw(method: str, shape, dtype, generator, out, scale=1.0, shift=0.0):
    """``scale * sample + shift``, drawn and transformed in float32 (float64 for float64
    and for non-float dtypes), then cast once to ``dtype``; written into ``out`` if given."""
    dt = np.dtype(dtype) if out is None else out.dtype
    native = _native(dt)
    rng = rng_of(generator)
    direct = out is not None and native == dt and out.flags.c_contiguous and out.flags.writeable
    if direct:  # no temporary at all
        a = out
        getattr(rng, method)(dtype=native, out=a)
    else:
        a = getattr(rng, method)(shape if out is None else out.shape, dtype=native or np.float64)
    if scale != 1.0:
        a *= scale  # in place: no second buffer
    if shift != 0.0:
        a += shift
    if direct:
        return out
    if out is not None:
        out[...] = a
        return out
    return a if a.dtype == dt else a.astype(dt)


def standard_normal(shape, dtype=np.float32, generator=None, out=None) -> np.ndarray:
    """Samples of N(0, 1) as an array of ``dtype`` (float32 drawn as float32).

    With ``out`` (a float32/float64 C-contiguous array), the samples are written into it
    with no temporary at all.

    >>> dg.random.standard_normal((2, 3), np.float32).dtype
    dtype('float32')
    """
    return _draw("standard_normal", shape, dtype, generator, out)


def uniform(shape, dtype=np.float32, low=0.0, high=1.0, generator=None, out=None) -> np.ndarray:
    """Samples of U[low, high) as an array of ``dtype`` (float32 drawn as float32).

    >>> float(dg.random.uniform((1000,), np.float32, -2.0, 2.0).min()) >= -2.0
    True
    """
    return _draw("random", shape, dtype, generator, out, high - low, low)


def normal(shape, dtype=np.float32, mean=0.0, std=1.0, generator=None, out=None) -> np.ndarray:
    """Samples of N(mean, std^2) as an array of ``dtype`` (float32 drawn as float32).

    >>> dg.random.normal((4,), np.float64, 5.0, 0.0)
    array([5., 5., 5., 5.])
    """
    return _draw("standard_normal", shape, dtype, generator, out, std, mean)
