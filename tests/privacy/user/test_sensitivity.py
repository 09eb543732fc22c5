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


@pytest.mark.parametrize("bits", [0, 3, 12])
@pytest.mark.parametrize("bound", [1.0, 4.0, 0.37, 120.0, 1e5])
def test_the_flat_grid_is_the_level_of_one_grid_nodes(bound, bits):
    """The flat grid's sensitivities (the formula per grid, written out here: ℓ1 = k·c·(1, H_Y, H_Z),
    ℓ2² = k·c²·(1, H_Y², H_Z²), users k and √k) are exactly those of a level whose nodes each hold one
    finest grid, with at least k nodes; capacities None is that level. Fewer nodes than k (a public
    list of G < k grids) merge nothing and give ℓ2² = G·c²·(…), the user touching at most G grids."""
    from dpopt.privacy.user.bounding import lattice_halves
    from dpopt.privacy.user.sensitivity import sqrt_up

    lam, hy, hz = lattice_halves(bound, bits)
    for k, c in itertools.product((1, 2, 3, 7, 64), (1, 2, 5, 40)):
        flat = dict(count_l1=k * c, users_l1=k, sum_l1=k * c * bound / 2.0, sumsq_l1=k * c * bound * bound / 8.0,
                    sum_l1_units=k * c * hy, sumsq_l1_units=k * c * hz, count_l2=sqrt_up(k * c * c),
                    users_l2=sqrt_up(k), sum_l2_units=sqrt_up(k * (c * hy) ** 2),
                    sumsq_l2_units=sqrt_up(k * (c * hz) ** 2), merge=k)
        for G in (k, k + 1, 3 * k):
            level = sensitivities(k, c, bound, lam=lam, capacities=np.ones(G, dtype=np.int64))
            assert {f: getattr(level, f) for f in flat} == flat
        assert {f: getattr(sensitivities(k, c, bound, lam=lam), f) for f in flat} == flat
        if k > 1:  # a shorter list: at most G of the user's grids exist
            short = sensitivities(k, c, bound, lam=lam, capacities=np.ones(k - 1, dtype=np.int64))
            assert (short.merge, short.count_l1, short.count_l2) == (k - 1, k * c, sqrt_up((k - 1) * c * c))


def test_bad_inputs_are_one_line_errors_naming_the_argument():
    from dpopt import DpoptInputError

    for name, kwargs in (("capacities", dict(capacities=[1, 0])), ("capacities", dict(capacities=[])),
                         ("capacities", dict(capacities=[1.5])), ("capacities", dict(capacities=[[1, 2]])),
                         ("capacities", dict(capacities="ab")), ("lam", dict(lam=0.0)), ("lam", dict(lam=-1.0)),
                         ("lam", dict(lam=float("nan")))):
        with pytest.raises(DpoptInputError, match=f"`{name}`") as err:
            sensitivities(2, 3, 4.0, **kwargs)
        assert "\n" not in str(err.value)
    for k, c, bound in ((0, 1, 1.0), (1, 0, 1.0), (1, 1, -1.0)):
        with pytest.raises(DpoptInputError):
            sensitivities(k, c, bound)
