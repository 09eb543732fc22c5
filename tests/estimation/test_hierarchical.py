"""Hierarchical estimation of the `user` multi-resolution measurements: Fieller intervals, GLS
consistency, coverage by simulation (against the bounded data's truth), variance withholding."""

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.estimation.hierarchical import estimate_hierarchical, fieller_interval, gls_totals
from dpopt.hierarchy.tree import HOUR_NS, Level
from dpopt.release import GridOptions, InputOptions, contributions
from dpopt.privacy.user.levels import LevelNoise, LevelPlan, _bounded_finest, measure_levels, node_sums
from dpopt.privacy.user.partitions import PartitionList

U = 100.0
LEVELS = (Level(8, HOUR_NS), Level(8, 4 * HOUR_NS), Level(7, 4 * HOUR_NS), Level(6, 0))


@pytest.fixture(scope="module")
def agg():
    """120 users over 8 res-8 cells (2 res-7 parents) × 8 hours; grid means differ by cell and hour."""
    rng = np.random.default_rng(7)
    parents = [h3.latlng_to_cell(30.27, -97.74, 7), h3.latlng_to_cell(30.35, -97.70, 7)]
    cells = [c for p in parents for c in sorted(h3.cell_to_children(p, 8))[:4]]
    n = 24000
    user = rng.integers(0, 120, n)
    cell = (user % 8 + rng.integers(0, 3, n)) % 8
    hour = rng.integers(0, 8, n)
    mu = 20 + 6 * cell + 3 * hour + (user % 5)
    lat, lng = np.array([h3.cell_to_latlng(cells[i]) for i in cell]).T
    df = pd.DataFrame({"user_id": user.astype(str), "timestamp": pd.to_datetime(1_441_065_600 + hour * 3600 + rng.integers(0, 3600, n), unit="s", utc=True),
                       "latitude": lat, "longitude": lng, "value": np.clip(rng.normal(mu, 12), 0, U)})
    a, _ = contributions(df, bound=U, grid=GridOptions(8, "1h"), io=InputOptions(out_of_range="clip"),
                         keep_samples=True)
    return a


def test_bad_inputs_are_one_line_errors(agg):
    from dpopt import DpoptInputError

    plist = PartitionList.from_grids(agg.cells, agg.slots)
    with pytest.raises(DpoptInputError, match="bounds"):
        measure_levels(agg, plist, bound=U, bounds=(0, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS),
                       sampling=LevelNoise(noise="numpy"))
    with pytest.raises(DpoptInputError, match="rho"):
        measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS),
                       sampling=LevelNoise(mechanism="gaussian"))
    with pytest.raises(DpoptInputError, match="first_level"):
        measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS, first_level=9),
                       sampling=LevelNoise(noise="numpy"))
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS),
                       sampling=LevelNoise(noise="numpy", seed=0))
    with pytest.raises(DpoptInputError, match="confidence"):
        estimate_hierarchical(m, confidence=1.5)
    with pytest.raises(DpoptInputError, match="bias_allowance"):
        estimate_hierarchical(m, bias_allowance=-1)


def test_fieller_interval_is_the_brute_force_set():
    rng = np.random.default_rng(0)
    h = 5.0
    for _ in range(200):
        den = rng.uniform(-5, 40)
        num = rng.uniform(-60, 60)
        vn, vy = rng.uniform(0.1, 50), rng.uniform(0.1, 500)
        lo, hi = fieller_interval(np.array([num]), np.array([den]), np.array([vy]), np.array([vn]), 1.645, h)
        grid = np.linspace(-h, h, 4001)
        inside = (num - grid * den) ** 2 <= 1.645**2 * (vy + grid**2 * vn)
        if not inside.any():
            assert np.isnan(lo[0]) or (den * den - 1.645**2 * vn <= 0)
            continue
        assert lo[0] <= grid[inside].min() + 1e-9 and hi[0] >= grid[inside].max() - 1e-9
        if den * den - 1.645**2 * vn > 0:  # bounded case: exact (up to the scan's step)
            assert hi[0] - lo[0] <= grid[inside].max() - grid[inside].min() + 2 * (grid[1] - grid[0])


