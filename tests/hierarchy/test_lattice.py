"""The lattice of marginals: every grid lies in exactly the node whose place and time keys it has,
checked against keys computed one grid at a time with h3's own parent function."""

from __future__ import annotations

import h3
import numpy as np
import pytest

from dpopt._validation import DpoptInputError
from dpopt.hierarchy.lattice import Marginal, candidate_marginals, marginal_nodes
from dpopt.hierarchy.tree import DAY_NS, HOUR_NS

R = 7


def _grids(rng: np.random.Generator, n_cells: int = 12, n_slots: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Random listed grids: cells around two distant points, hourly slots over three days."""
    cells = set()
    for lat, lng in ((30.27, -97.74), (48.85, 2.35)):
        base = h3.latlng_to_cell(lat, lng, R)
        cells |= set(h3.grid_disk(base, 2))
    cells = np.array([h3.str_to_int(c) for c in sorted(cells)][:n_cells], dtype=np.int64)
    t0 = 1_700_000_000 // 3600 * 3600 * 10**9
    slots = t0 + HOUR_NS * np.arange(n_slots, dtype=np.int64)
    pick = rng.random((cells.size, slots.size)) < 0.3
    ci, si = np.nonzero(pick)
    return cells[ci], slots[si]


def _key(cell: int, slot: int, m: Marginal, start: int) -> tuple[int, int]:
    """Node key of one grid, written out case by case."""
    place = cell if m.h3_resolution == R else h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(cell)), m.h3_resolution))
    if m.slot_ns == 0:
        when = start
    elif m.cycle_ns == 0:
        when = slot // m.slot_ns * m.slot_ns
    else:  # the phase's first window ending after the period's start
        phase = (slot % m.cycle_ns) // m.slot_ns * m.slot_ns
        when = start // m.cycle_ns * m.cycle_ns + phase
        if when + m.slot_ns <= start:
            when += m.cycle_ns
    return int(place), int(when)


@pytest.mark.parametrize("m", [Marginal(R, HOUR_NS), Marginal(R, 0), Marginal(5, HOUR_NS), Marginal(3, 0),
                               Marginal(R, HOUR_NS, DAY_NS), Marginal(4, DAY_NS), Marginal(0, 3 * HOUR_NS, DAY_NS),
                               Marginal(R, DAY_NS, 7 * DAY_NS)])
def test_nodes_match_keys_grid_by_grid(m: Marginal) -> None:
    cells, slots = _grids(np.random.default_rng(3))
    mn = marginal_nodes(cells, slots, m, finest_resolution=R, finest_slot_ns=HOUR_NS)
    start = int(slots.min())
    keys = [_key(c, s, m, start) for c, s in zip(cells, slots)]
    node_keys = list(zip(mn.nodes["cell"].to_numpy()[mn.code].tolist(), mn.nodes["slot"].to_numpy()[mn.code].tolist()))
    assert node_keys == keys
    assert len(set(keys)) == mn.n_nodes  # one node per distinct key, none empty
    assert (mn.nodes["h3_resolution"] == m.h3_resolution).all()
    period = int(slots.max()) + HOUR_NS - start
    assert (mn.nodes["slot_ns"] == (period if m.slot_ns == 0 else m.slot_ns)).all()


def test_candidates_drop_repeated_partitions_and_start_with_the_finest() -> None:
    cells, slots = _grids(np.random.default_rng(5))
    cands = candidate_marginals(cells, slots, h3_resolution=R, slot_ns=HOUR_NS)
    assert cands[0].marginal == Marginal(R, HOUR_NS)
    assert (cands[0].nodes.shape[0] == cells.size)
    parts = []
    for mn in cands:  # every pair of candidates partitions the grids differently
        pairs = {frozenset(np.flatnonzero(mn.code == j).tolist()) for j in range(mn.n_nodes)}
        assert pairs not in parts
        parts.append(pairs)
    names = {mn.marginal.name(R, HOUR_NS) for mn in cands}
    assert {"cell × slot", "cell × period", "cell × hour-of-day", "r3 × slot", "r3 × period"} <= names
    one_day = slots // DAY_NS == slots.min() // DAY_NS  # inside one UTC day: no day or hour-of-day level
    c1 = candidate_marginals(cells[one_day], slots[one_day], h3_resolution=R, slot_ns=HOUR_NS)
    assert not any(mn.marginal.cycle_ns or mn.marginal.slot_ns == DAY_NS for mn in c1)


def test_a_list_over_more_than_seven_days_gets_the_day_of_the_week() -> None:
    """Hourly grids over ten UTC days: the candidates hold "day-of-week" at both place levels, and two
    grids share its node exactly where they share the cell and the UTC weekday (checked with
    :mod:`datetime`); over seven days there is no such level (it would repeat the day)."""
    import datetime
    cells, slots = _grids(np.random.default_rng(8), n_slots=240)
    cands = candidate_marginals(cells, slots, h3_resolution=R, slot_ns=HOUR_NS)
    names = {mn.marginal.name(R, HOUR_NS): mn for mn in cands}
    assert {"cell × day-of-week", "r3 × day-of-week"} <= set(names)
    weekday = [datetime.datetime.fromtimestamp(int(s) // 10**9, datetime.timezone.utc).weekday() for s in slots]
    own = list(zip(cells.tolist(), weekday))
    code = names["cell × day-of-week"].code
    for i in range(0, cells.size, 7):
        assert np.array_equal(code == code[i], np.array([k == own[i] for k in own]))
    week = slots < slots.min() // DAY_NS * DAY_NS + 7 * DAY_NS
    c7 = candidate_marginals(cells[week], slots[week], h3_resolution=R, slot_ns=HOUR_NS)
    assert not any(mn.marginal.cycle_ns == 7 * DAY_NS for mn in c7)


def test_daily_slots_over_more_than_seven_days_get_the_day_of_the_week() -> None:
    """Daily grids over four weeks: the day of the week is offered beside the day and the period (an
    outside check: a weekday/weekend pattern with --slot 1d had no recurring level, and the README
    promised one wherever the list spans more than a week); over seven days it is not (it would repeat
    the day), and no window of the day is offered with daily slots."""
    import datetime
    rng = np.random.default_rng(9)
    cells, hourly = _grids(rng, n_slots=28 * 24)
    slots = hourly // DAY_NS * DAY_NS
    keep = np.unique(np.stack([cells, slots]), axis=1, return_index=True)[1]
    cells, slots = cells[keep], slots[keep]
    cands = candidate_marginals(cells, slots, h3_resolution=R, slot_ns=DAY_NS)
    names = {mn.marginal.name(R, DAY_NS): mn for mn in cands}
    assert {"cell × day-of-week", "r3 × day-of-week", "cell × slot", "cell × period"} <= set(names)
    assert not any(mn.marginal.cycle_ns == DAY_NS for mn in cands)
    weekday = [datetime.datetime.fromtimestamp(int(s) // 10**9, datetime.timezone.utc).weekday() for s in slots]
    own = list(zip(cells.tolist(), weekday))
    code = names["cell × day-of-week"].code
    for i in range(0, cells.size, 5):
        assert np.array_equal(code == code[i], np.array([k == own[i] for k in own]))
    week = slots < slots.min() + 7 * DAY_NS
    c7 = candidate_marginals(cells[week], slots[week], h3_resolution=R, slot_ns=DAY_NS)
    assert not any(mn.marginal.cycle_ns for mn in c7)


def test_names_of_sub_hour_and_multi_hour_windows() -> None:
    """A window shorter than an hour is named in minutes (it read "0 h-of-day" for 15-min slots)."""
    quarter = HOUR_NS // 4
    assert Marginal(R, quarter, DAY_NS).name(R, quarter) == "cell × 15 min-of-day"
    assert Marginal(R - 4, quarter).name(R, quarter) == "r3 × slot"
    assert Marginal(R, HOUR_NS, DAY_NS).name(R, quarter) == "cell × hour-of-day"
    assert Marginal(R, 3 * HOUR_NS, DAY_NS).name(R, HOUR_NS) == "cell × 3 h-of-day"
    assert Marginal(R, DAY_NS).name(R, HOUR_NS) == "cell × 1 d"
    assert Marginal(R, DAY_NS, 7 * DAY_NS).name(R, HOUR_NS) == "cell × day-of-week"
    assert Marginal(R, HOUR_NS, 7 * DAY_NS).name(R, HOUR_NS) == "cell × 1 h-of-week"
    assert Marginal(R, 90 * 60 * 10**9).name(R, quarter) == "cell × 90 min"
    # a window shorter than a minute is named in seconds (a 1-s slot's read "0 min-of-day")
    assert Marginal(R, 10**9, DAY_NS).name(R, 10**9) == "cell × 1 s-of-day"
    assert Marginal(R - 4, 90 * 10**9, DAY_NS).name(R, 10**9) == "r3 × 90 s-of-day"


def test_slots_shorter_than_an_hour_get_the_hour_of_day_as_their_window() -> None:
    """15-min slots over two days: the recurring window is the hour of the day (24 windows), not the
    slot's own 96; hourly and 2-h slots keep their own window."""
    cells, slots = _grids(np.random.default_rng(6))
    quarter = HOUR_NS // 4
    fine = (slots // HOUR_NS) * HOUR_NS + (np.arange(slots.size) % 4) * quarter
    cands = candidate_marginals(cells, fine, h3_resolution=R, slot_ns=quarter)
    windows = [mn.marginal for mn in cands if mn.marginal.cycle_ns]
    assert windows and all(m.slot_ns == HOUR_NS and m.cycle_ns == DAY_NS for m in windows)
    assert {mn.marginal.name(R, quarter) for mn in cands} >= {"cell × slot", "cell × hour-of-day", "cell × 1 d"}
    for slot in (HOUR_NS, 2 * HOUR_NS):
        keyed = (slots // slot) * slot
        own = [mn.marginal for mn in candidate_marginals(cells, keyed, h3_resolution=R, slot_ns=slot) if mn.marginal.cycle_ns]
        assert own and all(m.slot_ns == slot for m in own)


def test_bad_input_is_one_line() -> None:
    with pytest.raises(DpoptInputError, match="h3_resolution"):
        marginal_nodes(np.array([1], dtype=np.int64), np.array([0], dtype=np.int64), Marginal(9, HOUR_NS),
                       finest_resolution=R, finest_slot_ns=HOUR_NS)
    with pytest.raises(DpoptInputError, match="equal-length"):
        marginal_nodes(np.array([1, 2], dtype=np.int64), np.array([0], dtype=np.int64), Marginal(R, HOUR_NS),
                       finest_resolution=R, finest_slot_ns=HOUR_NS)


def test_nesting_map_resolution_is_the_finest_level_at_which_two_cells_share_a_parent():
    """Brute force over random cell sets: the default R − 4 where two cells share a parent there, else
    the finest coarser resolution where two do, else the default."""
    from dpopt.hierarchy.lattice import MAP_STEPS, nesting_map_resolution

    rng = np.random.default_rng(0)
    for _ in range(60):
        R = int(rng.integers(2, 9))
        k = int(rng.integers(1, 4))
        pts = np.column_stack([rng.uniform(-60, 60, k), rng.uniform(-170, 170, k)]) if rng.random() < 0.5 else \
            np.column_stack([30 + rng.normal(0, 0.5, k), -97 + rng.normal(0, 0.5, k)])
        cells = np.array([h3.str_to_int(h3.latlng_to_cell(a, b, R)) for a, b in pts], dtype=np.int64)
        start = max(R - MAP_STEPS, 0)
        uniq = {int(c) for c in cells}
        share = [r for r in range(start, -1, -1)
                 if len({h3.cell_to_parent(h3.int_to_str(c), r) for c in uniq}) < len(uniq)]
        expected = share[0] if share else start
        assert nesting_map_resolution(np.repeat(cells, 3), R) == expected


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Brute force: every pair of grids together in one iff together in the other."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.array_equal(a[:, None] == a[None, :], b[:, None] == b[None, :]))


def test_main_effects_are_the_place_alone_and_the_time_alone_of_each_factor() -> None:
    from dpopt.hierarchy.lattice import EVERY_PLACE, main_effects

    cells, slots = _grids(np.random.default_rng(7), n_cells=24)
    marginals = {"cell × hour-of-day": Marginal(R, HOUR_NS, DAY_NS), "r4 × 1 d": Marginal(4, DAY_NS),
                 "cell × period": Marginal(R, 0)}
    mns = {k: marginal_nodes(cells, slots, m, finest_resolution=R, finest_slot_ns=HOUR_NS) for k, m in marginals.items()}
    factors = {k: mn.code for k, mn in mns.items()}
    me = main_effects(factors, {k: (m.h3_resolution, m.slot_ns, m.cycle_ns) for k, m in marginals.items()},
                      {k: mn.nodes for k, mn in mns.items()}, finest_slot_ns=HOUR_NS)
    hour, day = slots % DAY_NS // HOUR_NS, slots // DAY_NS
    r4 = np.array([h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(c)), 4)) for c in cells])
    # the hour of the day's profile over every place; the cell alone is the given cell × period
    assert me.parents["cell × hour-of-day"] == (f"{EVERY_PLACE} × hour-of-day", "cell × period")
    assert me.parents["r4 × 1 d"] == (f"{EVERY_PLACE} × 1 d", "r4 × period")
    assert "cell × period" not in me.parents  # a place alone has no main effects
    assert set(me.codes) == {f"{EVERY_PLACE} × hour-of-day", f"{EVERY_PLACE} × 1 d", "r4 × period"}
    assert _same_partition(me.codes[f"{EVERY_PLACE} × hour-of-day"], hour)
    assert _same_partition(me.codes[f"{EVERY_PLACE} × 1 d"], day)
    assert _same_partition(me.codes["r4 × period"], r4)
    for (child, main), node_key in me.node_levels.items():  # a node's level is its grids' level
        assert np.array_equal(node_key[factors[child]], {**factors, **me.codes}[main])


