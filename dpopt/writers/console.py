"""The end-of-run console summary of a release, the one rule for progress bars, and the release's
progress lines.

``console_summary`` reads summary.json (either privacy model) and the written paths: a few
aligned lines naming the unit, never a field that does not apply (no ``epsilon None``), and one
line saying where report.html is. ``progress_wanted`` is the single decision every command line
makes before it asks a library for a bar: bars go to stderr (tqdm's default), and only when stderr
is a terminal or ``--progress`` asks for them, and ``--quiet`` silences them (stderr only, so the
stdout of ``--json`` holds JSON alone). Under the same rule ``phase_lines`` shows the library's INFO messages (logger ``dpopt``: the engine's bounds,
votes and measured rounds, the estimate's fits and profiles) on stderr, one line each with the
seconds since the run began — a large list's release runs for tens of minutes.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from ._published import answers_vary_text, fmt_number, privacy_statement, released_count, resolve_unit

__all__ = ["console_summary", "progress_wanted", "phase_lines"]


def progress_wanted(requested: bool | None = None, *, quiet: bool = False,
                    stream: TextIO | None = None) -> bool:
    """Whether to draw progress bars: ``requested`` True (``--progress``) always; ``quiet`` never;
    otherwise only when ``stream`` (default ``sys.stderr``, where tqdm writes) is a terminal."""
    if requested:
        return True
    if quiet or requested is False:
        return False
    s = sys.stderr if stream is None else stream
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):
        return False


class _Elapsed(logging.Formatter):
    """``<command> [  12 s] <message>``: the seconds since the formatter was made."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command, self.t0 = command, time.monotonic()

    def format(self, record: logging.LogRecord) -> str:
        return f"{self.command} [{time.monotonic() - self.t0:6.0f} s] {record.getMessage()}"


