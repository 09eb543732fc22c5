"""dpopt.records.contributions: streaming = in-memory = brute force; bounded samples of c records (the
c smallest keyed sample keys of each pair)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions
from dpopt.privacy.contributions import ALL_RECORDS

from .conftest import BOUND, KEY, RES, as_table, brute_force, random_records

GRID = GridOptions(RES, "1h")


def _run(source, c=None, **read):
    return contributions(source, GRID, InputOptions(**read), bound=BOUND, first_records=c, sample_key=KEY)


def _check_exact(agg, truth):
    got = as_table(agg)
    assert got.keys() == truth.keys()
    for key, (m, s, vals) in truth.items():
        gm, gs, gvals = got[key]
        assert gm == m and gvals == vals
        assert gs == pytest.approx(s, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("c", [None, 1, 3])
def test_dataframe_matches_brute_force(seed, c):
    frame = random_records(seed, n=1500)
    agg, rep = _run(frame, c, chunksize=97)  # chunk boundaries fall inside pairs
    _check_exact(agg, brute_force(frame, c))
    assert rep.records_read == rep.records_kept == len(frame) and rep.chunks == 16
    # users sorted by label, pairs by (grid, user), grids by (slot, cell)
    assert list(agg.users) == sorted(agg.users)
    key = agg.pair_grid * agg.n_users + agg.pair_user
    assert np.all(np.diff(key) > 0)
    assert np.array_equal(np.lexsort((agg.cells, agg.slots)), np.arange(agg.n_grids))


@pytest.mark.parametrize("c", [None, 2])
def test_files_stream_like_memory(tmp_path, c):
    records = random_records(12, n=1200)
    whole, _ = _run(records, c)
    # one CSV, one Parquet file, a directory of CSV files and one of Parquet files, tiny chunks
    records.to_csv(tmp_path / "r.csv", index=False)
    records.to_parquet(tmp_path / "r.parquet", row_group_size=250)
    (tmp_path / "csvdir").mkdir()
    (tmp_path / "pqdir").mkdir()
    for i, part in enumerate(records.iloc[j:j + 300] for j in range(0, len(records), 300)):
        part.to_csv(tmp_path / "csvdir" / f"part{i}.csv.gz", index=False)
        part.to_parquet(tmp_path / "pqdir" / f"part{i}.parquet")
    for source in ("r.csv", "r.parquet", "csvdir", "pqdir"):
        for rows in (500, 173):
            agg, rep = _run(tmp_path / source, c, chunksize=rows)
            assert rep.records_read == len(records)
            for f in ("users", "cells", "slots", "pair_user", "pair_grid", "count"):
                assert np.array_equal(getattr(agg, f), getattr(whole, f)), (source, rows, f)
            np.testing.assert_allclose(agg.sum, whole.sum, rtol=1e-12)
            np.testing.assert_allclose(agg.sumsq, whole.sumsq, rtol=1e-12)
            if c is not None:
                assert np.array_equal(agg.samples.values, whole.samples.values)
                assert np.array_equal(agg.samples.offsets, whole.samples.offsets)


def test_top_c_equals_the_c_smallest_keys_of_all_records(records):
    """The bounded top-c keeps exactly the first c (smallest keys) of what keeping every record keeps
    (the ``public-occupancy`` ``keep_samples=True``: first_records=ALL_RECORDS), keys included."""
    old, _ = _run(records, ALL_RECORDS, chunksize=375)
    assert old.samples.values.size == old.n_records
    for c in (1, 2, 5, 1000):
        new, _ = _run(records, c, chunksize=375)
        for f in ("users", "cells", "slots", "pair_user", "pair_grid", "count", "sum", "sumsq"):
            assert np.array_equal(getattr(new, f), getattr(old, f)), f  # <= 8 chunks: same sum order
        for p in range(old.n_pairs):
            want = old.samples.values[old.samples.offsets[p]:old.samples.offsets[p + 1]][:c]
            assert np.array_equal(new.samples.values[new.samples.offsets[p]:new.samples.offsets[p + 1]], want)
            keys = old.samples.keys[old.samples.offsets[p]:old.samples.offsets[p + 1]]
            assert np.all(np.diff(keys.astype(object)) >= 0)  # stored in key order
            assert np.array_equal(new.samples.keys[new.samples.offsets[p]:new.samples.offsets[p + 1]], keys[:c])
        # bounded memory: never more than c records per pair
        assert new.samples.values.size == np.minimum(old.count, c).sum() <= c * new.n_pairs


def test_reading_beyond_the_kept_records_is_refused(records):
    agg, _ = _run(records, 2)
    gamma = np.minimum(agg.count, 3)
    with pytest.raises(DpoptInputError, match="keep at most 2 records per pair.*first_records >= c"):
        agg.retained_stats(gamma)
    agg.retained_stats(np.minimum(agg.count, 2))


def test_user_ids_follow_the_one_label_rule_without_a_str_per_row():
    frame = random_records(5, n=40)
    frame["user_id"] = ["1", "1.0", " 001", "2"] * 10
    agg, _ = _run(frame)
    # text ids are exact strings (distinct ids never merge)
    assert list(agg.users) == [" 001", "1", "1.0", "2"]


def test_empty_inputs_give_an_empty_table(tmp_path, records):
    (tmp_path / "empty.csv").write_text("")
    records.iloc[:0].to_csv(tmp_path / "header.csv", index=False)
    (tmp_path / "nothing").mkdir()
    bad = records.assign(latitude=np.nan)
    for source, read in ((records.iloc[:0], {}), (tmp_path / "header.csv", {}), (bad, {"max_dropped": 1.0})):
        for c in (None, 4):
            agg, rep = _run(source, c, **read)
            assert agg.n_pairs == agg.n_users == agg.n_grids == 0 and agg.bound == BOUND
            assert rep.records_kept == 0
            if c is not None:
                assert agg.samples.values.size == 0 and list(agg.samples.offsets) == [0]
    with pytest.raises(DpoptInputError, match="max_dropped"):
        _run(bad)  # all invalid: refused by the default share, and only by it
    with pytest.raises(DpoptInputError, match="0 bytes"):  # no header row: the columns cannot be checked
        _run(tmp_path / "empty.csv")


def test_bad_arguments(records):
    with pytest.raises(DpoptInputError, match="`grid` must be"):
        contributions(records, (7, "1h"), InputOptions(), bound=BOUND)
    with pytest.raises(DpoptInputError, match="`read` must be"):
        contributions(records, GRID, {}, bound=BOUND)
    with pytest.raises(DpoptInputError, match="`first_records`"):
        contributions(records, GRID, InputOptions(), bound=BOUND, first_records=0)
    with pytest.raises(DpoptInputError, match="`backend`"):
        contributions(records, GRID, InputOptions(), bound=BOUND, backend="spark")
    with pytest.raises(DpoptInputError, match="`bound`"):
        contributions(records, GRID, InputOptions(), bound=-1)