def test_a_factor_of_one_place_is_its_own_time_main_effect() -> None:
    from dpopt.hierarchy.lattice import main_effects

    cells, slots = _grids(np.random.default_rng(8), n_cells=6)  # the first six: around Austin, one r0 cell
    assert np.unique([h3.cell_to_parent(h3.int_to_str(int(c)), 0) for c in cells]).size == 1
    m = Marginal(0, DAY_NS)
    mn = marginal_nodes(cells, slots, m, finest_resolution=R, finest_slot_ns=HOUR_NS)
    me = main_effects({"r0 × 1 d": mn.code}, {"r0 × 1 d": (0, DAY_NS, 0)}, {"r0 × 1 d": mn.nodes},
                      finest_slot_ns=HOUR_NS)
    assert me.codes == {} and me.parents == {}  # its place alone is one node: no main effect either


def test_two_factors_share_one_time_main_effect_in_one_labelling() -> None:
    """cell × hour-of-day and r4 × hour-of-day have one hour-of-day over every place: one new factor,
    each factor's node levels in its labels."""
    from dpopt.hierarchy.lattice import EVERY_PLACE, main_effects

    cells, slots = _grids(np.random.default_rng(9), n_cells=24)
    marginals = {"cell × hour-of-day": Marginal(R, HOUR_NS, DAY_NS), "r4 × hour-of-day": Marginal(4, HOUR_NS, DAY_NS)}
    mns = {k: marginal_nodes(cells, slots, m, finest_resolution=R, finest_slot_ns=HOUR_NS) for k, m in marginals.items()}
    factors = {k: mn.code for k, mn in mns.items()}
    me = main_effects(factors, {k: (m.h3_resolution, m.slot_ns, m.cycle_ns) for k, m in marginals.items()},
                      {k: mn.nodes for k, mn in mns.items()}, finest_slot_ns=HOUR_NS)
    main = f"{EVERY_PLACE} × hour-of-day"
    assert set(me.codes) == {main, "cell × period", "r4 × period"}
    assert me.parents["r4 × hour-of-day"][0] == main and me.parents["cell × hour-of-day"][0] == main
    for child in factors:
        assert np.array_equal(me.node_levels[(child, main)][factors[child]], me.codes[main])


def test_main_effects_bad_input_is_one_line() -> None:
    from dpopt.hierarchy.lattice import main_effects

    cells, slots = _grids(np.random.default_rng(10))
    mn = marginal_nodes(cells, slots, Marginal(R, DAY_NS), finest_resolution=R, finest_slot_ns=HOUR_NS)
    good = ({"cell × 1 d": mn.code}, {"cell × 1 d": (R, DAY_NS, 0)}, {"cell × 1 d": mn.nodes})
    with pytest.raises(DpoptInputError, match="`levels` and `nodes` must hold every factor; got none for 'cell × 1 d'"):
        main_effects(good[0], {}, good[2], finest_slot_ns=HOUR_NS)
    with pytest.raises(DpoptInputError, match="must have columns cell and slot"):
        main_effects(good[0], good[1], {"cell × 1 d": mn.nodes.drop(columns="slot")}, finest_slot_ns=HOUR_NS)
    with pytest.raises(DpoptInputError, match=r"must be node rows in \[0, "):
        main_effects({"cell × 1 d": mn.code + len(mn.nodes)}, good[1], good[2], finest_slot_ns=HOUR_NS)
