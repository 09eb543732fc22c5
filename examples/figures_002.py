"""Seed 002 (Rameshwar & Tandon): CLIP-USER and pseudo-user clipping across grids, Figures 1-8.

Recomputes every figure of the family with the papers' run counts and writes, for each, a tidy CSV
(figure, series, epsilon, value, stderr), a PNG and the notes on ambiguous choices into
examples/gallery/ (or --out). Equivalent to `dpopt reproduce 002-figN --out DIR` for each N.

    python examples/figures_002.py [--runs N] [--seed S] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dpopt.experiments import FIGURES, reproduce
from dpopt.experiments.cli import write_outputs

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="runs per point (default: the papers')")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "gallery"))
    args = ap.parse_args()
    for fig in [f for f in FIGURES if f.startswith("002-")]:
        t0 = time.perf_counter()
        result = reproduce(fig, runs=args.runs, seed=args.seed)
        paths = write_outputs(result, Path(args.out))
        table = result.frame.pivot(index="epsilon", columns="series", values="value")
        print(f"{fig} ({time.perf_counter() - t0:.1f} s) -> {paths['png']}")
        print(table.iloc[[0, len(table) // 2, -1]].round(4).to_string(), "\n")


if __name__ == "__main__":
    main()
