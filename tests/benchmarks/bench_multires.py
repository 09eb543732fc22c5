"""Accuracy benchmark of the multi-resolution release: releases scored on the finest grids.

Every method answers the finest grids the user asked for (H3 res 7 × 1 h) that hold ≥ 10 users; a
grid is answered by the smallest published node containing it (``scoring.score_table``: for a flat
release only the grid itself; unanswered grids are counted and charged the error of U/2), against
the grid's truth (exact mean of the clamped values of all its records). Same total budget for all.

Methods (rows):

* the integrated default of ``dpopt release --partitions`` (``--only-integrated``): adaptive
  multi-resolution release, histogram bounds, hierarchical estimation, exact discrete noise; its
  ``mean`` and, as a second row, its ``mean_direct``;
* dpopt ``user`` flat release (``release_user``, numpy noise = simulation) with
  - ``select``: the previous default bounds rule (permute-and-flip, own top-k);
  - ``histogram own``: the new default (noisy contribution histogram → predicted-error minimiser);
  - ``histogram shared``: the same with the shared public priority (hash order of grid keys);
  - ``fixed (k, c) own`` / ``fixed (k, c) shared``: public bounds PipelineDP's default row uses;
  each also as its ``mean_pooled`` column (empirical Bayes, post-processing);
* PipelineDP 0.3.1 (LocalBackend, Laplace, MEAN): "default" = occupancy-median bounds (what a
  user would read off the data); "tuned" = best (k, c) of a small sweep chosen on the truth;
* OpenDP 0.16 (``--opendp``, Polars API, ``dp.mean`` per grid, one repetition): median bounds and
  the best of the sweep on the truth; rows truncated beforehand in a public hash order;
* Tumult Analytics 0.21 (``--only-tumult PYTHON``, its own virtualenv, ``tumult_peer.py``; one
  repetition): Tumult's own truncation (MaxGroupsPerID k, MaxRowsPerGroupPerID c) and ``average``
  per grid, median bounds and the best of a sweep on the truth; private keys by ``get_groups`` at
  half the budget;
* the constants U/2 and the exact map-wide mean (an oracle);
* ``--chosen-k SEEDS``: stability of the automatic k (the bounds choice only, SEEDS noise draws).

Settings: ε ∈ {1, 10}; "public, pure ε" = public partition list (the occupied grids: an oracle
list) and pure ε-DP; "private, (ε, 1e-6)" = private partition selection at δ = 1e-6.

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_multires.py --data day --reps 3
     PYTHONPATH=$PWD python tests/benchmarks/bench_multires.py --data full --reps 2
     PYTHONPATH=$PWD python tests/benchmarks/bench_multires.py --data day --chosen-k 20
     PYTHONPATH=$PWD python tests/benchmarks/bench_multires.py --data day --only-integrated --reps 5
     PYTHONPATH=$PWD python tests/benchmarks/bench_multires.py --data full --only-profile --reps 5
Writes results/multires_<data>.json and assembles results/multires.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_userdp import DATASETS, load, records_frame, records_rows  # noqa: E402
from scoring import finest_grids, score_table  # noqa: E402

DELTA = 1e-6
SETTINGS = (("public, pure eps", True), ("private, (eps, 1e-6)", False))


def labels_of(agg) -> pd.DataFrame:
    from dpopt.records.grid import cell_strings, slot_strings

    return pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})


def dpopt_tables(agg, eps, public, seed, bounds, priority):
    from dpopt.release import Budget, NoiseOptions, UserOptions, release_user

    budget = Budget(epsilon_total=eps) if public else Budget(epsilon_total=eps, delta=DELTA)
    options = UserOptions(partitions=labels_of(agg) if public else None, bounds=bounds, priority=priority,
                          strategy="fixed")
    t0 = time.perf_counter()
    res = release_user(agg, budget, options, bound=agg.bound, noise=NoiseOptions("numpy", seed=seed))
    wall = time.perf_counter() - t0
    t = res.table
    pooled = t.assign(mean=t["mean_pooled"])
    return t, pooled, (res.summary.k, res.summary.c), wall


def pdp_table(rows, agg, eps, k, c, public):
    import pipeline_dp

    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=0.0 if public else DELTA)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.MEAN], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=int(k), max_contributions_per_partition=int(c), min_value=0.0, max_value=agg.bound)
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                     value_extractor=lambda r: r[2])
    t0 = time.perf_counter()
    res = engine.aggregate(rows, params, ext, public_partitions=list(range(agg.n_grids)) if public else None)
    acc.compute_budgets()
    out = list(res)
    wall = time.perf_counter() - t0
    lab = labels_of(agg)
    g = np.asarray([o[0] for o in out], dtype=np.int64)
    m = np.clip(np.asarray([o[1].mean for o in out], dtype=float), 0.0, agg.bound)
    return pd.DataFrame({"cell": lab["cell"].to_numpy()[g], "slot": lab["slot"].to_numpy()[g], "mean": m}), wall


def opendp_table(agg, eps, k, c, public):
    """OpenDP 0.16 (Polars API): per-grid ``dp.mean((0, U))`` (noisy un-centred sum / noisy length,
    eps split evenly by OpenDP) with the privacy unit bounded to ``c`` rows per grid in ≤ ``k``
    grids. The truncation is done here, before OpenDP, in a public hash order of grid keys (the
    order OpenDP's own truncation uses is also data-independent); public keys (``with_keys``) or
    OpenDP's private key release at δ = 1e-6. Means clipped into [0, U] (post-processing)."""
    import opendp.prelude as dp
    import polars as pl

    from dpopt.privacy.user.bounding import bounded_gamma
    from dpopt.privacy.user.priority import hash_priority, priority_ranks

    dp.enable_features("contrib")
    U = agg.bound
    gamma = bounded_gamma(agg, priority_ranks(agg, hash_priority(agg)), int(k), int(c))
    start = agg.samples.offsets[:-1]
    pair = np.repeat(np.arange(agg.n_pairs), gamma)
    within = np.arange(pair.size) - np.repeat(np.cumsum(gamma) - gamma, gamma)
    vals = np.clip(agg.samples.values[start[pair] + within], 0.0, U)
    df = pl.DataFrame({"grid": agg.pair_grid[pair].astype(np.int64), "v": vals})
    t0 = time.perf_counter()
    unit = dp.unit_of(contributions=[dp.polars.Bound(by=["grid"], per_group=int(c)),
                                     dp.polars.Bound(by=["grid"], num_groups=int(k))])
    loss = dp.loss_of(epsilon=float(eps)) if public else dp.loss_of(epsilon=float(eps), delta=DELTA)
    margins = [dp.polars.Margin(by=["grid"], invariant="keys" if public else None, max_length=10**7,
                                max_groups=10**7)]
    ctx = dp.Context.compositor(data=df.lazy(), privacy_unit=unit, privacy_loss=loss, split_evenly_over=1,
                                margins=margins)
    # private keys need a dp.len() in the same aggregation (OpenDP releases the keys whose noisy
    # length passes its threshold); with public keys only the mean is asked for
    aggs = [pl.col("v").dp.mean((0.0, U))] if public else [dp.len(), pl.col("v").dp.mean((0.0, U))]
    q = ctx.query().group_by("grid").agg(*aggs)
    if public:
        q = q.with_keys(pl.DataFrame({"grid": np.arange(agg.n_grids, dtype=np.int64)}).lazy())
    out = q.release().collect()
    wall = time.perf_counter() - t0
    lab = labels_of(agg)
    g = out["grid"].to_numpy()
    m = np.clip(np.nan_to_num(out["v"].to_numpy(), nan=U / 2.0), 0.0, U)
    return pd.DataFrame({"cell": lab["cell"].to_numpy()[g], "slot": lab["slot"].to_numpy()[g], "mean": m}), wall


INTEGRATED = "dpopt default: place (cells over the period + map, DP cap T and clamp B, tree BLUP)"


def integrated_table(agg, eps, seed, resolution="auto", profile=None):
    """The front door's release (``release_user`` with ``UserOptions(partitions=…, resolution=…)``;
    "auto": the default, the place release), exact discrete noise, seeded. Returns (published
    nodes, the same with ``mean`` = ``mean_direct``, the bounds chosen: (T, B) for the place
    release, (k, c) otherwise, wall)."""
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.release import release_user

    t0 = time.perf_counter()
    r = release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=labels_of(agg), resolution=resolution,
                                                                 profile=profile),
                     bound=agg.bound, noise=NoiseOptions(seed=seed))
    wall = time.perf_counter() - t0
    t = r.table
    direct = t.assign(mean=t["mean_direct"], mean_error_bound=t["mean_direct_error_bound"])
    info = r.measurements.info
    chosen = (info["record_cap"], info["clamp"]) if info.get("shape") == "place" else (r.summary.k, r.summary.c)
    return t, direct, chosen, wall


