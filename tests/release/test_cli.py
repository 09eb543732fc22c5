"""`dpopt release`: runs on the embedded example; bad flags and records give one clear line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main


def _run(capsys, *argv):
    """`dpopt release` under seed 002's model (the tests of the user model say --privacy user)."""
    if "--privacy" not in argv:
        argv = (*argv, "--privacy", "public-occupancy")
    code = main(["release", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_example_spends_a_total_budget_by_default(tmp_path, capsys, monkeypatch):
    """--example runs the budget planner at the total ε of data.EXAMPLE_EPSILON_TOTAL."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "--example", "--quiet", "--json", "--seed", "3", "--no-map", "--time-limit", "5")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["epsilon"] is None and payload["mechanism"] == "laplace"
    assert payload["plan"].startswith("budget") and "10 in total" in payload["budget"]
    assert 0 < payload["epsilon_total"] <= 10.0 and payload["released_grids"] > 0
    summary = json.loads((tmp_path / "dpopt-release" / "summary.json").read_text())
    assert summary["budget_mode"] == "total" and summary["privacy_model"] == "public-occupancy"
    # --json prints summary.json itself (models/release.md), with where the folder and its files are
    assert {k: v for k, v in payload.items() if k not in ("out", "files", "diagnostics")} == summary
    assert "summary.json" in payload["files"] and payload["out"] == str(tmp_path / "dpopt-release")


@pytest.mark.slow
def test_example_in_seed_002_per_grid_mode(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "--example", "--epsilon", "1", "--quiet", "--json", "--seed", "3")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["users"] == 146 and payload["epsilon"] == 1.0
    assert payload["epsilon_total"] == payload["degradation"] * 1.0
    files = {p.name for p in (tmp_path / "dpopt-release").iterdir()}
    assert {"release.csv", "summary.json", "map.png", "report.md"} <= files


def test_records_file_with_mapped_columns(tmp_path, capsys, tiny_records):
    df = tiny_records.rename(columns={"user_id": "vehicle", "value": "speed"})
    df.loc[0, "speed"] = 500.0
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)
    code, out, err = _run(capsys, str(path), "--bound", "100", "--epsilon", "2", "--out", str(tmp_path / "o"),
                          "--user-col", "vehicle", "--value-col", "speed", "--plan", "greedy",
                          "--out-of-range", "drop", "--quiet", "--no-map", "--json", "--slot", "30min",
                          "--max-dropped", "0.2")  # 1 of 8 dropped: above the default share
    assert code == 0, err
    payload = json.loads(out)
    assert payload["dropped_records"] == 1 and payload["plan"] == "greedy"
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert {k: v for k, v in payload.items() if k not in ("out", "files", "diagnostics")} == summary
    table = pd.read_csv(tmp_path / "o" / "release.csv")
    assert table["n_records"].sum() == 7
    assert set(table["slot"]) == {"2020-01-01T10:00:00Z", "2020-01-01T10:30:00Z", "2020-01-01T11:00:00Z"}


@pytest.mark.parametrize(
    "argv,match",
    [
        ([], "RECORDS is required"),
        (["{csv}", "--epsilon", "1"], "`--bound` is required"),
        (["{csv}", "--bound", "100"], "a privacy budget is required"),
        (["{csv}", "--bound", "-3", "--epsilon", "1"], "`--bound` must be a positive finite number"),
        (["{csv}", "--bound", "100", "--epsilon", "0"], "`--epsilon` must be a positive finite number"),
        (["{dir}/missing.csv", "--bound", "1", "--epsilon", "1"], "not found"),
        (["{csv}", "--bound", "100", "--epsilon", "1", "--user-col", "who"], r"lacks the column\(s\) user_id -> 'who'"),
        (["{csv}", "--bound", "10", "--epsilon", "1", "--out-of-range", "error"], r"values outside \[0, bound\]"),
        (["{csv}", "--bound", "100", "--epsilon", "1", "--slot", "often"], "`--slot` must be a duration"),
        (["{csv}", "--bound", "100", "--epsilon", "1", "--h3-resolution", "20"], "`--h3-resolution` must be"),
        (["{csv}", "--bound", "100", "--epsilon", "1", "--scheduler", "tcp://x:1"], "needs `--backend dask`"),
        (["{csv}", "--example"], "either RECORDS or --example"),
        (["{csv}", "--bound", "100", "--epsilon", "1", "--out", "{csv}"], "must be a directory path"),
        (["{junk}", "--bound", "100", "--epsilon", "1"], "not a readable CSV|lacks the column"),
        # a check inside the release names the flag the user typed, not the Python argument
        (["{csv}", "--bound", "100", "--privacy", "user", "--epsilon-total", "1", "--partitions", "{badlist}"],
         r"^dpopt release: error: `--partitions` must have columns 'cell' and 'slot'.*its columns: 'h3', 'hour'"),
    ],
)
def test_bad_input_one_line_no_traceback(tmp_path, capsys, tiny_records, argv, match):
    csv = tmp_path / "r.csv"
    tiny_records.to_csv(csv, index=False)
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(256)) * 4)
    badlist = tmp_path / "list.csv"
    pd.DataFrame({"h3": ["871f24ac4ffffff"], "hour": ["2020-01-01T10:00:00Z"]}).to_csv(badlist, index=False)
    argv = [a.format(csv=csv, dir=tmp_path, junk=junk, badlist=badlist) for a in argv]
    code, out, err = _run(capsys, *argv, "--quiet", "--no-map", "--out", str(tmp_path / "o")) if "--out" not in argv \
        else _run(capsys, *argv, "--quiet", "--no-map")
    assert code == 2
    assert "Traceback" not in err
    assert err.startswith("dpopt release: error:")
    import re

    assert re.search(match, err), err


@pytest.mark.parametrize("argv", [["--bound", "abc"], ["--plan", "best"], ["--h3-resolution", "x"]])
def test_bad_flags_argparse(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["release", "--example", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err


def test_missing_fields_are_counted_in_output(tmp_path, capsys, tiny_records):
    df = tiny_records.copy()
    df.loc[0, "latitude"] = np.nan
    df.loc[1, "timestamp"] = "yesterday"
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)
    code, out, err = _run(capsys, str(path), "--bound", "100", "--epsilon", "1", "--out", str(tmp_path / "o"),
                          "--quiet", "--no-map", "--json", "--max-dropped", "0.3")  # 2 of 8 dropped
    assert code == 0, err
    assert json.loads(out)["dropped_records"] == 2
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["ingest"]["missing"]["latitude"] == 1 and summary["ingest"]["missing"]["timestamp"] == 1


def test_drop_by_value_is_flagged_in_report(tmp_path, capsys, tiny_records):
    """--out-of-range drop changes the public counts by value: report.md says so; clip does not."""
    df = tiny_records.copy()
    df.loc[0, "value"] = 500.0
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)
    for policy, flagged in (("drop", True), ("clip", False)):
        out_dir = tmp_path / policy
        code, _, err = _run(capsys, str(path), "--bound", "100", "--epsilon", "1", "--out", str(out_dir),
                            "--out-of-range", policy, "--quiet", "--no-map", "--max-dropped", "0.2")
        assert code == 0, err
        assert ("caveat" in (out_dir / "report.md").read_text()) is flagged


def test_the_example_sentence_reads_the_flat_release_too(tmp_path, capsys):
    """The flat (`--strategy fixed`) user release has no answers table: the example's sentence reads
    the grid's own row instead of ending in a traceback."""
    code = main(["release", "--example", "--privacy", "user", "--strategy", "fixed", "--seed", "5", "--no-map",
                 "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Congress Ave at 6th St" in out + err and "Traceback" not in out + err
