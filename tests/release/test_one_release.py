"""One result, one release.csv schema, one writer for both privacy models (dpopt.writers.result)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.release import (Budget, NoiseOptions, PerGridBudget, PublicOccupancyOptions, Release, UserOptions,
                           release, write_release)
from dpopt.writers import ANSWER_COLUMNS, RELEASE_COLUMNS
from dpopt.writers.report_md import report_markdown

SECTIONS = ["## Privacy model", "## Privacy accounting", "## Accuracy", "## Files"]


def _listed(records: pd.DataFrame) -> pd.DataFrame:
    import h3

    cells = [h3.latlng_to_cell(a, b, 7) for a, b in zip(records.latitude, records.longitude)]
    slots = records.timestamp.dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return pd.DataFrame({"cell": cells, "slot": slots}).drop_duplicates().reset_index(drop=True)


def _releases(records: pd.DataFrame) -> dict[str, Release]:
    listed = _listed(records)
    return {
        "user engine": release(records, bound=100, budget=Budget(epsilon_total=5.0),
                               model=UserOptions(partitions=listed), noise=NoiseOptions(seed=1)),
        "user fixed": release(records, bound=100, budget=Budget(epsilon_total=5.0),
                              model=UserOptions(partitions=listed, strategy="fixed", bounds=(2, 3)),
                              noise=NoiseOptions(seed=1)),
        "public-occupancy": release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                                    noise=NoiseOptions(seed=1)),
        "public-occupancy hierarchy": release(records, bound=100, budget=Budget(epsilon_total=200.0),
                                              model=PublicOccupancyOptions(plan="hierarchy", time_limit=20.0),
                                              noise=NoiseOptions(seed=1)),
    }


@pytest.fixture(scope="module")
def releases() -> dict[str, Release]:
    from .conftest import random_records

    return _releases(random_records(np.random.default_rng(5)))


def test_every_release_is_one_type_with_the_contract_columns_first(releases):
    for name, r in releases.items():
        assert type(r) is Release, name
        assert list(r.table.columns[:len(RELEASE_COLUMNS)]) == RELEASE_COLUMNS, name
        assert list(r.answers.columns[:len(ANSWER_COLUMNS)]) == ANSWER_COLUMNS, name
        assert re.fullmatch(r"Release\(privacy_model='[a-z-]+', rows=\d+, released=\d+\)", repr(r))
        # a withheld variance is blank with its bound and says why; a shown one has no reason
        t = r.table
        shown = t["variance_released"].to_numpy(bool)
        assert t.loc[~shown, ["variance", "variance_error_bound"]].isna().all().all(), name
        assert (t.loc[~shown & t["released"].to_numpy(bool), "variance_withheld_reason"].astype(str) != "").all()
        # slot_end is after slot; h3_resolution is the cell's own
        import h3

        assert all(h3.get_resolution(c) == res for c, res in zip(t["cell"], t["h3_resolution"])), name
        assert (pd.to_datetime(t["slot_end"]) > pd.to_datetime(t["slot"])).all(), name


def test_every_answer_points_at_a_published_row(releases):
    for name, r in releases.items():
        rows = set(zip(r.table["cell"], r.table["slot"], r.table["slot_end"], r.table["h3_resolution"]))
        a = r.answers[r.answers["node_cell"].astype(str) != ""]
        assert len(a), name
        for key in zip(a["node_cell"], a["node_slot"], a["node_slot_end"], a["node_h3_resolution"]):
            assert key in rows, (name, key)
    flat = releases["public-occupancy"]
    assert (flat.answers["node_cell"] == flat.answers["cell"]).all()  # a flat release answers a grid by itself


def test_one_report_writer_one_order_of_sections(releases):
    for name, r in releases.items():
        md = report_markdown(r)
        at = [md.index(s) for s in SECTIONS]
        assert at == sorted(at), name
        assert md.startswith(f"# dpopt release report (privacy model: {r.privacy_model}")
        assert "| cell | res | slot | slot end | repeats | mean |" in md, name


def test_one_writer_for_both_models(releases, tmp_path):
    for i, (name, r) in enumerate(releases.items()):
        paths = write_release(r, tmp_path / f"o{i}", make_map=False)
        assert {"release", "answers", "summary", "report", "diagnostics"} <= set(paths), name
        back = pd.read_csv(paths["release"])
        assert list(back.columns[:len(RELEASE_COLUMNS)]) == RELEASE_COLUMNS
        assert len(back) == len(r.table)
    with pytest.raises(DpoptInputError, match="`result` must be a dpopt Release"):
        write_release({"table": None}, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_the_earlier_names_warn_and_are_the_one_result_and_writer():
    import dpopt.release as front

    for old, new in (("UserRelease", Release), ("ReleaseResult", Release), ("write_report", write_release),
                     ("write_user_release", write_release)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(front, old) is new
        assert any(issubclass(w.category, DeprecationWarning) and "0.5" in str(w.message) for w in caught), old


def test_the_occupancy_pairs_belong_to_the_public_occupancy_model(releases):
    with pytest.raises(DpoptInputError, match="no occupancy plan"):
        releases["user engine"].suppressed_frame()
    assert len(releases["public-occupancy"].gamma()) > 0


def test_the_report_names_the_clock_the_slots_are_cut_on():
    from dpopt.release import InputOptions, load_austin_sample

    frame = load_austin_sample().head(3000)
    for zone, word in ((None, "(1h UTC slot)"), ("America/Chicago", "(1h America/Chicago slot)")):
        r = release(frame, bound=120, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                    io=InputOptions(timezone=zone), noise=NoiseOptions(seed=1))
        assert word in report_markdown(r), zone
