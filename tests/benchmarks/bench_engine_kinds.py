"""The engine on ten kinds of data none of the benchmark sets is: an outside check run in-house.

The benchmark sets (bench_engine.py) are buses, aircraft and three synthetic kinds; the outside
checks use other data, some where the time, not the place, sets the value. These ten are built
here, seeded, so that what the engine does on them can be read and rerun:

* ``interaction``: 300 fixed sensors in 20 clusters, 7 days; each cluster has its own peak hour
  (40 + 30·exp(−(d/2)²) at d hours from it, + N(0, 5²)), so neither place nor time alone sets the
  value, their interaction (cell × hour-of-day) does.
* ``weekly``: the same sensors over 28 days; the day of the week sets the value (30 on weekdays,
  70 at weekends, + N(0, 5²)): the grid means take two values.
* ``user``: the same sensors; each user its own level (uniform 10–90) + N(0, 3²): place and time
  explain nothing, a grid's mean is the mean of the users present.
* ``sparse``: 6,000 users of 1–3 records each at random times over 7 days, the cluster setting the
  value (uniform 20–80) + N(0, 8²): few users per grid.
* ``meters``: 300 household electricity meters, each at one address (20 clusters), a reading every 15
  minutes over 14 days (U = 10 kW): a household's own scale (log-normal, sd 0.3) times the hour of the
  day's profile (a morning peak on weekdays, a midday one at weekends, the evening peak) + N(0, 0.3²);
  the place moves nothing. An outside check's kind (Berlin meters): the time sets the value, every
  user is fixed, and the list spans two weeks, so the lattice offers the day of the week beside the
  hour of the day.
* ``biglist``: 400 fixed sensors in 12 places over 3 days, each place its own level U(10, 90) + N(0, 4²):
  the place sets the value; but the public list is every res-7 cell within 8 rings of the centre
  (217 cells) × all 72 hours, 15,624 grids of which 89 % are empty — a list drawn as a box over a map
  (an outside-style check, session 53: the engine answered every grid with the map-wide mean until
  the users' vote could waive the plan's count check, models/engine.md §5 "The vote's side").
* ``biglist_mobile``: the same, but each record at its own position in its user's place (users move
  within a place of one level): no user sees the place's spread, which lies between the places; the
  users' vote read 0.18 for the place by sums of squares, 0.50 by mean squares, 0.54 with each user's
  own records' noise taken out (models/engine.md §5), short of the margin that waives the plan's count check on this list: every grid is still answered
  by the map-wide mean (a loss to `place`, kept in the table).
* ``taxi``: 400 drivers roaming the whole city (σ 0.06° about the centre), 60–200 fares each at
  uniform times over 7 days; the fare is set by the hour of the day (a night peak at 2 h, an evening
  one at 18 h) + a gamma(2, 4) − 8 tip: the time sets the value and no user stays anywhere.
* ``payers``: 5,000 payers, each at 1–3 of 120 shops on its own weekday, in 85 % of 8 weeks; the
  shop sets the basket (uniform 15–90, times a log-normal of sd 0.35; U = 250), in daily slots: users
  of one record per grid, where no user can tell its records' noise from its spread.

* ``heavy``: 50 users of 1,500–2,500 records each (value 70 + N(0, 5²)) hold 97 % of the records;
  1,000 users of 1–5 records (30 + N(0, 5²)); all roam the city (σ 0.03°) over 14 days. Neither
  place nor time sets the value; who holds the records does, so the record cap's re-weighting of
  users is the whole error (a kind of session 62's outside-style check: the cap T = 4, intervals
  covering 0.01 of the grids).

``taxi`` and ``payers`` are built as two kinds of an outside-style check were (models/engine.md §1, §5).

Values clipped to [0, U] (U = 100 but where stated); H3 res 7 × 1 h (``payers``: 1 d); the public list
is the occupied grids (but for the big lists). Scored
as bench_engine.py scores (grids with ≥ 10 users against their own truth; coverage at a stated
0.95; width = median half-width / median |error|; every occupied grid and the one-user grids too),
for the engine and `place`, with the noise-free floors beside them; with ``--peer-reps N``
PipelineDP as bench_engine.py runs it (its (k, c) chosen against the truth: optimistic for it).

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_engine_kinds.py --seeds 6 --peer-reps 1
Writes results/kinds.json and results/kinds.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_engine import floors, peer_row, run_release, score  # noqa: E402
from collect_results import kept_notes  # noqa: E402
from scoring import finest_grids  # noqa: E402

KINDS = ("interaction", "weekly", "user", "sparse", "meters", "biglist", "biglist_mobile", "taxi", "payers", "heavy")
U = 100.0
#: the declared range of a kind other than U (kW for the meters, a basket's price for the payers)
BOUNDS = {"meters": 10.0, "payers": 250.0}
#: the slot of a kind other than 1 h
SLOTS = {"payers": "1d"}


def _positions(rng: np.random.Generator, kind: str, clusters: int):
    """(user, minute, cluster of each user, latitude, longitude) of every record."""
    days = {"weekly": 28, "meters": 14, "biglist": 3, "biglist_mobile": 3}.get(kind, 7)
    n = {"sparse": 6000, "biglist": 400, "biglist_mobile": 400}.get(kind, 300)
    cl = rng.integers(0, clusters, n)
    centre = np.c_[30.27 + rng.normal(0, 0.05, clusters), -97.74 + rng.normal(0, 0.05, clusters)]
    if kind == "sparse":
        user = np.repeat(np.arange(n), rng.integers(1, 4, n))
        minute = rng.integers(0, days * 1440, user.size)
        spread = 0.01
    elif kind == "meters":  # a reading every 15 minutes at one address
        ticks = np.arange(0, days * 1440, 15)
        user, minute = np.repeat(np.arange(n), ticks.size), np.tile(ticks, n)
        home = rng.normal(0, 0.004, (n, 2))
        return user, minute, cl, centre[cl[user], 0] + home[user, 0], centre[cl[user], 1] + home[user, 1]
    else:  # a reading every 20 minutes, half of them kept
        ticks = np.arange(0, days * 1440, 20)
        user = np.repeat(np.arange(n), ticks.size)
        minute = np.tile(ticks, n) + rng.integers(0, 20, user.size)
        keep = rng.random(user.size) < 0.5
        user, minute = user[keep], minute[keep]
        spread = 0.004
        if kind == "biglist":  # fixed sensors: each user at one address
            home = rng.normal(0, spread, (n, 2))
            return user, minute, cl, centre[cl[user], 0] + home[user, 0], centre[cl[user], 1] + home[user, 1]
    lat = centre[cl[user], 0] + rng.normal(0, spread, user.size)
    lon = centre[cl[user], 1] + rng.normal(0, spread, user.size)
    return user, minute, cl, lat, lon


def _taxi(rng: np.random.Generator):
    """(user, minute, latitude, longitude, value) of the ``taxi`` kind (module doc)."""
    user = np.repeat(np.arange(400), rng.integers(60, 200, 400))
    minute = rng.integers(0, 7 * 1440, user.size)
    hour = (minute // 60) % 24
    fare = 20 + 25 * np.exp(-(((hour - 2) % 24) ** 2) / 8) + 15 * np.exp(-((hour - 18) ** 2) / 4)
    lat, lon = 30.27 + rng.normal(0, 0.06, user.size), -97.74 + rng.normal(0, 0.06, user.size)
    return user, minute, lat, lon, fare + rng.gamma(2, 4, user.size) - 8


def _payers(rng: np.random.Generator):
    """(user, minute, latitude, longitude, value) of the ``payers`` kind (module doc)."""
    shops = 120
    at = np.c_[30.27 + rng.normal(0, 0.05, shops), -97.74 + rng.normal(0, 0.05, shops)]
    basket = rng.uniform(15, 90, shops)
    visits = rng.integers(1, 4, 5000)  # shops per payer
    user = np.repeat(np.arange(5000), visits)
    shop = np.concatenate([rng.choice(shops, k, replace=False) for k in visits])
    weekday, hour = rng.integers(0, 7, user.size), rng.integers(8, 21, user.size)
    week = np.tile(np.arange(8), user.size)
    user, shop, weekday, hour = (np.repeat(a, 8) for a in (user, shop, weekday, hour))
    keep = rng.random(user.size) < 0.85
    user, shop, weekday, hour, week = user[keep], shop[keep], weekday[keep], hour[keep], week[keep]
    minute = (week * 7 + weekday) * 1440 + hour * 60 + rng.integers(0, 60, user.size)
    jitter = rng.normal(0, 1e-4, (user.size, 2))
    return user, minute, at[shop, 0] + jitter[:, 0], at[shop, 1] + jitter[:, 1], \
        basket[shop] * rng.lognormal(0, 0.35, user.size)


def _heavy(rng: np.random.Generator):
    """(user, minute, latitude, longitude, value) of the ``heavy`` kind (module doc)."""
    n = np.r_[rng.integers(1500, 2501, 50), rng.integers(1, 6, 1000)]
    user = np.repeat(np.arange(n.size), n)
    minute = rng.integers(0, 14 * 1440, user.size)
    lat, lon = 30.27 + rng.normal(0, 0.03, user.size), -97.74 + rng.normal(0, 0.03, user.size)
    return user, minute, lat, lon, np.where(user < 50, 70.0, 30.0) + rng.normal(0, 5, user.size)


def records(kind: str, seed: int = 5) -> pd.DataFrame:
    """The records of one kind (module doc), seeded."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}; got {kind!r}")
    rng = np.random.default_rng(seed)
    if kind in ("taxi", "payers", "heavy"):
        user, minute, lat, lon, value = {"taxi": _taxi, "payers": _payers, "heavy": _heavy}[kind](rng)
        return _frame(kind, user, minute, lat, lon, value)
    clusters = 12 if kind.startswith("biglist") else 20
    user, minute, cl, lat, lon = _positions(rng, kind, clusters)
    hour, day = (minute // 60) % 24, minute // 1440
    if kind == "interaction":
        peak = rng.integers(0, 24, clusters)[cl[user]]
        d = np.minimum(np.abs(hour - peak), 24 - np.abs(hour - peak))
        value = 40 + 30 * np.exp(-(d / 2.0) ** 2) + rng.normal(0, 5, user.size)
    elif kind == "weekly":
        value = np.where(day % 7 >= 5, 70.0, 30.0) + rng.normal(0, 5, user.size)
    elif kind == "user":
        value = rng.uniform(10, 90, cl.size)[user] + rng.normal(0, 3, user.size)
    elif kind == "meters":
        h, weekend = minute % 1440 / 60.0, day % 7 >= 5
        bump = lambda at, width: np.exp(-(((h - at) / width) ** 2))  # noqa: E731
        profile = 0.4 + np.where(weekend, 0.6 * bump(12.0, 3.0), 1.2 * bump(7.5, 1.5)) + 1.8 * bump(19.0, 2.0)
        value = rng.lognormal(0.0, 0.3, cl.size)[user] * profile + rng.normal(0, 0.3, user.size)
    elif kind.startswith("biglist"):
        value = rng.uniform(10, 90, clusters)[cl[user]] + rng.normal(0, 4, user.size)
    else:
        value = rng.uniform(20, 80, clusters)[cl[user]] + rng.normal(0, 8, user.size)
    return _frame(kind, user, minute, lat, lon, value)


def _frame(kind: str, user, minute, lat, lon, value) -> pd.DataFrame:
    return pd.DataFrame({"user_id": user.astype(str),
                         "timestamp": pd.Timestamp("2024-03-04", tz="UTC") + pd.to_timedelta(minute, "min"),
                         "latitude": lat, "longitude": lon, "value": np.clip(value, 0, BOUNDS.get(kind, U))})


def aggregate(kind: str):
    """The kind's aggregate at H3 res 7 × its slot (``agg.bound`` = its U)."""
    from dpopt.release import GridOptions, contributions

    agg = contributions(records(kind), bound=BOUNDS.get(kind, U), grid=GridOptions(7, SLOTS.get(kind, "1h")),
                        keep_samples=True)
    return agg[0] if isinstance(agg, tuple) else agg


def public_list(kind: str) -> pd.DataFrame | None:
    """The kind's public list where it is not the occupied grids (the big lists: 217 cells × 72 hours)."""
    if not kind.startswith("biglist"):
        return None
    import h3

    cells = sorted(h3.grid_disk(h3.latlng_to_cell(30.27, -97.74, 7), 8))
    slots = (pd.Timestamp("2024-03-04", tz="UTC") + pd.to_timedelta(np.arange(72), "h")).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pd.DataFrame({"cell": np.repeat(cells, len(slots)), "slot": np.tile(slots, len(cells))})


def run_kind(kind: str, seeds: int, eps_list: list[float], peer_reps: int = 0) -> dict:
    agg = aggregate(kind)
    fin = finest_grids(agg, bound=agg.bound)
    listed = public_list(kind)
    out = {"kind": kind, "grids": int(agg.n_grids), "scored": int(fin.scored.sum()), "users": int(agg.n_users),
           "floors": floors(fin), "rows": []}
    for strategy in ("optimised", "place"):
        for eps in eps_list:
            scores = []
            for seed in range(1000, 1000 + seeds):
                r, _ = run_release(agg, eps, seed, strategy, listed)
                scores.append({**score(r, agg, fin), "varies": list(r.summary.answers_vary_by or [])})
            keys = ("median", "coverage", "width_ratio", "coverage_every", "coverage_one_user")
            row = {"strategy": strategy, "eps": eps, "seeds": seeds,
                   **{k: float(np.nanmedian([s[k] for s in scores])) for k in keys},
                   "min_coverage": float(min(s["coverage"] for s in scores)),
                   "per_seed": [[round(s["median"], 4), round(s["coverage"], 4), s["varies"]] for s in scores]}
            out["rows"].append(row)
            print(kind, {k: v for k, v in row.items() if k != "per_seed"}, flush=True)
    for eps in eps_list if peer_reps else []:  # PipelineDP at its (k, c) of least error against the truth
        out["rows"].append(peer_row(agg, fin, eps, peer_reps))
        print(kind, out["rows"][-1], flush=True)
    return out


def write_markdown(results: list[dict]) -> None:
    lines = ["# the engine on ten other kinds of data", "",
             f"`python tests/benchmarks/bench_engine_kinds.py --seeds N`. Python {platform.python_version()}, "
             "2 shared cores; public list = the occupied grids (the big lists: 217 cells × 72 hours, 89 % of them "
             "empty; the grids counted in a heading are the occupied ones); pure ε; exact noise, seeds 1000+. The kinds are "
             "described in the script's docstring (interaction: each cluster its own peak hour; weekly: the day "
             "of the week sets the value; user: each user its own level; sparse: users of 1–3 records; meters: fixed households whose hour of the day "
             "sets the value, U = 10; biglist: fixed sensors, the place sets the value; biglist_mobile: the same with "
             "users moving within their place; taxi: roaming drivers, the hour of the day sets the fare; payers: "
             "5,000 payers of 1–3 shops weekly, the shop sets the basket, daily slots, U = 250; heavy: 50 users "
             "of 1,500–2,500 records at 70 and 1,000 of 1–5 records at 30, who holds the records sets the value).", "",
             "Each cell: median over the seeds; coverage at a stated 0.95 (lowest seed in brackets). PipelineDP "
             "(where run): its (k, c) of least median error against the truth from a 4 × 3 sweep, Laplace, MEAN "
             "only, the same public list and ε; it publishes no interval.", "",
             *kept_notes(HERE / "results" / "kinds.md")]
    for d in results:
        lines += [f"## {d['kind']} ({d['grids']} grids, {d['scored']} scored, {d['users']} users)", "",
                  "Noise-free floors: " + "; ".join(f"{k} {v:.2f}" for k, v in d["floors"].items()), "",
                  "| strategy | ε | seeds | median error | coverage (lowest) | width ratio | coverage, every grid "
                  "| coverage, one-user grids | answers vary by (per seed) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in d["rows"]:
            if "per_seed" not in r:  # a peer: no interval published
                lines.append(f"| {r['strategy']} | {r['eps']:g} | {r['reps']} runs | {r['median']:.2f} | — | — | — | — | — |")
                continue
            # summary.answers_vary_by is the engine's statement; `place` answers by its own shape
            varies = "; ".join(", ".join(s[2]) or "nothing" for s in r["per_seed"]) if r["strategy"] == "optimised" \
                else "—"
            lines.append(f"| {r['strategy']} | {r['eps']:g} | {r['seeds']} | {r['median']:.2f} | {r['coverage']:.3f} "
                         f"({r['min_coverage']:.3f}) | {r['width_ratio']:.2f} | {r['coverage_every']:.3f} | "
                         f"{r['coverage_one_user']:.3f} | {varies} |")
        lines.append("")
    (HERE / "results" / "kinds.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--peer-reps", type=int, default=0,
                    help="add PipelineDP at its best swept (k, c) against the truth, this many runs each (bench extra)")
    ap.add_argument("--markdown-only", action="store_true", help="rewrite results/kinds.md from results/kinds.json")
    args = ap.parse_args()
    if args.markdown_only:
        write_markdown(json.loads((HERE / "results" / "kinds.json").read_text()))
        return
    path = HERE / "results" / "kinds.json"
    saved = {d["kind"]: d for d in json.loads(path.read_text())} if path.exists() else {}
    for k in args.kinds:  # the other kinds kept; without --peer-reps, a rerun kind keeps its saved peer rows
        fresh = run_kind(k, args.seeds, args.eps, args.peer_reps)
        if not args.peer_reps and k in saved:  # PipelineDP's rows do not depend on dpopt's code
            fresh["rows"] += [r for r in saved[k]["rows"] if r["strategy"].startswith("PipelineDP")]
        saved[k] = fresh
    results = [saved[k] for k in KINDS if k in saved]
    path.write_text(json.dumps(results, indent=1))
    write_markdown(results)


if __name__ == "__main__":
    main()
