"""Automatic bounds: the utility's sensitivity by brute force over added users; the rules' outputs."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt.privacy.user.bounding import grid_ranks
from dpopt.privacy.user.bounds import BoundsRule, candidate_grid, choose_bounds, release_probability, selection_utility

from .conftest import make_agg


def _random_records(rng, users, grids=12):
    recs = []
    for u in range(users):
        for g in rng.choice(grids, size=int(rng.integers(1, grids)), replace=False):
            for j in range(int(rng.geometric(0.3))):
                recs.append((f"u{u:03d}", int(g), j, float(rng.random() * 10)))
    return recs


@pytest.mark.parametrize("selection", [None, (5.0, 0.1)])
def test_utility_moves_by_at_most_its_sensitivity_when_a_user_is_added(selection):
    rng = np.random.default_rng(3)
    ks, cs = candidate_grid(16), candidate_grid(8)
    cap = 1.0 / 0.4
    du = 1.0 if selection is None else 1.0 + cap * selection[0] / 2.0
    worst = 0.0
    for trial in range(25):
        base = _random_records(rng, int(rng.integers(2, 15)))
        extra = [("zz", g, j, x) for (_, g, j, x) in _random_records(rng, 1)]
        # the coupling of the proof: the other users keep the same grids (deterministic tie rule)
        a0, a1 = make_agg(base), make_agg(base + extra)
        u0 = selection_utility(a0, _det_ranks(a0), ks, cs, cap=cap, selection=selection)
        u1 = selection_utility(a1, _det_ranks(a1), ks, cs, cap=cap, selection=selection)
        worst = max(worst, float(np.max(np.abs(u1 - u0))))
    assert worst <= du + 1e-9
    if selection is None:
        assert worst > 0.3 * du  # and the bound is not loose by orders of magnitude


def _det_ranks(agg):
    """Ranks with ties broken by grid index (deterministic, a rule of the user's own records)."""
    order = np.lexsort((agg.pair_grid, -agg.count, agg.pair_user))
    us = agg.pair_user[order]
    start = np.searchsorted(us, us, side="left")
    rank = np.empty(agg.n_pairs, dtype=np.int64)
    rank[order] = np.arange(agg.n_pairs) - start
    return rank


def test_release_probability_is_lipschitz_as_claimed():
    k, eps, delta = 4, 0.5, 1e-3
    L = np.arange(0, 400)
    p = release_probability(L, k, eps, delta)
    assert np.all(np.diff(p) >= 0) and np.max(np.diff(p)) <= eps / (2 * k) + 1e-12
    assert p[1] <= delta / k * (1 + 1e-9)


@pytest.mark.parametrize("rule", ["select", "quantile"])
def test_rules_return_candidates_within_the_caps(rule):
    rng = np.random.default_rng(0)
    agg = make_agg(_random_records(rng, 30))
    ranks = grid_ranks(agg, np.random.default_rng(1))
    ch = choose_bounds(agg, ranks, 1.0, rng=np.random.default_rng(2),
                       options=BoundsRule(rule=rule, max_grids=8, max_records=4, sum_budget=0.4))
    assert 1 <= ch.k <= 8 and 1 <= ch.c <= 4 and ch.epsilon == 1.0 and ch.rule == rule


def test_select_concentrates_on_the_best_candidate_at_large_epsilon():
    rng = np.random.default_rng(0)
    agg = make_agg(_random_records(rng, 40))
    ranks = grid_ranks(agg, np.random.default_rng(1))
    ks, cs = candidate_grid(8), candidate_grid(4)
    u = selection_utility(agg, ranks, ks, cs, cap=2.5)
    i, j = np.unravel_index(np.argmax(u), u.shape)
    ch = choose_bounds(agg, ranks, 1e4, rng=np.random.default_rng(3),
                       options=BoundsRule(rule="select", max_grids=8, max_records=4, sum_budget=0.4))
    assert (ch.k, ch.c) == (ks[i], cs[j])


@pytest.mark.parametrize("max_grids,max_records", [(3, 3), (5, 6), (6, 10)])
def test_histogram_rule_never_exceeds_the_public_caps(max_grids, max_records):
    """The "histogram" rule's candidates never exceed the caps, even when a cap is not a power of
    two: bin edges 1, 2, 4, …, 2^⌈log2 cap⌉ would go above it (k = 4 > 3, c = 16 > 10 here). The
    front door keeps only the first ``max_records`` records per pair, so such a c would make the
    bounding refuse exactly when some pair held more records than the cap: a data-dependent refusal."""
    recs = [(f"u{u}", g, t, 1.0) for u in range(60) for g in range(5) for t in range(12)]
    agg = make_agg(recs)
    ranks = grid_ranks(agg, np.random.default_rng(1))
    ch = choose_bounds(agg, ranks, 1e6, rng=np.random.default_rng(2), options=BoundsRule(
                       rule="histogram", max_grids=max_grids, max_records=max_records, sum_budget=50.0))
    assert 1 <= ch.k <= max_grids and 1 <= ch.c <= max_records
    assert ch.c == max_records  # 12 records per pair: at this budget the cap c itself is best
