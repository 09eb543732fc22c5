"""report.md of a release, for both privacy models: one writer, one order of sections.

Title; what is released (the shape's intro); the privacy model in words; the privacy accounting
(:func:`dpopt.writers._published.accounting_lines`, then the model's bounds and plan); accuracy
(what the intervals stand for, then the ten published rows with the narrowest mean intervals);
for ``public-occupancy`` what was read (value-independent counts); the files; the outlook when
nothing published is better than the range.

Everything shown is in the published summary.json and release.csv (public by the privacy model,
DP outputs, or post-processing of them); nothing is computed from the data here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..privacy.model_text import PRIVACY_MODEL_TEXT, USER_MODEL_TEXT
from ._published import (accounting_lines, answers_vary_text, reweighting_caveat, reweighting_seen,
                         unseen_heavy_users_text)
from .result import Release

__all__ = ["report_markdown"]

#: what a node's interval leaves out when it answers a finer grid (the named strategies: no crossed model)
_NODE_CAVEAT = ("a grid answered by a coarser node also differs from that node's mean by the variation inside the "
                "node, which the interval does not hold: where the hour or the day moves the value, far fewer grids' "
                "own means lie within it than the stated confidence (README, models/engine.md)")


def report_markdown(result: Release) -> str:
    """report.md of ``result`` (module doc)."""
    s = result.summary
    occupancy = s.privacy_model == "public-occupancy"
    levels = not occupancy and s.resolution == "adaptive"
    title = f"# dpopt release report (privacy model: {s.privacy_model}{', multi-resolution' if levels else ''})"
    zone = getattr(getattr(result.measurements, "info", None), "timezone", None) or "UTC"
    lines = [title, "", _intro(s, occupancy, levels, zone), "", "## Privacy model", "",
             *"\n\n".join(PRIVACY_MODEL_TEXT if occupancy else USER_MODEL_TEXT).split("\n"), "",
             "## Privacy accounting", "", *accounting_lines(s.as_dict(), None if occupancy else dict(s.budget))]
    if occupancy:
        lines += _occupancy_accounting(result)
    else:
        lines += _user_accounting(s, levels)
    lines += ["", "## Accuracy", "",
              *(_occupancy_accuracy(result) if occupancy else _user_accuracy(s, levels)), "",
              *_rows(result), ""]
    if occupancy:
        lines += _input_lines(s, result.diagnostics.get("ingest", s.ingest))
    lines += ["## Files", "", *_file_lines(s, occupancy), ""]
    if getattr(s, "outlook", ""):
        lines += ["## Outlook: nothing worth reading", "", s.outlook, ""]
    return "\n".join(lines)


# -- what is released --------------------------------------------------------------------------

def _intro(s: Any, occupancy: bool, levels: bool, zone: str) -> str:
    """What is released, in words; slots on the clock of ``zone`` (a public option; "UTC" without one)."""
    if occupancy:
        return (f"Mean and variance of the values in every (H3 cell at resolution {s.h3_resolution}) x "
                f"({s.slot} {zone} slot) grid, released with user-level differential privacy (each user's "
                "contribution bounded in every grid; one user's privacy loss added up over the grids it appears in).")
    if not levels:
        return (f"Mean and variance of the values in every released (H3 cell at resolution {s.h3_resolution}) x "
                f"({s.slot} {zone} slot) grid, with **user-level** differential privacy: neighbouring datasets "
                "differ by all the records of one user, and nothing about who is where is public.")
    if s.partitions.startswith("private") and s.shape == "optimised marginals":
        return (f"Mean of the values in each privately selected H3 cell at resolution {s.h3_resolution} for each "
                f"{s.slot} window of the day ({zone}), recurring daily over the period (a public, epoch-aligned "
                "span of 3640 days that contains the data, hence `repeat_until` years away: the data's own first "
                "and last days are not public), with **user-level** "
                "differential privacy and no partition list: which cells are published is itself a DP selection "
                "(noisy user counts above a threshold). A grid (cell x slot on a given day) inside a selected cell is "
                "answered by its cell's window of the day, whose interval holds that hour on any one day (the days' "
                "spread inside the window is a DP statistic of the release, so the interval is wide where that spread "
                "cannot be measured; a partition list measures each day); the other rows are the coarser marginals "
                "the engine measured (the map, the whole period). `answers.csv` lists the cells' windows.")
    if s.partitions.startswith("private"):
        return ("Mean of the values at nodes of a few public levels (H3 parents x coarser slots above "
                f"resolution {s.h3_resolution} x {s.slot}), with **user-level** differential privacy and no "
                "partition list: which nodes are published is itself a DP selection (noisy user counts above "
                "a threshold). A finest grid is answered by the smallest published node containing it; "
                "`answers.csv` lists the published finest grids. A node over a recurring window of the day is "
                "measured over every day: one day's grid inside it also differs by the days' spread, which this "
                "release does not measure, so its interval can be too narrow for that grid (measured: 0.76-1.00 "
                "of busy grids covered at a stated 0.95, models/engine.md section 8).")
    if s.shape == "optimised marginals":
        return (f"Mean of the values of every listed (H3 cell at resolution {s.h3_resolution}) x ({s.slot} {zone}) "
                "grid, with **user-level** differential privacy, from one crossed random-effects model (place + "
                "time + their measured interactions) fitted to the place x time marginals the engine chose to "
                "measure. Each listed grid is answered by its own row (`answers.csv`), whose interval is for that "
                "grid's own mean; the measured coarser nodes are published too (`release.csv`). The intervals are "
                "sized for grids of many users: a grid of one or two users can sit further from its answer than "
                "its interval says (measured: 0.61-0.95 of one-user grids covered at a stated 0.95, "
                "models/engine.md section 6). The intervals leave out how the record cap re-weights heavy users, "
                "which shows where a node holds very many records (measured: 0.59 of one data set's coarser nodes "
                "covered, 0.90-1.00 elsewhere) and wherever a few users hold most of the records (see `reweighting` "
                "under the contribution bounds below).")
    if s.shape == "place":
        return (f"Mean of the values of every H3 cell at resolution {s.h3_resolution} over the whole period, and of "
                "the map, with **user-level** differential privacy, estimated together (a shrinkage model: a cell's "
                f"`mean` borrows from the map where its own measurement is noisy). Each listed ({s.slot} {zone}) grid "
                "is answered by its cell, or by the map where the budget chose not to measure cells or the cell "
                "is too thin (`answers.csv`); only those nodes are published (`release.csv`). Each interval is for "
                f"its node's mean over the whole period, not for each {s.slot} grid's: " + _NODE_CAVEAT + ".")
    return (f"Mean and variance of the values over the public hierarchy above the listed (H3 resolution "
            f"{s.h3_resolution}) x ({s.slot} {zone}) grids, with **user-level** differential privacy. Each listed "
            "grid is answered by a published node (its own estimate, or a coarser cell or longer slot; "
            "`answers.csv`); only those nodes are published (`release.csv`). Each interval is for its node's mean: "
            + _NODE_CAVEAT + ".")


# -- accounting --------------------------------------------------------------------------------

def _user_accounting(s: Any, levels: bool) -> list[str]:
    if levels:
        return [_bounds_line(s),
                "- levels (finest first): " + "; ".join(f"{lv['level']}: res {lv['h3_resolution']} x "
                                                        f"{lv.get('time') or lv['slot']} (budget {lv['budget']:.6g})"
                                                        for lv in s.levels),
                f"- nodes: {s.partitions}; public: {s.public}", f"- noise: {s.noise}"]
    return [
        f"- budget split among count, sum and sum of squares: {s.split_rule}",
        f"- contribution bounds: at most **k = {s.k}** grids per user (the user's grids with most records, "
        f"ties at random), at most **c = {s.c}** records per user and grid (a uniform sample of its records); "
        f"chosen by rule `{s.bounds_rule}`" + (" under DP (part of the total above)" if s.bounds_rule != "fixed" else " (public)"),
        f"- partitions: {s.partitions}" + (f", threshold {s.selection_threshold:.6g} noisy users"
                                          if s.selection_threshold is not None else ""),
        f"- noise: {s.noise}",
        "- public: the grid definition, " + _range_text(s) + ", the parameters above"
        + (", the partition list" if s.partitions == "public list" else ""),
    ]


def _range_text(s: Any) -> str:
    """The values' range in words: "U = 120", or "values in [L, U] = [-20, 40]" with a lower end."""
    return f"U = {s.bound:g}" if s.lower == 0 else f"values in [L, U] = [{s.lower:g}, {s.bound:g}]"