def _bounded_truth(agg, m, seed, k, c):
    plist = PartitionList.from_grids(m.finest["cell"].to_numpy(), m.finest["slot"].to_numpy())
    from dpopt.privacy.user.levels import simulation_keys

    R, Y, Z, lat = _bounded_finest(agg, plist, k, c, U, 12, simulation_keys(seed), "random")  # the release's keys
    from dpopt.hierarchy.tree import build_hierarchy

    H = build_hierarchy(plist.cells, plist.slots, LEVELS)
    r, y, z = (node_sums(H, v).astype(float) for v in (R, Y, Z))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = U / 2 + lat.lam * y / r
        var = lat.lam * z / r + U * U / 8 - (lat.lam * y / r) ** 2
    return mean, var, r


@pytest.mark.slow
def test_coverage_consistency_and_withholding(agg):
    """90 % intervals of both means cover the bounded truth on ≥ 90 % of nodes (pooled over seeds),
    and the test can fail: a good share of intervals is far narrower than the range."""
    k, c = 3, 2
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    inside_d, inside_e, narrow, n_nodes = 0, 0, 0, 0
    for seed in range(12):
        m = measure_levels(agg, plist, bound=U, bounds=(k, c), epsilon=30.0,
                           plan=LevelPlan(levels=LEVELS, first_level=0), sampling=LevelNoise(noise="numpy", seed=seed))
        est = estimate_hierarchical(m, confidence=0.9, bias_allowance=0.0)
        T = est.table
        truth, var_truth, r = _bounded_truth(agg, m, seed, k, c)
        ok = r > 0
        inside_d += int((np.abs(T.mean_direct - truth) <= T.mean_direct_error_bound)[ok].sum())
        inside_e += int((np.abs(T["mean"] - truth) <= T.mean_error_bound)[ok].sum())
        narrow += int((T.mean_direct_error_bound < U / 4)[ok].sum())
        n_nodes += int(ok.sum())
        # GLS consistency: children's totals sum to the parent's
        n_hat = gls_totals(m)["count"][0]
        parent = m.nodes["parent"].to_numpy()
        sums = np.zeros(len(parent))
        np.add.at(sums, parent[parent >= 0], n_hat[parent >= 0])
        inner = np.isin(np.arange(len(parent)), parent)
        np.testing.assert_allclose(sums[inner], n_hat[inner], rtol=1e-9, atol=1e-6)
        # variance published exactly where its interval is narrower than [0, U²/4]; released ones in range
        rel = T.variance_released.to_numpy()
        assert (T.variance_withheld_reason[~rel] != "").all() and (T.variance_withheld_reason[rel] == "").all()
        assert T.variance[~rel].isna().all() and (T.variance[rel].between(0, U * U / 4)).all()
        assert (2 * T.variance_error_bound[rel] >= 0).all()
        # no holes: every finest grid answered by a released ancestor-or-self
        assert T.released.to_numpy()[est.answers.node.to_numpy()].all()
    assert narrow / n_nodes > 0.3
    assert inside_d / n_nodes >= 0.9
    assert inside_e / n_nodes >= 0.9


def test_spend_and_two_phase_levels(agg):
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS),
                       sampling=LevelNoise(noise="numpy", seed=1))
    assert m.spend.total <= 1.0 + 1e-12 and m.spend.total == pytest.approx(sum(m.spend.pieces.values()))
    first = m.info["first_level"]
    lev = m.nodes["level"].to_numpy()
    assert np.isfinite(m.statistics["count_pilot"].value).all()
    assert np.isnan(m.statistics["sum"].value[lev < first]).all()
    assert np.isfinite(m.statistics["sum"].value[lev >= first]).all()
    est = estimate_hierarchical(m)
    from dpopt.measurements import ESTIMATE_COLUMNS

    assert list(est.table.columns[: len(ESTIMATE_COLUMNS)]) == list(ESTIMATE_COLUMNS)
    assert len(est.answers) == len(plist) and est.confidence == 0.95 and est.method == "hierarchical"  # one default
    assert est.table.loc[lev < first, "released"].eq(False).all()
    assert est.table.loc[lev < first, "mean_error_bound"].eq(U).all()


