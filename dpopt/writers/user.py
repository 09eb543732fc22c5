"""A ``user``-model release as published: the table and summary (:class:`UserRelease`, assembled
from the model's Measurements and the estimation layer's Estimates by :func:`user_release`) and its
files release.csv, summary.json, report.md (all publishable) with diagnostics.json (timings, what reading dropped)
in the data holder's diagnostics folder.

Written atomically (:mod:`.folder`). Nothing here is computed and nothing is un-noised data: the
table holds DP outputs and post-processing of them (formatted: H3 cells and slots as text, cell
centres); the summary holds public parameters and DP outputs (k, c, the number of grids released).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .._json import to_jsonable
from ..measurements import Estimates, Measurements, UserInfo
from ..records.grid import (cell_centres, cell_strings, iso_duration, level_time_text, repeat_strings,
                           slot_strings, slot_text)
from ._published import accounting_lines
from .folder import DIAGNOSTICS, write_atomically
from .hooks import extra_files

__all__ = ["UserRelease", "UserReleaseSummary", "TABLE_COLUMNS", "MULTIRES_COLUMNS", "ANSWER_COLUMNS",
           "user_release", "multires_release", "write_user_release", "user_report_markdown"]

TABLE_COLUMNS = ["cell", "slot", "released", "mean", "variance", "mean_raw", "variance_raw",
                 "noisy_count", "mean_error_bound", "variance_error_bound"]

#: release.csv of the multi-resolution release: one row per published node (a contract for outside checks)
#: (``repeat_every``, ``repeat_until``: empty, or a profile node's cycle as an ISO 8601 duration ("P1D")
#: and the period's end: the node covers [slot, slot_end) shifted by every whole multiple of the
#: cycle that starts before ``repeat_until``; models/hierarchy.md §2)
MULTIRES_COLUMNS = ["cell", "slot", "slot_end", "repeat_every", "repeat_until", "h3_resolution", "cell_lat", "cell_lng",
                    "released", "mean", "mean_error_bound", "mean_direct", "mean_direct_error_bound", "variance",
                    "variance_error_bound", "variance_released", "variance_withheld_reason", "method", "level",
                    "count_estimate"]
#: answers.csv: each finest grid of the partition list and the published node that answers it
ANSWER_COLUMNS = ["cell", "slot", "node_cell", "node_slot", "node_slot_end", "node_repeat_every", "node_repeat_until",
                  "node_h3_resolution"]


@dataclass(frozen=True)
class UserReleaseSummary:
    """Headline numbers (summary.json): every field is public or a DP output."""

    privacy_model: str
    epsilon_total: float | None
    delta: float
    k: int
    c: int
    bounds_rule: str
    budget: dict[str, float]
    split_rule: str
    partitions: str
    grids_released: int
    selection_threshold: float | None
    pooling: dict[str, float]
    bound: float
    h3_resolution: int
    slot: str
    noise: str
    granularity: float
    confidence: float
    seeded: bool
    #: "laplace" (pure ε-DP) or "gaussian" (ρ-zCDP)
    mechanism: str = "laplace"
    #: Gaussian: the ρ of the whole release (every piece, pure-ε ones as ε²/2); None for Laplace
    rho_total: float | None = None
    #: Gaussian with private selection: the δ_p spent by the selection (part of ``delta``)
    delta_selection: float = 0.0
    #: "fixed" (flat per-grid release) or "adaptive" (multi-resolution, models/hierarchy.md)
    resolution: str = "fixed"
    #: the estimation method of ``mean``
    method: str = "direct"
    #: adaptive: the levels (H3 resolution, slot text), finest first, and each level's budget (the
    #: sum of its pieces, in the unit of the accounting)
    levels: list[dict[str, Any]] | None = None
    #: adaptive: the error target tau a node's noise half-width must meet to answer its finest grids
    target: float | None = None
    #: adaptive: what the privacy model treats as public, in words ('' for the flat release: see report.md)
    public: str = ""
    #: '' when some published node is better than the range, else what would be
    outlook: str = ""
    #: the total epsilon the outlook predicts would make the release useful (None: not needed / unknown)
    outlook_epsilon_needed: float | None = None
    #: multi-resolution: "place" (models/hierarchy.md §14), "levels" (§3–§13) or "private selection" (§15)
    shape: str = ""
    #: place: the DP-chosen clamp B ≤ U the values were measured on, and the per-user record cap T
    clamp: float | None = None
    record_cap: int | None = None
    #: place: the map's own record cap T_map ≥ T (least predicted noise + re-weighting error of the
    #: map's mean on the same histogram; ``record_histogram`` ``map_error``, models/hierarchy.md §14.2)
    map_record_cap: int | None = None
    #: place: how T was chosen: the ε_T-DP histogram of records per user (``upper_edges`` of the bins
    #: (lo, hi], then the overflow; ``noisy_users`` per bin) and the predicted noise factor T/S(T) of
    #: each candidate (post-processing of the histogram; models/hierarchy.md §14.2)
    record_histogram: dict[str, Any] | None = None
    #: place: how B was chosen: the ε_B-DP histogram of users' clamp votes (``clamps`` the B each bin
    #: stands for, ``noisy_users`` per bin; B is its 75th percentile over the bins that clear the
    #: noise, models/hierarchy.md §14.2)
    clamp_histogram: dict[str, Any] | None = None
    #: the lower end L of the values: they lie in [lower, bound] (0 unless a lower end was given;
    #: then ``clamp`` and the histogram's ``clamps`` are upper ends too, values clamped to [lower, clamp])
    lower: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class UserRelease:
    """A ``user``-model release: ``table`` (one row per released grid, columns
    :data:`TABLE_COLUMNS` plus cell_lat, cell_lng, mean_pooled, variance_pooled and, with private
    selection, noisy_users) and ``summary``. Everything in both is publishable. ``measurements``
    and ``estimates`` what they were formatted from."""

    table: pd.DataFrame
    summary: UserReleaseSummary
    #: for the data holder only, never published: ``timings`` (s)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    measurements: Measurements | None = None
    estimates: Estimates | None = None
    #: adaptive: answers.csv (columns :data:`ANSWER_COLUMNS`), published
    answers: pd.DataFrame | None = None


def _table(m: Measurements, est: Estimates, pooled: Estimates) -> pd.DataFrame:
    t = est.table
    cells = m.nodes["cell"].to_numpy()
    table = pd.DataFrame({
        "cell": cell_strings(cells), "slot": slot_strings(m.nodes["slot"].to_numpy()),
        "released": t["released"].to_numpy(), "mean": t["mean"].to_numpy(), "variance": t["variance"].to_numpy(),
        "mean_raw": t["mean_raw"].to_numpy(), "variance_raw": t["variance_raw"].to_numpy(),
        "noisy_count": t["noisy_count"].to_numpy(), "mean_error_bound": t["mean_error_bound"].to_numpy(),
        "variance_error_bound": t["variance_error_bound"].to_numpy(),
        "mean_pooled": pooled.table["mean"].to_numpy(), "variance_pooled": pooled.table["variance"].to_numpy(),
    })
    if m.info.noisy_users is not None:
        table["noisy_users"] = m.info.noisy_users
    lat, lng = cell_centres(cells)
    table.insert(2, "cell_lat", lat)
    table.insert(3, "cell_lng", lng)
    # the variance is withheld (NaN above) where its interval is the whole range
    table["variance_released"] = t["variance_released"].to_numpy()
    table["variance_withheld_reason"] = t["variance_withheld_reason"].to_numpy()
    return table


def user_release(m: Measurements, est: Estimates, pooled: Estimates, *,
                 diagnostics: dict[str, Any] | None = None, outlook: Any = None) -> UserRelease:
    """The published table and summary of a ``user`` release from its measurements, direct
    estimates ``est`` and pooled estimates ``pooled`` (formatting only)."""
    info, sp = m.info, m.spend
    summary = UserReleaseSummary(
        privacy_model="user", epsilon_total=sp.epsilon, delta=sp.delta, k=info.k, c=info.c,
        bounds_rule=info.bounds_rule, budget=dict(sp.pieces), split_rule=info.split_rule,
        partitions=info.partitions, grids_released=m.n_nodes, selection_threshold=info.selection_threshold,
        pooling=pooled.info.pooling, bound=m.bound, h3_resolution=info.h3_resolution, slot=info.slot,
        noise=info.noise, granularity=info.lattice, confidence=est.confidence, seeded=info.seeded,
        mechanism=info.mechanism, rho_total=sp.total if sp.unit == "rho" else None,
        delta_selection=info.delta_selection, **_outlook_fields(outlook),
    )
    return UserRelease(table=_table(m, est, pooled), summary=summary, diagnostics=dict(diagnostics or {}),
                       measurements=m, estimates=est)


def _outlook_fields(outlook: Any) -> dict[str, Any]:
    if outlook is None or not outlook.empty:
        return {}
    return {"outlook": outlook.message, "outlook_epsilon_needed": outlook.epsilon_needed}


def _multires_table(m: Measurements, est: Estimates) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(release.csv: the published nodes, answers.csv): formatting only. ``slot_end`` = start + the
    node's slot length; a profile node's window recurs every ``repeat_every`` until ``repeat_until``,
    the end of the list's period (public: the hierarchy over the public list)."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    cells = t["cell"].to_numpy(dtype="int64")
    start = t["slot"].to_numpy(dtype="int64")
    end = start + t["slot_ns"].to_numpy(dtype="int64")
    cycle = t["cycle_ns"].to_numpy(dtype="int64")
    # the list's period end (public): every recurring window stops there
    period_end = int(m.finest["slot"].max()) + int(m.info.slot_ns) if (cycle > 0).any() else 0
    repeat, until = repeat_strings(cycle, period_end)
    lat, lng = cell_centres(cells[on])
    table = pd.DataFrame({"cell": cell_strings(cells[on]), "slot": slot_strings(start[on]),
                          "slot_end": slot_strings(end[on]), "repeat_every": repeat[on], "repeat_until": until[on],
                          "cell_lat": lat, "cell_lng": lng})
    for col in MULTIRES_COLUMNS:
        if col not in table.columns:
            table[col] = t[col].to_numpy()[on]
    node = est.answers["node"].to_numpy()
    answers = pd.DataFrame({"cell": cell_strings(m.finest["cell"].to_numpy()),
                            "slot": slot_strings(m.finest["slot"].to_numpy()),
                            "node_cell": cell_strings(cells[node]), "node_slot": slot_strings(start[node]),
                            "node_slot_end": slot_strings(end[node]), "node_repeat_every": repeat[node],
                            "node_repeat_until": until[node], "node_h3_resolution": t["h3_resolution"].to_numpy()[node]})
    return table[MULTIRES_COLUMNS], answers


def _levels(m: Measurements) -> list[dict[str, Any]]:
    """Each level's grid and budget: the sum of its pieces (``level{l}_…``; the engine's pieces end
    with the marginal's name, e.g. ``main count cell × period``)."""
    out = []
    engine = m.info.engine
    for li, (res, slot_ns, *cycle) in enumerate(m.info.levels):
        mine = (lambda name: name.endswith(f" {engine.names[li]}")) if engine is not None else \
            (lambda name: name.startswith(f"level{li}_"))
        spent = sum(v for name, v in m.spend.pieces.items() if mine(name))
        cycle_ns = int(cycle[0]) if cycle else 0
        out.append({"level": li, "h3_resolution": int(res), "slot": "period" if slot_ns == 0 else slot_text(slot_ns),
                    "repeat_every": iso_duration(cycle_ns) if cycle_ns else None,
                    "time": level_time_text(int(slot_ns), cycle_ns), "budget": float(spent)})
    return out