def _clamped(s: Any) -> str:
    """The DP-chosen clamp as the range values were clamped to: [0, B] or, with a lower end L, [L, L + B]
    (``s.clamp`` is then L + B); the engine's, with a DP lower clamp above L: [A, B]."""
    low = getattr(s, "clamp_low", None)
    if low is not None and low > s.lower:
        return f"[A, B] = [{low:g}, {s.clamp:g}]"
    return f"[0, B = {s.clamp:g}]" if s.lower == 0 else f"[L, L + B] = [{s.lower:g}, {s.clamp:g}]"


def _remeasured_text(s: Any) -> str:
    """Where one of the engine's first clamp histograms showed nothing and was measured again (models/engine.md §2)."""
    for kind, ch in (("high", s.clamp_histogram or {}), ("low", getattr(s, "clamp_low_histogram", None) or {})):
        first = ch.get("unseen_first")
        if first:
            return (f"; the first histogram of {kind} values (ε = {first['epsilon']:.4g}) showed no group of users above "
                    f"its noise, or groups holding fewer than half of the users, so it was measured once more at "
                    f"ε = {ch['epsilon']:.4g} (budget line `bounds, clamp re-measured`)")
    return ""


def _reweighting_text(s: Any) -> str:
    """How far the cap moves the records' weights (summary.json `reweighting`, from the DP histogram)."""
    d = getattr(s, "reweighting", None)
    if d is None:
        return ""
    if not reweighting_seen(s):
        text = unseen_heavy_users_text(s)
        return ". " + text[:1].upper() + text[1:]
    return (f". The cap re-weights users: the weights of the records in a capped mean differ from their "
            f"weights in the mean of all records by about **{d:.2g}** (total variation; {reweighting_caveat(s)}), so a "
            f"published mean can sit up to {2 * d:.2g} × the spread of users' own means away from the mean of all "
            "its records where heavy users' values differ from the others'; the intervals leave that out")