@pytest.mark.parametrize("mechanism,budget", [("laplace", {"epsilon": 2.0}), ("gaussian", {"rho": 0.5})])
def test_exact_samplers_end_to_end(agg, mechanism, budget):
    """Real-release samplers (exact discrete Laplace / Gaussian, seeded here): lattice noise laws,
    spend ≤ budget, and estimates on every measured node."""
    plist = PartitionList.from_grids(agg.cells[:40], agg.slots[:40])
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), plan=LevelPlan(levels=LEVELS, first_level=1),
                       sampling=LevelNoise(mechanism=mechanism, noise="discrete", seed=3), **budget)
    assert m.statistics["sum"].law.family == "discrete_" + mechanism
    assert m.statistics["sum"].law.lattice == 2.0**-12 and m.statistics["count"].law.lattice == 1.0
    lev = m.nodes["level"].to_numpy()
    # sums sit on the lattice: value / λ is an integer
    v = m.statistics["sum"].value[lev >= 1] / 2.0**-12
    assert np.allclose(v, np.round(v))
    assert m.spend.unit == ("epsilon" if mechanism == "laplace" else "rho")
    assert m.spend.total <= next(iter(budget.values()))
    est = estimate_hierarchical(m)
    assert np.isfinite(est.table.loc[lev >= 1, "mean_direct"]).all()


def test_measurements_are_the_bounded_node_sums_plus_noise(agg):
    """At a huge ε the noisy statistics equal the exact node sums of the bounded data (wiring:
    every node gets its own finest grids' sums, in value units)."""
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    m = measure_levels(agg, plist, bound=U, bounds=(3, 2), epsilon=1e7, plan=LevelPlan(levels=LEVELS, first_level=0),
                       sampling=LevelNoise(noise="numpy", seed=5))
    from dpopt.privacy.user.levels import simulation_keys

    R, Y, Z, lat = _bounded_finest(agg, plist, 3, 2, U, 12, simulation_keys(5), "random")  # the release's keys
    from dpopt.hierarchy.tree import build_hierarchy

    H = build_hierarchy(plist.cells, plist.slots, LEVELS)
    for name, v, unit in (("count", R, 1.0), ("count_pilot", R, 1.0), ("sum", Y, lat.lam), ("sumsq", Z, lat.lam)):
        exact = unit * node_sums(H, v).astype(float)
        np.testing.assert_allclose(m.statistics[name].value, exact, atol=1e-3 * max(1.0, np.abs(exact).max()) * 1e-3)
    assert R.sum() > 0 and (R <= 2 * agg.grid_users()[np.arange(len(plist))]).all()


