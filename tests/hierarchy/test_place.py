"""The ``place`` release (models/hierarchy.md §14): the per-user record cap by systematic sampling,
the DP choice of (T, B), the levels, explicit level shares and the front door option."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.hierarchy.tree import HOUR_NS, Level, build_hierarchy, place_levels
from dpopt.noise.sources import SeededSource
from dpopt.privacy.user.sensitivity import sensitivities
from dpopt.privacy.user.record_cap import capped_records
from tests.privacy.user.conftest import make_agg


def _random_records(rng, n_users, n_grids=12):
    rows = []
    for u in range(n_users):
        for g in rng.choice(n_grids, size=int(rng.integers(1, n_grids + 1)), replace=False):
            for t in range(int(rng.integers(1, 30))):
                rows.append((f"u{u}", int(g), t, float(rng.uniform(0, 120))))
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cap", [1, 3, 10, 50, 1000])
def test_cap_invariants(seed, cap):
    """0 ≤ Γ_p ≤ m_p, Σ_p Γ_p = min(T, n_ℓ) for every user (systematic sampling keeps exactly T of a
    user above the cap), nothing kept off the eligible pairs."""
    rng = np.random.default_rng(seed)
    agg = make_agg(_random_records(rng, 7))
    eligible = rng.random(agg.n_pairs) < 0.8
    gamma, _, _ = capped_records(agg, eligible, cap, np.random.default_rng(seed + 100))
    assert np.all(gamma >= 0) and np.all(gamma <= agg.count)
    assert np.all(gamma[~eligible] == 0)
    n_user = np.bincount(agg.pair_user, weights=np.where(eligible, agg.count, 0), minlength=agg.n_users)
    kept = np.bincount(agg.pair_user, weights=gamma, minlength=agg.n_users)
    np.testing.assert_array_equal(kept, np.minimum(n_user, cap))


def test_cap_is_proportional_on_average():
    """E[Γ_p] = T·m_p/n_ℓ: over many draws a pair keeps its share of the user's records (the
    property that removes the dwelling bias of "first c records per pair")."""
    rows = [("a", 0, t, 10.0) for t in range(40)] + [("a", 1, t, 50.0) for t in range(10)]
    agg = make_agg(rows)
    means = np.mean([capped_records(agg, np.ones(agg.n_pairs, bool), 10, np.random.default_rng(s))[0]
                     for s in range(400)], axis=0)
    order = np.argsort(-agg.count)
    np.testing.assert_allclose(means[order], [8.0, 2.0], atol=0.15)


class _KeyQueue:
    """An integer source that hands out given 64-bit keys in order (tie_keys reads m keys per
    randbelow(2^(64·m)) call, little-endian)."""

    def __init__(self, keys):
        self.keys = [int(k) for k in keys]

    def randbelow(self, bound):
        m = (int(bound).bit_length() - 1) // 64
        chunk, self.keys = self.keys[:m], self.keys[m:]
        return sum(k << (64 * i) for i, k in enumerate(chunk))


@pytest.mark.parametrize("seed", range(6))
def test_a_users_kept_records_depend_on_its_own_records_and_keys_only(seed):
    """The neighbour argument, computed: in a joint run each user keeps exactly what it keeps when
    it is alone with the same keys (its pairs' keys and its offset), so adding or removing any other
    user changes nothing of its kept records, and the user itself moves at most T records."""
    rng = np.random.default_rng(seed)
    rows = _random_records(rng, 5)
    agg = make_agg(rows)
    T = int(rng.integers(1, 30))
    pair_keys = rng.integers(0, 2**63, size=agg.n_pairs)
    user_keys = rng.integers(0, 2**63, size=agg.n_users)
    joint = capped_records(agg, np.ones(agg.n_pairs, bool), T, _KeyQueue([*pair_keys, *user_keys]))[0]
    users = sorted({r[0] for r in rows})
    for ui, name in enumerate(users):
        alone = make_agg([r for r in rows if r[0] == name])
        mine = np.flatnonzero(agg.pair_user == ui)       # the same pairs, in the same order
        assert alone.n_pairs == mine.size and alone.n_users == 1
        gamma = capped_records(alone, np.ones(alone.n_pairs, bool), T, _KeyQueue([*pair_keys[mine], user_keys[ui]]))[0]
        np.testing.assert_array_equal(gamma, joint[mine])
        assert gamma.sum() <= T


@pytest.mark.parametrize("seed", range(4))
def test_capped_level_sensitivity_one_user(seed):
    """A user alone moves a capped level by at most ℓ1 = ℓ2 = T·(1, H_Y, H_Z)
    (sensitivities(1, T) with capacities 1), attained when all its kept records fall in one node."""
    from dpopt.privacy.user.bounding import lattice_values
    from dpopt.privacy.user.levels import _per_level_sums
    from dpopt.privacy.user.partitions import PartitionList

    rng = np.random.default_rng(seed)
    agg = make_agg(_random_records(rng, 1))
    T = int(rng.integers(1, 40))
    H = build_hierarchy(agg.cells, agg.slots, place_levels(7, HOUR_NS, coarsest_resolution=5))
    lat = lattice_values(agg, 120.0, granularity_bits=0)
    lb = [None, T, T]
    sums = np.array(_per_level_sums(agg, PartitionList.from_grids(agg.cells, agg.slots), H, lb, lat,
                                    np.random.default_rng(seed), shared=[np.zeros(len(H.nodes), dtype=np.int64)] * 3),
                    dtype=float)
    lev = H.nodes["level"].to_numpy()
    n = int(agg.count.sum())
    for li in (1, 2):
        d = sums[:, lev == li]
        sv = sensitivities(1, T, 120.0, lam=lat.lam, capacities=np.ones(d.shape[1], dtype=np.int64))
        assert d[0].sum() == min(n, T)
        assert np.abs(d[0]).sum() <= sv.count_l1 and np.abs(d[1]).sum() <= sv.sum_l1_units
        assert np.abs(d[2]).sum() <= sv.sumsq_l1_units
        for s, l2 in enumerate((sv.count_l2, sv.sum_l2_units, sv.sumsq_l2_units)):
            assert (d[s] ** 2).sum() <= l2 ** 2 + 1e-6
    assert sensitivities(1, T, 120.0, lam=lat.lam, capacities=np.ones(3, dtype=np.int64)).count_l2 >= T


def test_place_levels():
    lv = place_levels(7, HOUR_NS)
    assert lv == (Level(7, HOUR_NS), Level(7, 0), Level(3, 0))
    assert place_levels(7, HOUR_NS, coarsest_resolution=6) == (Level(7, HOUR_NS), Level(7, 0), Level(6, 0))
    with pytest.raises(DpoptInputError, match="coarsest_resolution"):
        place_levels(7, HOUR_NS, coarsest_resolution=7)


@pytest.mark.parametrize("bad", [[0.5, 0.5], [0.2, 0.2, 0.2, 0.2, 0.1, -0.1], [0, 0, 0, 0, 0, 0], "x",
                                 [0.1] * 5 + [float("nan")]])
def test_explicit_level_shares_refused(bad):
    from dpopt.privacy.user.levels import _fixed_shares

    with pytest.raises(DpoptInputError, match="level_split"):
        _fixed_shares(bad, 6)


def test_explicit_level_shares_measure_only_those_levels():
    """Shares (0, 0.7, 0, 0.3): only levels 1 and the last carry budget, no pilot counts, and the
    recounted spend equals the total."""
    from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels
    from dpopt.privacy.user.partitions import PartitionList

    rng = np.random.default_rng(3)
    agg = make_agg(_random_records(rng, 30))
    lv = (Level(7, HOUR_NS), Level(7, 0), Level(6, 0), Level(5, 0))
    m = measure_levels(agg, PartitionList.from_grids(agg.cells, agg.slots), bound=120.0, bounds=(1, 1), epsilon=2.0,
                       plan=LevelPlan(levels=lv, level_bounds=[None, 40, None, 40], level_split=[0, 0.7, 0, 0.3]),
                       sampling=LevelNoise(noise="numpy", seed=1))
    lev = m.nodes["level"].to_numpy()
    cnt = m.statistics["count"].value
    assert np.all(np.isfinite(cnt[(lev == 1) | (lev == 3)])) and np.all(np.isnan(cnt[(lev == 0) | (lev == 2)]))
    assert np.all(np.isnan(m.statistics["count_pilot"].value))
    assert m.spend.total == pytest.approx(2.0, rel=1e-9)
    assert not any("pilot" in k for k in m.spend.pieces)


def _cap_by_definition(n_user, tolerance=0.5):
    """The cap rule written out per user: user ℓ in bin (lo, hi] of 0, 1, 4, …, 4096 (or above)
    stands at √((lo + 1)·hi) records (2·4096 above); S(T) sums min(that, T) over users; T is the
    largest candidate with T/S(T) ≤ (1 + tolerance)·min."""
    edges = [0, 1, 4, 16, 64, 256, 1024, 4096]
    reps = []
    for n in n_user:
        for lo, hi in zip(edges[:-1], edges[1:]):
            if lo < n <= hi:
                reps.append(np.sqrt((lo + 1.0) * hi))
                break
        else:
            reps.append(2.0 * 4096)
    factor = {T: T / sum(min(r, T) for r in reps) for T in (1, 4, 16, 64, 256, 1024, 4096)}
    best = min(factor.values())
    return max(T for T, f in factor.items() if f <= (1 + tolerance) * best)


def test_place_bounds_choose_cap_and_clamp():
    """At a large ε_b the histogram is exact and the quantile lands on the exact one: T the cap rule
    applied to the users' record counts (written out per user), B the U/16 step at the 75th
    percentile of users' own 99th percentiles (brute force from the records)."""
    from dpopt.privacy.user.place_bounds import CLAMP_STEPS, choose_place_bounds

    rng = np.random.default_rng(5)
    rows = []
    for u in range(41):
        hi = float(rng.choice([30.0, 45.0, 60.0, 100.0], p=[0.3, 0.4, 0.2, 0.1]))
        for t in range(int(rng.choice([rng.integers(20, 60), rng.integers(100, 900)]))):
            rows.append((f"u{u}", int(rng.integers(0, 12)), t, float(rng.uniform(0, hi))))
    agg = make_agg(rows)
    pb = choose_place_bounds(agg, np.ones(agg.n_pairs, bool), 200.0, bound=120.0, source=SeededSource(1))
    frame = pd.DataFrame(rows, columns=["user", "grid", "t", "value"])
    n_user = frame.groupby("user").size().to_numpy()
    assert pb.cap == _cap_by_definition(n_user)
    np.testing.assert_array_equal(pb.histogram, np.bincount(np.searchsorted([1, 4, 16, 64, 256, 1024, 4096], n_user),
                                                            minlength=8))
    own = frame.groupby("user")["value"].apply(
        lambda v: int(np.ceil(np.quantile(np.sort(np.ceil(v / 7.5)), 0.99, method="inverted_cdf")))).to_numpy()
    # the clamp: 75th percentile of the users' votes, raised to min(8, the highest vote) (every bin
    # holding a user clears the threshold at this ε), brute force
    votes = np.sort(own)
    assert pb.clamp == 7.5 * max(int(votes[int(np.ceil(0.75 * votes.size)) - 1]), min(int(votes[-1]), 8))
    np.testing.assert_array_equal(pb.clamp_histogram, np.bincount(own - 1, minlength=CLAMP_STEPS))


def _clamp_by_definition(votes: np.ndarray, eps: float, quantile: float = 0.75) -> int:
    """The clamp rule written out on the vote histogram (bin i: step i + 1): bins with ≥ ln(16/0.02)/ε
    users count; B's step is the smallest vote v with #{counted users ≤ v} ≥ quantile·#{counted
    users}, raised to min(8, the highest counted vote); 16 (B = U) if none counts."""
    t = np.log(16 / 0.02) / eps
    counted = [v for v in range(1, 17) if votes[v - 1] >= t]
    pool = sorted(v for v in counted for _ in range(int(votes[v - 1])))
    if not pool:
        return 16
    q = min(v for v in range(1, 17) if sum(1 for x in pool if x <= v) >= quantile * len(pool))
    return max(q, min(max(counted), 8))


@pytest.mark.parametrize("seed", range(8))
def test_clamp_rule_matches_its_definition(seed):
    """choose_clamp on random (noisy-looking) histograms = the rule written out user by user (bins with
    ≥ ln(16/0.02)/ε users count)."""
    from dpopt.privacy.user.place_bounds import choose_clamp

    rng = np.random.default_rng(seed)
    eps = float(rng.choice([0.05, 0.5, 5.0]))
    h = np.maximum(rng.integers(-20, 120, size=16) * (rng.random(16) < 0.7), -5)
    assert choose_clamp(h, eps, 120.0) == 7.5 * _clamp_by_definition(h, eps)


def test_clamp_rule_hand_worked():
    """Worked by hand at ε = 0.5 (threshold ln(16/0.02)/0.5 = 13.4 users, U = 120, steps of 7.5): only
    the bins with ≥ 14 users count; B's step is the 75th percentile of the users in them, raised to
    min(8, the highest counted bin)."""
    from dpopt.privacy.user.place_bounds import choose_clamp

    low = [0] * 7
    assert choose_clamp(np.array(low + [10, 45, 31, 15, 2, 0, 0, 0, 0]), 0.5, 120.0) == 75.0  # 91 users, the 69th: step 10
    assert choose_clamp(np.array(low + [118, 165, 106, 19, 10, 20, 27, 5, 14]), 0.5, 120.0) == 75.0  # 469, the 352nd
    assert choose_clamp(np.array([12, 12, 12] + [0] * 13), 0.5, 120.0) == 120.0  # nothing counts: U
    assert choose_clamp(np.array([12, 12, 12] + [0] * 12 + [14]), 0.5, 120.0) == 120.0  # a lone top bin counts
    assert choose_clamp(np.array(low + [100, 0, 0, 100, 0, 0, 0, 0, 0]), 0.5, 120.0) == 82.5  # the 150th of 200: step 11
    assert choose_clamp(np.array(low + [100, 0, 0, 100, 0, 0, 0, 0, 0]), 0.05, 120.0) == 120.0  # threshold 134: U
    # values that sit low in [0, U] (the sensors' own histogram): every counted bin is at or below step 5,
    # so B follows the data below U/2 — the 75th percentile is step 4, the highest counted bin step 5
    assert choose_clamp(np.array([0, 0, 6, 371, 23] + [0] * 11), 0.5, 120.0) == 37.5
    assert choose_clamp(np.array([0, 0, 6, 371, 23] + [0] * 11), 0.05, 120.0) == 30.0  # only step 4 counts
    # a tail that tens of users reach keeps B at U/2 or above however low the 75th percentile lies
    assert choose_clamp(np.array([0, 0, 300, 100] + [0] * 11 + [20]), 0.5, 120.0) == 60.0
    assert choose_clamp(np.array([0, 0, 300, 100, 0, 0, 20] + [0] * 9), 0.5, 120.0) == 52.5  # highest counted: step 7
    with pytest.raises(ValueError, match="`counts` must hold 16 bins"):
        choose_clamp(np.zeros(9), 0.05, 120.0)
    with pytest.raises(ValueError, match="`quantile` must be in"):
        choose_clamp(np.zeros(16), 0.05, 120.0, quantile=1.5)


@pytest.mark.parametrize("n", [1, 2, 3, 9, 32, 129, 512])
def test_clamp_quantile_against_simulated_users(n):
    """clamp_quantile's share = the share of simulated users whose own vote (user_statistics, the
    rule the release runs) lies at or below the step above which exactly 1 % of every user's values
    lie: 4,000 users of n records each, values uniform within their step, P(step 16) = 0.01; the
    histogram of records per user holds them all in n's bin (n is that bin's rounded representative)."""
    from scipy.stats import binom

    from dpopt.privacy.user.place_bounds import CLAMP_USER_QUANTILE, RECORD_BIN_EDGES, clamp_quantile, user_statistics

    rng = np.random.default_rng(n)
    users = 4000
    top = rng.random((users, n)) < 0.01
    values = np.where(top, rng.uniform(112.5, 120.0, (users, n)), rng.uniform(0.0, 112.5, (users, n)))
    rows = [(f"u{u}", int(rng.integers(0, 12)), i, float(values[u, i])) for u in range(users) for i in range(n)]
    agg = make_agg(rows)
    counts, q = user_statistics(agg, np.ones(agg.n_pairs, bool), 120.0)
    simulated = float(np.mean(q <= 15))
    h = np.zeros(RECORD_BIN_EDGES.size + 1)
    h[np.searchsorted(RECORD_BIN_EDGES, n)] = users
    exact = float(binom.cdf(n - np.ceil(0.99 * n), n, 0.01))  # written out for this n
    assert abs(simulated - exact) < 4 * np.sqrt(exact * (1 - exact) / users) + 1e-9
    assert clamp_quantile(h) == pytest.approx(max(CLAMP_USER_QUANTILE, exact), abs=0.02)  # the bin's representative


def test_clamp_quantile_mixes_bins_and_falls_back():
    """A mixture of bins is the users' average; an empty or missing histogram gives the floor; a
    histogram of the wrong shape is refused naming the argument."""
    from dpopt.privacy.user.place_bounds import CLAMP_USER_QUANTILE, clamp_quantile

    h = np.array([300.0, 100, 0, 0, 0, 0, 0, 0])  # 300 one-record users, 100 at 3 records
    assert clamp_quantile(h) == pytest.approx((300 * 0.99 + 100 * 0.99 ** 3) / 400)
    assert clamp_quantile(np.array([0.0, 0, 0, 0, 50, 50, 0, 0])) == CLAMP_USER_QUANTILE  # hundreds of records
    assert clamp_quantile(np.zeros(8)) == clamp_quantile(None) == CLAMP_USER_QUANTILE
    assert clamp_quantile(np.array([-5.0, 0, 0, 0, 0, 0, 0, 0])) == CLAMP_USER_QUANTILE  # noise below 0 is no user
    with pytest.raises(ValueError, match="`record_counts` must hold 8 bins"):
        clamp_quantile(np.zeros(3))


def test_one_record_users_are_not_clamped_at_their_75th_percentile():
    """3,000 users with one record each, values uniform on [0, 120] (every user's vote is its one
    value): at ε_b = 1.5 (ε = 10) B is the step above which ≤ 1 % of the values lie (120: step 16),
    where the 75th percentile of the votes clamped a quarter of the records at 90 (models/engine.md §6)."""
    from dpopt.privacy.user.place_bounds import choose_place_bounds

    rng = np.random.default_rng(4)
    agg = make_agg([(f"u{u}", int(rng.integers(0, 12)), 0, float(rng.uniform(0, 120))) for u in range(3000)])
    clamps = [choose_place_bounds(agg, np.ones(agg.n_pairs, bool), 1.5, bound=120.0, source=SeededSource(s)).clamp
              for s in range(5)]
    values = agg.samples.values
    assert all(np.mean(values > b) <= 0.02 for b in clamps), clamps


@pytest.mark.parametrize("seed", range(4))
def test_clamp_histogram_sensitivity_one(seed):
    """Removing any user, or adding a new one, moves the exact clamp-vote histogram by exactly 1 in
    ℓ1 when that user holds a record of a listed grid and by 0 otherwise; the public list is a
    random part of the grids (unlisted grids' records cast no vote), values include 0, U and exact
    steps U·j/16."""
    from dpopt.privacy.user.place_bounds import clamp_votes, user_statistics
    from tests.privacy.user.conftest import CELLS, SLOT_NS

    rng = np.random.default_rng(seed)
    rows = [(u, g, t, float(rng.choice([v, 0.0, 120.0, 7.5 * rng.integers(1, 17)]))) for u, g, t, v in
            _random_records(rng, 9)]
    newcomer = [("new", int(g), t, float(rng.uniform(0, 120))) for g in rng.choice(12, 3, replace=False)
                for t in range(int(rng.integers(1, 5)))]
    listed = set(rng.choice(12, 7, replace=False).tolist())

    def votes(records):
        agg = make_agg(records)
        keys = {(CELLS[g % 6], (g // 6) * SLOT_NS) for g in listed}
        eligible = np.array([(agg.cells[i], agg.slots[i]) in keys for i in agg.pair_grid])
        _, q = user_statistics(agg, eligible, 120.0)
        return np.bincount(clamp_votes(q), minlength=16)

    base = votes(rows)
    for drop in sorted({r[0] for r in rows}):
        mine = any(r[0] == drop and r[1] in listed for r in rows)
        assert np.abs(base - votes([r for r in rows if r[0] != drop])).sum() == int(mine)
    assert np.abs(votes(rows + newcomer) - base).sum() == int(any(r[1] in listed for r in newcomer))
    with pytest.raises(ValueError, match="`own_q` must hold steps"):
        clamp_votes(np.array([0, 3]))


@pytest.mark.parametrize("exact, steps", [([0, 0, 0, 2, 3, 6, 41, 45, 31, 15, 2, 1, 0, 0, 0, 0], (16,)),
                                          ([0, 0, 0, 1, 1, 7, 12, 97, 165, 106, 19, 10, 20, 27, 5, 14], (9, 10, 16)),
                                          ([0, 0, 6, 371, 23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], (4, 5))])
def test_clamp_is_stable_at_eps_1(exact, steps):
    """At ε_B = 0.05 (ε = 1) on the exact vote histograms of the Austin day (146 users), the full
    data (484 users) and the benchmark's sensors (400 users, values 15–60 of U = 200 read on U = 120's
    steps here), ≥ 97 % of 400 draws give B within ``steps``: on the day no bin clears its threshold
    of ≈ 134 users, so B = U (no evidence, no clamp); on the full data two adjacent steps, or U where
    the 165-user bin falls below the threshold (8 % of draws); on the sensors two adjacent steps. A
    phantom bin sends B elsewhere in ≤ 1 % of draws by design, plus the real upper bins that pass now
    and then. The permute-and-flip quantile it replaced spread over 60–120 km/h."""
    from dpopt.privacy.user.place_bounds import choose_clamp
    from dpopt.privacy.user.mechanism import DiscreteLaplace

    clamps = np.array([choose_clamp(DiscreteLaplace(SeededSource(s)).integer(np.array(exact), l1=1, l2=1.0, budget=0.05),
                                    0.05, 120.0) for s in range(400)])
    assert np.isin(clamps / 7.5, steps).mean() >= 0.97


@pytest.mark.parametrize("seed", range(6))
def test_cap_rule_matches_its_definition(seed):
    """choose_cap on exact histograms of random record counts = the rule written out per user."""
    from dpopt.privacy.user.place_bounds import RECORD_BIN_EDGES, choose_cap

    rng = np.random.default_rng(seed)
    n_user = np.rint(np.exp(rng.normal(rng.uniform(2, 8), rng.uniform(0.3, 2.0), size=int(rng.integers(5, 300)))))
    n_user = np.maximum(n_user, 1).astype(int)
    hist = np.bincount(np.searchsorted(RECORD_BIN_EDGES, n_user), minlength=RECORD_BIN_EDGES.size + 1)
    assert choose_cap(hist)[0] == _cap_by_definition(n_user)


def test_cap_rule_hand_cases():
    """Numbers worked by hand: 100 users in (256, 1024] (r = √(257·1024) = 513.0) and 100 in
    (1024, 4096] (r = 2049.0): T/S = 256/51200 = 0.00500, 1024/153700 = 0.00666 (1.33×, kept),
    4096/(51300 + 204900) = 0.0160 (3.2×) → T = 1024; users all in (4, 16] (r = √(5·16) = 8.94):
    T/S = 1/50 at T = 1 and 4, 16/447 = 1.79× at 16 → 4; users with one record each: T/S = T/n → 1;
    users all above 4096 → every T/S = 1/n, the largest; no users → the smallest, 1."""
    from dpopt.privacy.user.place_bounds import choose_cap, cap_noise_factor

    h = np.zeros(8)
    h[5] = h[6] = 100
    T, f = choose_cap(h)
    assert T == 1024
    np.testing.assert_allclose(f[4:], [256 / 51300.0, 1024 / 153700.0, 4096 / 256200.0], rtol=2e-3)
    assert choose_cap(np.array([0, 0, 50, 0, 0, 0, 0, 0]))[0] == 4
    np.testing.assert_allclose(cap_noise_factor(np.array([0, 0, 50, 0, 0, 0, 0, 0]))[:3],
                               [1 / 50, 4 / 200, 16 / (50 * np.sqrt(80))])
    assert choose_cap(np.array([400, 0, 0, 0, 0, 0, 0, 0]))[0] == 1
    assert choose_cap(np.array([0, 0, 0, 0, 0, 0, 0, 30]))[0] == 4096
    assert choose_cap(np.zeros(8))[0] == 1
    with pytest.raises(ValueError, match="counts"):
        cap_noise_factor(np.zeros(5))
    with pytest.raises(ValueError, match="tolerance"):
        choose_cap(h, tolerance=-0.5)


def test_cap_candidates_may_be_any_run_of_the_edges():
    """choose_cap takes a run of consecutive candidates (the engine without a list starts at 16):
    one-record users get the run's smallest; a gap or an unknown cap is refused naming the argument."""
    from dpopt.privacy.user.place_bounds import choose_cap

    ones = np.array([400, 0, 0, 0, 0, 0, 0, 0])
    assert choose_cap(ones)[0] == 1
    assert choose_cap(ones, candidates=np.array([16, 64, 256, 1024, 4096]))[0] == 16
    assert choose_cap(np.array([0, 0, 0, 0, 0, 100, 100, 0]), candidates=np.array([16, 64, 256, 1024]))[0] == 1024
    for bad in ([16, 256], [3, 4], []):
        with pytest.raises(ValueError, match="`candidates` must be a non-empty run"):
            choose_cap(ones, candidates=np.array(bad, dtype=np.int64))


def test_record_histogram_sensitivity_one():
    """One user sits in one bin: removing any user changes the exact histogram by exactly 1 in ℓ1
    (measured at a huge ε, where the discrete Laplace draws 0)."""
    from dpopt.privacy.user.place_bounds import measure_record_histogram

    n_user = np.array([1, 3, 4, 5, 16, 17, 200, 1024, 1025, 4096, 4097, 10 ** 6])
    full = measure_record_histogram(n_user, 1e6, SeededSource(0))
    np.testing.assert_array_equal(full, [1, 2, 2, 1, 1, 1, 2, 2])
    for i in range(n_user.size):
        assert np.abs(full - measure_record_histogram(np.delete(n_user, i), 1e6, SeededSource(0))).sum() == 1


def test_cap_choice_is_stable_at_small_epsilon():
    """The issue's stability goal on a day-like population (146 users, median ≈ 390 records, 24 below
    256, as on the Austin day) at ε_T = 0.1 (ε = 1): over 40 seeds T takes at most two adjacent
    candidates."""
    from dpopt.privacy.user.place_bounds import RECORD_EDGES, choose_cap, measure_record_histogram, record_counts

    n_user = np.r_[np.full(5, 40), np.full(19, 150), np.linspace(260, 560, 122).astype(int)]
    caps = set()
    for seed in range(40):
        noisy = measure_record_histogram(n_user, 0.1, SeededSource(seed))
        caps.add(choose_cap(record_counts(noisy, 0.1))[0])
    idx = sorted(int(np.flatnonzero(RECORD_EDGES == c)[0]) for c in caps)
    assert idx[-1] - idx[0] <= 1, caps


def test_phantom_light_users_do_not_move_the_cap():
    """210 users of 300–3,000 records (aircraft B's shape) at ε_T = 0.1: the cap rule's reference is
    1/N at T = 1, so phantom users in the bins below 16 (the noise of a rate-one denoising) lowered it
    and excluded T = 1024 in about a quarter of 200 draws; record_counts keeps only the bins a phantom
    reaches in ≤ 2 % of histograms: T = 1024 in at least 190 of 200 (the denoising at rate one, ≤ 170)."""
    from dpopt.privacy.user.place_bounds import choose_cap, measure_record_histogram, record_counts
    from dpopt.privacy.user.predict import denoise_histogram

    n_user = np.r_[np.full(114, 600), np.full(96, 2000)]
    strict = loose = 0
    for seed in range(200):
        noisy = measure_record_histogram(n_user, 0.1, SeededSource(seed))
        strict += choose_cap(record_counts(noisy, 0.1))[0] == 1024
        loose += choose_cap(denoise_histogram(noisy, 0.1))[0] == 1024
    assert strict >= 190 and loose <= 170, (strict, loose)


def test_place_option_checks():
    from dpopt.privacy.options import Budget
    from dpopt.privacy.user import UserOptions

    with pytest.raises(DpoptInputError, match="place.*partition list"):
        UserOptions(resolution="place")
    with pytest.raises(DpoptInputError, match="bounds"):
        UserOptions(partitions="x.csv", resolution="place", bounds=(4, 8))
    with pytest.raises(DpoptInputError, match="gaussian"):
        UserOptions(partitions="x.csv", resolution="place").check_budget(Budget(rho=1.0, mechanism="gaussian",
                                                                               delta=1e-6))


def _noise_var(scale_cells: float, scale_map: float):
    """Laplace noise variance 2b² with b ∝ 1/share (a level at share s has scale base/s)."""
    def var(level: str, stat: str, share: float) -> float:
        base = scale_cells if level == "cells" else scale_map
        b = base * (1.0 if stat == "count" else 30.0) / max(share, 1e-300)
        return 2.0 * b * b
    return var


def test_predicted_place_error_matches_its_formula():
    """The predicted error is Σ_v w_v·MSE_v/Σw + σ²_map, MSE_v = τ₀²s_v²/(τ₀²+s_v²) for a cell whose
    count clears the BLUP's SNR rule and τ₀² (answered by the map) for one that does not, computed
    here by hand: three cells, threshold 1.5 sds; the count's sd at f = 0.7 is √2·2/0.7 = 4.04, so
    the lower ends 80 and 380 clear 6.06 and 3 does not."""
    from dpopt.privacy.user.place_shares import predicted_place_error

    cells = np.array([100.0, 400.0, 5.0])
    low = np.array([80.0, 380.0, 3.0])
    nv = _noise_var(2.0, 3.0)
    h, tau0, f = 30.0, 5.0, 0.7
    assert np.sqrt(nv("cells", "count", f)) == pytest.approx(np.sqrt(2) * 2 / 0.7)
    s2 = (nv("cells", "sum", f) + h * h * nv("cells", "count", f)) / low**2
    mse = np.array([25.0 * s2[0] / (25.0 + s2[0]), 25.0 * s2[1] / (25.0 + s2[1]), 25.0])
    expect = np.sum(cells * mse) / cells.sum() + (nv("map", "sum", 0.3) + h * h * nv("map", "count", 0.3)) / 2000.0**2
    assert predicted_place_error(f, cells, low, 2000.0, h, tau0, nv) == pytest.approx(expect, rel=1e-12)
    assert predicted_place_error(0.0, cells, low, 2000.0, h, tau0, nv) == pytest.approx(
        25.0 + (nv("map", "sum", 1.0) + h * h * nv("map", "count", 1.0)) / 2000.0**2, rel=1e-12)


def test_place_share_measures_cells_only_when_they_pay():
    """Noisy cells (small counts or budget): f = 0, the map alone; precise cells: f > 0. The choice
    is the exhaustive argmin over the public candidates."""
    from dpopt.privacy.user.place_shares import CANDIDATES, place_share, predicted_place_error

    cells = np.full(20, 500.0)
    for scale, expect_cells in ((500.0, False), (0.05, True)):
        nv = _noise_var(scale, scale)
        f, scores = place_share(cells, cells, 10_000.0, 30.0, 5.0, nv)
        assert (f > 0) == expect_cells
        assert scores == [predicted_place_error(c, cells, cells, 10_000.0, 30.0, 5.0, nv) for c in CANDIDATES]
        assert f == CANDIDATES[int(np.argmin(scores))]


def test_the_engine_is_the_default_and_place_only_when_named():
    from dpopt.privacy.options import Budget
    from dpopt.privacy.user import UserOptions

    lap, gau = Budget(epsilon_total=1.0), Budget(rho=0.5, mechanism="gaussian")
    assert UserOptions(partitions="x.csv").engine and not UserOptions(partitions="x.csv").place_for(lap)
    assert UserOptions(partitions="x.csv").engine and not UserOptions(partitions="x.csv").place_for(gau)
    for kw in ({"bounds": (4, 8)}, {"bounds": "quantile"}, {"priority": "shared"}):  # no silent switch of strategy
        for strategy in ("optimised", "place"):
            with pytest.raises(DpoptInputError, match=f"`{next(iter(kw))}` = .* strategy='adaptive' or 'fixed'"):
                UserOptions(partitions="x.csv", strategy=strategy, **kw)
        assert UserOptions(partitions="x.csv", strategy="adaptive", **kw).adaptive
    with pytest.raises(DpoptInputError, match="`bounds` must be one of"):  # a malformed value is named as such
        UserOptions(partitions="x.csv", bounds="nope")
    assert UserOptions().engine and not UserOptions().place             # no list: the engine over selected cells
    assert not UserOptions(strategy="adaptive").engine                  # ... or the named private multi-resolution
    assert not UserOptions(partitions="x.csv", resolution="adaptive").place
    assert UserOptions(partitions="x.csv", strategy="place").place_for(lap)
    assert UserOptions(partitions="x.csv", resolution="place").place_for(lap)  # the old name of strategy
    with pytest.raises(DpoptInputError, match="disagree"):
        UserOptions(partitions="x.csv", strategy="place", resolution="fixed")
    # the refusals name the option the caller gave (a fuzz run: `--strategy place` without a list was
    # refused as "`resolution` = 'place' … use 'auto'", both the old names)
    with pytest.raises(DpoptInputError, match=r"^`strategy` = 'place' needs a public partition list .* the default "
                                              r"strategy 'optimised'"):
        UserOptions(strategy="place")
    with pytest.raises(DpoptInputError, match=r"^`resolution` = 'place' needs a public partition list"):
        UserOptions(resolution="place")
    with pytest.raises(DpoptInputError, match=r"is an option of strategy='adaptive' or 'fixed'; strategy='place'"):
        UserOptions(partitions="x.csv", strategy="place", bounds=(4, 8))
    with pytest.raises(DpoptInputError, match=r"; resolution='place' chooses"):
        UserOptions(partitions="x.csv", resolution="place", bounds=(4, 8))


@pytest.mark.parametrize("U", [120.0, 40.0])
def test_place_release_end_to_end_withholds_clamped_variance(U):
    """The front door on the embedded Austin day: the place release publishes cells or the map with
    finite intervals, a budget recount within ε, T and B from the candidates. At U = 120 the users'
    high values sit near 60 km/h, so B < U: every variance is withheld with the clamp reason and no
    budget buys a sum of squares. At U = 40 most users reach U, so B = U: the sums of squares are
    measured and some variances published."""
    from fractions import Fraction

    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import austin_sample_path, contributions, release_user

    agg, _ = contributions(austin_sample_path(), bound=U, keep_samples=True)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    r = release_user(agg, Budget(epsilon_total=10.0), UserOptions(partitions=parts, strategy="place"), bound=U,
                     noise=NoiseOptions(seed=7))
    s, t = r.summary, r.table
    assert s.shape == "place" and s.record_cap in (1, 4, 16, 64, 256, 1024, 4096) and U / 2 <= s.clamp <= U
    assert s.bound == U
    assert sum((Fraction(v) for v in s.budget.values()), Fraction(0)) <= 10
    assert set(t["h3_resolution"]) <= {7, 3} and len(t) > 0
    assert np.all(np.isfinite(t["mean_error_bound"])) and np.all(t["mean_error_bound"] > 0)
    sumsq = [k for k in s.budget if "sumsq" in k]
    if U == 120.0:
        assert s.clamp < U and not sumsq and not r.measurements.info["sumsq_measured"]
        assert not t["variance_released"].any()
        assert t["variance_withheld_reason"].str.contains("clamped").all()
    else:
        assert s.clamp == U and len(sumsq) >= 1 and r.measurements.info["sumsq_measured"]
        assert t["variance_released"].any()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("cap", [1, 7, 40])
def test_cap_keeps_the_records_of_the_definition(seed, cap):
    """A slow reference of the module's definition (pairs of a user in key order, its records numbered
    k = 0 … n−1, record k kept when a point (j + u)·n/T falls in [k, k + 1)) with the same keys: the
    same Γ per pair and the exact lattice sums of exactly those records."""
    import math

    from dpopt.privacy.user.bounding import lattice_values, tie_keys

    rng = np.random.default_rng(seed)
    agg = make_agg(_random_records(rng, 6))
    lat = lattice_values(agg, 120.0, granularity_bits=4)
    gamma, py, pz = capped_records(agg, np.ones(agg.n_pairs, bool), cap, np.random.default_rng(seed), lat)
    ref_rng = np.random.default_rng(seed)
    pair_key, user_key = tie_keys(ref_rng, agg.n_pairs), tie_keys(ref_rng, agg.n_users)
    off = agg.samples.offsets
    g_ref, y_ref, z_ref = np.zeros(agg.n_pairs, int), np.zeros(agg.n_pairs, int), np.zeros(agg.n_pairs, int)
    for user in range(agg.n_users):
        pairs = sorted(np.flatnonzero(agg.pair_user == user), key=lambda p: int(pair_key[p]))
        recs = [(p, i) for p in pairs for i in range(off[p], off[p + 1])]
        n, u = len(recs), float(user_key[user]) / 2.0**64
        for k, (p, i) in enumerate(recs):
            below = [min(max(math.ceil(x * cap / n - u), 0), cap) for x in (k, k + 1)]
            if n <= cap or below[1] > below[0]:
                g_ref[p] += 1
                y_ref[p] += int(lat.y[i])
                z_ref[p] += int(lat.z[i])
    np.testing.assert_array_equal(gamma, g_ref)
    np.testing.assert_array_equal(py, y_ref)
    np.testing.assert_array_equal(pz, z_ref)


@pytest.mark.parametrize("eps_b", [0.15, 0.1, 1.5, 0.3 * 7 / 3, 1e-3])
def test_place_bounds_spend_exactly_eps_b(monkeypatch, eps_b):
    """The two histograms run at ε_T + ε_B = ε_b exactly (as rationals), whatever float ε_b is."""
    from fractions import Fraction

    import dpopt.privacy.user.place_bounds as pb_mod

    seen = []
    real_q, real_h = pb_mod.measure_clamp_histogram, pb_mod.measure_record_histogram

    def spy_q(own_q, epsilon, source):
        seen.append(epsilon)
        return real_q(own_q, epsilon, source)

    def spy_h(n_user, epsilon, source):
        seen.append(epsilon)
        return real_h(n_user, epsilon, source)

    monkeypatch.setattr(pb_mod, "measure_clamp_histogram", spy_q)
    monkeypatch.setattr(pb_mod, "measure_record_histogram", spy_h)
    agg = make_agg(_random_records(np.random.default_rng(2), 8))
    pb_mod.choose_place_bounds(agg, np.ones(agg.n_pairs, bool), eps_b, bound=120.0, source=SeededSource(3))
    assert len(seen) == 2 and Fraction(seen[0]) + Fraction(seen[1]) == Fraction(eps_b)


@pytest.mark.parametrize("block", [1, 7, 50])
def test_cap_blocks_change_nothing(monkeypatch, block):
    """Processing the records in blocks of pairs (memory O(block)) gives the same Γ and sums."""
    import dpopt.privacy.user.record_cap as rc
    from dpopt.privacy.user.bounding import lattice_values

    agg = make_agg(_random_records(np.random.default_rng(11), 9))
    lat = lattice_values(agg, 120.0, granularity_bits=4)
    whole = capped_records(agg, np.ones(agg.n_pairs, bool), 13, np.random.default_rng(5), lat)
    monkeypatch.setattr(rc, "BLOCK_RECORDS", block)
    assert len(rc._pair_blocks(agg.samples.offsets)) > 1
    parts = capped_records(agg, np.ones(agg.n_pairs, bool), 13, np.random.default_rng(5), lat)
    for a, b in zip(whole, parts):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_place_bounds_votes_are_each_users_own(seed):
    """The two quantiles' inputs: every user's (n_ℓ, own 99th-percentile step) is the same in a joint
    run as alone, so one user moves one histogram bin and each rank utility by at most 1."""
    from dpopt.privacy.user.place_bounds import user_statistics

    rng = np.random.default_rng(seed)
    rows = _random_records(rng, 6)
    agg = make_agg(rows)
    n_joint, q_joint = user_statistics(agg, np.ones(agg.n_pairs, bool), 120.0)
    for ui, name in enumerate(sorted({r[0] for r in rows})):
        alone = make_agg([r for r in rows if r[0] == name])
        n1, q1 = user_statistics(alone, np.ones(alone.n_pairs, bool), 120.0)
        assert (n1[0], q1[0]) == (n_joint[ui], q_joint[ui])
        values = np.array([r[3] for r in rows if r[0] == name])
        steps = np.clip(np.ceil(values / 7.5), 1, 16)
        assert q1[0] == int(np.quantile(steps, 0.99, method="inverted_cdf")) and n1[0] == values.size


def test_cap_candidates_fit_the_lattice_before_any_budget():
    """The caps T may take are those the lattice holds at the declared U (T·H_Z < 2^62), computed from
    U and b alone; a release whose users all hold more records than the largest fitting candidate
    runs (at U = 2e6, b = 12, T = 4096 must not be refused after ε_T was spent)."""
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.privacy.user.strategies.place import measure_place
    from dpopt.privacy.user.bounding import lattice_halves
    from dpopt.privacy.user.place_bounds import RECORD_EDGES, cap_candidates, choose_cap

    U = 2e6
    hz = lattice_halves(U, 12)[2]
    fits = cap_candidates(U, 12)
    np.testing.assert_array_equal(fits, [t for t in RECORD_EDGES if t * hz < 2**62])
    assert fits.size < RECORD_EDGES.size  # 4096 does not fit here
    np.testing.assert_array_equal(cap_candidates(120.0), RECORD_EDGES)
    with pytest.raises(ValueError, match="granularity_bits"):
        cap_candidates(1e9, 40)
    with pytest.raises(ValueError, match="candidates"):
        choose_cap(np.ones(8), candidates=np.array([64, 1024]))  # not consecutive
    rng = np.random.default_rng(4)
    rows = [(f"u{u}", int(rng.integers(0, 12)), t, float(rng.uniform(0, U))) for u in range(30) for t in range(4200)]
    agg = make_agg(rows)
    labels = pd.DataFrame({"cell": [h3.int_to_str(int(c)) for c in agg.cells],
                           "slot": pd.to_datetime(agg.slots, utc=True).strftime("%Y-%m-%dT%H:%M:%SZ")})
    m = measure_place(agg, Budget(epsilon_total=50.0), UserOptions(partitions=labels, resolution="place"), U=U,
                      noise=NoiseOptions(seed=1, granularity_bits=12))
    assert m.info["record_cap"] == int(fits[-1])
    assert m.info["record_histogram"]["candidates"] == [int(t) for t in fits]


def test_non_finite_sample_values_are_refused_at_construction():
    """A hand-built aggregate with a NaN value is refused when built (the lattice would turn NaN
    into −2^63, beyond every sensitivity)."""
    with pytest.raises(ValueError, match="finite"):
        make_agg([("a", 0, 0, 10.0), ("a", 0, 1, float("nan"))])


def test_cell_sizes_by_hand():
    """cell_sizes = Fay–Herriot on the pilots around the map's count spread by listed grids, worked
    by hand: map 1000 over g = (1, 1, 2) gives m = (250, 250, 500); pilots (650, 50, 500) with
    σ = 100 leave residuals (400, −200, 0), mean square 200,000/3 − 10,000 = Â = 56,666.7, so every
    residual is kept to the fraction Â/(Â + 10,000) = 0.85."""
    from dpopt.privacy.user.place_shares import cell_sizes

    n = cell_sizes(np.array([650.0, 50.0, 500.0]), np.full(3, 100.0), np.array([1, 1, 2]), 1000.0)
    A = (400.0**2 + 200.0**2) / 3 - 100.0**2
    k = A / (A + 100.0**2)
    np.testing.assert_allclose(n, [250 + 400 * k, 250 - 200 * k, 500.0], rtol=1e-12)
    assert k == pytest.approx(0.85)
    # no noise: the pilots themselves; pilots no more spread than their noise: the synthetic shares
    np.testing.assert_allclose(cell_sizes(np.array([650.0, 50.0, 500.0]), np.zeros(3), np.array([1, 1, 2]), 1000.0),
                               [650.0, 50.0, 500.0])
    np.testing.assert_allclose(cell_sizes(np.array([350.0, 150.0, 500.0]), np.full(3, 200.0), np.array([1, 1, 2]),
                                          1000.0), [250.0, 250.0, 500.0])
    # an unmeasured pilot (NaN / infinite sd) is its synthetic share
    np.testing.assert_allclose(cell_sizes(np.array([np.nan, 50.0]), np.array([np.inf, 0.0]), np.array([1, 1]), 100.0),
                               [50.0, 50.0])


def test_cell_sizes_do_not_invent_busy_cells():
    """92 cells of 100–3,000 records, listed grids a rough proxy of their sizes (log-correlation
    0.87), 200 draws of Laplace pilots. At sd 20,000 (the Austin day at ε = 1) the one-sd lower ends
    the share rule used before make the largest cell ≈ 40,000 records (median over draws, truth
    2,972); the Fay–Herriot sizes stay within a few thousand. At every noise level their total
    error is well below the lower ends'."""
    from dpopt.privacy.user.place_shares import cell_sizes

    rng = np.random.default_rng(0)
    true = np.exp(rng.uniform(np.log(100), np.log(3000), 92))
    g = np.maximum(np.round(true / 40 * np.exp(rng.normal(0, 0.7, true.size))), 1)
    for sd in (20_000.0, 2_000.0, 200.0):
        top_fh, top_low, err_fh, err_low = [], [], [], []
        for _ in range(200):
            y = true + rng.laplace(0, sd / np.sqrt(2), true.size)
            n, low = cell_sizes(y, np.full(true.size, sd), g, true.sum()), np.maximum(y - sd, 1.0)
            top_fh.append(n.max())
            top_low.append(low.max())
            err_fh.append(np.abs(n - true).sum())
            err_low.append(np.abs(low - true).sum())
        assert np.mean(err_fh) < 0.7 * np.mean(err_low), sd
        if sd == 20_000.0:
            assert np.median(top_low) > 10 * true.max() and np.median(top_fh) < 0.25 * np.median(top_low)


@pytest.mark.parametrize("eps, seeds, least, most", [(1.0, range(1, 21), 0, 1), (10.0, range(1, 9), 8, 8)])
@pytest.mark.slow
def test_place_choice_on_the_austin_day(eps, seeds, least, most):
    """On the embedded Austin day (146 users) the cells' share is f = 0 (the map alone) at ε = 1 in all
    but at most one of 20 seeds, and f > 0 at ε = 10 in each of 8: at ε = 1 a cell's noise exceeds the
    cells' spread, at ε = 10 the busy cells are measured (the choice made on the exact counts,
    models/hierarchy.md §14.3). Measured over seeds 100–139: cells at ε = 1 in 1 of 40 draws (0 of 40
    with the 9-bin clamp histogram's stream), at ε = 10 in 40 of 40. Without the Fay–Herriot sizes of
    §14.3, 2 of 8 seeds measured cells at ε = 1."""
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import austin_sample_path, contributions, release_user

    agg, _ = contributions(austin_sample_path(), bound=120, keep_samples=True)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    with_cells = [release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts, strategy="place"),
                               bound=120.0, noise=NoiseOptions(seed=seed)).measurements.info["first_level"] == 1
                  for seed in seeds]
    assert least <= sum(with_cells) <= most, with_cells


def test_threshold_bins_and_user_histogram_refuse_bad_input():
    """threshold_bins keeps the bins at or above ln(#bins/rate)/ε (worked: 9 bins, rate 0.02, ε = 0.5:
    t = 12.22); user_histogram counts each user once and refuses bins outside [0, n_bins)."""
    from dpopt.privacy.user.mechanism import user_histogram
    from dpopt.privacy.user.predict import threshold_bins

    np.testing.assert_array_equal(threshold_bins(np.array([12, 13, 0, 40, 0, 0, 0, 0, 0]), 0.5, 0.02),
                                  [0, 13, 0, 40, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(threshold_bins(np.array([1, 2, 3]), 1.0), [0, 2, 3])  # ln 3 = 1.10
    with pytest.raises(ValueError, match="`phantom_rate` must be in"):
        threshold_bins(np.ones(3), 1.0, 0.0)
    exact = user_histogram(np.array([0, 2, 2, 1]), 4, 1e6, SeededSource(0))  # noise scale 1e-6: exact
    np.testing.assert_array_equal(exact, [1, 1, 2, 0])
    with pytest.raises(ValueError, match=r"`bins` must lie in \[0, 4\)"):
        user_histogram(np.array([0, 4]), 4, 1.0, SeededSource(0))


@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("kw, eps, match", [({"weight_mean": 0.0}, 10.0, "`weight_mean` = 0.0"),
                                            ({}, 1e-8, r"`epsilon_total` must be >= 2\^-20")])
def test_place_refuses_unspendable_budgets_before_any_draw(monkeypatch, scale, kw, eps, match):
    """weight_mean = 0, and a tiny ε, are refused on public facts before any draw, for data whose
    DP clamp B differs (values as they are, and halved); a tiny ε by the budget itself
    (``MIN_BUDGET_TOTAL``), below which the place release's own check of its pieces cannot be
    reached. Refused after the draws, they would leak:
    weight_mean = 0 would release when the clamp came out B = U and refuse when B < U, after both
    bounds histograms were drawn; a tiny ε would draw the record histogram, then refuse the clamp's."""
    import dpopt.privacy.user.mechanism as mech_mod
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.privacy.user.strategies.place import measure_place
    from dpopt.records.grid import cell_strings, slot_strings

    draws = []
    real = mech_mod.DiscreteLaplace.integer

    def spy(self, values, **k):
        draws.append(k["budget"])
        return real(self, values, **k)

    monkeypatch.setattr(mech_mod.DiscreteLaplace, "integer", spy)
    rows = [(u, g, t, min(v * scale, 120.0)) for u, g, t, v in _random_records(np.random.default_rng(0), 6)]
    agg = make_agg(rows)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    with pytest.raises(ValueError, match=match):
        measure_place(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts, **kw), U=120.0,
                      noise=NoiseOptions(seed=1))
    assert draws == []


# --- the map's own record cap T_map (models/hierarchy.md §14.2) ---------------------------------------------


def _users_of(counts: np.ndarray) -> np.ndarray:
    """Records per user of a histogram whose users hold exactly their bin's representative."""
    from dpopt.privacy.user.bounds import bin_representatives
    from dpopt.privacy.user.place_bounds import RECORD_BIN_EDGES

    return np.repeat(bin_representatives(RECORD_BIN_EDGES), np.asarray(counts, dtype=np.int64))


@pytest.mark.parametrize("seed", range(6))
def test_reweighting_distance_matches_its_definition_and_bounds_the_bias(seed):
    """D(T) = ½ Σ_ℓ |min(n_ℓ, T)/S(T) − n_ℓ/N| computed user by user, and the capped mean of any
    user means μ_ℓ differs from the all-records mean by at most 2·D(T)·max|μ_ℓ − μ| (random
    populations whose users hold their bin's representative, so the binning is exact)."""
    from dpopt.privacy.user.place_bounds import RECORD_EDGES, reweighting_distance

    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 30, size=8)
    counts[rng.integers(0, 8)] += 1
    n = _users_of(counts)
    d = reweighting_distance(counts)
    for i, T in enumerate(RECORD_EDGES):
        w, v = np.minimum(n, T) / np.minimum(n, T).sum(), n / n.sum()
        assert d[i] == pytest.approx(0.5 * np.abs(w - v).sum(), abs=1e-12)
        for _ in range(20):
            mu = rng.uniform(0, 100, n.size)
            full = float(v @ mu)
            assert abs(float(w @ mu) - full) <= 2.0 * d[i] * np.abs(mu - full).max() + 1e-9
    assert np.all(np.diff(d) <= 1e-12)  # a larger cap re-weights less
    assert reweighting_distance(np.zeros(8)).tolist() == [0.0] * 7


def test_reweighting_distance_hand_worked():
    """One user of 8,192 records (overflow bin) and one of 2 (bin (1, 4], representative √(2·4) = 2.83):
    at T = 16 both keep all but the heavy one keeps 16 of 8,192 records."""
    from dpopt.privacy.user.place_bounds import reweighting_distance

    counts = np.array([0, 1, 0, 0, 0, 0, 0, 1])
    r = np.array([np.sqrt(8.0), 8192.0])
    d16 = 0.5 * (abs(r[0] / (r[0] + 16) - r[0] / r.sum()) + abs(16 / (r[0] + 16) - r[1] / r.sum()))
    assert reweighting_distance(counts)[2] == pytest.approx(d16)  # T = 1, 4, 16, …
    assert reweighting_distance(counts)[-1] > 0  # 4,096 still caps the overflow user


@pytest.mark.parametrize("seed", range(6))
def test_unkept_share_is_the_sampling_share_of_the_kept_records(seed):
    """κ(T), computed user by user on random populations whose users hold their bin's representative
    (the binning exact): the kept-record-weighted mean of 1 − min(n, T)/n; and it is the finite-
    population factor of a capped mean: drawing each user's kept records at random (without
    replacement) from values with a known spread, the kept mean's variance is κ·s²/m within
    Monte-Carlo error (s² the values' variance about their user's
    mean, m the kept records)."""
    from dpopt.privacy.user.place_bounds import RECORD_EDGES, unkept_share

    rng = np.random.default_rng(200 + seed)
    counts = rng.integers(0, 6, size=8)
    counts[rng.integers(2, 8)] += 2
    n = _users_of(counts)
    for T in RECORD_EDGES:
        keep = np.minimum(n, T)
        assert unkept_share(counts, int(T)) == pytest.approx(float(keep @ (1 - keep / n) / keep.sum()), abs=1e-12)
    # the Monte-Carlo check on integer record counts at the cap T = 16
    users = rng.integers(2, 60, size=40)
    hist = np.bincount(np.searchsorted(4 ** np.arange(0, 7), users, side="left"), minlength=8)
    keep = np.minimum(users, 16)
    kappa = float(keep @ (1 - keep / users) / keep.sum())
    values = [rng.normal(0, 5.0, m) for m in users]
    s2 = float(np.mean(np.concatenate([v - v.mean() for v in values]) ** 2))  # about the users' own means
    draws = np.array([np.concatenate([rng.choice(v, k, replace=False) for v, k in zip(values, keep)]).mean()
                      for _ in range(2000)])
    assert np.var(draws) == pytest.approx(kappa * s2 / keep.sum(), rel=0.12)
    assert 0.0 < unkept_share(hist, 16) < 1.0


def test_unkept_share_edges():
    """0 where the cap keeps every record, 1 (no correction known) for an empty histogram, and a
    wrong shape or cap refused with the argument named."""
    from dpopt.privacy.user.place_bounds import unkept_share

    assert unkept_share(np.array([3, 5, 2, 0, 0, 0, 0, 0]), 16) == 0.0
    assert unkept_share(np.zeros(8), 16) == 1.0
    assert unkept_share(np.array([0, 0, 0, 0, 0, 0, 0, 4]), 4096) == pytest.approx(0.5)  # 8192 keeps 4096
    with pytest.raises(DpoptInputError, match="counts"):
        unkept_share(np.zeros(7), 16)
    with pytest.raises(DpoptInputError, match="cap"):
        unkept_share(np.zeros(8), 0)


@pytest.mark.parametrize("seed", range(6))
def test_map_cap_rule_matches_its_definition(seed):
    """T_map = argmin over the candidates ≥ T of √((noise·T/S(T))² + (spread·D(T))²), ties to the
    smaller, by brute force over the users of the bins that clear ln(8/0.02)/ε; with spread 0 it is
    T itself (T/S(T) never falls), with noise 0 the smallest candidate that re-weights no more than
    any other, and it never falls as the noise falls (more budget: a larger map cap)."""
    from dpopt.privacy.user.place_bounds import RECORD_EDGES, choose_map_cap

    rng = np.random.default_rng(100 + seed)
    eps = 0.5
    noisy = rng.integers(0, 40, size=8)
    noisy[4] += 15
    t = np.log(8 / 0.02) / eps  # 12.0: bins under it are zeroed
    n = _users_of(np.where(noisy >= t, noisy, 0))
    for cap in (16, 64, 256):
        for noise, spread in ((3.0, 6.0), (0.5, 55.0), (40.0, 6.0)):
            brute = []
            for T in RECORD_EDGES:
                keep = np.minimum(n, T)
                d = 0.5 * np.abs(keep / keep.sum() - n / n.sum()).sum()
                brute.append(np.inf if T < cap else np.hypot(noise * T / keep.sum(), spread * d))
            got, err = choose_map_cap(noisy, eps, cap, noise=noise, spread=spread)
            np.testing.assert_allclose(err, brute, rtol=1e-12)
            assert got == int(RECORD_EDGES[int(np.argmin(brute))])
        assert choose_map_cap(noisy, eps, cap, noise=3.0, spread=0.0)[0] == cap
        _, err0 = choose_map_cap(noisy, eps, cap, noise=0.0, spread=6.0)
        assert choose_map_cap(noisy, eps, cap, noise=0.0, spread=6.0)[0] == \
            int(RECORD_EDGES[np.flatnonzero(err0 == err0.min())[0]])
        picks = [choose_map_cap(noisy, eps, cap, noise=v, spread=6.0)[0] for v in (100.0, 10.0, 1.0, 0.1, 0.01)]
        assert picks == sorted(picks)


def test_map_cap_ignores_a_phantom_heavy_bin():
    """146 users of 150–560 records (the Austin day's shape) and a noisy overflow bin of 30 "users with
    8,192 records" at ε_T = 0.1: the threshold ln(400)/0.1 = 59.9 zeroes the phantom (and the small
    bins), so the map keeps the cells' cap; read as real, the phantom would pull T_map to 4,096,
    the cap that erred 6.7 km/h on the day (models/hierarchy.md §14.2)."""
    from dpopt.privacy.user.place_bounds import choose_map_cap, map_cap_error

    noisy = np.array([0, 0, 0, 3, 24, 122, 0, 30])
    assert choose_map_cap(noisy, 0.1, 256, noise=50.0, spread=6.0)[0] == 256
    err = map_cap_error(noisy, noise=50.0, spread=6.0)
    assert int(np.argmin(np.where(np.arange(7) >= 4, err, np.inf))) == 6  # the phantom read as real: 4096
    assert choose_map_cap(np.zeros(8), 0.1, 64, noise=1.0, spread=6.0)[0] == 64  # no evidence: the cells' cap


def test_map_cap_refuses_bad_input():
    from dpopt.privacy.user.place_bounds import choose_map_cap

    with pytest.raises(DpoptInputError, match="candidates"):
        choose_map_cap(np.ones(8), 1.0, 32, noise=1.0, spread=1.0)
    with pytest.raises(DpoptInputError, match="noise"):
        choose_map_cap(np.full(8, 50), 1.0, 16, noise=-1.0, spread=1.0)
    with pytest.raises(DpoptInputError, match="counts"):
        choose_map_cap(np.full(3, 50), 1.0, 16, noise=1.0, spread=1.0)


def test_map_noise_scale_by_hand():
    """√2·(B/2)·√(1/ε_sum² + 1/ε_count²) with the release's own split at B, the pilots' share of the
    count taken off (Laplace variance 2b², the count's noise entering the mean times B/2)."""
    from dpopt.privacy.user.strategies.place import map_noise_scale
    from dpopt.privacy.user.levels import PLACE_PILOT_SHARE
    from dpopt.privacy.user.split import split_budget

    sp = split_budget(2.0, bound=60.0, weight_mean=1.0, weight_variance=0.0)
    ec, es = (1 - PLACE_PILOT_SHARE) * sp.count, sp.sum
    var = (2 * (30.0 / es) ** 2 + 30.0**2 * 2 * (1 / ec) ** 2)  # per unit T/S(T)
    assert map_noise_scale(2.0, 60.0, weight_mean=1.0, weight_variance=0.0) == pytest.approx(np.sqrt(var))


def test_place_release_measures_the_map_at_its_own_cap():
    """The release bounds the map at T_map (its level sensitivity is T_map) and the cells at T, and
    T_map is the rule applied to what the release publishes (histogram, ε_T, B through the noise)."""
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.privacy.user.strategies.place import measure_place
    from dpopt.privacy.user.place_bounds import CAP_SHARE, choose_map_cap
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import austin_sample_path, contributions

    agg, _ = contributions(austin_sample_path(), bound=120, keep_samples=True)
    plist = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    seen = set()
    for eps in (1.0, 10.0, 200.0):
        m = measure_place(agg, Budget(epsilon_total=eps), UserOptions(partitions=plist), U=120.0,
                          noise=NoiseOptions(seed=7))
        info, rh = m.info, m.info["record_histogram"]
        T, Tm = info["record_cap"], info["map_record_cap"]
        assert Tm >= T and info["level_bounds"] == [None, T, Tm]
        assert [s[0] for s in info["level_sensitivity"][1:]] == [T, Tm]
        eps_t = rh["epsilon"]  # the ε_T the histogram was drawn with (published)
        assert eps_t == pytest.approx(float(m.spend.pieces["bounds"]) * CAP_SHARE, rel=1e-6)
        got, _ = choose_map_cap(np.array(rh["noisy_users"], float), eps_t, T, noise=rh["map_noise"],
                                spread=rh["map_spread"], candidates=np.array(rh["candidates"]))
        assert got == Tm and rh["map_spread"] == 6.0
        seen.add(Tm > T)
    assert seen == {False, True}  # the map's cap is raised only where its noise allows (here: at ε = 200)
