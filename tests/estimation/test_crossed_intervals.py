"""The engine's grid intervals (models/engine.md §4): the variance components they use are posterior
means under the flat prior on {σ² ≥ 0, Σ σ² ≤ cap}, integrated correctly (closed forms and a Monte
Carlo brute force), the intervals cover simulated crossed random-effects truths drawn from that
prior at their stated confidence, and they read the release's DP outputs only."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpopt.estimation.crossed_estimate import (component_nodes, grid_halfwidths, interval_fit, joint_prior_means, region_end,
                                               joint_prior_posteriors, predictive_halfwidth)
from dpopt.hierarchy.crossed import RESIDUAL

#: tolerance of a posterior mean against its closed form, as a share of the cap (quadrature error
#: O(1/JOINT_GRID))
QUAD_TOL = 2e-3


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_flat_likelihoods_give_the_uniform_simplex_means(k: int) -> None:
    """k flat likelihoods on {Σ σ² ≤ cap}: each component's mean is cap/(k + 1) (the uniform law on
    the simplex); one alone gets cap/2, the midpoint (the earlier log-grid rule gave 0.78·cap)."""
    cap = 37.0
    nodes = [component_nodes(cap, 0.0) for _ in range(k)]
    means = joint_prior_means(cap, nodes, [np.zeros(v.size) for v in nodes])
    assert means == pytest.approx([cap / (k + 1)] * k, abs=QUAD_TOL * cap)


def test_the_quadrature_matches_a_monte_carlo_integral_over_the_simplex() -> None:
    """Peaked, sloped and flat likelihoods of three components, without and with a noisy
    measurement of their sum: the quadrature's posterior means against importance sampling of the
    uniform law on {Σ σ² ≤ cap} weighted by the likelihoods."""
    rng = np.random.default_rng(4)
    cap = 10.0
    shapes = [lambda v: -0.5 * ((v - 2.0) / 0.6) ** 2,  # pinned near 2
              lambda v: -0.4 * v,  # favours small values
              lambda v: 0.0 * v]  # says nothing
    nodes = [component_nodes(cap, r) for r in (2.0, 0.0, 0.0)]
    x = cap * rng.dirichlet(np.ones(4), size=400_000)[:, :3]  # uniform on the simplex
    w = np.exp(sum(np.interp(x[:, j], v, f(v)) for j, (f, v) in enumerate(zip(shapes, nodes))))
    for total in (None, (4.0, 1.5, "laplace")):  # without and with a noisy measurement of the sum
        means = joint_prior_means(cap, nodes, [f(v) for f, v in zip(shapes, nodes)], total)
        wt = w if total is None else w * np.exp(-np.sqrt(2.0) * np.abs(total[0] - x.sum(axis=1)) / total[1])
        brute = (wt[:, None] * x).sum(axis=0) / wt.sum()
        assert means == pytest.approx(brute, abs=0.01 * cap)


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_a_noisy_measurement_of_the_sum_weights_the_prior(family: str) -> None:
    """One flat component and V̂ = σ² + noise (sd 3): its posterior on [0, cap] is the noise density
    at V̂ − σ², truncated: the Gaussian's mean in closed form, the Laplace's by a fine brute-force
    integral."""
    from statistics import NormalDist

    cap, v_hat, sd = 40.0, 5.0, 3.0
    nodes = [component_nodes(cap, 0.0)]
    (mean,) = joint_prior_means(cap, nodes, [np.zeros(nodes[0].size)], (v_hat, sd, family))
    if family == "gaussian":
        nd = NormalDist()
        a, b = (0.0 - v_hat) / sd, (cap - v_hat) / sd
        expect = v_hat + sd * (nd.pdf(a) - nd.pdf(b)) / (nd.cdf(b) - nd.cdf(a))
    else:
        t = np.linspace(0.0, cap, 2_000_001)
        dens = np.exp(-np.sqrt(2.0) * np.abs(v_hat - t) / sd)
        expect = float(np.sum(t * dens) / np.sum(dens))
    assert mean == pytest.approx(expect, abs=QUAD_TOL * cap)


def test_the_quadrature_nodes_hold_the_range_ends_and_the_reml_value() -> None:
    v = component_nodes(50.0, 7.0)
    assert v[0] == 0.0 and v[-1] == 50.0 and np.all(np.diff(v) > 0) and 7.0 in v


def test_the_predictive_interval_covers_its_mixture_by_monte_carlo() -> None:
    """σ²_e drawn from its posterior masses, then the error from N(0, base + σ²_e): the predictive
    half-width covers 0.95 of the draws (Monte Carlo), is wider than the plug-in z·√(base + E σ²_e),
    and the interpolated half-widths (many distinct bases) agree with exact solves."""
    rng = np.random.default_rng(8)
    cap = 30.0
    nodes = [component_nodes(cap, 0.0), component_nodes(cap, 6.0)]
    u, (p_e, _) = joint_prior_posteriors(cap, nodes, [np.zeros(nodes[0].size), -0.5 * ((nodes[1] - 6.0) / 2.0) ** 2])
    base = np.array([0.0, 1.5, 12.0])
    h = predictive_halfwidth(base, u, p_e, confidence=0.95)
    t = rng.choice(u, p=p_e, size=400_000)
    for b, hb in zip(base, h):
        x = rng.normal(0.0, np.sqrt(b + t))
        assert np.mean(np.abs(x) <= hb) == pytest.approx(0.95, abs=0.002)
        assert hb > 1.959964 * np.sqrt(b + np.sum(u * p_e))
    many = np.linspace(0.0, 12.0, 2000)
    exact = np.concatenate([predictive_halfwidth(many[i: i + 400], u, p_e, confidence=0.95)
                            for i in range(0, many.size, 400)])  # ≤ 512 distinct: solved exactly
    assert predictive_halfwidth(many, u, p_e, confidence=0.95) == pytest.approx(exact, rel=1e-4)


def _crossed_case(rng: np.random.Generator, sig: dict[str, float], *, n_place: int = 12, n_time: int = 10,
                  noise_sd: float = 0.3) -> tuple[dict, sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """θ_g = 50 + u_place + u_time + e_g on a full place × time list; observed: every place node and
    every time node (the mean of its grids) with N(0, noise_sd²) noise, no grid alone."""
    place = np.repeat(np.arange(n_place), n_time)
    time = np.tile(np.arange(n_time), n_place)
    G = place.size
    theta = (50.0 + rng.normal(0, np.sqrt(sig["place"]), n_place)[place]
             + rng.normal(0, np.sqrt(sig["time"]), n_time)[time] + rng.normal(0, np.sqrt(sig[RESIDUAL]), G))
    rows = np.concatenate([place, n_place + time])
    cols = np.concatenate([np.arange(G), np.arange(G)])
    vals = np.concatenate([np.full(G, 1.0 / n_time), np.full(G, 1.0 / n_place)])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n_place + n_time, G))
    y = A @ theta + rng.normal(0, noise_sd, A.shape[0])
    s2 = np.full(A.shape[0], noise_sd ** 2)
    return {"place": place, "time": time}, A, y, s2, theta


def _intervals(factors: dict, A: sp.csr_matrix, y: np.ndarray, s2: np.ndarray, cap: float,
               total: tuple[float, float, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(posterior means, half-widths at 0.95) of the grids, as the engine computes them (no grid is
    measured on its own: each holds its residual whole)."""
    fit, upper, wide, residual = interval_fit(factors, A, y, s2, cap=cap, seen={"place", "time"},
                                              residual_seen=False, total=total)
    return fit.grid_mean, grid_halfwidths(fit, upper, wide, residual, alone=np.ones(A.shape[1], dtype=bool),
                                          cap=cap)


