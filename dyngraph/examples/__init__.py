"""Runnable, tested example programs (``python -m dyngraph.examples.<name>``)."""
