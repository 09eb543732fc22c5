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


#: the additive truth of the 48 test grids (6 cells × 8 slots): grid g is PLACE[g % 6] + TIME[g // 6]
PLACE = np.array([10.0, 30.0, 20.0, 50.0, 40.0, 25.0])
TIME = np.array([0.0, 5.0, 10.0, 2.0, 8.0, 12.0, 4.0, 6.0])


def additive_rows(seed: int, n_users: int, *, noise_sd: float = 0.0) -> list[tuple[str, int, int, float]]:
    """Records (user, grid, t, value) of ``n_users`` users, each visiting 4–15 of the 48 test grids
    with 2–5 records in each, valued PLACE + TIME of the grid plus N(0, ``noise_sd``²), clipped to
    [0, 100] (drawn in that order from ``seed``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for g in rng.choice(48, size=int(rng.integers(4, 16)), replace=False):
            for t in range(int(rng.integers(2, 6))):
                value = PLACE[g % 6] + TIME[g // 6] + (rng.normal(0.0, noise_sd) if noise_sd > 0 else 0.0)
                rows.append((f"u{u}", int(g), t, float(np.clip(value, 0.0, 100.0))))
    return rows


def grid_of(agg, g: int) -> int:
    """Index in ``agg`` of test grid g (or -1)."""
    cell, slot = CELLS[g % 6], (g // 6) * SLOT_NS
    hit = np.flatnonzero((agg.cells == cell) & (agg.slots == slot))
    return int(hit[0]) if hit.size else -1
