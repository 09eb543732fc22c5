"""The users' place-or-time vote (dpopt/privacy/user/place_time_vote.py; models/engine.md §5)."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt.privacy.user.place_time_vote import (VOTE_BITS, PlaceShare, cycle_votes, draw_votes, main_effect_split,
                                                measure_place_share, measure_votes, one_sided_shares, place_votes,
                                                raise_votes, vote_pieces, vote_share, vote_sums)
from dpopt.privacy.user.engine import CYCLE_VOTE_SHARE, VOTE_SHARE, VOTE_SHARE_MOST
from tests.privacy.user.conftest import CELLS, make_agg


def _random_records(rng: np.random.Generator, n_users: int = 25) -> list:
    rows = []
    for u in range(n_users):
        for g in rng.choice(48, size=int(rng.integers(1, 9)), replace=False):
            for t in range(int(rng.integers(1, 5))):
                rows.append((f"u{u:02d}", int(g), t, float(rng.uniform(0, 100))))
    return rows


def _brute_votes(rows: list) -> list[float]:
    """Each voting user's MS_place / (MS_place + MS_time) by definition (grid g: cell g % 6, slot
    g // 6), from the records themselves: the spread of its grid means about their slot's mean
    (place at a fixed time) and about their cell's mean (time at a fixed place), record-weighted,
    each over its degrees of freedom (its grids less its slots, less its cells), less the pooled
    variance of its records about their grid's mean where it has a grid of two records (its own
    noise, clipped at 0); users without two cells in some slot and two slots in some cell (evidence
    on both sides), or whose mean squares are both 0, do not vote."""
    votes = []
    for user in sorted({u for u, *_ in rows}):
        mine = [(g % 6, g // 6, x) for (u, g, _, x) in rows if u == user]

        def spread(key: int) -> float:
            total = 0.0
            for level in {rec[key] for rec in mine}:
                recs = [r for r in mine if r[key] == level]
                mean = np.mean([r[2] for r in recs])
                for grid in {(r[0], r[1]) for r in recs}:
                    xs = [r[2] for r in recs if (r[0], r[1]) == grid]
                    total += len(xs) * (np.mean(xs) - mean) ** 2
            return total

        grids = {r[:2] for r in mine}
        df_place, df_time = len(grids) - len({r[1] for r in mine}), len(grids) - len({r[0] for r in mine})
        both = df_place > 0 and df_time > 0
        if not both:
            continue
        per_grid = [[r[2] for r in mine if r[:2] == grid] for grid in grids]
        reps = sum(len(xs) - 1 for xs in per_grid)
        noise = sum(float(np.sum((np.asarray(xs) - np.mean(xs)) ** 2)) for xs in per_grid) / reps if reps else 0.0
        # place within a slot, time within a cell, each less the records' own noise
        place, time = max(spread(1) / df_place - noise, 0.0), max(spread(0) / df_time - noise, 0.0)
        scale = sum(np.mean(xs) ** 2 * len(xs) for xs in per_grid) / len(grids)
        if place + time > 1e-12 * scale:
            votes.append(place / (place + time))
    return votes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_users_vote_is_its_place_share_at_a_fixed_time_against_its_time_share_at_a_fixed_place(
        seed: int) -> None:
    rows = _random_records(np.random.default_rng(seed))
    votes = place_votes(make_agg(rows))
    expect = _brute_votes(rows)
    assert 0 < len(expect) < len({u for u, *_ in rows})  # some users have no evidence
    assert votes == pytest.approx(expect, abs=1e-9)
    assert ((votes >= 0) & (votes <= 1)).all()


def test_only_the_listed_pairs_vote() -> None:
    rows = _random_records(np.random.default_rng(5))
    agg = make_agg(rows)
    listed = agg.cells[agg.pair_grid] != CELLS[0]  # one cell's pairs off the list
    sub = [r for r in rows if r[1] % 6 != 0]
    assert place_votes(agg, listed) == pytest.approx(_brute_votes(sub), abs=1e-9)


def test_a_user_whose_value_follows_its_place_votes_1_its_time_0_a_constant_not_at_all() -> None:
    # one user over cells {0, 1} × slots {0, 1} (grids 0, 1, 6, 7), two records in each grid
    def user(value) -> list:
        return [("a", g, t, value(g)) for g in (0, 1, 6, 7) for t in range(2)]

    assert place_votes(make_agg(user(lambda g: 10.0 + 20.0 * (g % 6)))) == pytest.approx([1.0])
    assert place_votes(make_agg(user(lambda g: 10.0 + 20.0 * (g // 6)))) == pytest.approx([0.0])
    assert place_votes(make_agg(user(lambda g: 42.0))).size == 0


def test_a_users_records_noise_weighs_the_place_and_the_time_alike_whatever_its_grids() -> None:
    """Users whose values are pure noise, each in one cell at all 8 slots and in a second cell at one
    of them (3 records per grid): the place's sum of squares has 1 degree of freedom, the time's 7,
    so a ratio of sums of squares reads the noise as the time's (its mean is that of Beta(½, 7/2),
    1/8); the vote's mean squares give E[F/(F + 1)] for F ~ F(1, 7), 0.369 (scipy's quadrature).
    Users who roam within one district of many voted 0.18 for the place by sums of squares where the
    place alone sets the value (models/engine.md §5)."""
    from scipy import integrate, stats

    from dpopt.privacy.user.place_time_vote import shares_apart

    rng = np.random.default_rng(4)
    grids = [*range(0, 48, 6), 1]  # cell 0 at slots 0–7, cell 1 at slot 0
    ms, ss = [], []
    for _ in range(200):
        agg = make_agg([(f"u{k}", g, t, float(rng.normal(50.0, 10.0))) for k in range(5) for g in grids
                        for t in range(3)])
        grid = np.asarray(agg.pair_grid)
        parts = (np.asarray(agg.pair_user), grid, agg.slots[grid], agg.cells[grid], agg.count, agg.sum)
        ms.extend(shares_apart(*parts, per_df=True))  # mean squares, the records' noise left in
        ss.extend(shares_apart(*parts))
    expect = integrate.quad(lambda f: f / (f + 1.0) * stats.f(1, 7).pdf(f), 0.0, np.inf)[0]
    assert len(ms) == 1000
    assert np.mean(ms) == pytest.approx(expect, abs=0.03)
    assert np.mean(ss) == pytest.approx(1 / 8, abs=0.03)


@pytest.mark.parametrize("follows", ["place", "time"])
def test_a_users_own_records_noise_is_taken_out_where_it_has_a_grid_of_two_records(follows: str) -> None:
    """Users over cells {0, 1} × slots 0–7, 3 records per grid of sd 10 about 50 + 8 (the other
    cell, or the later half of the slots): in mean squares the records' noise (100 per degree of
    freedom) outweighs the signal and the votes sit near ½ (0.64 and 0.61 toward the side that moves
    the value); less each user's pooled within-grid variance they read the side (0.85 and 0.76).
    With one record per grid there is nothing to tell the noise by, and the vote is the mean squares'
    (models/engine.md §5, "Its own noise")."""
    from dpopt.privacy.user.place_time_vote import shares_apart

    rng = np.random.default_rng(11)
    grids = [c + 6 * t for c in (0, 1) for t in range(8)]

    def level(g: int) -> float:
        return 50.0 + 8.0 * ((g % 6 == 1) if follows == "place" else (g // 6 >= 4))

    def parts(agg):
        grid = np.asarray(agg.pair_grid)
        return (np.asarray(agg.pair_user), grid, agg.slots[grid], agg.cells[grid], agg.count, agg.sum)

    own, mean_squares = [], []
    for _ in range(40):
        agg = make_agg([(f"u{k}", g, t, level(g) + float(rng.normal(0.0, 10.0))) for k in range(10) for g in grids
                        for t in range(3)])
        own.extend(place_votes(agg))
        mean_squares.extend(shares_apart(*parts(agg), per_df=True))
    side = (lambda v: np.mean(v)) if follows == "place" else (lambda v: 1.0 - np.mean(v))
    assert len(own) > 300
    # measured: 0.64 → 0.85 (the place), 0.61 → 0.76 (the time)
    assert side(mean_squares) < 0.68
    assert side(own) > side(mean_squares) + 0.12
    single = make_agg([(f"u{k}", g, 0, level(g) + float(rng.normal(0.0, 10.0))) for k in range(10) for g in grids])
    assert place_votes(single) == pytest.approx(shares_apart(*parts(single), per_df=True), abs=1e-12)


def test_a_user_with_evidence_on_one_side_only_does_not_vote() -> None:
    """A sensor that never moves (one cell, three slots) sees its time move its value and never a
    second cell in a slot: no evidence of the place, so no vote (a vote of 0 would count the absence
    as evidence for the time); nor a user seen in one slot only, nor one with no cell or slot shared."""
    sensor = [("s", g, t, 10.0 + 5.0 * (g // 6)) for g in (0, 6, 12) for t in range(3)]
    assert place_votes(make_agg(sensor)).size == 0
    snapshot = [("q", g, t, 10.0 + 5.0 * g) for g in (0, 1, 2) for t in range(3)]  # three cells, one slot
    assert place_votes(make_agg(snapshot)).size == 0
    payer = [("p", g, 0, 10.0 * g) for g in (0, 7, 14)]  # three cells, three slots, no cell or slot shared
    assert place_votes(make_agg(payer)).size == 0
    # the same sensor with one record in a second cell in one of its slots has both: it votes, mostly time
    moved = sensor + [("s", 1, 0, 10.0)]
    assert place_votes(make_agg(moved)) == pytest.approx([0.0], abs=0.05)


def _brute_one_sided(rows: list, reference: float) -> list[float]:
    """Each one-sided user's vote by definition (grid g: cell g % 6, slot g // 6), users in order:
    first those with time evidence only (no slot with two of its grids, some cell with two), each
    1 − min(σ̂²/V, 1), then those with place evidence only, min(σ̂²/V, 1); σ̂² = the mean square of its
    grid means about their group's mean (cells or slots) over (grids − groups), less the pooled
    variance of its records inside its grids times the mean of 1/n_g; no grid of two records: no vote."""
    time_side, place_side = [], []
    for user in sorted({u for u, *_ in rows}):
        mine = [(g % 6, g // 6, x) for (u, g, _, x) in rows if u == user]
        grids = sorted({r[:2] for r in mine})
        values = {gr: [r[2] for r in mine if r[:2] == gr] for gr in grids}
        reps = sum(len(v) - 1 for v in values.values())
        cells, slots = {gr[0] for gr in grids}, {gr[1] for gr in grids}
        if reps == 0:
            continue
        for side, key, out in (("time", 0, time_side), ("place", 1, place_side)):
            other = slots if side == "time" else cells
            groups = cells if side == "time" else slots
            if len(grids) != len(other) or len(grids) <= len(groups):
                continue
            means = {gr: float(np.mean(v)) for gr, v in values.items()}
            ss = 0.0
            for level in groups:
                inside = [means[gr] for gr in grids if gr[key] == level]
                ss += sum((m - np.mean(inside)) ** 2 for m in inside)
            within = sum(sum((x - np.mean(v)) ** 2 for x in v) for v in values.values()) / reps
            noise = within * float(np.mean([1.0 / len(v) for v in values.values()]))
            share = min(max(ss / (len(grids) - len(groups)) - noise, 0.0) / reference, 1.0)
            out.append(1.0 - share if side == "time" else share)
    return time_side + place_side


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_one_sided_users_vote_is_its_sides_spread_over_the_grids_variance(seed: int) -> None:
    """Sensors (one cell, several slots), snapshots (one slot, several cells) and two-sided users with
    random replicated records, against the definition written out per user (:func:`_brute_one_sided`);
    without a reference they do not vote."""
    rng = np.random.default_rng(seed)
    rows = _random_records(rng, 12)
    for u in range(10):
        cell, slot = int(rng.integers(0, 6)), int(rng.integers(0, 8))
        for s in rng.choice(8, size=int(rng.integers(2, 6)), replace=False):  # a sensor
            rows += [(f"s{u}", cell + 6 * int(s), t, float(rng.uniform(0, 100))) for t in range(int(rng.integers(1, 4)))]
        for c in rng.choice(6, size=int(rng.integers(2, 5)), replace=False):  # a snapshot of one slot
            rows += [(f"q{u}", int(c) + 6 * slot, t, float(rng.uniform(0, 100))) for t in range(int(rng.integers(1, 4)))]
    agg = make_agg(rows)
    both = place_votes(agg)
    assert both == pytest.approx(_brute_votes(rows), abs=1e-9)
    expect = _brute_one_sided(rows, 300.0)
    assert len(expect) >= 10
    votes = place_votes(agg, reference=300.0)
    assert votes[: both.size] == pytest.approx(both, abs=1e-12)
    assert votes[both.size:] == pytest.approx(expect, abs=1e-9)
    assert ((votes >= 0) & (votes <= 1)).all()


def test_a_sensor_votes_time_where_its_time_explains_the_grids_spread_and_place_where_it_does_not() -> None:
    """A sensor whose hours move its value by ±10 (variance 100) against grids whose means vary by
    V = 100 votes ≈ 0 (time); one whose value does not move with the hour votes 1 (place: V is not
    the time's); its records' own noise (sd 2, four per grid) is taken out before the comparison."""
    rng = np.random.default_rng(4)

    def sensor(name: str, amplitude: float) -> list:
        return [(name, 6 * s, t, 50.0 + amplitude * (1 if s % 2 else -1) + float(rng.normal(0, 2)))
                for s in range(8) for t in range(4)]

    moving, still = place_votes(make_agg(sensor("a", 10.0)), reference=100.0), place_votes(make_agg(sensor("b", 0.0)),
                                                                                          reference=100.0)
    assert moving.size == 1 and moving[0] < 0.15
    assert still.size == 1 and still[0] > 0.9
    assert place_votes(make_agg(sensor("a", 10.0))).size == 0  # no reference: no vote
    one_record = [("c", 6 * s, 0, 50.0 + 10.0 * (s % 2)) for s in range(8)]  # no grid of two records
    assert place_votes(make_agg(one_record), reference=100.0).size == 0


@pytest.mark.parametrize("seed", range(4))
def test_adding_or_removing_a_user_moves_the_sum_by_at_most_its_sensitivity(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = _random_records(rng, 30)
    for u, cell in enumerate(rng.integers(0, 6, size=5)):  # sensors: one-sided users
        rows += [(f"s{u}", int(cell) + 6 * s, t, float(rng.uniform(0, 100))) for s in range(3) for t in range(2)]
    for reference in (None, 50.0):
        q, n, sens = vote_sums(place_votes(make_agg(rows), reference=reference))
        assert sens == 2 ** (VOTE_BITS - 1)
        for user in rng.choice(sorted({u for u, *_ in rows}), size=5, replace=False):
            q2, n2, _ = vote_sums(place_votes(make_agg([r for r in rows if r[0] != user]), reference=reference))
            assert abs(q - q2) <= sens and n - n2 in (0, 1)
    # the worst cases: a vote of 0 or 1 is ±2^(b-1) on the lattice
    assert vote_sums(np.array([0.0, 1.0, 0.5])) == (0, 3, sens)
    assert vote_sums(np.array([1.0]))[0] == sens and vote_sums(np.array([0.0]))[0] == -sens


class _Exact:
    """A mechanism that adds no noise (for the post-processing's arithmetic)."""

    unit = "epsilon"
    real_release = False

    def integer(self, values, *, l1, l2, budget):
        return np.asarray(values)

    def scale(self, *, l1, l2, budget):
        return l1 / budget


def test_the_noisy_vote_reads_the_users_mean_and_spends_its_budget() -> None:
    rows = _random_records(np.random.default_rng(9))
    agg = make_agg(rows)
    share, spent = measure_place_share(agg, None, _Exact(), 0.4)
    assert share.value == pytest.approx(float(np.mean(place_votes(agg))), abs=2.0 ** -VOTE_BITS)
    assert share.voters == place_votes(agg).size
    assert sum(spent.values()) == pytest.approx(0.4)
    # sd: the centred sum's Laplace sd √2·2^(b-1)/(ε/2) in vote units over N, with the count's term
    n = share.voters
    c = share.value - 0.5
    expect = np.sqrt((np.sqrt(2) * 0.5 / 0.2) ** 2 + (c * np.sqrt(2) / 0.2) ** 2) / n
    assert share.sd == pytest.approx(expect, rel=1e-6)
    assert measure_place_share(agg, None, _Exact(), 0.0) == (None, {})


def test_the_vote_splits_the_main_effects_total_between_place_and_time() -> None:
    sigma2 = {"cell": 4.0, "hour": 4.0, "day": 4.0, "cell x hour": 7.0, "residual": 2.0}
    kinds = {"cell": "place", "hour": "cycle", "day": "calendar"}
    out = main_effect_split(sigma2, kinds, PlaceShare(value=0.9, sd=0.0, voters=100.0))
    assert out["cell"] == pytest.approx(0.9 * 12.0)
    assert out["hour"] == out["day"] == pytest.approx(0.05 * 12.0)
    assert out["cell x hour"] == 7.0 and out["residual"] == 2.0
    # a vote as noisy as the uniform law weighs half against the even split by number (p0 = 1/3)
    half = main_effect_split(sigma2, kinds, PlaceShare(value=0.9, sd=np.sqrt(1 / 12), voters=3.0))
    assert half["cell"] == pytest.approx(12.0 * (0.5 * 0.9 + 0.5 / 3))
    # no vote, a vote of no weight, or one dimension without a main effect: unchanged
    assert main_effect_split(sigma2, kinds, None) == sigma2
    assert main_effect_split(sigma2, kinds, PlaceShare(value=1.0, sd=1e9, voters=1.0)) == pytest.approx(sigma2)
    assert main_effect_split(sigma2, {"cell": "place"}, PlaceShare(value=0.1, sd=0.0, voters=9.0)) == sigma2


def _release(rows: list, eps: float):
    import pandas as pd

    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import release_user

    agg = make_agg(rows)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    return release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts), bound=100.0,
                        noise=NoiseOptions(seed=4))


