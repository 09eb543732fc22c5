"""kept_records (second pass): the Γ_p smallest-key records of chosen pairs, locally and on Dask."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions, kept_records

from .conftest import BOUND, KEY, RES, SLOT_NS, brute_force, random_records

GRID = GridOptions(7, "1h")


def _prefixes(agg, gamma):
    return [list(agg.samples.values[agg.samples.offsets[p]:agg.samples.offsets[p] + g]) for p, g in enumerate(gamma)]


@pytest.mark.parametrize("seed", [0, 1])
def test_kept_records_are_the_gamma_smallest_keys_of_each_pair(tmp_path, seed):
    frame = random_records(seed, n=1200)
    frame.to_csv(tmp_path / "r.csv", index=False)
    read = InputOptions(chunksize=150)  # pairs split across chunks
    full, _ = contributions(frame, GRID, read, bound=BOUND, first_records=10**6, sample_key=KEY)
    table, _ = contributions(tmp_path / "r.csv", GRID, read, bound=BOUND)
    assert table.samples is None
    rng = np.random.default_rng(seed)
    gamma = np.where(rng.random(table.n_pairs) < 0.5, 0, np.minimum(table.count, rng.integers(1, 4, table.n_pairs)))
    kept = kept_records(tmp_path / "r.csv", GRID, read, table, gamma, bound=BOUND, sample_key=KEY)
    assert np.array_equal(np.diff(kept.samples.offsets), gamma)
    got = [list(kept.samples.values[a:b]) for a, b in zip(kept.samples.offsets[:-1], kept.samples.offsets[1:])]
    assert got == _prefixes(full, gamma)
    truth = brute_force(frame, 10**6, KEY)  # row by row: the values in (key, value) order
    for p, g in enumerate(gamma):
        pair = (table.users[table.pair_user[p]], int(table.cells[table.pair_grid[p]]), int(table.slots[table.pair_grid[p]]))
        assert got[p] == truth[pair][2][:g]
    assert kept.samples.values.size == gamma.sum() < len(frame)
    # reading more than kept is refused where the model reads (retained_stats, bounding)
    more = np.where(gamma > 0, np.minimum(gamma + 1, table.count), 0)
    if np.any((more > gamma) & (more < table.count)):
        with pytest.raises(DpoptInputError, match="first_records >="):
            kept.retained_stats(more)


def test_kept_records_on_dask_equal_local():
    distributed = pytest.importorskip("distributed")
    frame = random_records(7, n=1500)
    table, _ = contributions(frame, GRID, InputOptions(), bound=BOUND)
    gamma = np.minimum(table.count, 2)
    local = kept_records(frame, GRID, InputOptions(chunksize=100), table, gamma, bound=BOUND, sample_key=KEY)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        dask = kept_records(frame, GRID, InputOptions(), table, gamma, bound=BOUND, sample_key=KEY, backend="dask",
                            client=client)
    assert np.array_equal(dask.samples.values, local.samples.values)
    assert np.array_equal(dask.samples.offsets, local.samples.offsets)
    assert np.array_equal(dask.samples.keys, local.samples.keys)


def test_kept_records_refuses_bad_gamma_and_changed_input():
    frame = random_records(8, n=300)
    table, _ = contributions(frame, GRID, InputOptions(), bound=BOUND)
    with pytest.raises(DpoptInputError, match="`gamma` must hold one integer in 0..count"):
        kept_records(frame, GRID, InputOptions(), table, table.count + 1, bound=BOUND)
    with pytest.raises(DpoptInputError, match="changed between the two passes"):
        kept_records(frame.iloc[:-5], GRID, InputOptions(), table, table.count, bound=BOUND)
    moved = frame.assign(latitude=frame["latitude"] + 1.0)
    with pytest.raises(DpoptInputError, match="changed between the two passes"):
        kept_records(moved, GRID, InputOptions(), table, table.count, bound=BOUND)


def test_second_pass_finds_no_pair_for_a_new_user_slot_or_user_grid_combination():
    """Every way a row can miss the table (new user, new slot, known user and grid never paired)
    is caught by the lookup built once per pass."""
    frame = random_records(9, n=400)
    table, _ = contributions(frame, GRID, InputOptions(), bound=BOUND)
    cell = np.asarray([h3.str_to_int(h3.latlng_to_cell(a, b, RES)) for a, b in
                       zip(frame["latitude"], frame["longitude"])])
    slot = pd.to_datetime(frame["timestamp"], utc=True).dt.as_unit("ns").astype("int64").to_numpy() // SLOT_NS * SLOT_NS
    pairs = set(zip(frame["user_id"], cell, slot))
    row = next(i for i in range(len(frame)) for u in table.users
               if (u, cell[i], slot[i]) not in pairs and frame["user_id"].iloc[i] != u)
    user = next(u for u in table.users if (u, cell[row], slot[row]) not in pairs)
    unpaired = frame.copy()
    unpaired.loc[unpaired.index[row], "user_id"] = user
    later = frame.copy()
    later.loc[later.index[0], "timestamp"] = "2020-03-01T00:00:00Z"
    for changed in (frame.assign(user_id=frame["user_id"].where(frame.index != 3, "nobody")), later, unpaired):
        with pytest.raises(DpoptInputError, match="changed between the two passes"):
            kept_records(changed, GRID, InputOptions(), table, table.count, bound=BOUND)
