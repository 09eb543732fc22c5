"""The engine's bounding and noise calls: every marginal is a sum of the same kept records, each user
moves every marginal's vectors by at most the sensitivities passed to the sampler (models/engine.md §2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.privacy.engine import _bounded, _measure
from dpopt.privacy.user import UserOptions
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.userdp.bounding import lattice_values
from dpopt.userdp.record_cap import capped_records
from tests.userdp.conftest import make_agg


def _records(rng: np.random.Generator, n_users: int, n_grids: int = 48) -> list[tuple[str, int, int, float]]:
    rows = []
    for u in range(n_users):
        for g in rng.choice(n_grids, size=int(rng.integers(1, 12)), replace=False):
            for t in range(int(rng.integers(1, 25))):
                rows.append((f"u{u}", int(g), t, float(rng.uniform(0, 120))))
    return rows


def _options(agg) -> UserOptions:
    return UserOptions(partitions=pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)}))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("cap", [1, 7, 40])
def test_each_user_moves_every_marginal_by_at_most_its_sensitivity(seed: int, cap: int) -> None:
    rng = np.random.default_rng(seed)
    agg = make_agg(_records(rng, 9))
    clamp = 90.0
    b = _bounded(agg, _options(agg), cap, clamp, np.random.default_rng(seed + 50), 20)
    # the same kept records, recomputed from the same keys, split by user
    lat = lattice_values(agg, clamp, granularity_bits=20)
    gamma, py, _ = capped_records(agg, np.ones(agg.n_pairs, bool), cap, np.random.default_rng(seed + 50), lat)
    grid_of_pair = agg.pair_grid  # the list is the occupied grids, in the aggregate's (slot, cell) order
    for mn, R, Y in zip(b.cands, b.R, b.Y):
        node = mn.code[grid_of_pair]
        total_R, total_Y = np.zeros(mn.n_nodes), np.zeros(mn.n_nodes)
        for u in range(agg.n_users):
            mine = agg.pair_user == u
            r_u = np.bincount(node[mine], weights=gamma[mine], minlength=mn.n_nodes)
            y_u = np.bincount(node[mine], weights=py[mine], minlength=mn.n_nodes)
            assert np.abs(r_u).sum() <= cap and np.sqrt((r_u ** 2).sum()) <= cap
            assert np.abs(y_u).sum() <= cap * b.half_sum and np.sqrt((y_u ** 2).sum()) <= cap * b.half_sum + 1e-9
            total_R += r_u
            total_Y += y_u
        np.testing.assert_array_equal(R, total_R)  # the node sums are exactly the users' kept records
        np.testing.assert_array_equal(Y, total_Y)


class _Spy:
    """A sampler that adds nothing and records what it was asked (unit ε)."""

    unit, label, real_release = "epsilon", "spy", False

    def __init__(self) -> None:
        self.calls: list[tuple[int, float, float, int]] = []

    def integer(self, values, *, l1, l2, budget):
        self.calls.append((int(l1), float(l2), float(budget), int(np.size(values))))
        return np.asarray(values)

    def scale(self, *, l1, l2, budget):
        return l1 / budget


def test_the_sampler_gets_the_proved_sensitivities_and_the_budget_adds_up() -> None:
    rng = np.random.default_rng(11)
    agg = make_agg(_records(rng, 12))
    b = _bounded(agg, _options(agg), 13, 120.0, np.random.default_rng(1), 20)
    spy = _Spy()
    budgets = np.linspace(0.2, 1.0, len(b.cands))
    phase = _measure(b, spy, budgets, tag="main")
    assert len(spy.calls) == 2 * len(b.cands)
    for i, mn in enumerate(b.cands):
        (l1c, l2c, bc, nc), (l1y, l2y, by, ny) = spy.calls[2 * i], spy.calls[2 * i + 1]
        assert (l1c, l2c) == (13, 13.0) and (l1y, l2y) == (13 * b.half_sum, float(13 * b.half_sum))
        assert nc == ny == mn.n_nodes
        assert bc + by == pytest.approx(budgets[i])
        np.testing.assert_allclose(phase.count[i], b.R[i])  # the spy adds no noise: the exact sums come back
        np.testing.assert_allclose(phase.total[i], b.lam * b.Y[i])
    assert sum(phase.spent.values()) == pytest.approx(budgets.sum())
