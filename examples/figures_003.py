"""Seed 003 (Rameshwar et al.): pseudo-user mechanisms on the ITMS bus speeds, Figures 1-5.

Recomputes every figure of the family with the papers' run counts and writes, for each, a tidy CSV
(figure, series, epsilon, value, stderr), a PNG and the notes on ambiguous choices into
examples/gallery/ (or --out). Equivalent to `dpopt reproduce 003-figN --out DIR` for each N.

    python examples/figures_003.py [--runs N] [--seed S] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dpopt.experiments.cli import reproduce_family

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="runs per point (default: the papers')")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "gallery"))
    args = ap.parse_args()
    reproduce_family("003-", args.out, runs=args.runs, seed=args.seed)


if __name__ == "__main__":
    main()
