"""The engine's clamp measured again where its first histogram shows nothing (models/engine.md §2):
the second histogram's ε is 0 where a bin showed, else the pigeonhole need capped by ε_b; at that ε
a bin holding n/16 users clears its threshold with probability ≥ 1 − r (the exact discrete Laplace
tail, and the release's own sampler), at half of it it does not; a release whose first histogram
shows nothing reads B from the second, spends exactly its budget, publishes both histograms and is
recomputable from them, and measures its means on the narrower range."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt.noise.sources import SeededSource
from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.privacy.user.place_bounds import (CLAMP_PHANTOM_RATE, CLAMP_STEPS, PlaceBounds, choose_clamp,
                                             clamp_remeasure_epsilon, clamp_remeasure_side, clamp_shown,
                                             measure_clamp_histogram)
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import release_user
from tests.privacy.user.conftest import make_agg


def _bounds(clamp_counts, eps_clamp: float, users: float, low_counts=None) -> PlaceBounds:
    """A PlaceBounds whose clamp histogram is ``clamp_counts`` (and lower one ``low_counts``) at
    ``eps_clamp`` and whose denoised record histogram counts ``users`` users (all in one bin)."""
    counts = np.zeros(8)
    counts[2] = users
    return PlaceBounds(cap=16, clamp=120.0, epsilon=4 * eps_clamp, histogram=counts.astype(np.int64),
                       cap_noise=np.ones(1), candidates=np.array([16]), clamp_histogram=np.asarray(clamp_counts),
                       record_counts=counts, clamp_epsilon=eps_clamp,
                       low_histogram=None if low_counts is None else np.asarray(low_counts), low_epsilon=eps_clamp)


def test_the_side_measured_again_is_b_unless_the_values_visibly_reach_the_top_and_not_the_bottom():
    """None where both histograms show a bin; B where its histogram shows nothing; A where its own
    shows nothing and B = U is evident: B's histogram showed B = U, or both show nothing and the upper
    histogram's top bin (values reaching U) outnumbers the lower's (values reaching 0) by more than
    two sds of their difference (4/ε₁ = 40 at ε₁ = 0.1); not where B < U was seen."""
    seen, unseen = np.zeros(CLAMP_STEPS, dtype=np.int64), np.zeros(CLAMP_STEPS, dtype=np.int64)
    seen[5] = 500
    top, near = unseen.copy(), unseen.copy()
    top[-1], near[-1] = 60, 35  # below ln(16/0.02)/0.1 ≈ 67: nothing shown
    from dataclasses import replace

    side = lambda pb: clamp_remeasure_side(pb, 120.0)  # noqa: E731
    assert side(_bounds(seen, 0.1, 600.0, seen)) is None
    assert side(_bounds(seen, 0.1, 600.0)) is None  # one-sided, B shown
    assert side(_bounds(unseen, 0.1, 600.0, seen)) == "upper"
    assert side(_bounds(seen, 0.1, 600.0, unseen)) == "lower"  # B shown at U (the _bounds' clamp)
    assert side(replace(_bounds(seen, 0.1, 600.0, unseen), clamp=45.0)) is None  # B < U seen: A is not
    assert side(_bounds(top, 0.1, 600.0, unseen)) == "lower"  # values reach U, not 0
    assert side(_bounds(near, 0.1, 600.0, unseen)) == "upper"  # within the noise: B
    assert side(_bounds(unseen, 0.1, 600.0, top)) == "upper"  # values reach 0, not U
    assert side(_bounds(unseen, 0.1, 600.0, unseen)) == "upper"  # no evidence: B
    assert clamp_remeasure_epsilon(_bounds(seen, 0.1, 600.0, unseen), 5.0, "lower") > 0
    assert clamp_remeasure_epsilon(_bounds(seen, 0.1, 600.0, unseen), 5.0, "upper") == 0.0
    with pytest.raises(ValueError, match="`side`"):
        clamp_remeasure_epsilon(_bounds(seen, 0.1, 600.0, unseen), 5.0, "both")


def _clear_probability(users: int, eps: float) -> float:
    """P(users + Z ≥ t), t = ln(16/r)/ε, Z the discrete Laplace of scale 1/ε (P(z) ∝ e^{−ε|z|}),
    from its exact tails: P(Z ≥ k) = e^{−εk}/(1 + e^{−ε}) for k ≥ 1, 1 − P(Z ≥ 1 − k) for k ≤ 0."""
    k = math.ceil(math.log(CLAMP_STEPS / CLAMP_PHANTOM_RATE) / eps - users)
    r = math.exp(-eps)
    return r**k / (1 + r) if k >= 1 else 1.0 - r ** (1 - k) / (1 + r)


def test_no_second_histogram_where_the_first_shows_a_bin():
    h = np.zeros(CLAMP_STEPS, dtype=np.int64)
    h[7] = 500  # far above ln(16/0.02)/0.25 ≈ 27
    assert clamp_shown(h, 0.25) and clamp_remeasure_epsilon(_bounds(h, 0.25, 600.0), 10.0) == 0.0


@pytest.mark.parametrize("users", [146, 484, 2000, 20000])
def test_at_the_second_histograms_epsilon_the_pigeonhole_bin_clears(users):
    """Unbounded by the limit, the ε returned lets a bin of ⌈users/16⌉ (some bin holds that many)
    clear the threshold with probability ≥ 1 − r, r = CLAMP_PHANTOM_RATE, and half of it does not
    (the rule spends no more than about twice what is needed)."""
    h = np.zeros(CLAMP_STEPS, dtype=np.int64)
    eps = clamp_remeasure_epsilon(_bounds(h, 1e-4, float(users)), 1e6)
    m = math.ceil(users / CLAMP_STEPS)
    assert _clear_probability(m, eps) >= 1 - CLAMP_PHANTOM_RATE
    assert _clear_probability(m, eps / 2) < 0.5
    # the release's sampler agrees: 400 histograms with every user in one bin at the pigeonhole count
    src = SeededSource(users)
    votes = np.full(m, 5, dtype=np.int64)
    shown = sum(clamp_shown(measure_clamp_histogram(votes, eps, src), eps) for _ in range(400))
    assert shown >= 400 * (1 - CLAMP_PHANTOM_RATE) - 3 * math.sqrt(400 * 0.02 * 0.98)


def test_the_second_histograms_epsilon_is_capped_and_at_least_the_firsts():
    h = np.zeros(CLAMP_STEPS, dtype=np.int64)
    assert clamp_remeasure_epsilon(_bounds(h, 0.01, 146.0), 0.3) == 0.3  # the day's users need ≈ 1.2
    assert clamp_remeasure_epsilon(_bounds(h, 0.01, 0.0), 0.3) == 0.3  # no users counted: the limit
    assert clamp_remeasure_epsilon(_bounds(h, 0.2, 1e7), 5.0) == 0.2  # not less than the first's ε
    with pytest.raises(ValueError, match="`limit`"):
        clamp_remeasure_epsilon(_bounds(h, 0.2, 1e3), -1.0)


def _mid_range_release(eps: float, *, seed: int = 3, limit: float | None = None, monkeypatch=None,
                       values: tuple[float, float] = (40.0, 60.0), users: int = 60, bounds_fraction=None):
    """``users`` (60) whose values lie in ``values`` (default [40, 60]) of U = 120, each in 4 of 12
    grids with 12 records: at ε = 2 the first clamp histograms (ε_B = 0.075: a bin needs ≈ 89 users)
    show nothing; the second (ε_b = 0.3) shows the one bin every user votes for."""
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", int(g), int(t), float(rng.uniform(*values)))
            for u in range(users) for g in rng.choice(12, size=4, replace=False) for t in range(4) for _ in range(3)]
    agg = make_agg(rows)
    if limit is not None:
        import dpopt.privacy.user.engine as eng
        monkeypatch.setattr(eng, "CLAMP_REMEASURE_LIMIT", limit)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    return release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts, bounds_fraction=bounds_fraction),
                        bound=120.0, noise=NoiseOptions(seed=seed))


@pytest.mark.parametrize("fraction", [0.5, 0.6, 0.9])
def test_a_large_bounds_fraction_leaves_half_the_rest_to_the_marginals(fraction):
    """With bounds_fraction f ≥ 1/2 the re-measure's cap f/(1 − f) of the rest was the whole rest or
    more: every marginal's budget came out 0 or negative and the release failed deep inside (a fuzz
    find). It is now capped at half of the rest; the total is still spent exactly."""
    total = 0.3 / fraction  # ε_b = 0.3 as at ε = 2 by default: the first clamp histograms show nothing
    r = _mid_range_release(total, bounds_fraction=fraction)
    p = r.measurements.spend.pieces
    rest = total * (1.0 - fraction)
    assert float(p["bounds"]) == pytest.approx(0.3)
    assert 0.0 < float(p["bounds, clamp re-measured"]) <= 0.5 * rest * (1 + 1e-12)
    measured = sum(float(v) for k, v in p.items() if not k.startswith("bounds"))
    assert measured >= 0.5 * rest * (1 - 1e-6)  # the pieces are rounded down to exact fractions
    assert float(sum((Fraction(v) for v in p.values()), Fraction(0))) == pytest.approx(total, abs=1e-8)
    assert np.isfinite(r.estimates.table["mean"]).all()


def test_a_release_whose_first_clamp_histogram_shows_nothing_reads_b_from_the_second(monkeypatch):
    r = _mid_range_release(2.0)
    s, spend = r.summary, r.measurements.spend
    ch = s.clamp_histogram
    first = ch["unseen_first"]
    assert first is not None and choose_clamp(np.array(first["noisy_users"]), first["epsilon"], 120.0) == 120.0
    eps_b = float(spend.pieces["bounds"])
    assert first["epsilon"] == pytest.approx(eps_b / 4) and ch["epsilon"] == pytest.approx(eps_b)
    assert spend.pieces["bounds, clamp re-measured"] == pytest.approx(eps_b)
    assert s.clamp == 60.0 and s.clamp_low <= 40.0  # every user's 99th percentile in (52.5, 60]
    from dpopt.writers.report_md import report_markdown

    line = next(x for x in report_markdown(r).splitlines() if x.startswith("- contribution bounds"))
    assert "measured once more" in line and "bounds, clamp re-measured" in line
    assert sum((Fraction(v) for v in spend.pieces.values()), Fraction(0)) <= Fraction(2)
    assert float(sum((Fraction(v) for v in spend.pieces.values()), Fraction(0))) == pytest.approx(2.0, abs=1e-8)
    # the same release without the second histogram: B = U, and wider intervals for the same grids
    r0 = _mid_range_release(2.0, limit=0.0, monkeypatch=monkeypatch)
    assert r0.summary.clamp == 120.0 and r0.summary.clamp_histogram["unseen_first"] is None
    assert "bounds, clamp re-measured" not in r0.measurements.spend.pieces
    w, w0 = (float(np.median(x.estimates.table["mean_error_bound"])) for x in (r, r0))
    assert w < w0


def test_a_release_whose_first_clamp_histogram_shows_a_bin_spends_nothing_more():
    r = _mid_range_release(40.0)  # ε_B = 1.5: a bin needs ≈ 4.5 users
    assert r.summary.clamp_histogram["unseen_first"] is None
    assert "bounds, clamp re-measured" not in r.measurements.spend.pieces
    assert r.summary.clamp == 60.0
    from dpopt.writers.report_md import report_markdown

    assert "measured once more" not in report_markdown(r)


def test_where_nothing_is_measured_the_answer_is_the_clamps_centre_and_the_interval_the_declared_range(monkeypatch):
    """No node readable (the estimator's inputs emptied): every node answers (A + B)/2 — A and B
    are DP outputs and every published mean lies in [A, B] — with an interval that holds the whole
    declared range [0, U] and reaches one of its ends exactly."""
    import dpopt.estimation.crossed_estimate as ce
    from dpopt.estimation.crossed_estimate import estimate_crossed

    r = _mid_range_release(2.0)
    real = ce.crossed_inputs

    def empty(*args, **kwargs):
        factors, A, y, s2, kept = real(*args, **kwargs)
        return factors, A[:0], y[:0], s2[:0], kept

    monkeypatch.setattr(ce, "crossed_inputs", empty)
    est = estimate_crossed(r.measurements)
    t = est.table
    A, B = r.summary.clamp_low, r.summary.clamp
    assert B == 60.0 and est.info.fit.startswith("no node measured")
    np.testing.assert_allclose(t["mean"], (A + B) / 2.0)
    lo, hi = t["mean"] - t["mean_error_bound"], t["mean"] + t["mean_error_bound"]
    assert (lo <= 1e-9).all() and (hi >= 120.0 - 1e-9).all()
    assert np.allclose(np.minimum(-lo, hi - 120.0), 0.0, atol=1e-9)


def test_without_a_list_the_clamp_is_not_measured_again():
    """No list: the rest also pays the private selection and the means' budget is near what lifts a
    selected cell above its noise, so a clamp histogram that shows nothing leaves B = U (models/engine.md §2)."""
    rng = np.random.default_rng(3)
    rows = [(f"u{u}", int(g), int(t), float(rng.uniform(40.0, 60.0)))
            for u in range(200) for g in rng.choice(12, size=4, replace=False) for t in range(4) for _ in range(3)]
    agg = make_agg(rows)
    r = release_user(agg, Budget(epsilon_total=1.0, delta=1e-6), UserOptions(), bound=120.0, noise=NoiseOptions(seed=3))
    p = r.measurements.spend.pieces
    assert any(k.startswith("selection") for k in p) and "bounds, clamp re-measured" not in p
    ch = r.summary.clamp_histogram
    assert ch["unseen_first"] is None and not clamp_shown(np.array(ch["noisy_users"]), ch["epsilon"])
    assert r.summary.clamp == 120.0


def test_values_high_in_their_range_measure_the_lower_clamp_again(monkeypatch):
    """100 users with values in [100, 120] of U = 120 at ε = 1.5 (ε₁ = 0.056: a bin needs ≈ 119): both
    first histograms show nothing; the upper's top bin holds the users (their 99th percentiles reach
    the top step) and the lower's does not, so A is measured again: A = 90 (one step below the users'
    1st percentiles), B = U, narrower intervals than with no second histogram, and the report says
    which histogram was measured again."""
    from dpopt.writers.report_md import report_markdown

    r = _mid_range_release(1.5, values=(100.0, 120.0), users=100)
    s = r.summary
    assert s.clamp == 120.0 and s.clamp_low == 90.0
    assert s.clamp_histogram["unseen_first"] is None and s.clamp_low_histogram["unseen_first"] is not None
    assert s.clamp_low_histogram["epsilon"] == pytest.approx(r.measurements.spend.pieces["bounds"])
    assert ((r.estimates.table["mean"] >= 90.0) & (r.estimates.table["mean"] <= 120.0)).all()
    assert "histogram of low values" in report_markdown(r)
    r0 = _mid_range_release(1.5, values=(100.0, 120.0), users=100, limit=0.0, monkeypatch=monkeypatch)
    assert r0.summary.clamp_low == 0.0
    w, w0 = (float(np.median(x.estimates.table["mean_error_bound"])) for x in (r, r0))
    assert w < w0
