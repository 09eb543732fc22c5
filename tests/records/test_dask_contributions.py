"""contributions(backend="dask") on a 2-worker distributed.LocalCluster (threads: processes=False,
for speed) equals the local path, for both privacy models (first_records None and c)."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions

from .conftest import BOUND, random_records

distributed = pytest.importorskip("distributed")

GRID = GridOptions(7, "1h")
FIELDS = ("users", "cells", "slots", "pair_user", "pair_grid", "count", "sum", "sumsq")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("c", [None, 3])
@pytest.mark.slow
def test_dask_equals_local_on_parquet_and_csv_directories(tmp_path, client, c):
    frame = random_records(21, n=4000)
    (tmp_path / "pq").mkdir()
    (tmp_path / "csv").mkdir()
    for i in range(10):  # 10 files of 400 rows: one Dask partition and one local chunk each
        part = frame.iloc[i * 400:(i + 1) * 400]
        part.to_parquet(tmp_path / "pq" / f"p{i:02d}.parquet")
        part.to_csv(tmp_path / "csv" / f"p{i:02d}.csv", index=False)
    read = InputOptions(chunksize=400)
    for source in ("pq", "csv"):
        local, rep_l = contributions(tmp_path / source, GRID, read, bound=BOUND, first_records=c)
        dask, rep_d = contributions(tmp_path / source, GRID, read, bound=BOUND, first_records=c,
                                    backend="dask", client=client)
        assert rep_d == rep_l and rep_l.chunks == 10
        for f in FIELDS:  # same partitions and merge tree: identical arrays, float sums included
            assert np.array_equal(getattr(dask, f), getattr(local, f)), (source, f)
        if c is not None:
            assert np.array_equal(dask.samples.values, local.samples.values)
            assert np.array_equal(dask.samples.offsets, local.samples.offsets)
            assert np.array_equal(dask.samples.keys, local.samples.keys)
        assert dask.bound == local.bound == BOUND


def test_dask_dataframe_input_any_partitioning(client):
    """Other partitionings: counts, keys and the kept samples (c smallest sample keys) are still
    identical; the float sums agree to rounding (added in another order)."""
    dd = pytest.importorskip("dask.dataframe")
    frame = random_records(22, n=3000)
    local, _ = contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=2)
    dask, rep = contributions(dd.from_pandas(frame, npartitions=7), GRID, InputOptions(), bound=BOUND,
                              first_records=2, backend="dask", client=client)
    assert rep.chunks == 7 and rep.records_kept == len(frame)
    for f in FIELDS[:6]:
        assert np.array_equal(getattr(dask, f), getattr(local, f)), f
    np.testing.assert_allclose(dask.sum, local.sum, rtol=1e-12)
    assert np.array_equal(dask.samples.values, local.samples.values)
    assert np.array_equal(dask.samples.keys, local.samples.keys)


def test_dask_refuses_like_local(client):
    frame = random_records(23, n=500).assign(latitude=np.nan)
    with pytest.raises(DpoptInputError, match="max_dropped"):
        contributions(frame, GRID, InputOptions(), bound=BOUND, backend="dask", client=client)
    agg, _ = contributions(frame, GRID, InputOptions(max_dropped=1), bound=BOUND, first_records=2,
                           backend="dask", client=client)
    assert agg.n_pairs == 0 and agg.samples.values.size == 0


@pytest.mark.slow
def test_text_in_a_number_column_after_dask_s_sample_is_dropped_as_locally(tmp_path, client):
    """Dask fixed a CSV column's dtype from its first rows: an "n/a" value or an "abc" latitude on the
    last row stopped the whole release with a 19-line dtype error (the local reader drops and counts
    the record). Under the user model whether a release happens must not depend on one user's row;
    the Dask reader now reads every column as text and converts as the local one does."""
    frame = random_records(5, n=3000).astype({"value": object, "latitude": object})
    frame.loc[frame.index[-1], "value"] = "n/a"
    frame.loc[frame.index[-2], "latitude"] = "abc"
    path = tmp_path / "records.csv"
    frame.to_csv(path, index=False)
    read = InputOptions(max_dropped=0.01)
    local, rep_l = contributions(path, GRID, read, bound=BOUND, first_records=8)
    dask, rep_d = contributions(path, GRID, read, bound=BOUND, first_records=8, backend="dask", client=client)
    assert rep_l.unparseable["value"] == 1 and rep_l.unparseable["latitude"] == 1
    assert rep_d.dropped_records == rep_l.dropped_records == 2 and rep_d.records_kept == rep_l.records_kept
    for f in FIELDS:
        assert np.array_equal(getattr(dask, f), getattr(local, f)), f


@pytest.mark.slow
def test_decimal_commas_read_as_the_same_numbers_locally_and_on_dask(tmp_path, client):
    """A ';'-separated CSV with decimal commas (a spreadsheet export in a European or Brazilian locale)
    read with decimal="," gives the arrays the '.' file gives, on both back-ends; without it every value
    and coordinate fails to parse (an outside check's São Paulo fares: 30,000 records dropped, exit 0)."""
    frame = random_records(23, n=2000)
    frame.to_csv(tmp_path / "dot.csv", index=False)
    frame.to_csv(tmp_path / "comma.csv", index=False, sep=";", decimal=",")
    assert "," in (tmp_path / "comma.csv").read_text().splitlines()[1]  # the fixture writes decimal commas
    dot, _ = contributions(tmp_path / "dot.csv", GRID, InputOptions(), bound=BOUND, first_records=2)
    for backend in ("local", "dask"):
        comma, rep = contributions(tmp_path / "comma.csv", GRID, InputOptions(sep=";", decimal=","), bound=BOUND,
                                   first_records=2, backend=backend, client=client if backend == "dask" else None)
        assert rep.records_kept == len(frame)
        for f in FIELDS:
            assert np.array_equal(getattr(comma, f), getattr(dot, f)), (backend, f)
        assert np.array_equal(comma.samples.values, dot.samples.values)
    _, rep = contributions(tmp_path / "comma.csv", GRID, InputOptions(sep=";", max_dropped=1.0), bound=BOUND)
    assert rep.records_kept == 0  # the mark not given: nothing parses
