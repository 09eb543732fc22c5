"""``dpopt reproduce FIGURE --out DIR [--runs N] [--seed S]``: rerun a figure of the seed papers.

Writes ``DIR/FIGURE.csv`` (columns figure, series, epsilon, value, stderr), ``DIR/FIGURE.png`` and
``DIR/FIGURE.notes.md`` (the choices made where the paper is ambiguous, and the parameters used).
``FIGURE`` may be ``all``. ``--param key=value`` sets any parameter of the figure's experiment
(e.g. ``--param collection=extreme`` for 000-fig1, ``--param data=PATH`` for 002-fig1/2,
``--param gamma=4 --param q=0.02`` for 002-fig3..8, ``--param order=authors`` for 003-fig1..4); an
unknown key is an error that lists the valid ones. Changed parameters show in the figure's title and
in the notes, which list every parameter used.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path
from typing import Any

from .common import CliError

__all__ = ["register", "run"]


def _parse_param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise CliError(f"`--param` must look like key=value; got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip(), value


def run(args: argparse.Namespace) -> int:
    from ..experiments import FIGURES, reproduce
    from ..experiments.outputs import write_outputs

    figures = list(FIGURES) if args.figure == "all" else [args.figure]
    if args.figure != "all" and args.figure not in FIGURES:
        raise CliError(f"`FIGURE` must be 'all' or one of {', '.join(FIGURES)}; got {args.figure!r}")
    params = dict(_parse_param(p) for p in (args.param or []))
    if params and args.figure == "all":
        raise CliError("`--param` needs one FIGURE (parameters differ between figures); got 'all'")
    if params:
        from ..experiments import figure_parameters

        valid = figure_parameters(args.figure)
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise CliError(f"`--param` {', '.join(unknown)} is not a parameter of {args.figure}; "
                           f"valid keys: {', '.join(k for k in valid if k not in ('runs', 'seed'))}")
    from ..writers.console import progress_wanted  # a front door: bars on a terminal or --progress

    progress = progress_wanted(args.progress or None, quiet=args.quiet)
    _headless_backend()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"`--out` must be a directory path; got {args.out!r} (a file exists there)")
    if args.runs is not None and args.runs < 1:
        raise CliError(f"`--runs` must be an integer >= 1; got {args.runs!r}")
    for fig in figures:
        t0 = time.perf_counter()
        kw = params if args.figure != "all" else {}
        try:
            result = reproduce(fig, runs=args.runs, seed=args.seed, progress=progress, **kw)
        except (TypeError, ValueError) as exc:
            if not kw or isinstance(exc, CliError):
                raise
            raise CliError(f"`--param` {', '.join(f'{k}={v!r}' for k, v in kw.items())} rejected by {fig}: "
                           f"{type(exc).__name__}: {exc}") from None
        paths = write_outputs(result, out)
        print(f"{fig}: {len(result.frame)} rows in {time.perf_counter() - t0:.1f} s -> {paths['csv']}, "
              f"{paths['png'].name}, {paths['notes'].name}", file=sys.stdout)
    return 0


def _headless_backend() -> None:
    """Inside the CLI only: use Agg when there is no display (the library never picks a back-end)."""
    import os

    if os.name != "nt" and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") \
            and "MPLBACKEND" not in os.environ:
        try:
            import matplotlib
        except ImportError:  # no figures without it: plotting says how to install it
            return
        matplotlib.use("Agg")


def figure_list() -> str:
    """One line per figure id: ``id  paper: title`` (titles filled with the default parameters)."""
    from ..experiments import FIGURES, figure_parameters
    from ..experiments.base import figure_title

    width = max(len(f) for f in FIGURES)
    lines = []
    for fig, spec in FIGURES.items():
        title = figure_title(spec, figure_parameters(fig)).split(": ", 1)[-1].replace("\n", " ")
        lines.append(f"  {fig:<{width}}  {spec.paper}: {title}")
    return "figures:\n" + "\n".join(lines) + "\n  all" + " " * (width - 1) + "every figure above"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reproduce",
        help="rerun a figure of the seed papers (CSV + PNG + notes)",
        description=__doc__,
        epilog=figure_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("figure", metavar="FIGURE", help="figure id (listed below) or 'all'")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--runs", type=int, default=None,
                   help="Monte-Carlo runs per point (synthetic draws for 002-fig3..8); default: the paper's")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="extra parameter of the figure function")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress", action="store_true",
                   help="progress bars on stderr even when it is not a terminal (default: only on a terminal)")
    p.set_defaults(func=run)
