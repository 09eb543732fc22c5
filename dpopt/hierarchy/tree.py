"""The public hierarchy of finest grids as a tree of levels (models/hierarchy.md §1).

A finest grid is (H3 cell at resolution R) × (time slot of length s). The hierarchy is a
**sequence of levels** 0 (finest) … L−1 (root), each level coarsening *either* space (H3 parent,
one resolution up: aperture 7) *or* time (a longer slot that is a whole multiple of the previous
one, aligned at the Unix epoch, UTC) of the level below. Every node of level l then has exactly
one parent at level l+1, so the nodes form a forest (a tree per root); a product of the two chains
would be a lattice with two parents per node, which neither the GLS two-pass algorithm nor "the
coarser ancestor stands for it" can use.

A time level of length ``0`` means "the whole period": one slot from the first slot of the public
finest list to the end of its last (a public fact when the finest list is public).

A **profile** time level (``cycle_ns`` > 0; models/hierarchy.md §2) is a window of length
``slot_ns`` that recurs every ``cycle_ns`` over the period: hour-of-day (1 h every day), hour-of-week,
day-of-week. A finest slot t belongs to the window of phase ⌊(t mod cycle)/slot⌋·slot (epoch-aligned,
UTC). It refines the period and coarsens every contiguous slot that divides its window, so it sits
*between* the finest slot and the period in a chain (1 h → hour-of-day → 3-h-of-day → period), and
the nodes still form a tree. A profile node's ``slot`` is the start of its first window that ends
after the period's start; it covers [slot + j·cycle, slot + j·cycle + slot_ns) for j ≥ 0 up to the
period's end.

Parents of H3 cells are computed by bit operations on the int64 index (vectorised, exact; checked
against ``h3.cell_to_parent`` in tests/hierarchy/test_tree.py): the resolution field sits at bits
52–55 and digit r (1 ≤ r ≤ 15) at bits 3·(15 − r) … 3·(15 − r) + 2; the parent at resolution p sets
the field to p and digits p+1 … 15 to 7 ("unused").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import DpoptInputError

__all__ = ["Level", "Hierarchy", "default_levels", "place_levels", "cell_parents", "build_hierarchy", "HOUR_NS", "DAY_NS",
           "WEEK_NS", "PROFILES", "profile_cycle", "time_keys", "default_target"]

HOUR_NS = 3_600 * 10**9
DAY_NS = 24 * HOUR_NS
WEEK_NS = 7 * DAY_NS
#: the profiles a user can ask for (``--profile``): the cycle their windows recur over
PROFILES = {"day": DAY_NS, "week": WEEK_NS}
_RES_SHIFT = 52
_RES_MASK = np.int64(0xF) << np.int64(_RES_SHIFT)


def default_target(bound: float) -> float:
    """The tree strategies' default target τ = U/10 (models/hierarchy.md §6): a node answers its finest
    grids when its interval's half-width is under a tenth of the values' public range. A statement of
    what a reader can use, relative to the declared range U (public), not a fact of any data set."""
    return float(bound) / 10.0


@dataclass(frozen=True)
class Level:
    """One level: H3 resolution, slot length in ns (0: the whole period) and the profile cycle in
    ns (0: contiguous slots; else the slot is a window recurring every ``cycle_ns``, module doc)."""

    h3_resolution: int
    slot_ns: int
    cycle_ns: int = 0

    @property
    def profile(self) -> bool:
        """A recurring window (hour-of-day, …) rather than a contiguous slot."""
        return self.cycle_ns > 0


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """The node table of the tree built from a public finest list (module doc).

    ``nodes`` columns ``cell``, ``h3_resolution``, ``slot``, ``slot_ns``, ``parent`` (the contract
    of :mod:`dpopt.measurements`) plus ``cycle_ns`` (0, or a profile window's cycle) and ``level``;
    rows level by level, finest first, so every parent row is larger than its children's.
    ``finest_node`` row of each finest grid (input order); ``levels`` the level sequence;
    ``leaves_under`` per node the number of finest grids below it.
    """

    nodes: pd.DataFrame
    finest_node: np.ndarray
    levels: tuple[Level, ...]
    leaves_under: np.ndarray

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    def level_rows(self, level: int) -> np.ndarray:
        return np.flatnonzero(self.nodes["level"].to_numpy() == level)


def cell_parents(cells: np.ndarray, resolution: int) -> np.ndarray:
    """H3 parents at ``resolution`` of int64 cells of a finer (or equal) resolution (module doc)."""
    c = np.asarray(cells, dtype=np.int64)
    res = (c & _RES_MASK) >> np.int64(_RES_SHIFT)
    if c.size and (res.min() < resolution):
        raise DpoptInputError(f"`resolution` must be <= every cell's resolution ({int(res.min())}); got {resolution}")
    unused = np.int64(0)
    for r in range(resolution + 1, 16):  # at most 15 constant masks: no loop over cells
        unused |= np.int64(7) << np.int64(3 * (15 - r))
    return (c & ~_RES_MASK) | (np.int64(resolution) << np.int64(_RES_SHIFT)) | unused


def profile_cycle(profile: str | None) -> int:
    """The cycle (ns) of a profile name of :data:`PROFILES`; 0 for None."""
    if profile is None:
        return 0
    if not isinstance(profile, str) or profile not in PROFILES:  # an unhashable value is refused too
        raise DpoptInputError(f"`profile` must be one of {sorted(PROFILES)} or None; got {profile!r}")
    return PROFILES[profile]


def default_levels(h3_resolution: int, slot_ns: int, *, coarsest_resolution: int | None = None,
                   slots: tuple[int, ...] = (3 * HOUR_NS, DAY_NS, 0), profile: str | None = None) -> tuple[Level, ...]:
    """Two space steps, then time and space alternately: (R, s) → (R−1, s) → (R−2, s) → (R−2, 3 h)
    → (R−3, 3 h) → (R−3, 1 d) → (R−4, 1 d) → (R−4, period), up to ``coarsest_resolution`` (default
    max(R − 4, 0)); slot lengths not longer than ``slot_ns`` (or not multiples of the previous) are
    skipped. The order was chosen among four on the benchmark data (models/hierarchy.md §1).

    ``profile`` "day" / "week" (models/hierarchy.md §2): the time steps are recurring windows
    instead — the finest slot of every day (hour-of-day at 1 h), then each of ``slots`` that fits
    the cycle (3-h-of-day; for "week" also day-of-week), then the period:
    (R, 1 h) → (R−1, 1 h) → (R−2, 1 h) → (R−2, hour-of-day) → (R−3, hour-of-day) → (R−3, 3-h-of-day)
    → (R−4, 3-h-of-day) → (R−4, period) at R = 7, 1 h."""
    R = int(h3_resolution)
    top = max(R - 4, 0) if coarsest_resolution is None else int(coarsest_resolution)
    if not 0 <= top <= R:
        raise DpoptInputError(f"`coarsest_resolution` must be in [0, {R}]; got {coarsest_resolution!r}")
    cycle = profile_cycle(profile)
    if cycle:
        if not (0 < slot_ns < cycle and cycle % slot_ns == 0):
            raise DpoptInputError(f"`profile` = {profile!r} needs a slot that divides its cycle of "
                                  f"{cycle / HOUR_NS:g} h; got a slot of {slot_ns / HOUR_NS:g} h")
        steps = [(int(slot_ns), cycle)] + [(t, cycle) for t in slots if slot_ns < t < cycle and t % slot_ns == 0
                                           and cycle % t == 0] + [(0, 0)]
    else:
        steps = [(t, 0) for t in slots if t == 0 or (t > slot_ns and t % slot_ns == 0)]
    levels = [Level(R, int(slot_ns))]
    res, s, cyc, step = R, int(slot_ns), 0, 0
    while steps or res > top:
        space = res > top and (step < 2 or step % 2 == 1 or not steps)
        if space:
            res -= 1
        else:
            nxt, nxt_cycle = steps.pop(0)
            if nxt != 0 and nxt % s != 0:
                continue
            s, cyc = nxt, nxt_cycle
        levels.append(Level(res, s, cyc))
        step += 1
    return tuple(levels)


def place_levels(h3_resolution: int, slot_ns: int, *, coarsest_resolution: int | None = None) -> tuple[Level, ...]:
    """The levels of the ``place`` release (models/hierarchy.md §14): the finest grid (R, s), each
    cell of resolution R over the whole period (R, period), and the map: its parents at
    ``coarsest_resolution`` (default max(R − 4, 0)) over the period. No levels in between: the
    release measures only the cells and the map, and an unmeasured node in between would answer
    grids without a direct estimate. On the Austin data the place carries
    the signal and the hour does not: answered noise-free by its (R, period) node a finest grid is
    off by 1.0 km/h (day) / 2.1 (full data), by its (R−1, 1 h) node 3.0 / 3.5, by the map-wide mean
    3.6 / 4.4 (median over grids with ≥ 10 users)."""
    R = int(h3_resolution)
    top = max(R - 4, 0) if coarsest_resolution is None else int(coarsest_resolution)
    if not 0 <= top <= R:
        raise DpoptInputError(f"`coarsest_resolution` must be in [0, {R}]; got {coarsest_resolution!r}")
    if top >= R:
        raise DpoptInputError(f"`coarsest_resolution` must be below the finest resolution {R} for the place levels "
                              f"(the map above the cells); got {top}")
    return Level(R, int(slot_ns)), Level(R, 0), Level(top, 0)


def _time_coarser(a: Level, b: Level) -> bool:
    """Does every time window of level ``a`` lie in one window of level ``b`` (module doc)?"""
    if b.slot_ns == 0:
        return b.cycle_ns == 0
    if a.slot_ns == 0 or b.slot_ns % a.slot_ns:
        return False
    if not b.profile:
        return not a.profile
    return not a.profile or a.cycle_ns % b.cycle_ns == 0


def _check_levels(levels: tuple[Level, ...]) -> None:
    for lv in levels:
        if lv.slot_ns < 0 or lv.cycle_ns < 0 or (lv.profile and not (0 < lv.slot_ns < lv.cycle_ns
                                                                       and lv.cycle_ns % lv.slot_ns == 0)):
            raise DpoptInputError(f"a level's `cycle_ns` must be 0 or a whole multiple of its slot; got {lv}")
    if levels[0].profile or levels[0].slot_ns == 0:
        raise DpoptInputError(f"`levels[0]` must be the finest grid (a contiguous slot); got {levels[0]}")
    for a, b in zip(levels[:-1], levels[1:]):
        space = b.h3_resolution < a.h3_resolution
        same_time = (b.slot_ns, b.cycle_ns) == (a.slot_ns, a.cycle_ns)
        if b.h3_resolution > a.h3_resolution or not (same_time or _time_coarser(a, b)) or not (space or not same_time):
            raise DpoptInputError(f"`levels` must coarsen space or time at every step; got {a} -> {b}")


def time_keys(slots: np.ndarray, level: Level, start: int) -> np.ndarray:
    """Each finest slot's window start (ns) at ``level``: the slot floored to the level's slot; the
    period's ``start``; or, for a profile, the first window of its phase that ends after ``start``
    (module doc)."""
    t = np.asarray(slots, dtype=np.int64)
    if level.slot_ns == 0:
        return np.full_like(t, start)
    if not level.profile:
        return (t // level.slot_ns) * level.slot_ns
    C, w = np.int64(level.cycle_ns), np.int64(level.slot_ns)
    first = (np.int64(start) // C) * C + ((t % C) // w) * w
    return np.where(first + w <= start, first + C, first)


def windows_recur(slots: np.ndarray, level: Level, start: int, cells: np.ndarray | None = None) -> bool:
    """Whether a recurring ``level`` has a node that holds listed slots of two different
    occurrences of its window (cycles): the node of a slot is its window (:func:`time_keys`) and,
    given ``cells``, the slot's H3 parent at the level's resolution; False for a contiguous level.
    Over a list inside one epoch-aligned cycle (one UTC day for "day") no node recurs: a profile is
    then only a set of contiguous windows."""
    if not level.profile:
        return False
    t = np.asarray(slots, dtype=np.int64)
    key = time_keys(t, level, start)
    occurrence = (t - key) // level.cycle_ns
    node = [key] if cells is None else [cell_parents(np.asarray(cells, dtype=np.int64), level.h3_resolution), key]
    pairs = np.unique(np.stack([*node, occurrence], axis=1), axis=0)
    return bool(len(np.unique(pairs[:, :-1], axis=0)) < len(pairs))


def build_hierarchy(cells: np.ndarray, slots: np.ndarray, levels: tuple[Level, ...]) -> Hierarchy:
    """Node table of the tree over the finest grids (``cells``, ``slots``: int64, at ``levels[0]``)."""
    levels = tuple(levels)
    if not levels:
        raise DpoptInputError("`levels` must hold at least the finest level; got none")
    _check_levels(levels)
    cells = np.asarray(cells, dtype=np.int64)
    slots = np.asarray(slots, dtype=np.int64)
    if cells.shape != slots.shape or cells.ndim != 1 or cells.size == 0:
        raise DpoptInputError(f"`cells` and `slots` must be equal-length non-empty 1-d arrays; got {cells.shape}, {slots.shape}")
    start = int(slots.min())
    end = int(slots.max()) + int(levels[0].slot_ns)
    key_c, key_s = cells, slots
    frames, offset = [], 0
    member = None  # per finest grid: row within the current level
    for li, lev in enumerate(levels):
        if li > 0:
            key_c = cell_parents(key_c, lev.h3_resolution)
            key_s = time_keys(slots, lev, start)
        keys = np.stack([key_s, key_c], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        if li == 0 and uniq.shape[0] != cells.size:
            raise DpoptInputError("the finest list holds duplicate (cell, slot) grids")
        if li > 0:  # parent row of every row of the previous level
            parent = np.empty(frames[-1].shape[0], dtype=np.int64)
            parent[member] = offset + inv
            frames[-1]["parent"] = parent
        else:
            finest = inv.copy()
        member = inv
        slot_ns = (end - start) if lev.slot_ns == 0 else lev.slot_ns
        frames.append(pd.DataFrame({"cell": uniq[:, 1], "h3_resolution": lev.h3_resolution, "slot": uniq[:, 0],
                                    "slot_ns": np.int64(slot_ns), "cycle_ns": np.int64(lev.cycle_ns),
                                    "parent": np.int64(-1), "level": li}))
        offset += uniq.shape[0]
    nodes = pd.concat(frames, ignore_index=True)
    parent = nodes["parent"].to_numpy()
    base = np.cumsum([0] + [f.shape[0] for f in frames[:-1]])
    leaves = np.zeros(len(nodes), dtype=np.int64)
    leaves[: frames[0].shape[0]] = 1
    for li in range(len(frames) - 1):  # one vectorised pass per level
        rows = np.arange(base[li], base[li] + frames[li].shape[0])
        np.add.at(leaves, parent[rows], leaves[rows])
    return Hierarchy(nodes=nodes, finest_node=finest, levels=levels, leaves_under=leaves)
