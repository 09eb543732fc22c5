"""Release hardening through the public doors (``dpopt.cli.main`` and :func:`dpopt.release.release`):
the published folder holds only published files, ``--overwrite`` never touches an input, and under
``user`` neither the exit code nor any message depends on records that cleaning drops.

Each test fails on the code before the fix: diagnostics/ was written inside --out, --overwrite
replaced a folder holding the input, and --max-dropped refused a release by a private count.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.release import Budget, NoiseOptions, UserOptions, release, write_release
from dpopt.privacy.contributions import InputOptions
from dpopt.writers.folder import DIAGNOSTIC_FILES, PUBLISHED_FILES, diagnostics_folder

U = 50.0
T0 = pd.Timestamp("2020-01-01T10:00:00Z")
LATS = 30.20 + 0.05 * np.arange(4)  # four res-7 cells x two hourly slots


def _iso(seconds: np.ndarray, t0: pd.Timestamp = T0) -> list[str]:
    return list((t0 + pd.to_timedelta(seconds, unit="s")).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _base(seed: int = 0, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user_id": np.char.add("u", rng.integers(0, 40, n).astype(str)),
                         "latitude": LATS[rng.integers(0, 4, n)], "longitude": -97.75,
                         "timestamp": _iso(rng.integers(0, 7200, n)), "value": rng.uniform(0, U, n).round(3)})


def _invalid_user(n: int = 60) -> pd.DataFrame:
    """A user whose every record is invalid: bad latitude, missing value, unparseable time."""
    kinds = np.arange(n) % 3
    return pd.DataFrame({"user_id": "broken", "latitude": np.where(kinds == 0, 123.0, LATS[0]), "longitude": -97.75,
                         "timestamp": np.where(kinds == 2, "not a time", _iso(np.arange(n))),
                         "value": np.where(kinds == 1, np.nan, 10.0)})


def _reset_user(n: int = 672) -> pd.DataFrame:
    """A user whose clock reset: every record in 1970, outside the default time window."""
    return pd.DataFrame({"user_id": "reset", "latitude": LATS[1], "longitude": -97.75,
                         "timestamp": _iso(np.arange(n) * 60, pd.Timestamp("1970-01-01T00:00:00Z")), "value": 20.0})


def _partitions(path: Path) -> Path:
    cells = [h3.latlng_to_cell(lat, -97.75, 7) for lat in LATS]
    slots = _iso(np.array([0, 3600]))
    pd.DataFrame({"cell": [c for c in cells for _ in slots], "slot": slots * len(cells)}).to_csv(path, index=False)
    return path


def _cli(capsys, root: Path, frame: pd.DataFrame, *extra: str) -> tuple[int, str, str, Path]:
    """``dpopt release`` of ``frame`` (written to root/in/D.csv) into root/out, the user model on a
    public list with fixed bounds and a fixed seed; returns (code, stdout, stderr, out)."""
    (root / "in").mkdir(parents=True, exist_ok=True)
    data = root / "in" / "D.csv"
    frame.to_csv(data, index=False)
    plist = _partitions(root / "in" / "parts.csv")
    out = root / "out"
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "2",
                 "--partitions", str(plist), "--bounds", "2,3", "--resolution", "fixed", "--seed", "5",
                 "--quiet", "--out", str(out), *extra])
    text, err = capsys.readouterr()
    return code, text.replace(str(root), "ROOT"), err.replace(str(root), "ROOT"), out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------- item 2: the folder


def test_published_folder_holds_only_listed_files_and_diagnostics_are_a_private_sibling(tmp_path, capsys):
    code, text, err, out = _cli(capsys, tmp_path, _base())
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert names <= PUBLISHED_FILES and {"release.csv", "summary.json"} <= names
    assert all(p.is_file() for p in out.iterdir())  # no sub-folder at all
    diag = diagnostics_folder(out)
    assert diag == tmp_path / "out.diagnostics" and diag.is_dir()
    assert {p.name for p in diag.iterdir()} <= DIAGNOSTIC_FILES
    assert stat.S_IMODE(diag.stat().st_mode) == 0o700  # owner-only
    assert "ROOT/out.diagnostics" in text and "NOT for publication" in text  # the console says where


def test_python_door_writes_the_same_split(tmp_path):
    frame = _base()
    r = release(frame, bound=U, budget=Budget(epsilon_total=2.0),
                model=UserOptions(partitions=_partitions(tmp_path / "p.csv"), bounds=(2, 3), resolution="fixed"),
                noise=NoiseOptions(seed=5))
    paths = write_release(r, tmp_path / "rel")
    assert {p.name for p in (tmp_path / "rel").iterdir()} <= PUBLISHED_FILES
    diag = [p for p in paths.values() if p.parent == tmp_path / "rel.diagnostics"]
    assert diag and json.loads(diag[0].read_text())["ingest"]["records_read"] == len(frame)


# ------------------------------------------------------------------------------- item 1: --overwrite


@pytest.mark.parametrize("where", ["equal", "inside", "above"])
def test_overwrite_never_removes_or_writes_an_input(tmp_path, capsys, where):
    """``--out`` equal to the input's folder, inside it, or above it, with --overwrite: the inputs
    are untouched (before: `--out lossdir --overwrite` deleted D.csv and parts.csv)."""
    root = tmp_path / "top"
    data_dir = root / "lossdir"
    data_dir.mkdir(parents=True)
    data = data_dir / "D.csv"
    _base().to_csv(data, index=False)
    plist = _partitions(data_dir / "parts.csv")
    before = {p: p.read_bytes() for p in (data, plist)}
    out = {"equal": data_dir, "inside": data_dir / "out", "above": root}[where]
    argv = ["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "2", "--partitions",
            str(plist), "--bounds", "2,3", "--resolution", "fixed", "--seed", "5", "--quiet", "--overwrite",
            "--out", str(out)]
    for _ in range(2):  # twice: the second run overwrites the first one's release
        code = main(argv)
        _, err = capsys.readouterr()
        assert {p: p.read_bytes() for p in before} == before
        assert sorted(p.name for p in data_dir.iterdir()) == sorted(["D.csv", "parts.csv"] + (["out", "out.diagnostics"]
                                                                                              if where == "inside" else []))
        if where == "inside":  # a file input: a new folder beside it is fine
            assert code == 0, err
        else:
            assert code == 2 and err.count("\n") == 1 and "`--out`" in err, err


def test_out_that_is_the_current_folder_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    data = tmp_path / "D.csv"
    _base().to_csv(data, index=False)
    monkeypatch.chdir(tmp_path)
    code = main(["release", str(data), "--privacy", "user", "--bound", "50", "--epsilon-total", "2", "--delta", "1e-6",
                 "--quiet", "--overwrite", "--out", "."])
    _, err = capsys.readouterr()
    assert code == 2 and "not the current folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D.csv"]  # no ..old-* folder left behind


@pytest.mark.slow
def test_python_overwrite_replaces_only_a_release_folder(tmp_path):
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    r = release(_base(), bound=U, budget=Budget(epsilon_total=2.0),
                model=UserOptions(partitions=_partitions(tmp_path / "p.csv"), bounds=(2, 3), resolution="fixed"),
                noise=NoiseOptions(seed=5))
    with pytest.raises(DpoptInputError, match="not a previous release"):
        write_release(r, keep, overwrite=True)
    assert (keep / "notes.txt").read_text() == "precious"
    write_release(r, tmp_path / "rel")
    first = _files(tmp_path / "rel")
    write_release(r, tmp_path / "rel", overwrite=True)  # a previous release is replaced
    assert _files(tmp_path / "rel") == first


def test_out_inside_an_input_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "data"
    folder.mkdir()
    _base().to_csv(folder / "day.csv", index=False)
    code = main(["release", str(folder), "--privacy", "user", "--bound", "50", "--epsilon-total", "2", "--delta",
                 "1e-6", "--quiet", "--out", str(folder / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and "inside the input folder" in err
    assert [p.name for p in folder.iterdir()] == ["day.csv"]


@pytest.mark.parametrize("case", ["records name too long", "list name too long", "out name too long",
                                  "out name too long for its siblings", "list symlink loop", "out symlink loop",
                                  "out a link to an empty folder", "out a link to a release",
                                  "a file where the diagnostics folder goes"])
def test_a_path_the_file_system_refuses_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, case):
    """Names the file system refuses (ENAMETOOLONG) and symlink loops end in one line and exit 2 before
    the release is computed (a fuzz run: Python tracebacks with exit 1; an --out name of 236–240 bytes
    failed only after the whole release, when its temporary sibling .<name>.diagnostics.partial-… was made)."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "D.csv"
    _base().to_csv(data, index=False)
    plist = _partitions(tmp_path / "parts.csv")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    records, parts, out = str(data), str(plist), "out"
    if case == "records name too long":
        records = "r" * 300 + ".csv"
    elif case == "list name too long":
        parts = "p" * 300 + ".csv"
    elif case == "out name too long":
        out = "o" * 300
    elif case == "out name too long for its siblings":
        out = "o" * 240  # itself allowed (≤ 255 bytes); .<name>.diagnostics.partial-XXXXXXXX is not
    elif case == "list symlink loop":
        parts = "loop1"
    elif case.startswith("a file where"):  # was "NotADirectoryError: [Errno 20] …", naming no flag
        (tmp_path / "out.diagnostics").write_text("in the way\n")
    elif case.startswith("out a link"):  # the folder is renamed into place: the link would be replaced
        # (a link to an empty folder ended in NotADirectoryError after the whole release was computed)
        (tmp_path / "target").mkdir()
        if case.endswith("release"):
            (tmp_path / "target" / "release.csv").write_text("x\n")
        (tmp_path / "latest").symlink_to("target")
        out = "latest"
    else:
        out = "loop1"
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["release", records, "--privacy", "user", "--bound", str(U), "--epsilon-total", "2", "--partitions",
                 parts, "--seed", "5", "--quiet", "--out", out] + (["--overwrite"] if case.endswith("release") else []))
    text, err = capsys.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("dpopt release: error: ") and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    if case.startswith("out a link"):
        assert "not a symbolic link" in err and (tmp_path / "latest").is_symlink()
    if case.startswith("a file where"):
        assert "`--out` 'out' needs its diagnostics folder" in err and "out.diagnostics" in err


