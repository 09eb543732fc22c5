"""``dpopt suppress``: CLIP-USER, the exact MILP or the frontier on an occupancy CSV (user,grid,count)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import CliError, add_solver_arguments, emit, solver_options

__all__ = ["register", "run", "read_occupancy"]


def read_occupancy(path: str | Path) -> Any:
    """Read an occupancy CSV with columns user, grid, count (a header row is required; standard-library
    csv, so the light install reads it too)."""
    import csv

    from ..occupancy import Occupancy

    p = Path(path)
    if not p.is_file():
        raise CliError(f"`--occupancy` must be a readable CSV file; got {str(path)!r} "
                       f"({'a directory' if p.is_dir() else 'not found'})")
    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            rows = [r for r in csv.reader(f) if r]
    except (csv.Error, UnicodeDecodeError) as exc:
        raise CliError(f"`--occupancy` file {str(path)!r} is not a readable CSV: {exc}") from None
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if not {"user", "grid", "count"} <= set(header):
        raise CliError(
            f"`--occupancy` file {str(path)!r} must have columns user, grid, count; got {rows[0] if rows else []}"
        )
    idx = [header.index(c) for c in ("user", "grid", "count")]
    body = rows[1:]
    if any(len(r) <= max(idx) for r in body):
        raise CliError(f"`--occupancy` file {str(path)!r} has a row with fewer than {len(header)} fields")
    users, grids, counts = ([r[i].strip() for r in body] for i in idx)
    try:
        values = [float(c) for c in counts]
    except ValueError as exc:
        raise CliError(f"`--occupancy` file {str(path)!r}: a count is not a number ({exc})") from None
    return Occupancy.from_triples(_typed(users), _typed(grids), values)


def _typed(column: list[str]) -> list[Any]:
    """A label column: integers where every label is one written canonically ("7", "-3"), else the
    text as written — two distinct labels are never one ("01" and "1", "1e5" and "100000" were merged
    when read as numbers, as release's ids never are)."""
    try:
        ints = [int(v) for v in column]
    except ValueError:
        return column
    return ints if all(str(i) == v for i, v in zip(ints, column)) else column


def _refuse_idle(args: argparse.Namespace) -> None:
    """A flag the chosen --method does not read is refused in one line (it was silently ignored)."""
    given = {"--time-limit": args.time_limit is not None, "--solver-option": bool(args.solver_option),
             "--strategy": args.strategy != "auto", "--no-tie-break": not args.tie_break, "--list": args.list,
             "--skip-min-error-grid": args.skip_min_error_grid}
    reads = {"greedy": {"--list", "--skip-min-error-grid"},
             "milp": {"--time-limit", "--solver-option", "--strategy", "--no-tie-break", "--list"},
             "frontier": {"--time-limit", "--solver-option"}}[args.method]
    idle = [flag for flag, on in given.items() if on and flag not in reads]
    if idle:
        raise CliError(f"`{idle[0]}` does nothing with --method {args.method}: drop it")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "suppress",
        help="grid suppression (seed 002): greedy CLIP-USER, exact MILP, or the privacy–error frontier",
        description="Suppress (user, grid) contributions to lower the composition factor K while "
        "every grid's worst-case error stays <= E (seed 002).",
    )
    p.add_argument("--occupancy", required=True, help="CSV with columns user,grid,count")
    p.add_argument("--bound", "-U", type=float, required=True, help="sample upper bound U")
    p.add_argument("--epsilon", "-e", type=float, required=True, help="per-grid privacy budget")
    p.add_argument("--error-bound", type=float, default=None,
                   help="E (default: max grid error of BASELINE)")
    p.add_argument("--method", choices=("greedy", "milp", "frontier"), default="milp",
                   help="greedy CLIP-USER (§VI), the exact MILP (default) or the privacy-error frontier")
    p.add_argument("--skip-min-error-grid", action="store_true",
                   help="greedy: never suppress in the grid of smallest initial error (§VI-A3)")
    add_solver_arguments(p, tie_break=True, default_note="none; the frontier: 600")
    p.add_argument("--strategy", choices=("auto", "milp", "decomposition"), default="auto",
                   help="MILP: compact model, city-scale decomposition, or by size (default)")
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar (incumbent K, bound, gap, elapsed) on stderr")
    p.add_argument("--list", action="store_true", help="list the suppressed (user, grid) pairs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..suppression.frontier import suppression_frontier
    from ..suppression.greedy import clip_user
    from ..suppression.milp import solve_suppression

    options = solver_options(args)
    _refuse_idle(args)
    occ = read_occupancy(args.occupancy)
    if args.method == "frontier":
        budget = {} if args.time_limit is None else {"time_limit": args.time_limit}
        fr = suppression_frontier(occ, args.bound, args.epsilon, error_bound=args.error_bound,
                                  progress=args.progress, options=options, **budget)
        payload: dict[str, Any] = {"method": "frontier", "epsilon": fr.epsilon,
                                   "error_bound": fr.error_bound, "points": fr.table(),
                                   "solve_time": fr.solve_time}
        if not args.json:
            print(f"{'K':>4} {'K*eps':>8} {'E*(K)':>14} status")
            for row in fr.table():
                print(f"{row['K']:>4} {row['privacy_loss']:>8.3g} {row['error']:>14.6g} {row['status']}")
            return 0
        emit(payload, True)
        return 0
    if args.method == "greedy":
        plan = clip_user(occ, args.bound, args.epsilon, error_bound=args.error_bound,
                         skip_min_error_grid=args.skip_min_error_grid)
    else:
        plan = solve_suppression(occ, args.bound, args.epsilon, error_bound=args.error_bound,
                                 time_limit=args.time_limit, strategy=args.strategy,
                                 progress=args.progress, options=options, tie_break=args.tie_break)
    payload = plan.summary()
    if args.list or args.json:
        payload["suppressed"] = sorted(([u, g] for u, g in plan.suppressed), key=repr)
    emit(payload, args.json)
    return 0
