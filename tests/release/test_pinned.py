"""Pinned seeded releases of the embedded Austin sample: the released numbers must not change.

The files in ``tests/release/data/pinned_*.csv.gz`` were written by this module
(``python -m tests.release.test_pinned``) on the code *before* the release path was restructured
(before the split into layers), so they are an independent record of what the release published, not values copied
from the code under test. Every variant of the release path is pinned: the CLI's
``dpopt release --example --plan greedy --epsilon 1 --seed 7``, BASELINE, numpy noise, the
optimal split and pseudo-user clipping (which also exercises the second streaming pass).

Two deliberate changes since the files were written: BASELINE's ``plan_status`` reads "optimal"
(the :class:`dpopt.plan.GridPlan` contract: nothing to choose) instead of "baseline"; and with
``split="optimal"`` the per-grid error bound is computed from the budgets actually given,
``Δ_μ/ε_μ + Δ_Var/ε_Var`` (equal to the closed form (√Δ_μ + √Δ_Var)²/ε up to float rounding), so
those two columns/fields are compared to 1e-12 relative. Released values are compared exactly.
``greedy_pseudo`` was re-pinned when pseudo-user clipping began keeping a keyed uniform sample of a
pair's records instead of the first by timestamp (models/release.md §3): before re-pinning, every
column but ``mean`` and ``variance`` and every summary field were checked identical to the old pin.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt.release import NoiseOptions, PerGridBudget, PublicOccupancyOptions, austin_sample_path, release

DATA = Path(__file__).parent / "data"

#: name -> (PublicOccupancyOptions, sampler) of :func:`dpopt.release.release` (bound 120, per-grid ε = 1,
#: seed 7 for all)
VARIANTS = {
    "greedy": ({"plan": "greedy"}, "discrete"),
    "baseline": ({"plan": "baseline"}, "discrete"),
    "greedy_numpy": ({"plan": "greedy"}, "numpy"),
    "greedy_optimal_split": ({"plan": "greedy", "split": "optimal"}, "discrete"),
    "greedy_pseudo": ({"plan": "greedy", "pseudo_users": True}, "discrete"),
}

COLUMNS = ["n_records_retained", "mean", "variance", "released", "mean_sensitivity",
           "variance_sensitivity", "epsilon_mean", "epsilon_variance", "mean_noise_scale",
           "variance_noise_scale", "error_bound", "array_length"]
SUMMARY = ["users", "grids", "records", "pairs", "plan", "plan_status", "degradation",
           "degradation_baseline", "epsilon_total", "error_bound", "error_bound_target",
           "error_bound_released", "suppressed_pairs", "suppressed_records", "truncated_records",
           "withheld_grids", "noise", "granularity", "seeded"]


def _run(name: str):
    model, noise = VARIANTS[name]
    return release(austin_sample_path(), bound=120, budget=PerGridBudget(1), model=PublicOccupancyOptions(**model),
                   noise=NoiseOptions(noise, seed=7))


def _labels(r) -> str:
    """sha256 of the grid labels (cell, slot) in table order."""
    text = "\n".join(f"{c},{s}" for c, s in zip(r.table["cell"], r.table["slot"]))
    return hashlib.sha256(text.encode()).hexdigest()


def _write(name: str) -> None:  # pragma: no cover - run by hand on the reference code only
    r = _run(name)
    raw = r.table.assign(mean=r.table["mean_raw"], variance=r.table["variance_raw"])  # the files pin the noisy values
    raw[COLUMNS].to_csv(DATA / f"pinned_{name}.csv.gz", index=False, float_format="%.17g")
    s = r.summary.as_dict()
    pinned = {k: s[k] for k in SUMMARY} | {"labels_sha256": _labels(r)}
    (DATA / f"pinned_{name}.json").write_text(json.dumps(pinned, indent=1) + "\n")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_seeded_release_is_pinned(name):
    want = pd.read_csv(DATA / f"pinned_{name}.csv.gz", keep_default_na=True)
    r = _run(name)
    # the released values are post-processed into [0, U] and [0, U²/4]; the noisy
    # values the files pin are kept beside them as mean_raw / variance_raw
    # (release.csv blanks a variance whose interval is the whole range; the pinned noisy variance is
    # the Measurements' statistic)
    t = r.table
    shown = t["variance_released"].to_numpy(dtype=bool)
    np.testing.assert_array_equal(t["mean"], np.clip(t["mean_raw"], 0, 120))
    np.testing.assert_array_equal(t["variance"][shown], np.clip(t["variance_raw"], 0, 120**2 / 4)[shown])
    assert t.loc[~shown, ["variance", "variance_raw", "variance_error_bound"]].isna().all().all()
    raw = r.measurements.statistics["variance"].value
    got = t.assign(mean=t["mean_raw"], variance=raw)[COLUMNS].reset_index(drop=True)
    pinned = json.loads((DATA / f"pinned_{name}.json").read_text())
    assert _labels(r) == pinned.pop("labels_sha256")
    for col in COLUMNS:
        a, b = got[col].to_numpy(dtype=float), want[col].to_numpy(dtype=float)
        if name.endswith("numpy") and col in ("mean", "variance"):
            # numpy Laplace: the same draws, added in float; allow the last bit
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9, equal_nan=True, err_msg=col)
        elif name.endswith("optimal_split") and col == "error_bound":
            np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=col)
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: column {col}")
    s = r.summary.as_dict()
    for key, value in pinned.items():
        if name.endswith("optimal_split") and key.startswith("error_bound"):
            assert s[key] == pytest.approx(value, rel=1e-12), (name, key)
            continue
        assert s[key] == value, (name, key, s[key], value)


if __name__ == "__main__":  # pragma: no cover
    for n in VARIANTS:
        _write(n)