@contextlib.contextmanager
def phase_lines(enabled: bool, *, command: str = "dpopt release",
                stream: TextIO | None = None) -> Iterator[None]:
    """While inside, and only if ``enabled`` (:func:`progress_wanted`): the INFO messages of logger
    ``dpopt`` and its children written to ``stream`` (default ``sys.stderr``) as
    ``<command> [  12 s] <message>``. The logger's level and handlers are restored on exit, so a
    library caller's own logging configuration is untouched outside. The messages carry public
    facts, DP outputs and their post-processing, and the run's own timings (as summary.json's
    diagnostics do), never a raw count or value."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("dpopt")
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(_Elapsed(command))
    handler.setLevel(logging.INFO)
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _accuracy(summary: dict[str, Any], table: pd.DataFrame | None, suffix: str) -> str | None:
    conf = f"{float(summary.get('confidence', 0.95)) * 100:.4g} %"
    if table is not None and "mean_error_bound" in table.columns:
        rel = table[table["released"].astype(bool)] if "released" in table.columns else table
        b = pd.to_numeric(rel["mean_error_bound"], errors="coerce").to_numpy(float)
        b = b[np.isfinite(b)]
        if len(b):
            med = float(np.median(b))
            span = float(summary["bound"]) - float(summary.get("lower") or 0) if summary.get("bound") is not None else None
            wide = span is not None and med >= span
            return (f"mean within ± {fmt_number(med)}{suffix} in the typical published row "
                    f"(± {fmt_number(b.min())} to ± {fmt_number(b.max())}; {conf})"
                    + ("; wider than the whole range of the values: no information" if wide else ""))
        if not len(rel):  # never a target claim about cells that do not exist
            return "no cell published (see the warning on stderr and report.md)"
    if summary.get("target") is not None:
        return f"mean within ± {fmt_number(summary['target'])}{suffix} in every published cell ({conf}, target τ)"
    return None


def _variance_line(table: pd.DataFrame | None) -> str | None:
    """Where the variance is published and, for the rest, release.csv's reasons with their counts
    (the words of report.html's "Withheld" item)."""
    from .html import variance_published, variance_reasons

    if table is None or "variance" not in table.columns:
        return None
    rel = table[table["released"].astype(bool)] if "released" in table.columns else table
    reasons = variance_reasons(rel)
    why = "; ".join(f"{r} ({k:,})" for r, k in reasons.items())
    if not variance_published(rel):
        return f"not published (mean only): {why}" if why else "not published (mean only)"
    shown = len(rel) - sum(reasons.values())
    return f"published in {shown:,} of {len(rel):,} cells" + (f"; withheld: {why}" if why else "")


def _report_path(paths: dict[str, Any]) -> Path | None:
    for key, p in paths.items():
        if key in ("html", "report_html") or Path(p).name == "report.html":
            return Path(p)
    return None


def _published_shape(summary: dict[str, Any], table: pd.DataFrame | None,
                     n: int | None) -> tuple[str, str]:
    """("17 cells", "H3 resolution 7 × 1h slots") for a flat release; for a multi-resolution
    release whose published nodes are coarser than the finest grid, ("17 nodes", "H3 resolution
    4 to 7, finest grid H3 7 × 1h"), read from release.csv's own ``h3_resolution`` column."""
    finest = (f"H3 resolution {summary['h3_resolution']} × {summary['slot']} slots"
              if summary.get("h3_resolution") is not None and summary.get("slot") else "")
    res = None
    if table is not None and "h3_resolution" in table.columns and len(table):
        rows = table[table["released"].astype(bool)] if "released" in table.columns else table
        res = pd.to_numeric(rows["h3_resolution"], errors="coerce").dropna().astype(int)
    coarser = res is not None and len(res) and summary.get("h3_resolution") is not None and (
        int(res.min()) < int(summary["h3_resolution"]) or "level" in table.columns)
    if not coarser:
        return (f"{n:,} cells" if n is not None else "cells"), finest
    lo, hi = int(res.min()), int(res.max())
    span = f"H3 resolution {lo}" if lo == hi else f"H3 resolution {lo} to {hi}"
    grid = f"finest grid H3 {summary['h3_resolution']} × {summary.get('slot')}" if summary.get("slot") else ""
    return (f"{n:,} nodes" if n is not None else "nodes"), ", ".join(x for x in (span, grid) if x)


def console_summary(summary: dict[str, Any], paths: dict[str, Any] | None = None, *,
                    unit: str | None = None, table: pd.DataFrame | None = None,
                    out: str | Path | None = None) -> str:
    """The lines printed at the end of ``dpopt release`` (without ``--json``).

    Parameters
    ----------
    summary : summary.json as a dict (either privacy model).
    paths : the files written (name → path, as the folder writers return); the line "report"
        names report.html when it is among them.
    unit : unit of the values (else ``summary["unit"]``; else numbers are printed bare and the
        "values" line says so).
    table : release.csv as published, for the typical (median) error bound of the mean.
    out : the output folder, printed first.
    """
    u, known = resolve_unit(summary, unit)
    suffix = f" {u}" if known else ""
    nums, _words = privacy_statement(summary)
    n = released_count(summary)
    rows: list[tuple[str, str]] = []
    if out is not None:
        rows.append(("out", str(Path(out).resolve())))
    cells, shape = _published_shape(summary, table, n)
    withheld = summary.get("withheld_grids")
    rows.append(("published", f"{cells} ({shape})" + (f", {int(withheld):,} withheld" if withheld else "")))
    model = summary.get("privacy_model")
    mech = summary.get("mechanism")
    scope = "" if summary.get("budget_mode") == "per-grid" else " for every user over the whole release"
    detail = ", ".join(x for x in (model and f"{model} model", mech and f"{mech.capitalize()} noise") if x)
    rows.append(("privacy", f"{nums}{scope}" + (f" ({detail})" if detail else "")))
    acc = _accuracy(summary, table, suffix)
    if acc:
        rows.append(("accuracy", acc))
    vary = answers_vary_text(summary)
    if vary:
        rows.append(("answers", vary))
    var = _variance_line(table)
    if var:
        rows.append(("variance", var))
    bound = summary.get("bound")
    if bound is not None:
        span = f"in {fmt_number(summary.get('lower') or 0)} to {fmt_number(bound)}"
        rows.append(("values", f"{span}{suffix}" if known else f"{span} (no unit given)"))
    if summary.get("plan_status") not in (None, "optimal"):
        gap = summary.get("plan_gap")
        rows.append(("plan", f"{summary.get('plan')} ({str(summary['plan_status']).replace('_', ' ')}"
                     + (f", gap {gap:.1%})" if isinstance(gap, (int, float)) and np.isfinite(gap) else ")")))
    from .folder import is_diagnostic

    files = sorted(Path(p).name for p in (paths or {}).values() if not is_diagnostic(p))
    if files:
        rows.append(("files", ", ".join(files) + (f" (publish the folder {out} as it is)" if out else "")))
    diag = sorted({str(Path(p).parent) for p in (paths or {}).values() if is_diagnostic(p)})
    if diag:
        rows.append(("diagnostics", f"{diag[0]} is for the data holder only (owner-only): NOT for publication"))
    rep = _report_path(paths or {})
    if rep is not None:
        rows.append(("report", f"open {rep} in a browser"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows) + "\n"