# ------------------------------------------------------------------------------- item 3: neighbours


@pytest.mark.parametrize("extra", [_invalid_user, _reset_user])
def test_user_model_neighbour_whose_records_are_all_dropped(tmp_path, capsys, extra):
    """D vs D + a user whose every record is dropped: identical exit codes, identical messages and
    byte-identical published files (the same seed draws the same noise on the same table); the
    drops are counted only in the diagnostics (before: exit 2 under --max-dropped, naming the count)."""
    base = _base()
    a = _cli(capsys, tmp_path / "a", base)
    b = _cli(capsys, tmp_path / "b", pd.concat([base, extra()], ignore_index=True))
    assert a[0] == b[0] == 0, (a[2], b[2])
    assert a[1] == b[1] and a[2] == b[2]  # every message, stdout and stderr
    assert _files(a[3]) == _files(b[3])
    da, db = (json.loads((diagnostics_folder(x[3]) / "diagnostics.json").read_text())["ingest"] for x in (a, b))
    assert db["records_read"] - da["records_read"] == len(extra())  # counted, where only the holder sees it
    assert db["dropped_records"] - da["dropped_records"] == len(extra())


def test_values_beyond_the_range_are_clipped_without_a_word_that_depends_on_them(tmp_path, capsys):
    """D with one user's values at 3U and −U vs the same user's values at U and 0: clipped to the same
    table, so byte-identical files and identical messages (the inputs' lines say that
    values beyond [0, bound] are moved to its ends, in the same words either way); the clipped count
    is in the diagnostics only (an outside-style check: 68 % of values clipped, the console silent)."""
    base = _base()
    far = _base(seed=1, n=40).assign(user_id="far", value=np.r_[np.full(20, 3 * U), np.full(20, -U)])
    near = far.assign(value=np.r_[np.full(20, U), np.zeros(20)])
    a = _cli(capsys, tmp_path / "a", pd.concat([base, near], ignore_index=True))
    b = _cli(capsys, tmp_path / "b", pd.concat([base, far], ignore_index=True))
    assert a[0] == b[0] == 0, (a[2], b[2])
    assert a[1] == b[1] and a[2] == b[2]
    assert "values outside the declared range are moved to its nearer end" in a[2]
    assert "--out-of-range" not in a[2]  # refused under --privacy user: the line named it as a way out (a fuzz find)
    assert _files(a[3]) == _files(b[3])
    db = json.loads((diagnostics_folder(b[3]) / "diagnostics.json").read_text())["ingest"]
    assert db["clipped"] >= 40


