"""The public lattice of marginals over a finest-grid list (models/engine.md §1).

A finest grid is (H3 cell at resolution R) × (time slot of length s). A **marginal** is a pair
(place level, time level): the place level an H3 resolution r ≤ R (a grid's place is its parent at
r), the time level the slot itself, a longer contiguous slot, a recurring window (hour-of-day:
``slot_ns`` = 1 h, ``cycle_ns`` = 1 d) or the whole period (``slot_ns`` = 0). A marginal partitions
the listed grids into **nodes** (equal place and time key); measuring it means one noisy count and
sum per node. The old release shapes are particular sets of marginals: "place" = {(R, period),
(map, period)}; "fixed" = {(R, s)}; the nested chain of :func:`dpopt.hierarchy.tree.default_levels`.

Unlike the tree of :mod:`dpopt.hierarchy.tree`, the marginals need not nest: (R, period) and
(map, s) cross, and a grid belongs to one node of each. Everything here reads the public list only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from .tree import DAY_NS, HOUR_NS, Level, cell_parents, time_keys

MINUTE_NS = 60 * 10**9

__all__ = ["Marginal", "MarginalNodes", "MainEffects", "marginal_nodes", "candidate_marginals", "main_effects",
           "nesting_map_resolution", "MAP_STEPS", "EVERY_PLACE"]

#: the map's place level is this many H3 resolutions above the finest (aperture 7: 7^4 = 2,401 finest
#: cells per map cell), floored at resolution 0. A public convention of the lattice, not a tuned
#: value: the strategy decides how much budget the map gets, including none.
MAP_STEPS = 4

#: the place part of a main effect of time over every listed place (:func:`main_effects`)
EVERY_PLACE = "every place"


@dataclass(frozen=True)
class Marginal:
    """One (place level × time level) marginal: H3 resolution, slot length in ns (0: the whole
    period) and the cycle in ns of a recurring window (0: contiguous slots)."""

    h3_resolution: int
    slot_ns: int
    cycle_ns: int = 0

    @property
    def level(self) -> Level:
        """The same marginal as a :class:`~dpopt.hierarchy.tree.Level` (for :func:`time_keys`)."""
        return Level(self.h3_resolution, self.slot_ns, self.cycle_ns)

    def name(self, finest_resolution: int, finest_slot_ns: int) -> str:
        """A readable name: "cell × slot", "cell × period", "r3 × hour-of-day", ..."""
        place = "cell" if self.h3_resolution == finest_resolution else f"r{self.h3_resolution}"
        return f"{place} × {_time_name(self.slot_ns, self.cycle_ns, finest_slot_ns)}"


def _time_name(slot_ns: int, cycle_ns: int, finest_slot_ns: int) -> str:
    if slot_ns == 0:
        return "period"
    if slot_ns == finest_slot_ns and cycle_ns == 0:
        return "slot"
    if slot_ns % MINUTE_NS:  # not whole minutes: seconds, never "0 min"
        unit = f"{slot_ns / 1e9:g} s"
    elif slot_ns % HOUR_NS:  # a slot shorter than an hour (or not whole hours): minutes, never "0 h"
        unit = f"{slot_ns // MINUTE_NS} min"
    else:
        unit = f"{slot_ns // HOUR_NS} h" if slot_ns % DAY_NS else f"{slot_ns // DAY_NS} d"
    if cycle_ns == DAY_NS:
        return "hour-of-day" if slot_ns == HOUR_NS else f"{unit}-of-day"
    if cycle_ns:
        if cycle_ns == 7 * DAY_NS:
            return "day-of-week" if slot_ns == DAY_NS else f"{unit}-of-week"
        return f"{unit}-of-{cycle_ns // HOUR_NS} h"
    return unit


@dataclass(frozen=True, eq=False)
class MarginalNodes:
    """The nodes of one marginal over a list: ``code`` (per listed grid, its node's row) and
    ``nodes`` (cell, h3_resolution, slot, slot_ns, cycle_ns per node; the contract of
    :mod:`dpopt.measurements`)."""

    marginal: Marginal
    code: np.ndarray
    nodes: pd.DataFrame

    @property
    def n_nodes(self) -> int:
        return int(len(self.nodes))


def marginal_nodes(cells: np.ndarray, slots: np.ndarray, marginal: Marginal, *, finest_resolution: int,
                   finest_slot_ns: int) -> MarginalNodes:
    """Partition the listed grids (``cells``, ``slots``: int64 at the finest level) by ``marginal``.

    The period of the list is [min slot, max slot + ``finest_slot_ns``); a period node's
    ``slot_ns`` is its length, a recurring node's ``slot`` the start of its first window that ends
    after the period's start (:func:`dpopt.hierarchy.tree.time_keys`).
    """
    cells = np.asarray(cells, dtype=np.int64)
    slots = np.asarray(slots, dtype=np.int64)
    if cells.shape != slots.shape or cells.ndim != 1 or cells.size == 0:
        raise DpoptInputError(f"`cells` and `slots` must be equal-length non-empty 1-d arrays; got "
                              f"{cells.shape}, {slots.shape}")
    if not 0 <= marginal.h3_resolution <= finest_resolution:
        raise DpoptInputError(f"`marginal.h3_resolution` must be in [0, {finest_resolution}]; got {marginal.h3_resolution}")
    start, end = int(slots.min()), int(slots.max()) + int(finest_slot_ns)
    place = cells if marginal.h3_resolution == finest_resolution else cell_parents(cells, marginal.h3_resolution)
    when = slots if (marginal.slot_ns, marginal.cycle_ns) == (finest_slot_ns, 0) else \
        time_keys(slots, marginal.level, start)
    uniq, code = np.unique(np.stack([when, place], axis=1), axis=0, return_inverse=True)
    slot_ns = (end - start) if marginal.slot_ns == 0 else marginal.slot_ns
    nodes = pd.DataFrame({"cell": uniq[:, 1], "h3_resolution": int(marginal.h3_resolution), "slot": uniq[:, 0],
                          "slot_ns": np.int64(slot_ns), "cycle_ns": np.int64(marginal.cycle_ns)})
    return MarginalNodes(marginal=marginal, code=code.reshape(-1).astype(np.int64), nodes=nodes)


def _time_levels(slots: np.ndarray, slot_ns: int) -> list[tuple[int, int]]:
    """(slot_ns, cycle_ns) of the time levels: the slot, the window of the day where a day holds
    several slots, the day where the list spans more than one, the day of the week where its grids
    lie on more than seven UTC days (on seven or fewer it is the day again; with daily slots too, where
    it is the one recurring level: a weekday/weekend pattern over four weeks at ε = 10 erred 1.50 without it,
    1.11 with it, models/engine.md §1), and the period. The window is the
    slot's own, or the hour (hour-of-day) where slots are shorter than an hour: a 15-min window of
    the day holds a 96th of a user's day, too few records for a node to rise above its noise at
    user-level budgets, while the hour's profile is what the data holder asks about (models/engine.md §1)."""
    out = [(int(slot_ns), 0)]
    if slot_ns <= DAY_NS and DAY_NS % slot_ns == 0:
        days = np.unique(np.asarray(slots, dtype=np.int64) // DAY_NS)
        if days.size > 1 and slot_ns < DAY_NS:
            window = HOUR_NS if slot_ns < HOUR_NS and HOUR_NS % slot_ns == 0 else int(slot_ns)
            out += [(int(window), DAY_NS), (DAY_NS, 0)]
        if days.size > 7:
            out.append((DAY_NS, 7 * DAY_NS))
    return out + [(0, 0)]


def candidate_marginals(cells: np.ndarray, slots: np.ndarray, *, h3_resolution: int, slot_ns: int,
                        map_resolution: int | None = None) -> tuple[MarginalNodes, ...]:
    """The candidate marginals of a public list (models/engine.md §1): place levels {R, map} ×
    time levels {slot, hour-of-day, day, day-of-week, period} (the middle three where the list makes
    them differ from the slot and from each other: :func:`_time_levels`), minus any whose partition
    of the list repeats an earlier one (e.g. the map over a list inside one map cell repeats the period). The finest (R, s) comes first.
    ``map_resolution`` defaults to max(R − :data:`MAP_STEPS`, 0)."""
    R = int(h3_resolution)
    top = max(R - MAP_STEPS, 0) if map_resolution is None else int(map_resolution)
    if not 0 <= top <= R:
        raise DpoptInputError(f"`map_resolution` must be in [0, {R}]; got {map_resolution!r}")
    out: list[MarginalNodes] = []
    seen: set[tuple[int, ...]] = set()
    for res in dict.fromkeys([R, top]):
        for t, cyc in _time_levels(slots, slot_ns):
            mn = marginal_nodes(cells, slots, Marginal(res, t, cyc), finest_resolution=R, finest_slot_ns=slot_ns)
            key = _partition_key(mn.code)
            if key not in seen:
                seen.add(key)
                out.append(mn)
    return tuple(out)


def nesting_map_resolution(cells: np.ndarray, h3_resolution: int) -> int:
    """The map level for a list of places chosen under DP (no public list; models/engine.md §8): the
    default max(R − :data:`MAP_STEPS`, 0) where two of the ``cells`` (H3 at resolution R) share a parent
    there, else the finest coarser resolution at which two do (the default where none does: one cell,
    or cells on different base cells).

    Without a public list a grid of a place the selection left out is answered by the smallest
    published node containing it, the map's; where every selected cell has a map cell of its own, the
    map's marginals repeat the cells' and are not in the lattice (:func:`candidate_marginals`), and no
    published row contained those grids (two selected cells of Berlin in two resolution-3 cells left
    82 % of its grids unanswered). A function of the selected cells only (a DP output)."""
    R = int(h3_resolution)
    start = max(R - MAP_STEPS, 0)
    uniq = np.unique(np.asarray(cells, dtype=np.int64))
    for res in range(start, -1, -1) if uniq.size > 1 else ():
        if np.unique(cell_parents(uniq, res)).size < uniq.size:
            return res
    return start


@dataclass(frozen=True, eq=False)
class MainEffects:
    """The main effects a crossed model's factors imply (:func:`main_effects`).

    ``codes``: each new factor's level per listed grid; ``parents``: per factor given, the names of
    its main effects (new factors or given ones with the same partition of the grids); ``node_levels``:
    per (factor, main effect), the main effect's level of each of the factor's nodes."""

    codes: dict[str, np.ndarray]
    parents: dict[str, tuple[str, ...]]
    node_levels: dict[tuple[str, str], np.ndarray]


def main_effects(factors: dict[str, np.ndarray], levels: dict[str, tuple[int, int, int]],
                 nodes: dict[str, pd.DataFrame], *, finest_slot_ns: int,
                 of: Collection[str] | None = None) -> MainEffects:
    """The place and time main effects of each (place × time) factor (models/engine.md §4, "Main effects").

    A factor of a marginal (P, T), T not the period, varies by place and time together; its main
    effects are (P, period), the place alone, and (every place, T), the time alone: the partitions of
    the grids by its nodes' ``cell`` and by their ``slot`` key (the time key is the same for every place:
    :func:`marginal_nodes`). A main effect whose partition is a given factor's is that factor; one
    that is the factor's own partition (one place, or one time), or of one level, is none. Public: the
    lattice only.

    Parameters
    ----------
    factors : dict
        Factor name → the node row (within its marginal) of each listed grid.
    levels : dict
        Factor name → (H3 resolution, slot_ns, cycle_ns) of its marginal (slot_ns 0: the period).
    nodes : dict
        Factor name → its marginal's node table (``cell`` and ``slot`` per node row).
    finest_slot_ns : int
        The finest slot (for the time level's name).
    of : collection of str, optional
        The factors whose main effects are wanted (default every one); the others still name the
        partitions a main effect may repeat.
    """
    _check_main_effects(factors, levels, nodes)
    codes = {name: np.asarray(code, dtype=np.int64) for name, code in factors.items()}
    named = {_partition_key(code): name for name, code in reversed(list(codes.items()))}  # the first of equals
    parents: dict[str, tuple[str, ...]] = {}
    node_levels: dict[tuple[str, str], np.ndarray] = {}
    for name, code in list(codes.items()):
        _, slot_ns, cycle_ns = (int(v) for v in levels[name])
        if slot_ns == 0 or (of is not None and name not in of):  # a place alone already, or not asked
            continue
        found = []
        for main, key in ((f"{EVERY_PLACE} × {_time_name(slot_ns, cycle_ns, finest_slot_ns)}", nodes[name]["slot"]),
                          (f"{_place_name(name)} × period", nodes[name]["cell"])):
            node_key = pd.factorize(np.asarray(key, dtype=np.int64))[0]
            partition = _partition_key(node_key[code])
            if len(set(partition)) < 2 or named.get(partition) == name:
                continue  # one level (μ), or one place or one time: the factor is its own main effect
            twin = named.setdefault(partition, main)
            if twin not in codes:
                codes[twin] = node_key[code]
            else:  # the twin's own labels (a given factor's, or the same main effect of an earlier factor)
                relabel = np.empty(node_key.max() + 1, dtype=np.int64)
                relabel[node_key[code]] = codes[twin]
                node_key = relabel[node_key]
            found.append(twin)
            node_levels[(name, twin)] = node_key
        if found:
            parents[name] = tuple(found)
    return MainEffects(codes={f: c for f, c in codes.items() if f not in factors}, parents=parents,
                       node_levels=node_levels)


def _check_main_effects(factors: dict[str, np.ndarray], levels: dict[str, tuple[int, int, int]],
                        nodes: dict[str, pd.DataFrame]) -> None:
    """:func:`main_effects`' inputs, or a one-line error naming the argument."""
    for name, code in factors.items():
        if name not in levels or name not in nodes:
            raise DpoptInputError(f"`levels` and `nodes` must hold every factor; got none for {name!r}")
        if not {"cell", "slot"} <= set(nodes[name].columns):
            raise DpoptInputError(f"`nodes[{name!r}]` must have columns cell and slot; got {list(nodes[name].columns)}")
        if np.size(code) and not 0 <= int(np.min(code)) <= int(np.max(code)) < len(nodes[name]):
            raise DpoptInputError(f"`factors[{name!r}]` must be node rows in [0, {len(nodes[name])}); got "
                                  f"{int(np.min(code))}..{int(np.max(code))}")


def _place_name(name: str) -> str:
    """The place part of a marginal's name (:meth:`Marginal.name`: "cell", "r3")."""
    return name.split(" × ", 1)[0]


def _partition_key(code: np.ndarray) -> tuple[int, ...]:
    """The partition a code vector induces, in canonical form (first-occurrence relabelling)."""
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return tuple(rank[inv.reshape(-1)].tolist())
