"""Which grids are released (models/user_level.md §6): a public list, or private selection.

Public partition list
    A CSV (or DataFrame) with columns ``cell`` (H3 index string at the release's resolution) and
    ``slot`` (ISO 8601 start time, UTC, on the slot lattice). Exactly these grids are released,
    including those with no record (pure noise); records in other grids are dropped before
    bounding. The list is public, so nothing about occupancy leaks through it.

Private partition selection (Korolova et al. 2009; Wilson et al. 2020 "Differentially private SQL
with bounded user contribution" §3.3; PipelineDP's Laplace thresholding)
    After bounding, each user counts once in each of its ≤ k grids, so the vector of user counts
    L_g has ℓ1 sensitivity k. A grid is released iff L̃_g = L_g + Lap(k/ε_p) ≥ T with

        T = 1 + x*,   x* the smallest x with P[Lap(k/ε_p) ≥ x] ≤ δ/k
          (continuous Laplace: x* = (k/ε_p)·ln(k/(2δ)); discrete: on ℤ, P[Z ≥ j] = r^j/(1+r)).

    Proof sketch: let D' = D + one user u. Grids occupied in both get Laplace noise on a vector of ℓ1
    sensitivity ≤ k: ε_p-DP. A grid occupied only in D' holds u alone (L = 1) and is released with
    probability P[1 + Z ≥ T] ≤ δ/k; u has ≤ k such grids, so with probability ≥ 1 − δ none appears,
    and on that event the output law is within e^{ε_p} of D's. Hence (ε_p, δ)-DP. A grid with L users
    is released with probability P[Z ≥ T − L].
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pandas as pd

from ..._validation import DpoptInputError, check_epsilon, check_positive_int
from ...records.aggregate import Aggregate
from ...noise.mechanism import NoiseMechanism

__all__ = ["PartitionList", "read_partitions", "match_partitions", "selection_threshold", "SelectionRule"]


@dataclass(frozen=True)
class PartitionList:
    """A public list of grids: int64 H3 cells and slot starts (ns, UTC), sorted by (slot, cell)."""

    cells: np.ndarray
    slots: np.ndarray

    def __post_init__(self) -> None:
        # the finest marginal's node codes are the list's positions (the engine indexes grid weights
        # and node weights alike by them), so an unsorted or duplicated list would answer grids with
        # other grids' rows: refuse it here, once
        cells, slots = np.asarray(self.cells), np.asarray(self.slots)
        if cells.ndim != 1 or slots.shape != cells.shape:
            raise DpoptInputError(f"PartitionList `cells` and `slots` must be 1-D arrays of one length; "
                                  f"got shapes {cells.shape} and {slots.shape}")
        if cells.size > 1:
            first, last = int(np.min(slots)), int(np.max(slots))
            if last - first >= np.iinfo(np.int64).max // 2:  # the period's length (ns) must be an int64
                raise DpoptInputError(f"`partitions` slots must span less than 146 years (the period is counted in "
                                      f"int64 nanoseconds); got {pd.Timestamp(first)} to {pd.Timestamp(last)}")
            ds, dc = np.diff(slots), np.diff(cells)
            bad = np.flatnonzero((ds < 0) | ((ds == 0) & (dc <= 0)))
            if bad.size:
                i = int(bad[0]) + 1
                raise DpoptInputError(f"PartitionList must be sorted by (slot, cell) without duplicates; "
                                      f"entry {i} (slot {int(slots[i])}, cell {int(cells[i])}) is not after entry {i - 1}")

    @classmethod
    def from_grids(cls, cells: np.ndarray, slots: np.ndarray) -> "PartitionList":
        """The list of the grids (``cells[i]``, ``slots[i]``) in any order, sorted by (slot, cell),
        duplicates merged."""
        keys = pd.MultiIndex.from_arrays([np.asarray(slots, dtype=np.int64), np.asarray(cells, dtype=np.int64)])
        keys = keys.unique().sort_values()
        return cls(cells=np.asarray(keys.get_level_values(1), dtype=np.int64),
                   slots=np.asarray(keys.get_level_values(0), dtype=np.int64))

    def __len__(self) -> int:
        return int(self.cells.size)


def read_partitions(source: Any, *, h3_resolution: int, slot_ns: int, timezone: str | None = None) -> PartitionList:
    """Read and validate a public partition list (CSV path or DataFrame with ``cell``, ``slot``).

    Every cell must be a valid H3 index at ``h3_resolution`` and every slot a time on the slot
    lattice (a multiple of the slot length since the epoch, UTC); duplicates are merged. Slots are
    ISO 8601 (:func:`dpopt.records.ingest.parse_times`): with an offset (``Z``, ``+02:00``), or without
    one on the release's clock, ``timezone`` (the records' zone; UTC without one) — read as UTC
    whatever the zone, a naive slot was hours off the records' wall clock.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise DpoptInputError(f"`partitions` must be an existing CSV file; got {str(source)!r}")
        try:
            frame = pd.read_csv(path, dtype=str)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise DpoptInputError(f"`partitions` file {str(source)!r} is not a readable CSV: {exc}") from None
    elif isinstance(source, pd.DataFrame):
        frame = source
    elif hasattr(source, "to_pandas"):  # a polars (or Arrow) table, as records are read
        frame = source.to_pandas()
    else:
        raise DpoptInputError(f"`partitions` must be a CSV path or a (pandas or polars) DataFrame; got "
                              f"{type(source).__name__}")
    missing = [c for c in ("cell", "slot") if c not in frame.columns]
    if missing:
        sep = next((c for c in (";", "\t", "|") if len(frame.columns) == 1 and c in str(frame.columns[0])), None)
        hint = f" (its header {str(frame.columns[0])!r} looks {sep!r}-separated: write it comma-separated)" if sep else ""
        short = [str(c) if len(str(c)) <= 40 else str(c)[:40] + "…" for c in list(frame.columns)[:8]]  # a binary file's
        found = ", ".join(repr(c) for c in short) + (", …" if len(frame.columns) > 8 else "")          # "header"
        hint = hint or f" (its columns: {found}; rename them to cell and slot)"
        raise DpoptInputError(f"`partitions` must have columns 'cell' and 'slot'; missing {missing}{hint}")
    if len(frame) == 0:
        raise DpoptInputError("`partitions` must list at least one grid; got an empty table")
    for column in ("cell", "slot"):
        empty = frame[column].isna().to_numpy() | (frame[column].astype(object).map(str).str.strip() == "").to_numpy()
        if empty.any():
            raise DpoptInputError(f"`partitions` column {column!r} must not be empty; got an empty value in data row "
                                  f"{int(np.flatnonzero(empty)[0]) + 1}")
    cells_txt = _cell_text(frame["cell"])
    bad = [c for c in cells_txt if not _valid_cell(c)]
    if bad:
        raise DpoptInputError(f"`partitions` column 'cell' must hold H3 indexes; got {str(bad[0])!r}")
    res = {h3.get_resolution(c) for c in cells_txt}
    if res != {int(h3_resolution)}:
        raise DpoptInputError(
            f"`partitions` cells must be at H3 resolution {h3_resolution}; got resolution(s) {sorted(res)}")
    slots = _slot_times(frame["slot"], timezone)
    off = slots % np.int64(slot_ns)
    if np.any(off):
        text = str(frame["slot"].iloc[int(np.flatnonzero(off)[0])]).strip()
        zone = re.search(r"[+-]\d\d:?\d\d$", text)
        hint = (f" (it carries the UTC offset {zone.group(0)}: name the records' zone, --timezone Area/City, and "
                "the list is read on its wall clock)"
                if timezone is None and zone and zone.group(0).replace(":", "") not in ("+0000", "-0000") else "")
        raise DpoptInputError(
            f"`partitions` slots must start on the slot lattice (multiples of {slot_ns // 10**9} s since "
            f"the epoch, UTC); got {text!r}{hint}")
    cells = np.asarray([h3.str_to_int(c) for c in cells_txt], dtype=np.int64)
    return PartitionList.from_grids(cells, slots)


