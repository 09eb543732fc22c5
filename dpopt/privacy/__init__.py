"""Layer 2 — privacy models, siblings: ``public-occupancy`` and ``user``.

Each takes the contributions table, its own typed options and the budget, and returns
:class:`dpopt.measurements.Measurements`.
"""
