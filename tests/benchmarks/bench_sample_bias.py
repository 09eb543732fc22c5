"""Arrival order vs a keyed sample: the bias of the kept means on the embedded Austin day.

Bounding keeps ≤ c records of every (bus, grid). Before, those were the first c by timestamp (where
a bus enters the hexagon, at speed); now they are the c with the smallest keyed sample keys
(dpopt/records/sample_key.py), a uniform sample. For every busy grid (≥ 10 buses, res 7 × 1 h) this
prints the mean signed error over grids of the kept mean (all buses, no noise)

* against the grid's truth (the exact mean of all its clamped records), and
* against the Γ-weighted mean of the buses' own means, Σ_ℓ min(m_ℓ, c)·x̄_ℓ / Σ_ℓ min(m_ℓ, c), the
  target of any sample of min(m, c) records per bus (what the sample estimates without bias; the
  difference to the truth is the per-bus cap's weighting, not the order),

for the first c by timestamp (computed here with pandas) and for the keyed sample (20 seeded keys).

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_sample_bias.py
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpopt.records import GridOptions, InputOptions, SampleKey, contributions
from dpopt.records.data import EXAMPLE_BOUND, austin_sample_path
from dpopt.records.grid import h3_cells

SLOT = 3600 * 10**9
CS = (1, 2, 4, 9)


def kept_means(agg, c: int) -> pd.Series:
    """Per grid: the mean of the first c stored (smallest-key) records of every pair."""
    s = agg.samples
    owner = np.repeat(np.arange(agg.n_pairs), np.diff(s.offsets))
    pos = np.arange(s.values.size) - s.offsets[owner]
    k = pos < c
    g = agg.pair_grid[owner[k]]
    m = np.bincount(g, weights=s.values[k], minlength=agg.n_grids) / np.bincount(g, minlength=agg.n_grids)
    return pd.Series(m, index=pd.MultiIndex.from_arrays([agg.cells, agg.slots], names=["cell", "slot"]))


def main() -> None:
    raw = pd.read_csv(austin_sample_path())
    t = pd.to_datetime(raw["timestamp"].astype(str), utc=True).dt.as_unit("ns").astype("int64").to_numpy()
    d = pd.DataFrame({"u": raw["user_id"].astype(str), "cell": h3_cells(raw["latitude"].to_numpy(),
                      raw["longitude"].to_numpy(), 7), "slot": t // SLOT * SLOT, "t": t,
                      "x": raw["value"].clip(0, EXAMPLE_BOUND)}).sort_values(["u", "cell", "slot", "t", "x"])
    grid = d.groupby(["cell", "slot"]).agg(mean=("x", "mean"), users=("u", "nunique"))
    busy = grid.index[grid["users"] >= 10]
    pair = d.groupby(["u", "cell", "slot"]).x.agg(["mean", "size"])
    rank = d.groupby(["u", "cell", "slot"]).cumcount()
    aggs = [contributions(austin_sample_path(), GridOptions(7, "1h"), InputOptions(), bound=EXAMPLE_BOUND,
                          first_records=max(CS), sample_key=SampleKey.from_seed(s))[0] for s in range(20)]
    print(f"{len(busy)} busy grids; mean signed error of the kept means (km/h)")
    print("| c | vs truth: first c | vs truth: sample | vs Γ-weighted: first c | vs Γ-weighted: sample (sd over keys) |")
    print("|---|---|---|---|---|")
    for c in CS:
        g = np.minimum(pair["size"], c)
        target = (pair["mean"] * g).groupby(level=["cell", "slot"]).sum() / g.groupby(level=["cell", "slot"]).sum()
        first = d[rank < c].groupby(["cell", "slot"]).x.mean().reindex(busy)
        sample = np.array([kept_means(a, c).reindex(busy).to_numpy() for a in aggs])
        truth, tgt = grid["mean"].reindex(busy).to_numpy(), target.reindex(busy).to_numpy()
        per_key = (sample - tgt).mean(axis=1)
        print(f"| {c} | {(first - truth).mean():+.2f} | {(sample - truth).mean():+.2f} | {(first - tgt).mean():+.2f} "
              f"| {per_key.mean():+.3f} ({per_key.std():.3f}) |")


if __name__ == "__main__":
    main()
