"""Fixtures of the clipping tests: the paper's collections and seeded random instances."""

from __future__ import annotations

import numpy as np
import pytest

#: closed form vs closed form / formulas evaluated by hand (float rounding only)
EXACT_RTOL = 1e-12
#: closed form vs HiGHS LP optima (primal/dual feasibility tolerance 1e-7, data scale U·m*)
LP_RTOL = 1e-7
#: KKT residual tolerance for certificates read from solver duals
DUAL_TOL = 1e-7
#: the paper's anchors are printed to 5 decimals
ANCHOR_ATOL = 5e-6

U_PAPER = 65.0


def geometric(M: int = 6) -> np.ndarray:
    """notes-001 §5.2: for i = 0..M, 2^i users with 2^(M−i) samples each (L = 2^(M+1) − 1)."""
    return np.concatenate([np.full(2**i, 2 ** (M - i), dtype=np.int64) for i in range(M + 1)])


def extreme(L: int = 101, m_max: int = 10) -> np.ndarray:
    """notes-001 §5.2: L − 1 users with one sample and one user with m_max samples."""
    return np.concatenate([np.ones(L - 1, dtype=np.int64), [m_max]])


def random_instance(rng: np.random.Generator, i: int) -> tuple[np.ndarray, float, float, int]:
    """Instance i of the cross-check family (counts, U, ε, d).

    Cycles through three ε regimes: ``2d/ε`` an integer k ≤ L (ties, 1/3 of the instances),
    ``ε < 2d/L`` (T_ε = 0), and a generic ε. Counts have deliberate repeats (ties in U·m_ℓ).
    """
    L = int(rng.integers(2, 9))
    m = rng.integers(1, 6, size=L)
    U = float(rng.choice([1.0, 65.0, 2.5]))
    d = 1 if i % 4 else 2
    kind = i % 3
    if kind == 0:
        k = int(rng.integers(1, L + 1))
        eps = 2.0 * d / k
    elif kind == 1:
        eps = 2.0 * d / L * float(rng.uniform(0.2, 0.99))
    else:
        eps = float(rng.uniform(0.05, 3.0))
    return m, U, eps, d


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)
