"""Shared public priority (priority.py), the outlook of an empty release (predict.py), the
histogram rule end to end through release_user, and the benchmark's scoring function."""

from __future__ import annotations

import sys
from pathlib import Path

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import Budget, NoiseOptions, UserOptions, release_user
from dpopt.privacy.user.bounding import bound_contributions, lattice_values
from dpopt.privacy.user.predict import (
    ContributionHistogram,
    ReleaseModel,
    epsilon_for_target,
    mean_error_bound_at,
    release_outlook,
)
from dpopt.privacy.user.priority import coarse_first_priority, hash_priority, priority_ranks

from .conftest import CELLS, SLOT_NS, grid_of, make_agg


def _records(rng, users=12, grids=12):
    recs = []
    for u in range(users):
        for g in rng.choice(grids, size=int(rng.integers(1, 8)), replace=False):
            recs += [(f"u{u:02d}", int(g), t, float(rng.uniform(0, 10))) for t in range(int(rng.integers(1, 4)))]
    return recs


def test_priority_ranks_follow_the_public_order_and_ignore_other_users():
    rng = np.random.default_rng(1)
    base = _records(rng)
    extra = [("zz", g, 0, 1.0) for g in (0, 3, 5, 7, 9)]
    a0, a1 = make_agg(base), make_agg(base + extra)
    r0, r1 = priority_ranks(a0, hash_priority(a0)), priority_ranks(a1, hash_priority(a1))
    # the same grid key has the same priority in both datasets (a function of the key only)
    key0 = dict(zip(zip(a0.cells, a0.slots), hash_priority(a0)))
    key1 = dict(zip(zip(a1.cells, a1.slots), hash_priority(a1)))
    assert all(key1[k] == v for k, v in key0.items())
    # every other user's ranks are unchanged by the added user
    lab0 = {(u, a0.cells[g], a0.slots[g]): r for u, g, r in zip(a0.users[a0.pair_user], a0.pair_grid, r0)}
    lab1 = {(u, a1.cells[g], a1.slots[g]): r for u, g, r in zip(a1.users[a1.pair_user], a1.pair_grid, r1)}
    assert all(lab1[k] == v for k, v in lab0.items())
    # within a user, rank order = priority order; ranks are 0..G−1
    pr = hash_priority(a1)
    for u in range(a1.n_users):
        sel = a1.pair_user == u
        order = np.argsort(r1[sel])
        assert np.all(np.diff(pr[a1.pair_grid[sel]][order].astype(np.float64)) > 0)
        assert sorted(r1[sel]) == list(range(sel.sum()))


def test_priority_ranks_plug_into_bound_contributions_and_pile_users_onto_the_same_grids():
    rng = np.random.default_rng(2)
    agg = make_agg(_records(rng, users=40))
    ranks = priority_ranks(agg, hash_priority(agg))
    bg = bound_contributions(agg, k=2, c=1, ranks=ranks, lattice=lattice_values(agg, 10.0))
    kept = bg.gamma > 0
    # with one public order, user ℓ keeps grid g iff fewer than k of its grids precede g
    pr = hash_priority(agg)
    for p in range(agg.n_pairs):
        mine = agg.pair_user == agg.pair_user[p]
        before = int(np.sum(pr[agg.pair_grid[mine]] < pr[agg.pair_grid[p]]))
        assert kept[p] == (before < 2)
    # the grids with the highest public priority keep all their users
    top = int(np.argmin(pr))
    assert bg.users[top] == agg.grid_users()[top]


def test_mask_and_bad_input():
    agg = make_agg(_records(np.random.default_rng(3)))
    mask = agg.pair_grid % 2 == 0
    r = priority_ranks(agg, hash_priority(agg), mask=mask)
    assert np.all(r[~mask] == -1) and np.all(r[mask] >= 0)
    with pytest.raises(ValueError, match="priority"):
        priority_ranks(agg, np.zeros(3))


