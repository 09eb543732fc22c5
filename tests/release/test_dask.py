"""The Dask back-end gives the same counts as the local path (LocalCluster, in-process workers)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from dpopt import DpoptInputError  # noqa: E402
from dpopt.release import (InputOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions,  # noqa: E402
                           austin_sample_path, contributions, release)

from .conftest import SUM_RTOL  # noqa: E402

PAIR_FIELDS = ["users", "cells", "slots", "pair_user", "pair_grid", "count"]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


def _same(a, b):
    for f in PAIR_FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    np.testing.assert_allclose(a.sum, b.sum, rtol=SUM_RTOL)
    np.testing.assert_allclose(a.sumsq, b.sumsq, rtol=SUM_RTOL)


def test_dataframe_and_csv_same_as_local(client, records, tmp_path):
    dirty = records.copy()
    dirty.loc[[3, 50], "value"] = 250.0
    dirty.loc[7, "latitude"] = np.nan
    local, rep_l = contributions(dirty, bound=100, io=InputOptions(chunksize=300))
    remote, rep_d = contributions(dirty, bound=100, io=InputOptions(backend="dask", client=client))
    _same(local, remote)
    assert rep_l.as_dict() | {"chunks": 0} == rep_d.as_dict() | {"chunks": 0}
    assert rep_d.clipped == 2 and rep_d.missing["latitude"] == 1
    path = tmp_path / "r.csv"
    dirty.assign(timestamp=dirty.timestamp.dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(path, index=False)
    from_csv, rep_c = contributions(path, bound=100, io=InputOptions(backend="dask", client=client))
    _same(local, from_csv)
    assert rep_c.records_kept == rep_l.records_kept


def test_embedded_sample_identical_counts(client):
    local, rep_l = contributions(austin_sample_path(), bound=120)
    remote, rep_d = contributions(austin_sample_path(), bound=120, io=InputOptions(backend="dask", client=client))
    _same(local, remote)
    assert rep_l.records_kept == rep_d.records_kept == 53569


def test_pseudo_users_second_pass_same_release(client, records):
    kw = dict(bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy", pseudo_users=True),
              noise=NoiseOptions("numpy", seed=3))
    a = release(records, **kw)
    b = release(records, io=InputOptions(backend="dask", client=client), **kw)
    assert a.summary.truncated_records > 0
    np.testing.assert_array_equal(a.table["n_records_retained"], b.table["n_records_retained"])
    np.testing.assert_allclose(a.table["mean"], b.table["mean"], rtol=1e-9)
    np.testing.assert_allclose(a.table["variance"], b.table["variance"], rtol=1e-9, atol=1e-9)
    assert a.summary.degradation == b.summary.degradation


def test_dask_bad_input(client, tmp_path):
    with pytest.raises(DpoptInputError, match="not found"):
        contributions(tmp_path / "nope.csv", bound=1, io=InputOptions(backend="dask", client=client))
    with pytest.raises(DpoptInputError, match="lacks the column"):
        contributions(austin_sample_path(), bound=1,
                      io=InputOptions(backend="dask", client=client, columns={"value": "speed"}))


@pytest.mark.slow
def test_cli_dask_backend(tmp_path, capsys):
    import json

    from dpopt.cli import main

    code = main(["release", "--example", "--privacy", "public-occupancy", "--epsilon", "1", "--backend", "dask", "--out", str(tmp_path / "o"), "--quiet",
                 "--no-map", "--json", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["grids"] == 1449


def test_glob_of_csv_files(client, records, tmp_path):
    half = len(records) // 2
    for i, part in enumerate((records.iloc[:half], records.iloc[half:])):
        part.assign(timestamp=part.timestamp.dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(tmp_path / f"p{i}.csv", index=False)
    local, _ = contributions(records, bound=100)
    remote, rep = contributions(str(tmp_path / "p*.csv"), bound=100, io=InputOptions(backend="dask", client=client))
    _same(local, remote)
    assert rep.chunks == 2