@pytest.mark.parametrize("follows, low, high", [("place", 0.8, 1.0), ("time", 0.0, 0.2)])
def test_the_engine_publishes_the_users_vote_and_plans_with_it(follows: str, low: float, high: float) -> None:
    """Users who each cross 3 cells × 3 slots; values set by the cell or by the slot alone: at a large
    budget the engine's noisy vote reads which, and its account holds the vote's two pieces."""
    rng = np.random.default_rng(3)
    value = (lambda g: 10.0 + 15.0 * (g % 6)) if follows == "place" else (lambda g: 10.0 + 10.0 * (g // 6))
    rows = []
    for u in range(300):
        cells, slots = rng.choice(6, 3, replace=False), rng.choice(8, 3, replace=False)
        rows += [(f"u{u}", int(c + 6 * s), t, value(int(c + 6 * s)) + float(rng.normal(0, 1)))
                 for c in cells for s in slots for t in range(2)]
    r = _release(rows, 200.0)
    eng = r.measurements.info.engine
    assert low <= eng.place_vote <= high and eng.place_vote_sd < 0.05
    pieces = r.measurements.spend.pieces
    vote = pieces["pilot place-or-time vote (centred sum)"] + pieces["pilot place-or-time vote (voters)"]
    assert vote == pytest.approx(VOTE_SHARE * (200.0 - pieces["bounds"]), abs=1e-6)  # of the rest after the bounds


@pytest.mark.parametrize("eps, most", [(10.0, 0.33), (20.0, 0.07)])
def test_households_whose_hour_sets_the_value_do_not_vote_for_the_place_they_never_leave(eps: float, most: float
                                                                                         ) -> None:
    """300 fixed households (one cell each, one-sided users), each at its own level N(0, 12²), the hour
    of the day moving every one by 15·sin: the place explains nothing. A household reads its time's
    spread against the grids' means' variance V, and gives the place what its time leaves of V; read
    against V's DP upper end (V̂ + 2 sd) the noise of V went to the place: the engine's vote was 0.43 at
    ε = 10 and 0.13 at ε = 20 (an outside check's household meters: 0.45, the plan then bought the
    cells). Against V̂ it is 0.25 and 0.01."""
    rng = np.random.default_rng(1)
    rows = []
    for u in range(300):
        cell, level = int(rng.integers(6)), float(rng.normal(0, 12))
        for h in rng.choice(48, 30, replace=False):
            rows += [(f"u{u}", cell + 6 * int(h), t, 40.0 + 15.0 * np.sin(2 * np.pi * (h % 24) / 24) + level
                      + float(rng.normal(0, 3))) for t in range(2)]
    assert _release(rows, eps).measurements.info.engine.place_vote < most


def test_the_main_effects_are_the_place_over_the_period_and_the_map_over_each_time_level() -> None:
    from dpopt.hierarchy.lattice import candidate_marginals
    from dpopt.privacy.user.engine import _Bounded, _main_kinds
    from tests.privacy.user.conftest import SLOT_NS

    cells = np.repeat(np.asarray(CELLS, dtype=np.int64), 48)
    slots = np.tile(np.arange(48, dtype=np.int64) * SLOT_NS, len(CELLS))  # two days of hours
    cands = candidate_marginals(cells, slots, h3_resolution=7, slot_ns=SLOT_NS)
    b = _Bounded(cands=cands, R=[], Y=[], Z=np.zeros(0, dtype=np.int64), lam=1.0, half_sum=1, half_sumsq=1, cap=1,
                 clamp=1.0)
    assert b.names == ["cell × slot", "cell × hour-of-day", "cell × 1 d", "cell × period", "r3 × slot",
                       "r3 × hour-of-day", "r3 × 1 d", "r3 × period"]
    # the interactions (cell × a time level finer than the period) and the map over the period are neither
    assert _main_kinds(b) == {"cell × period": "place", "r3 × slot": "calendar", "r3 × hour-of-day": "cycle",
                              "r3 × 1 d": "calendar"}


def test_the_day_of_the_week_is_on_the_calendar_side_of_the_time_vote() -> None:
    """The time's vote contrasts a user's hours within a day (the cycle) with its days at a fixed hour
    (the calendar); the day of the week's windows are whole days, so its variation is on the calendar
    side. As a "cycle" beside the hour of the day it took half of the hour's prior wherever the users
    voted for the hour: household meters whose hour sets the value (bench_engine_kinds "meters",
    ε = 10) bought cell × day-of-week and answered one constant in 2 of 6 seeds (median error 0.23
    → 0.13 over six seeds, all of them by the hour)."""
    from dpopt.hierarchy.lattice import candidate_marginals
    from dpopt.privacy.user.engine import _Bounded, _main_kinds
    from tests.privacy.user.conftest import SLOT_NS

    hours = 21 * 24  # three weeks of hours: the lattice offers the day of the week
    cells = np.repeat(np.asarray(CELLS, dtype=np.int64), hours)
    slots = np.tile(np.arange(hours, dtype=np.int64) * SLOT_NS, len(CELLS))
    cands = candidate_marginals(cells, slots, h3_resolution=7, slot_ns=SLOT_NS)
    b = _Bounded(cands=cands, R=[], Y=[], Z=np.zeros(0, dtype=np.int64), lam=1.0, half_sum=1, half_sumsq=1, cap=1,
                 clamp=1.0)
    kinds = _main_kinds(b)
    assert kinds == {"cell × period": "place", "r3 × slot": "calendar", "r3 × hour-of-day": "cycle",
                     "r3 × 1 d": "calendar", "r3 × day-of-week": "calendar"}
    # a vote for the hour (q = 0.9, exact) gives the hour 0.9 of the time's part, the three calendar levels 0.1
    sigma2 = {f: 1.0 for f in kinds}
    out = main_effect_split(sigma2, kinds, None, PlaceShare(value=0.9, sd=0.0, voters=300.0))
    assert out["r3 × hour-of-day"] == pytest.approx(0.9 * 4.0)
    assert out["r3 × day-of-week"] == out["r3 × 1 d"] == out["r3 × slot"] == pytest.approx(0.1 * 4.0 / 3)


# ---- the time's own vote: the hour of the day or the day (place_time_vote.cycle_votes) ----

HOURS = 48  # two days of hourly slots over the 6 test cells: grid g is (cell g % 6, hour g // 6)


def _cycle_inputs(agg):
    """The listed grid of each pair (here the aggregate's own grid order) and, per grid, its
    (cell, day) and (cell, hour-of-day) node codes."""
    cell = np.searchsorted(np.sort(np.asarray(CELLS, dtype=np.int64)), agg.cells)
    hour = (agg.slots // (3_600 * 10**9)).astype(np.int64)
    return np.ones(agg.n_pairs, dtype=bool), np.asarray(agg.pair_grid), cell * 100 + hour // 24, cell * 100 + hour % 24


def _cycle(rows: list) -> np.ndarray:
    agg = make_agg(rows)
    pairs, grid, calendar, cycle = _cycle_inputs(agg)
    return cycle_votes(agg, pairs, grid, calendar, cycle)


def _brute_cycle_votes(rows: list) -> list[float]:
    """Each voting user's MS_cycle / (MS_cycle + MS_calendar) by definition, from its records: the
    spread of its grid means about their (cell, day)'s mean (the hour moving the value) and about
    their (cell, hour-of-day)'s mean (the day moving it), record-weighted, each over its degrees of
    freedom (its grids less its groups)."""
    votes = []
    for user in sorted({u for u, *_ in rows}):
        mine = [(g % 6, (g // 6) // 24, (g // 6) % 24, x) for (u, g, _, x) in rows if u == user]
        grids = {r[:3] for r in mine}

        def mean_square(group) -> float:
            total, groups = 0.0, {group(r) for r in mine}
            for level in groups:
                recs = [r for r in mine if group(r) == level]
                mean = np.mean([r[3] for r in recs])
                for grid in {r[:3] for r in recs}:
                    xs = [r[3] for r in recs if r[:3] == grid]
                    total += len(xs) * (np.mean(xs) - mean) ** 2
            df = len(grids) - len(groups)
            return total / df if df > 0 else 0.0

        def df(group) -> int:
            return len(grids) - len({group(r) for r in mine})

        day, hour = (lambda r: (r[0], r[1])), (lambda r: (r[0], r[2]))
        cyc, cal = mean_square(day), mean_square(hour)
        scale = sum(r[3] ** 2 for r in mine) / len(grids)
        if df(day) > 0 and df(hour) > 0 and cyc + cal > 1e-12 * scale:
            votes.append(cyc / (cyc + cal))
    return votes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_users_time_vote_is_its_hour_share_within_a_day_against_its_day_share_within_an_hour(seed: int) -> None:
    """Against the definition written out per user (mean squares: :func:`_brute_cycle_votes`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(25):
        for g in rng.choice(6 * HOURS, size=int(rng.integers(1, 30)), replace=False):
            rows += [(f"u{u:02d}", int(g), t, float(rng.uniform(0, 100))) for t in range(int(rng.integers(1, 4)))]
    votes = _cycle(rows)
    expect = _brute_cycle_votes(rows)
    assert 0 < len(expect) <= 25
    assert votes == pytest.approx(expect, abs=1e-9)
    assert ((votes >= 0) & (votes <= 1)).all()


def test_a_user_whose_value_follows_the_hour_votes_1_the_day_0_a_constant_not_at_all() -> None:
    # one user in cell 0 at hours 8 and 17 of both days, two records in each grid
    def user(value) -> list:
        return [("a", 6 * (24 * d + h), t, value(d, h)) for d in (0, 1) for h in (8, 17) for t in range(2)]

    assert _cycle(user(lambda d, h: 10.0 + 2.0 * h)) == pytest.approx([1.0])
    assert _cycle(user(lambda d, h: 10.0 + 20.0 * d)) == pytest.approx([0.0])
    assert _cycle(user(lambda d, h: 42.0)).size == 0
    # one day only: no (cell, hour) node holds two of its grids, so it has no evidence of the day
    # moving its value and does not vote (a 1 would count the absence as evidence for the hour)
    one_day = [("b", 6 * h, 0, 10.0 + h) for h in (8, 12, 17)]
    assert _cycle(one_day).size == 0


def test_the_time_vote_is_bounded_per_user_as_the_place_vote_is() -> None:
    rng = np.random.default_rng(7)
    rows = [(f"u{u}", int(g), 0, float(rng.uniform(0, 100))) for u in range(30)
            for g in rng.choice(6 * HOURS, size=12, replace=False)]
    q, n, sens = vote_sums(_cycle(rows))
    for user in ("u3", "u11", "u29"):
        q2, n2, _ = vote_sums(_cycle([r for r in rows if r[0] != user]))
        assert abs(q - q2) <= sens and n - n2 in (0, 1)


def test_the_time_vote_splits_the_times_part_between_recurring_and_contiguous_levels() -> None:
    sigma2 = {"cell": 4.0, "hour": 4.0, "day": 4.0, "slot": 4.0, "cell x hour": 7.0}
    kinds = {"cell": "place", "hour": "cycle", "day": "calendar", "slot": "calendar"}
    out = main_effect_split(sigma2, kinds, PlaceShare(value=0.25, sd=0.0, voters=100.0),
                            PlaceShare(value=0.8, sd=0.0, voters=100.0))
    assert out["cell"] == pytest.approx(0.25 * 16.0)
    assert out["hour"] == pytest.approx(0.75 * 16.0 * 0.8)
    assert out["day"] == out["slot"] == pytest.approx(0.75 * 16.0 * 0.2 / 2)
    assert out["cell x hour"] == 7.0
    # without the place vote the time's own total is split; a useless time vote leaves q0 = 1/3
    only = main_effect_split(sigma2, kinds, None, PlaceShare(value=1.0, sd=0.0, voters=9.0))
    assert only["hour"] == pytest.approx(12.0) and only["day"] == only["slot"] == 0.0 and only["cell"] == 4.0
    flat = main_effect_split(sigma2, kinds, None, PlaceShare(value=1.0, sd=1e9, voters=1.0))
    assert flat == pytest.approx(sigma2)
    # no recurring level (one day of data): unchanged
    assert main_effect_split(sigma2, {"cell": "place", "day": "calendar"}, None,
                             PlaceShare(value=0.9, sd=0.0, voters=9.0)) == sigma2


@pytest.mark.parametrize("days, asked", [(2, True), (1, False)])
def test_the_engine_asks_the_time_vote_where_the_lattice_has_an_hour_of_day_and_a_day(days: int, asked: bool) -> None:
    """Users over 3 cells × hours of ``days`` days, the hour of the day setting the value: with two
    days the lattice holds hour-of-day and 1 d, the vote reads the hour and its account holds its two
    pieces; with one day there is nothing to split and it is not asked."""
    rng = np.random.default_rng(8)
    rows = []
    for u in range(200):
        cells = rng.choice(6, 3, replace=False)
        hours = rng.choice(24 * days, 6, replace=False)
        rows += [(f"u{u}", int(c + 6 * h), t, 20.0 + 3.0 * (h % 24) + float(rng.normal(0, 1)))
                 for c in cells for h in hours for t in range(2)]
    r = _release(rows, 200.0)
    eng = r.measurements.info.engine
    pieces = r.measurements.spend.pieces
    mine = {k: v for k, v in pieces.items() if "hour-of-day or 1 d vote" in k}
    if asked:
        assert eng.cycle_vote > 0.9 and eng.cycle_vote_sd < 0.05
        assert sum(mine.values()) == pytest.approx(CYCLE_VOTE_SHARE * (200.0 - pieces["bounds"]), abs=1e-6)
    else:
        assert np.isnan(eng.cycle_vote) and not mine


def test_a_users_records_noise_weighs_the_hour_and_the_day_alike_whatever_its_grids() -> None:
    """A user whose values are pure noise, in one cell at 12 hours of one day and 2 of the next: the
    sum of squares over hours within a day has 12 degrees of freedom, over days within an hour 2, so
    sums of squares read its noise as the hour's (mean q = 12/14 ≈ 0.86); mean squares give ≈ 0.57
    (E[F/(F + 1)]-like asymmetry of a ratio of mean squares with 12 and 2 degrees of freedom)."""
    from dpopt.privacy.user.place_time_vote import shares_apart

    rng = np.random.default_rng(3)
    q_ms, q_ss = [], []
    for _ in range(300):
        grids = [6 * h for h in range(12)] + [6 * (24 + h) for h in range(2)]
        rows = [("a", g, t, float(rng.normal(50.0, 10.0))) for g in grids for t in range(3)]
        q_ms.extend(_cycle(rows))
        agg = make_agg(rows)
        _, grid, calendar, cycle = _cycle_inputs(agg)
        q_ss.extend(shares_apart(np.asarray(agg.pair_user), grid, calendar[grid], cycle[grid], agg.count, agg.sum))
    assert 0.5 < np.mean(q_ms) < 0.62
    assert np.mean(q_ss) == pytest.approx(12 / 14, abs=0.03)


def _mechanism(kind: str, seed: int):
    from dpopt.noise.mechanism import DiscreteLaplace, GaussianSimulation, LaplaceSimulation
    from dpopt.noise.sources import SeededSource

    if kind == "discrete":
        return DiscreteLaplace(SeededSource(seed), seeded=True)
    return (LaplaceSimulation if kind == "laplace" else GaussianSimulation)(np.random.default_rng(seed))


@pytest.mark.parametrize("kind", ["discrete", "laplace", "gaussian"])
def test_a_raised_vote_costs_its_final_level_and_its_first_draw_is_the_measured_one(kind: str) -> None:
    """The first draw is the one :func:`measure_votes` makes from the same stream; raised to 4× the
    budget it is charged that level alone (both queries), its stated noise variance is the final
    level's (Laplace: 2b² at b = Δ/ε; Gaussian: two draws combined by inverse variance, precision
    adding like ρ), and raising to a budget at or below the present level changes nothing."""
    votes = np.random.default_rng(2).uniform(0, 1, 400)
    first, pieces = measure_votes(votes, _mechanism(kind, 7), 0.2)
    draw = draw_votes(votes, _mechanism(kind, 7), 0.2)
    assert vote_share(draw) == first and vote_pieces(draw) == pieces
    mech = _mechanism(kind, 7)
    draw = draw_votes(votes, mech, 0.2)
    up = raise_votes(draw, mech, 0.8)
    assert sum(vote_pieces(up).values()) == pytest.approx(0.8)
    assert raise_votes(up, mech, 0.8) is up and raise_votes(up, mech, 0.4) is up
    q, n, sens = vote_sums(votes)
    if kind == "gaussian":  # σ² = Δ²/(2ρ) per query; 0.1 then 0.3 more: precision 0.4/(Δ²/2)
        assert up.var_q == pytest.approx(sens ** 2 / (2 * 0.4)) and up.var_n == pytest.approx(1 / (2 * 0.4))
    else:
        assert up.var_q == pytest.approx(2 * (sens / 0.4) ** 2, rel=1e-6)
        assert up.value_q - q == pytest.approx(float(up.noise_q[0]))
    assert up.q == q and up.n == n


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_a_raised_votes_error_has_the_final_levels_spread(kind: str) -> None:
    """Over 3,000 seeds the raised estimate p̂ errs about the users' exact mean vote with the sd it
    states (within 6 %): noise reduction (Laplace) leaves the final answer distributed as one draw at
    the final level, and the Gaussian's combined draw is as precise as its summed ρ."""
    votes = np.random.default_rng(5).uniform(0, 1, 300)
    truth = 0.5 + vote_sums(votes)[0] / 2 ** VOTE_BITS / votes.size
    errs, sds = [], []
    for seed in range(3000):
        mech = _mechanism(kind, seed)
        share = vote_share(raise_votes(draw_votes(votes, mech, 0.05), mech, 0.2))
        errs.append(share.value - truth)
        sds.append(share.sd)
    assert np.std(errs) == pytest.approx(np.median(sds), rel=0.06)


def test_the_engine_raises_a_vote_only_while_its_ends_change_the_plans_route(monkeypatch) -> None:
    """:func:`engine._decided_votes` with a plan that buys marginal 0 where the place vote reads above
    ½ and marginal 1 below: a vote of 100 voters straddling ½ is doubled until its 2-sd ends agree or it
    reaches ``VOTE_SHARE_MOST`` of the rest; the time's vote, which the plan ignores, stays at its first
    share; the account holds each vote at its final level and the summary says it was raised. A vote
    clear of ½, and one of too few voters to outweigh the uniform law, are not raised."""
    from dpopt.privacy.user import engine

    def plan(b, pilot, rest, unit, *, committed=None, spread=None, vote=None, cycle=None):
        return np.array([1.0, 0.0]) if vote.value > 0.5 else np.array([0.0, 1.0]), ""

    monkeypatch.setattr(engine, "_plan", plan)
    mech, rest = _mechanism("laplace", 3), 10.0
    near = np.random.default_rng(1).uniform(0.45, 0.62, 100)  # mean ≈ 0.535
    votes = engine._Votes(place=draw_votes(near, mech, VOTE_SHARE * rest), place_share=VOTE_SHARE,
                          cycle=draw_votes(np.full(60, 0.9), mech, CYCLE_VOTE_SHARE * rest), cycle_label="hour or day",
                          cycle_share=CYCLE_VOTE_SHARE)
    out, note = engine._decided_votes(None, None, votes, mech, rest, "epsilon", spread=1.0)
    place, _ = out.shares()
    ends = engine._vote_ends(place)
    assert out.place_share == VOTE_SHARE_MOST or (ends[0].value > 0.5) == (ends[1].value > 0.5)
    assert out.place_share > VOTE_SHARE and out.cycle_share == CYCLE_VOTE_SHARE
    assert out.place_share in {VOTE_SHARE * 2 ** k for k in range(1, 4)} and out.place_share <= VOTE_SHARE_MOST
    spent = out.spent()
    assert sum(v for k, v in spent.items() if "place-or-time" in k) == pytest.approx(out.place_share * rest)
    assert sum(v for k, v in spent.items() if "hour or day" in k) == pytest.approx(CYCLE_VOTE_SHARE * rest)
    assert out.share == pytest.approx(out.place_share + CYCLE_VOTE_SHARE) and "raised" in note
    # a vote of 2,000 voters far from ½ has both ends on one side: never raised, no note
    clear = engine._Votes(place=draw_votes(np.full(2000, 0.95), mech, VOTE_SHARE * rest), place_share=VOTE_SHARE)
    kept, note = engine._decided_votes(None, None, clear, mech, rest, "epsilon", spread=1.0)
    assert kept.place_share == VOTE_SHARE and note == ""
    # a vote of 8 voters (sd² above the uniform law's 1/12) straddles ½ but is not raised: it stands for few users
    few = engine._Votes(place=draw_votes(near[:8], mech, VOTE_SHARE * rest), place_share=VOTE_SHARE)
    assert few.shares()[0].sd ** 2 > engine.UNIFORM_VARIANCE
    kept, note = engine._decided_votes(None, None, few, mech, rest, "epsilon", spread=1.0)
    assert kept.place_share == VOTE_SHARE and note == ""


@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan"), "1"])
def test_a_vote_drawn_or_raised_at_no_budget_is_a_one_line_error(budget) -> None:
    from dpopt._validation import DpoptInputError

    votes = np.full(10, 0.5)
    with pytest.raises(DpoptInputError, match="`budget`"):
        draw_votes(votes, _mechanism("laplace", 1), budget)
    with pytest.raises(DpoptInputError, match="`budget`"):
        raise_votes(draw_votes(votes, _mechanism("laplace", 1), 0.1), _mechanism("laplace", 1), budget)