def _cell_text(cell: pd.Series) -> np.ndarray:
    """The cells as H3 strings: text stripped, or integer H3 indexes (h3's int form, as integers or
    as decimal text: a CSV is read as text) as their strings."""
    if pd.api.types.is_integer_dtype(cell):
        return np.array([h3.int_to_str(int(c)) if 0 < int(c) < 2**64 else str(c) for c in cell])
    text = cell.astype(str).str.strip()
    return np.array([h3.int_to_str(int(t)) if t.isdecimal() and 0 < int(t) < 2**64 and not _valid_cell(t) else t
                     for t in text])


def _valid_cell(text: str) -> bool:
    try:
        return bool(h3.is_valid_cell(text))
    except (ValueError, OverflowError, TypeError):  # h3 reads the text as hex: anything else is no cell
        return False


def _slot_times(slot: pd.Series, timezone: str | None) -> np.ndarray:
    """The slots as int64 ns since the epoch (UTC): ISO 8601 with an offset, naive on the release's
    clock (``timezone``, UTC without one)."""
    from ...records.ingest import parse_times

    text = slot.astype(str).str.strip()
    iso = text.str.match(r"\d{4}-\d{2}-\d{2}")  # an ISO 8601 date first, not a Unix number
    ns = np.full(len(text), np.iinfo(np.int64).min)
    if iso.all():
        ns = parse_times(text, timezone=timezone or "UTC", column="slot")
    bad = ns == np.iinfo(np.int64).min
    if bad.any():
        raise DpoptInputError(f"`partitions` column 'slot' must hold ISO 8601 times from 1677-09-22 to 2262-04-11 "
                              f"(without an offset: a wall time in {timezone or 'UTC'} that exists there once); "
                              f"got {slot[bad].iloc[0]!r}")
    return ns.astype(np.int64)


