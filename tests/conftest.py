"""Shared fixtures and named tolerances for the dpopt test suite."""

from __future__ import annotations

import numpy as np
import pytest

#: closed form vs brute force (both exact arithmetic up to float rounding)
EXACT_RTOL = 1e-9
EXACT_ATOL = 1e-12
#: closed form vs an LP/MILP optimum from HiGHS (primal feasibility tolerance 1e-7)
SOLVER_RTOL = 1e-6
SOLVER_ATOL = 1e-7


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def random_partition(rng: np.random.Generator, *, max_samples: int = 8, max_users: int = 4):
    """Random counts m (N ≤ max_samples) and retained Γ (not all zero)."""
    while True:
        L = int(rng.integers(1, max_users + 1))
        m = rng.integers(1, 5, size=L)
        if m.sum() <= max_samples:
            break
    while True:
        g = rng.integers(0, m + 1)
        if g.sum() > 0:
            return m, g
