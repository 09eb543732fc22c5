"""The folder of a release, for both privacy models: one writer.

Published (the top of ``out``, only files of :data:`.folder.PUBLISHED_FILES`): release.csv (one
schema, :data:`.result.RELEASE_COLUMNS` first), answers.csv, summary.json, report.md
(:func:`.report_md.report_markdown`), report.html, the GIS copies and, with ``make_map``, map.png
(and frontier.png where the plan has one) — :func:`.hooks.extra_files`, rendered from the folder's
own release.csv and summary.json.

For the data holder only (``<out>.diagnostics/``, :func:`.folder.diagnostics_folder`):
diagnostics.json (timings, which correlate with the drawn noise, and what reading dropped, by cause:
value-dependent counts) and, under ``public-occupancy``, suppressed.csv and kept_pairs.csv (raw user
ids with their record counts per grid: anyone holding the data recounts the privacy loss K from
them).

Written atomically (:func:`.folder.write_atomically`): a failure leaves nothing behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .._json import to_jsonable
from .._validation import DpoptInputError
from ..privacy.model_text import VALUE_DEPENDENT_INGEST
from .folder import DIAGNOSTICS, write_atomically
from .hooks import extra_files
from .result import Release

__all__ = ["write_release", "published_summary", "UNPUBLISHED_SUMMARY_KEYS"]

#: summary fields never written to summary.json (timings correlate with the drawn noise)
UNPUBLISHED_SUMMARY_KEYS: frozenset[str] = frozenset({"timings"})


def published_summary(result: Release) -> dict[str, Any]:
    """summary.json: the summary without timings and without value-dependent ingest counts (defence
    in depth: neither summary type has such fields)."""
    payload: dict[str, Any] = to_jsonable(result.summary.as_dict())
    for key in UNPUBLISHED_SUMMARY_KEYS:
        payload.pop(key, None)
    for key in VALUE_DEPENDENT_INGEST:
        if isinstance(payload.get("ingest"), dict):
            payload["ingest"].pop(key, None)
    return payload


def _without_infinities(table: Any) -> Any:
    """``table`` with ±inf in its float columns as missing: an infinite bound says "none", which a CSV
    reader would take for a number (and release.parquet, read back from release.csv, and the GeoJSON's
    null then agree)."""
    infinite = {c: np.isinf(table[c].to_numpy()) for c in table.columns if table[c].dtype.kind == "f"}
    infinite = {c: m for c, m in infinite.items() if m.any()}
    if not infinite:
        return table
    out = table.copy()
    for c, m in infinite.items():
        out[c] = out[c].mask(m)
    return out


def _write_files(result: Release, tmp: Path, *, make_map: bool, unit: str | None) -> dict[str, str]:
    """Every file into ``tmp`` (module doc); returns key -> path relative to ``tmp``."""
    from .report_md import report_markdown

    occupancy = result.privacy_model == "public-occupancy"
    table = result.table
    if occupancy:
        from .public_occupancy import published_budget_columns

        table = published_budget_columns(result)
    _without_infinities(table).to_csv(tmp / "release.csv", index=False, float_format="%.10g")
    names = {"release": "release.csv"}
    if result.answers is not None:
        result.answers.to_csv(tmp / "answers.csv", index=False)
        names["answers"] = "answers.csv"
    (tmp / "summary.json").write_text(json.dumps(published_summary(result), indent=2) + "\n")
    (tmp / "report.md").write_text(report_markdown(result))
    names.update(summary="summary.json", report="report.md")
    diag = tmp / DIAGNOSTICS
    diag.mkdir()
    (diag / "diagnostics.json").write_text(json.dumps(to_jsonable(result.diagnostics), indent=2) + "\n")
    names["diagnostics"] = f"{DIAGNOSTICS}/diagnostics.json"
    if occupancy:
        from .public_occupancy import kept_pairs_frame

        result.suppressed_frame().to_csv(diag / "suppressed.csv", index=False)
        kept_pairs_frame(result).to_csv(diag / "kept_pairs.csv", index=False)
        names.update(suppressed=f"{DIAGNOSTICS}/suppressed.csv", kept_pairs=f"{DIAGNOSTICS}/kept_pairs.csv")
    (diag / "README.txt").write_text(
        "NOT FOR PUBLICATION. Diagnostics for the data holder: timings and counts that depend on values "
        "(diagnostics.json)" + (", raw user ids with their record counts per grid (suppressed.csv, kept_pairs.csv)"
                                if occupancy else "") + ".\n")
    # report.html, the GIS files and, with make_map, map.png and frontier.png (dpopt.writers.figures)
    return {**names, **extra_files(result, tmp, unit=unit, figures=make_map)}


def write_release(result: Release, out: str | Path, *, make_map: bool = True, overwrite: bool = False,
                  unit: str | None = None) -> dict[str, Path]:
    """Write ``result`` into folder ``out`` atomically (module doc); returns key -> path of every file.

    Parameters
    ----------
    result : Release
        A release of either privacy model (:func:`dpopt.release.release`).
    out : str or Path
        The folder to publish; refused if not empty unless ``overwrite`` (and then only a folder a
        release wrote is replaced).
    make_map : bool
        Also map.png (and frontier.png where the plan has one).
    unit : str, optional
        The values' unit (e.g. "km/h"), a public label added to summary.json and report.html.
    """
    if not isinstance(result, Release):
        raise DpoptInputError(f"`result` must be a dpopt Release (what release() returns); got {type(result).__name__}")
    return write_atomically(out, lambda tmp: _write_files(result, tmp, make_map=make_map, unit=unit),
                            overwrite=overwrite)
