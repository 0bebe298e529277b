"""``dg.nn.init``: in-place parameter initialisation (filled in below)."""
