"""Shared driver of the example scripts: output folders and the figure-family command line.

Every script that writes files takes ``--out DIR``; without it, it writes to a fresh folder under the
current directory (``./<script>-output``, then ``-2``, ``-3``...), never over files of the repository.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

__all__ = ["fresh_output_dir", "output_dir", "figure_family_main"]


def fresh_output_dir(name: str, base: Path | None = None) -> Path:
    """A new, empty folder ``<base>/<name>-output`` (suffixed ``-2``, ``-3``... if it exists)."""
    base = Path.cwd() if base is None else Path(base)
    path = base / f"{name}-output"
    k = 2
    while path.exists():
        path = base / f"{name}-output-{k}"
        k += 1
    path.mkdir(parents=True)
    return path


def output_dir(given: str | Path | None, script: str) -> Path:
    """``given`` (created if needed) or a fresh folder named after ``script`` (a ``__file__``)."""
    if given is not None:
        out = Path(given)
        out.mkdir(parents=True, exist_ok=True)
        return out
    return fresh_output_dir(Path(script).stem)


def figure_family_main(prefix: str, doc: str, script: str, argv: Sequence[str] | None = None) -> list[Path]:
    """Command line shared by ``figures_000.py``, ``figures_002.py`` and ``figures_003.py``.

    ``--runs N --seed S --out DIR``; reproduces every figure whose id starts with ``prefix`` (the same
    as ``dpopt reproduce FIGURE --out DIR`` for each). To refresh the gallery: ``--out examples/gallery``.
    """
    from dpopt.experiments.outputs import reproduce_family

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="runs per point (default: the papers')")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="output folder (default: a fresh folder under the cwd)")
    args = ap.parse_args(argv)
    out = output_dir(args.out, script)
    pngs = reproduce_family(prefix, out, runs=args.runs, seed=args.seed)
    print(f"wrote {len(pngs)} figures to {out}")
    return pngs
