"""``dpopt reproduce FIGURE --out DIR [--runs N] [--seed S]``: rerun a figure of the seed papers.

Writes ``DIR/FIGURE.csv`` (columns figure, series, epsilon, value, stderr), ``DIR/FIGURE.png`` and
``DIR/FIGURE.notes.md`` (the choices made where the paper is ambiguous, and the parameters used).
``FIGURE`` may be ``all``. ``--param key=value`` passes extra parameters to the figure function
(e.g. ``--param collection=extreme`` for 000-fig1, ``--param data=PATH`` for 002-fig1/2).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path
from typing import Any

from ..cli_common import CliError

__all__ = ["register", "run", "write_outputs", "reproduce_family"]


def _parse_param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise CliError(f"`--param` must look like key=value; got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip(), value


def _check_params(func: Any, params: dict[str, Any], figure: str) -> None:
    """Unknown ``--param`` keys are refused before any work (one line, exit 2)."""
    import inspect

    sig = inspect.signature(func).parameters
    if any(v.kind is v.VAR_KEYWORD for v in sig.values()):
        return
    own = ("runs", "seed", "progress")  # set by --runs/--seed/--quiet
    known = [k for k in sig if k not in own]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise CliError(f"`--param` {unknown[0]!r} is not a parameter of {figure}; known: {', '.join(known) or 'none'}")


def write_outputs(result: Any, out: Path) -> dict[str, Path]:
    """Write the CSV, PNG and notes of a :class:`~dpopt.experiments.base.FigureResult` into ``out``."""
    from . import FIGURES
    from .plotting import save_figure

    out.mkdir(parents=True, exist_ok=True)
    spec = FIGURES[result.figure]
    csv = out / f"{result.figure}.csv"
    result.frame.to_csv(csv, index=False)
    png = save_figure(result.frame, spec, out / f"{result.figure}.png")
    notes = out / f"{result.figure}.notes.md"
    notes.write_text(
        f"# {result.figure}: {spec.title}\n\nPaper: {spec.paper}. Claim: {spec.claim}\n\n"
        "## Choices and ambiguities\n\n" + result.notes.strip() + "\n"
    )
    return {"csv": csv, "png": png, "notes": notes}


def reproduce_family(prefix: str, out: str | Path, *, runs: int | None = None, seed: int = 0) -> list[Path]:
    """Reproduce every figure whose id starts with ``prefix`` (e.g. ``"003-"``) into ``out``.

    Prints, per figure, the wall time, the PNG path and the first, middle and last rows of the
    table (used by ``examples/figures_*.py``). Returns the PNG paths.
    """
    from . import FIGURES, reproduce

    pngs = []
    for fig in [f for f in FIGURES if f.startswith(prefix)]:
        t0 = time.perf_counter()
        result = reproduce(fig, runs=runs, seed=seed)
        paths = write_outputs(result, Path(out))
        table = result.frame.pivot(index="epsilon", columns="series", values="value")
        print(f"{fig} ({time.perf_counter() - t0:.1f} s) -> {paths['png']}")
        print(table.iloc[[0, len(table) // 2, -1]].round(4).to_string(), "\n")
        pngs.append(paths["png"])
    return pngs


def run(args: argparse.Namespace) -> int:
    from . import FIGURES, reproduce

    figures = list(FIGURES) if args.figure == "all" else [args.figure]
    if args.figure != "all" and args.figure not in FIGURES:
        raise CliError(f"`FIGURE` must be 'all' or one of {', '.join(FIGURES)}; got {args.figure!r}")
    params = dict(_parse_param(p) for p in (args.param or []))
    if args.figure != "all":
        _check_params(FIGURES[args.figure].func, params, args.figure)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"`--out` must be a directory path; got {args.out!r} (a file exists there)")
    if args.runs is not None and args.runs < 1:
        raise CliError(f"`--runs` must be an integer >= 1; got {args.runs!r}")
    for fig in figures:
        t0 = time.perf_counter()
        kw = params if args.figure != "all" else {}
        try:
            result = reproduce(fig, runs=args.runs, seed=args.seed, progress=not args.quiet, **kw)
        except (TypeError, ValueError) as exc:
            if not kw or isinstance(exc, CliError):
                raise
            raise CliError(f"`--param` {', '.join(f'{k}={v!r}' for k, v in kw.items())} rejected by {fig}: "
                           f"{type(exc).__name__}: {exc}") from None
        paths = write_outputs(result, out)
        print(f"{fig}: {len(result.frame)} rows in {time.perf_counter() - t0:.1f} s -> {paths['csv']}, "
              f"{paths['png'].name}, {paths['notes'].name}", file=sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reproduce",
        help="rerun a figure of the seed papers (CSV + PNG + notes)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("figure", metavar="FIGURE", help="figure id (e.g. 003-fig1) or 'all'")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--runs", type=int, default=None,
                   help="Monte-Carlo runs per point (synthetic draws for 002-fig3..8); default: the paper's")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="extra parameter of the figure function")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
