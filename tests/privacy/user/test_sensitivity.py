"""Sensitivities of the bounded statistics, checked by enumerating one user's possible records."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpopt.privacy.user.bounding import bound_contributions, grid_ranks, lattice_values
from dpopt.privacy.user.sensitivity import sensitivities

from .conftest import grid_of, make_agg

U = 4.0
BITS = 0  # λ = 1: H_Y = U/2 = 2, H_Z = U²/8 = 2


def _base() -> list[tuple[str, int, int, float]]:
    # two other users with distinct counts per grid (no ties: their ranks are deterministic)
    return [("a", 0, 1, 1.0), ("a", 0, 2, 3.0), ("a", 0, 3, 2.0), ("a", 1, 1, 4.0),
            ("b", 1, 5, 0.0), ("b", 1, 6, 1.0), ("b", 2, 7, 3.0)]


def _stats(records, k, c, grids=(0, 1, 2)):
    agg = make_agg(records)
    ranks = grid_ranks(agg, np.random.default_rng(0))
    bg = bound_contributions(agg, k=k, c=c, ranks=ranks, lattice=lattice_values(agg, U, granularity_bits=BITS))
    out = np.zeros((4, len(grids)), dtype=np.int64)
    for j, g in enumerate(grids):
        i = grid_of(agg, g)
        if i >= 0:
            out[:, j] = bg.records[i], bg.sum_q[i], bg.sumsq_q[i], bg.users[i]
    return out


def _user_configs(c, values, grids, extra):
    """Every way for a user to hold 0..c+extra records with the given values in each grid."""
    per_grid = [tuple(v) for m in range(c + extra + 1) for v in itertools.product(values, repeat=m)]
    for combo in itertools.product(per_grid, repeat=len(grids)):
        if sum(len(v) for v in combo) == 0:
            continue
        yield [("u", g, 100 + 10 * g + j, x) for g, vals in zip(grids, combo) for j, x in enumerate(vals)]


# (k, c, values, grids the user may use, records beyond c): ≈ 500 datasets in all
CASES = [
    (1, 1, (0.0, 4.0), (0, 1), 1),            # truncation to c, choice of 1 grid among 2
    (1, 2, (0.0, 4.0), (0, 1), 1),            # c = 2
    (2, 1, (0.0, 2.0, 4.0), (0, 1), 1),       # a middle value
    (2, 1, (0.0, 1.0, 3.0, 4.0), (0, 1, 2), 0),  # k = 2 of 3 grids
]


@pytest.mark.parametrize(("k", "c", "values", "grids", "extra"), CASES)
@pytest.mark.slow
def test_l1_sensitivities_by_enumeration(k, c, values, grids, extra):
    s = sensitivities(k, c, U, lam=2.0**-BITS)
    base = _stats(_base(), k, c)
    worst = np.zeros(4, dtype=np.int64)
    for user in _user_configs(c, values, grids, extra):
        diff = np.abs(_stats(_base() + user, k, c) - base).sum(axis=1)
        worst = np.maximum(worst, diff)
    expected = np.array([s.count_l1, s.sum_l1_units, s.sumsq_l1_units, s.users_l1])
    assert np.all(worst <= expected)
    # attained (c records at 0 or all at U in k grids), so the bounds are exact
    assert np.array_equal(worst, expected)
    # lattice units against the value-level statements
    assert s.sum_l1_units * 2.0**-BITS == pytest.approx(s.sum_l1)
    assert s.sumsq_l1_units * 2.0**-BITS == pytest.approx(s.sumsq_l1)


def test_unshifted_sum_would_need_twice_the_sensitivity():
    # the centred sum halves the sensitivity of Σx: a user at 0 vs a user at U in one grid
    s = sensitivities(1, 1, U)
    assert s.sum_l1 == U / 2.0 and s.sumsq_l1 == U * U / 8.0


def test_l2_is_sqrt_k_times_per_grid():
    s = sensitivities(9, 2, 10.0, lam=1.0)
    assert s.count_l2 == pytest.approx(3 * 2)
    assert s.users_l2 == pytest.approx(3)
    assert s.sum_l2_units == pytest.approx(3 * 2 * 5)
