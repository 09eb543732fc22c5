"""The engine's list without a public one (dpopt/privacy/user/private_list.py, models/engine.md §8):
folding to windows of the day against a brute-force regrouping of the records, the vote count k
against the exact quantile at negligible noise, and the selection's released cells against the
noise-free counts of the own-records rule written out here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.hierarchy.tree import DAY_NS, Level
from dpopt.noise.mechanism import make_mechanism
from dpopt.noise.sources import SeededSource
from dpopt.privacy.user.private_list import KEEP_QUANTILE, fold_to_day, keep_count, private_list, random_votes
from dpopt.privacy.user.strategies.private_adaptive import PERIOD_NS
from dpopt.release import GridOptions, contributions

U = 50.0
T0 = pd.Timestamp("2020-01-01T00:00:00Z")
LATS = 30.20 + 0.01 * np.arange(8)


def _records(seed: int, n_users: int = 40, n: int = 3000, days: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    user = rng.integers(0, n_users, n)
    # users favour their own cells, so the own-records rule has something to find
    cell = (user + rng.integers(0, 3, n) * rng.integers(0, 2, n)) % LATS.size
    return pd.DataFrame({"user_id": np.char.add("u", user.astype(str)), "latitude": LATS[cell], "longitude": -97.75,
                         "timestamp": T0 + pd.to_timedelta(rng.integers(0, days * 86400, n), unit="s"),
                         "value": np.round(rng.uniform(0, U, n), 2)})


def _agg(df: pd.DataFrame, slot: str = "1h"):
    out = contributions(df, bound=U, grid=GridOptions(7, slot), keep_samples=True)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fold_matches_regrouping_the_records(seed):
    agg = _agg(_records(seed))
    f = fold_to_day(agg)
    # brute force: every record's (user, cell, window of the day) from the original pairs' samples
    rows = []
    for p in range(agg.n_pairs):
        vals = agg.samples.values[agg.samples.offsets[p]:agg.samples.offsets[p + 1]]
        g = agg.pair_grid[p]
        rows += [(agg.users[agg.pair_user[p]], int(agg.cells[g]), int(agg.slots[g]) % DAY_NS, v) for v in vals]
    want = pd.DataFrame(rows, columns=["user", "cell", "window", "v"]).groupby(["user", "cell", "window"])["v"]
    got_rows = []
    for p in range(f.n_pairs):
        vals = f.samples.values[f.samples.offsets[p]:f.samples.offsets[p + 1]]
        g = f.pair_grid[p]
        got_rows += [(f.users[f.pair_user[p]], int(f.cells[g]), int(f.slots[g]), v) for v in vals]
    got = pd.DataFrame(got_rows, columns=["user", "cell", "window", "v"]).groupby(["user", "cell", "window"])["v"]
    assert got.size().to_dict() == want.size().to_dict()
    assert {k: sorted(v) for k, v in got.apply(list).items()} == {k: sorted(v) for k, v in want.apply(list).items()}
    # the pair statistics agree with their samples, and pairs are sorted by (grid, user) without repeats
    n = np.diff(f.samples.offsets)
    assert np.array_equal(n, f.count)
    assert np.allclose(np.add.reduceat(f.samples.values, f.samples.offsets[:-1]), f.sum)
    key = f.pair_grid * f.n_users + f.pair_user
    assert np.all(np.diff(key) > 0)
    assert f.slots.max() < DAY_NS and f.n_records == agg.n_records


def test_fold_keeps_the_smallest_keys_when_samples_are_limited():
    df = _records(4, n_users=5, n=800)
    full = contributions(df, bound=U, grid=GridOptions(7, "1h"), keep_samples=True)
    full = full[0] if isinstance(full, tuple) else full
    limited = contributions(df, bound=U, grid=GridOptions(7, "1h"), first_records=3)
    limited = limited[0] if isinstance(limited, tuple) else limited
    a, b = fold_to_day(full), fold_to_day(limited)
    assert np.array_equal(a.count, b.count)
    for p in range(a.n_pairs):  # the merged pair's 3 smallest keys, whichever parts they came from
        ka = a.samples.keys[a.samples.offsets[p]:a.samples.offsets[p + 1]]
        kb = b.samples.keys[b.samples.offsets[p]:b.samples.offsets[p + 1]]
        assert np.array_equal(np.sort(ka)[:3], kb)


def test_fold_refuses_a_slot_that_does_not_divide_a_day():
    with pytest.raises(DpoptInputError, match="slot"):
        fold_to_day(_agg(_records(0), slot="7h"))


def test_keep_count_is_the_quantile_at_negligible_noise():
    agg = _agg(_records(5, n_users=60))
    per_user = pd.DataFrame({"u": agg.pair_user, "c": agg.cells[agg.pair_grid]}).drop_duplicates().groupby("u").size()
    cand = 2 ** np.arange(9)
    x, t = per_user.to_numpy(), KEEP_QUANTILE * per_user.size
    dist = np.array([max((x < c).sum() - t, t - (x <= c).sum(), 0.0) for c in cand])  # rank interval vs q·n
    want = cand[np.argmin(dist)]
    got = {keep_count(agg, Level(7, PERIOD_NS), 1e4, SeededSource(s)) for s in range(5)}
    assert got == {int(want)}


def test_random_votes_keep_min_k_cells_uniformly():
    # brute force on a tiny instance: user 0 has 4 cells, user 1 has 2, user 2 has 1; k = 2
    pu = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2])
    pn = np.array([0, 1, 2, 3, 3, 1, 2, 2, 3])  # repeated pairs count once
    freq = np.zeros(4)
    n = 4000
    for s_ in range(n):
        c = random_votes(pu, pn, 4, 2, SeededSource(s_))
        assert c.sum() == 2 + 2 + 1 and np.all(c <= [1, 2, 2, 2])
        freq += c
    # user 0 keeps each of its 4 cells with probability 1/2; users 1 and 2 keep all theirs
    want = np.array([0.5, 0.5 + 1, 0.5 + 1, 0.5 + 1])
    assert np.allclose(freq / n, want, atol=0.03)


def test_selection_releases_the_cells_the_votes_fill():
    agg = _agg(_records(6, n_users=80, n=6000))
    mech = make_mechanism("laplace", "discrete", seed=1, seeded=True)
    pl = private_list(agg, epsilon=1e4, delta=1e-6, mechanism=mech, source=SeededSource(2))
    # at negligible noise a released cell has at least the threshold's users with that cell (votes ≤ users)
    users = pd.DataFrame({"u": agg.pair_user, "c": agg.cells[agg.pair_grid]}).drop_duplicates().groupby("c")["u"].nunique()
    assert set(pl.selection.cells.tolist()) <= set(users[users >= pl.selection.threshold - 1].index)
    assert pl.selection.cells.size > 0
    # the list: the selected cells × every window of the day; the period is the public bucket's
    cells, slots = pl.partitions.cells, pl.partitions.slots
    assert set(cells.tolist()) == set(pl.selection.cells.tolist())
    assert len(pl.partitions) == np.unique(cells).size * (DAY_NS // agg.slot_ns)
    assert set(slots.tolist()) == set(range(0, DAY_NS, agg.slot_ns))
    assert (pl.period[1] - pl.period[0]) % PERIOD_NS == 0 and pl.period[0] % PERIOD_NS == 0
    assert sum(pl.pieces.values()) <= 1e4


def test_fold_of_a_daily_slot_is_the_cell_over_the_period():
    agg = _agg(_records(3), slot="1d")
    f = fold_to_day(agg)
    assert set(f.slots.tolist()) == {0}
    per_cell = pd.DataFrame({"u": agg.pair_user, "c": agg.cells[agg.pair_grid], "n": agg.count}).groupby(["u", "c"])["n"].sum()
    got = pd.DataFrame({"u": f.pair_user, "c": f.cells[f.pair_grid], "n": f.count}).set_index(["u", "c"])["n"]
    assert got.sort_index().to_dict() == per_cell.sort_index().to_dict()


def test_keep_count_of_users_who_all_hold_one_cell_is_one():
    """Stationary users (sensors): every user holds exactly one cell. Only k = 1 has its rank
    interval [0, n] around q·n; the earlier utility −|#{x ≤ k} − q·n| tied every candidate and drew
    k uniformly (k = 32 selected no cell on the sensors benchmark). At ε_k = 1 with 400 users the
    mechanism picks 1 in every one of 50 draws."""
    from dpopt.privacy.user.bounds import private_quantile

    ones = np.ones(400)
    cand = 2 ** np.arange(9)
    assert {private_quantile(ones, cand, KEEP_QUANTILE, 1.0, SeededSource(s)) for s in range(50)} == {1}


def test_quantile_utility_has_sensitivity_one_by_brute_force():
    """private_quantile's utility (``rank_utility``) equals its definition counted value by value,
    and moves by at most 1 when one value is added or removed: random integer data with many ties
    at the candidates, every candidate, every value added and every value removed."""
    from dpopt.privacy.user.bounds import rank_utility

    rng = np.random.default_rng(3)
    cand = 2 ** np.arange(6)

    def utility(x):
        t = KEEP_QUANTILE * x.size
        brute = np.array([-max((x < c).sum() - t, t - (x <= c).sum(), 0.0) for c in cand])
        np.testing.assert_allclose(rank_utility(x, cand, KEEP_QUANTILE), brute, rtol=0, atol=1e-12)
        return rank_utility(x, cand, KEEP_QUANTILE)

    for _ in range(30):
        x = rng.choice([1, 1, 2, 3, 4, 4, 8, 16, 40], size=rng.integers(1, 25))
        u = utility(x)
        for extra in (1, 2, 5, 32, 100):
            assert np.max(np.abs(utility(np.append(x, extra)) - u)) <= 1.0 + 1e-12
        for i in range(x.size):
            if x.size > 1:
                assert np.max(np.abs(utility(np.delete(x, i)) - u)) <= 1.0 + 1e-12
