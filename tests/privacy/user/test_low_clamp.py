"""The engine's lower clamp A (models/engine.md §2): each user's vote is its own (U less its 1st
percentile), one user moves the vote histogram by at most 1, the rule equals its definition written
out bin by bin, the three bounds' histograms spend ε_b exactly, the lattice reads values clamped to
[A, B] with the sensitivity of B − A, and a release of values high in their declared range publishes
A, means inside [A, B] and narrower intervals than the same release without A."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt.noise.sources import SeededSource
from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.privacy.user.bounding import lattice_values
from dpopt.privacy.user.place_bounds import (TWO_SIDED_CAP_SHARE, choose_low_clamp, choose_place_bounds,
                                             clamp_votes, user_statistics)
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import release_user
from tests.privacy.user.conftest import CELLS, SLOT_NS, make_agg


def _records(rng: np.random.Generator, n_users: int, low: float = 0.0, high: float = 120.0) -> list:
    rows = []
    for u in range(n_users):
        for g in rng.choice(12, size=int(rng.integers(1, 13)), replace=False):
            for t in range(int(rng.integers(1, 30))):
                rows.append((f"u{u}", int(g), t, float(rng.choice([rng.uniform(low, high), low, high]))))
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_a_users_lower_vote_is_its_own_first_percentile_reflected(seed):
    """user_statistics(reflect=True) per user = the 99th percentile (inverted cdf) of the steps
    ⌈(U − x)/(U/16)⌉ of its own values, i.e. U less its 1st percentile, alone as in a joint run."""
    rng = np.random.default_rng(seed)
    rows = _records(rng, 7)
    agg = make_agg(rows)
    _, joint = user_statistics(agg, np.ones(agg.n_pairs, bool), 120.0, reflect=True)
    for ui, name in enumerate(sorted({r[0] for r in rows})):
        values = np.array([r[3] for r in rows if r[0] == name])
        steps = np.clip(np.ceil((120.0 - values) / 7.5), 1, 16)
        alone = make_agg([r for r in rows if r[0] == name])
        _, own = user_statistics(alone, np.ones(alone.n_pairs, bool), 120.0, reflect=True)
        assert own[0] == joint[ui] == int(np.quantile(steps, 0.99, method="inverted_cdf"))


@pytest.mark.parametrize("seed", range(3))
def test_the_two_sided_bounds_read_both_votes_in_one_pass_as_two_would(seed):
    """choose_place_bounds(two_sided=True) reads the upper and lower votes in one pass
    (place_bounds._user_votes); each equals user_statistics' own pass, and the three histograms
    equal the ones drawn from the separate passes with the same draws."""
    from dpopt.privacy.user.place_bounds import _user_votes, measure_clamp_histogram
    rng = np.random.default_rng(seed)
    agg = make_agg(_records(rng, 9, low=20.0, high=110.0))
    ok = np.ones(agg.n_pairs, bool)
    n, (up, low) = _user_votes(agg, ok, 120.0, (False, True))
    n1, up1 = user_statistics(agg, ok, 120.0)
    _, low1 = user_statistics(agg, ok, 120.0, reflect=True)
    assert np.array_equal(n, n1) and np.array_equal(up, up1) and np.array_equal(low, low1)
    pb = choose_place_bounds(agg, ok, 1.0, bound=120.0, source=SeededSource(seed), two_sided=True)
    src = SeededSource(seed)
    from dpopt.privacy.user.place_bounds import measure_record_histogram
    eps_cap = TWO_SIDED_CAP_SHARE
    assert np.array_equal(pb.histogram, measure_record_histogram(n1, eps_cap, src))
    assert np.array_equal(pb.clamp_histogram, measure_clamp_histogram(up1, 0.25, src))
    assert np.array_equal(pb.low_histogram, measure_clamp_histogram(low1, 0.25, src))


@pytest.mark.parametrize("seed", range(4))
def test_the_lower_vote_histogram_moves_by_at_most_one_per_user(seed):
    """Removing any user, or adding one, moves the exact lower-vote histogram by exactly 1 in ℓ1."""
    rng = np.random.default_rng(seed)
    rows = _records(rng, 8)
    newcomer = [("new", 3, t, float(rng.uniform(0, 120))) for t in range(4)]

    def votes(records):
        agg = make_agg(records)
        return np.bincount(clamp_votes(user_statistics(agg, np.ones(agg.n_pairs, bool), 120.0, reflect=True)[1]),
                           minlength=16)

    base = votes(rows)
    for drop in sorted({r[0] for r in rows}):
        assert np.abs(base - votes([r for r in rows if r[0] != drop])).sum() == 1
    assert np.abs(votes(rows + newcomer) - base).sum() == 1


def _low_by_definition(votes: np.ndarray, eps: float, U: float, B: float) -> float:
    """Bin i of the lower votes stands for A = U·(15 − i)/16; the bins with ≥ ln(16/0.02)/ε users
    count; A is one step (U/16) below the smallest counted A (every counted group keeps its low
    values, and the users of the bin below it), 0 if none counts, and at most B − U/16."""
    t = np.log(16 / 0.02) / eps
    counted = [U * (15 - i) / 16 for i in range(16) if votes[i] >= t]
    low = min(counted) - U / 16 if counted else 0.0
    return max(0.0, min(low, B - U / 16))


@pytest.mark.parametrize("seed", range(8))
def test_the_low_clamp_rule_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    eps = float(rng.choice([0.05, 0.5, 2.0]))
    h = np.rint(rng.laplace(0, 1 / eps, 16) + rng.choice([0, 0, 40, 200], 16))
    B = float(7.5 * rng.integers(1, 17))
    assert choose_low_clamp(h, eps, 120.0, B) == _low_by_definition(h, eps, 120.0, B)


def test_the_low_clamp_by_hand():
    """Values in the top of the range: users' 1st percentiles at 85–95 of 100 vote bins 0–2 reflected
    (A = 93.75, 87.5, 81.25); A is one step below the lowest bin that counts."""
    h = np.zeros(16)
    h[[1, 2]] = [120, 80]  # A = 87.5 (120 users), 81.25 (80 users)
    assert choose_low_clamp(h, 0.5, 100.0, 100.0) == 75.0
    assert choose_low_clamp(h, 0.05, 100.0, 100.0) == 0.0  # threshold 134: nothing counts, no clamp
    assert choose_low_clamp(h, 0.5, 100.0, 81.25) == 75.0  # never narrower than one step: B − U/16
    assert choose_low_clamp(h, 0.5, 100.0, 78.0) == 71.75
    h[2] = 10  # the 81.25 bin hidden by the noise (threshold 13.4): its users keep their values by the step
    assert choose_low_clamp(h, 0.5, 100.0, 100.0) == 81.25
    h[15] = 30  # 30 users whose values reach 0: the low end stays 0
    assert choose_low_clamp(h, 0.5, 100.0, 100.0) == 0.0


@pytest.mark.parametrize("eps_b", [0.15, 0.1, 1.5, 0.3 * 7 / 3, 1e-3])
def test_two_sided_bounds_spend_eps_b_exactly(monkeypatch, eps_b):
    """The three histograms run at ε_b/2, ε_b/4, ε_b/4, adding up to ε_b exactly (as rationals)."""
    import dpopt.privacy.user.place_bounds as pb_mod

    seen = []
    real_q, real_h = pb_mod.measure_clamp_histogram, pb_mod.measure_record_histogram
    monkeypatch.setattr(pb_mod, "measure_clamp_histogram", lambda q, e, s: seen.append(e) or real_q(q, e, s))
    monkeypatch.setattr(pb_mod, "measure_record_histogram", lambda n, e, s: seen.append(e) or real_h(n, e, s))
    agg = make_agg(_records(np.random.default_rng(2), 8))
    pb = choose_place_bounds(agg, np.ones(agg.n_pairs, bool), eps_b, bound=120.0, source=SeededSource(3),
                             two_sided=True)
    assert len(seen) == 3 and sum(map(Fraction, seen)) == Fraction(eps_b)
    assert seen[0] == eps_b * TWO_SIDED_CAP_SHARE and seen[1] == seen[2]
    assert pb.low_histogram is not None and 0.0 <= pb.clamp_low < pb.clamp


@pytest.mark.parametrize("low", [0.0, 7.5, 52.5, 112.5])
def test_the_lattice_reads_values_clamped_to_low_and_bound(low):
    """y = rint((clip(x, A, U) − (A + U)/2)/λ), z = rint(((…)² − (U − A)²/8)/λ), their half-ranges
    those of the bound U − A: every sensitivity is that of the narrower range."""
    agg = make_agg(_records(np.random.default_rng(5), 6))
    lat = lattice_values(agg, 120.0, granularity_bits=6, low=low)
    lam, W = 2.0**-6, 120.0 - low
    x = np.clip(agg.samples.values, low, 120.0) - (low + 120.0) / 2.0
    np.testing.assert_array_equal(lat.y, np.rint(x / lam).astype(np.int64))
    np.testing.assert_array_equal(lat.z, np.rint((x * x - W * W / 8.0) / lam).astype(np.int64))
    assert lat.half_sum == np.ceil(W / 2 / lam) and np.abs(lat.y).max() <= lat.half_sum
    assert np.abs(lat.z).max() <= lat.half_sumsq == np.ceil(W * W / 8 / lam)


@pytest.mark.parametrize("bad", [-1.0, 120.0, 130.0, float("nan")])
def test_a_lower_clamp_outside_the_range_is_refused(bad):
    agg = make_agg(_records(np.random.default_rng(5), 2))
    with pytest.raises(ValueError, match="`low` must be in"):
        lattice_values(agg, 120.0, low=bad)


def _high_records(rng: np.random.Generator) -> list:
    """300 users over 48 grids (6 cells × 8 slots), values 80 + 2·cell + slot/2 + N(0, 2²) clipped
    to [0, 100]: the whole data in the top fifth of the declared range."""
    rows = []
    for u in range(300):
        for g in rng.choice(48, size=int(rng.integers(4, 16)), replace=False):
            for t in range(int(rng.integers(2, 8))):
                rows.append((f"u{u}", int(g), t, float(np.clip(80 + 2 * (g % 6) + (g // 6) / 2 + rng.normal(0, 2), 0, 100))))
    return rows


def test_values_high_in_their_range_are_measured_on_their_own_range(monkeypatch):
    """The same release with A and with A forced to 0: A is published (≥ 60: the users' 1st
    percentiles lie at 75–85, A one step below), every mean lies in [A, B], and the intervals and the errors against
    the grids' own truths are smaller (the sensitivity of B − A instead of B), the intervals still
    covering."""
    import dpopt.privacy.user.place_bounds as pb_mod

    rows = _high_records(np.random.default_rng(0))
    agg = make_agg(rows)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    truth = pd.DataFrame(rows, columns=["u", "g", "t", "v"]).groupby("g")["v"].mean().reindex(range(48))

    def run():
        r = release_user(agg, Budget(epsilon_total=5.0), UserOptions(partitions=parts), bound=100.0,
                         noise=NoiseOptions(seed=4))
        t, ans = r.estimates.table, r.estimates.answers
        g = (ans["slot"].to_numpy() // SLOT_NS) * 6 + np.array([CELLS.index(c) for c in ans["cell"]])
        mean, hw = t["mean"].to_numpy()[ans["node"]], t["mean_error_bound"].to_numpy()[ans["node"]]
        return r, mean, hw, np.abs(mean - truth.to_numpy()[g])

    r, mean, hw, err = run()
    s = r.summary
    assert s.clamp_low >= 60.0 and s.clamp_low_histogram is not None
    assert ((mean >= s.clamp_low - 1e-9) & (mean <= s.clamp + 1e-9)).all()
    monkeypatch.setattr(pb_mod, "choose_low_clamp", lambda *a, **k: 0.0)
    r0, mean0, hw0, err0 = run()
    assert r0.summary.clamp_low == 0.0
    # seed 4: half-width 3.39 against 10.6, median error 1.08 against 2.96, coverage 0.96 against 1.0
    assert np.median(hw) < 0.6 * np.median(hw0) and np.median(err) < 0.6 * np.median(err0)
    assert np.mean(err <= hw) >= 0.9
