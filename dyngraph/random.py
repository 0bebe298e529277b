"""Random number generation: ``manual_seed``, ``Generator`` and the default generator.

dyngraph uses NumPy's PCG64 bit generator.  Streams are reproducible for a
given seed but are not PyTorch's numbers (PyTorch uses Philox/MT19937).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "default_generator",
           "get_rng_state", "set_rng_state"]


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
        import json  # noqa: PLC0415

        from .creation import tensor  # noqa: PLC0415

        state = json.dumps(self.rng.bit_generator.state).encode()
        return tensor(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state) -> Generator:
        import json  # noqa: PLC0415

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


def rng_of(generator) -> np.random.Generator:
    return (generator or default_generator).rng