@pytest.mark.slow
@pytest.mark.parametrize("noisy_sum", [False, True])
def test_intervals_cover_truths_drawn_from_the_prior_at_their_confidence(noisy_sum: bool) -> None:
    """Components drawn uniformly from {Σ σ² ≤ cap} (the prior the intervals assume), the grids'
    own residual never measured, the sum measured with Laplace noise of sd 15 (``noisy_sum``, as the
    between-grid statistic measures it) or not: the grids' intervals cover their truths in about
    0.95 of (grid, draw) pairs, and in at least 0.90 of the grids of most draws."""
    rng = np.random.default_rng(21)
    cap = 40.0
    hits, per_draw = [], []
    for _ in range(60):
        s = cap * rng.dirichlet(np.ones(4))[:3]
        sig = {"place": s[0], "time": s[1], RESIDUAL: s[2]}
        factors, A, y, s2, theta = _crossed_case(rng, sig)
        total = (float(s.sum() + rng.laplace(0.0, 15.0 / np.sqrt(2.0))), 15.0, "laplace") if noisy_sum else None
        fit_mean, hw = _intervals(factors, A, y, s2, cap, total)
        ok = np.abs(fit_mean - theta) <= hw
        hits.append(ok)
        per_draw.append(ok.mean())
    coverage = float(np.mean(np.concatenate(hits)))
    assert 0.92 <= coverage <= 0.985
    assert np.mean(np.array(per_draw) >= 0.90) >= 0.7


@pytest.mark.slow
def test_intervals_stay_honest_when_the_unseen_residual_holds_most_of_the_cap() -> None:
    """A fixed truth with the grids' own residual at half of the cap and the seen components small:
    the flat prior puts the residual's mean near (cap − seen)/2, below the truth, so this is the
    intervals' weak side: measured, they cover 0.90 of the grids on average (0.83 in the worst of 20
    draws). The assertion guards that level."""
    rng = np.random.default_rng(5)
    cap = 40.0
    sig = {"place": 4.0, "time": 2.0, RESIDUAL: 20.0}
    cover = []
    for _ in range(20):
        factors, A, y, s2, theta = _crossed_case(rng, sig)
        fit_mean, hw = _intervals(factors, A, y, s2, cap)
        cover.append(np.mean(np.abs(fit_mean - theta) <= hw))
    assert np.mean(cover) >= 0.88


def test_a_spread_bound_below_the_pinned_components_does_not_squeeze_them() -> None:
    """The spread bound R is a 2-sd upper end: in ≈ 3 % of releases its noise falls low and R lies
    below the components the nodes pin (the synthetic sensors at ε = 10, seed 1006: R = 26.3 against
    REML 45 + 12, coverage 0.66). Here place and time components of 20 each, pinned by 40 + 30 nodes,
    with R = 8: the prior's region ends at their REML sum (:func:`region_end`), so their posterior
    means stay near their REML values instead of sharing 8, and the grids are covered. Without the
    rule the two means sum to at most 8 and the grids are covered about 0.6 (measured before the rule)."""
    rng = np.random.default_rng(12)
    low = 8.0
    sig = {"place": 20.0, "time": 20.0, RESIDUAL: 1.0}
    cover = []
    for _ in range(10):
        factors, A, y, s2, theta = _crossed_case(rng, sig, n_place=40, n_time=30, noise_sd=0.5)
        fit, upper, wide, residual = interval_fit(factors, A, y, s2, cap=low, seen={"place", "time"},
                                                  residual_seen=False)
        cap = region_end(low, fit)
        assert cap == pytest.approx(fit.sigma2["place"] + fit.sigma2["time"]) and cap > low
        assert upper["place"] + upper["time"] > 2.0 * low
        hw = grid_halfwidths(fit, upper, wide, residual, alone=np.ones(A.shape[1], dtype=bool), cap=cap)
        cover.append(np.mean(np.abs(fit.grid_mean - theta) <= hw))
    assert region_end(100.0, fit) == 100.0  # a bound above the pinned sum is kept
    assert np.mean(cover) >= 0.9