def _bounds_line(s: Any) -> str:
    """The contribution bounds in words: the engine's or the place release's cap T and clamp B, or (k, c)."""
    if s.shape == "optimised marginals" and s.clamp is None:  # the engine without a list selected nothing
        return "- contribution bounds: none measured (no place was selected)"
    if s.shape == "optimised marginals":  # the engine: one cap over all the listed grids (models/engine.md §2)
        return (f"- contribution bounds: each user keeps at most **T = {s.record_cap}** of its records in the listed "
                f"grids (a sample spread over its grids in proportion; every measured marginal sums the same kept "
                f"records), values clamped to **{_clamped(s)}** ({_range_text(s)}); T, A and B chosen under DP (part "
                "of the total above; T from a noisy histogram of records per user, B and A from noisy histograms of "
                "users' high and low values, in summary.json `record_histogram`, `clamp_histogram` and "
                "`clamp_low_histogram`)" + _remeasured_text(s) + ". Means are of the clamped values: where values "
                "beyond the clamp are common, a mean moves toward it by up to the distance to the clamp (the "
                "intervals leave that out)" + _reweighting_text(s))
    if s.shape == "place":
        cap = (f"**T = {s.record_cap}** of its records (spread over its grids in proportion) at each measured level"
               if s.map_record_cap in (None, s.record_cap) else
               f"**T = {s.record_cap}** of its records (spread over its grids in proportion) in the cells and "
               f"**T_map = {s.map_record_cap}** in the map")
        return (f"- contribution bounds: each user keeps at most {cap}, values clamped to **{_clamped(s)}** "
                f"({_range_text(s)}); T and B chosen under DP (part of the total above; T from a noisy histogram of "
                "records per user, B from a noisy histogram of users' high values, in summary.json `record_histogram` "
                "and `clamp_histogram`). Means are of the values clamped at B (low where values above B are common, by "
                "up to their distance to B; the intervals leave that out); variances are withheld when B < U (their sums of squares are then not measured)"
                + _reweighting_text(s))
    clamp = (f"; values clamped to **{_clamped(s)}** ({_range_text(s)}), B chosen under DP from a noisy "
             "histogram of users' high values (summary.json `clamp_histogram`; part of the total above): means "
             "are of the clamped values" if s.clamp is not None and s.clamp < s.bound else "")
    return (f"- contribution bounds: at most **k = {s.k}** listed grids per user (a uniformly random k), at most "
            f"**c = {s.c}** records per user and grid; rule `{s.bounds_rule}`"
            + (" (public)" if s.bounds_rule in ("fixed", "public default") else " under DP (part of the total above)")
            + clamp)


