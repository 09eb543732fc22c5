"""``dpopt reproduce`` end to end (small run counts)."""

from __future__ import annotations

import pandas as pd

from dpopt.cli import main
from dpopt.experiments import COLUMNS


def test_reproduce_writes_csv_png_notes(tmp_path, capsys):
    rc = main(["reproduce", "003-fig1", "--out", str(tmp_path), "--runs", "100", "--seed", "3", "--quiet",
               "--param", "epsilons=[0.5, 2.0]"])
    assert rc == 0
    for ext in ("csv", "png", "notes.md"):
        assert (tmp_path / f"003-fig1.{ext}").is_file()
    frame = pd.read_csv(tmp_path / "003-fig1.csv")
    assert list(frame.columns) == COLUMNS and len(frame) == 12
    assert "003-fig1" in capsys.readouterr().out


def test_reproduce_unknown_figure_is_a_clean_error(tmp_path, capsys):
    rc = main(["reproduce", "004-fig1", "--out", str(tmp_path)])
    assert rc == 2
    assert "FIGURE" in capsys.readouterr().err


def test_reproduce_bad_param(tmp_path, capsys):
    rc = main(["reproduce", "000-fig1", "--out", str(tmp_path), "--param", "collection"])
    assert rc == 2
    assert "--param" in capsys.readouterr().err


def test_reproduce_family_writes_every_matching_figure(tmp_path, capsys):
    from dpopt.experiments.outputs import reproduce_family

    pngs = reproduce_family("003-fig5", tmp_path)  # a prefix matching one deterministic figure
    assert [p.name for p in pngs] == ["003-fig5.png"]
    assert (tmp_path / "003-fig5.csv").is_file() and (tmp_path / "003-fig5.notes.md").is_file()
    assert "003-fig5" in capsys.readouterr().out