def test_level_bounds_option(agg):
    """level_bounds: each level measured with its own (k_l, c_l); noise scales follow ℓ1 = k_l·c_l;
    the estimate does not link levels (tree_consistent False) and equals each node's own ratio."""
    from dpopt import DpoptInputError
    from dpopt.privacy.user.levels import resolve_level_bounds

    plist = PartitionList.from_grids(agg.cells, agg.slots)
    lb = [(2, 2), (2, 6), (1, 20), (1, 60)]
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=4.0,
                       plan=LevelPlan(levels=LEVELS, level_bounds=lb, first_level=0, level_split="equal"),
                       sampling=LevelNoise(noise="numpy", seed=3))
    assert m.info["tree_consistent"] is False and m.info["level_bounds"] == lb
    assert m.spend.total <= 4.0 + 1e-12
    lev = m.nodes["level"].to_numpy()
    sc = m.statistics["count"].law.scale
    for li, (kl, cl) in enumerate(lb):  # equal shares: scale ∝ k_l·c_l
        assert sc[lev == li] == pytest.approx(sc[lev == 0][0] * kl * cl / 4.0)
    est = estimate_hierarchical(m, bias_allowance=0.0)
    n = gls_totals(m)["count"][0]
    y = gls_totals(m)["sum"][0]
    raw = m.statistics["sum"].value
    assert y == pytest.approx(raw)  # no tree links: each node keeps its own measurement
    assert np.all(est.table["mean_direct"].to_numpy() == pytest.approx(U / 2 + np.clip(y / np.maximum(n, 1), -U / 2, U / 2)))
    from dpopt.hierarchy.tree import build_hierarchy

    H = build_hierarchy(plist.cells, plist.slots, LEVELS)
    s = resolve_level_bounds("scaled", H, 4, 2)
    lev_h = H.nodes["level"].to_numpy()
    for li, b in enumerate(s):
        f = len(plist) / np.sum(lev_h == li)
        assert b == (None if f < 64 else (max(1, int(np.ceil(4 / np.sqrt(f)))), 2 * int(np.ceil(np.sqrt(f)))))
    # mixed: levels 0-1 shared (linked by the tree constraint), 2-3 bounded on their own
    mix = [None, None, (1, 20), (1, 60)]
    m2 = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=4.0,
                        plan=LevelPlan(levels=LEVELS, level_bounds=mix, first_level=0, level_split="equal"),
                        sampling=LevelNoise(noise="numpy", seed=3))
    assert m2.info["linked_levels"] == [True, False, False, False] and m2.info["tree_consistent"] is False
    n2 = gls_totals(m2)["count"][0]
    par = m2.nodes["parent"].to_numpy()
    kids = np.flatnonzero(lev == 0)
    assert np.bincount(par[kids], weights=n2[kids], minlength=len(n2))[lev == 1] == pytest.approx(n2[lev == 1])
    assert gls_totals(m2)["sum"][0][lev >= 2] == pytest.approx(m2.statistics["sum"].value[lev >= 2])
    sc2 = m2.statistics["count"].law.scale
    assert sc2[lev == 2] == pytest.approx(sc2[lev == 0][0] * 20 / 4.0)  # shared level 0: l1 = k·c = 4
    with pytest.raises(DpoptInputError, match="level_bounds"):
        measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0,
                       plan=LevelPlan(levels=LEVELS, level_bounds=[(1, 1)]), sampling=LevelNoise(noise="numpy", seed=1))


@pytest.mark.slow
def test_blup_answers_at_the_deepest_informed_node_and_beats_the_direct_mean(agg):
    """With every level measured at a large ε the finest nodes are informed and answer themselves;
    at a small ε the answers move up; the BLUP ``mean`` is closer to the bounded truth than
    ``mean_direct`` on the finest grids, pooled over seeds (the test fails if the pooling is wrong)."""
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    err_b, err_d = [], []
    for seed in range(6):
        m = measure_levels(agg, plist, bound=U, bounds=(3, 2), epsilon=3.0,
                           plan=LevelPlan(levels=LEVELS, first_level=0), sampling=LevelNoise(noise="numpy", seed=seed))
        est = estimate_hierarchical(m, confidence=0.9)
        truth, _, r = _bounded_truth(agg, m, seed, 3, 2)
        fin = m.finest["node"].to_numpy()
        ok = r[fin] > 0
        err_b.append(np.abs(est.table["mean"].to_numpy()[fin] - truth[fin])[ok])
        err_d.append(np.abs(est.table["mean_direct"].to_numpy()[fin] - truth[fin])[ok])
    assert np.median(np.concatenate(err_b)) < 0.8 * np.median(np.concatenate(err_d))
    m = measure_levels(agg, plist, bound=U, bounds=(3, 2), epsilon=1e4, plan=LevelPlan(levels=LEVELS, first_level=0),
                       sampling=LevelNoise(noise="numpy", seed=0))
    est = estimate_hierarchical(m)
    np.testing.assert_array_equal(est.answers["node"].to_numpy(), m.finest["node"].to_numpy())
    shrink = estimate_hierarchical(m, estimator="shrink")
    assert shrink.table["mean"].notna().all()
    with pytest.raises(Exception, match="estimator"):
        estimate_hierarchical(m, estimator="gls")


