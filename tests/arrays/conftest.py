"""Random instances for the array-length tests (seeded)."""

from __future__ import annotations

import numpy as np


def random_counts(rng: np.random.Generator, *, max_users: int = 40, max_count: int = 200) -> np.ndarray:
    """Counts from a mix of families: uniform, geometric (heavy-tailed), few distinct values, ties."""
    L = int(rng.integers(1, max_users + 1))
    kind = int(rng.integers(0, 4))
    if kind == 0:
        c = rng.integers(1, max_count + 1, size=L)
    elif kind == 1:
        c = np.minimum(rng.geometric(float(rng.uniform(0.01, 0.5)), size=L), max_count)
    elif kind == 2:
        c = rng.choice(rng.integers(1, max_count + 1, size=3), size=L)
    else:
        c = rng.integers(1, 6, size=L) * int(rng.integers(1, 20))
    return c.astype(np.int64)


def random_epsilon(rng: np.random.Generator) -> float:
    return float(10 ** rng.uniform(-3, 1))
