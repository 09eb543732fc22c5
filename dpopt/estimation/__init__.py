"""Layer 3 — estimation: :class:`~dpopt.measurements.Measurements` → :class:`~dpopt.measurements.Estimates`.

Post-processing only: nothing here sees records.
"""
