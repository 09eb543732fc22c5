"""Hierarchical budget plan (public-occupancy, models/hierarchy.md): MILP = brute force on tiny instances,
greedy ≥ MILP, accounting recounted, node occupancy = sums of children, fallback, H3 ancestors."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import Occupancy
from dpopt.budget.hierarchy import (
    brute_force_hierarchy,
    hierarchy_ancestors,
    hierarchy_objective,
    node_table,
    plan_hierarchy,
)

U = 10.0


def _case(seed):
    rng = np.random.default_rng(seed)
    G = 4
    d = rng.integers(1, 6, size=(4, G)) * (rng.random((4, G)) < 0.6)
    d[:, d.sum(axis=0) == 0] = 1
    anc = np.array([np.arange(G), np.arange(G) // 2, np.zeros(G, dtype=int)])
    return Occupancy.from_dense(d), anc, float(rng.choice([2.0, 4.0, 8.0]))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("tau", [3.0, 6.0])
def test_milp_is_optimal_by_brute_force(seed, tau):
    occ, anc, eps = _case(seed)
    criterion = ["noise", "worst_case"][seed % 2]
    t = tau * (2 if criterion == "worst_case" else 1)
    hp = plan_hierarchy(occ, anc, U, eps, target=t, criterion=criterion, max_caps=1, time_limit=None)
    ref = brute_force_hierarchy(occ, anc, U, eps, target=t, criterion=criterion, max_caps=1)
    assert hp.status == "optimal"
    assert hp.coarseness + hp.info["delta"] * hp.plan.released.sum() == pytest.approx(ref)
    assert hp.greedy_coarseness >= hp.coarseness - 1e-9


def test_instances_are_not_trivial():
    seen = set()
    for seed in range(5):
        occ, anc, eps = _case(seed)
        for tau in (3.0, 6.0):
            hp = plan_hierarchy(occ, anc, U, eps, target=tau, max_caps=1, time_limit=None)
            seen.add((hp.uncovered.size > 0, hp.greedy_coarseness > hp.coarseness, hp.coarseness == 0))
    assert any(s[0] for s in seen) and any(s[1] for s in seen) and any(not s[0] for s in seen)


@pytest.mark.parametrize("seed", range(4))
def test_plan_accounting_answers_and_errors(seed):
    occ, anc, eps = _case(seed)
    hp = plan_hierarchy(occ, anc, U, eps, target=6.0, time_limit=None)
    nodes, plan = hp.nodes, hp.plan
    # each user's spend recounted by hand: the budgets of the published nodes holding one of its grids
    dense = occ.to_dense() > 0
    for u in range(occ.n_users):
        mine = {int(nodes.of_grid[lv][g]) for lv in range(anc.shape[0]) for g in np.flatnonzero(dense[u])}
        spent = sum(plan.budget[n] for n in mine if plan.released[n])
        assert spent <= eps * (1 + 1e-9)
        assert plan.user_cost()[u] == pytest.approx(spent)
    rel = np.flatnonzero(plan.released)
    assert np.all(hp.predicted_error[rel] <= 6.0 * (1 + 1e-9))
    pub = hp.published_nodes()
    node_dense = nodes.occupancy.to_dense()
    for i, n in enumerate(pub["node"].tolist()):  # all users kept, truncated to the cap
        assert pub["users"][i] == np.count_nonzero(node_dense[:, n])
        assert pub["retained"][i] == np.minimum(node_dense[:, n], pub["cap"][i]).sum()
    # every answered grid: the finest published ancestor
    for g in range(occ.n_grids):
        published = [lv for lv in range(anc.shape[0]) if plan.released[nodes.of_grid[lv][g]]]
        assert hp.answer[g] == (nodes.of_grid[min(published)][g] if published else -1)


def test_node_counts_add_over_children():
    occ = Occupancy.from_dense([[2, 3, 0], [0, 1, 4]])
    nodes = node_table(occ, np.array([[0, 1, 2], [0, 0, 1], [0, 0, 0]]))
    dense = nodes.occupancy.to_dense()
    assert dense[:, nodes.of_grid[1][0]].tolist() == [5, 1]  # user 0 in both children: 2 + 3
    assert dense[:, nodes.of_grid[2][0]].tolist() == [5, 5]
    published = np.zeros(nodes.level.size, dtype=bool)
    published[nodes.of_grid[1][0]] = True
    answer, coarse = hierarchy_objective(nodes, published)
    assert answer.tolist() == [nodes.of_grid[1][0]] * 2 + [-1] and coarse == 1 + 1 + (2 * 3 + 1)


def test_fallback_reports_what_would_meet_tau():
    occ, anc, eps = _case(1)
    hp = plan_hierarchy(occ, anc, U, eps, target=0.01, time_limit=None)
    assert hp.uncovered.size == occ.n_grids and not hp.plan.released.any()
    least = hp.fallback["least_tau"]
    assert set(least) == {0, 1, 2} and least[2] <= least[0]
    again = plan_hierarchy(occ, anc, U, eps, target=least[2] * 1.0001, time_limit=None)
    assert again.uncovered.size < occ.n_grids  # the reported tau is met at that level


def test_ancestors_of_the_public_hierarchy():
    h3 = pytest.importorskip("h3")
    from dpopt.hierarchy import build_hierarchy, default_levels
    from dpopt.hierarchy.tree import HOUR_NS

    c7 = h3.latlng_to_cell(30.27, -97.74, 7)
    ring = [h3.str_to_int(c) for c in h3.grid_disk(c7, 2)]
    cells = np.array(ring * 3, dtype=np.int64)
    slots = np.repeat(np.arange(3, dtype=np.int64) * HOUR_NS, len(ring))
    h = build_hierarchy(cells, slots, default_levels(7, HOUR_NS))
    anc = hierarchy_ancestors(h)
    assert anc.shape == (h.n_levels, cells.size) and np.array_equal(anc[0], h.finest_node)
    nodes = h.nodes
    for lv in range(1, h.n_levels):
        lev = h.levels[lv]
        for g in range(cells.size):  # the level-l ancestor holds the grid: H3 parent and slot containing it
            row = nodes.iloc[anc[lv][g]]
            assert row["level"] == lv
            assert row["cell"] == h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(cells[g])), lev.h3_resolution))
            assert row["slot"] <= slots[g] < row["slot"] + row["slot_ns"]
    occ = Occupancy.from_triples(np.arange(cells.size) % 5, np.arange(cells.size), np.ones(cells.size, dtype=int))
    hp = plan_hierarchy(occ, anc, U, 4.0, target=8.0, max_caps=1, time_limit=None)
    assert hp.plan.total_cost <= 4.0 * (1 + 1e-9)
