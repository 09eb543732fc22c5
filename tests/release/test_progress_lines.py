"""`dpopt release --progress`: the release's progress lines on stderr (dpopt.writers.console.phase_lines),
one per phase of the engine and the estimate, each a published DP output or public fact; none with
--quiet; and the published files byte for byte the same either way."""

from __future__ import annotations

import json
import re

import pytest

from dpopt.cli import main

LINE = re.compile(r"^dpopt release \[ *\d+ s\] (.*)$")


def _lines(err: str) -> list[str]:
    return [m.group(1) for m in map(LINE.match, err.splitlines()) if m]


@pytest.mark.parametrize("budget, unit", [((), "ε"), (("--rho", "2", "--delta", "1e-6", "--mechanism", "gaussian"), "ρ")])
def test_progress_lines_name_each_phase_and_change_no_published_byte(tmp_path, capsys, budget, unit):
    shown, quiet = tmp_path / "shown", tmp_path / "quiet"
    common = ["release", "--example", "--no-map", "--seed", "5", "--json", *budget]
    assert main([*common, "--progress", "--out", str(shown)]) == 0
    lines = _lines(capsys.readouterr().err)
    assert main([*common, "--quiet", "--out", str(quiet)]) == 0
    assert _lines(capsys.readouterr().err) == []
    starts = ["bounds: at most", f"pilot measured ({unit}):", "users' vote:", f"round 1 measured ({unit}):",
              f"main measured ({unit}):",
              "estimate:", "point fit:", "main effects:", "interval: the grids' posterior variances",
              "writing the release into"]
    fit = next(line for line in lines if line.startswith("point fit:"))
    if fit.startswith("point fit: μ alone"):  # no factor to replace by its main effects: no such line
        assert not any(line.startswith("main effects:") for line in lines), lines
        starts.remove("main effects:")
    at = [next(i for i, line in enumerate(lines) if line.startswith(s)) for s in starts]
    assert at == sorted(at), lines  # in the order the release runs them
    summary = json.loads((shown / "summary.json").read_text(encoding="utf-8"))
    # the numbers the lines show are the published ones: the cap T, the clamp, each round's budgets
    cap = summary["record_cap"]
    assert lines[at[0]].startswith(f"bounds: at most {cap} record{'s' * (cap != 1)} per user; values clamped "
                                   f"to {summary['clamp_low']:.4g}–{summary['clamp']:.4g}")
    for tag in ("pilot", "round 1", "main"):
        line = next(line for line in lines if line.startswith(f"{tag} measured ({unit}):"))
        end = "_rho" if unit == "ρ" else ""  # summary.json names a zCDP piece with its unit
        spent = {k[len(tag) + 7:len(k) - len(end)]: v for k, v in summary["budget"].items()
                 if k.startswith(f"{tag} count ") and k.endswith(end)}
        assert spent, (tag, summary["budget"])
        for name, eps in spent.items():
            pieces = (f"{tag} sum {name}{end}", f"{tag} sum of squares {name}{end}")
            total = eps + sum(summary["budget"].get(piece, 0.0) for piece in pieces)
            assert f"{name} {total:.4g}" in line, (line, name, total)
    for name in ("release.csv", "answers.csv", "summary.json"):
        assert (shown / name).read_bytes() == (quiet / name).read_bytes(), name
