"""The engine at budgets far beyond any use (found by a fuzz run: ε = 10⁶ and 10⁹ ended in "HiGHS could
not load model 'strategy'", then in a singular crossed model): the release runs, its plan is solved
to its gap, and with noise this small every grid's truth is recovered and covered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import release_user
from tests.privacy.user.conftest import CELLS, PLACE, SLOT_NS, TIME, additive_rows, make_agg


@pytest.mark.parametrize("eps", [1e6, 1e9])
def test_a_huge_budget_releases_and_recovers_every_grid(eps) -> None:
    agg = make_agg(additive_rows(2, 120))
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    r = release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts), bound=100.0,
                     noise=NoiseOptions(seed=1))
    plan = r.measurements.info.engine.strategy
    assert "limit" not in plan and "ended" not in plan, plan
    est = r.estimates
    own = est.answers["node"].to_numpy()
    expect = np.array([PLACE[CELLS.index(int(c))] + TIME[int(s // SLOT_NS)]
                       for c, s in zip(est.answers["cell"].to_numpy(), est.answers["slot"].to_numpy())])
    mean = est.table["mean"].to_numpy()[own]
    hw = est.table["mean_error_bound"].to_numpy()[own]
    assert np.all(np.isfinite(mean)) and np.all(hw > 0)
    assert np.median(np.abs(mean - expect)) < 0.05
    assert np.mean(np.abs(mean - expect) <= hw) >= 0.9
