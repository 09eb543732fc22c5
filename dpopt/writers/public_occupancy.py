"""Files of a ``public-occupancy`` release: what may be published, and diagnostics for the data holder.

Published (the top of ``out``): release.csv, summary.json, map.png, report.md. Everything there is
either a DP output (noisy means and variances), a function of the public occupancy array under the
public-occupancy model (counts, sensitivities, noise scales, error bounds; see
:mod:`.privacy_model`) or a public parameter (U, ε, the budgets used); the map and the per-cell
averages are post-processing of DP outputs. See models/release.md, "What is published, and why it
may be".

Not for publication (the sibling folder ``<out>.diagnostics/``, :func:`.folder.diagnostics_folder`):
suppressed.csv and kept_pairs.csv (raw user ids and
their record counts per grid: anyone holding the data can recount the privacy loss K from them) and
ingest.json (counts that depend on values, e.g. how many values were clipped, and timings, which
correlate with the drawn noise).

Writing is atomic (:mod:`.folder`). Nothing is computed here: the table and the summary are
formatted (:mod:`.public_occupancy_result`) from the privacy model's Measurements and the
estimation layer's Estimates; this module writes them.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._json import to_jsonable
from ..privacy.model_text import VALUE_DEPENDENT_INGEST, privacy_model_lines
from .public_occupancy_result import ReleaseResult
from ._published import accounting_lines
from .folder import DIAGNOSTICS, check_out, write_atomically
from .hooks import extra_files

__all__ = [
    "write_report",
    "cell_summary",
    "plot_map",
    "report_markdown",
    "check_out",
    "published_budgets",
    "kept_pairs_frame",
    "DIAGNOSTICS",
    "UNPUBLISHED_SUMMARY_KEYS",
]

#: summary fields never written to summary.json (timings correlate with the drawn noise)
UNPUBLISHED_SUMMARY_KEYS: frozenset[str] = frozenset({"timings"})


def cell_summary(result: ReleaseResult) -> pd.DataFrame:
    """Per H3 cell: released means combined over slots with inverse noise-variance weights.

    The weights 1/scale² are public (noise scales depend on counts only), so the combination is
    post-processing of the DP release. Columns: cell, cell_lat, cell_lng, slots, n_records, mean.
    """
    t = result.table[result.table["released"]]
    w = 1.0 / np.square(t["mean_noise_scale"].to_numpy(dtype=float))
    frame = pd.DataFrame(
        {"cell": t["cell"], "cell_lat": t["cell_lat"], "cell_lng": t["cell_lng"],
         "w": w, "wm": w * t["mean"].to_numpy(dtype=float), "n_records": t["n_records"]}
    )
    g = frame.groupby("cell", sort=True)
    out = g.agg(cell_lat=("cell_lat", "first"), cell_lng=("cell_lng", "first"), slots=("w", "size"),
                n_records=("n_records", "sum"), w=("w", "sum"), wm=("wm", "sum")).reset_index()
    out["mean"] = out["wm"] / out["w"]
    out["mean_noise_scale"] = np.sqrt(1.0 / out["w"])  # std/√2 of the combined Laplace noise
    return out.drop(columns=["w", "wm"])


def plot_map(result: ReleaseResult, path: str | Path) -> Path:
    """Released means on the H3 hexagons: all slots combined (left) and the busiest slot (right);
    cells/grids the plan withheld are drawn grey. No pyplot, no back-end switch."""
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure

    import h3

    from ..records.grid import cell_polygons

    L, U = result.summary.lower, result.summary.bound
    cells = cell_summary(result)
    table = result.table
    rel = table[table["released"]]
    busiest = rel.groupby("slot")["n_records"].sum().idxmax() if len(rel) else None
    one = table[table["slot"] == busiest]
    withheld_cells = sorted(set(table["cell"]) - set(cells["cell"]))
    fig = Figure(figsize=(12, 5.6), constrained_layout=True)
    axes = fig.subplots(1, 2)
    panels = [
        (axes[0], cells["cell"].to_numpy(), cells["mean"].to_numpy(), np.asarray(withheld_cells, dtype=object),
         f"all {result.summary.grids} grids, slots combined per cell"),
        (axes[1], one.loc[one["released"], "cell"].to_numpy(), one.loc[one["released"], "mean"].to_numpy(),
         one.loc[~one["released"], "cell"].to_numpy(), f"slot {busiest} (busiest)"),
    ]
    mappable = None
    for ax, cell_hex, values, grey_hex, title in panels:
        allpolys = []
        for hexes, kwargs in ((grey_hex, {"facecolors": "0.85"}),
                              (cell_hex, {"array": np.clip(values, L, U), "cmap": "viridis"})):
            polys = cell_polygons(np.asarray([h3.str_to_int(c) for c in hexes], dtype=np.int64))
            coll = PolyCollection(polys, edgecolors="0.3", linewidths=0.2, **kwargs)
            if "array" in kwargs:
                coll.set_clim(L, U)
                mappable = coll
            ax.add_collection(coll)
            allpolys += polys
        if allpolys:
            allpts = np.concatenate(allpolys)
            ax.set_xlim(allpts[:, 0].min(), allpts[:, 0].max())
            ax.set_ylim(allpts[:, 1].min(), allpts[:, 1].max())
        ax.set_aspect(1.0 / np.cos(np.deg2rad(np.mean(ax.get_ylim()))))
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        ax.set_title(title + " (grey: withheld)", fontsize=10)
    s = result.summary
    fig.suptitle(
        f"DP released mean (in [{L:g}, {U:g}]), H3 res {s.h3_resolution}, slot {s.slot}, plan {s.plan}"
        f"{' + pseudo-users' if s.pseudo_users else ''}; {_spend_text(s)}",
        fontsize=10,
    )
    if mappable is not None:
        fig.colorbar(mappable, ax=axes, shrink=0.8, label="released mean")
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path


def plot_frontier(result: ReleaseResult, path: str | Path) -> Path:
    """The budget plan's frontier: grids within the target τ against τ, the chosen τ marked."""
    from matplotlib.figure import Figure

    fr = result.summary.frontier
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    ax.plot(fr["tau"], fr["coverage"], marker="o")
    if result.summary.target is not None:
        ax.axvline(result.summary.target, color="0.4", linestyle="--", label=f"chosen tau = {result.summary.target:.3g}")
        ax.legend()
    ax.set_xscale("log")
    ax.set_xlabel("target tau for the mean (data units)")
    ax.set_ylabel("grids released within tau")
    ax.set_title(f"coverage vs target at {_spend_text(result.summary)}", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path


def _spend_text(s: Any) -> str:
    """What the whole release costs every user, in one line."""
    if s.mechanism == "gaussian":
        text = f"rho-zCDP with rho = {s.rho_total:.6g} for every user"
        if s.epsilon_total is not None:
            text += f" (implies ({s.epsilon_total:.6g}, {s.delta:g})-DP)"
        return text
    if s.budget_mode == "per-grid":
        return f"user-level DP with total epsilon = K*eps = {s.degradation}*{s.epsilon:g} = {s.epsilon_total:g}"
    return f"user-level DP with total epsilon = {s.epsilon_total:.6g} for every user"


def _value_drop_caveat(ing: dict[str, Any]) -> list[str]:
    """A warning line when records may be dropped because of their value (policy drop, or missing
    values): the occupancy then depends on values, outside the neighbour relation unless validity is
    public. Decided by the policy and the (published) missing-value count, not by how many values
    were out of range (a value-dependent count, never published)."""
    missing_value = int(ing.get("missing", {}).get("value", 0))
    if ing.get("out_of_range_policy", "clip") != "drop" and not missing_value:
        return []
    return [
        "- **caveat:** records are dropped because of their value (out of range with policy drop, or a "
        "missing value), so the public counts depend on values: the guarantee covers only neighbours "
        "that agree on which records are valid (use --out-of-range clip to avoid this for out-of-range "
        "values)"
    ]


def _accounting_lines(result: ReleaseResult) -> list[str]:
    """report.md: what the release costs, in words, for the budget mode used."""
    s = result.summary
    ing = result.diagnostics.get("ingest", s.ingest)
    split = "equally" if s.split == "equal" else "optimally per grid"
    lines = [*accounting_lines(s.as_dict()),
             f"- budget: {s.budget}; each grid's budget split between mean and variance {split} (a user "
             "spends the budgets of the grids it is kept in)"]
    lines += [
        f"- plan: **{s.plan}**{' + pseudo-user clipping' if s.pseudo_users else ''} (status: {s.plan_status}"
        + (f", gap {s.plan_gap:.3g}" if s.plan_gap and np.isfinite(s.plan_gap) else "") + ")",
        f"- K = the most released grids any user is kept in = **{s.degradation}** (every record kept: "
        f"{s.degradation_baseline})",
        f"- **{_spend_text(s)}**, recounted from the kept (user, grid) pairs and the budgets the "
        "samplers use (kept_pairs.csv in the diagnostics folder lets anyone holding the data recount it)",
    ]
    if s.budget_mode == "per-grid":
        lines.append(f"- without a plan: {s.epsilon_total_baseline:g}; basic composition over all {s.grids} "
                     f"grids would give {s.epsilon_basic_composition:g}")
    lines += [
        f"- noise: {s.noise}",
        "- public by assumption (the public-occupancy model): the occupancy array, i.e. n_users, n_records and "
        "max_user_records per grid (the suppressed and kept pairs, with raw user ids, are in the diagnostics folder, "
        "not published)",
        *_value_drop_caveat(ing),
    ]
    return lines


def _accuracy_lines(result: ReleaseResult) -> list[str]:
    """report.md: the error bounds, with their criterion and confidence in words."""
    s = result.summary
    t = result.table
    rel = t[t["released"]]
    crit = ("noise only: the error against the statistic of the kept records, treating the kept users "
            "as a sample of the grid's users" if s.criterion == "noise" else
            "worst case: clipping bias of the kept set (for any data) plus noise")
    lines = [
        f"- released grids: **{s.released_grids}** of {s.grids}; withheld (not published, no noise drawn): "
        f"{s.withheld_grids}",
        f"- per-grid error bounds in release.csv (`mean_error_bound`, `variance_error_bound`) hold with "
        f"probability {s.confidence:g} each; criterion: {crit}; the other criterion's bounds are in the "
        "columns beside them",
    ]
    if len(rel):
        b = rel["mean_error_bound"].to_numpy(dtype=float)
        lines.append(f"- mean error bound over released grids: median {np.median(b):.4g}, "
                     f"best {b.min():.4g}, worst {b.max():.4g} (values in [{s.lower:g}, {s.bound:g}])")
    if s.target is not None:
        bp = result.plan.info.get("budget_plan")
        rule = bp.info.get("target_rule") if bp is not None else None
        lines.append(f"- budget planner target: tau = {s.target:.4g} for the mean; grids within it: "
                     f"**{s.grids_within_target}**" + (f". tau was not given, so it is the {rule}" if rule else ""))
    if s.frontier is not None:
        pts = ", ".join(f"{t:.3g}: {int(c)}" for t, c in zip(s.frontier["tau"], s.frontier["coverage"]))
        lines.append(f"- frontier (tau: grids within tau), from public counts only: {pts} (frontier.png)")
    lines += [
        f"- worst-case error (bias + expected |noise|, mean + variance): largest "
        f"**{s.error_bound:.6g}**" + (f" (target {s.error_bound_target:.6g})"
                                      if s.budget_mode == "per-grid" and np.isfinite(s.error_bound_target) else ""),
        f"- suppressed (user, grid) pairs: {s.suppressed_pairs} ({s.suppressed_records} records); "
        f"records cut by per-grid caps: {s.truncated_records}",
        "- released values are clipped into "
        + ("[0, U] (mean) and [0, U^2/4]" if s.lower == 0 else
           f"[L, U] = [{s.lower:g}, {s.bound:g}] (mean) and [0, (U - L)^2/4]") + " (variance), "
        "post-processing of DP outputs; the noisy values before clipping are `mean_raw`, `variance_raw`",
    ]
    return lines


def _input_lines(s: Any, ing: dict[str, Any]) -> list[str]:
    """report.md: what was read and dropped (value-independent counts only)."""
    return [
        "## Input",
        "",
        f"- records read {ing.get('records_read', 0)}, kept {ing.get('records_kept', 0)}, "
        f"dropped {s.dropped_records} (missing fields {ing.get('dropped_missing', 0)}: "
        + ", ".join(f"{k} {v}" for k, v in ing.get("missing", {}).items())
        + f"; invalid coordinates {ing.get('invalid_coordinates', 0)}"
        + (f"; out of [{s.lower:g}, {s.bound:g}] dropped {ing.get('dropped_out_of_range', 0)}"
           if ing.get("out_of_range_policy", "clip") == "drop" else "")
        + ")",
        f"- values outside [{s.lower:g}, {s.bound:g}]: policy {ing.get('out_of_range_policy', 'clip')}; how many were "
        "out of range depends on values and is not published (ingest.json in the diagnostics folder)",
        f"- users {s.users}, grids {s.grids}, occupied (user, grid) pairs {s.pairs}, records aggregated {s.records}",
        "",
    ]


def report_markdown(result: ReleaseResult) -> str:
    """A short human-readable report of a release."""
    s = result.summary
    ing = result.diagnostics.get("ingest", s.ingest)
    t = withhold_variance(result)
    rel = t[t["released"]]
    lines = [
        "# dpopt release report",
        "",
        f"Mean and variance of the values in every (H3 cell at resolution {s.h3_resolution}) x "
        f"({s.slot} UTC slot) grid, released with user-level differential privacy "
        "(each user's contribution bounded in every grid; one user's privacy loss added up over the grids it "
        "appears in).",
        "",
        "## Privacy model",
        "",
        *"\n\n".join(privacy_model_lines()).split("\n"),  # one paragraph each
        "",
        "## Privacy accounting",
        "",
        *_accounting_lines(result),
        "",
        "## Accuracy",
        "",
        *_accuracy_lines(result),
        "",
        *_input_lines(s, ing),
        "## Grids",
        "",
        f"- released {len(rel)} of {len(t)}; users per grid median "
        f"{float(np.median(t['n_users'])) if len(t) else 0:g}, max {int(t['n_users'].max()) if len(t) else 0}",
        "",
        "Largest grids (by records):",
        "",
        "| cell | slot | users | records | mean | variance | mean error bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, row in rel.nlargest(10, "n_records").iterrows():
        lines.append(
            f"| {row['cell']} | {row['slot']} | {row['n_users']} | {row['n_records']} | "
            f"{row['mean']:.3f} | {'withheld' if np.isnan(row['variance']) else format(row['variance'], '.3f')} | "
            f"{row['mean_error_bound']:.4g} |"
        )
    lines += [
        "",
        "## Files",
        "",
        "- `release.csv`: one row per grid (grid, cell, slot, counts, released mean and variance, "
        "sensitivities, noise scales, per-grid error bound)",
        "- `summary.json`: the numbers above",
        "- `map.png`: released means on the hexagons (withheld grids grey)",
        *(["- `frontier.png`: grids within the target against the target (budget plan, public counts only)"]
          if s.frontier is not None else []),
        "- the folder `<out>.diagnostics/` beside this one (NOT for publication, for the data holder): "
        "`suppressed.csv` and "
        "`kept_pairs.csv` (raw user ids, records per grid; recount K from them), `ingest.json` "
        "(value-dependent counts such as clipped values, and timings)",
        "",
    ]
    return "\n".join(lines)


def _decimal_text(x: Fraction) -> str:
    """The exact decimal expansion of a dyadic rational (k/2^j has at most j decimals)."""
    if x == 0:
        return "0"
    den = x.denominator
    j = den.bit_length() - 1
    if den != 1 << j:  # pragma: no cover - only dyadic rationals reach here
        raise ValueError("not a dyadic rational")
    digits = str(x.numerator * 5**j).rjust(j + 1, "0")  # x = digits · 10^-j, exactly
    whole, frac = digits[: len(digits) - j], digits[len(digits) - j :].rstrip("0")
    return whole + ("." + frac if frac else "")


def _floor_text(x: Fraction, digits: int) -> tuple[str, Fraction]:
    """x ≥ 0 rounded DOWN to ``digits`` significant decimal digits: (text, exact value)."""
    if x <= 0:
        return "0", Fraction(0)
    s = digits - 1 - math.floor(math.log10(float(x)))
    while math.floor(x * Fraction(10) ** s) >= 10**digits:  # log10 rounded up near a power of 10
        s -= 1
    while math.floor(x * Fraction(10) ** s) < 10 ** (digits - 1):
        s += 1
    n = math.floor(x * Fraction(10) ** s)
    return format(Decimal(n).scaleb(-s).normalize(), "f"), Fraction(n) / Fraction(10) ** s


def published_budgets(
    epsilon_mean: Any, epsilon_variance: Any, epsilon: Any, *, discrete: bool, digits: int = 12
) -> tuple[list[str], list[str]]:
    """Per grid, the texts written to release.csv for ε_μ and ε_Var (empty where not released).

    ``epsilon`` is the budget each grid's two shares must stay within: the per-grid ε (a scalar)
    or one budget per grid (total-budget plans); the same holds for ρ of a Gaussian release.

    ``discrete``: the sampler spends ε' = ε rounded down to a multiple of 2^-30 (noise.epsilon_rational);
    these are written exactly (a dyadic rational has a finite decimal expansion), and their sum is
    ≤ ε by construction of the release. Otherwise (numpy simulation) the float budgets are capped at
    ε − ε_μ in exact rationals and rounded DOWN to ``digits`` significant digits.

    Guarantee (checked here, per grid): read back as decimals (exact) and as doubles (float sum),
    ε_μ + ε_Var ≤ ε. A float read-back of each text rounds to a double ≤ the exact value used
    (the used value being a double ≥ the decimal), so the float sum cannot exceed it either.
    """
    from ..noise import epsilon_rational

    emu = np.asarray(epsilon_mean, dtype=float)
    evar = np.asarray(epsilon_variance, dtype=float)
    caps = np.broadcast_to(np.asarray(epsilon, dtype=float), emu.shape)
    out_mu: list[str] = []
    out_var: list[str] = []
    for a, b, cap in zip(emu, evar, caps):
        total = Fraction(float(cap)) if np.isfinite(cap) else Fraction(0)
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(cap)):
            out_mu.append("")
            out_var.append("")
            continue
        if discrete:
            fa = epsilon_rational(float(a)) if a > 0 else Fraction(0)
            fb = epsilon_rational(float(b)) if b > 0 else Fraction(0)
            ta, tb = _decimal_text(fa), _decimal_text(fb)
        else:
            ta, fa = _floor_text(Fraction(float(a)), digits)
            tb, fb = _floor_text(min(Fraction(float(b)), total - fa), digits)
        while fa + fb > total or float(ta) + float(tb) > float(cap):  # safety net: float read-back
            tb, fb = _floor_text(fb * (1 - Fraction(1, 10**digits)), digits)
        out_mu.append(ta)
        out_var.append(tb)
    return out_mu, out_var


def kept_pairs_frame(result: ReleaseResult) -> pd.DataFrame:
    """The kept (user, grid) pairs: user, cell, slot, records_kept (Γ_{g,ℓ} > 0).

    Diagnostics for the data holder: with it anyone holding the data recounts
    K = max_ℓ |{g : Γ_{g,ℓ} > 0}| (seed 002 Thm II.3), the rows per user.
    """
    agg = result.aggregate
    gamma = result.gamma()
    p = np.flatnonzero(gamma > 0)
    g = agg.pair_grid[p]
    return pd.DataFrame(
        {
            "user": agg.users[agg.pair_user[p]],
            "cell": result.table["cell"].to_numpy()[g],
            "slot": result.table["slot"].to_numpy()[g],
            "records_kept": gamma[p].astype(np.int64),
        }
    )


def published_summary(result: ReleaseResult) -> dict[str, Any]:
    """summary.json: the summary without timings and without value-dependent ingest counts."""
    payload: dict[str, Any] = to_jsonable(result.summary.as_dict())
    # defence in depth: ReleaseSummary has no such fields; never let one reach summary.json
    for key in UNPUBLISHED_SUMMARY_KEYS:
        payload.pop(key, None)
    for key in VALUE_DEPENDENT_INGEST:
        payload.get("ingest", {}).pop(key, None)
    return payload


def _diagnostics_ingest(result: ReleaseResult) -> dict[str, Any]:
    return to_jsonable(result.diagnostics)


def withhold_variance(result: ReleaseResult) -> pd.DataFrame:
    """release.csv's variance columns as the estimation layer decided them
    (:func:`dpopt.estimation.direct.direct`: ``variance_released`` and ``variance_withheld_reason``
    of the Estimates): where a released grid's variance interval is not narrower than [0, U²/4],
    ``variance``, its bound and ``variance_raw`` are blank and the reason says why."""
    out = result.table.copy()
    est = result.estimates.table
    shown = est["variance_released"].to_numpy(dtype=bool)
    withheld = out["released"].to_numpy(dtype=bool) & ~shown
    for col in ("variance", "variance_raw", "variance_error_bound"):
        out[col] = np.where(withheld, np.nan, out[col].to_numpy(dtype=float))
    at = out.columns.get_loc("variance_error_bound") + 1
    out.insert(at, "variance_released", shown)
    out.insert(at + 1, "variance_withheld_reason", est["variance_withheld_reason"].to_numpy())
    return out


def _write_files(result: ReleaseResult, tmp: Path, *, make_map: bool, value_unit: str | None = None) -> dict[str, str]:
    """Write every file into ``tmp``; returns key -> path relative to ``tmp``."""
    names: dict[str, str] = {}
    diag = tmp / DIAGNOSTICS
    diag.mkdir()
    table = withhold_variance(result)
    unit = result.plan.unit
    cap = result.summary.epsilon if result.summary.epsilon is not None else table[unit].to_numpy(dtype=float)
    mu, var = published_budgets(table[f"{unit}_mean"], table[f"{unit}_variance"], cap,
                                discrete=result.summary.granularity > 0)
    table[f"{unit}_mean"] = pd.Series(mu, index=table.index, dtype=object)
    table[f"{unit}_variance"] = pd.Series(var, index=table.index, dtype=object)
    # the grid's budget: the exact decimal sum of the two published shares (never above them)
    with localcontext(prec=200):  # exact: the shares have at most ~60 significant digits
        total = [format(Decimal(a) + Decimal(b), "f") if a else "" for a, b in zip(mu, var)]
    table[unit] = pd.Series(total, index=table.index, dtype=object)
    table.to_csv(tmp / "release.csv", index=False, float_format="%.10g")
    names["release"] = "release.csv"
    (tmp / "summary.json").write_text(json.dumps(published_summary(result), indent=2) + "\n")
    names["summary"] = "summary.json"
    tables = result.plan.info.get("hierarchy")
    if tables is not None:  # plan="hierarchy": each finest grid -> its answering published node (public)
        tables["answers"].to_csv(tmp / "answers.csv", index=False)
        names["answers"] = "answers.csv"
    (tmp / "report.md").write_text(report_markdown(result))
    names["report"] = "report.md"
    result.suppressed_frame().to_csv(diag / "suppressed.csv", index=False)
    names["suppressed"] = f"{DIAGNOSTICS}/suppressed.csv"
    kept_pairs_frame(result).to_csv(diag / "kept_pairs.csv", index=False)
    names["kept_pairs"] = f"{DIAGNOSTICS}/kept_pairs.csv"
    (diag / "ingest.json").write_text(json.dumps(_diagnostics_ingest(result), indent=2) + "\n")
    names["ingest"] = f"{DIAGNOSTICS}/ingest.json"
    (diag / "README.txt").write_text(
        "NOT FOR PUBLICATION. Diagnostics for the data holder: raw user ids with their record counts per "
        "grid (suppressed.csv, kept_pairs.csv) and counts that depend on values plus timings (ingest.json).\n"
    )
    # report.html, the GIS files and, with make_map, map.png and frontier.png (dpopt.writers.figures)
    return {**names, **extra_files(result, tmp, unit=value_unit, figures=make_map)}


def write_report(
    result: ReleaseResult, out: str | Path, *, make_map: bool = True, overwrite: bool = False,
    unit: str | None = None,
) -> dict[str, Path]:
    """Write the release into folder ``out`` atomically (:func:`write_atomically`); returns the
    paths of the files.

    Published files at the top of ``out`` (release.csv, summary.json, map.png, report.md);
    ``<out>.diagnostics/`` beside it holds suppressed.csv, kept_pairs.csv and ingest.json for the data holder
    only (module doc).
    """
    return write_atomically(out, lambda tmp: _write_files(result, tmp, make_map=make_map, value_unit=unit), overwrite=overwrite)