class _OutputsOnly:
    """A sampler whose every output ignores the exact statistic it is given: noise from the wrapped
    sampler plus a constant. Two data sets measured through it give the same outputs."""

    def __init__(self, mech) -> None:
        self._mech = mech

    def __getattr__(self, name: str):
        return getattr(self._mech, name)

    def integer(self, values, *, l1, l2, budget):
        zeros = np.zeros(np.shape(values), dtype=np.int64)
        return np.asarray(self._mech.integer(zeros, l1=l1, l2=l2, budget=budget), dtype=float) + 1000.0


def _rows(seed: int) -> list[tuple[str, int, int, float]]:
    """Users over the 48 test grids (6 cells × 8 slots), one of them visiting every grid (the same
    public list for every seed), values and counts from ``seed``."""
    rng = np.random.default_rng(seed)
    rows = [("all", g, 0, float(rng.uniform(0, 100))) for g in range(48)]
    for u in range(40):
        for g in rng.choice(48, size=int(rng.integers(3, 12)), replace=False):
            rows += [(f"u{u}", int(g), t, float(rng.uniform(0, 100))) for t in range(int(rng.integers(1, 6)))]
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("cheat", [False, True])
def test_the_intervals_read_the_dp_outputs_only(monkeypatch, cheat: bool) -> None:
    """Two data sets with the same public list (different users, counts and values) measured
    through a sampler whose outputs do not depend on the data, with the same bounds (T, B): every
    published mean and interval must be the same. An interval (or a plan) that read an exact count,
    sum, spread or truth anywhere between the records and the release would differ: the check's
    power is shown by a cheating engine that hands the estimate the exact between-grid statistic
    (``cheat``), whose intervals then differ."""
    import pandas as pd

    import dpopt.privacy.user.engine as engine
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import release_user
    from tests.privacy.user.conftest import make_agg

    aggs = [make_agg(_rows(1)), make_agg(_rows(2))]
    assert not np.array_equal(aggs[0].pair_grid, aggs[1].pair_grid) or aggs[0].n_users != aggs[1].n_users
    fixed = {}
    real_bounds, real_samplers = engine.choose_place_bounds, engine._samplers

    def bounds(*args, **kwargs):  # the first data set's DP bounds, for both
        if "pb" not in fixed:
            fixed["pb"] = real_bounds(*args, **kwargs)
        return fixed["pb"]

    def samplers(*args, **kwargs):
        mech, sel, rng = real_samplers(*args, **kwargs)
        return _OutputsOnly(mech), sel, rng

    monkeypatch.setattr(engine, "choose_place_bounds", bounds)
    monkeypatch.setattr(engine, "_samplers", samplers)
    monkeypatch.setattr(engine, "_with_noise", lambda exact, noise: np.asarray(noise, dtype=float) + 1000.0)
    if cheat:
        real_between = engine._measure_between

        def exact_between(b, mech, budget):
            fields, spent = real_between(b, mech, budget)
            q, _ = engine.between_sumsq(b.R[0], b.Y[0], half_sum=b.half_sum, bits=int(round(-np.log2(b.lam))),
                                        cap=b.cap)
            return {**fields, "between": b.lam * float(q)}, spent

        monkeypatch.setattr(engine, "_measure_between", exact_between)
    tables = []
    for agg in aggs:
        parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
        r = release_user(agg, Budget(epsilon_total=5.0), UserOptions(partitions=parts), bound=100.0,
                         noise=NoiseOptions(noise="numpy", seed=7))
        tables.append(r.estimates.table[["cell", "slot", "mean", "mean_error_bound"]])
    assert np.isfinite(tables[0]["mean_error_bound"]).all()
    if not cheat:  # every published mean and interval the same
        pd.testing.assert_frame_equal(tables[0], tables[1])
    else:  # the exact statistic shows: in the intervals, and where it moves a plan (a vote's raise), the means
        assert not tables[0].equals(tables[1])
        assert not np.array_equal(tables[0]["mean_error_bound"].to_numpy(), tables[1]["mean_error_bound"].to_numpy())


def test_likelihoods_peaking_above_the_region_keep_the_posterior_inside_it() -> None:
    """Two components whose likelihoods rise as e^{6σ²} over the region {Σ σ² ≤ 8} (their REML
    values far above it) and a flat third: the joint density of s = σ²_1 + σ²_2 is ∝ s·(8 − s)·e^{6s}
    (the third integrated out), so each of the two has posterior mean E[s]/2, by a fine 1-D integral.
    The quadrature must agree, and the means must sum to at most 8: with FFT convolutions their
    rounding floor gave 7.75 + 7.75 + 2.73 (at e^{3σ²} it still agreed)."""
    cap = 8.0
    grid = np.linspace(0.0, cap, 4001)
    means = joint_prior_means(cap, [grid, grid, grid], [6.0 * grid, 6.0 * grid, np.zeros(grid.size)])
    s = np.linspace(0.0, cap, 2_000_001)
    dens = s * (cap - s) * np.exp(6.0 * (s - cap))
    half = float(np.sum(s * dens) / np.sum(dens)) / 2.0
    assert means[0] == pytest.approx(half, abs=QUAD_TOL * cap) and means[1] == pytest.approx(half, abs=QUAD_TOL * cap)
    assert sum(means) <= cap


