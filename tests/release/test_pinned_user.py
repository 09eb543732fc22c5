"""Pinned seeded releases of the ``user`` privacy model (Laplace and Gaussian): bit-identical.

The files ``tests/release/data/pinned_user_*.csv.gz`` / ``.json`` were written by this module
(``python -m tests.release.test_pinned_user``) on the code *before* the release was moved into the
layered shape (privacy models → Measurements → estimation → writers), so they are an independent
record of what the ``user`` model published, not values copied from the code under test. Every
number of release.csv and summary.json is compared exactly (floats through their 17-digit text).

Re-pinned on purpose when the seeded stream changed: for the vectorised exact samplers, and again when
the bounding tie-break keys began to come from the release's integer source (which shifts every
seeded draw). Each time the layered code's four releases were first checked byte-identical
(release.csv text and summary.json) to those of the pre-layer code with the same samplers. One
summary field corrected by hand, not re-pinned: the flat private Laplace release's
``delta_selection`` is its δ (all of it goes to the private selection), where 0.0 was written before.

Re-pinned a third time, on purpose: a user's kept records in a grid are a keyed uniform sample, not
its first c by arrival (dpopt.records.sample_key). Before re-pinning, every column but the values
that depend on which records are kept (mean, variance, their raw and pooled columns and the variance
bound) and every summary field but ``pooling`` were checked identical to the previous pins; the pins
now also hold the withheld-variance columns (the rule is tested against its definition in
tests/estimation/test_direct_variance.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt.estimation.direct import VARIANCE_NEGATIVE_REASON, VARIANCE_WITHHELD_REASON
from dpopt.writers import RELEASE_COLUMNS
from dpopt.release import Budget, NoiseOptions, UserOptions, austin_sample_path, contributions, release

DATA = Path(__file__).parent / "data"


def _partitions() -> pd.DataFrame:
    """A public list: the (cell, slot) of every 7th record of the embedded sample plus one empty grid."""
    from dpopt.records.grid import cell_strings, slot_strings

    agg, _ = contributions(austin_sample_path(), bound=120)
    rows = np.arange(0, agg.n_grids, 7)
    return pd.DataFrame({"cell": cell_strings(agg.cells[rows]), "slot": slot_strings(agg.slots[rows])})


#: name -> (budget, options of the flat user-model release, sampler); bound 120 and seed 3 for all,
#: bounds "select" unless given, "list" the public list of :func:`_partitions`
VARIANTS = {
    "laplace_private": (Budget(epsilon_total=100.0, delta=1e-6), {}, "discrete"),
    "laplace_list_fixed": (Budget(epsilon_total=10.0), {"partitions": "list", "bounds": (4, 8)}, "discrete"),
    "gaussian_private": (Budget(epsilon_total=100.0, delta=1e-3, mechanism="gaussian"), {"bounds": (1, 2)},
                         "discrete"),
    "gaussian_list_numpy": (Budget(epsilon_total=5.0, delta=1e-6, mechanism="gaussian"), {"partitions": "list"},
                            "numpy"),
}


def _run(name: str):
    budget, given, noise = VARIANTS[name]
    opts = {"bounds": "select", **given}
    if opts.get("partitions") == "list":
        opts["partitions"] = _partitions()
    return release(austin_sample_path(), bound=120, budget=budget, model=UserOptions(**opts, strategy="fixed"),
                   noise=NoiseOptions(noise, seed=3))


def _frames(r) -> tuple[pd.DataFrame, dict]:
    summary = json.loads(json.dumps(r.summary.as_dict(), default=float))
    return r.table, summary


def _write(name: str) -> None:  # pragma: no cover - run by hand on the reference code only
    table, summary = _frames(_run(name))
    table.to_csv(DATA / f"pinned_user_{name}.csv.gz", index=False, float_format="%.17g")
    (DATA / f"pinned_user_{name}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.slow
def test_seeded_user_release_is_pinned(name):
    want = pd.read_csv(DATA / f"pinned_user_{name}.csv.gz", keep_default_na=True)
    if "variance_withheld_reason" in want.columns:  # the empty reason reads back as NaN
        want["variance_withheld_reason"] = want["variance_withheld_reason"].fillna("")
    table, summary = _frames(_run(name))
    # the pins predate release.csv's one schema: their columns keep their values; the schema adds the
    # node columns (a flat row: its own slot, no recurrence, the finest resolution)
    added = [c for c in table.columns if c not in want.columns]
    assert list(table.columns[:len(RELEASE_COLUMNS)]) == RELEASE_COLUMNS and len(table) == len(want)
    assert set(added) <= {"slot_end", "repeat_every", "repeat_until", "h3_resolution"}, added
    for col in want.columns:
        a, b = table[col].to_numpy(), want[col].to_numpy()
        if b.dtype.kind in "fiub":
            np.testing.assert_array_equal(np.asarray(a, dtype=float), b, err_msg=col)
        else:
            assert [str(x) for x in a] == ["nan" if isinstance(x, float) and np.isnan(x) else str(x) for x in b], col
    withheld = ~want["variance_released"].to_numpy(bool) & want["released"].to_numpy(bool)
    assert np.isnan(table["variance"].to_numpy(dtype=float)[withheld]).all()  # never a clipped 0
    assert {str(x) for x in table.loc[withheld, "variance_withheld_reason"]} <= {
        VARIANCE_WITHHELD_REASON, VARIANCE_NEGATIVE_REASON}
    pinned = json.loads((DATA / f"pinned_user_{name}.json").read_text())
    # later summary fields (resolution, method, levels, target, outlook…): every pinned field stays
    # identical, the new ones are checked in tests/release/test_multires.py
    assert set(pinned) <= set(summary) and {k: summary[k] for k in pinned} == pinned


if __name__ == "__main__":  # pragma: no cover
    for variant in VARIANTS:
        _write(variant)
