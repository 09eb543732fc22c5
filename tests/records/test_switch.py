"""The records layer's contributions() against the release's door to the records
(dpopt.release.contributions, all samples kept): the same table, so a release reads identical
contributions through either entry (the pinned releases), and the `user` model's release from the
bounded samples (c smallest keys) equals the one from all samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions, kept_records
from dpopt.records.data import EXAMPLE_BOUND, austin_sample_path
from dpopt.release import Budget, NoiseOptions, UserOptions
from dpopt.release import contributions as release_contributions
from dpopt.release import release_user

FIELDS = ("users", "cells", "slots", "pair_user", "pair_grid", "count", "sum", "sumsq")


@pytest.fixture(scope="module")
def austin():
    return release_contributions(austin_sample_path(), bound=EXAMPLE_BOUND, keep_samples=True)


def test_austin_table_is_identical_to_the_release_contributions(austin):
    full, full_rep = austin
    new, rep = contributions(austin_sample_path(), GridOptions(7, "1h"), InputOptions(), bound=EXAMPLE_BOUND,
                             first_records=8)
    for f in FIELDS:
        assert np.array_equal(getattr(new, f), getattr(full, f)), f
    assert (new.bound, new.out_of_range, new.h3_resolution, new.slot_ns) == (
        full.bound, full.out_of_range, full.h3_resolution, full.slot_ns)
    for key in ("records_read", "records_kept", "dropped_records", "clipped", "chunks"):
        assert rep.as_dict()[key] == full_rep.as_dict()[key]


@pytest.mark.parametrize("bounds", [(3, 2), (5, 8)])
def test_user_release_from_c_samples_equals_release_from_all_samples(austin, bounds):
    full, _ = austin
    k, c = bounds
    new, _ = contributions(austin_sample_path(), GridOptions(7, "1h"), InputOptions(), bound=EXAMPLE_BOUND,
                           first_records=c)
    assert new.samples.values.size < full.samples.values.size  # bounded: fewer records kept
    cells, slots = full.grid_labels()
    public = pd.DataFrame({"cell": cells, "slot": slots})
    budget = Budget(epsilon_total=5.0)

    def opts(bounds):
        return {"options": UserOptions(partitions=public, bounds=bounds, strategy="fixed"), "bound": EXAMPLE_BOUND,
                "noise": NoiseOptions(seed=3)}

    a, b = release_user(full, budget, **opts(bounds)), release_user(new, budget, **opts(bounds))
    assert len(a.table) > 0 and a.table.equals(b.table)
    table, _ = contributions(austin_sample_path(), GridOptions(7, "1h"), InputOptions(), bound=EXAMPLE_BOUND)
    two_pass = kept_records(austin_sample_path(), GridOptions(7, "1h"), InputOptions(), table,
                            np.minimum(table.count, c), bound=EXAMPLE_BOUND)
    assert release_user(two_pass, budget, **opts(bounds)).table.equals(a.table)
    # the refusal names the public limit only, never a record count of the data
    with pytest.raises(DpoptInputError, match=f"keep at most {c} records per pair.*first_records >= c"):
        release_user(new, budget, **opts((k, c + 1)))
