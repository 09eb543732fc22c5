"""Brute-force verification of worst-case formulas on small instances (for tests and for users).

>>> import numpy as np
>>> from dpopt import verify
>>> r = verify.sensitivity(verify.estimators.mean, [2, 1], 1.0, formula=2 / 3)
>>> r.agrees()
True
"""

from . import estimators
from .bruteforce import (
    DEFAULT_MAX_DATASETS,
    BruteForceResult,
    batched,
    enumerate_datasets,
    sensitivity,
    split_users,
    value_grid,
    worst_case_error,
)

__all__ = [
    "BruteForceResult",
    "DEFAULT_MAX_DATASETS",
    "batched",
    "enumerate_datasets",
    "estimators",
    "sensitivity",
    "split_users",
    "value_grid",
    "worst_case_error",
]
