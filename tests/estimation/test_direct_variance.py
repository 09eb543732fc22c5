"""A flat release publishes the variance only where its interval says more than its range,
and never as a clipped 0 (a noisy value below 0 is withheld with its own reason).

The rule is recomputed here in its other form: the interval [max(v − e, 0), min(v + e, U²/4)] is the
whole range [0, U²/4] exactly when v − e ≤ 0 and v + e ≥ U²/4 (v in the range, e ≥ 0).
"""

from __future__ import annotations

import pytest

import numpy as np
import pandas as pd

from dpopt.estimation.direct import VARIANCE_NEGATIVE_REASON, VARIANCE_WITHHELD_REASON, variance_interval_informative
from dpopt.release import (Budget, NoiseOptions, PerGridBudget, PublicOccupancyOptions, UserOptions, austin_sample_path,
                           release)
from dpopt.writers import write_release
from tests.release.test_pinned_user import VARIANTS, _partitions

U = 120.0
TOP = U * U / 4.0


def _whole_range(v: np.ndarray, e: np.ndarray) -> np.ndarray:
    return (v - e <= 0.0) & (v + e >= TOP)


def test_rule_matches_its_other_form_on_random_and_edge_values():
    rng = np.random.default_rng(5)
    v = np.concatenate([rng.uniform(0, TOP, 2000), [0.0, TOP, TOP / 2, TOP / 2, 0.0, 100.0]])
    e = np.concatenate([rng.uniform(0, 1.2 * TOP, 2000), [TOP, TOP, TOP / 2, TOP / 2 - 1e-9, 0.0, np.inf]])
    got = variance_interval_informative(v, e, U)
    np.testing.assert_array_equal(got, ~_whole_range(v, e))
    assert not variance_interval_informative(np.array([np.nan]), np.array([1.0]), U)[0]


def test_user_release_withholds_exactly_the_whole_range_rows():
    _, given, noise = VARIANTS["laplace_list_fixed"]
    model = UserOptions(**{**given, "partitions": _partitions()}, strategy="fixed")
    r = release(austin_sample_path(), bound=U, budget=Budget(epsilon_total=100.0), model=model,
                noise=NoiseOptions(noise, seed=3))
    t = r.estimates.table
    m = r.measurements
    n_t = m.statistics["count"].value
    ok = t["variance_released"].to_numpy(bool)
    # rows with a noisy count below 1 have the range as error bound: never informative
    assert ok.any() and (~ok).any()  # both branches exercised
    assert not ok[(n_t < 1) & t["released"].to_numpy(bool)].any()
    shown = t[ok]
    assert not _whole_range(shown["variance"].to_numpy(float), shown["variance_error_bound"].to_numpy(float)).any()
    hidden = t[t["released"] & ~t["variance_released"]]
    assert hidden[["variance", "variance_error_bound", "variance_raw"]].isna().all().all()
    assert set(hidden["variance_withheld_reason"]) <= {VARIANCE_WITHHELD_REASON, VARIANCE_NEGATIVE_REASON}
    # never a clipped 0: every published variance comes from a noisy value at or above 0, recomputed
    # here from the noisy statistics (models/user_level.md §5): Z/n + U²/8 − (Y/n)²
    n_eff = np.maximum(n_t, 1.0)
    ybar = m.statistics["sum"].value / n_eff
    raw = m.statistics["sumsq"].value / n_eff + U * U / 8.0 - ybar**2
    assert (raw[ok] >= 0).all() and (raw < 0).any()  # the negative branch is exercised
    said = (t["variance_withheld_reason"] == VARIANCE_NEGATIVE_REASON).to_numpy()
    assert said.any() and (raw[said] < 0).all()


@pytest.mark.slow
def test_public_occupancy_release_csv_blanks_withheld_variances(tmp_path):
    r = release(austin_sample_path(), bound=U, budget=PerGridBudget(0.2), model=PublicOccupancyOptions(plan="greedy"),
                noise=NoiseOptions(seed=7))
    write_release(r, tmp_path / "out", make_map=False)
    csv = pd.read_csv(tmp_path / "out" / "release.csv")
    # the noisy values before the rule: the Estimates' (the table, like release.csv, applies it)
    est = r.estimates.table
    t = pd.DataFrame({"variance": est["variance_in_range"], "variance_error_bound": est["variance_error_bound_noise"],
                      "variance_raw": r.measurements.statistics["variance"].value})
    rel = r.table["released"].to_numpy(bool)
    whole = rel & _whole_range(t["variance"].to_numpy(float), t["variance_error_bound"].to_numpy(float))
    negative = rel & ~whole & (t["variance_raw"].to_numpy(float) < 0)  # never published as a clipped 0
    withheld = whole | negative
    assert whole.any() and negative.any() and (rel & ~withheld).any()  # every branch exercised
    np.testing.assert_array_equal(csv["variance_released"].to_numpy(bool), rel & ~withheld)
    for col in ("variance", "variance_raw", "variance_error_bound"):
        assert csv.loc[withheld, col].isna().all(), col
        np.testing.assert_allclose(csv.loc[~withheld, col], t.loc[~withheld, col], rtol=1e-9, err_msg=col)
    assert (csv.loc[whole, "variance_withheld_reason"] == VARIANCE_WITHHELD_REASON).all()
    assert (csv.loc[negative, "variance_withheld_reason"] == VARIANCE_NEGATIVE_REASON).all()
    assert csv.loc[rel & ~withheld, "variance_withheld_reason"].isna().all()
    pd.testing.assert_frame_equal(csv[["variance", "variance_error_bound"]], r.table[["variance", "variance_error_bound"]],
                                  check_exact=False, rtol=1e-9)  # the in-memory table is release.csv


@pytest.mark.slow
def test_hierarchical_estimates_never_publish_a_clipped_zero_variance():
    """The GLS estimator follows the same rule: at a small ε some noisy variances fall below 0; they
    are withheld with the negative-variance reason, and every published variance is above 0."""
    from dpopt.estimation.hierarchical import estimate_hierarchical
    from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels
    from dpopt.privacy.user.partitions import PartitionList
    from tests.estimation.test_hierarchical import LEVELS
    from tests.estimation.test_hierarchical import U as HU
    from tests.estimation.test_hierarchical import agg as make_agg

    agg = make_agg.__wrapped__()  # the fixture's records (120 users, 8 cells × 8 hours)
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    said = 0
    for seed in range(4):
        m = measure_levels(agg, plist, bound=HU, bounds=(3, 2), epsilon=2.0,
                           plan=LevelPlan(levels=LEVELS, first_level=0), sampling=LevelNoise(noise="numpy", seed=seed))
        t = estimate_hierarchical(m, confidence=0.9, bias_allowance=0.0).table
        ok = t["variance_released"].to_numpy(bool)
        assert (t.loc[ok, "variance"] > 0).all() and t.loc[~ok, "variance"].isna().all()
        assert set(t.loc[~ok, "variance_withheld_reason"]) <= {VARIANCE_WITHHELD_REASON, VARIANCE_NEGATIVE_REASON}
        said += int((t["variance_withheld_reason"] == VARIANCE_NEGATIVE_REASON).sum())
    assert said > 0  # the branch is exercised
