"""The typed facts of Measurements (dpopt.measurements.UserInfo, PublicOccupancyInfo) and of
Estimates (EstimatesInfo): the models and the estimators build them, a mapping given by hand is
converted, and the read-only mapping access of the earlier ``info`` dict still reads them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from dpopt.measurements import NODE_COLUMNS, BudgetSpend, Measurements, PublicOccupancyInfo, UserInfo

NODES = pd.DataFrame({c: np.zeros(1, dtype=np.int64) for c in NODE_COLUMNS})


def _m(model: str, info) -> Measurements:
    return Measurements(privacy_model=model, bound=1.0, nodes=NODES, statistics={}, spend=BudgetSpend("epsilon", 1.0),
                        info=info)


def test_a_mapping_is_converted_to_the_models_class_and_unknown_names_are_refused() -> None:
    m = _m("public-occupancy", {"criterion": "worst_case"})
    assert isinstance(m.info, PublicOccupancyInfo) and m.info.criterion == "worst_case" and m.info.plan is None
    u = _m("user", {"k": 2, "c": 3, "granularity": 0.25, "noise": "numpy", "h3_resolution": 7}).info
    assert isinstance(u, UserInfo) and u.lattice == 0.25 and u.clamp is None
    with pytest.raises(ValueError, match="no fields"):
        _m("public-occupancy", {"criterion": "noise", "typo": 1})
    with pytest.raises(ValueError, match="must be a UserInfo"):
        _m("user", PublicOccupancyInfo())


def test_the_mapping_access_reads_the_fields_that_are_set_and_nothing_writes() -> None:
    u = UserInfo(k=2, c=3, lattice=0.5, noise="numpy", h3_resolution=7, clamp=60.0)
    assert u["k"] == 2 and u["granularity"] == 0.5 and u.get("record_cap") is None and "record_cap" not in u
    assert "clamp" in u and dict(u)["clamp"] == 60.0 and len(u) == len(list(u))
    assert UserInfo.from_mapping({**u, "k": 4}).k == 4
    with pytest.raises(KeyError):
        u["record_cap"]
    with pytest.raises(TypeError):
        u["k"] = 3  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.k = 3  # type: ignore[misc]


def test_with_info_replaces_the_measurements_without_changing_the_old_ones() -> None:
    from dpopt.writers import Release
    from dpopt.writers.values import with_info

    m = _m("user", UserInfo(k=1, c=1, lattice=1.0, noise="numpy", h3_resolution=7))
    r = with_info(Release(table=pd.DataFrame(), summary=None, measurements=m), timezone="UTC")
    assert r.measurements.info.timezone == "UTC" and m.info.timezone is None


@pytest.fixture(scope="module")
def releases():
    """Seeded releases of a third of the shipped sample: flat (direct), adaptive (hierarchical),
    optimised (crossed) and public-occupancy with the greedy plan (direct)."""
    from dpopt.datasets import dataset_path, load_austin_sample
    from dpopt.privacy.options import NoiseOptions
    from dpopt.privacy.public_occupancy import PublicOccupancyOptions
    from dpopt.privacy.user.options import UserOptions
    from dpopt.release import Budget, release

    data = load_austin_sample()
    data = data.iloc[: len(data) // 3]
    parts = str(dataset_path("austin_example_partitions.csv"))
    noise, budget = NoiseOptions(noise="numpy", seed=7), Budget(epsilon_total=4.0)
    out = {s: release(data, bound=120, budget=budget, model=UserOptions(partitions=parts, strategy=s), noise=noise)
           for s in ("fixed", "adaptive", "optimised")}
    out["public-occupancy"] = release(data, bound=120, budget=budget, model=PublicOccupancyOptions(plan="greedy"),
                                      noise=noise)
    return out


def test_every_estimator_returns_the_typed_facts(releases) -> None:
    from dpopt.estimation import estimate
    from dpopt.measurements import EstimatesInfo

    flat = releases["fixed"]
    assert flat.estimates.method == "direct"  # the user model's direct estimate has no facts of its own
    assert isinstance(flat.estimates.info, EstimatesInfo) and len(flat.estimates.info) == 0
    pooled = estimate(flat.measurements, method="pooled")
    assert isinstance(pooled.info, EstimatesInfo) and set(pooled.info.pooling) == {"mean0", "var0", "tau2_mean",
                                                                                   "tau2_var"}
    assert flat.summary.pooling == pooled.info.pooling and pooled.info["pooling"] is pooled.info.pooling
    hier = releases["adaptive"].estimates
    assert hier.method == "hierarchical" and isinstance(hier.info, EstimatesInfo)
    assert hier.info.target > 0 and hier.info.nodes_released > 0 and hier.info.bias_allowance >= 0
    assert isinstance(hier.info.interval, str) and isinstance(hier.info.tau2_by_level, list)
    assert hier.info.components is None and "components" not in hier.info
    crossed = releases["optimised"].estimates
    assert crossed.method == "crossed" and isinstance(crossed.info, EstimatesInfo)
    assert isinstance(crossed.info.components, dict) and isinstance(crossed.info.fit, str)
    assert np.isnan(crossed.info.target) and crossed.info["components"] is crossed.info.components
    po = releases["public-occupancy"].estimates
    assert po.method == "direct" and isinstance(po.info, EstimatesInfo)
    assert po.info.summary["criterion"] == "noise" and set(po.info.error_bounds) == {
        "mean_noise", "mean_worst_case", "variance_noise", "variance_worst_case"}
    assert po.info["error_bounds"] is po.info.error_bounds and po.info.get("pooling") is None


def test_a_mapping_given_to_estimates_is_converted_and_unknown_names_are_refused(releases) -> None:
    from dpopt.measurements import Estimates, EstimatesInfo

    est = releases["adaptive"].estimates
    again = Estimates(table=est.table, answers=est.answers, confidence=est.confidence, method=est.method,
                      measurements=est.measurements, info={**est.info})
    assert isinstance(again.info, EstimatesInfo) and again.info.target == est.info.target
    assert dict(again.info) == dict(est.info)
    empty = Estimates(table=est.table, answers=est.answers, confidence=0.9, method="direct",
                      measurements=est.measurements, info={})
    assert isinstance(empty.info, EstimatesInfo) and len(empty.info) == 0 and empty.info.summary is None
    assert dataclasses.replace(est, table=est.table).info is est.info
    with pytest.raises(ValueError, match="no fields"):
        Estimates(table=est.table, answers=est.answers, confidence=0.9, method="direct",
                  measurements=est.measurements, info={"target": 1.0, "typo": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.info.target = 3.0  # type: ignore[misc]
