"""The days' spread inside the windows of a release without a list (models/engine.md §8): each folded
record keeps its day (against a brute-force regrouping), the record cap marks exactly the records it
keeps, the (window, day) sums and the nested sum of squares agree with a direct computation, one user
moves the statistic by at most its proved sensitivity (brute force over every user, and the proof's
extreme step), and the joint prior's component outside the measured sum against a brute-force
integral."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt.estimation.crossed_estimate import joint_prior_posteriors
from dpopt.hierarchy.tree import DAY_NS
from dpopt.privacy.user import UserOptions
from dpopt.privacy.user.bounding import lattice_values
from dpopt.privacy.user.engine import _bounded, between_sensitivity, nested_sumsq
from dpopt.privacy.user.private_list import fold_with_days
from dpopt.privacy.user.record_cap import capped_records
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import GridOptions, contributions

U = 50.0
T0 = pd.Timestamp("2020-01-01T00:00:00Z")
LATS = 30.20 + 0.01 * np.arange(4)


def _agg(seed: int, n_users: int = 25, n: int = 1500, days: int = 4):
    rng = np.random.default_rng(seed)
    user = rng.integers(0, n_users, n)
    cell = (user + rng.integers(0, 2, n)) % LATS.size
    df = pd.DataFrame({"user_id": np.char.add("u", user.astype(str)), "latitude": LATS[cell], "longitude": -97.75,
                       "timestamp": T0 + pd.to_timedelta(rng.integers(0, days * 86400, n), unit="s"),
                       "value": np.round(rng.uniform(0, U, n), 2)})
    out = contributions(df, bound=U, grid=GridOptions(7, "6h"), keep_samples=True)
    return out[0] if isinstance(out, tuple) else out


def _options(agg) -> UserOptions:
    return UserOptions(partitions=pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)}))


@pytest.mark.parametrize("slot", ["7min", "2d"])
def test_a_slot_that_does_not_divide_a_day_is_refused_in_its_own_words(slot):
    """Without a list the engine answers windows of the day; the refusal named the slot in
    nanoseconds ("got 420000000000 ns")."""
    from dpopt._validation import DpoptInputError

    agg = contributions(pd.DataFrame({"user_id": ["a", "b"], "latitude": LATS[:2], "longitude": -97.75,
                                      "timestamp": [T0, T0], "value": [1.0, 2.0]}),
                        bound=U, grid=GridOptions(7, slot), keep_samples=True)
    agg = agg[0] if isinstance(agg, tuple) else agg
    with pytest.raises(DpoptInputError, match=f"must divide one day; got '{slot}'"):
        fold_with_days(agg)


@pytest.mark.parametrize("seed", [0, 1])
def test_each_folded_record_keeps_its_day(seed):
    agg = _agg(seed)
    f, days = fold_with_days(agg)
    assert days is not None and days.size == f.samples.values.size and days.dtype == np.int16
    first = int(np.min(np.asarray(agg.slots) // DAY_NS))
    want, got = [], []
    for p in range(agg.n_pairs):
        g = agg.pair_grid[p]
        for v in agg.samples.values[agg.samples.offsets[p]:agg.samples.offsets[p + 1]]:
            want.append((int(agg.pair_user[p]), int(agg.cells[g]), int(agg.slots[g]) % DAY_NS, float(v),
                         int(agg.slots[g]) // DAY_NS - first))
    for p in range(f.n_pairs):
        g = f.pair_grid[p]
        lo, hi = f.samples.offsets[p], f.samples.offsets[p + 1]
        got += [(int(f.pair_user[p]), int(f.cells[g]), int(f.slots[g]), float(v), int(d))
                for v, d in zip(f.samples.values[lo:hi], days[lo:hi])]
    assert sorted(got) == sorted(want)


@pytest.mark.parametrize("cap", [1, 5, 40])
def test_the_cap_marks_exactly_the_records_it_keeps(cap):
    agg = _agg(2)
    lat = lattice_values(agg, U, granularity_bits=10)
    kept = np.zeros(agg.samples.values.size, dtype=bool)
    gamma, py, _ = capped_records(agg, np.ones(agg.n_pairs, bool), cap, np.random.default_rng(3), lat, record_kept=kept)
    gamma2, py2, _ = capped_records(agg, np.ones(agg.n_pairs, bool), cap, np.random.default_rng(3), lat)
    np.testing.assert_array_equal(gamma, gamma2)  # marking changes nothing kept
    owner = np.repeat(np.arange(agg.n_pairs), np.diff(agg.samples.offsets))
    np.testing.assert_array_equal(np.bincount(owner[kept], minlength=agg.n_pairs), gamma)
    np.testing.assert_array_equal(np.bincount(owner[kept], weights=lat.y[kept], minlength=agg.n_pairs).astype(np.int64), py)
    per_user = np.bincount(agg.pair_user[owner[kept]], minlength=agg.n_users)
    assert per_user.max() <= cap


def _folded_bounded(seed: int, cap: int, bits: int = 8):
    f, days = fold_with_days(_agg(seed))
    b = _bounded(f, _options(f), cap, U, np.random.default_rng(seed + 7), bits, windows=True, days=days)
    lat = lattice_values(f, U, granularity_bits=bits)
    kept = np.zeros(f.samples.values.size, dtype=bool)
    capped_records(f, np.ones(f.n_pairs, bool), cap, np.random.default_rng(seed + 7), lat, record_kept=kept)
    owner = np.repeat(np.arange(f.n_pairs), np.diff(f.samples.offsets))
    rec = pd.DataFrame({"user": f.pair_user[owner], "node": b.cands[0].code[f.pair_grid[owner]],
                        "day": days.astype(np.int64), "y": lat.y})[kept]
    return b, rec


@pytest.mark.parametrize("seed", [0, 3])
def test_day_sums_and_the_nested_statistic_match_a_direct_computation(seed):
    bits = 8
    b, rec = _folded_bounded(seed, cap=12, bits=bits)
    by_day = rec.groupby(["node", "day"])["y"].agg(["size", "sum"])
    R_d, Y_d = b.day_sums
    assert sorted(zip(R_d.tolist(), Y_d.tolist())) == sorted(zip(by_day["size"].tolist(), by_day["sum"].tolist()))
    by_node = rec.groupby("node")["y"].agg(["size", "sum"])
    np.testing.assert_array_equal(b.R[0][by_node.index], by_node["size"])  # the windows' sums are the days' sums
    np.testing.assert_array_equal(b.Y[0][by_node.index], by_node["sum"])
    d = nested_sumsq(R_d, Y_d, b.R[0], b.Y[0], bits=bits)
    # Σ_d R_d (ȳ_d − ȳ_w)² in units of λ = 2^-bits, computed in floats; the floors move it by < one per term
    mean_w = by_node["sum"] / by_node["size"]
    direct = sum(r * (y / r - mean_w[n]) ** 2 for (n, _), r, y in zip(by_day.index, by_day["size"], by_day["sum"])) / 2**bits
    assert d >= 0 and abs(d - direct) <= len(by_day) + len(by_node)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("cap", [1, 6, 30])
def test_one_user_moves_the_days_statistic_by_at_most_its_sensitivity(seed, cap):
    """Brute force over every user: the statistic of all kept records minus that without the user's
    kept records (no other user's change) never exceeds ⌈T·(4K + 2)⌉."""
    bits = 8
    b, rec = _folded_bounded(seed, cap=cap, bits=bits)
    sens = between_sensitivity(half_sum=b.half_sum, bits=bits, cap=cap)
    assert sens == math.ceil(cap * (4 * Fraction(b.half_sum ** 2, 2 ** bits) + 2))

    def stat(r: pd.DataFrame) -> int:
        days = r.groupby(["node", "day"])["y"].agg(["size", "sum"])
        nodes = r.groupby("node")["y"].agg(["size", "sum"])
        return nested_sumsq(days["size"].to_numpy(), days["sum"].to_numpy(), nodes["size"].to_numpy(),
                            nodes["sum"].to_numpy(), bits=bits)

    d = stat(rec)
    assert d == nested_sumsq(*b.day_sums, b.R[0], b.Y[0], bits=bits)
    worst = max(abs(d - stat(rec[rec["user"] != u])) for u in np.unique(rec["user"]))
    assert worst <= sens


def test_the_days_statistic_bound_holds_at_its_worst_case():
    """The proof's extreme step: a window of n records at −H on one day, then a user's T records at
    +H on another day of the same window — the window's sum of squares rises by nearly 4H² per
    record, the day's not at all: the statistic moves by at most the sensitivity, by more than half
    of it for a large window."""
    H, bits, T = 1000, 4, 7
    sens = between_sensitivity(half_sum=H, bits=bits, cap=T)
    for n in (1, 5, 400):
        before = nested_sumsq(np.array([n]), np.array([-n * H]), np.array([n]), np.array([-n * H]), bits=bits)
        after = nested_sumsq(np.array([n, T]), np.array([-n * H, T * H]), np.array([n + T]),
                             np.array([-n * H + T * H]), bits=bits)
        assert before == 0 and 0 < after - before <= sens
        if n == 400:
            assert after - before > sens / 2


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_a_component_outside_the_measured_sum_against_a_brute_force_integral(family):
    """One component σ² with a peaked likelihood, a measurement V̂ of σ² alone, and a component τ
    outside the sum with its own noisy measurement, all on the region {σ² + τ ≤ cap}: the posterior
    means of :func:`joint_prior_posteriors` (``outside``) against a fine 2-D grid integral."""
    cap = 40.0
    grid = np.linspace(0.0, cap, 401)
    ll_s = -0.5 * ((grid - 12.0) / 5.0) ** 2
    total, days = (15.0, 6.0, family), (20.0, 8.0, family)

    def meas(u, m):
        r = (m[0] - u) / m[1]
        return -math.sqrt(2.0) * np.abs(r) if m[2] == "laplace" else -0.5 * r * r

    u, (p_s, p_t) = joint_prior_posteriors(cap, [grid], [ll_s], total, outside=(grid, meas(grid, days)))
    s, t = np.meshgrid(np.linspace(0, cap, 1601), np.linspace(0, cap, 1601), indexing="ij")
    w = np.exp(np.interp(s, grid, ll_s) + meas(s, total) + meas(t, days)) * (s + t <= cap)
    assert float(np.sum(u * p_s)) == pytest.approx(float((w * s).sum() / w.sum()), rel=0.01)
    assert float(np.sum(u * p_t)) == pytest.approx(float((w * t).sum() / w.sum()), rel=0.01)
    # without the outside component the inside one has the region to itself: the old posterior
    _, (alone,) = joint_prior_posteriors(cap, [grid], [ll_s], total)
    w1 = np.exp(np.interp(grid, grid, ll_s) + meas(grid, total))
    assert float(np.sum(u * alone)) == pytest.approx(float((w1 * grid).sum() / w1.sum()), rel=0.01)
