"""Ordinary PyTorch programs, each a ``run(torch, shared)`` written once against the
PyTorch surface.  ``tests/test_port_programs.py`` runs each with ``torch`` and with
``dyngraph`` (the import is the only change) and compares the results number by number.

``shared`` carries the random initial weights from the torch run into the dyngraph run
(``state_dict()`` -> NumPy -> ``load_state_dict``), so both start from the same numbers.
"""

from __future__ import annotations

import numpy as np


class Shared:
    """Initial weights recorded by the first run and loaded by the second."""

    def __init__(self, store: dict | None = None):
        self.loading = store is not None
        self.store = {} if store is None else store

    def model(self, torch, name: str, model):
        """Record ``model``'s state (first run) or load the recorded one (second run)."""
        if self.loading:
            state = {k: torch.from_numpy(v.copy()) for k, v in self.store[name].items()}
            model.load_state_dict(state)
        else:
            self.store[name] = {k: v.detach().cpu().numpy().copy()
                                for k, v in model.state_dict().items()}
        return model


def np_of(t) -> np.ndarray:
    """A tensor's values as a NumPy array (the ``.detach().numpy()`` idiom)."""
    return t.detach().cpu().numpy().copy()