def multires_release(m: Measurements, est: Estimates, *, diagnostics: dict[str, Any] | None = None,
                     outlook: Any = None) -> UserRelease:
    """The published table, answers and summary of the multi-resolution ``user`` release from its
    measurements and hierarchical estimates (formatting only)."""
    info, sp = m.info, m.spend
    table, answers = _multires_table(m, est)
    summary = UserReleaseSummary(
        privacy_model="user", epsilon_total=sp.epsilon, delta=sp.delta, k=info.k, c=info.c,
        bounds_rule=info.bounds_rule, budget=dict(sp.pieces), split_rule=info.split_rule,
        partitions=info.partitions, grids_released=len(table), selection_threshold=None, pooling={},
        bound=float(m.bound if info.declared_bound is None else info.declared_bound),
        h3_resolution=info.h3_resolution, slot=info.slot, noise=info.noise,
        granularity=info.lattice, confidence=est.confidence, seeded=info.seeded, mechanism=info.mechanism,
        rho_total=sp.total if sp.unit == "rho" else None, resolution="adaptive", method=est.method,
        levels=_levels(m), target=float(est.info.target), delta_selection=float(info.delta_selection),
        public=str(info.public or ""), shape=_shape(info), clamp=info.clamp,
        record_cap=info.record_cap, map_record_cap=info.map_record_cap,
        record_histogram=info.record_histogram,
        clamp_histogram=info.clamp_histogram, **_outlook_fields(outlook))
    return UserRelease(table=table, summary=summary, diagnostics=dict(diagnostics or {}), measurements=m,
                       estimates=est, answers=answers)


