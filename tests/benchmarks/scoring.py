"""Score a published table on the finest grids the user asked for (how the multi-resolution release is measured).

A release answers every finest grid (H3 cell at resolution R × slot of length S) that holds at
least ``min_users`` users by the **smallest published node containing it** — itself, or an
ancestor: an H3 parent at resolution r ≤ R and a time window [slot, slot_end) containing the
grid's slot — and is scored against that grid's truth (the exact mean of the clamped values of all
its records). Grids no published node contains are *unanswered*: they are counted, and in the
headline numbers charged the error of the constant U/2 (what a reader falls back to). A node's
interval [mean ± mean_error_bound] is scored by coverage of the node's own truth (the exact mean of
all records inside the node).

The published table needs ``cell`` (H3 string or int), ``slot`` (ISO 8601 UTC or ns) and ``mean``;
optional ``slot_end`` (exclusive; default slot + S), ``repeat_every`` / ``repeat_until`` (a window
recurring every ISO 8601 duration until an end: hour-of-day nodes; or an Estimates table's
``cycle_ns``, recurring until the end of the finest grids), ``h3_resolution`` (default: the cell's own),
``mean_error_bound`` and ``released`` (rows with False are ignored). A flat release at (R, S)
therefore scores as "each grid answered only by itself". "Smallest" orders nodes by
7^(R − r)·(slot_end − slot) (H3 aperture 7), finer resolution first on ties.
"""

from __future__ import annotations

from dataclasses import dataclass

import h3
import numpy as np
import pandas as pd

__all__ = ["FinestGrids", "finest_grids", "node_keys", "score_table", "Score"]


@dataclass(frozen=True)
class FinestGrids:
    """Every occupied finest grid of the data: int cells, slot starts (ns), record count, sum of
    clamped values, users; ``scored`` marks those with ≥ min_users users."""

    cells: np.ndarray
    slots: np.ndarray
    records: np.ndarray
    sums: np.ndarray
    users: np.ndarray
    scored: np.ndarray
    resolution: int
    slot_ns: int
    bound: float

    @property
    def truth(self) -> np.ndarray:
        return self.sums / self.records


def finest_grids(agg, *, bound: float, min_users: int = 10) -> FinestGrids:
    """Truth of the finest grids from an :class:`dpopt.records.aggregate.Aggregate` (values already
    clamped to [0, bound] by ingestion)."""
    N = agg.grid_records().astype(float)
    s1 = np.bincount(agg.pair_grid, weights=agg.sum, minlength=agg.n_grids)
    users = agg.grid_users()
    return FinestGrids(cells=np.asarray(agg.cells, dtype=np.int64), slots=np.asarray(agg.slots, dtype=np.int64),
                       records=N, sums=s1, users=users, scored=users >= min_users,
                       resolution=int(agg.h3_resolution), slot_ns=int(agg.slot_ns), bound=float(bound))


def _to_int_cells(col: pd.Series) -> np.ndarray:
    if pd.api.types.is_integer_dtype(col.dtype):
        return col.to_numpy(dtype=np.int64)
    return np.asarray([h3.str_to_int(str(c)) for c in col], dtype=np.int64)


def _to_ns(col: pd.Series) -> np.ndarray:
    if pd.api.types.is_integer_dtype(col.dtype):
        return col.to_numpy(dtype=np.int64)
    return pd.to_datetime(col, utc=True).dt.tz_localize(None).to_numpy().astype("datetime64[ns]").astype(np.int64)


def node_keys(table: pd.DataFrame, finest: FinestGrids) -> pd.DataFrame:
    """The published nodes as integer keys: cell, res, start, end (ns), mean, bound."""
    t = table
    if "released" in t.columns:
        t = t[t["released"].astype(bool)]
    cells = _to_int_cells(t["cell"])
    res = (t["h3_resolution"].to_numpy(dtype=np.int64) if "h3_resolution" in t.columns
           else np.asarray([h3.get_resolution(h3.int_to_str(int(c))) for c in cells], dtype=np.int64))
    start = _to_ns(t["slot"])
    end = _to_ns(t["slot_end"]) if "slot_end" in t.columns else start + finest.slot_ns
    bnd = t["mean_error_bound"].to_numpy(dtype=float) if "mean_error_bound" in t.columns else np.full(len(t), np.nan)
    cycle, until = np.zeros(len(t), dtype=np.int64), np.zeros(len(t), dtype=np.int64)
    if "cycle_ns" in t.columns and "repeat_every" not in t.columns:  # an Estimates table: until the list's end
        cycle = t["cycle_ns"].to_numpy(dtype=np.int64)
        until = np.where(cycle > 0, int(finest.slots.max()) + finest.slot_ns, 0)
    if "repeat_every" in t.columns:  # hour-of-day windows (models/hierarchy.md §2)
        every = pd.to_timedelta(t["repeat_every"].where(t["repeat_every"].astype(str).str.startswith("P")),
                                errors="coerce")
        rep = every.notna().to_numpy()
        cycle[rep] = every[rep].to_numpy().astype("timedelta64[ns]").astype(np.int64)
        until[rep] = _to_ns(t["repeat_until"][rep])
    return pd.DataFrame({"cell": cells, "res": res, "start": start, "end": end, "cycle": cycle, "until": until,
                         "mean": t["mean"].to_numpy(dtype=float), "bound": bnd})


def _parents(cells: np.ndarray, r: int) -> np.ndarray:
    uniq, inv = np.unique(cells, return_inverse=True)
    par = np.asarray([h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(c)), r)) for c in uniq], dtype=np.int64)
    return par[inv]


