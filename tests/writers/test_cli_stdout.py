"""No solver output on stdout: every command that can reach HiGHS, each in a fresh process (HiGHS
prints its banner from C++ at a process's first ``Highs()``), with ``--json`` so that any stray
line breaks the parse. ``dpopt reproduce`` reaches no solver (its figures use closed forms and
Monte Carlo) and is checked for its figure list instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dpopt", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def _records(path: Path) -> Path:
    """A tiny records file: 8 users over 3 H3 cells and 2 hours (values in [0, 100])."""
    rng = np.random.default_rng(7)
    rows = ["user_id,latitude,longitude,timestamp,value"]
    for u in range(8):
        for j in range(12):
            lat, lng = 30.27 + 0.02 * (j % 3), -97.74 + 0.02 * (u % 2)
            rows.append(f"u{u},{lat},{lng},2015-09-06T{12 + j % 2:02d}:{j:02d}:00Z,{rng.uniform(0, 100):.2f}")
    path.write_text("\n".join(rows) + "\n")
    return path


COMMANDS = {
    "clipping-cvxpy-export": ["clipping", "--counts", "m.txt", "--bound", "65", "--epsilon", "1", "--method",
                              "lp", "--backend", "cvxpy", "--export", "model.mps", "--json"],
    "arrays-surrogate-lp": ["arrays", "--counts", "m.txt", "--bound", "65", "--epsilon", "1", "--method",
                            "surrogate", "--solver", "lp", "--json"],
    "suppress-milp": ["suppress", "--occupancy", "occ.csv", "--bound", "65", "--epsilon", "1", "--method",
                      "milp", "--json"],
    "release-budget-milp": ["release", "records.csv", "--privacy", "public-occupancy", "--bound", "100",
                            "--epsilon-total", "10", "--target", "40", "--out", "out", "--json", "--seed", "1"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.slow
def test_stdout_holds_only_the_json(tmp_path, name):
    (tmp_path / "m.txt").write_text("6\n3\n2\n1\n")
    (tmp_path / "occ.csv").write_text("user,grid,count\na,1,5\na,2,1\nb,1,2\nc,2,3\n")
    _records(tmp_path / "records.csv")
    r = _run(COMMANDS[name], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "HiGHS" not in r.stdout and "Copyright" not in r.stdout
    json.loads(r.stdout)
    # stderr is a pipe here, not a terminal: no progress bar
    assert "\r" not in r.stderr and "%|" not in r.stderr and "it/s" not in r.stderr


def test_reproduce_help_lists_every_figure_id(capsys):
    from dpopt.cli import main
    from dpopt.experiments import FIGURES

    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--help"])
    assert exc.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    for fig, spec in FIGURES.items():
        (line,) = [ln for ln in lines if ln.strip().startswith(fig + " ")]
        assert spec.paper in line


SOLVER_LOG = ("Running HiGHS", "Copyright (c)", "Presolving", "Coefficient ranges", "Solving MIP", "Model status")


@pytest.mark.slow
def test_demo_stdout_has_no_solver_log_and_speeds_in_range(tmp_path):
    """``dpopt demo`` solves LPs and MILPs (fresh process): its stdout is the tour only, and every
    value it prints in km/h lies in the data's range [0, U = 120] (an interval half-width beyond U
    is said in words, not printed as a speed)."""
    import re

    r = _run(["demo"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert not [s for s in SOLVER_LOG if s in r.stdout]
    speeds = [float(x) for x in re.findall(r"(?:^|[\s(=±-])(-?\d+(?:\.\d+)?) km/h", r.stdout, re.M)]
    assert speeds
    assert all(0 <= v <= 120 for v in speeds), [v for v in speeds if not 0 <= v <= 120]
