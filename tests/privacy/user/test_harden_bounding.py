"""Whether a ``user`` release happens never depends on the private data, and the
lattice sums are exact whatever the record counts (no int64 overflow, no private number printed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt._validation import DpoptInputError
from dpopt.privacy.user.bounding import (
    bound_contributions,
    check_lattice_capacity,
    grid_ranks,
    lattice_halves,
    lattice_values,
)
from dpopt.privacy.user.partitions import PartitionList
from dpopt.release import Budget, NoiseOptions, UserOptions, release_user

from .conftest import CELLS, make_agg

U = 1e6


def _records(n_users: int, per_user: int, value: float = 0.0, grid: int = 0, prefix: str = "u"):
    return [(f"{prefix}{u}", grid, t, value) for u in range(n_users) for t in range(per_user)]


def _plist() -> PartitionList:
    return PartitionList(cells=np.asarray(CELLS[:1], dtype=np.int64), slots=np.zeros(1, dtype=np.int64))


def test_one_heavy_user_does_not_turn_a_release_into_an_error():
    # U = 1e6, ε = 100, bounds (1, 1), a public partition list: a rule (n + 1)·H_Z ≥ 2^62 on the private
    # record count n would refuse from n ≈ 9,007 records on (9,000 released, one more 10-record user refused)
    base = _records(900, 10, value=3.0)
    heavy = base + _records(1, 10, value=5.0, prefix="heavy")
    out = []
    for recs in (base, heavy):
        rel = release_user(make_agg(recs), Budget(epsilon_total=100.0),
                           UserOptions(bounds=(1, 1), partitions=_plist(), strategy="fixed"), bound=U,
                           noise=NoiseOptions(seed=1))
        assert rel.summary.grids_released == 1
        out.append(rel)
    assert out[0].summary.k == out[1].summary.k == 1


def test_refusal_depends_on_public_quantities_only_and_shows_no_private_number():
    with pytest.raises(DpoptInputError) as info:
        check_lattice_capacity(1, 64, 1e8, 12)
    msg = str(info.value)
    assert "`granularity_bits`" in msg and "use `granularity_bits` <= 5" in msg
    # the suggested granularity fits, one bit more does not (c·H_Z vs 2^62, exact integers)
    assert 64 * lattice_halves(1e8, 5)[2] < 2**62 <= 64 * lattice_halves(1e8, 6)[2]
    check_lattice_capacity(1, 64, 1e8, 5)
    check_lattice_capacity(1024, 64, U, 12)  # the default caps at U = 1e6 run, whatever the data
    # the same public arguments refuse or not whatever the records: compare 1 and 20,000 records
    messages = []
    for n in (1, 20_000):
        agg = make_agg(_records(n, 1))
        lattice_values(agg, U)  # never refuses at U = 1e6, b = 12
        with pytest.raises(DpoptInputError) as info:
            lattice_values(agg, 1e100)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "20000" not in messages[1]


@pytest.mark.parametrize(("n_users", "per_user", "c"), [(300, 64, 64), (3, 5, 2)])
def test_grid_sums_are_exact_beyond_int64(n_users, per_user, c):
    # every value 0: each term is z_q = H_Z (the top of the lattice); 300 users × 64 records of
    # H_Z = U²·2^12/8 give Z = 300·64·H_Z ≈ 1e19 > 2^63 in one grid
    agg = make_agg(_records(n_users, per_user, value=0.0))
    lat = lattice_values(agg, U)
    bg = bound_contributions(agg, k=1, c=c, ranks=grid_ranks(agg, np.random.default_rng(0)), lattice=lat)
    kept = n_users * min(per_user, c)
    assert int(bg.records[0]) == kept
    assert int(bg.sumsq_q[0]) == kept * lat.half_sumsq  # exact Python-int reference
    assert int(bg.sum_q[0]) == -kept * lat.half_sum
    if n_users == 300:
        assert kept * lat.half_sumsq >= 2**63  # really beyond int64
        rel = release_user(agg, Budget(epsilon_total=1e6), UserOptions(bounds=(1, c), partitions=_plist(), strategy="fixed"),
                           bound=U, noise=NoiseOptions(seed=2))
        row = rel.table.iloc[0]
        assert row["mean"] == pytest.approx(0.0, abs=1.0) and math.isfinite(row["variance_raw"])
