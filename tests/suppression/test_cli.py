"""`dpopt suppress` end to end."""

from __future__ import annotations

import json

import pytest

from dpopt.cli import main


@pytest.fixture
def occ_csv(tmp_path):
    p = tmp_path / "occ.csv"
    p.write_text("user,grid,count\na,g1,5\na,g2,4\na,g3,3\nb,g1,2\nc,g2,3\nd,g3,4\ne,g1,1\ne,g2,1\n")
    return p


@pytest.mark.parametrize("method", ["greedy", "milp", "frontier"])
def test_cli_methods_json(occ_csv, capsys, method):
    code = main(["suppress", "--occupancy", str(occ_csv), "--bound", "1", "--epsilon", "1",
                 "--method", method, "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    if method == "frontier":
        assert data["points"][-1]["K"] == 3
    else:
        assert data["method"] == method and data["degradation"] <= 3
        assert all(len(p) == 2 for p in data["suppressed"])


def test_cli_text(occ_csv, capsys):
    assert main(["suppress", "--occupancy", str(occ_csv), "-U", "1", "-e", "1"]) == 0
    assert "degradation" in capsys.readouterr().out


def test_cli_bad_file(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("u,g\n1,2\n")
    assert main(["suppress", "--occupancy", str(p), "-U", "1", "-e", "1"]) == 2
    assert "user, grid, count" in capsys.readouterr().err
    assert main(["suppress", "--occupancy", str(tmp_path / "none.csv"), "-U", "1", "-e", "1"]) == 2
