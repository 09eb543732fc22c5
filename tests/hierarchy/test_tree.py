"""The public hierarchy: H3 parents by bit operations, the node table, the level sequence."""

import h3
import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.hierarchy.tree import DAY_NS, HOUR_NS, Level, build_hierarchy, cell_parents, default_levels


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
])
def test_bad_level_sequences_are_refused(levels):
    with pytest.raises(DpoptInputError, match="coarsen"):
        build_hierarchy(_cells(np.random.default_rng(0), 2, 8), np.array([0, HOUR_NS]), levels)
