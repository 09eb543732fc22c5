"""Files of a release: what may be published, and diagnostics for the data holder.

Published (the top of ``out``): release.csv, summary.json, map.png, report.md. Everything there is
either a DP output (noisy means and variances), a function of the public occupancy array under the
public-occupancy model (counts, sensitivities, noise scales, error bounds; see
:mod:`.privacy_model`) or a public parameter (U, ε, the budgets used); the map and the per-cell
averages are post-processing of DP outputs. See models/release.md, "What is published, and why it
may be".

Not for publication (``out/diagnostics/``): suppressed.csv and kept_pairs.csv (raw user ids and
their record counts per grid: anyone holding the data can recount the privacy loss K from them) and
ingest.json (counts that depend on values, e.g. how many values were clipped, and timings, which
correlate with the drawn noise).

Writing is atomic: every file goes into a temporary folder beside ``out`` that is renamed into place
only when complete, so a failure leaves nothing behind; a non-empty ``out`` is refused unless
``overwrite=True`` (then replaced in one rename).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..cli_common import to_jsonable
from .privacy_model import VALUE_DEPENDENT_INGEST, privacy_model_lines
from .release import ReleaseResult

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

#: name of the sub-folder of ``out`` with files for the data holder only
DIAGNOSTICS = "diagnostics"
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
    """Released means on the H3 hexagons: all slots combined (left) and the busiest slot (right)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    from .grid import cell_polygons

    import h3

    U = result.summary.bound
    cells = cell_summary(result)
    table = result.table[result.table["released"]]
    busiest = table.groupby("slot")["n_records"].sum().idxmax() if len(table) else None
    one = table[table["slot"] == busiest]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.6), constrained_layout=True)
    panels = [
        (axes[0], cells["cell"].to_numpy(), cells["mean"].to_numpy(),
         f"all {result.summary.grids} grids, slots combined per cell"),
        (axes[1], one["cell"].to_numpy(), one["mean"].to_numpy(), f"slot {busiest} (busiest)"),
    ]
    mappable = None
    for ax, cell_hex, values, title in panels:
        ints = np.asarray([h3.str_to_int(c) for c in cell_hex], dtype=np.int64)
        polys = cell_polygons(ints)
        coll = PolyCollection(polys, array=np.clip(values, 0.0, U), cmap="viridis",
                              edgecolors="0.3", linewidths=0.2)
        coll.set_clim(0.0, U)
        ax.add_collection(coll)
        if polys:
            allpts = np.concatenate(polys)
            ax.set_xlim(allpts[:, 0].min(), allpts[:, 0].max())
            ax.set_ylim(allpts[:, 1].min(), allpts[:, 1].max())
        ax.set_aspect(1.0 / np.cos(np.deg2rad(np.mean(ax.get_ylim()))))
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        ax.set_title(title, fontsize=10)
        mappable = coll
    s = result.summary
    fig.suptitle(
        f"DP released mean (clipped to [0, {U:g}]), H3 res {s.h3_resolution}, slot {s.slot}, "
        f"plan {s.plan}{' + pseudo-users' if s.pseudo_users else ''}: user-level DP with "
        f"total epsilon = K*eps = {s.degradation}*{s.epsilon:g} = {s.epsilon_total:g}",
        fontsize=10,
    )
    if mappable is not None:
        fig.colorbar(mappable, ax=axes, shrink=0.8, label="released mean")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def report_markdown(result: ReleaseResult) -> str:
    """A short human-readable report of a release."""
    s = result.summary
    ing = result.diagnostics.get("ingest", s.ingest)
    t = result.table
    rel = t[t["released"]]
    lines = [
        "# dpopt release report",
        "",
        f"Mean and variance of the values in every (H3 cell at resolution {s.h3_resolution}) x "
        f"({s.slot} UTC slot) grid, released with user-level differential privacy "
        "(seed 002: CLIP mechanism per grid, composition by Theorem II.3).",
        "",
        "## Privacy model",
        "",
        *"\n\n".join(privacy_model_lines()).split("\n"),  # one paragraph each
        "",
        "## Privacy accounting",
        "",
        f"- per-grid budget: epsilon = {s.epsilon:g}, split between mean and variance "
        f"{'equally (eps/2 + eps/2)' if s.split == 'equal' else 'optimally per grid'}",
        f"- plan: **{s.plan}**{' + pseudo-user clipping' if s.pseudo_users else ''} (status: {s.plan_status})",
        f"- degradation K = max over users of grids kept = **{s.degradation}** "
        f"(without a plan: {s.degradation_baseline})",
        f"- the release is user-level DP with total **epsilon = K * epsilon = {s.epsilon_total:g}** (without a plan "
        f"{s.epsilon_total_baseline:g}; basic composition over all {s.grids} grids would give "
        f"{s.epsilon_basic_composition:g})",
        f"- noise: {s.noise}",
        "- public by assumption (seed 002 §II-C): the occupancy array, i.e. n_users, n_records and "
        "max_user_records per grid (the suppressed and kept pairs, with raw user ids, are in diagnostics/, not published)",
        *_value_drop_caveat(ing),
        "",
        "## Accuracy",
        "",
        f"- worst-case error bound E = max over grids of (mean bias + variance bias + expected |noise|) "
        f"= **{s.error_bound:.6g}** (target {s.error_bound_target:.6g}); with the discrete sampler's "
        f"rounding: {s.error_bound_released:.10g}",
        f"- suppressed (user, grid) pairs: {s.suppressed_pairs} ({s.suppressed_records} records); "
        f"records cut by pseudo-user clipping: {s.truncated_records}; grids withheld: {s.withheld_grids}",
        "",
        "## Input",
        "",
        f"- records read {ing.get('records_read', 0)}, kept {ing.get('records_kept', 0)}, "
        f"dropped {s.dropped_records} (missing fields {ing.get('dropped_missing', 0)}: "
        + ", ".join(f"{k} {v}" for k, v in ing.get("missing", {}).items())
        + f"; invalid coordinates {ing.get('invalid_coordinates', 0)}"
        + (f"; out of [0, {s.bound:g}] dropped {ing.get('dropped_out_of_range', 0)}"
           if ing.get("out_of_range_policy", "clip") == "drop" else "")
        + ")",
        f"- values outside [0, {s.bound:g}]: policy {ing.get('out_of_range_policy', 'clip')}; how many were "
        "out of range depends on values and is not published (diagnostics/ingest.json)",
        f"- users {s.users}, grids {s.grids}, occupied (user, grid) pairs {s.pairs}, records aggregated {s.records}",
        "",
        "## Grids",
        "",
        f"- released {len(rel)} of {len(t)}; users per grid median "
        f"{float(np.median(t['n_users'])) if len(t) else 0:g}, max {int(t['n_users'].max()) if len(t) else 0}",
        "",
        "Largest grids (by records):",
        "",
        "| cell | slot | users | records | mean | variance | error bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, row in rel.nlargest(10, "n_records").iterrows():
        lines.append(
            f"| {row['cell']} | {row['slot']} | {row['n_users']} | {row['n_records']} | "
            f"{row['mean']:.3f} | {row['variance']:.3f} | {row['error_bound']:.4g} |"
        )
    lines += [
        "",
        "## Files",
        "",
        "- `release.csv`: one row per grid (grid, cell, slot, counts, released mean and variance, "
        "sensitivities, noise scales, per-grid error bound)",
        "- `summary.json`: the numbers above",
        "- `map.png`: released means on the hexagons",
        f"- `{DIAGNOSTICS}/` (NOT for publication, for the data holder): `suppressed.csv` and "
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
    epsilon_mean: Any, epsilon_variance: Any, epsilon: float, *, discrete: bool, digits: int = 12
) -> tuple[list[str], list[str]]:
    """Per grid, the texts written to release.csv for ε_μ and ε_Var (empty where not released).

    ``discrete``: the sampler spends ε' = ε rounded down to a multiple of 2^-30 (noise.epsilon_rational);
    these are written exactly (a dyadic rational has a finite decimal expansion), and their sum is
    ≤ ε by construction of the release. Otherwise (numpy simulation) the float budgets are capped at
    ε − ε_μ in exact rationals and rounded DOWN to ``digits`` significant digits.

    Guarantee (checked here, per grid): read back as decimals (exact) and as doubles (float sum),
    ε_μ + ε_Var ≤ ε. A float read-back of each text rounds to a double ≤ the exact value used
    (the used value being a double ≥ the decimal), so the float sum cannot exceed it either.
    """
    from ..noise import epsilon_rational

    total = Fraction(float(epsilon))
    emu = np.asarray(epsilon_mean, dtype=float)
    evar = np.asarray(epsilon_variance, dtype=float)
    out_mu: list[str] = []
    out_var: list[str] = []
    for a, b in zip(emu, evar):
        if not (np.isfinite(a) and np.isfinite(b)):
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
        while fa + fb > total or float(ta) + float(tb) > float(epsilon):  # safety net: float read-back
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


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def check_out(out: Any, *, overwrite: bool = False) -> Path:
    """Validate the output folder before any work: a directory path, empty or absent unless
    ``overwrite``; its parent is created. Returns it as a Path."""
    if isinstance(out, bool) or not isinstance(out, (str, os.PathLike)) or not str(out):
        raise DpoptInputError(f"`out` must be a directory path; got {out!r}")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (a file exists there)")
    if _is_nonempty_dir(path) and not overwrite:
        raise DpoptInputError(
            f"`out` must be an empty or new folder; got {str(out)!r} (not empty). Pass overwrite=True "
            "(CLI: --overwrite) to replace it"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (its parent is a file)") from None
    return path


def _write_files(result: ReleaseResult, tmp: Path, *, make_map: bool) -> dict[str, str]:
    """Write every file into ``tmp``; returns key -> path relative to ``tmp``."""
    names: dict[str, str] = {}
    diag = tmp / DIAGNOSTICS
    diag.mkdir()
    table = result.table.copy()
    if {"epsilon_mean", "epsilon_variance"} <= set(table.columns):
        mu, var = published_budgets(table["epsilon_mean"], table["epsilon_variance"], result.summary.epsilon,
                                    discrete=result.summary.granularity > 0)
        table["epsilon_mean"] = pd.Series(mu, index=table.index, dtype=object)
        table["epsilon_variance"] = pd.Series(var, index=table.index, dtype=object)
    table.to_csv(tmp / "release.csv", index=False, float_format="%.10g")
    names["release"] = "release.csv"
    (tmp / "summary.json").write_text(json.dumps(published_summary(result), indent=2) + "\n")
    names["summary"] = "summary.json"
    if make_map:
        plot_map(result, tmp / "map.png")
        names["map"] = "map.png"
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
    return names


def write_report(
    result: ReleaseResult, out: str | Path, *, make_map: bool = True, overwrite: bool = False
) -> dict[str, Path]:
    """Write the release into folder ``out`` atomically; returns the paths of the files.

    Published files at the top of ``out`` (release.csv, summary.json, map.png, report.md);
    ``out/diagnostics/`` holds suppressed.csv, kept_pairs.csv and ingest.json for the data holder
    only (module doc). Everything is written into a temporary folder beside ``out`` and renamed
    into place when complete: on any failure nothing is left behind. A non-empty ``out`` is refused
    unless ``overwrite``, which replaces it (the old folder is removed only after the new one is
    complete).
    """
    out = check_out(out, overwrite=overwrite)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    old: Path | None = None
    try:
        names = _write_files(result, tmp, make_map=make_map)
        if out.exists():
            if _is_nonempty_dir(out):
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
                os.replace(out, old / "x")
            else:
                out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "x").exists() and not out.exists():
            os.replace(old / "x", out)  # put the previous release back
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return {k: out / v for k, v in names.items()}
