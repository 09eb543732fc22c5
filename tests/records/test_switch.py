"""What the callers of the old aggregate_records get from contributions(): the same table, so a
release switched to the new entry stays bit-identical (the pinned releases), and the `user`
model's release from the bounded samples (c smallest keys) equals the one from all samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridSpec, ReadOptions, contributions, kept_records
from dpopt.records.data import EXAMPLE_BOUND, austin_sample_path
from tests._legacy import aggregate_records
from tests._legacy import release_user

FIELDS = ("users", "cells", "slots", "pair_user", "pair_grid", "count", "sum", "sumsq")


@pytest.fixture(scope="module")
def austin():
    old, old_rep = aggregate_records(austin_sample_path(), bound=EXAMPLE_BOUND, keep_samples=True)
    return old, old_rep


def test_austin_table_is_identical_to_aggregate_records(austin):
    old, old_rep = austin
    new, rep = contributions(austin_sample_path(), GridSpec(7, "1h"), ReadOptions(), bound=EXAMPLE_BOUND,
                             first_records=8)
    for f in FIELDS:
        assert np.array_equal(getattr(new, f), getattr(old, f)), f
    assert (new.bound, new.out_of_range, new.h3_resolution, new.slot_ns) == (
        old.bound, old.out_of_range, old.h3_resolution, old.slot_ns)
    for key in ("records_read", "records_kept", "dropped_records", "clipped", "chunks"):
        assert rep.as_dict()[key] == old_rep.as_dict()[key]


@pytest.mark.parametrize("bounds", [(3, 2), (5, 8)])
def test_user_release_from_c_samples_equals_release_from_all_samples(austin, bounds):
    old, _ = austin
    k, c = bounds
    new, _ = contributions(austin_sample_path(), GridSpec(7, "1h"), ReadOptions(), bound=EXAMPLE_BOUND,
                           first_records=c)
    assert new.samples.values.size < old.samples.values.size  # bounded: fewer records kept
    cells, slots = old.grid_labels()
    public = pd.DataFrame({"cell": cells, "slot": slots})
    opts = {"bound": EXAMPLE_BOUND, "epsilon": 5.0, "partitions": public, "bounds": bounds, "seed": 3}
    a, b = release_user(old, **opts), release_user(new, **opts)
    assert len(a.table) > 0 and a.table.equals(b.table)
    table, _ = contributions(austin_sample_path(), GridSpec(7, "1h"), ReadOptions(), bound=EXAMPLE_BOUND)
    two_pass = kept_records(austin_sample_path(), GridSpec(7, "1h"), ReadOptions(), table,
                            np.minimum(table.count, c), bound=EXAMPLE_BOUND)
    assert release_user(two_pass, **opts).table.equals(a.table)
    # the refusal names the public limit only, never a record count of the data
    with pytest.raises(DpoptInputError, match=f"keep at most {c} records per pair.*first_records >= c"):
        release_user(new, **{**opts, "bounds": (k, c + 1)})