def _shape(info: UserInfo) -> str:
    """The multi-resolution shape in words for summary.json (public: the options chose it)."""
    if info.shape in ("place", "engine"):
        return "optimised marginals" if info.shape == "engine" else "place"
    return "private selection" if str(info.partitions or "").startswith("private") else "levels"


def user_report_markdown(result: UserRelease) -> str:
    """A short human-readable report."""
    s = result.summary
    t = result.table
    b = s.budget
    if s.resolution == "adaptive":
        return _multires_markdown(result)
    lines = [
        "# dpopt release report (privacy model: user)",
        "",
        f"Mean and variance of the values in every released (H3 cell at resolution {s.h3_resolution}) x "
        f"({s.slot} UTC slot) grid, with **user-level** differential privacy: neighbouring datasets "
        "differ by all the records of one user, and nothing about who is where is public.",
        "",
        "## Privacy accounting",
        "",
        *accounting_lines(s.as_dict(), dict(b)),
        f"- budget split among count, sum and sum of squares: {s.split_rule}",
        f"- contribution bounds: at most **k = {s.k}** grids per user (the user's grids with most records, "
        f"ties at random), at most **c = {s.c}** records per user and grid (the first by time); "
        f"chosen by rule `{s.bounds_rule}`" + (" under DP (part of the total above)" if s.bounds_rule != "fixed" else " (public)"),
        f"- partitions: {s.partitions}" + (f", threshold {s.selection_threshold:.6g} noisy users"
                                          if s.selection_threshold is not None else ""),
        f"- noise: {s.noise}",
        "- public: the grid definition, " + _range_text(s) + ", the parameters above"
        + (", the partition list" if s.partitions == "public list" else ""),
        "",
        "## Accuracy",
        "",
        f"- every row carries {s.confidence:.0%} error bounds of the released mean and variance against the bounded "
        "data's statistics (noise only: the bias of contribution bounding is not included)",
        f"- grids released: {s.grids_released}",
        "",
        f"| cell | slot | mean | ±{s.confidence:.0%} | variance | ±{s.confidence:.0%} | noisy count |",
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
        + ("[0, U] and [0, U²/4]" if s.lower == 0 else f"[L, U] = [{s.lower:g}, {s.bound:g}] and [0, (U − L)²/4]")
        + f", their raw noisy values, the noisy record count, {s.confidence:.0%} error bounds)",
        "- `summary.json`: the numbers above",
        "",
    ]
    return "\n".join(lines + _outlook_lines(s))


