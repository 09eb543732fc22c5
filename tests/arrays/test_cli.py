"""`dpopt arrays` command line and the demo section."""

from __future__ import annotations

import io
import json

import pytest

from dpopt.cli.demo import arrays_demo as demo
from dpopt.cli import main
from dpopt.datasets import dataset_path


def test_cli_itms_heuristic_json(capsys):
    path = str(dataset_path("itms_counts.csv"))
    rc = main(["arrays", "--counts", path, "--bound", "65", "--epsilon", "1", "--method", "heuristic", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["length"] == 114 and out["arrays_wrap_around"] == 110
    assert out["arrays_best_fit"] >= 110
    assert out["num_users"] == 217 and out["total_samples"] == 17166
    assert out["status"] == "optimal" and out["excess"] >= 0


@pytest.mark.parametrize("method, solver", [("exact", "milp"), ("surrogate", "lp"), ("median", None)])
def test_cli_methods_text(tmp_path, capsys, method, solver):
    f = tmp_path / "counts.txt"
    f.write_text("m\n5\n1\n3\n3\n8\n")
    argv = ["arrays", "--counts", str(f), "--bound", "2", "--epsilon", "0.5", "--method", method]
    if solver:
        argv += ["--solver", solver]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "length" in text and "error" in text and f"{method}" in text


@pytest.mark.parametrize(
    "extra, content",
    [
        (["--bound", "-1", "--epsilon", "1"], "3\n4\n"),
        (["--bound", "1", "--epsilon", "0"], "3\n4\n"),
        (["--bound", "1", "--epsilon", "1"], "3\n0\n"),
        (["--bound", "1", "--epsilon", "1"], "3\n2.5\n"),
        (["--bound", "1", "--epsilon", "1", "--solver", "lp"], "3\n4\n"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, capsys, extra, content):
    f = tmp_path / "c.txt"
    f.write_text(content)
    assert main(["arrays", "--counts", str(f), *extra]) == 2
    assert "error" in capsys.readouterr().err


def test_cli_missing_file(capsys):
    assert main(["arrays", "--counts", "/nonexistent/c.txt", "--bound", "1", "--epsilon", "1"]) == 2


def test_cli_bad_method_is_argparse_error():
    with pytest.raises(SystemExit) as exc:
        main(["arrays", "--counts", "x", "--bound", "1", "--epsilon", "1", "--method", "best"])
    assert exc.value.code == 2


def test_demo_section():
    buf = io.StringIO()
    demo(buf)
    text = buf.getvalue()
    assert "m = 114" in text and "WrapAround 110 arrays" in text
