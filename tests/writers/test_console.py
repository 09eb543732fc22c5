"""The end-of-run console summary, the progress-bar rule and the progress lines."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from dpopt.writers._published import fmt_number
from dpopt.writers.console import console_summary, phase_lines, progress_wanted

from .conftest import load


def _paths(root: Path) -> dict[str, Path]:
    names = ["release.csv", "summary.json", "report.md", "report.html", "map.png", "diagnostics/kept_pairs.csv"]
    return {n: root / n for n in names}


@pytest.mark.parametrize("model", ["occupancy", "user"])
def test_summary_names_unit_hides_missing_fields_and_points_to_the_report(model, tmp_path):
    table, summary = load(model)
    text = console_summary(summary, _paths(tmp_path), unit="km/h", table=table, out=tmp_path)
    assert "None" not in text and "nan" not in text
    assert "km/h" in text
    assert f"report       open {tmp_path / 'report.html'} in a browser" in text or \
        f"open {tmp_path / 'report.html'} in a browser" in text.splitlines()[-1]
    assert sum("report.html" in line for line in text.splitlines()) == 2  # files + report line
    rel = table[table["released"].astype(bool)]
    assert f"± {fmt_number(np.median(rel['mean_error_bound']))} km/h in the typical published row" in text
    assert "ε = 10 for every user over the whole release" in text
    assert "kept_pairs" not in text and "NOT for publication" in text


def test_summary_without_unit_prints_bare_numbers_and_says_so():
    table, summary = load("occupancy")
    text = console_summary(summary, {})
    assert "km/h" not in text and "(no unit given)" in text
    assert f"± {fmt_number(summary['target'])} in every published cell" in text
    assert "report" not in text  # no report.html written, no line about it


def test_summary_per_grid_mode_and_gaussian_fields():
    _t, s = load("occupancy")
    s = dict(s, budget_mode="per-grid", epsilon=0.5, epsilon_total=1.0, mechanism="gaussian",
             rho_total=0.02, delta=1e-6, plan_status="optimal")
    text = console_summary(s, {}, unit="km/h")
    assert "ε = 0.5 per grid" in text and "ρ = 0.02" in text and "δ = 1e-06" in text
    assert "whole release" not in text and "plan" not in text


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_progress_only_on_a_terminal_or_when_asked():
    assert progress_wanted(None, stream=_Stream(True)) is True
    assert progress_wanted(None, stream=_Stream(False)) is False
    assert progress_wanted(True, stream=_Stream(False)) is True
    assert progress_wanted(None, quiet=True, stream=_Stream(True)) is False
    assert progress_wanted(False, stream=_Stream(True)) is False


def test_progress_lines_show_the_librarys_info_messages_only_inside_and_only_when_wanted():
    """phase_lines: inside and enabled, every INFO message of logger "dpopt" and its children (not
    DEBUG, not another library's) is one line ``<command> [  n s] <message>`` on the stream; disabled,
    none; on exit the logger's level and handlers are what they were, also after an exception."""
    logger, child, other = logging.getLogger("dpopt"), logging.getLogger("dpopt.estimation.x"), logging.getLogger("x")
    before = (logger.level, list(logger.handlers))
    stream = io.StringIO()
    with phase_lines(True, command="dpopt test", stream=stream):
        child.info("point fit: %s", "σ²(cell) = 2")
        child.debug("an evaluation")
        other.info("not ours")
    child.info("after the run")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"dpopt test \[ +\d+ s\] point fit: σ²\(cell\) = 2", lines[0]), lines
    quiet = io.StringIO()
    with phase_lines(False, stream=quiet):
        child.info("nothing")
    assert quiet.getvalue() == ""
    with pytest.raises(RuntimeError), phase_lines(True, stream=io.StringIO()):
        raise RuntimeError("a failed release")
    assert (logger.level, list(logger.handlers)) == before


@pytest.mark.parametrize("model", ["occupancy", "user"])
def test_flat_release_counts_cells_at_the_finest_resolution(model):
    table, summary = load(model)
    text = console_summary(summary, {}, unit="km/h", table=table)
    line = next(x for x in text.splitlines() if x.startswith("published"))
    assert f"(H3 resolution {summary['h3_resolution']} × {summary['slot']} slots)" in line
    assert "nodes" not in line


def test_multiresolution_release_counts_nodes_and_their_resolutions():
    table, summary = load("user")
    table = table.copy()
    table["released"] = True
    table["level"] = 0
    res = np.resize(np.array([3, 5, int(summary["h3_resolution"])]), len(table))
    table["h3_resolution"] = res  # published nodes at three resolutions, the finest grid's among them
    n = len(table)
    text = console_summary(dict(summary, released_grids=n, released=n), {}, unit="km/h", table=table)
    line = next(x for x in text.splitlines() if x.startswith("published"))
    assert f"nodes (H3 resolution 3 to {summary['h3_resolution']}, finest grid H3 " \
           f"{summary['h3_resolution']} × {summary['slot']})" in line
    assert "cells" not in line
