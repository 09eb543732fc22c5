"""The records layer's lower end L: every value x is read as x − L, so the
contributions table of records in [L, L + U] is the table of the records x − L in [0, U], bit for bit
(sums, kept records and their sample keys), on both passes; L = 0 subtracts nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions, kept_records
from dpopt.records.ingest import clean_chunk

from .conftest import KEY, RES, SLOT_NS, random_records

LOWER, WIDTH = -30.0, 50.0  # values in [-30, 20]


def _signed(seed: int) -> pd.DataFrame:
    frame = random_records(seed)
    return frame.assign(value=frame["value"] - 25.0)  # about half below 0, some below L and above L + U


def test_clean_chunk_shifts_then_clips_and_counts():
    raw = pd.DataFrame({"user_id": ["a"] * 5, "latitude": [30.0] * 5, "longitude": [-97.0] * 5,
                        "timestamp": ["2020-01-01T00:00:00Z"] * 5, "value": [-40.0, -30.0, 0.0, 20.0, np.inf]})
    chunk, report = clean_chunk(raw, bound=WIDTH, lower=LOWER)
    np.testing.assert_array_equal(chunk.value, [0.0, 0.0, 30.0, 50.0, 50.0])
    assert report.out_of_range == report.clipped == 2
    with pytest.raises(DpoptInputError, match=r"\[lower, upper\] = \[-30, 20\]"):
        clean_chunk(raw, bound=WIDTH, lower=LOWER, out_of_range="error")
    chunk, report = clean_chunk(raw, bound=WIDTH, lower=LOWER, out_of_range="drop")
    np.testing.assert_array_equal(chunk.value, [0.0, 30.0, 50.0])
    with pytest.raises(DpoptInputError, match="`lower` must be a finite number"):
        clean_chunk(raw, bound=WIDTH, lower=float("nan"))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_table_of_x_in_L_U_is_the_table_of_x_minus_L(tmp_path, seed):
    frame = _signed(seed)
    grid, read = GridOptions(RES, SLOT_NS // 10**9), InputOptions(chunksize=700)
    a, ra = contributions(frame, grid, read, bound=WIDTH, lower=LOWER, first_records=3, sample_key=KEY)
    b, rb = contributions(frame.assign(value=frame["value"] - LOWER), grid, read, bound=WIDTH, first_records=3,
                          sample_key=KEY)
    assert a.lower == LOWER and b.lower == 0.0 and a.bound == b.bound == WIDTH
    for field in ("count", "sum", "sumsq", "pair_user", "pair_grid"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    np.testing.assert_array_equal(a.samples.values, b.samples.values)
    np.testing.assert_array_equal(a.samples.keys, b.samples.keys)
    assert ra.clipped == rb.clipped > 0
    # the second pass reads with the table's L (and refuses another)
    gamma = np.minimum(a.count, 2)
    ka = kept_records(frame, grid, read, a, gamma, bound=WIDTH, sample_key=KEY)
    kb = kept_records(frame.assign(value=frame["value"] - LOWER), grid, read, b, gamma, bound=WIDTH, sample_key=KEY)
    np.testing.assert_array_equal(ka.samples.values, kb.samples.values)
    with pytest.raises(DpoptInputError, match=r"`lower` must be the L the table's values were shifted by \(-30\)"):
        kept_records(frame, grid, read, a, gamma, bound=WIDTH, lower=0.0, sample_key=KEY)


def test_zero_lower_is_the_old_table():
    frame = _signed(3)
    grid, read = GridOptions(RES, SLOT_NS // 10**9), InputOptions()
    a, _ = contributions(frame, grid, read, bound=WIDTH, lower=0.0, first_records=2, sample_key=KEY)
    b, _ = contributions(frame, grid, read, bound=WIDTH, first_records=2, sample_key=KEY)
    np.testing.assert_array_equal(a.sum, b.sum)
    np.testing.assert_array_equal(a.samples.values, b.samples.values)
    assert a.lower == b.lower == 0.0


@pytest.mark.slow
def test_dask_reads_with_the_same_shift():
    pytest.importorskip("dask.dataframe")
    frame = _signed(4)
    grid, read = GridOptions(RES, SLOT_NS // 10**9), InputOptions(chunksize=500)
    a, _ = contributions(frame, grid, read, bound=WIDTH, lower=LOWER, first_records=3, sample_key=KEY)
    b, _ = contributions(frame, grid, read, bound=WIDTH, lower=LOWER, first_records=3, sample_key=KEY, backend="dask")
    assert b.lower == LOWER
    np.testing.assert_array_equal(a.count, b.count)
    np.testing.assert_allclose(a.sum, b.sum, rtol=1e-12)  # float sums in another tree shape
    np.testing.assert_array_equal(a.samples.values, b.samples.values)
