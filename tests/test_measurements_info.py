"""The typed facts of Measurements (dpopt.measurements.UserInfo, PublicOccupancyInfo): the models
build them, a mapping given by hand is converted, and the read-only mapping access of the earlier
``info`` dict still reads them."""

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
    from dpopt.writers.user import UserRelease
    from dpopt.writers.values import with_info

    m = _m("user", UserInfo(k=1, c=1, lattice=1.0, noise="numpy", h3_resolution=7))
    r = with_info(UserRelease(table=pd.DataFrame(), summary=None, measurements=m), timezone="UTC")
    assert r.measurements.info.timezone == "UTC" and m.info.timezone is None
