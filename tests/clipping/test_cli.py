"""`dpopt clipping` command line and the demo section."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from dpopt.cli import main
from dpopt.clipping import optimal_clipping
from dpopt.cli.demo import clipping_demo as demo

from .conftest import ANCHOR_ATOL, geometric


@pytest.fixture
def counts_file(tmp_path):
    p = tmp_path / "counts.txt"
    p.write_text("m\n" + "\n".join(map(str, geometric(6))) + "\n")
    return p


def test_closed_form_json(counts_file, capsys) -> None:
    assert main(["clipping", "--counts", str(counts_file), "--bound", "65", "--epsilon", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == pytest.approx(10.44643, abs=ANCHOR_ATOL)
    assert out["threshold"] == 1040 and out["certificate_ok"] is True and out["users"] == 127


@pytest.mark.parametrize("formulation", ["per-user", "per-sample"])
@pytest.mark.parametrize("backend", ["highspy", "cvxpy"])
def test_lp_and_export(counts_file, tmp_path, capsys, formulation: str, backend: str) -> None:
    target = tmp_path / "model.mps"
    argv = ["clipping", "--counts", str(counts_file), "--bound", "65", "--epsilon", "1", "--method", "lp",
            "--formulation", formulation, "--backend", backend, "--export", str(target), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal" and out["error"] == pytest.approx(6.96429, abs=ANCHOR_ATOL)
    assert target.exists() and "COLUMNS" in target.read_text()


def test_dim_and_per_user_text(tmp_path, capsys) -> None:
    p = tmp_path / "c.csv"
    p.write_text("3,1,1,1,1\n")
    assert main(["clipping", "--counts", str(p), "--bound", "65", "--epsilon", "2", "--dim", "2",
                 "--per-user", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = optimal_clipping([3, 1, 1, 1, 1], 65, 2, dim=2)
    assert out["error"] == pytest.approx(plan.error)
    np.testing.assert_allclose(out["upper"], plan.upper)
    assert main(["clipping", "--counts", str(p), "--bound", "65", "--epsilon", "2"]) == 0
    assert "threshold" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--epsilon", "0"], "`epsilon` must be a positive finite number"),
        (["--epsilon", "1", "--dim", "0"], "`dim` must be an integer >= 1"),
        (["--epsilon", "1", "--export", "model.txt"], "--export"),
        (["--epsilon", "1", "--export", "/no/such/dir/model.mps"], "--export"),
        (["--epsilon", "1", "--method", "lp", "--time-limit", "-1"], "--time-limit"),
    ],
)
def test_bad_arguments_exit_2(counts_file, capsys, extra, message) -> None:
    assert main(["clipping", "--counts", str(counts_file), "--bound", "65", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1  # one line, no usage dump


def test_demo_prints_the_worked_example() -> None:
    buf = io.StringIO()
    demo(buf)
    text = buf.getvalue()
    assert "10.4464" in text and "ok = True" in text


def test_a_solver_log_on_stdout_is_refused_with_json(counts_file, capsys):
    """``--solver-option output_flag=true --json`` printed HiGHS's log before the JSON on stdout, so
    stdout was no JSON (a fuzz run); the log goes to a file with log_to_console=false."""
    base = ["clipping", "--counts", str(counts_file), "--bound", "65", "--epsilon", "1", "--method", "lp", "--json",
            "--solver-option", "output_flag=true"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "log_to_console=false" in err
    log = counts_file.parent / "highs.log"
    assert main([*base, "--solver-option", "log_to_console=false", "--solver-option", f"log_file={log}"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "optimal" and log.stat().st_size > 0
