"""The public hierarchy: H3 parents by bit operations, the node table, the level sequence."""

import h3
import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.hierarchy.tree import (DAY_NS, HOUR_NS, WEEK_NS, Level, build_hierarchy, cell_parents, default_levels,
                                  time_keys)


def _cells(rng, n, res):
    lat = 30.0 + rng.uniform(0, 0.6, n)
    lng = -98.0 + rng.uniform(0, 0.6, n)
    return np.array([h3.str_to_int(h3.latlng_to_cell(a, b, res)) for a, b in zip(lat, lng)], dtype=np.int64)


@pytest.mark.parametrize("res", [1, 5, 8, 11])
def test_cell_parents_match_h3(res):
    cells = _cells(np.random.default_rng(res), 50, res)
    for p in range(0, res + 1):
        got = cell_parents(cells, p)
        want = [h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(c)), p)) for c in cells]
        assert got.tolist() == want


def test_parent_finer_than_cell_is_refused():
    with pytest.raises(DpoptInputError, match="resolution"):
        cell_parents(_cells(np.random.default_rng(0), 3, 5), 6)


def test_default_levels_coarsen_one_thing_at_a_time():
    lv = default_levels(8, HOUR_NS)
    assert lv[0] == Level(8, HOUR_NS)
    assert lv[-1] == Level(4, 0)
    for a, b in zip(lv[:-1], lv[1:]):
        assert (a.h3_resolution - b.h3_resolution, a.slot_ns != b.slot_ns) in {(1, False), (0, True)}


def test_node_table_is_a_tree_over_the_finest_grids():
    rng = np.random.default_rng(3)
    cells = _cells(rng, 40, 8)
    slots = rng.integers(0, 48, 40) * HOUR_NS + 1_441_065_600 * 10**9
    keys = np.unique(np.stack([slots, cells], 1), axis=0)
    slots, cells = keys[:, 0], keys[:, 1]
    levels = default_levels(8, HOUR_NS, coarsest_resolution=6)
    H = build_hierarchy(cells, slots, levels)
    N = H.nodes
    parent = N["parent"].to_numpy()
    assert (parent[parent >= 0] > np.flatnonzero(parent >= 0)).all()  # parents after children
    assert (N["level"].to_numpy()[parent >= 0] + 1 == N["level"].to_numpy()[parent[parent >= 0]]).all()
    assert (parent[N["level"].to_numpy() == len(levels) - 1] == -1).all()
    # every finest grid sits in its node; every ancestor contains it in space and time
    fin = H.finest_node
    assert (N["cell"].to_numpy()[fin] == cells).all() and (N["slot"].to_numpy()[fin] == slots).all()
    for g in range(len(cells)):
        v = fin[g]
        while v >= 0:
            row = N.iloc[v]
            assert h3.cell_to_parent(h3.int_to_str(int(cells[g])), int(row.h3_resolution)) == h3.int_to_str(int(row.cell))
            assert row.slot <= slots[g] and slots[g] + HOUR_NS <= row.slot + row.slot_ns
            v = parent[v]
    # leaves_under counts finest grids
    assert H.leaves_under[N["level"].to_numpy() == len(levels) - 1].sum() == len(cells)
    # siblings distinct: (level, cell, slot) unique
    assert not N.duplicated(["level", "cell", "slot"]).any()


def test_whole_period_slot_and_day_alignment():
    cells = _cells(np.random.default_rng(1), 3, 7)
    slots = np.array([5, 26, 30]) * HOUR_NS
    H = build_hierarchy(cells, slots, (Level(7, HOUR_NS), Level(7, DAY_NS), Level(7, 0)))
    day = H.nodes[H.nodes.level == 1]
    assert set(day.slot) <= {0, DAY_NS}
    top = H.nodes[H.nodes.level == 2]
    assert (top.slot == 5 * HOUR_NS).all() and (top.slot_ns == 26 * HOUR_NS).all()