def test_max_dropped_is_refused_under_the_user_model(tmp_path, capsys):
    code, _, err, _ = _cli(capsys, tmp_path, _base(), "--max-dropped", "0.5")
    assert code == 2 and "`--max-dropped` does nothing under --privacy user" in err
    with pytest.raises(DpoptInputError, match="`max_dropped`"):
        release(_base(), bound=U, budget=Budget(epsilon_total=2.0), io=InputOptions(max_dropped=0.5),
                model=UserOptions(partitions=_partitions(tmp_path / "p.csv"), bounds=(2, 3), resolution="fixed"))


def test_user_model_counts_invalid_records_by_cause(tmp_path):
    """Item 6: invalid records under the user model are counted by cause (in the diagnostics)."""
    frame = pd.concat([_base(), _invalid_user(), _reset_user(30)], ignore_index=True)
    r = release(frame, bound=U, budget=Budget(epsilon_total=2.0), noise=NoiseOptions(seed=1),
                model=UserOptions(partitions=_partitions(tmp_path / "p.csv"), bounds=(2, 3), resolution="fixed"))
    ingest = r.diagnostics["ingest"]
    assert ingest["invalid_coordinates"] == 20 and ingest["missing"]["value"] == 20
    assert ingest["unparseable"]["timestamp"] == 20 and ingest["outside_time_window"] == 30
    assert ingest["records_kept"] == len(_base())
    assert "ingest" not in json.dumps(r.summary.as_dict())  # never published