def test_coarse_first_keeps_the_grids_of_one_parent_together():
    agg = make_agg(_records(np.random.default_rng(4), grids=18))
    pr = coarse_first_priority(agg, parent_resolution=5, parent_slot_ns=3 * SLOT_NS)
    parent = np.asarray([h3.cell_to_parent(h3.int_to_str(int(c)), 5) for c in agg.cells])
    block = np.char.add(parent.astype(str), (agg.slots // (3 * SLOT_NS)).astype(str))
    order = np.argsort(pr)
    seq = block[order]
    changes = int(np.sum(seq[1:] != seq[:-1]))
    assert changes == np.unique(block).size - 1  # every coarse block is one contiguous run
    with pytest.raises(ValueError, match="parent_resolution"):
        coarse_first_priority(agg, parent_resolution=9, parent_slot_ns=SLOT_NS)


def _hist():
    H = np.array([[0.0, 0.0], [40.0, 10.0], [20.0, 0.0]])
    return ContributionHistogram(grids=np.array([1.0, 4.0, 16.0]), records=np.array([2.0, 8.0]),
                                 noisy=H.astype(np.int64), counts=H, epsilon=1.0)


def test_outlook_of_an_empty_release_says_so_and_what_would_work():
    U = 100.0
    ok = release_outlook({"finest": (np.array([50.0, 200.0]), np.array([10.0, 80.0]))}, bound=U, epsilon=1.0)
    assert not ok.empty and ok.message == "" and ok.useful == 1
    bad = release_outlook({"finest": (np.array([5.0, 9.0]), np.array([60.0, 100.0])),
                           "parent": (np.array([40.0]), np.array([20.0]))}, bound=U, epsilon=2.0)
    assert bad.empty and bad.level == "parent" and "nothing worth reading" in bad.message
    # ε needed: the best finite bound (60) scaled to the target U/4 = 25
    assert bad.epsilon_needed == pytest.approx(2.0 * 60.0 / 25.0)
    assert mean_error_bound_at(np.array([5.0]), bound_now=np.array([60.0]), epsilon_now=2.0,
                               epsilon=bad.epsilon_needed)[0] == pytest.approx(25.0)
    # every node at the midpoint ± U/2 (nothing measured: an outside check's decimal commas left no value):
    # no ε is projected from the prior's half-range (it said "the best node would meet 25 at epsilon ≈ 4")
    prior = release_outlook({"finest": (np.array([3.0, -2.0]), np.array([50.0, 50.0]))}, bound=U, epsilon=2.0)
    assert prior.empty and prior.epsilon_needed is None and "would meet" not in prior.message
    assert "coarsen the grid" in prior.message and "nothing was measured above its noise" in prior.message
    assert "nothing was measured" not in bad.message
    model = ReleaseModel(hist=_hist(), k=4, c=2, shares=(0.3, 0.4, 0.2), delta=1e-6)
    none = release_outlook({"finest": (np.zeros(0), np.zeros(0))}, bound=U, epsilon=1.0, model=model, users=40)
    assert none.empty and none.nodes == 0 and "no node" in none.message
    e = none.epsilon_needed
    assert e is not None and model.error_at(e, U, 40) <= 25.0
    smaller = [x for x in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0) if x < e]
    assert all(model.error_at(x, U, 40) > 25.0 for x in smaller)
    assert epsilon_for_target(model, bound=U, target=1e-9, users=40) is None


def test_release_user_with_the_histogram_rule_and_shared_priority():
    rng = np.random.default_rng(5)
    agg = make_agg(_records(rng, users=60))
    for priority in ("own", "shared"):
        plist = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
        res = release_user(agg, Budget(epsilon_total=5.0), UserOptions(priority=priority, partitions=plist, strategy="fixed"),
                           bound=10.0, noise=NoiseOptions("numpy", seed=3))
        assert res.summary.bounds_rule == "histogram"
        assert res.summary.budget["bounds"] == pytest.approx(0.5)
        assert sum(res.summary.budget.values()) <= 5.0 + 1e-9
    with pytest.raises(ValueError, match="priority"):
        release_user(agg, Budget(epsilon_total=5.0, delta=1e-6), UserOptions(priority="nope", strategy="fixed"),
                     bound=10.0, noise=NoiseOptions("numpy", seed=3))


# --- the benchmark's scoring function (tests/benchmarks/scoring.py) ---

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_scoring_answers_each_finest_grid_by_its_smallest_containing_node():
    from scoring import finest_grids, score_table

    # grid 0 (cell 0, slot 0) and grid 6 (cell 0, slot 1): 10 users each; grid 1: 10 users
    recs = [(f"u{u}", g, 0, v) for u in range(10) for g, v in ((0, 2.0), (6, 4.0), (1, 8.0))]
    agg = make_agg(recs)
    fin = finest_grids(agg, bound=10.0, min_users=10)
    assert fin.scored.sum() == 3
    parent = h3.cell_to_parent(h3.int_to_str(CELLS[0]), 5)
    t0 = pd.Timestamp(0, tz="UTC")
    table = pd.DataFrame({
        "cell": [h3.int_to_str(CELLS[0]), parent],
        "slot": [t0.isoformat(), t0.isoformat()],
        "slot_end": [(t0 + pd.Timedelta(hours=1)).isoformat(), (t0 + pd.Timedelta(hours=2)).isoformat()],
        "h3_resolution": [7, 5],
        "mean": [2.5, 3.5],
        "mean_error_bound": [1.0, 0.1],
    })
    s = score_table(table, fin)
    g0, g6, g1 = grid_of(agg, 0), grid_of(agg, 6), grid_of(agg, 1)
    order = np.flatnonzero(fin.scored)
    err = dict(zip(order, s.errors))
    assert err[g0] == pytest.approx(0.5)          # itself (the smaller node)
    assert err[g6] == pytest.approx(0.5)          # its parent node over 2 h: 3.5 vs 4
    in_parent = h3.cell_to_parent(h3.int_to_str(CELLS[1]), 5) == parent
    assert err[g1] == pytest.approx(abs(3.5 - 8.0) if in_parent else abs(5.0 - 8.0))
    # coverage: node 0 truth 2 in [1.5, 3.5]; the parent's truth = mean of all its records
    assert 0.0 <= s.coverage <= 1.0 and s.answered_own == pytest.approx(1 / 3)


def test_scoring_reads_recurring_windows():
    """A node whose window recurs (release.csv ``repeat_every``/``repeat_until``, hour-of-day profiles)
    answers the grids in any of its windows before ``repeat_until`` and no others; a smaller
    contiguous node still wins where both contain a grid."""
    from scoring import finest_grids, score_table

    # grids 0 (cell 0, 00:00), 6 (cell 0, 01:00), 12 (cell 0, 02:00): 10 users each
    recs = [(f"u{u}", g, 0, v) for u in range(10) for g, v in ((0, 2.0), (6, 4.0), (12, 6.0))]
    agg = make_agg(recs)
    fin = finest_grids(agg, bound=10.0, min_users=10)
    parent = h3.cell_to_parent(h3.int_to_str(CELLS[0]), 5)
    t0 = pd.Timestamp(0, tz="UTC")
    # the 00:00–01:00 window every 2 h until 04:00 (holds grids 0 and 12), and grid 12 by itself
    table = pd.DataFrame({"cell": [parent, h3.int_to_str(CELLS[0])], "slot": [t0.isoformat(), (t0 + pd.Timedelta(hours=2)).isoformat()],
                          "slot_end": [(t0 + pd.Timedelta(hours=1)).isoformat(), (t0 + pd.Timedelta(hours=3)).isoformat()],
                          "repeat_every": ["PT2H", ""], "repeat_until": [(t0 + pd.Timedelta(hours=4)).isoformat(), ""],
                          "h3_resolution": [5, 7], "mean": [3.0, 6.5], "mean_error_bound": [0.5, 1.0]})
    s = score_table(table, fin)
    err = dict(zip(np.flatnonzero(fin.scored), s.errors))
    assert err[grid_of(agg, 0)] == pytest.approx(1.0)           # the recurring node: 3 vs 2
    assert err[grid_of(agg, 6)] == pytest.approx(abs(5.0 - 4.0))  # in no window: unanswered, charged U/2
    assert err[grid_of(agg, 12)] == pytest.approx(0.5)          # its own node, smaller than the recurring one
    assert s.answered == pytest.approx(2 / 3) and s.answered_own == pytest.approx(1 / 3)
    # the recurring node's truth is the mean of both windows' records (2 and 6): 4, outside 3 ± 0.5
    assert s.coverage == pytest.approx(0.5)
    # the same nodes as an Estimates table (cycle_ns in ns; recurring until the finest grids' end)
    est = table.drop(columns=["repeat_every", "repeat_until"]).assign(cycle_ns=[2 * SLOT_NS, 0])
    s2 = score_table(est, fin)
    assert s2.errors.tolist() == pytest.approx(s.errors.tolist()) and s2.coverage == pytest.approx(0.5)