def _occupancy_accounting(result: Release) -> list[str]:
    from .public_occupancy import spend_text, value_drop_caveat

    s = result.summary
    split = "equally" if s.split == "equal" else "optimally per grid"
    lines = [f"- budget: {s.budget}; each grid's budget split between mean and variance {split} (a user "
             "spends the budgets of the grids it is kept in)",
             f"- plan: **{s.plan}**{' + pseudo-user clipping' if s.pseudo_users else ''} (status: {s.plan_status}"
             + (f", gap {s.plan_gap:.3g}" if s.plan_gap and np.isfinite(s.plan_gap) else "") + ")",
             f"- K = the most released grids any user is kept in = **{s.degradation}** (every record kept: "
             f"{s.degradation_baseline})",
             f"- **{spend_text(s)}**, recounted from the kept (user, grid) pairs and the budgets the "
             "samplers use (kept_pairs.csv in the diagnostics folder lets anyone holding the data recount it)"]
    if s.budget_mode == "per-grid":
        lines.append(f"- without a plan: {s.epsilon_total_baseline:g}; basic composition over all {s.grids} "
                     f"grids would give {s.epsilon_basic_composition:g}")
    return lines + [
        f"- noise: {s.noise}",
        "- public by assumption (the public-occupancy model): the occupancy array, i.e. n_users, n_records and "
        "max_user_records per grid (the suppressed and kept pairs, with raw user ids, are in the diagnostics folder, "
        "not published)",
        *value_drop_caveat(result.diagnostics.get("ingest", s.ingest))]


# -- accuracy ----------------------------------------------------------------------------------

def _user_accuracy(s: Any, levels: bool) -> list[str]:
    if levels:
        vary = answers_vary_text(s.as_dict())
        said = [] if not vary else [f"- answers: **{vary}**" if s.answers_vary_by == [] else f"- answers: {vary}"]
        stands = ("for the mean of each listed grid it answers (models/engine.md)" if s.shape == "optimised marginals"
                  else "for the mean of the node the row stands for (models/hierarchy.md); " + _NODE_CAVEAT)
        return [f"- estimation: {s.method}; every row's `mean_error_bound` is the half-width of a {s.confidence:.0%} "
                f"interval {stands}", f"- nodes published: {s.grids_released}", *said]
    return [f"- every row carries {s.confidence:.0%} error bounds of the released mean and variance against the "
            "bounded data's statistics (noise only: the bias of contribution bounding is not included)",
            f"- grids released: {s.grids_released}"]


def _occupancy_accuracy(result: Release) -> list[str]:
    s, t = result.summary, result.table
    rel = t[t["released"]]
    crit = ("noise only: the error against the statistic of the kept records, treating the kept users "
            "as a sample of the grid's users" if s.criterion == "noise" else
            "worst case: clipping bias of the kept set (for any data) plus noise")
    lines = [f"- released grids: **{s.released_grids}** of {s.grids}; withheld (not published, no noise drawn): "
             f"{s.withheld_grids}",
             f"- per-grid error bounds in release.csv (`mean_error_bound`, `variance_error_bound`) hold with "
             f"probability {s.confidence:g} each; criterion: {crit}; the other criterion's bounds are in the "
             "columns beside them"]
    if len(rel):
        b = rel["mean_error_bound"].to_numpy(dtype=float)
        lines.append(f"- mean error bound over released grids: median {np.median(b):.4g}, "
                     f"best {b.min():.4g}, worst {b.max():.4g} (values in [{s.lower:g}, {s.bound:g}])")
    if s.target is not None:
        bp = result.plan.info.get("budget_plan") if result.plan is not None else None
        rule = bp.info.get("target_rule") if bp is not None else None
        within = (f"grids answered by a published node whose mean meets it: **{s.grids_within_target}** (answers.csv; "
                  "the bound holds that node's mean, and a grid's own mean also differs from it by the variation "
                  "inside the node, which the bound does not hold)" if s.answered_grids is not None
                  else f"grids within it: **{s.grids_within_target}**")
        lines.append(f"- budget planner target: tau = {s.target:.4g} for the mean; {within}"
                     + (f". tau was not given, so it is the {rule}" if rule else ""))
    if s.frontier is not None:
        pts = ", ".join(f"{t:.3g}: {int(c)}" for t, c in zip(s.frontier["tau"], s.frontier["coverage"]))
        lines.append(f"- frontier (tau: grids within tau), from public counts only: {pts} (frontier.png)")
    return lines + [
        f"- worst-case error (bias + expected |noise|, mean + variance): largest "
        f"**{s.error_bound:.6g}**" + (f" (target {s.error_bound_target:.6g})"
                                      if s.budget_mode == "per-grid" and np.isfinite(s.error_bound_target) else ""),
        f"- suppressed (user, grid) pairs: {s.suppressed_pairs} ({s.suppressed_records} records); "
        f"records cut by per-grid caps: {s.truncated_records}"]


