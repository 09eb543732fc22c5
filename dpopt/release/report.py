"""Files of a release: release.csv, summary.json, suppressed.csv, map.png, report.md.

Everything written is either a DP output (noisy means and variances) or a function of the public
occupancy array (counts, sensitivities, noise scales, suppressed pairs, error bounds), so the files
can be published together; the map and the per-cell averages are post-processing of DP outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..cli_common import to_jsonable
from .release import ReleaseResult

__all__ = ["write_report", "cell_summary", "plot_map", "report_markdown"]


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
    """A warning line when records were dropped because of their value (occupancy then depends on
    values, outside the seed 002 neighbour relation unless validity is public)."""
    by_value = int(ing.get("dropped_out_of_range", 0)) + int(ing.get("missing", {}).get("value", 0))
    if not by_value:
        return []
    return [
        f"- **caveat:** {by_value} record(s) were dropped because of their value (out of range with "
        "policy drop, or a missing value), so the public counts depend on values: the guarantee covers "
        "only neighbours that agree on which records are valid (use --out-of-range clip to avoid this "
        "for out-of-range values)"
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
        "max_user_records per grid and the suppressed pairs",
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
        + f"; invalid coordinates {ing.get('invalid_coordinates', 0)}; out of [0, {s.bound:g}] dropped "
        f"{ing.get('dropped_out_of_range', 0)})",
        f"- values outside [0, {s.bound:g}]: {ing.get('out_of_range', 0)} "
        f"(policy {ing.get('out_of_range_policy', 'clip')}, clipped {ing.get('clipped', 0)})",
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
        "- `suppressed.csv`: the suppressed (user, grid) pairs",
        "- `map.png`: released means on the hexagons",
        "",
        f"Timings (s): {', '.join(f'{k} {v:.2f}' for k, v in result.diagnostics.get('timings', {}).items())}",
        "",
    ]
    return "\n".join(lines)


def write_report(result: ReleaseResult, out: str | Path, *, make_map: bool = True) -> dict[str, Path]:
    """Write the release files into directory ``out`` (created); returns their paths."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        from .._validation import DpoptInputError

        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (a file exists there)") from None
    paths: dict[str, Path] = {}
    paths["release"] = out / "release.csv"
    result.table.to_csv(paths["release"], index=False, float_format="%.10g")
    paths["suppressed"] = out / "suppressed.csv"
    result.suppressed_frame().to_csv(paths["suppressed"], index=False)
    paths["summary"] = out / "summary.json"
    payload: dict[str, Any] = to_jsonable(result.summary.as_dict())
    paths["summary"].write_text(json.dumps(payload, indent=2) + "\n")
    if make_map:
        paths["map"] = plot_map(result, out / "map.png")
    paths["report"] = out / "report.md"
    paths["report"].write_text(report_markdown(result))
    return paths
