"""`public-occupancy` reads through dpopt.records.contributions too, so the reading flags of the
records layer (--sep, --max-dropped, --time-window) work under it (they were refused before)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpopt.cli import main
from dpopt.records.data import load_austin_sample

ARGS = ("--privacy", "public-occupancy", "--epsilon", "1", "--seed", "3", "--quiet", "--no-map", "--bound", "120")


def _release(tmp_path, capsys, name, path, *flags):
    out = tmp_path / name
    code = main(["release", str(path), *ARGS, "--out", str(out), *flags])
    _, err = capsys.readouterr()
    return code, err, out


@pytest.fixture(scope="module")
def sample():
    return load_austin_sample().iloc[:3000]


def test_separator_gives_the_same_release(tmp_path, capsys, sample):
    sample.to_csv(tmp_path / "comma.csv", index=False)
    sample.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    code, err, a = _release(tmp_path, capsys, "a", tmp_path / "comma.csv")
    assert code == 0, err
    code, err, b = _release(tmp_path, capsys, "b", tmp_path / "semi.csv", "--sep", ";")
    assert code == 0, err
    assert (a / "release.csv").read_bytes() == (b / "release.csv").read_bytes()
    assert len(pd.read_csv(a / "release.csv")) > 0


def test_dropped_share_and_time_window_apply(tmp_path, capsys, sample):
    dirty = sample.copy()
    dirty.loc[dirty.index[:150], "latitude"] = float("nan")  # 5 % invalid rows
    dirty.to_csv(tmp_path / "dirty.csv", index=False)
    code, err, _ = _release(tmp_path, capsys, "refused", tmp_path / "dirty.csv")
    assert code != 0 and "max-dropped" in err
    code, err, _ = _release(tmp_path, capsys, "ok", tmp_path / "dirty.csv", "--max-dropped", "0.1")
    assert code == 0, err
    # a window that excludes every record: all dropped, refused under the default share
    code, err, _ = _release(tmp_path, capsys, "window", tmp_path / "dirty.csv", "--max-dropped", "0.1",
                            "--time-window", "1991-01-01,1992-01-01")
    assert code != 0 and "max-dropped" in err
