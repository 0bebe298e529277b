"""Placeholder filled by its owner; see docs/internals.md."""

__all__: list = []