def _outlook_lines(s: Any) -> list[str]:
    return ["## Outlook: nothing worth reading", "", s.outlook, ""] if s.outlook else []


def _range_text(s: UserReleaseSummary) -> str:
    """The values' range in words: "U = 120", or "values in [L, U] = [-20, 40]" with a lower end."""
    return f"U = {s.bound:g}" if s.lower == 0 else f"values in [L, U] = [{s.lower:g}, {s.bound:g}]"


def _clamped(s: UserReleaseSummary) -> str:
    """The DP-chosen clamp as the range values were clamped to: [0, B] or, with a lower end L, [L, L + B]
    (``s.clamp`` is then L + B)."""
    return f"[0, B = {s.clamp:g}]" if s.lower == 0 else f"[L, L + B] = [{s.lower:g}, {s.clamp:g}]"


def _bounds_line(s: UserReleaseSummary) -> str:
    """The contribution bounds in words: the place release's cap T and clamp B, or (k, c)."""
    if s.shape == "place":
        cap = (f"**T = {s.record_cap}** of its records (spread over its grids in proportion) at each measured level"
               if s.map_record_cap in (None, s.record_cap) else
               f"**T = {s.record_cap}** of its records (spread over its grids in proportion) in the cells and "
               f"**T_map = {s.map_record_cap}** in the map")
        return (f"- contribution bounds: each user keeps at most {cap}, values clamped to **{_clamped(s)}** "
                f"({_range_text(s)}); T and B chosen under DP (part of the total above; T from a noisy histogram of "
                "records per user, B from a noisy histogram of users' high values, in summary.json `record_histogram` "
                "and `clamp_histogram`). Means are of the values clamped at B (slightly low where values above B are "
                "common); variances are withheld when B < U (their sums of squares are then not measured)")
    clamp = (f"; values clamped to **{_clamped(s)}** ({_range_text(s)}), B chosen under DP from a noisy "
             "histogram of users' high values (summary.json `clamp_histogram`; part of the total above): means "
             "are of the clamped values" if s.clamp is not None and s.clamp < s.bound else "")
    return (f"- contribution bounds: at most **k = {s.k}** listed grids per user (a uniformly random k), at most "
            f"**c = {s.c}** records per user and grid; rule `{s.bounds_rule}`"
            + (" (public)" if s.bounds_rule in ("fixed", "public default") else " under DP (part of the total above)")
            + clamp)