def test_sigterm_while_writing_leaves_nothing_and_the_diagnostics_were_never_readable(tmp_path, capsys, monkeypatch):
    """`timeout -s TERM` during the write left `.out.partial-*` beside --out, holding release files and
    raw user ids in 0644 files of a 0755 folder. SIGTERM now unwinds as Ctrl-C does (exit 143, the
    folder removed), and the folder stays 0700 while the diagnostics are in it."""
    import signal

    import dpopt.writers.folder as folder

    split, modes = folder._split_diagnostics, []

    def terminated_while_split(tmp, diag):
        modes.append(stat.S_IMODE(Path(tmp).stat().st_mode))
        os.kill(os.getpid(), signal.SIGTERM)  # delivered here: the handler raises SystemExit(143)
        return split(tmp, diag)

    monkeypatch.setattr(folder, "_split_diagnostics", terminated_while_split)
    out, before = tmp_path / "o", signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        main(["release", "--example", "--privacy", "public-occupancy", "--epsilon", "1", "--quiet", "--no-map",
              "--seed", "1", "--out", str(out)])
    assert stop.value.code == 143 and modes == [0o700]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no partial, no diagnostics
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handler is undone


def test_ctrl_c_while_writing_exits_130_with_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """Ctrl-C printed a KeyboardInterrupt traceback (the folder was already removed on the way out):
    now one line on stderr, exit 130 (128 + SIGINT), and still no folder, partial or diagnostics."""
    import dpopt.writers.folder as folder

    def interrupted_while_split(tmp, diag):
        raise KeyboardInterrupt

    monkeypatch.setattr(folder, "_split_diagnostics", interrupted_while_split)
    out = tmp_path / "o"
    code = main(["release", "--example", "--privacy", "public-occupancy", "--epsilon", "1", "--quiet", "--no-map",
                 "--seed", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130 and err == ["dpopt release: interrupted"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
