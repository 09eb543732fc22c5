"""The ``public-occupancy`` model's own output: :func:`dpopt.privacy.public_occupancy.measure`
returns Measurements that state the noise law exactly, what is public and the spend, and nothing
that depends on the values except the noisy statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.noise import DEFAULT_GRANULARITY_BITS
from dpopt.privacy.public_occupancy import measure
from dpopt.release import Budget, NoiseOptions, PerGridBudget, PublicOccupancyOptions, contributions

from .conftest import random_records

U = 100.0


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return random_records(np.random.default_rng(11))


def _measure(records: pd.DataFrame, budget, plan: str = "greedy", sampler: str = "discrete", seed: int = 4):
    agg, _ = contributions(records, bound=U, keep_samples=True)
    return measure(agg, budget, PublicOccupancyOptions(plan=plan), noise=NoiseOptions(noise=sampler, seed=seed))


def test_numpy_laplace_law_is_sensitivity_over_budget(records):
    m = _measure(records, PerGridBudget(1.0), sampler="numpy")
    pub = m.public
    on = pub["released"].to_numpy(bool)
    assert on.any() and m.statistics["mean"].law.family == "laplace" and m.statistics["mean"].law.lattice == 0.0
    for stat in ("mean", "variance"):
        want = pub[f"{stat}_sensitivity"].to_numpy(float) / pub[f"budget_{stat}"].to_numpy(float)
        np.testing.assert_allclose(m.statistics[stat].law.scale[on], want[on], rtol=1e-12)
    # per-grid mode: K·ε (seed 002 Thm II.3) with K the most released grids a user is kept in
    plan = m.info["plan"]
    assert m.spend.unit == "epsilon" and m.spend.total == pytest.approx(plan.degradation * 1.0)
    assert m.info["user_spend"].max() <= m.spend.total * (1 + 1e-12)
    assert "error_bounds" not in m.info  # the bounds are the estimation layer's


@pytest.mark.slow
def test_discrete_laws_sit_on_the_lattice(records):
    m = _measure(records, Budget(epsilon_total=4.0), plan="budget")
    on = m.public["released"].to_numpy(bool)
    law = m.statistics["mean"].law
    assert law.family == "discrete_laplace" and law.lattice == 2.0**-DEFAULT_GRANULARITY_BITS
    values = m.statistics["mean"].value[on]
    np.testing.assert_array_equal(values / law.lattice, np.round(values / law.lattice))
    # the sampler's scale is at least the planned Δ/ε (budgets rounded down to multiples of 2^-30)
    pub = m.public
    planned = pub["mean_sensitivity"].to_numpy(float) / pub["budget_mean"].to_numpy(float)
    assert np.all(law.scale[on] >= planned[on] * (1 - 1e-12))
    assert m.spend.total <= 4.0 and m.spend.total == pytest.approx(m.info["user_spend"].max())


def test_one_users_values_move_only_the_noisy_statistics(records):
    """Neighbours under public-occupancy (one user's values change): every public column, noise
    law, bias bound, spend and summary fact is identical; only the noisy statistics may differ."""
    other = records.copy()
    u = other["user_id"] == other["user_id"].iloc[0]
    other.loc[u, "value"] = U - other.loc[u, "value"]
    a = _measure(records, PerGridBudget(1.0), sampler="numpy", seed=1)
    b = _measure(other, PerGridBudget(1.0), sampler="numpy", seed=1)
    pd.testing.assert_frame_equal(a.public, b.public)
    pd.testing.assert_frame_equal(a.nodes, b.nodes)
    for stat in ("mean", "variance"):
        np.testing.assert_array_equal(a.statistics[stat].law.scale, b.statistics[stat].law.scale)
        np.testing.assert_array_equal(a.statistics[stat].bias_bound, b.statistics[stat].bias_bound)
    assert a.spend == b.spend and repr(a.info["summary"]) == repr(b.info["summary"])  # plan_gap may be NaN
    assert not np.array_equal(a.statistics["mean"].value, b.statistics["mean"].value, equal_nan=True)
