"""Aggregation: occupancy and per-pair statistics equal a direct pandas computation; retained
statistics of truncated pairs equal a brute-force selection of the first samples by time."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.privacy.contributions import ALL_RECORDS
from dpopt.records import GridOptions, InputOptions, SampleKey, contributions

from ..records.conftest import key_ref
from .conftest import SUM_RTOL


def _aggregate(frame, *, chunksize=None, keep_samples=False, res=7, slot="1h"):
    read = InputOptions() if chunksize is None else InputOptions(chunksize=chunksize)
    agg, _ = contributions(frame, GridOptions(res, slot), read, bound=100,
                           first_records=ALL_RECORDS if keep_samples else None)
    return agg


def _direct(frame, res=7, slot="1h"):
    """Independent path: per-row h3 calls and pandas floor."""
    d = frame.copy()
    d["cell"] = [h3.latlng_to_cell(a, b, res) for a, b in zip(d.latitude, d.longitude)]
    d["slot"] = pd.to_datetime(d.timestamp, utc=True).dt.floor(slot).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    d["sq"] = d.value**2
    return d.groupby(["user_id", "cell", "slot"]).agg(count=("value", "size"), sum=("value", "sum"), sumsq=("sq", "sum"))


def _as_frame(agg):
    cells, slots = agg.grid_labels()
    return pd.DataFrame({
        "user_id": agg.users[agg.pair_user], "cell": cells[agg.pair_grid], "slot": slots[agg.pair_grid],
        "count": agg.count, "sum": agg.sum, "sumsq": agg.sumsq,
    }).set_index(["user_id", "cell", "slot"]).sort_index()


def test_tiny_by_construction(tiny_records, cells):
    agg = _aggregate(tiny_records)
    assert (agg.n_users, agg.n_grids, agg.n_pairs, agg.n_records) == (3, 3, 6, 8)
    # grids ordered by (slot, cell): the two 10h grids first
    cs, ss = agg.grid_labels()
    assert list(ss) == ["2020-01-01T10:00:00Z", "2020-01-01T10:00:00Z", "2020-01-01T11:00:00Z"]
    assert cs[2] == cells[0]
    np.testing.assert_array_equal(agg.user_grids(), [3, 2, 1])
    N = dict(zip(zip(cs, ss), agg.grid_records()))
    assert N[(cells[0], "2020-01-01T10:00:00Z")] == 3
    assert N[(cells[1], "2020-01-01T10:00:00Z")] == 4
    assert N[(cells[0], "2020-01-01T11:00:00Z")] == 1
    occ = agg.occupancy()
    assert occ.degradation == 3 and occ.n_pairs == 6


@pytest.mark.parametrize("chunksize", [None, 97])
def test_matches_direct_pandas(records, chunksize):
    got = _as_frame(_aggregate(records, chunksize=chunksize))
    want = _direct(records).sort_index()
    assert list(got.index) == list(want.index)
    np.testing.assert_array_equal(got["count"], want["count"])
    np.testing.assert_allclose(got["sum"], want["sum"], rtol=SUM_RTOL)
    np.testing.assert_allclose(got["sumsq"], want["sumsq"], rtol=SUM_RTOL)


def test_retained_stats_keep_the_smallest_sample_keys(records, rng):
    agg = _aggregate(records, keep_samples=True, chunksize=500)
    gamma = np.array([rng.integers(0, c + 1) for c in agg.count])
    st = agg.retained_stats(gamma)
    # brute force: per pair, sort its records by (sample key, value), keep the first gamma; the key
    # row by row under the records layer's default (public) key
    cells, slots = agg.grid_labels()
    d = records.copy()
    d["cell"] = [h3.latlng_to_cell(a, b, 7) for a, b in zip(d.latitude, d.longitude)]
    d["slot"] = d.timestamp.dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    d["key"] = [key_ref(SampleKey.public(), str(u), pd.Timestamp(t).value, min(max(float(x), 0.0), 100.0), la, lo)
                for u, t, x, la, lo in zip(d.user_id, d.timestamp, d.value, d.latitude, d.longitude)]
    d = d.sort_values(["key", "value"], kind="stable")
    key = {(agg.users[u], cells[g], slots[g]): p for p, (u, g) in enumerate(zip(agg.pair_user, agg.pair_grid))}
    d["pair"] = [key[k] for k in zip(d.user_id, d.cell, d.slot)]
    d["rank"] = d.groupby("pair").cumcount()
    kept = d[d["rank"].to_numpy() < gamma[d["pair"].to_numpy()]]
    g_of = agg.pair_grid[kept["pair"].to_numpy()]
    np.testing.assert_allclose(st.sum, np.bincount(g_of, weights=kept.value, minlength=agg.n_grids), rtol=SUM_RTOL)
    np.testing.assert_allclose(st.sumsq, np.bincount(g_of, weights=kept.value**2, minlength=agg.n_grids), rtol=SUM_RTOL)
    np.testing.assert_array_equal(st.retained, np.bincount(g_of, minlength=agg.n_grids))
    rmax = pd.Series(gamma).groupby(agg.pair_grid).max().reindex(range(agg.n_grids), fill_value=0)
    np.testing.assert_array_equal(st.retained_max, rmax)
    np.testing.assert_array_equal(st.users, np.bincount(agg.pair_grid, weights=gamma > 0, minlength=agg.n_grids))


def test_truncation_needs_samples(records):
    agg = _aggregate(records)
    gamma = agg.count.copy()
    gamma[np.argmax(agg.count)] -= 1
    with pytest.raises(DpoptInputError, match="keep_samples=True"):
        agg.retained_stats(gamma)
    with pytest.raises(DpoptInputError, match="one integer in 0..count per pair"):
        agg.retained_stats(agg.count + 1)


def test_no_valid_record(tiny_records):
    df = tiny_records.copy()
    df["value"] = np.nan
    with pytest.raises(DpoptInputError, match="max_dropped"):
        _aggregate(df)