#: the adaptive multi-level release (the default before session 5), kept as a comparison row
ADAPTIVE = "dpopt resolution='adaptive': multi-level (histogram bounds, level choice, hierarchical)"


#: the adaptive release over hour-of-day windows (``--profile day``, models/hierarchy.md §2)
PROFILE = "dpopt --profile day: adaptive levels over hour-of-day windows"


def integrated_rows(args, agg, fin, configs=((INTEGRATED, "auto", None), (ADAPTIVE, "adaptive", None))) -> list:
    """Rows of the default (place) release and of resolution='adaptive' (public list, pure ε)."""
    rows = []
    for name, resolution, profile in configs:
        for eps in args.eps:
            sc, sd, chosen, walls = [], [], [], []
            for rep in range(args.reps):
                t, td, kc, wall = integrated_table(agg, eps, 1000 + rep, resolution, profile)
                sc.append(score_table(t, fin))
                sd.append(score_table(td, fin))
                chosen.append(list(kc))
                walls.append(wall)
            base = {"eps": eps, "setting": SETTINGS[0][0], "bounds": chosen, "wall": float(np.mean(walls))}
            rows.append({**base, "method": name, **summarise(sc)})
            rows.append({**base, "method": name + ", mean_direct column", **summarise(sd)})
            print(name, eps, round(rows[-2]["median"], 2), round(rows[-2]["coverage"], 3), round(rows[-1]["coverage"], 3),
                  chosen, flush=True)
    return rows