@pytest.mark.parametrize("levels", [
    (Level(7, HOUR_NS), Level(8, HOUR_NS)),
    (Level(7, HOUR_NS), Level(7, HOUR_NS)),
    (Level(7, 2 * HOUR_NS), Level(7, 3 * HOUR_NS)),
    # a recurring window is not inside one contiguous day, nor inside a longer cycle's window
    (Level(7, HOUR_NS), Level(7, HOUR_NS, DAY_NS), Level(7, DAY_NS)),
    (Level(7, HOUR_NS), Level(7, HOUR_NS, DAY_NS), Level(7, HOUR_NS, WEEK_NS)),
    (Level(7, HOUR_NS), Level(7, 0), Level(6, HOUR_NS, DAY_NS)),
    (Level(7, HOUR_NS), Level(7, 2 * HOUR_NS, DAY_NS), Level(7, 3 * HOUR_NS, DAY_NS)),
    (Level(7, 3 * HOUR_NS), Level(7, 2 * HOUR_NS, DAY_NS)),
    (Level(7, HOUR_NS), Level(6, HOUR_NS, DAY_NS), Level(6, HOUR_NS, DAY_NS)),
])
def test_bad_level_sequences_are_refused(levels):
    with pytest.raises(DpoptInputError, match="coarsen"):
        build_hierarchy(_cells(np.random.default_rng(0), 2, 8), np.array([0, HOUR_NS]), levels)


def _in_window(t: int, start: int, length: int, cycle: int, end: int) -> bool:
    """Brute force of a node's time extent (models/hierarchy.md §2): [start + j·cycle, start + j·cycle
    + length) for j = 0, 1, … before the period's end (cycle 0: the one window)."""
    j = 0
    while start + j * cycle < end:
        if start + j * cycle <= t < start + j * cycle + length:
            return True
        if cycle == 0:
            return False
        j += 1
    return False


@pytest.mark.parametrize("profile", ["day", "week"])
def test_profile_levels_form_a_tree_whose_nodes_hold_exactly_their_windows(profile):
    """Hour-of-day / hour-of-week levels (§2): every finest grid lies in each ancestor's recurring
    windows, no finest grid lies in a same-level node that is not its ancestor, and a profile
    node's slot is its first window that ends after the period's start."""
    rng = np.random.default_rng(14)
    cells = _cells(rng, 60, 8)
    t0 = 1_441_065_600 * 10**9 + 5 * HOUR_NS  # a period starting mid-day, on no week boundary
    slots = t0 + rng.integers(0, 24 * 20, 60) * HOUR_NS
    keys = np.unique(np.stack([slots, cells], 1), axis=0)
    slots, cells = keys[:, 0], keys[:, 1]
    levels = default_levels(8, HOUR_NS, coarsest_resolution=5, profile=profile)
    assert any(lv.profile for lv in levels) and levels[-1] == Level(5, 0)
    H = build_hierarchy(cells, slots, levels)
    N = H.nodes
    end = int(slots.max()) + HOUR_NS
    parent = N["parent"].to_numpy()
    anc = [[] for _ in range(len(cells))]
    for g in range(len(cells)):
        v = H.finest_node[g]
        while v >= 0:
            anc[g].append(v)
            v = parent[v]
    for v in range(len(N)):
        row = N.iloc[v]
        if row.cycle_ns:  # the first window ends after the start, and no earlier one does
            assert row.slot + row.slot_ns > slots.min() >= row.slot + row.slot_ns - row.cycle_ns
        for g in range(len(cells)):
            inside = (h3.cell_to_parent(h3.int_to_str(int(cells[g])), int(row.h3_resolution)) == h3.int_to_str(int(row.cell))
                      and _in_window(int(slots[g]), int(row.slot), int(row.slot_ns), int(row.cycle_ns), end))
            assert inside == (v in anc[g]), (v, g)
    assert not N.duplicated(["level", "cell", "slot"]).any()


def test_time_keys_of_a_profile_by_hand():
    """Hour-of-day on a period starting 2015-09-01 05:00 UTC: 07:00 on day 3 is the window first
    seen on day 1 at 07:00; 03:00 on day 2 the window first seen on day 2 (day 1's 03:00 ended
    before the start)."""
    day1 = 1_441_065_600 * 10**9
    start = day1 + 5 * HOUR_NS
    lv = Level(7, HOUR_NS, DAY_NS)
    got = time_keys(np.array([day1 + 2 * DAY_NS + 7 * HOUR_NS, day1 + DAY_NS + 3 * HOUR_NS, start]), lv, start)
    assert got.tolist() == [day1 + 7 * HOUR_NS, day1 + DAY_NS + 3 * HOUR_NS, start]