def _containing(nodes: pd.DataFrame, finest: FinestGrids) -> np.ndarray:
    """For every finest grid, the index (row of ``nodes``) of the smallest node containing it, or −1."""
    G = finest.cells.size
    best = np.full(G, -1, dtype=np.int64)
    best_size = np.full(G, np.inf)
    nodes = nodes.assign(dur=nodes["end"] - nodes["start"], row=np.arange(len(nodes)))
    if "cycle" not in nodes.columns:
        nodes = nodes.assign(cycle=0, until=0)
    for (r, dur, cyc), grp in nodes.groupby(["res", "dur", "cycle"], sort=False):
        par = _parents(finest.cells, int(r)) if int(r) != finest.resolution else finest.cells
        if cyc:  # a recurring window: match the grid's phase in the cycle, before the node's last end
            windows = -(-(grp["until"].to_numpy() - grp["start"].to_numpy()) // int(cyc))
            size = 7.0 ** (finest.resolution - int(r)) * float(dur) * float(windows.max()) - 1e-9 * int(r)
            key = pd.MultiIndex.from_arrays([grp["cell"].to_numpy(), grp["start"].to_numpy() % int(cyc)])
            idx = key.get_indexer(pd.MultiIndex.from_arrays([par, (finest.slots % int(cyc)) // int(dur) * int(dur)]))
            hit = idx >= 0
            rows = np.full(G, -1, dtype=np.int64)
            rows[hit] = grp["row"].to_numpy()[idx[hit]]
            r_ = np.maximum(rows, 0)
            ok = hit & (finest.slots >= nodes["start"].to_numpy()[r_]) & (finest.slots < nodes["until"].to_numpy()[r_]) \
                & (size < best_size)
            best[ok] = rows[ok]
            best_size[ok] = size
            continue
        size = 7.0 ** (finest.resolution - int(r)) * float(dur) - 1e-9 * int(r)
        g = grp.sort_values(["cell", "start"])
        key = pd.MultiIndex.from_arrays([g["cell"].to_numpy(), g["start"].to_numpy()])
        # candidate node start: for aligned windows the floor of the slot; else search per cell
        aligned = bool(((g["start"].to_numpy() % int(dur)) == 0).all())
        if aligned:
            idx = key.get_indexer(pd.MultiIndex.from_arrays([par, (finest.slots // int(dur)) * int(dur)]))
        else:
            idx = np.full(G, -1, dtype=np.int64)
            gc, gs = g["cell"].to_numpy(), g["start"].to_numpy()
            for i in range(G):  # small tables only (unaligned windows)
                lo, hi = np.searchsorted(gc, par[i], "left"), np.searchsorted(gc, par[i], "right")
                j = np.searchsorted(gs[lo:hi], finest.slots[i], "right") - 1
                if j >= 0:
                    idx[i] = lo + j
        hit = idx >= 0
        rows = np.full(G, -1, dtype=np.int64)
        rows[hit] = g["row"].to_numpy()[idx[hit]]
        ok = hit & (finest.slots < nodes["end"].to_numpy()[np.maximum(rows, 0)]) & (size < best_size)
        best[ok] = rows[ok]
        best_size[ok] = size
    return best


@dataclass(frozen=True)
class Score:
    """Scores of one release on the scored finest grids (headline: unanswered grids charged U/2)."""

    median: float
    p90: float
    median_answered: float
    answered: float
    answered_own: float
    grids: int
    coverage: float
    nodes: int
    errors: np.ndarray


def score_table(table: pd.DataFrame, finest: FinestGrids) -> Score:
    """Score ``table`` (module doc) on ``finest``."""
    nodes = node_keys(table, finest)
    sc = np.flatnonzero(finest.scored)
    if len(nodes) == 0:
        err = np.abs(finest.bound / 2.0 - finest.truth[sc])
        return Score(float(np.median(err)), float(np.percentile(err, 90)), float("nan"), 0.0, 0.0, int(sc.size),
                     float("nan"), 0, err)
    ans = _containing(nodes, finest)
    # node truths: every occupied grid (not only scored ones) goes to each node containing it
    node_rec = np.zeros(len(nodes))
    node_sum = np.zeros(len(nodes))
    for _, grp in nodes.assign(dur=nodes["end"] - nodes["start"]).groupby(["res", "dur", "cycle"], sort=False):
        sub = nodes.loc[grp.index].reset_index(drop=True)
        rows = _containing(sub, finest)
        hit = rows >= 0
        np.add.at(node_rec, grp.index.to_numpy()[rows[hit]], finest.records[hit])
        np.add.at(node_sum, grp.index.to_numpy()[rows[hit]], finest.sums[hit])
    a = ans[sc]
    answered = a >= 0
    est = np.where(answered, nodes["mean"].to_numpy()[np.maximum(a, 0)], finest.bound / 2.0)
    err = np.abs(est - finest.truth[sc])
    own = answered & (nodes["res"].to_numpy()[np.maximum(a, 0)] == finest.resolution) & (
        (nodes["end"] - nodes["start"]).to_numpy()[np.maximum(a, 0)] == finest.slot_ns) & (
        nodes["cycle"].to_numpy()[np.maximum(a, 0)] == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ntruth = node_sum / node_rec
    has = node_rec > 0
    cov = np.abs(nodes["mean"].to_numpy() - ntruth) <= nodes["bound"].to_numpy()
    coverage = float(cov[has].mean()) if has.any() and np.isfinite(nodes["bound"]).any() else float("nan")
    return Score(median=float(np.median(err)), p90=float(np.percentile(err, 90)),
                 median_answered=float(np.median(err[answered])) if answered.any() else float("nan"),
                 answered=float(answered.mean()), answered_own=float(own.mean()), grids=int(sc.size),
                 coverage=coverage, nodes=int(len(nodes)), errors=err)