def add_rows(args, prefix: str | tuple[str, ...], rows_of, meta_key: str) -> None:
    """Add (or replace) the rows whose method starts with ``prefix`` in results/multires_<data>.json."""
    p = HERE / "results" / f"multires_{args.data}.json"
    out = json.loads(p.read_text())
    agg, _ = load(args.data)
    fin = finest_grids(agg, bound=agg.bound)
    out["rows"] = rows_of(args, agg, fin) + [r for r in out["rows"] if not r["method"].startswith(prefix)]
    out["meta"][meta_key] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "reps": args.reps}
    p.write_text(json.dumps(out, indent=1))


PRIVATE = "dpopt multi-resolution, private selection (library: private_multires)"


def private_multires_table(agg, eps, seed, **kw) -> pd.DataFrame:
    """Published rows of the private-selection multi-resolution release: the measurements of
    :func:`dpopt.privacy.user.strategies.private_adaptive.measure_private_multires` (no list, (ε, 1e-6), exact
    discrete noise), ``estimate_hierarchical`` at 95 %, the released rows with ``slot_end``."""
    from dpopt.estimation.hierarchical import estimate_hierarchical
    from dpopt.privacy.options import NoiseOptions
    from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires

    m = measure_private_multires(agg, epsilon=eps, delta=DELTA, bound=agg.bound, noise=NoiseOptions(seed=seed), **kw)
    if m.n_nodes == 0:
        return pd.DataFrame({"cell": [], "slot": [], "mean": []})
    t = estimate_hierarchical(m, confidence=0.95).table
    return t[t["released"]].assign(slot_end=t["slot"] + t["slot_ns"]).astype(
        {"cell": np.int64, "slot": np.int64, "slot_end": np.int64})


#: alternatives to the default finest-level selection rule: (label, k, own_top, dwell) of a KeepRule
PRIVATE_VARIANTS = (("finest k = 4, shared order (session 9)", 4, 0, 0.0), ("finest k = 1, shared order", 1, 0, 0.0),
                    ("finest k = 2, one where it dwells", 2, 1, 10.0),
                    ("finest k = 2, one by own records wherever", 2, 1, 0.0))