def test_profile_needs_a_slot_that_divides_its_cycle():
    with pytest.raises(DpoptInputError, match="profile"):
        default_levels(7, 5 * HOUR_NS, profile="day")
    with pytest.raises(DpoptInputError, match="profile"):
        default_levels(7, HOUR_NS, profile="month")
    H3 = 3 * HOUR_NS
    assert default_levels(7, HOUR_NS, profile="day") == (
        Level(7, HOUR_NS), Level(6, HOUR_NS), Level(5, HOUR_NS), Level(5, HOUR_NS, DAY_NS), Level(4, HOUR_NS, DAY_NS),
        Level(4, H3, DAY_NS), Level(3, H3, DAY_NS), Level(3, 0))
    assert [(lv.slot_ns, lv.cycle_ns) for lv in default_levels(7, HOUR_NS, profile="week")][-5:] == [
        (HOUR_NS, WEEK_NS), (H3, WEEK_NS), (H3, WEEK_NS), (DAY_NS, WEEK_NS), (0, 0)]


def test_default_levels_that_repeat_the_level_below_are_not_measured_twice():
    """A level with as many nodes as the level below groups the list the same way (every node one
    child): the adaptive release's tree drops it (measuring both would halve both budgets). Over a
    list of one day, hour-of-day is the hour and goes; over three days it stays."""
    from dpopt.privacy.user.levels import _distinct_levels
    from dpopt.privacy.user.partitions import PartitionList

    parent = h3.latlng_to_cell(30.27, -97.74, 6)
    kids = np.array([h3.str_to_int(c) for c in sorted(h3.cell_to_children(parent, 7))[:3]], dtype=np.int64)
    levels = default_levels(7, HOUR_NS, profile="day")
    for days, hod_kept in ((1, False), (3, True)):
        hours = 1_441_065_600 * 10**9 + np.arange(24 * days) * HOUR_NS
        cells, slots = np.repeat(kids, hours.size), np.tile(hours, kids.size)
        full = build_hierarchy(cells, slots, levels)
        sizes = [full.level_rows(li).size for li in range(full.n_levels)]
        want = tuple(lv for li, lv in enumerate(levels) if li == 0 or sizes[li] != sizes[li - 1])
        H = _distinct_levels(PartitionList.from_grids(cells, slots), levels)
        assert H.levels == want and (Level(5, HOUR_NS, DAY_NS) in H.levels) == hod_kept
        kept = [H.level_rows(li).size for li in range(H.n_levels)]
        assert all(a != b for a, b in zip(kept[:-1], kept[1:])) and H.leaves_under[H.nodes["parent"] < 0].sum() == cells.size


def test_windows_recur_by_brute_force():
    """A profile level recurs over a list iff one of its nodes (the slot's H3 parent at the level's
    resolution and its window) holds slots of two different occurrences of the window: the
    occurrences enumerated one by one on random lists (not through time_keys), with and without
    cells. Sparse lists over several days that never put two cycles in one node do not recur."""
    from dpopt.hierarchy.tree import windows_recur

    rng = np.random.default_rng(7)
    base = h3.latlng_to_cell(30.27, -97.74, 7)
    pool = np.array([h3.str_to_int(c) for c in sorted(h3.grid_disk(base, 3))], dtype=np.int64)
    seen = set()
    for _ in range(400):
        w = int(rng.choice([1, 2, 3, 6])) * HOUR_NS
        lv = Level(int(rng.choice([5, 6, 7])), w, DAY_NS)
        n = int(rng.integers(1, 8))
        slots = rng.integers(0, int(rng.integers(2, 80)), size=n) * HOUR_NS + 5 * DAY_NS + int(rng.integers(0, 24)) * HOUR_NS
        cells = rng.choice(pool, size=n)
        start = int(slots.min())
        for use_cells in (False, True):
            occ = {}
            for t, c in zip(slots.tolist(), cells.tolist()):
                phase = (t % DAY_NS) // w * w
                first = next(a for a in (phase + j * DAY_NS for j in range(100)) if a + w > start)
                parent = h3.str_to_int(h3.cell_to_parent(h3.int_to_str(c), lv.h3_resolution)) if use_cells else None
                occ.setdefault((parent, first), set()).add((t - first) // DAY_NS)
            want = any(len(v) > 1 for v in occ.values())
            assert windows_recur(slots, lv, start, cells if use_cells else None) == want
            seen.add(want)
    assert seen == {True, False}
    # two days, one slot each in the same 3-h window on different days: recurs; in different windows: not
    lv = Level(7, 3 * HOUR_NS, DAY_NS)
    assert windows_recur(np.array([0, DAY_NS + HOUR_NS]), lv, 0)
    assert not windows_recur(np.array([0, DAY_NS + 4 * HOUR_NS]), lv, 0)
    assert not windows_recur(np.arange(100) * HOUR_NS, Level(7, HOUR_NS), 0)  # contiguous: never
