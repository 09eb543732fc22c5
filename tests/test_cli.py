"""The foundation's command line: `dpopt errors`, `dpopt demo`, error reporting."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
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


def test_errors_refuses_a_headerless_table_and_an_overflowing_noise(tmp_path, capsys):
    """Rows ``user,count`` without a header were read as one column of four users; an ε whose noise
    2(U + U²/4)/ε overflows printed ``inf``. Both are one line naming the argument (exit 2)."""
    table = tmp_path / "table.csv"
    table.write_text("1,5\n2,7\n")
    assert main(["errors", "--counts", str(table), "--bound", "10", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "`counts`" in err and "2 columns without a header" in err and "Traceback" not in err
    one_line = tmp_path / "one_line.csv"
    one_line.write_text("5,7\n")  # one line of numbers is still a comma-separated list
    assert main(["errors", "--counts", str(one_line), "--bound", "10", "--epsilon", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["users"] == 2
    plain = tmp_path / "plain.txt"
    plain.write_text("5\n7\n")
    assert main(["errors", "--counts", str(plain), "--bound", "1e100", "--epsilon", "1e-300"]) == 2
    err = capsys.readouterr().err
    assert "`epsilon` is too small" in err and "Traceback" not in err
    assert main(["errors", "--counts", str(plain), "--bound", "1e100", "--epsilon", "1e-90", "--json"]) == 0
    assert np.isfinite(json.loads(capsys.readouterr().out)["error"])


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "dpopt", "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == f"dpopt {dpopt.__version__}"


def test_top_level_help_lists_every_command_with_its_own_help_line():
    """`dpopt --help` imports no command module; its lines are the commands' own help strings."""
    import argparse

    from dpopt import cli

    full = cli.build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    own = {c.dest: c.help for c in sub._choices_actions}
    assert own == cli.HELP and set(cli.HELP) == set(cli.COMMANDS)


def test_counts_files_may_be_a_csv_with_a_named_column(tmp_path, capsys):
    import json

    from dpopt.cli import main

    plain = tmp_path / "plain.txt"
    plain.write_text("3\n7\n2\n9\n")
    csv = tmp_path / "users.csv"
    csv.write_text("user,count,other\na,3,100\nb,7,100\nc,2,100\nd,9,100\n")
    named = tmp_path / "named.csv"
    named.write_text("id,m_l\na,3\nb,7\nc,2\nd,9\n")
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text("user;count\na;3\nb;7\nc;2\nd;9\n")
    tabs = tmp_path / "tabs.tsv"
    tabs.write_text("user\tcount\na\t3\nb\t7\nc\t2\nd\t9\n")
    outs = []
    for path, extra in ((plain, []), (csv, []), (named, ["--counts-column", "m_l"]), (semicolons, []), (tabs, [])):
        assert main(["clipping", "--counts", str(path), "--bound", "1", "--epsilon", "1", "--json", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] == outs[2] == outs[3] == outs[4] and outs[0]["samples"] == 21
    assert main(["arrays", "--counts", str(named), "--bound", "1", "--epsilon", "1"]) == 2
    assert "no column" in capsys.readouterr().err
    assert main(["clipping", "--counts", str(csv), "--bound", "1", "--epsilon", "1", "--solver-option", "bad"]) == 2


def test_solver_options_and_time_limit_are_parsed_alike_in_every_command(tmp_path, capsys):
    import argparse

    from dpopt.cli.common import solver_options

    ns = argparse.Namespace(time_limit=5.0, solver_option=["presolve=off", "mip_rel_gap=0.01", "threads=2",
                                                           "mip_detect_symmetry=false"])
    assert solver_options(ns) == {"presolve": "off", "mip_rel_gap": 0.01, "threads": 2, "mip_detect_symmetry": False}
    assert solver_options(argparse.Namespace(time_limit=None, solver_option=[])) is None


def test_demo_skips_a_section_whose_packages_are_missing(monkeypatch) -> None:
    """Without the ``release`` extra (no pandas) the array-length section, which reads the ITMS data
    through dpopt.datasets, prints "(not part of this build)" instead of a traceback."""
    import importlib
    import io

    from dpopt.cli import demo as demo_module

    real = importlib.import_module

    def without_datasets(name, *args, **kwargs):
        if name in ("dpopt.datasets", "dpopt.release"):
            raise ModuleNotFoundError(f"No module named 'pandas' (while importing {name})")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(demo_module.importlib, "import_module", without_datasets)
    called = []
    monkeypatch.setattr(demo_module, "SECTIONS", [(t, p, (lambda out, t=t: called.append(t)))
                                                  for t, p, _ in demo_module.SECTIONS])
    out = io.StringIO()
    demo_module.demo(out)
    text = out.getvalue()
    assert text.count("(not part of this build)") == 2
    assert not any(t.startswith("Array length") or t.startswith("Release") for t in called)


def test_a_negative_value_in_exponent_form_is_read_as_the_flags_value(capsys):
    """`--lower -1e6` was taken by argparse for an unknown flag ("expected one argument", the usage
    text); it is the value of --lower, as `--lower=-1e6` and `--lower -1000000` already were."""
    assert main(["release", "--example", "--lower", "-1e3"]) == 2
    err = capsys.readouterr().err
    assert "`--lower` needs `--upper`" in err and "-1000.0" in err and "expected one argument" not in err


@pytest.mark.parametrize("flag, value", [("--slot", "-1h"), ("--slot", "-5min")])
def test_a_negative_duration_is_read_as_the_flags_value(capsys, tmp_path, flag, value):
    """`--slot -1h` was taken by argparse for an unknown flag (its usage text, "expected one
    argument"); the slot's own check now names it in one line."""
    records, parts = tmp_path / "r.csv", tmp_path / "p.csv"
    records.write_text("user_id,latitude,longitude,timestamp,value\nu1,30.27,-97.74,2024-01-01T10:00:00Z,3\n")
    parts.write_text("cell,slot\n872664c1affffff,2024-01-01T10:00:00Z\n")
    assert main(["release", str(records), "--privacy", "user", "--bound", "10", "--epsilon-total", "1",
                 "--partitions", str(parts), flag, value, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"`{flag}` must be" in err[0] and repr(value) in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, text", [
    (["release", "x.csv", "--lower", "abc", "--upper", "50"], "argument --lower: invalid float value: 'abc'"),
    (["release", "x.csv", "--privacy", "bogus"], "argument --privacy: invalid choice: 'bogus'"),
    (["relase"], "invalid choice: 'relase'")])
def test_an_argparse_refusal_is_one_line(capsys, argv, text):
    """argparse's own refusals (a value of the wrong type, a choice not offered) printed its usage block
    above the error line; like every other refusal of the CLI they are one line, exit 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and text in err and "usage" not in err, err
