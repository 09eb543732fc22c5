"""The foundation's command line: `dpopt errors`, `dpopt demo`, error reporting."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import dpopt
from dpopt.cli import main


@pytest.fixture
def files(tmp_path):
    c = tmp_path / "counts.txt"
    r = tmp_path / "retained.csv"
    c.write_text("m\n6\n3\n2\n1\n")
    r.write_text("3,3,2,1\n")
    return c, r


def test_errors_json_matches_library(files, capsys):
    c, r = files
    assert main(["errors", "--counts", str(c), "--retained", str(r), "--bound", "65", "--epsilon", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g, m = [3, 3, 2, 1], [6, 3, 2, 1]
    assert out["variance_bias"] == pytest.approx(dpopt.variance_bias(g, m, 65))
    assert out["variance_sensitivity"] == pytest.approx(dpopt.variance_sensitivity(g, 65))
    expect = (dpopt.mean_bias(g, m, 65) + dpopt.variance_bias(g, m, 65)
              + 4 * dpopt.mean_sensitivity(g, 65) + 4 * dpopt.variance_sensitivity(g, 65))
    assert out["error"] == pytest.approx(expect)


def test_errors_baseline_when_no_retained(files, capsys):
    c, _ = files
    assert main(["errors", "--counts", str(c), "--bound", "1", "--epsilon", "1"]) == 0
    text = capsys.readouterr().out
    assert "mean_bias" in text and "variance_sensitivity" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bound", "-1", "--epsilon", "1"], "`bound` must be a positive finite number"),
        (["--bound", "1", "--epsilon", "0"], "`epsilon` must be a positive finite number"),
        (["--bound", "1", "--epsilon", "nan"], "`epsilon` must be a positive finite number"),
    ],
)
def test_errors_bad_flags_exit_2_with_one_line(files, capsys, argv, message):
    c, _ = files
    assert main(["errors", "--counts", str(c), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_errors_bad_files(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("3\nx\n")
    assert main(["errors", "--counts", str(bad), "--bound", "1", "--epsilon", "1"]) == 2
    assert "not a number" in capsys.readouterr().err
    neg = tmp_path / "neg.txt"
    neg.write_text("3\n-1\n")
    assert main(["errors", "--counts", str(neg), "--bound", "1", "--epsilon", "1"]) == 2
    assert "`counts` must hold integers >= 1" in capsys.readouterr().err
    assert main(["errors", "--counts", str(tmp_path / "missing.txt"), "--bound", "1", "--epsilon", "1"]) == 2


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "dpopt", "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == f"dpopt {dpopt.__version__}"
