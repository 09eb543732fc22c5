"""The bounding rule: top-k grids by the user's own record counts, ties at random, first c records."""

from __future__ import annotations

import numpy as np

from dpopt.privacy.user.bounding import bound_contributions, bounded_gamma, grid_ranks, lattice_values

from .conftest import grid_of, make_agg


def _kept(agg, gamma, user):
    u = int(np.searchsorted(agg.users, user))
    sel = (agg.pair_user == u) & (gamma > 0)
    return {int(g) for g in agg.pair_grid[sel]}


def test_keeps_the_users_busiest_grids_and_first_records():
    # user a: grid0 3 records, grid1 1, grid2 2 -> k = 2 keeps grids 0 and 2; c = 2 keeps the first two
    recs = [("a", 0, 30, 9.0), ("a", 0, 10, 1.0), ("a", 0, 20, 2.0), ("a", 1, 5, 7.0),
            ("a", 2, 1, 3.0), ("a", 2, 2, 4.0), ("b", 1, 1, 5.0)]
    agg = make_agg(recs)
    ranks = grid_ranks(agg, np.random.default_rng(1))
    gamma = bounded_gamma(agg, ranks, 2, 2)
    assert _kept(agg, gamma, "a") == {grid_of(agg, 0), grid_of(agg, 2)}
    bg = bound_contributions(agg, k=2, c=2, ranks=ranks, lattice=lattice_values(agg, 10.0, granularity_bits=0))
    g0 = grid_of(agg, 0)
    # first two by time in grid 0: values 1 and 2 -> centred (1-5) + (2-5) = -7
    assert bg.records[g0] == 2 and bg.sum_q[g0] == -7
    assert bg.users[grid_of(agg, 1)] == 1  # only b: a dropped grid 1


def _user_a(ties: bool):
    recs = [("a", 0, 1, 1.0), ("a", 1, 1, 1.0), ("a", 2, 1, 1.0)]
    if not ties:
        recs.append(("a", 2, 2, 1.0))
    return recs


def test_kept_grids_ignore_other_users_records():
    # without ties the kept set is a function of the user's own counts, whatever the others hold
    rng = np.random.default_rng(5)
    for trial in range(20):
        others = [(f"o{j}", int(rng.integers(0, 6)), int(rng.integers(0, 50)), float(rng.random()))
                  for j in range(int(rng.integers(0, 30)))]
        agg = make_agg(_user_a(ties=False) + others)
        gamma = bounded_gamma(agg, grid_ranks(agg, np.random.default_rng(trial)), 1, 1)
        assert _kept(agg, gamma, "a") == {grid_of(agg, 2)}


def test_ties_are_broken_uniformly_whatever_the_others_hold():
    # user a has one record in each of grids 0, 1, 2: with k = 1 each is kept with probability 1/3,
    # with or without other users in the data
    counts = {}
    for label, others in (("alone", []), ("crowded", [("b", 0, 1, 1.0), ("b", 0, 2, 1.0), ("c", 1, 3, 1.0)])):
        agg = make_agg(_user_a(ties=True) + others)
        hits = np.zeros(3)
        for s in range(3000):
            gamma = bounded_gamma(agg, grid_ranks(agg, np.random.default_rng(s)), 1, 1)
            (g,) = _kept(agg, gamma, "a")
            hits[[grid_of(agg, i) for i in range(3)].index(g)] += 1
        counts[label] = hits / hits.sum()
    for p in counts.values():
        # 3000 draws: sd of a frequency ≈ 0.0086, 5 sd
        assert np.all(np.abs(p - 1 / 3) < 0.045)


def test_grids_outside_the_mask_are_never_kept():
    agg = make_agg([("a", 0, 1, 1.0), ("a", 0, 2, 1.0), ("a", 1, 1, 1.0)])
    mask = agg.pair_grid != grid_of(agg, 0)
    ranks = grid_ranks(agg, np.random.default_rng(0), mask=mask)
    gamma = bounded_gamma(agg, ranks, 1, 5)
    assert _kept(agg, gamma, "a") == {grid_of(agg, 1)}
