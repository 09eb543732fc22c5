"""``dpopt arrays``: choose the pseudo-user array length m for a file of per-user counts (seed 003).

    dpopt arrays --counts FILE --bound U --epsilon E [--method exact|surrogate|heuristic|median]
                 [--solver NAME] [--time-limit S] [--solver-option KEY=VALUE] [--json]

Prints the chosen length, its worst-case error E_ε(m) (eq. (15)) with bias and noise terms, the exact
minimax length for comparison, and the number of WrapAround and BestFit arrays at that length.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_partition_command, add_solver_arguments, emit, read_numbers, solver_options

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = add_partition_command(
        subparsers,
        "arrays",
        help="array length m for pseudo-user Array-Averaging (seed 003)",
        description=(
            "Choose the array length m of pseudo-user Array-Averaging (seed 003): the exact minimax "
            "length (Lemma V.2), the convex surrogate (19) (ERRATA E7), the heuristic (9) or the median. "
            "The counts file holds one count per user (a header line is skipped)."
        ),
        run=run,
    )
    p.add_argument(
        "--method", default="exact", choices=["exact", "surrogate", "heuristic", "median"], help="how to choose m (default exact)"
    )
    p.add_argument(
        "--solver",
        default=None,
        help="exact: enumeration|scan|milp; surrogate: closed-form|lp; heuristic: enumeration|scan "
        "(default the first of each)",
    )
    add_solver_arguments(p)
    p.add_argument("--no-grouping", action="store_true", help="skip running BestFit/WrapAround at the chosen m")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from ..arrays.grouping import best_fit, wrap_around
    from ..arrays.length import optimal_array_length

    counts = read_numbers(args.counts, "counts", column=args.counts_column)
    options = solver_options(args)
    plan = optimal_array_length(counts, args.bound, args.epsilon, method=args.method, solver=args.solver,
                                time_limit=args.time_limit, options=options)
    payload: dict[str, Any] = plan.summary()
    if not args.no_grouping:
        payload["arrays_wrap_around"] = wrap_around(counts, plan.length).num_arrays
        payload["arrays_best_fit"] = best_fit(counts, plan.length).num_arrays
    emit(payload, args.json)
    return 0