def match_partitions(agg: Aggregate, parts: PartitionList) -> tuple[np.ndarray, np.ndarray]:
    """(index of each listed grid in ``agg`` or −1 when it has no record, mask of the aggregate's
    grids that are listed)."""
    agg_keys = pd.MultiIndex.from_arrays([agg.slots, agg.cells])
    idx = agg_keys.get_indexer(pd.MultiIndex.from_arrays([parts.slots, parts.cells])).astype(np.int64)
    listed = np.zeros(agg.n_grids, dtype=bool)
    listed[idx[idx >= 0]] = True
    return idx, listed


@dataclass(frozen=True)
class SelectionRule:
    """Laplace thresholding: release iff L_g + noise ≥ ``threshold``; ``scale`` of the noise."""

    k: int
    epsilon: float
    delta: float
    scale: float
    threshold: float

    def release_probability(self, users: int, mechanism: NoiseMechanism) -> float:
        """P[L + Z ≥ T] for a grid with ``users`` bounded users."""
        return mechanism.upper_tail(self.scale, self.threshold - users)


def selection_threshold(k: int, epsilon: float, delta: float, mechanism: NoiseMechanism) -> SelectionRule:
    """The threshold T = 1 + x*, P[Z ≥ x*] ≤ δ/k (module doc), for user counts of ℓ1 sensitivity k."""
    k = check_positive_int(k, "k")
    eps = check_epsilon(epsilon)
    if not (isinstance(delta, (int, float)) and 0.0 < float(delta) < 1.0) or not math.isfinite(float(delta)):
        raise DpoptInputError(f"`delta` must be a number in (0, 1) for private partition selection; got {delta!r}")
    scale = mechanism.scale(l1=k, l2=math.sqrt(k), budget=eps)
    x = mechanism.upper_quantile(scale, float(delta) / k)
    return SelectionRule(k=k, epsilon=eps, delta=float(delta), scale=scale, threshold=1.0 + x)
