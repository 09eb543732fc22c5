"""The sensitivity models/engine.md §6 ("Why a calibration round would not fix the scale") derives for
the published answers' squared error Q = Σ_g n_g (x̄_g − m_g)²: adding one record of deviation d to a
grid of n records whose deviations sum to S (every deviation within ±D) moves (S + d)²/(n + 1) − S²/n
by between D²(1 − 3n)/(n + 1) ≥ −3D² and D², both ends attained — checked by brute force over a grid
of (n, mean deviation, d), and the sequential bound 3T·D² for T added records by random sequences."""

from __future__ import annotations

import numpy as np


def _step(S: np.ndarray, n: int, d: np.ndarray) -> np.ndarray:
    return (S + d) ** 2 / (n + 1) - S ** 2 / n


def test_one_record_moves_a_grid_term_within_the_stated_range_and_attains_both_ends():
    D = 3.0
    grid = np.linspace(-D, D, 241)
    a, d = np.meshgrid(grid, grid, indexing="ij")
    for n in (1, 2, 3, 5, 10, 50, 400):
        delta = _step(n * a, n, d)  # S = n·a: the grid's mean deviation a within ±D
        lo = D * D * (1 - 3 * n) / (n + 1)
        assert delta.max() <= D * D + 1e-9 and delta.min() >= lo - 1e-9
        assert np.isclose(delta.max(), D * D) and np.isclose(delta.min(), lo)  # a = d = ±D; a = −d = ±D
        assert lo >= -3 * D * D


def test_a_users_records_move_q_by_at_most_3T_D2():
    rng = np.random.default_rng(40)
    D = 2.0
    for _ in range(2000):
        n0 = int(rng.integers(1, 30))
        dev = rng.uniform(-D, D, n0)
        T = int(rng.integers(1, 20))
        new = rng.choice([-D, D], T) if rng.random() < 0.5 else rng.uniform(-D, D, T)
        before = dev.sum() ** 2 / n0
        after = (dev.sum() + new.sum()) ** 2 / (n0 + T)
        assert abs(after - before) <= 3 * T * D * D + 1e-9
