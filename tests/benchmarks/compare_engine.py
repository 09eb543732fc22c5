"""Two runs of the engine's benchmarks, paired seed by seed.

`python tests/benchmarks/compare_engine.py --rev REV [--data day full ...] [--kinds]` reads each
results/engine_<data>.json (with ``--kinds``, results/kinds.json) as the working tree holds it and as
git revision REV held it, and prints for every (strategy, ε) row that both ran on the same seeds: the
median over seeds before → after, how many seeds got better, worse or stayed the same, and the mean of
the seeds' paired log ratios of their median errors ± its standard error.

Why the paired ratio: a plan's noise draws differ wholly once one of its shares moves (the exact
samplers' draws at two rational scales share no path), so one change can reseed every release after
the plan, and the median of thirty bimodal releases then moves by several percent on its own (the
day-set at ε = 1: 3.600 → 4.776 for a change whose only effect was to move one share in its sixth
digit; models/engine.md §5). The paired log ratio's standard error says which moves a reseeding
explains. Reads saved results only; runs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def paired(before: list[float], after: list[float]) -> dict[str, float]:
    """The paired comparison of two runs' per-seed median errors (same seeds, same order): medians,
    counts of seeds better / worse / the same (to 1e-9), and the mean of log(after/before) with its
    standard error (sample sd over √n; NaN for fewer than two seeds)."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if b.shape != a.shape or b.size == 0:
        raise ValueError(f"`before` and `after` must hold the same seeds; got {b.size} and {a.size}")
    if np.any(b <= 0) or np.any(a <= 0):
        raise ValueError("`before` and `after` must be positive errors (a log ratio needs them)")
    d = np.log(a) - np.log(b)
    same = np.abs(a - b) <= 1e-9 * np.maximum(np.abs(b), 1.0)
    return {"seeds": int(b.size), "median_before": float(np.median(b)), "median_after": float(np.median(a)),
            "better": int(np.sum((a < b) & ~same)), "worse": int(np.sum((a > b) & ~same)), "same": int(np.sum(same)),
            "log_ratio": float(d.mean()), "se": float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.nan}


def _rows(doc: dict) -> dict[tuple[str, float], list[float]]:
    return {(r["strategy"], float(r["eps"])): [float(s[0]) for s in r["per_seed"]]
            for r in doc["rows"] if r.get("per_seed")}


def compare(before: dict, after: dict) -> list[tuple[str, float, dict[str, float]]]:
    """Every (strategy, ε) row of ``after`` that ``before`` ran on as many seeds, paired."""
    old = _rows(before)
    return [(strategy, eps, paired(old[(strategy, eps)], seeds)) for (strategy, eps), seeds in _rows(after).items()
            if (strategy, eps) in old and len(old[(strategy, eps)]) == len(seeds)]


def _at(rev: str, path: Path) -> str | None:
    rel = path.resolve().relative_to(Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"],
                                                                  cwd=HERE, text=True).strip()))
    out = subprocess.run(["git", "show", f"{rev}:{rel.as_posix()}"], cwd=HERE, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def line(name: str, strategy: str, eps: float, p: dict[str, float]) -> str:
    """One printed row."""
    return (f"{name:<22} {strategy:<10} ε = {eps:<6g} {p['median_before']:9.3f} → {p['median_after']:9.3f}  "
            f"better {p['better']}, worse {p['worse']}, same {p['same']} of {p['seeds']}  "
            f"log ratio {100 * p['log_ratio']:+.1f} ± {100 * p['se']:.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", required=True, help="the git revision whose saved results are 'before'")
    ap.add_argument("--data", nargs="*", default=None, help="engine_<data>.json names (default: every one)")
    ap.add_argument("--kinds", action="store_true", help="compare results/kinds.json instead")
    args = ap.parse_args()
    if args.kinds:
        pairs = [(d["kind"], d, RESULTS / "kinds.json") for d in json.loads((RESULTS / "kinds.json").read_text())]
        saved = _at(args.rev, RESULTS / "kinds.json")
        old = {d["kind"]: d for d in json.loads(saved)} if saved else {}
        docs = [(name, old.get(name), new) for name, new, _ in pairs]
    else:
        names = args.data or sorted(p.stem[len("engine_"):] for p in RESULTS.glob("engine_*.json")
                                    if not p.stem.startswith("engine_nolist"))
        docs = []
        for name in names:
            path = RESULTS / f"engine_{name}.json"
            saved = _at(args.rev, path)
            docs.append((name, json.loads(saved) if saved else None, json.loads(path.read_text())))
    for name, before, after in docs:
        if before is None:
            print(f"{name:<22} not in {args.rev}")
            continue
        for strategy, eps, p in compare(before, after):
            print(line(name, strategy, eps, p))


if __name__ == "__main__":
    main()