def private_multires_rows(args, agg, fin) -> list:
    """Rows of :func:`private_multires_table` at its defaults, then with the finest level's
    selection rules of :data:`PRIVATE_VARIANTS`; seeds 1000+rep."""
    from dpopt.privacy.user.select_levels import KeepRule

    rows = []
    for label, *rule in ((None, None),) + PRIVATE_VARIANTS:
        method = PRIVATE if label is None else f"{PRIVATE}: {label}"
        kw = {} if label is None else {"finest": KeepRule(*rule)}
        for eps in args.eps:
            sc, walls = [], []
            for rep in range(args.reps):
                t0 = time.perf_counter()
                t = private_multires_table(agg, eps, 1000 + rep, **kw)
                walls.append(time.perf_counter() - t0)
                sc.append(score_table(t, fin))
            rows.append({"eps": eps, "setting": SETTINGS[1][0], "method": method, "bounds": [[4, 8]],
                         "wall": float(np.mean(walls)), **summarise(sc)})
            print(method, eps, round(rows[-1]["median"], 2), rows[-1]["own_grids"], flush=True)
    return rows


def constant_table(agg, value):
    return labels_of(agg).assign(mean=float(value))


def summarise(scores, extra=None):
    err = np.concatenate([s.errors for s in scores])
    row = {"median": float(np.median(err)), "p90": float(np.percentile(err, 90)),
           "median_answered": float(np.nanmedian([s.median_answered for s in scores])) if any(
               np.isfinite(s.median_answered) for s in scores) else float("nan"),
           "answered": float(np.mean([s.answered for s in scores])),
           "coverage": float(np.nanmean([s.coverage for s in scores])) if any(
               np.isfinite(s.coverage) for s in scores) else float("nan"),
           "nodes": float(np.mean([s.nodes for s in scores])),
           "own_grids": float(np.mean([s.answered_own * s.grids for s in scores]))}
    row.update(extra or {})
    return row


def run(args) -> dict:
    agg, t_agg = load(args.data)
    fin = finest_grids(agg, bound=agg.bound)
    rows = records_rows(agg)
    med_k, med_c = int(np.median(agg.user_grids())), int(np.median(agg.count))
    out = {"data": args.data, "users": agg.n_users, "grids": agg.n_grids, "records": agg.n_records,
           "scored": int(fin.scored.sum()), "median_bounds": [med_k, med_c], "rows": []}
    overall = float(fin.sums.sum() / fin.records.sum())
    for name, val in (("constant U/2", agg.bound / 2.0), ("constant: exact map-wide mean (oracle)", overall)):
        s = score_table(constant_table(agg, val), fin)
        out["rows"].append({"eps": None, "setting": "any", "method": name, **summarise([s])})
    configs = [("dpopt select own", "select", "own"), ("dpopt histogram own", "histogram", "own"),
               ("dpopt histogram shared", "histogram", "shared"),
               (f"dpopt fixed ({med_k},{med_c}) own", (med_k, med_c), "own"),
               (f"dpopt fixed ({med_k},{med_c}) shared", (med_k, med_c), "shared")]
    out["rows"] += integrated_rows(args, agg, fin)
    for eps in args.eps:
        for setting, public in SETTINGS:
            for name, bounds, priority in configs:
                sc, sp, chosen, walls = [], [], [], []
                for rep in range(args.reps):
                    t, tp, kc, wall = dpopt_tables(agg, eps, public, 1000 + rep, bounds, priority)
                    sc.append(score_table(t, fin))
                    sp.append(score_table(tp, fin))
                    chosen.append(list(kc))
                    walls.append(wall)
                base = {"eps": eps, "setting": setting, "bounds": chosen, "wall": float(np.mean(walls))}
                out["rows"].append({**base, "method": name, **summarise(sc)})
                out["rows"].append({**base, "method": name + ", pooled column", **summarise(sp)})
                print(out["rows"][-2]["method"], eps, setting, round(out["rows"][-2]["median"], 1), chosen, flush=True)
            pdp = []
            for rep in range(args.pdp_reps):
                t, wall = pdp_table(rows, agg, eps, med_k, med_c, public)
                pdp.append(score_table(t, fin))
            out["rows"].append({"eps": eps, "setting": setting, "method": "PipelineDP default (median bounds)",
                                "bounds": [[med_k, med_c]], "wall": wall, **summarise(pdp)})
            best = None
            for k in args.sweep_k:
                for c in args.sweep_c:
                    ss = [score_table(pdp_table(rows, agg, eps, k, c, public)[0], fin) for _ in range(args.pdp_reps)]
                    row = {"eps": eps, "setting": setting, "method": "PipelineDP tuned on the truth",
                           "bounds": [[k, c]], **summarise(ss)}
                    if best is None or row["median"] < best["median"]:
                        best = row
            out["rows"].append(best)
            print("PipelineDP", eps, setting, round(out["rows"][-2]["median"], 1), round(best["median"], 1), flush=True)
            if args.opendp:
                out["rows"] += opendp_rows(args, agg, fin, eps, setting, public, med_k, med_c)
    out["meta"] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
                   "reps": args.reps, "pdp_reps": args.pdp_reps, "sweep": [args.sweep_k, args.sweep_c],
                   "aggregate_s": t_agg}
    return out


