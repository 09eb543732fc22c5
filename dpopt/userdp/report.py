"""Files of a ``user``-model release: release.csv, summary.json, report.md (all publishable).

Written atomically: into a temporary sibling directory, then renamed into place, so a reader never
sees a half-written release. Nothing here is un-noised data: the table holds DP outputs and
post-processing of them; the summary holds public parameters and DP outputs (k, c, the number of
grids released).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..cli_common import to_jsonable
from .release import UserRelease

__all__ = ["write_user_release", "user_report_markdown"]


def _accounting_lines(s: Any) -> list[str]:
    """The accounting headline in words (Laplace: pure ε; Gaussian: ρ-zCDP and its (ε, δ))."""
    if s.mechanism != "gaussian":
        return ["## Privacy accounting (basic composition, pure epsilon-DP, Laplace noise)", "",
                f"- total: **epsilon = {s.epsilon_total:.6g}**, delta = {s.delta:g}"]
    lines = ["## Privacy accounting (rho-zero-concentrated DP, Gaussian noise)", "",
             f"- total: **rho = {s.rho_total:.6g}** (zCDP: every piece's rho added; the pure-epsilon "
             "pieces, bounds choice and partition selection, cost epsilon^2/2 each)"]
    if s.epsilon_total is not None:
        lines.append(f"- which implies **(epsilon = {s.epsilon_total:.6g}, delta = {s.delta:g})-DP** "
                     "(Canonne-Kamath-Steinke 2020, Corollary 13)"
                     + (f"; delta includes {s.delta_selection:g} of the private partition selection"
                        if s.delta_selection > 0 else ""))
    lines.append("- pieces (rho, or epsilon for the pure-epsilon ones):")
    return lines


def user_report_markdown(result: UserRelease) -> str:
    """A short human-readable report."""
    s = result.summary
    t = result.table
    b = s.budget
    lines = [
        "# dpopt release report (privacy model: user)",
        "",
        f"Mean and variance of the values in every released (H3 cell at resolution {s.h3_resolution}) x "
        f"({s.slot} UTC slot) grid, with **user-level** differential privacy: neighbouring datasets "
        "differ by all the records of one user, and nothing about who is where is public.",
        "",
        *_accounting_lines(s),
        *[f"  - {name}: {v:.6g}" for name, v in b.items()],
        f"- budget split among count, sum and sum of squares: {s.split_rule}",
        f"- contribution bounds: at most **k = {s.k}** grids per user (the user's grids with most records, "
        f"ties at random), at most **c = {s.c}** records per user and grid (the first by time); "
        f"chosen by rule `{s.bounds_rule}`" + (" under DP (part of the total above)" if s.bounds_rule != "fixed" else " (public)"),
        f"- partitions: {s.partitions}" + (f", threshold {s.selection_threshold:.6g} noisy users"
                                          if s.selection_threshold is not None else ""),
        f"- noise: {s.noise}",
        "- public: the grid definition, U = " f"{s.bound:g}, the parameters above"
        + (", the partition list" if s.partitions == "public list" else ""),
        "",
        "## Accuracy",
        "",
        f"- every row carries {s.confidence:.0%} error bounds of the released mean and variance against the bounded "
        "data's statistics (noise only: the bias of contribution bounding is not included)",
        f"- grids released: {s.grids_released}",
        "",
        "| cell | slot | mean | ±95 % | variance | ±95 % | noisy count |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, row in t.nlargest(10, "noisy_count").iterrows():
        lines.append(f"| {row['cell']} | {row['slot']} | {row['mean']:.3f} | {row['mean_error_bound']:.3g} | "
                     f"{row['variance']:.3f} | {row['variance_error_bound']:.3g} | {row['noisy_count']:.0f} |")
    lines += [
        "",
        "## Files",
        "",
        "- `release.csv`: one row per released grid (cell, slot, mean, variance post-processed into "
        "[0, U] and [0, U²/4], their raw noisy values, the noisy record count, 95 % error bounds)",
        "- `summary.json`: the numbers above",
        "",
    ]
    return "\n".join(lines)


def write_user_release(result: UserRelease, out: str | Path, *, overwrite: bool = False) -> dict[str, Path]:
    """Write release.csv, summary.json and report.md into folder ``out`` atomically (refused if
    ``out`` is not empty unless ``overwrite``), and ``diagnostics/timings.json`` for the data holder
    (timings are never published: the exact sampler's time depends on the noise drawn)."""
    from ..release.report import DIAGNOSTICS, write_atomically

    def write(tmp: Path) -> dict[str, str]:
        result.table.to_csv(tmp / "release.csv", index=False, float_format="%.10g")
        payload: dict[str, Any] = to_jsonable(result.summary.as_dict())
        (tmp / "summary.json").write_text(json.dumps(payload, indent=2) + "\n")
        (tmp / "report.md").write_text(user_report_markdown(result))
        (tmp / DIAGNOSTICS).mkdir()
        (tmp / DIAGNOSTICS / "timings.json").write_text(json.dumps(to_jsonable(result.diagnostics), indent=2) + "\n")
        return {"release": "release.csv", "summary": "summary.json", "report": "report.md",
                "diagnostics": f"{DIAGNOSTICS}/timings.json"}

    return write_atomically(out, write, overwrite=overwrite)