def _two_interactions(seed: int, residual_sd: float) -> tuple[dict, sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """15 places × 6 days × 8 hours; nodes (noise sd 0.14) of the place, hour, day, place × hour,
    place × day and (group of 3 places) × slot — never a grid alone, as at high ε on the full Austin
    data — and a grid-level residual of sd ``residual_sd``. Returns (factors, A, y, s², θ)."""
    rng = np.random.default_rng(seed)
    P, D, H = 15, 6, 8
    place = np.repeat(np.arange(P), D * H)
    day = np.tile(np.repeat(np.arange(D), H), P)
    hour = np.tile(np.arange(H), P * D)
    factors = {"place": place, "hour": hour, "day": day, "place_hour": place * H + hour,
               "place_day": place * D + day, "group_slot": (place // 3) * (D * H) + day * H + hour}
    sds = {"place": 3.0, "hour": 2.0, "day": 1.4, "place_hour": 1.0, "place_day": 1.0, "group_slot": 0.5}
    theta = 50.0 + rng.normal(0, residual_sd, place.size)
    for k, codes in factors.items():
        theta = theta + rng.normal(0, sds[k], codes.max() + 1)[codes]
    blocks = []
    for codes in factors.values():
        levels, inverse = np.unique(codes, return_inverse=True)
        size = np.bincount(inverse)
        blocks.append(sp.csr_matrix((1.0 / size[inverse], (inverse, np.arange(codes.size))),
                                    shape=(levels.size, codes.size)))
    A = sp.vstack(blocks).tocsr()
    s2 = np.full(A.shape[0], 0.02)
    return factors, A, A @ theta + rng.normal(0, np.sqrt(s2)), s2, theta


@pytest.mark.parametrize("residual_sd", [2.5, 0.0])
def test_left_out_components_are_refitted_for_the_intervals_where_the_data_reject_them_being_zero(
        residual_sd: float, monkeypatch) -> None:
    """No grid measured on its own, so the point fit leaves the grids' residual out; fitted without it,
    the two interactions absorb the grids' own variation and the residual's likelihood, taken with
    them at that fit, is pinned near 0: its posterior mean was 1.2 against a true 6.25 and the
    intervals covered 0.81 of the grids. Where the likelihood-ratio test rejects "residual = 0"
    (JOINT_TEST_LEVEL), the likelihoods are taken at the REML fit of every component: 7.2, coverage
    1.0. Where the residual is truly 0 the test does not reject and nothing changes."""
    import dpopt.estimation.crossed_estimate as ce

    factors, A, y, s2, theta = _two_interactions(6, residual_sd)

    def run() -> tuple[float, float]:
        fit, upper, wide, residual = interval_fit(factors, A, y, s2, cap=200.0, seen=set(factors),
                                                  residual_seen=False)
        h = grid_halfwidths(fit, upper, wide, residual, alone=np.ones(theta.size, dtype=bool), cap=200.0)
        return upper[RESIDUAL], float(np.mean(np.abs(fit.grid_mean - theta) <= h))

    tested = run()
    monkeypatch.setattr(ce, "JOINT_TEST_LEVEL", 1e-300)  # never rejects: the conditional likelihoods
    conditional = run()
    if residual_sd > 0:
        assert 4.0 <= tested[0] <= 12.0 and tested[1] >= 0.9, tested
        assert conditional[0] < 2.5 and conditional[1] < 0.9, conditional
    else:
        assert tested == conditional and tested[1] >= 0.95


def test_weak_components_by_the_test_beside_a_strong_one_and_by_akaikes_unit_alone() -> None:
    """:func:`weak_components` against an independent computation: ℓ_R at the REML values and with
    one component at 0 (the others at REML) from fit_crossed with the components given; where some
    component's drop passes χ²₁(0.95)/2 = 1.92, weak iff the drop is ≤ 1.92, else iff ≤ 1 (Akaike's
    unit, :data:`POINT_FIT_PENALTY`). Over seeded crossed cases where the place is strong and the time
    is buried in noise (sd 3 against a time sd of 0.3, a place sd of 10), the place is never weak and
    the time is weak whenever REML gives it more than 0 on noise alone."""
    from scipy.special import chdtri

    from dpopt.estimation.crossed_estimate import POINT_FIT_PENALTY, weak_components
    from dpopt.hierarchy.crossed import fit_crossed

    assert POINT_FIT_PENALTY == 1.0
    flagged_time = 0
    for seed in range(12):
        rng = np.random.default_rng(4000 + seed)
        factors, A, y, s2, _ = _crossed_case(rng, {"place": 100.0, "time": 0.09, RESIDUAL: 0.0}, noise_sd=3.0)
        fit = fit_crossed(factors, A, y, s2, residual=False, variances=False)
        weak = weak_components(fit, A, y, s2)
        drops = {}
        for k, v in fit.sigma2.items():
            if v > 0:
                at0 = fit_crossed(factors, A, y, s2, residual=False, variances=False, sigma2={**fit.sigma2, k: 0.0})
                drops[k] = fit.loglik - at0.loglik
        crit = chdtri(1, 0.05) / 2.0 if any(d > chdtri(1, 0.05) / 2.0 for d in drops.values()) else 1.0
        want = {k for k, d in drops.items() if d <= crit}
        assert weak == want
        assert "place" not in weak
        flagged_time += "time" in weak
        assert fit.sigma2["time"] == 0.0 or "time" in weak or fit.sigma2["time"] > 9.0
    assert flagged_time >= 1  # the case happens: REML above 0 on noise, and the test catches it


@pytest.mark.slow
def test_the_point_fits_criterion_keeps_what_predicts_better_on_an_even_mix_of_truths() -> None:
    """Where no component passes the test, Akaike's one unit (:data:`POINT_FIT_PENALTY`) against the
    2.5 % test (χ²₁(0.95)/2 = 1.92) where the two differ, ℓ_R of the one component 1–1.92 above its
    value at 0 (the alternative: the map-wide mean for every grid): 26 places ×
    10 times, every place and time node observed with noise variance 1, no grid alone, the place's true
    component 0, ¼ or 1 (the noise variance), 400 seeds each. Keeping it costs where its truth is 0 and
    gains where it is the noise's size; over the even mix of the three the grids' squared error falls
    (the point fit is a prediction). :func:`weak_components` keeps exactly the components above one
    unit."""
    from scipy.special import chdtri

    from dpopt.estimation.crossed_estimate import weak_components
    from dpopt.hierarchy.crossed import fit_crossed

    gains: dict[float, list[float]] = {}
    for truth in (0.0, 0.25, 1.0):
        for seed in range(400):
            rng = np.random.default_rng(9000 + seed)
            factors, A, y, s2, theta = _crossed_case(rng, {"place": truth, "time": 0.0, RESIDUAL: 0.0},
                                                     n_place=26, n_time=10, noise_sd=1.0)
            place = {"place": factors["place"]}
            fit = fit_crossed(place, A, y, s2, residual=False, variances=False)
            if fit.sigma2["place"] <= 0:
                continue
            at0 = fit_crossed(place, A, y, s2, residual=False, variances=False, sigma2={"place": 0.0})
            rise = fit.loglik - at0.loglik
            assert weak_components(fit, A, y, s2) == (set() if rise > 1.0 else {"place"})
            if 1.0 < rise <= chdtri(1, 0.05) / 2.0:
                gains.setdefault(truth, []).append(float(np.mean((at0.grid_mean - theta) ** 2)
                                                         - np.mean((fit.grid_mean - theta) ** 2)))
    assert all(g < 0 for g in gains[0.0])
    assert np.mean(np.array(gains[1.0]) > 0) >= 0.9
    assert sum(sum(g) for g in gains.values()) > 0


def test_a_component_reml_puts_on_noise_leaves_the_point_estimate() -> None:
    """interval_fit's point fit drops a seen component the data do not distinguish from 0 (its nodes
    still observe their grids): with a pure-noise time factor the grid means are those of the fit
    without it, and a strong one stays."""
    from dpopt.estimation.crossed_estimate import weak_components
    from dpopt.hierarchy.crossed import fit_crossed

    for seed in range(40):
        rng = np.random.default_rng(5000 + seed)
        factors, A, y, s2, _ = _crossed_case(rng, {"place": 25.0, "time": 0.0, RESIDUAL: 0.0}, noise_sd=3.0)
        full = fit_crossed(factors, A, y, s2, residual=False, variances=False)
        if full.sigma2["time"] > 0 and weak_components(full, A, y, s2) == {"time"}:
            break
    else:
        pytest.fail("no seed where REML put the noise into the time component")
    fit, *_ = interval_fit(factors, A, y, s2, cap=100.0, seen={"place", "time"}, residual_seen=False)
    alone = fit_crossed({"place": factors["place"]}, A, y, s2, residual=False, variances=False)
    # to REML's tolerance (the refit starts at the fuller fit's components, ``alone`` at the moment
    # start: 4·10⁻⁸ apart); keeping the weak component moves the means by 10⁻² (seed 5001)
    np.testing.assert_allclose(fit.grid_mean, alone.grid_mean, rtol=1e-6)
    assert np.max(np.abs(full.grid_mean / alone.grid_mean - 1.0)) > 1e-4
    assert fit.sigma2["place"] > 0


def _resolution_info(levels, codes):
    from types import SimpleNamespace

    return SimpleNamespace(levels=tuple(levels), codes=tuple(np.asarray(c) for c in codes))


def test_resolved_grids_are_the_cells_hours_and_their_counts_the_independence_fit():
    """3 cells × 2 days × 4 hours of the day (24 grids). cell × hour-of-day and cell × day (measured,
    the finest resolution 7) single out every grid; their one-sweep proportional fit of a product
    table n(c, d, h) = a_c·p_c(h)·q_c(d) is that table exactly (brute force below). With cell × day
    alone, or with a coarser place's slot instead (resolution 3), no grid is resolved. An unmeasured
    marginal (NaN counts) does not count."""
    from dpopt.estimation.crossed_estimate import resolved_grids

    rng = np.random.default_rng(3)
    c, d, h = np.meshgrid(np.arange(3), np.arange(2), np.arange(4), indexing="ij")
    c, d, h = c.ravel(), d.ravel(), h.ravel()
    table = rng.uniform(50, 200, 3)[c] * rng.dirichlet(np.ones(4), 3)[c, h] * rng.dirichlet(np.ones(2), 3)[c, d]
    finest = np.arange(24)
    cell_hod, cell_day, r3_slot = c * 4 + h, c * 2 + d, d * 4 + h
    counts = {"hod": np.bincount(cell_hod, table), "day": np.bincount(cell_day, table), "slot": np.bincount(r3_slot, table)}
    var = lambda n: np.full(n.size, 1e-6)  # noqa: E731
    info = _resolution_info([(7, 3600, 0), (7, 3600, 86400), (7, 86400, 0), (3, 3600, 0)],
                            [finest, cell_hod, cell_day, r3_slot])
    nan24 = np.full(24, np.nan)
    parts = [(nan24, nan24, nan24, nan24), (counts["hod"], var(counts["hod"]), None, None),
             (counts["day"], var(counts["day"]), None, None), (counts["slot"], var(counts["slot"]), None, None)]
    resolved, n_hat = resolved_grids(info, parts)
    assert resolved.all()
    np.testing.assert_allclose(n_hat, table, rtol=1e-9)
    nan_hod = np.full(12, np.nan)
    resolved, n_hat = resolved_grids(info, [parts[0], (nan_hod, nan_hod, None, None)] + parts[2:])
    assert not resolved.any() and np.isnan(n_hat).all()  # cell × day alone: 4 grids per node
    info3 = _resolution_info([(7, 3600, 0), (7, 86400, 0), (3, 3600, 0)], [finest, cell_day, r3_slot])
    assert not resolved_grids(info3, [parts[0], parts[2], parts[3]])[0].any()  # a coarser place's slot: no


def test_resolved_grids_share_nodes_where_the_slot_is_finer():
    """15-minute grids under cell × hour-of-day and cell × day: the four quarters of an hour share
    both nodes, so none is resolved; one quarter alone in its hour is."""
    from dpopt.estimation.crossed_estimate import resolved_grids

    cell_hod = np.array([0, 0, 0, 0, 1])  # four quarters of hour 0, one quarter of hour 1
    cell_day = np.zeros(5, dtype=int)
    info = _resolution_info([(7, 900, 0), (7, 3600, 86400), (7, 86400, 0)], [np.arange(5), cell_hod, cell_day])
    nan5 = np.full(5, np.nan)
    parts = [(nan5,) * 4, (np.array([40.0, 10.0]), np.ones(2), None, None), (np.array([50.0]), np.ones(1), None, None)]
    resolved, n_hat = resolved_grids(info, parts)
    np.testing.assert_array_equal(resolved, [False, False, False, False, True])
    assert n_hat[4] == pytest.approx(10.0) and np.isnan(n_hat[:4]).all()


def test_the_published_interval_is_taken_about_the_published_mean() -> None:
    """The published mean is the point fit's (REML components); the posterior is the interval fit's
    (the components' posterior means), about that fit's own centre. Where a low measurement of the
    sum squeezes the interval's components below REML's (the day-set's seed 1014, models/engine.md
    §4), the centres differ, and each published half-width lies between the centred one (and |the
    centres' difference|) and their sum, strictly wider than the centred one where they differ."""
    rng = np.random.default_rng(31)
    factors, A, y, s2, _ = _crossed_case(rng, {"place": 25.0, "time": 25.0, RESIDUAL: 0.0}, noise_sd=1.0)
    fit, upper, wide, residual = interval_fit(factors, A, y, s2, cap=100.0, seen={"place", "time"},
                                              residual_seen=False, total=(8.0, 2.0, "laplace"))
    alone = np.ones(A.shape[1], dtype=bool)
    published = grid_halfwidths(fit, upper, wide, residual, alone=alone, cap=100.0)
    centred = grid_halfwidths(wide, upper, wide, residual, alone=alone, cap=100.0)  # about its own centre
    shift = np.abs(fit.grid_mean - wide.grid_mean)
    assert np.max(shift / centred) > 0.1  # the centres differ here: the case is not vacuous
    assert np.all(published >= np.maximum(centred, shift) - 1e-9)
    assert np.all(published <= centred + shift + 1e-9)
    assert np.all(published[shift > 1e-6 * centred] > centred[shift > 1e-6 * centred])


@pytest.mark.parametrize("shift", [0.0, 0.3, 1.5, 6.0])
def test_the_offcentre_halfwidth_covers_its_mixture(shift: float) -> None:
    """offcentre_halfwidth against independent computations: one normal N(−d, s²) by a root finder on
    its closed-form coverage, and a scale mixture of normals about −d by Monte Carlo (the variance
    drawn from its masses, then the error)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    from dpopt.estimation.crossed_estimate import offcentre_halfwidth

    s = np.array([0.5, 2.0, 4.0])
    h0 = norm.ppf(0.975) * s
    h = offcentre_halfwidth(h0, np.full(3, shift), (s * s)[:, None], np.ones(1), confidence=0.95)
    for hi, si in zip(h, s):
        exact = brentq(lambda x: norm.cdf((x - shift) / si) - norm.cdf((-x - shift) / si) - 0.95, 0.0, 100.0)
        assert hi == pytest.approx(exact, rel=1e-9)
    rng = np.random.default_rng(12)
    var = np.array([[1.0, 4.0, 16.0]])
    p = np.array([0.5, 0.3, 0.2])
    centred = predictive_halfwidth(np.zeros(1), var[0], p, confidence=0.95)
    (hm,) = offcentre_halfwidth(centred, np.array([shift]), var, p, confidence=0.95)
    t = rng.choice(var[0], p=p, size=800_000)
    x = rng.normal(-shift, np.sqrt(t))
    assert np.mean(np.abs(x) <= hm) == pytest.approx(0.95, abs=0.002)


def test_the_offcentre_halfwidth_solves_many_rows_as_a_root_finder_does() -> None:
    """Over more rows than one chunk, random shifts (some negligible) and a three-point mixture: each
    half-width against brentq on the mixture's closed-form coverage, never below it by more than the
    tolerance and never above h₀ + |d|."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    from dpopt.estimation.crossed_estimate import OFFCENTRE_ROWS, offcentre_halfwidth

    rng = np.random.default_rng(44)
    n = OFFCENTRE_ROWS + 300
    base = rng.uniform(0.1, 9.0, n)
    u, p = np.array([0.0, 2.0, 7.0]), np.array([0.2, 0.5, 0.3])
    var = base[:, None] + u[None, :]
    centred = predictive_halfwidth(base, u, p, confidence=0.95)
    shift = rng.normal(0.0, 2.0, n) * (rng.random(n) < 0.9)
    h = offcentre_halfwidth(centred, shift, var, p, confidence=0.95)
    assert np.all(h <= centred + np.abs(shift) + 1e-9)
    for i in rng.choice(n, 60, replace=False):
        s, d = np.sqrt(var[i]), abs(shift[i])
        cover = lambda x: float(np.dot(p, norm.cdf((x - d) / s) - norm.cdf((-x - d) / s))) - 0.95
        exact = brentq(cover, 0.0, 100.0, xtol=1e-13)
        negligible = d <= 1e-3 * centred[i]  # the wide end h0 + |d| is kept
        assert h[i] == pytest.approx(exact, rel=2e-3 if negligible else 1e-7)
        assert cover(h[i]) >= -1e-9


def test_the_predictive_interval_of_a_few_point_mixture_counts_each_point_once() -> None:
    """A posterior on fewer points than the binning's (three): the half-width solves the mixture's
    closed-form coverage (brentq), each mass counted once (binning by repeated edges doubled some)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    u, p = np.array([0.0, 2.0, 7.0]), np.array([0.2, 0.5, 0.3])
    for b in (0.5, 3.0):
        s = np.sqrt(b + u)
        exact = brentq(lambda x: float(np.dot(p, 2.0 * norm.cdf(x / s) - 1.0)) - 0.95, 0.0, 100.0, xtol=1e-13)
        assert predictive_halfwidth(np.array([b]), u, p, confidence=0.95)[0] == pytest.approx(exact, rel=1e-9)


def test_the_residual_scales_are_the_weights_inverse_where_a_cell_level_count_weighs_the_grids() -> None:
    """r_g = max(w̄/w_g, 1) where a marginal at the grids' own place level is mostly measured and the
    grids' own counts are not — for every share s of the residual that follows the weights, the
    largest of s·w̄/w_g + (1 − s), so a busy grid keeps the whole σ²_e (an outside check: with w̄/w_g
    alone the busiest grids covered 0.67 where an unseen hour-of-day profile set the value); None
    where only a coarser place's counts weigh the grids, where the cell-level counts are mostly noise,
    or where the grids were counted."""
    from dpopt.estimation.crossed_estimate import residual_scales

    cell_period, r3_slot = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 0, 1, 0, 1])
    info = _resolution_info([(7, 3600, 0), (7, 0, 0), (3, 3600, 0)], [np.arange(6), cell_period, r3_slot])
    nan6 = np.full(6, np.nan)
    w = np.array([40.0, 10.0, 5.0, 5.0, 1.0, 3.0])
    cells = (np.array([500.0, 100.0, 40.0]), np.full(3, 1.0), None, None)  # every node far above its noise
    slots = (np.array([300.0, 340.0]), np.full(2, 1.0), None, None)
    r = residual_scales(info, [(nan6,) * 4, cells, slots], w)
    np.testing.assert_allclose(r, [1.0, 64 / 60, 64 / 30, 64 / 30, 64 / 6, 64 / 18])  # w̄ = 64/6
    share = np.linspace(0.0, 1.0, 101)[:, None]  # the envelope of every split of σ²_e
    np.testing.assert_allclose(r, np.max(share * w.mean() / w + (1.0 - share), axis=0))
    assert np.all(r >= 1.0) and np.sum(w * r) / np.sum(w) > 1.0  # conservative: the mean is at least σ²_e
    assert residual_scales(info, [(nan6,) * 4, (np.full(3, np.nan),) * 4, slots], w) is None  # cells unmeasured
    noisy = (np.array([500.0, 100.0, 40.0]), np.full(3, 1e6), None, None)  # every node below its threshold
    assert residual_scales(info, [(nan6,) * 4, noisy, slots], w) is None
    counted = (np.full(6, 20.0), np.ones(6), None, None)
    assert residual_scales(info, [counted, cells, slots], w) is None


@pytest.mark.parametrize("shift", [0.0, 1.5])
def test_a_grids_scaled_residual_widens_its_interval_as_the_mixture_says(shift: float) -> None:
    """The half-width of a grid whose residual is r·t (masses p on u) about a mean ``shift`` off the
    fit's centre solves Σ p_i (Φ((h − d)/s_i) − Φ((−h − d)/s_i)) = 0.95, s_i² = base + r·u_i
    (brentq on the closed form; no cap in reach), and r = 1 gives the unscaled half-width."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    from dpopt.estimation.crossed_estimate import _mixed_halfwidths

    u = np.linspace(0.0, 40.0, 2049)
    p = np.exp(-u / 8.0)
    p /= p.sum()
    base, r = np.array([0.5, 2.0, 3.0, 0.1]), np.array([0.2, 1.0, 4.0, 30.0])
    d = np.full(4, shift)
    h = _mixed_halfwidths(base, (u, p), d, r, top=1e9, confidence=0.95)
    for g in range(4):
        s = np.sqrt(base[g] + r[g] * u)
        cover = lambda x, g=g, s=s: float(np.sum(p * (norm.cdf((x - d[g]) / s) - norm.cdf((-x - d[g]) / s)))) - 0.95  # noqa: E731
        assert h[g] == pytest.approx(brentq(cover, 1e-6, 1e4, xtol=1e-10), rel=2e-3)
    assert np.all(np.diff(h) > 0)  # a larger scale, a wider interval
    np.testing.assert_allclose(_mixed_halfwidths(base, (u, p), d, np.ones(4), top=1e9, confidence=0.95),
                               _mixed_halfwidths(base, (u, p), d, None, top=1e9, confidence=0.95), rtol=1e-6)


def test_the_offcentre_halfwidth_keeps_a_lower_end_that_already_covers() -> None:
    """A centred half-width capped at z·√top (``_mixed_halfwidths``: it holds any mixture of variances
    ≤ top) can cover more than the confidence even off centre; the root then lies below the bracket
    and the half-width is the bracket's lower end max(h₀, |d|), exactly — checked against the
    mixture's closed-form coverage there. Rows beside it that do need the solve still match brentq."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    from dpopt.estimation.crossed_estimate import offcentre_halfwidth

    top = 25.0
    var = np.array([[4.0, 9.0, 25.0], [4.0, 9.0, 25.0], [20.0, 25.0, 25.0]])
    p = np.array([0.6, 0.3, 0.1])
    z = norm.ppf(0.975)
    centred = np.array([z * np.sqrt(top), z * np.sqrt(top), predictive_halfwidth(np.array([20.0]), np.array([0.0, 5.0, 5.0]), p,
                                                                               confidence=0.95)[0]])
    shift = np.array([0.4, -1.1, 0.7])
    h = offcentre_halfwidth(centred, shift, var, p, confidence=0.95)

    def cover(x: float, i: int) -> float:
        s, d = np.sqrt(var[i]), abs(shift[i])
        return float(np.dot(p, norm.cdf((x - d) / s) - norm.cdf((-x - d) / s))) - 0.95

    for i in (0, 1):
        assert cover(centred[i], i) > 0.01  # the capped end covers more: the case is not vacuous
        assert h[i] == max(centred[i], abs(shift[i]))
    assert h[2] == pytest.approx(brentq(lambda x: cover(x, 2), 0.0, 100.0, xtol=1e-13), rel=1e-7)
    assert h[2] > centred[2]


def _two_regions(seed: int, *, thin_sd: float, b_sign: float) -> tuple[dict, sp.csr_matrix, np.ndarray, np.ndarray,
                                                                      np.ndarray, np.ndarray]:
    """Two regions × 28 days, grids = (cell, day), 10 cells in region A and 2 in B; the day of the week
    sets the value (+20 at weekends in A, ``b_sign`` · 20 in B, ± 1 per grid). Observed: the 14
    region × day-of-week nodes (the grids' means), A's with noise sd 1, B's with ``thin_sd``.
    Returns (factors, A, y, s², truth, region per grid)."""
    rng = np.random.default_rng(seed)
    cell, day = np.meshgrid(np.arange(12), np.arange(28), indexing="ij")
    cell, day = cell.ravel(), day.ravel()
    region, dow = (cell >= 10).astype(np.int64), day % 7
    weekend = np.where(dow >= 5, 20.0, -8.0)
    truth = 40.0 + np.where(region == 0, weekend, b_sign * weekend) + rng.normal(0, 1.0, cell.size)
    node = region * 7 + dow
    A = sp.csr_matrix((np.ones(cell.size), (node, np.arange(cell.size))), shape=(14, cell.size))
    A = sp.diags(1.0 / np.asarray(A.sum(axis=1)).ravel()) @ A
    s2 = np.where(np.arange(14) < 7, 1.0, thin_sd ** 2)
    y = A @ truth + rng.normal(0, np.sqrt(s2))
    return {"region × day-of-week": node, "every place × day-of-week": dow}, A.tocsr(), y, s2, truth, region


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_interaction_the_places_share_gives_way_to_its_main_effect(seed: int) -> None:
    """:func:`main_effects_instead` (models/engine.md §4, "Main effects"): where region B's nodes are
    noise (sd 300), the data cannot tell B's own day-of-week effects from A's, the fit with the
    main effect instead of the interaction loses ≤ χ²₁(0.95)/2 of ℓ_R against the interaction alone
    and against both (checked against fit_crossed directly), the main effect replaces it and B's grids are answered by the shared pattern — with
    the interaction alone (the model before the main effects) they were answered by μ, 6 units and
    more off."""
    from scipy.special import chdtri

    from dpopt.estimation.crossed_estimate import main_effects_instead
    from dpopt.hierarchy.crossed import fit_crossed

    factors, A, y, s2, truth, region = _two_regions(seed, thin_sd=300.0, b_sign=1.0)
    inter, main = "region × day-of-week", "every place × day-of-week"
    alone = fit_crossed({inter: factors[inter]}, A, y, s2, residual=False, variances=False)
    shared = fit_crossed({main: factors[main]}, A, y, s2, residual=False, variances=False)
    both = fit_crossed(factors, A, y, s2, residual=False, variances=False)
    crit = chdtri(1, 0.05) / 2.0  # the two tests, checked independently
    assert alone.sigma2[inter] > 100 and alone.loglik - shared.loglik <= crit and both.loglik - shared.loglik <= crit
    seen, fit, replaced = main_effects_instead(alone, factors, [inter], {inter: (main,)}, A, y, s2, residual=False,
                                               confidence=0.95)
    assert seen == [main] and replaced == [inter]
    # to REML's tolerance: the refit starts at the interaction's spread, ``shared`` at the moment start
    np.testing.assert_allclose(fit.grid_mean, shared.grid_mean, rtol=1e-6)
    thin = region == 1
    assert np.median(np.abs(fit.grid_mean[thin] - truth[thin])) < 3.0
    assert np.max(np.abs(alone.grid_mean[thin] - alone.mu)) < 1.5  # the failure the main effect removes: μ
    assert np.median(np.abs(alone.grid_mean[thin] - truth[thin])) > 6.0
    # interval_fit does it before the weak components' test
    given = {inter: factors[inter]}
    fit, *_ = interval_fit(given, A, y, s2, cap=900.0, seen=[inter], residual_seen=False,
                           mains=({main: factors[main]}, {inter: (main,)}))
    assert list(fit.sigma2) == [main]
    np.testing.assert_allclose(fit.grid_mean, shared.grid_mean, rtol=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_interaction_the_measurements_show_stays(seed: int) -> None:
    """Region B measured as well as A with the opposite weekly pattern: the main effect alone cannot
    fit both, ℓ_R falls by far more than the threshold, and the interaction stays in the fit."""
    from dpopt.estimation.crossed_estimate import main_effects_instead
    from dpopt.hierarchy.crossed import fit_crossed

    factors, A, y, s2, truth, region = _two_regions(seed, thin_sd=1.0, b_sign=-1.0)
    inter, main = "region × day-of-week", "every place × day-of-week"
    alone = fit_crossed({inter: factors[inter]}, A, y, s2, residual=False, variances=False)
    shared = fit_crossed({main: factors[main]}, A, y, s2, residual=False, variances=False)
    assert alone.loglik - shared.loglik > 10.0
    seen, fit, replaced = main_effects_instead(alone, factors, [inter], {inter: (main,)}, A, y, s2, residual=False,
                                               confidence=0.95)
    assert seen == [inter] and fit is alone and replaced == []
    assert np.median(np.abs(fit.grid_mean - truth)) < 3.0
