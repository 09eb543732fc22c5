"""`dpopt suppress` end to end."""

from __future__ import annotations

import json

import pytest

from dpopt.calculus import grid_errors
from dpopt.cli import main
from dpopt.cli.suppress import read_occupancy

from ._reference import brute_force


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
    occ = read_occupancy(occ_csv)
    E = float(grid_errors(occ, 1.0, 1.0).max())
    Kb, sb, _ = brute_force(occ, 1.0, 1.0, E)
    if method == "frontier":
        assert data["points"][0]["K"] == Kb and data["points"][-1]["K"] == 3
        assert all(p["status"] == "optimal" for p in data["points"])
    else:
        assert data["method"] == method and Kb <= data["degradation"] <= 3
        assert all(len(p) == 2 for p in data["suppressed"])
        assert data["status"] == ("optimal" if method == "milp" else "heuristic")
        if method == "milp":
            assert (data["degradation"], data["suppressed_samples"]) == (Kb, sb)


def test_cli_text(occ_csv, capsys):
    assert main(["suppress", "--occupancy", str(occ_csv), "-U", "1", "-e", "1"]) == 0
    assert "degradation" in capsys.readouterr().out


def test_cli_bad_file(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("u,g\n1,2\n")
    assert main(["suppress", "--occupancy", str(p), "-U", "1", "-e", "1"]) == 2
    assert "user, grid, count" in capsys.readouterr().err
    assert main(["suppress", "--occupancy", str(tmp_path / "none.csv"), "-U", "1", "-e", "1"]) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--time-limit", "-1"], "--time-limit"), (["--error-bound", "0"], "error_bound"),
     (["--method", "anneal"], "method")],
)
def test_cli_bad_options(occ_csv, capsys, extra, message):
    argv = ["suppress", "--occupancy", str(occ_csv), "-U", "1", "-e", "1", *extra]
    if extra[0] == "--method":  # argparse rejects the choice itself
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    else:
        assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_decomposition_with_progress(occ_csv, capsys):
    code = main(["suppress", "--occupancy", str(occ_csv), "-U", "1", "-e", "1", "--strategy",
                 "decomposition", "--progress", "--json"])
    assert code == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    occ = read_occupancy(occ_csv)
    Kb, sb, _ = brute_force(occ, 1.0, 1.0, float(grid_errors(occ, 1.0, 1.0).max()))
    assert data["status"] == "optimal" and data["lower_bound"] == data["degradation"] == Kb
    assert "suppress" in out.err  # the bar


def test_labels_that_differ_as_written_stay_distinct(tmp_path):
    """Labels are integers only where every one is written as its integer; else the text as written:
    "01" and "1" are two users (read as numbers they were one, K = 2 instead of 1), and "1e5" and
    "100000" two grids."""
    path = tmp_path / "occ.csv"
    path.write_text("user,grid,count\n01,g1,3\n1,g2,3\n2,g1,1\n3,g2,2\n")
    occ = read_occupancy(path)
    assert occ.degradation == 1 and len(occ.users) == 4 and "01" in occ.users.tolist()
    path.write_text("user,grid,count\n7,1e5,3\n7,100000,3\n")
    assert read_occupancy(path).degradation == 2
    path.write_text("user,grid,count\n7,1,3\n8,2,3\n")
    assert read_occupancy(path).users.tolist() == [7, 8]  # canonical integers stay numbers


@pytest.mark.parametrize("method, flag", [("greedy", ["--time-limit", "3"]), ("greedy", ["--strategy", "milp"]),
                                          ("greedy", ["--no-tie-break"]), ("frontier", ["--list"]),
                                          ("frontier", ["--skip-min-error-grid"]), ("milp", ["--skip-min-error-grid"])])
def test_a_flag_the_method_does_not_read_is_refused(tmp_path, capsys, method, flag):
    """Each method's idle flags were silently ignored (greedy reads no solver option, the frontier
    lists no pairs): now one line naming the flag, exit 2."""
    path = tmp_path / "occ.csv"
    path.write_text("user,grid,count\n1,g1,3\n1,g2,3\n2,g1,1\n")
    code = main(["suppress", "--occupancy", str(path), "--bound", "10", "--epsilon", "1", "--method", method, *flag])
    err = capsys.readouterr().err
    assert code == 2 and f"`{flag[0]}` does nothing with --method {method}" in err
