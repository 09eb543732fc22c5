"""What each release's answers rest on, seed by seed: the routes behind a bimodal median.

bench_engine.py reports the median over seeds of each release's median error. Where the plan's
choice is near a knife-edge (models/engine.md §7) a row's releases fall into a few routes — the
plan buys the cells and the estimate answers by them; the plan buys a time marginal that the
estimate then finds flat; the first round sees nothing and the rest goes to the map — and the
median over seeds says only which route the middle seed took. This benchmark names the route of
every release, so that a change to the plan can be judged by how many releases change route and
what each route errs, not only by a median that jumps between modes.

A release's route, read from its public outputs and the engine's info (no truth):

* ``plan``: the marginal with the largest main-phase budget (what the strategy bought most of);
  where the re-plan sent the rest of the budget to the map-wide means (``engine._map_only``: the
  first round saw no factor, nor would the rest of the budget), the first round's largest, "then
  the map";
* ``answers``: the estimate's fitted factors with a positive component, or "the map-wide mean"
  where every scored grid gets one answer.

Score as bench_engine.py (each listed grid with ≥ 10 users against its own truth; public list = the
occupied grids, or a kind's own list for bench_engine_kinds.py's kinds, ``--data kind:NAME``; pure ε;
seeds 1000+). Run:

    PYTHONPATH=$PWD python tests/benchmarks/bench_engine_routes.py --data day --eps 10 --reps 30
    PYTHONPATH=$PWD python tests/benchmarks/bench_engine_routes.py --data kind:taxi --eps 1 10 --reps 6

Writes results/routes_<data>.json and assembles results/routes.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_engine import EXTRA_SETS, grid_answers, run_release, score  # noqa: E402
from bench_userdp import DATASETS, load  # noqa: E402
from collect_results import kept_notes  # noqa: E402
from scoring import finest_grids  # noqa: E402

#: the text engine._map_only puts in the strategy's summary where the rest goes to the map
MAP_ONLY = "the release answers with the map-wide means"


def route(engine_info, components: dict, n_answers: int) -> tuple[str, str]:
    """(plan, answers) of one release (module doc): public outputs and the engine's info only."""
    to_map = MAP_ONLY in engine_info.strategy
    main = np.asarray(engine_info.first if to_map and engine_info.first is not None else engine_info.main, dtype=float)
    plan = engine_info.names[int(np.argmax(main))] if main.sum() > 0 else "nothing"
    if to_map:
        plan += ", then the map"
    fitted = sorted(f for f, v in components.items() if float(v) > 0)
    answers = "the map-wide mean" if n_answers == 1 else (" + ".join(fitted) if fitted else "nodes, no factor")
    return plan, answers


def _data(data: str):
    """(aggregate, public list or None for the occupied grids) of a benchmark set or ``kind:NAME``."""
    if data.startswith("kind:"):
        from bench_engine_kinds import aggregate, public_list

        return aggregate(data[5:]), public_list(data[5:])
    return EXTRA_SETS.get(data, lambda: load(data))()[0], None


def run(data: str, eps: float, reps: int) -> dict:
    agg, listed = _data(data)
    fin = finest_grids(agg, bound=agg.bound)
    releases = []
    for rep in range(reps):
        seed = 1000 + rep
        r, _ = run_release(agg, eps, seed, "optimised", listed)
        s = score(r, agg, fin)
        mean, _ = grid_answers(r, agg)
        plan, answers = route(r.measurements.info.engine, r.estimates.info.components,
                              len(np.unique(np.round(mean[fin.scored], 6))))
        releases.append({"seed": seed, "median": round(s["median"], 6), "coverage": round(s["coverage"], 6),
                         "plan": plan, "answers": answers})
        print(releases[-1], flush=True)
    return {"data": data, "eps": eps, "reps": reps, "releases": releases}


def summary_rows(d: dict) -> list[tuple[str, str, int, float, float]]:
    """(plan, answers, releases, median error, median coverage) per route, most releases first."""
    by = defaultdict(list)
    for r in d["releases"]:
        by[(r["plan"], r["answers"])].append(r)
    rows = [(p, a, len(rs), float(np.median([r["median"] for r in rs])), float(np.median([r["coverage"] for r in rs])))
            for (p, a), rs in by.items()]
    return sorted(rows, key=lambda x: (-x[2], x[3]))


def write_markdown() -> None:
    lines = ["# the engine's routes, release by release", "",
             f"`python tests/benchmarks/bench_engine_routes.py --data D --eps E --reps N`. Python "
             f"{platform.python_version()}, 2 shared cores; public list = the occupied grids (a kind's own list for "
             "`kind:NAME`); pure ε; seeds 1000+.", "",
             "Route: the marginal holding the largest main budget (where the re-plan sent the rest to the map-wide "
             "means, the first round's largest, \", then the map\") and what the answers rest on (the estimate's "
             "factors with a positive component, or one map-wide mean). Median error and coverage as bench_engine.py, "
             "per route.", "",
             *kept_notes(HERE / "results" / "routes.md")]
    for p in sorted((HERE / "results").glob("routes_*.json")):
        for d in json.loads(p.read_text()):
            errs = [r["median"] for r in d["releases"]]
            lines += [f"## {d['data']}, ε = {d['eps']:g} ({d['reps']} releases; median error {np.median(errs):.3f})", "",
                      "| plan's largest marginal | answers by | releases | median error | median coverage |",
                      "|---|---|---|---|---|"]
            lines += [f"| {p_} | {a} | {n} | {e:.3f} | {c:.3f} |" for p_, a, n, e, c in summary_rows(d)]
            lines.append("")
    (HERE / "results" / "routes.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from bench_engine_kinds import KINDS

    ap.add_argument("--data", choices=DATASETS + tuple(EXTRA_SETS) + tuple(f"kind:{k}" for k in KINDS), default="day")
    ap.add_argument("--eps", type=float, nargs="+", default=[10.0])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    path = HERE / "results" / f"routes_{args.data.replace(':', '_')}.json"
    saved = [d for d in (json.loads(path.read_text()) if path.exists() else []) if d["eps"] not in args.eps]
    path.write_text(json.dumps(sorted(saved + [run(args.data, e, args.reps) for e in args.eps],
                                      key=lambda d: d["eps"]), indent=1) + "\n")
    write_markdown()


if __name__ == "__main__":
    main()
