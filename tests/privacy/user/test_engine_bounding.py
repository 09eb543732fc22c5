"""The engine's bounding and noise calls: every marginal is a sum of the same kept records, each user
moves every marginal's vectors by at most the sensitivities passed to the sampler (models/engine.md §2)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt.privacy.user.engine import _bounded, _measure, between_sumsq
from dpopt.privacy.user import UserOptions
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.privacy.user.bounding import lattice_values
from dpopt.privacy.user.record_cap import capped_records
from tests.privacy.user.conftest import make_agg


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


def _q_by_hand(R: np.ndarray, Y: np.ndarray, bits: int) -> int:
    """Σ_g ⌊Y_g²/(R_g·2^b)⌋ − ⌊S²/(N·2^b)⌋ written out (Fractions floored)."""
    N, S = int(np.sum(R)), int(np.sum(Y))
    grids = sum(math.floor(Fraction(int(y) * int(y), int(r) * 2**bits)) for r, y in zip(R, Y) if r > 0)
    return grids - (math.floor(Fraction(S * S, N * 2**bits)) if N > 0 else 0)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cap", [1, 6, 30])
def test_one_user_moves_the_between_grid_statistic_by_at_most_its_sensitivity(seed: int, cap: int) -> None:
    """Brute force over every user: Q of all kept records minus Q without that user's kept records
    (the neighbour: no other user's kept records change) never exceeds the proved ⌈T·(4K + 2)⌉."""
    rng = np.random.default_rng(seed)
    agg = make_agg(_records(rng, 9, n_grids=12))
    bits, clamp = 8, 90.0
    b = _bounded(agg, _options(agg), cap, clamp, np.random.default_rng(seed + 50), bits)
    lat = lattice_values(agg, clamp, granularity_bits=bits)
    gamma, py, _ = capped_records(agg, np.ones(agg.n_pairs, bool), cap, np.random.default_rng(seed + 50), lat)
    fin = b.cands[0]
    q, sens = between_sumsq(b.R[0], b.Y[0], half_sum=b.half_sum, bits=bits, cap=cap)
    assert q == _q_by_hand(b.R[0], b.Y[0], bits)
    K = Fraction(b.half_sum**2, 2**bits)
    assert sens == math.ceil(cap * (4 * K + 2))
    node = fin.code[agg.pair_grid]
    worst = 0
    for u in range(agg.n_users):
        mine = agg.pair_user == u
        r_u = np.bincount(node[mine], weights=gamma[mine], minlength=fin.n_nodes).astype(np.int64)
        y_u = np.bincount(node[mine], weights=py[mine], minlength=fin.n_nodes).astype(np.int64)
        q_without, _ = between_sumsq(b.R[0] - r_u, b.Y[0] - y_u, half_sum=b.half_sum, bits=bits, cap=cap)
        worst = max(worst, abs(q - q_without))
    assert worst <= sens


def test_the_between_grid_bound_holds_at_its_worst_case() -> None:
    """The extreme step of the proof: n records all at −H in one grid, then a user's T records at +H
    in a new grid (the total sum of squares rises by nearly 4H² per record, the within-grid one not at
    all): the statistic moves by at most the sensitivity, and by more than half of it (the bound is
    not loose by more than 2×); removing the user is the same step back."""
    H, bits, T = 1000, 4, 7
    for n in (1, 5, 200):
        R, Y = np.array([n, 0]), np.array([-n * H, 0])
        q0, sens = between_sumsq(R, Y, half_sum=H, bits=bits, cap=T)
        q1, _ = between_sumsq(R + np.array([0, T]), Y + np.array([0, T * H]), half_sum=H, bits=bits, cap=T)
        assert q0 == 0 and abs(q1 - q0) <= sens
        if n == 200:
            assert abs(q1 - q0) > sens / 2


def test_the_between_grid_upper_end_covers_the_kept_means_spread() -> None:
    """With a sampler that adds no noise the estimate under the upper end is the record-weighted
    spread of the kept grids' means plus their sampling noise: at least the spread itself, at most the
    values' own variance (what the interval used before); the upper end adds BETWEEN_SDS noise sds."""
    from dpopt.estimation.crossed_estimate import between_bound
    from dpopt.hierarchy.node_means import BETWEEN_SDS
    from dpopt.privacy.user.engine import EngineInfo, _measure_between

    rng = np.random.default_rng(3)
    agg = make_agg(_records(rng, 30, n_grids=20))
    b = _bounded(agg, _options(agg), 10, 120.0, np.random.default_rng(2), 12)
    spy = _Spy()
    fields, spent = _measure_between(b, spy, 0.5)
    assert list(spent.values()) == [0.5] and spy.calls[0][0] == between_sumsq(
        b.R[0], b.Y[0], half_sum=b.half_sum, bits=12, cap=10)[1]
    info = EngineInfo(names=("g",), levels=((0, 0, 0),), codes=(b.cands[0].code,), offsets=np.array([0]), cap=10,
                      clamp=120.0, unit="epsilon", pilot=np.zeros(1), main=np.zeros(1), strategy="", **fields)
    R, Y = b.R[0].astype(float), b.lam * b.Y[0].astype(float)
    parts = [(R, np.zeros_like(R), Y, np.zeros_like(R))]
    N, ok = R.sum(), R > 0
    spread = float(np.sum(R[ok] * (Y[ok] / R[ok] - Y.sum() / N) ** 2) / N)
    values_var = float((b.lam * b.Z.sum() + N * 120.0**2 / 8.0) / N - (Y.sum() / N) ** 2)
    upper = between_bound(info, parts)
    v_hat = upper - BETWEEN_SDS * info.between_sd / N
    assert info.between_sd == pytest.approx(b.lam * math.sqrt(2.0) * spy.calls[0][0] / 0.5)
    floors = b.lam * R.size / N  # each grid's term is floored to the lattice (at most λ per grid)
    assert spread - floors - 1e-9 <= v_hat <= spread + b.lam / N + 1e-9 <= values_var + 1e-6