def _multires_markdown(result: UserRelease) -> str:
    """The report of the multi-resolution release."""
    s, t = result.summary, result.table
    intro = (f"Mean and variance of the values over the public hierarchy above the listed (H3 resolution "
             f"{s.h3_resolution}) x ({s.slot} UTC) grids, with **user-level** differential privacy. Each listed "
             f"grid is answered by its finest ancestor (coarser cell, longer slot) whose noise half-width meets "
             f"tau = {s.target:g} (`answers.csv`); only those nodes are published (`release.csv`).")
    if s.shape == "place":
        intro = (f"Mean of the values of every H3 cell at resolution {s.h3_resolution} over the whole period, and of "
                 "the map, with **user-level** differential privacy, estimated together (a shrinkage model: a cell's "
                 f"`mean` borrows from the map where its own measurement is noisy). Each listed ({s.slot} UTC) grid "
                 "is answered by its cell, or by the map where the budget chose not to measure cells or the cell "
                 "is too thin (`answers.csv`); only those nodes are published (`release.csv`).")
    if s.partitions.startswith("private"):
        intro = ("Mean of the values at nodes of a few public levels (H3 parents x coarser UTC slots above "
                 f"resolution {s.h3_resolution} x {s.slot}), with **user-level** differential privacy and no "
                 "partition list: which nodes are published is itself a DP selection (noisy user counts above "
                 "a threshold). A finest grid is answered by the smallest published node containing it; "
                 "`answers.csv` lists the published finest grids.")
    lines = [
        "# dpopt release report (privacy model: user, multi-resolution)", "", intro, "",
        "## Privacy accounting", "", *accounting_lines(s.as_dict(), dict(s.budget)),
        _bounds_line(s),
        "- levels (finest first): " + "; ".join(f"{lv['level']}: res {lv['h3_resolution']} x "
                                                f"{lv.get('time') or lv['slot']} (budget {lv['budget']:.6g})"
                                                for lv in s.levels),
        f"- estimation: {s.method} (tree GLS, Fieller intervals, empirical-Bayes `mean`; `mean_direct` unshrunk)",
        f"- nodes: {s.partitions}; public: {s.public}",
        f"- noise: {s.noise}", "", "## Accuracy", "",
        f"- nodes published: {s.grids_released}; every row carries {s.confidence:.0%} intervals (`mean_error_bound`)",
        "", "| cell | res | slot | slot end | repeats | mean | ± | method |", "|---|---|---|---|---|---|---|---|"]
    for _, row in t.nsmallest(10, "mean_error_bound").iterrows():
        repeats = f"every {row['repeat_every']} until {row['repeat_until']}" if row.get("repeat_every") else ""
        lines.append(f"| {row['cell']} | {row['h3_resolution']} | {row['slot']} | {row['slot_end']} | {repeats} | "
                     f"{row['mean']:.3f} | {row['mean_error_bound']:.3g} | {row['method']} |")
    lines += ["", "## Files", "", "- `release.csv`: one row per published node", "- `answers.csv`: the node "
              "answering each listed grid", "- `summary.json`: the numbers above", ""]
    return "\n".join(lines + _outlook_lines(s))


def write_user_release(result: UserRelease, out: str | Path, *, overwrite: bool = False,
                       make_map: bool = True, unit: str | None = None) -> dict[str, Path]:
    """Write release.csv, summary.json and report.md into folder ``out`` atomically (refused if
    ``out`` is not empty unless ``overwrite``; the multi-resolution release adds answers.csv; with
    ``make_map``, map.png), and ``diagnostics.json`` in the diagnostics folder for the data holder
    (timings are never published: the exact sampler's time depends on the noise drawn)."""
    def write(tmp: Path) -> dict[str, str]:
        result.table.to_csv(tmp / "release.csv", index=False, float_format="%.10g")
        payload: dict[str, Any] = to_jsonable(result.summary.as_dict())
        (tmp / "summary.json").write_text(json.dumps(payload, indent=2) + "\n")
        (tmp / "report.md").write_text(user_report_markdown(result))
        (tmp / DIAGNOSTICS).mkdir()
        (tmp / DIAGNOSTICS / "diagnostics.json").write_text(json.dumps(to_jsonable(result.diagnostics), indent=2) + "\n")
        files = {"release": "release.csv", "summary": "summary.json", "report": "report.md",
                 "diagnostics": f"{DIAGNOSTICS}/diagnostics.json",
                 **extra_files(result, tmp, unit=unit, figures=make_map)}  # report.html, GIS files, map.png
        if result.answers is not None:
            result.answers.to_csv(tmp / "answers.csv", index=False)
            files["answers"] = "answers.csv"
        return files

    return write_atomically(out, write, overwrite=overwrite)