@pytest.mark.slow
def test_posterior_interval_option(agg):
    """interval="posterior": same means, bound = min(default bound, z·√(posterior var) + allowance),
    so never wider; refused with the top-down shrinkage (it has no posterior variance)."""
    from dpopt import DpoptInputError
    from dpopt.estimation.hierarchical import posterior_half_width

    plist = PartitionList.from_grids(agg.cells, agg.slots)
    m = measure_levels(agg, plist, bound=U, bounds=(3, 2), epsilon=3.0, plan=LevelPlan(levels=LEVELS, first_level=0),
                       sampling=LevelNoise(noise="numpy", seed=2))
    d = estimate_hierarchical(m, confidence=0.9)
    p = estimate_hierarchical(m, confidence=0.9, interval="posterior")
    np.testing.assert_array_equal(p.table["mean"], d.table["mean"])
    assert (p.table["mean_error_bound"] <= d.table["mean_error_bound"]).all()
    assert (p.table["mean_error_bound"] < d.table["mean_error_bound"]).any()
    p0 = estimate_hierarchical(m, confidence=0.9, interval="posterior", bias_allowance=0.0)
    d0 = estimate_hierarchical(m, confidence=0.9, bias_allowance=0.0)
    assert (p0.table["mean_error_bound"] <= p.table["mean_error_bound"]).all()
    hw = posterior_half_width(np.array([4.0, np.inf]), 1.5, np.array([1.0, 1.0]))
    np.testing.assert_allclose(hw, [4.0, np.inf])
    assert (p0.table["mean_error_bound"] <= d0.table["mean_error_bound"]).all()
    with pytest.raises(DpoptInputError, match="interval"):
        estimate_hierarchical(m, estimator="shrink", interval="posterior")
    with pytest.raises(DpoptInputError, match="interval"):
        estimate_hierarchical(m, interval="bayes")


def test_count_snr_threshold_grows_with_the_nodes_tested():
    """The BLUP's "measured" rule: t = max(1.5, ln N/√2), so that among N nodes with no records the
    expected number passing by Laplace noise alone, N·½·exp(−t√2), stays ≤ ½ (checked by simulation
    at N = 5000: a fixed 1.5 sds lets ~300 through)."""
    import math

    from dpopt.hierarchy.blup import MIN_COUNT_SNR, count_snr_threshold

    assert count_snr_threshold(1) == MIN_COUNT_SNR and count_snr_threshold(8) == MIN_COUNT_SNR  # ln 8/√2 < 1.5
    for N in (100, 5000, 40000):
        t = count_snr_threshold(N)
        assert t == pytest.approx(math.log(N) / math.sqrt(2.0))
        assert N * 0.5 * math.exp(-t * math.sqrt(2.0)) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    b = 3.0
    noise = rng.laplace(0.0, b, size=(40, 5000))  # counts of empty nodes, sd = √2·b
    sd = math.sqrt(2.0) * b
    assert (noise >= count_snr_threshold(5000) * sd).sum(axis=1).mean() < 1.0
    assert (noise >= MIN_COUNT_SNR * sd).sum(axis=1).mean() > 200


