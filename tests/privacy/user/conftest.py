"""Helpers for the user-level tests: aggregates built from (user, grid, time, value) tuples."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd

from dpopt.records.aggregate import finalize

SLOT_NS = 3_600 * 10**9
#: real H3 res-7 cells of Austin (so that labels work end to end)
CELLS = [h3.str_to_int(h3.latlng_to_cell(30.20 + 0.05 * i, -97.75, 7)) for i in range(6)]


def make_agg(records: list[tuple[str, int, int, float]]):
    """Aggregate (keep_samples) of records (user, grid index, timestamp s, value); grid i is
    (CELLS[i % 6], slot i // 6)."""
    frame = pd.DataFrame(records, columns=["user", "grid", "t", "value"])
    frame["cell"] = np.asarray([CELLS[g % 6] for g in frame["grid"]], dtype=np.int64)
    frame["slot"] = (frame["grid"].to_numpy() // 6).astype(np.int64) * SLOT_NS
    frame["timestamp"] = frame["slot"] + frame["t"].astype(np.int64) * 10**9
    pairs = frame.assign(count=1, sum=frame["value"], sumsq=frame["value"] ** 2)[
        ["user", "cell", "slot", "count", "sum", "sumsq"]].groupby(["user", "cell", "slot"]).sum().reset_index()
    return finalize(pairs, h3_resolution=7, slot_ns=SLOT_NS,
                    samples=frame[["user", "cell", "slot", "timestamp", "value"]])


def grid_of(agg, g: int) -> int:
    """Index in ``agg`` of test grid g (or -1)."""
    cell, slot = CELLS[g % 6], (g // 6) * SLOT_NS
    hit = np.flatnonzero((agg.cells == cell) & (agg.slots == slot))
    return int(hit[0]) if hit.size else -1
