"""All layer classes owned by the core of ``dg.nn`` (re-exported by ``dg.nn``)."""

from __future__ import annotations

__all__: list = []