def _rows(result: Release) -> list[str]:
    """The ten published rows with the narrowest mean intervals, in release.csv's contract columns."""
    s, t = result.summary, result.table
    rel = t[t["released"].to_numpy(dtype=bool)]
    lines = ["The published rows with the narrowest mean intervals (all rows: `release.csv`; values post-processed "
             "into " + ("[0, U] (mean) and [0, U^2/4] (variance)" if s.lower == 0 else
                        f"[L, U] = [{s.lower:g}, {s.bound:g}] (mean) and [0, (U - L)^2/4] (variance)")
             + ("; the noisy values before that are `mean_raw`, `variance_raw`" if "mean_raw" in t.columns else "")
             + "):", "",
             f"| cell | res | slot | slot end | repeats | mean | ±{s.confidence:.0%} | variance | ±{s.confidence:.0%} |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, row in rel.nsmallest(10, "mean_error_bound").iterrows():
        repeats = f"every {row['repeat_every']} until {row['repeat_until']}" if row.get("repeat_every") else ""
        var = row["variance"]
        lines.append(f"| {row['cell']} | {row['h3_resolution']} | {row['slot']} | {row['slot_end']} | {repeats} | "
                     f"{row['mean']:.3f} | {row['mean_error_bound']:.3g} | "
                     + ("withheld | |" if not np.isfinite(var) else f"{var:.3f} | {row['variance_error_bound']:.3g} |"))
    return lines


# -- input and files ---------------------------------------------------------------------------

def _input_lines(s: Any, ing: dict[str, Any]) -> list[str]:
    """What was read and dropped (value-independent counts only; public-occupancy)."""
    return [
        "## Input", "",
        f"- records read {ing.get('records_read', 0)}, kept {ing.get('records_kept', 0)}, "
        f"dropped {s.dropped_records} (missing fields {ing.get('dropped_missing', 0)}: "
        + ", ".join(f"{k} {v}" for k, v in ing.get("missing", {}).items())
        + f"; invalid coordinates {ing.get('invalid_coordinates', 0)}"
        + (f"; out of [{s.lower:g}, {s.bound:g}] dropped {ing.get('dropped_out_of_range', 0)}"
           if ing.get("out_of_range_policy", "clip") == "drop" else "")
        + ")",
        f"- values outside [{s.lower:g}, {s.bound:g}]: policy {ing.get('out_of_range_policy', 'clip')}; how many were "
        "out of range depends on values and is not published (diagnostics.json in the diagnostics folder)",
        f"- users {s.users}, grids {s.grids}, occupied (user, grid) pairs {s.pairs}, records aggregated {s.records}",
        "",
    ]


def _file_lines(s: Any, occupancy: bool) -> list[str]:
    return ["- `release.csv`: one row per published node (cell, slot, slot end, its mean and variance with their "
            "interval half-widths, then the model's own columns; one schema for both privacy models)",
            "- `answers.csv`: each listed grid and the release.csv row that answers it",
            "- `summary.json`: the numbers above",
            "- `report.html`, `map.png`, `release.geojson` (and `release.parquet` with pyarrow): the same rows on a map",
            *(["- `frontier.png`: grids within the target against the target (budget plan, public counts only)"]
              if occupancy and s.frontier is not None else []),
            "- the folder `<out>.diagnostics/` beside this one (NOT for publication, for the data holder): "
            "`diagnostics.json` (timings and what reading dropped, by cause)"
            + (", `suppressed.csv` and `kept_pairs.csv` (raw user ids, records per grid; recount K from them)"
               if occupancy else "")]