def opendp_rows(args, agg, fin, eps, setting, public, med_k, med_c) -> list:
    """OpenDP rows of one (eps, setting): median bounds and the best of the sweep on the truth, each
    over ``args.opendp_reps`` runs (OpenDP draws its own noise, unseeded)."""
    def row(k, c, method):
        runs = [opendp_table(agg, eps, k, c, public) for _ in range(args.opendp_reps)]
        return {"eps": eps, "setting": setting, "method": method, "bounds": [[k, c]],
                "wall": float(np.mean([w for _, w in runs])), **summarise([score_table(t, fin) for t, _ in runs])}

    rows = [row(med_k, med_c, "OpenDP (median bounds)")]
    sweep = [row(k, c, "OpenDP tuned on the truth") for k in args.sweep_k for c in args.sweep_c]
    # the most grids at their own resolution any swept bounds gave (private selection: every run
    # may charge U/2 everywhere, so the error alone does not pick the bounds)
    best = {**min(sweep, key=lambda r: r["median"]), "own_grids_sweep_max": max(r["own_grids"] for r in sweep)}
    rows.append(best)
    print("OpenDP", eps, setting, round(rows[0]["median"], 1), round(best["median"], 1), flush=True)
    return rows


def tumult_rows(args, agg, fin, eps, setting, public, med_k, med_c) -> list:
    """Tumult Analytics rows of one (eps, setting) (``tumult_peer.py`` in its own virtualenv, the
    interpreter ``args.tumult``): median bounds and the best of the sweep on the truth; Tumult's
    means clipped into [0, U] (post-processing), grids it returns no mean for charged U/2."""
    import subprocess
    import tempfile

    bounds = [[med_k, med_c]] + [[k, c] for k in args.tumult_k for c in args.sweep_c]
    with tempfile.TemporaryDirectory() as tmp:
        records_frame(agg).to_parquet(f"{tmp}/rec.parquet")
        job = {"epsilon": eps, "delta": 0.0 if public else DELTA, "bound": agg.bound, "bounds": bounds,
               "keys": list(range(agg.n_grids)) if public else None}
        Path(f"{tmp}/job.json").write_text(json.dumps(job))
        subprocess.run([args.tumult, str(HERE / "tumult_peer.py"), f"{tmp}/rec.parquet", f"{tmp}/job.json",
                        f"{tmp}/out"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls = json.loads(Path(f"{tmp}/out_walls.json").read_text())
        lab = labels_of(agg)
        rows = []
        for (k, c), wall in zip(bounds, walls):
            out = pd.read_parquet(f"{tmp}/out_{k}_{c}.parquet")
            g = out["grid"].to_numpy(dtype=np.int64)
            m = np.clip(np.nan_to_num(out["mean"].to_numpy(dtype=float), nan=agg.bound / 2.0), 0.0, agg.bound)
            t = pd.DataFrame({"cell": lab["cell"].to_numpy()[g], "slot": lab["slot"].to_numpy()[g], "mean": m})
            rows.append({"eps": eps, "setting": setting, "bounds": [[k, c]], "wall": wall,
                         **summarise([score_table(t, fin)])})
    default = {**rows[0], "method": "Tumult (median bounds)"}
    best = {**min(rows[1:], key=lambda r: r["median"]), "method": "Tumult tuned on the truth"}
    print("Tumult", eps, setting, round(default["median"], 1), round(best["median"], 1), flush=True)
    return [default, best]


def add_peer(args, name: str, rows_of, public_only: bool = False) -> None:
    """Replace the rows of peer ``name`` ("OpenDP", "Tumult") in an existing results/multires_<data>.json
    with ``rows_of(args, agg, fin, eps, setting, public, med_k, med_c)`` for every (eps, setting)."""
    p = HERE / "results" / f"multires_{args.data}.json"
    out = json.loads(p.read_text())
    agg, _ = load(args.data)
    fin = finest_grids(agg, bound=agg.bound)
    med_k, med_c = out["median_bounds"]
    out["rows"] = [r for r in out["rows"] if not r["method"].startswith(name)]
    for eps in args.eps:
        for setting, public in SETTINGS:
            if public or not public_only:
                out["rows"] += rows_of(args, agg, fin, eps, setting, public, med_k, med_c)
    out["meta"][name.lower()] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                 "reps": args.opendp_reps if name == "OpenDP" else 1}
    p.write_text(json.dumps(out, indent=1))


def chosen_k(args) -> dict:
    """Distribution of the automatic (k, c) over noise draws (the bounds choice only)."""
    from dpopt.privacy.user.bounding import grid_ranks
    from dpopt.privacy.user.bounds import BoundsRule, choose_bounds
    from dpopt.privacy.user.predict import NoiseBudgets
    from dpopt.privacy.user.priority import hash_priority, priority_ranks
    from dpopt.privacy.user.split import split_budget

    agg, _ = load(args.data)
    ranks = {"own": grid_ranks(agg, np.random.default_rng(0)), "shared": priority_ranks(agg, hash_priority(agg))}
    res = []
    for eps in args.eps:
        for setting, public in SETTINGS:
            ep = 0.0 if public else 0.2 * eps
            sp = split_budget(eps * 0.85 - ep, bound=agg.bound)
            for pr, rk in ranks.items():
                for rule in ("histogram", "select"):
                    b = NoiseBudgets(count=sp.count, sum=sp.sum, selection=None if public else (ep, DELTA))
                    ch = [choose_bounds(agg, rk, 0.1 * eps, rng=np.random.default_rng(s), options=BoundsRule(
                                        rule=rule, budgets=b, bound=agg.bound, priority=pr, sum_budget=sp.sum,
                                        selection=None if public else (ep, DELTA))) for s in range(args.chosen_k)]
                    cnt = collections.Counter((x.k, x.c) for x in ch)
                    ks = sorted({x.k for x in ch})
                    res.append({"eps": eps, "setting": setting, "priority": pr, "rule": rule,
                                "k_values": ks, "pairs": [[k, c, n] for (k, c), n in cnt.most_common()]})
                    print(res[-1], flush=True)
    return {"data": args.data, "seeds": args.chosen_k, "rows": res}


def _own(row: dict, scored: int) -> str:
    """Scored grids answered at their own resolution per run (flat releases: every answer)."""
    if "own_grids_sweep_max" in row:  # OpenDP tuned: and the most any swept bounds gave
        return f"{row['own_grids']:.1f} (sweep max {row['own_grids_sweep_max']:.1f})"
    if "own_grids" in row:
        return f"{row['own_grids']:.1f}"
    if row["method"].startswith("dpopt default") or row["method"].startswith("constant"):
        return "-"
    return f"{row['answered'] * scored:.1f}"


TITLES = {"day": "Embedded Austin day", "full": "Full Austin data",
          "aircraft_a": "Aircraft A (ADS-B, Switzerland 2018-08-01, traffic's `switzerland` sample)",
          "aircraft_b": "Aircraft B (ADS-B, Paris 2021-10-07 12-15 UTC, traffic's `quickstart` sample)"}


def write_markdown() -> None:
    lines = ["# Accuracy on the finest grids (issue 21): `tests/benchmarks/bench_multires.py`", "",
             "Score: |error of the mean| on the finest grids (H3 res 7 x 1 h) with >= 10 users, each answered by the "
             "smallest published node containing it (flat releases: the grid itself); unanswered grids are charged "
             "the error of U/2 in the headline median/p90 and counted in 'answered'. 'median answered' is over "
             "answered grids only. Coverage: share of published nodes whose own truth lies in [mean +- "
             "mean_error_bound] (95 % bounds; empty nodes skipped). U = 120 km/h (buses), 1100 km/h (aircraft, "
             "tests/benchmarks/aircraft.py). dpopt rows use numpy noise "
             "(simulation) and release_user's default shares (bounds 10 %, selection 20 %, totals 5 %).", ""]
    for data in DATASETS:
        p = HERE / "results" / f"multires_{data}.json"
        if not p.exists():
            continue
        r = json.loads(p.read_text())
        m = r["meta"]
        lines += [f"## {TITLES[data]}: {r['users']} users, "
                  f"{r['grids']} grids, {r['records']} records, {r['scored']} grids with >= 10 users", "",
                  f"{m['date']}; dpopt repetitions {m['reps']}, PipelineDP repetitions {m['pdp_reps']}, PipelineDP "
                  f"sweep k in {m['sweep'][0]}, c in {m['sweep'][1]}; OpenDP and Tumult runs per setting "
                  f"{m.get('opendp', {}).get('reps', 1)} and {m.get('tumult', {}).get('reps', 1)}; median bounds "
                  f"{tuple(r['median_bounds'])}.", "",
                  "| eps | setting | method | (k, c) chosen | median / p90 err | median answered | answered | "
                  "coverage | nodes | grids at own resolution |", "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            b = row.get("bounds")
            bs = "" if not b else ", ".join(f"({k},{c})" for k, c in b[:5]) + (" ..." if len(b) > 5 else "")
            eps = "-" if row["eps"] is None else f"{row['eps']:g}"
            lines.append(f"| {eps} | {row['setting']} | {row['method']} | {bs} | {row['median']:.1f} / "
                         f"{row['p90']:.1f} | {row['median_answered']:.1f} | {row['answered']:.2f} | "
                         f"{row['coverage']:.2f} | {row['nodes']:.0f} | {_own(row, r['scored'])} |")
        lines.append("")
        pk = HERE / "results" / f"multires_k_{data}.json"
        if pk.exists():
            rk = json.loads(pk.read_text())
            lines += [f"Stability of the automatic (k, c) over {rk['seeds']} noise draws (bounds choice only):", "",
                      "| eps | setting | priority | rule | k values chosen | (k, c): times |", "|---|---|---|---|---|---|"]
            for row in rk["rows"]:
                pairs = ", ".join(f"({k},{c}): {n}" for k, c, n in row["pairs"][:6])
                lines.append(f"| {row['eps']:g} | {row['setting']} | {row['priority']} | {row['rule']} | "
                             f"{row['k_values']} | {pairs} |")
            lines.append("")
    notes = HERE / "results" / "multires_notes.txt"
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    (HERE / "results" / "multires.md").write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=DATASETS, default="day")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pdp-reps", type=int, default=2)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--sweep-k", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--sweep-c", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--chosen-k", type=int, default=0, help="only the stability of the automatic k over N seeds")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--opendp", action="store_true", help="also run OpenDP (--opendp-reps runs per setting)")
    ap.add_argument("--opendp-reps", type=int, default=1, help="OpenDP runs per (bounds, eps, setting)")
    ap.add_argument("--only-opendp", action="store_true", help="add OpenDP rows to an existing results json")
    ap.add_argument("--only-tumult", dest="tumult", metavar="PYTHON",
                    help="add Tumult Analytics rows to an existing results json, run by this interpreter (a "
                         "virtualenv with tmlt.analytics and pyarrow: Tumult pins numpy < 2, see tumult_peer.py)")
    ap.add_argument("--tumult-k", type=int, nargs="+", default=[4, 16, 64], help="Tumult's sweep over k")
    ap.add_argument("--tumult-public-only", action="store_true", help="Tumult with the public list only")
    ap.add_argument("--only-private-multires", action="store_true",
                    help="add the private multi-resolution rows to an existing results json")
    ap.add_argument("--only-integrated", action="store_true",
                    help="add the integrated default release's rows to an existing results json")
    ap.add_argument("--only-profile", action="store_true",
                    help="add the rows of the adaptive release with --profile day to an existing results json")
    args = ap.parse_args()
    if args.markdown:
        write_markdown()
        return
    if args.only_private_multires:
        add_rows(args, PRIVATE, private_multires_rows, "private_multires")
    elif args.only_integrated:
        add_rows(args, ("dpopt default", ADAPTIVE), integrated_rows, "integrated")
    elif args.only_profile:
        add_rows(args, PROFILE, lambda a, g, f: integrated_rows(a, g, f, ((PROFILE, "adaptive", "day"),)), "profile")
    elif args.only_opendp:
        add_peer(args, "OpenDP", opendp_rows)
    elif args.tumult:
        add_peer(args, "Tumult", tumult_rows, public_only=args.tumult_public_only)
    elif args.chosen_k:
        (HERE / "results" / f"multires_k_{args.data}.json").write_text(json.dumps(chosen_k(args), indent=1))
    else:
        (HERE / "results" / f"multires_{args.data}.json").write_text(json.dumps(run(args), indent=1))
    write_markdown()


if __name__ == "__main__":
    main()