def test_intervals_reach_the_declared_range_above_a_clamp(agg):
    """Measured on values clamped to [0, B = 50] with the values declared on [0, U = 100] (the place
    release's clamp): a node whose Fieller set for the clamped mean reaches B has an interval that
    reaches U (the all-records mean may lie anywhere above), every half-width is at most U, the others
    are exactly the half-widths of the clamped measurement, and without a declared U (B = U) nothing
    changes. (A cap at B would leave truths above m + B outside "the whole range".)"""
    from dataclasses import replace

    from dpopt.estimation.hierarchical import two_sided_z

    B, plist = 50.0, PartitionList.from_grids(agg.cells, agg.slots)
    m = measure_levels(agg, plist, bound=B, bounds=(3, 2), epsilon=3.0, plan=LevelPlan(levels=LEVELS, first_level=0),
                       sampling=LevelNoise(noise="numpy", seed=4))
    plain = estimate_hierarchical(m, confidence=0.9, bias_allowance=0.0).table
    wide = estimate_hierarchical(replace(m, info={**m.info, "declared_bound": U}), confidence=0.9,
                                 bias_allowance=0.0).table
    (n, vn), (y, vy) = gls_totals(m)["count"], gls_totals(m)["sum"]
    _, hi = fieller_interval(y, n, vy, vn, two_sided_z(0.9, m.statistics["sum"].law.family), B / 2)
    touch = ~(hi < B / 2)  # reaches B, or NaN (no information)
    assert 0 < touch.sum() < touch.size
    mean, hw = wide["mean_direct"].to_numpy(), wide["mean_direct_error_bound"].to_numpy()
    assert np.all(hw <= U) and np.all(mean[touch] + hw[touch] >= U - 1e-9)
    np.testing.assert_allclose(hw[~touch], plain["mean_direct_error_bound"].to_numpy()[~touch], rtol=1e-12)
    assert np.all(hw >= plain["mean_direct_error_bound"].to_numpy() - 1e-9)
    assert np.all(wide["mean_error_bound"].to_numpy() <= U)
    # within the range [0, U] the EB interval still contains the direct one
    me, he = wide["mean"].to_numpy(), wide["mean_error_bound"].to_numpy()
    assert np.all(np.maximum(me - he, 0) <= np.maximum(mean - hw, 0) + 1e-9)
    assert np.all(np.minimum(me + he, U) >= np.minimum(mean + hw, U) - 1e-9)


def test_outlook_names_an_epsilon_even_when_no_count_is_readable(agg):
    """At a budget where noise swamps every count: the outlook still names the ε
    at which the least noisy measured sum would give U/4, for a public reference node of 20 users x
    c records (z·sd/(20c) scales as 1/ε), and with readable counts it uses the best node's."""
    from statistics import NormalDist

    from dpopt.estimation.outlook import HINT_USERS, _epsilon_needed

    plist = PartitionList.from_grids(agg.cells, agg.slots)
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(levels=LEVELS),
                       sampling=LevelNoise(noise="numpy", seed=1))
    est = estimate_hierarchical(m)
    sd = np.sqrt(m.statistics["sum"].law.variance())
    sd = sd[np.isfinite(sd) & (sd > 0)]  # the measured sums (unmeasured levels carry no noise law)
    assert sd.size
    z = NormalDist().inv_cdf(0.5 + est.confidence / 2.0)
    eps = float(m.spend.epsilon)
    need, ref = _epsilon_needed(m, est, np.zeros(m.n_nodes), U4=U / 4.0)
    assert ref == HINT_USERS * 2 and need == pytest.approx(eps * z * sd.min() / (HINT_USERS * 2) / (U / 4.0))
    counts = np.full(m.n_nodes, 500.0)
    need, ref = _epsilon_needed(m, est, counts, U4=U / 4.0)
    assert ref is None and need == pytest.approx(eps * z * sd.min() / 500.0 / (U / 4.0))


def test_repeated_default_levels_are_dropped_unless_the_plan_names_levels_by_index(agg):
    """Over this one-day list hour-of-day is the hour: the default tree drops the repeated level;
    a plan that names levels by index (explicit shares, one per default level) keeps them all, so
    its shares still mean what the caller wrote."""
    from dpopt.hierarchy.tree import DAY_NS, default_levels

    plist = PartitionList.from_grids(agg.cells, agg.slots)
    levels = default_levels(8, HOUR_NS, profile="day")
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0, plan=LevelPlan(profile="day"),
                       sampling=LevelNoise(noise="numpy", seed=1))
    kept = [tuple(lv) for lv in m.info["levels"]]
    assert (6, HOUR_NS, DAY_NS) not in kept and len(kept) < len(levels)
    shares = np.full(len(levels), 1.0 / len(levels))  # an array: explicit shares as numpy gives them
    m = measure_levels(agg, plist, bound=U, bounds=(2, 2), epsilon=1.0,
                       plan=LevelPlan(profile="day", level_split=shares), sampling=LevelNoise(noise="numpy", seed=1))
    assert [tuple(lv) for lv in m.info["levels"]] == [(lv.h3_resolution, lv.slot_ns, lv.cycle_ns) for lv in levels]
