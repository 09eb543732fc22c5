"""Benchmark of the multi-resolution `user` release on the embedded Austin day (models/hierarchy.md).

Run: ``PYTHONPATH=. python tests/benchmarks/bench_hierarchy.py`` (a few minutes at most; numpy noise,
simulation only). Writes tests/benchmarks/results/hierarchy.md.

Scores (reusable: :func:`node_truth`, :func:`score_release`): on the finest grids (res 8 × 1 h)
with ≥ 10 users, the median |error| of the answer (the smallest released node containing the grid,
``Estimates.answers``) against the grid's truth (the mean of ALL its records, clamped to [0, U]),
next to the flat direct release (``release_user`` on the same public list, same (k, c), same ε);
coverage of the stated 90 % intervals of ``mean`` and ``mean_direct`` against each node's own
all-records truth, over the measured nodes and over the released nodes, pooled over seeds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpopt.datasets import load_austin_sample
from dpopt.estimation.hierarchical import estimate_hierarchical
from dpopt.hierarchy.tree import build_hierarchy
from dpopt.release import Budget, GridOptions, InputOptions, NoiseOptions, UserOptions, contributions, release_user
from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels, node_sums
from dpopt.privacy.user.partitions import PartitionList

U = 120.0
RES = 8
OUT = Path(__file__).parent / "results" / "hierarchy.md"


def node_truth(agg, measurements) -> tuple[np.ndarray, np.ndarray]:
    """(all-records mean, users summed over finest grids) of every node of ``measurements``."""
    m = measurements
    from dpopt.hierarchy.tree import Level

    hier = build_hierarchy(m.finest["cell"].to_numpy(), m.finest["slot"].to_numpy(),
                           tuple(Level(*lv) for lv in m.info["levels"]))
    key = pd.MultiIndex.from_arrays([agg.slots, agg.cells])
    idx = key.get_indexer(pd.MultiIndex.from_arrays([m.finest["slot"].to_numpy(), m.finest["cell"].to_numpy()]))
    rec, s, users = (np.zeros(len(m.finest)) for _ in range(3))
    have = idx >= 0
    grid_sum = np.bincount(agg.pair_grid, weights=agg.sum, minlength=agg.n_grids)
    rec[have] = agg.grid_records()[idx[have]]
    s[have] = grid_sum[idx[have]]
    users[have] = agg.grid_users()[idx[have]]
    with np.errstate(invalid="ignore", divide="ignore"):
        return node_sums(hier, s) / node_sums(hier, rec), node_sums(hier, users)


def score_release(est, truth: np.ndarray, users: np.ndarray, *, min_users: int = 10) -> dict[str, float]:
    """Median |error| of the answers on finest grids with ≥ ``min_users`` users; coverage of both
    intervals over measured and released nodes (counts, to pool over seeds)."""
    T = est.table
    fin = est.measurements.finest["node"].to_numpy()
    ans = est.answers["node"].to_numpy()
    sel = users[fin] >= min_users
    measured = np.isfinite(T["mean_direct"].to_numpy()) & np.isfinite(truth)
    rel = T["released"].to_numpy() & np.isfinite(truth)
    inside_d = np.abs(T["mean_direct"].to_numpy() - truth) <= T["mean_direct_error_bound"].to_numpy()
    inside_e = np.abs(T["mean"].to_numpy() - truth) <= T["mean_error_bound"].to_numpy()
    return {
        "err_eb": float(np.median(np.abs(T["mean"].to_numpy()[ans] - truth[fin])[sel])),
        "err_direct": float(np.median(np.abs(T["mean_direct"].to_numpy()[ans] - truth[fin])[sel])),
        "answer_level": float(np.mean(T["level"].to_numpy()[ans][sel])),
        "n_meas": int(measured.sum()), "in_d_meas": int(inside_d[measured].sum()), "in_e_meas": int(inside_e[measured].sum()),
        "n_rel": int(rel.sum()), "in_d_rel": int(inside_d[rel].sum()), "in_e_rel": int(inside_e[rel].sum()),
        "released": int(T["released"].sum()), "var_released": int((T["variance_released"] & T["released"]).sum()),
    }


def flat_error(agg, plist, bounds, eps, seed, truth_fin, sel) -> float:
    listed = pd.DataFrame({"cell": [__import__("h3").int_to_str(int(c)) for c in plist.cells],
                           "slot": pd.to_datetime(plist.slots, utc=True).strftime("%Y-%m-%dT%H:%M:%SZ")})
    r = release_user(agg, Budget(epsilon_total=eps),
                     UserOptions(partitions=listed, bounds=bounds, pool_fraction=0.0, strategy="fixed"), bound=U,
                     noise=NoiseOptions("numpy", seed=seed))
    return float(np.median(np.abs(r.table["mean"].to_numpy() - truth_fin)[sel]))


def _markdown(frame: pd.DataFrame) -> str:
    head = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * frame.shape[1] + "\n"
    return head + "\n".join("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False))


def synthetic_records(seed: int = 11) -> pd.DataFrame:
    """300 users over 49 res-8 cells (one res-7 parent) and 4 neighbours × 24 h; each user visits a
    few cells with a heavy-tailed number of records; grid means vary by cell, hour and user."""
    import h3

    rng = np.random.default_rng(seed)
    base = h3.latlng_to_cell(30.27, -97.74, 7)
    cells = sorted(h3.cell_to_children(base, RES)) + [
        c for n in sorted(h3.grid_disk(base, 1))[:4] for c in sorted(h3.cell_to_children(n, RES))[:3]]
    per_user = rng.pareto(1.2, 300).clip(0, 50) * 60 + 20
    user = np.repeat(np.arange(300), per_user.astype(int))
    home = rng.integers(0, len(cells), 300)
    cell = (home[user] + rng.integers(0, 6, user.size)) % len(cells)
    hour = (rng.integers(0, 24, 300)[user] + rng.integers(0, 4, user.size)) % 24
    mu = 25 + 0.5 * cell + 8 * np.sin(hour / 24 * 2 * np.pi) + rng.normal(0, 6, 300)[user]
    lat, lng = np.array([h3.cell_to_latlng(cells[i]) for i in cell]).T
    return pd.DataFrame({"user_id": user.astype(str), "latitude": lat, "longitude": lng,
                         "timestamp": pd.to_datetime(1_441_065_600 + hour * 3600 + rng.integers(0, 3600, user.size),
                                                     unit="s", utc=True),
                         "value": np.clip(rng.normal(mu, 10), 0, U)})


CONFIGS = (((8, 4), "random", 0.0, None), ((8, 4), "random", 0.5, None), ((8, 4), "count", 0.5, None),
           ((32, 1), "random", 0.5, None), ((32, 1), "count", 0.5, None), ((4, 2), "random", 0.5, None),
           ((2, 4), "random", 0.5, None), ((4, 2), "random", 0.0, 0), ((4, 2), "random", 0.5, 0))


#: (bounds, level_bounds, level order) compared by :func:`run_level_bounds` (issue 21, hier2)
LEVEL_BOUND_CONFIGS = (((8, 4), None, "default"), ((8, 4), "scaled", "default"), ((4, 2), None, "default"),
                       ((4, 2), "scaled", "default"), ((8, 4), None, "time first"), ((8, 4), "scaled", "time first"))


def time_first_levels():
    """(8, 1 h) → (8, 3 h) → (8, period) → (7, period) → … → (4, period): all time steps first."""
    from dpopt.hierarchy.tree import HOUR_NS, Level

    return (Level(RES, HOUR_NS), Level(RES, 3 * HOUR_NS)) + tuple(Level(r, 0) for r in range(RES, 3, -1))


def run_level_bounds(records: pd.DataFrame, seeds: int = 5, kappa: float = 0.5) -> pd.DataFrame:
    """Shared (k, c) vs per-level bounds (measure_levels' ``level_bounds``), levels chosen by phase 1."""
    agg, _ = contributions(records, bound=U, grid=GridOptions(RES, "1h"), io=InputOptions(out_of_range="clip"),
                           keep_samples=True)
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    rows = []
    for eps in (1.0, 10.0):
        for bounds, lb, order in LEVEL_BOUND_CONFIGS:
            acc = []
            levels = time_first_levels() if order == "time first" else None
            for seed in range(seeds):
                m = measure_levels(agg, plist, bound=U, bounds=bounds, epsilon=eps,
                                   plan=LevelPlan(level_bounds=lb, levels=levels),
                                   sampling=LevelNoise(noise="numpy", seed=seed))
                truth, users = node_truth(agg, m)
                acc.append(score_release(estimate_hierarchical(m, bias_allowance=kappa), truth, users)
                           | {"first": m.info["first_level"]})
            a = pd.DataFrame(acc)
            rows.append({"eps": eps, "k,c": f"{bounds[0]},{bounds[1]}", "level_bounds": str(lb), "level order": order,
                         "kappa": kappa, "first measured level": a["first"].tolist(),
                         "answer level": round(a.answer_level.mean(), 2),
                         "median err EB": round(a.err_eb.median(), 2), "median err direct": round(a.err_direct.median(), 2),
                         "cov direct (measured)": round(a.in_d_meas.sum() / a.n_meas.sum(), 3),
                         "cov EB (released)": round(a.in_e_rel.sum() / max(a.n_rel.sum(), 1), 3)})
    return pd.DataFrame(rows)


def kept_records(agg, plist, m, bounds, level_bounds, seed: int) -> np.ndarray:
    """Records kept by bounding per node (the private R_v that ``measure_levels`` noises; diagnostic)."""
    from dpopt.hierarchy.tree import Level
    from dpopt.privacy.user.levels import _bounded_finest, _per_level_sums, resolve_level_bounds

    hier = build_hierarchy(plist.cells, plist.slots, tuple(Level(*lv) for lv in m.info["levels"]))
    rng = np.random.default_rng(seed)
    R, Y, Z, lat = _bounded_finest(agg, plist, bounds[0], bounds[1], U, 12, rng)
    shared = [node_sums(hier, v) for v in (R, Y, Z)]
    if level_bounds is None:
        return shared[0]
    lb = resolve_level_bounds(level_bounds, hier, *bounds)
    return _per_level_sums(agg, plist, hier, lb, lat, rng, shared=shared)[0]


def level_diagnostics(records: pd.DataFrame, eps: float = 10.0, bounds=(8, 4), seed: int = 0) -> pd.DataFrame:
    """Per level, on the finest grids with ≥ 10 users: the **noise-free** error of answering every grid
    by its level-l ancestor's all-records mean (the best any estimator answering at level l can do),
    the share of all records that bounding keeps at that level (shared (k, c) vs per-level "scaled"),
    and the median direct half-width (κ = 0) of those ancestors when every level is measured with
    equal shares at ``eps`` (a diagnostic on private data, not a release)."""
    agg, _ = contributions(records, bound=U, grid=GridOptions(RES, "1h"), io=InputOptions(out_of_range="clip"),
                           keep_samples=True)
    plist = PartitionList.from_grids(agg.cells, agg.slots)
    out = {}
    for lb in (None, "scaled"):
        m = measure_levels(agg, plist, bound=U, bounds=bounds, epsilon=eps,
                           plan=LevelPlan(level_bounds=lb, first_level=0, level_split="equal"),
                           sampling=LevelNoise(noise="numpy", seed=seed))
        hw = estimate_hierarchical(m, bias_allowance=0.0).table["mean_direct_error_bound"].to_numpy()
        out[lb] = (hw, kept_records(agg, plist, m, bounds, lb, seed))
    truth, users = node_truth(agg, m)
    hier_rec = node_sums(build_hierarchy(plist.cells, plist.slots, _levels(m)),
                         np.asarray(agg.grid_records()[match_index(agg, plist)], dtype=float))
    parent, lev = m.nodes["parent"].to_numpy(), m.nodes["level"].to_numpy()
    fin = m.finest["node"].to_numpy()
    sel = users[fin] >= 10
    rows, a = [], fin.copy()
    for li in range(int(lev.max()) + 1):
        row = {"level": li, "res, slot (h)": f"{m.info['levels'][li][0]}, {m.info['levels'][li][1] / 3.6e12:g}",
               "noise-free error": round(float(np.median(np.abs(truth[a] - truth[fin])[sel])), 2)}
        for lb in (None, "scaled"):
            hw, kept = out[lb]
            row[f"kept share ({lb})"] = round(float(kept[lev == li].sum() / hier_rec[lev == li].sum()), 3)
            row[f"median half-width ({lb})"] = round(float(np.median(hw[a][sel])), 1)
        rows.append(row)
        a = parent[a]
    return pd.DataFrame(rows)


def _levels(m):
    from dpopt.hierarchy.tree import Level

    return tuple(Level(*lv) for lv in m.info["levels"])


def match_index(agg, plist) -> np.ndarray:
    """Aggregate grid of every listed grid (the list here is the occupied grids, so all exist)."""
    from dpopt.privacy.user.partitions import match_partitions

    return match_partitions(agg, plist)[0]


def main(seeds: int = 5) -> str:
    data = (("the embedded Austin day", load_austin_sample()), ("synthetic data (synthetic_records)", synthetic_records()))
    parts = [run(name, records, seeds) for name, records in data]
    for name, records in data:
        parts.append(f"## per-level bounds (`level_bounds`), {name}\n\n"
                     "Shared finest-grid bounds (None) vs per-level bounds (\"scaled\"), levels chosen by phase 1, "
                     f"{seeds} seeds, same scores as above.\n\n" + _markdown(run_level_bounds(records, seeds)) + "\n")
        for eps in (1.0, 10.0):
            parts.append(f"### per level, ε = {eps:g}, (k, c) = (8, 4), seed 0 (diagnostic on the private data)\n\n"
                         "noise-free error: median |level-l ancestor's all-records mean − grid truth| (the floor of any "
                         "answer at level l); kept share: bounded records / all records at level l; median half-width: "
                         "direct interval (κ = 0) of the ancestors, every level measured with equal shares.\n\n"
                         + _markdown(level_diagnostics(records, eps=eps)) + "\n")
    return "\n".join(parts)


def run(name: str, records: pd.DataFrame, seeds: int) -> str:
    agg, _ = contributions(records, bound=U, grid=GridOptions(RES, "1h"), io=InputOptions(out_of_range="clip"),
                           keep_samples=True)
    plist = PartitionList.from_grids(agg.cells, agg.slots)  # the occupied grids as the public list
    rows = []
    for eps in (1.0, 10.0):
        for bounds, prio, kappa, first in CONFIGS:
            if True:
                acc, flat = [], []
                t0 = time.perf_counter()
                for seed in range(seeds):
                    m = measure_levels(agg, plist, bound=U, bounds=bounds, epsilon=eps,
                                       plan=LevelPlan(priority=prio, first_level=first),
                                       sampling=LevelNoise(noise="numpy", seed=seed))
                    est = estimate_hierarchical(m, confidence=0.9, bias_allowance=kappa)
                    truth, users = node_truth(agg, m)
                    acc.append(score_release(est, truth, users) | {"first": m.info["first_level"]})
                    fin = m.finest["node"].to_numpy()
                    if prio == "count":  # release_user ranks by count
                        flat.append(flat_error(agg, plist, bounds, eps, seed, truth[fin], users[fin] >= 10))
                a = pd.DataFrame(acc)
                rows.append({
                    "eps": eps, "k,c": f"{bounds[0]},{bounds[1]}", "priority": prio, "kappa": kappa,
                    "levels measured": "chosen" if first is None else f"all from {first}",
                    "median err EB": round(a.err_eb.median(), 2), "median err direct": round(a.err_direct.median(), 2),
                    "flat direct (release_user)": round(float(np.median(flat)), 2) if flat else "",
                    "answer level": round(a.answer_level.mean(), 2), "first measured level": a["first"].tolist(),
                    "released nodes": round(a.released.mean(), 1),
                    "cov direct (measured)": round(a.in_d_meas.sum() / a.n_meas.sum(), 3),
                    "cov EB (measured)": round(a.in_e_meas.sum() / a.n_meas.sum(), 3),
                    "cov direct (released)": round(a.in_d_rel.sum() / max(a.n_rel.sum(), 1), 3),
                    "cov EB (released)": round(a.in_e_rel.sum() / max(a.n_rel.sum(), 1), 3),
                    "n measured": int(a.n_meas.sum()), "var released": round(a.var_released.mean(), 1),
                    "s": round(time.perf_counter() - t0, 1)})
                print(rows[-1], file=sys.stderr)
    table = pd.DataFrame(rows)
    truth, users = node_truth(agg, m)
    fin = m.finest["node"].to_numpy()
    sel = users[fin] >= 10
    map_mean = float(np.bincount(agg.pair_grid, weights=agg.sum).sum() / agg.n_records)
    consts = (f"Constants on the same {int(sel.sum())} grids: exact map-wide mean (oracle) "
              f"{np.median(np.abs(map_mean - truth[fin][sel])):.2f}, U/2 {np.median(np.abs(U / 2 - truth[fin][sel])):.2f}.\n\n")
    text = (f"## {name}\n\n"
            f"Finest grids: H3 res {RES} × 1 h, the {agg.n_grids} occupied grids as the public list; "
            f"U = {U:g} km/h; {seeds} seeds, numpy Laplace noise; 90 % intervals; target τ = U/10.\n"
            "Errors: median |answer − all-records truth| over finest grids with ≥ 10 users. Coverage: share of "
            "nodes whose all-records truth lies in the stated interval, pooled over seeds. `flat direct`: "
            "today's per-grid release_user (top-k by count, no pooling) on the same list.\n"
            + consts
            + _markdown(table) + "\n")
    return text


if __name__ == "__main__":
    body = main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    OUT.write_text("# Multi-resolution `user` release (tests/benchmarks/bench_hierarchy.py)\n\n" + body)
    print(body)
