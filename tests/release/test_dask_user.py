"""The ``user`` model on Dask: the same release.csv as the local path, given
the same seed, from ``dpopt release R.csv --privacy user ... --backend dask`` on a 2-worker
``distributed.LocalCluster``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from dpopt.cli import main  # noqa: E402
from dpopt.records.grid import cell_strings, slot_strings  # noqa: E402
from dpopt.release import austin_sample_path, contributions  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  scheduler_port=0) as c:
        yield c


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask_user")
    frame = pd.read_csv(austin_sample_path()).head(20000)
    records = d / "R.csv"
    frame.to_csv(records, index=False)
    agg, _ = contributions(records, bound=120)
    rows = np.arange(0, agg.n_grids, 3)
    parts = d / "P.csv"
    pd.DataFrame({"cell": cell_strings(agg.cells[rows]), "slot": slot_strings(agg.slots[rows])}).to_csv(parts,
                                                                                                       index=False)
    return records, parts


@pytest.mark.parametrize("extra", [["--strategy", "adaptive", "--bounds", "4,8"], ["--mechanism", "gaussian", "--delta", "1e-6"]])
@pytest.mark.slow
def test_user_release_on_dask_equals_local(cluster, inputs, tmp_path, extra):
    records, parts = inputs
    base = ["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
            "--partitions", str(parts), "--seed", "3", "--quiet", "--json", *extra]
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    assert main([*base, "--out", str(tmp_path / "dask"), "--backend", "dask",
                 "--scheduler", cluster.scheduler_address]) == 0
    local = (tmp_path / "local" / "release.csv").read_bytes()
    assert local == (tmp_path / "dask" / "release.csv").read_bytes()
    assert len(pd.read_csv(tmp_path / "local" / "release.csv")) > 0
