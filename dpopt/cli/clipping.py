"""``dpopt clipping``: the optimal per-user clipping of seeds 000/001 for a file of counts.

    dpopt clipping --counts FILE --bound U --epsilon E [--dim d] [--method closed-form|lp]
                   [--formulation per-user|per-sample] [--backend highspy|cvxpy]
                   [--time-limit S] [--solver-option KEY=VALUE]
                   [--export FILE.mps|FILE.lp] [--per-user] [--json]

Prints T_ε, the worst-case error with its bias/noise terms and sensitivity, the number of users
clipped and whether the KKT certificate checks; ``--per-user`` adds the intervals; ``--export``
writes the chosen LP formulation (HiGHS writeModel) without needing ``--method lp``.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import CliError, add_partition_command, add_solver_arguments, emit, read_numbers, solver_options

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = add_partition_command(
        subparsers,
        "clipping",
        help="optimal per-user clipping intervals (seeds 000/001)",
        description=(
            "Optimal per-user clipping for user-level DP mean estimation (seeds 000/001, Theorem III.1): "
            "closed form with KKT certificate, or the LP solved by HiGHS. For --dim >= 2 the corrected "
            "l1-ball strategy of ERRATA E3. The counts file holds one count m_l per user."
        ),
        run=run,
    )
    p.add_argument("--dim", type=int, default=1, metavar="d", help="sample dimension (default 1)")
    p.add_argument("--method", default="closed-form", choices=["closed-form", "lp"], help="how to solve (default closed-form)")
    p.add_argument("--formulation", default="per-user", choices=["per-user", "per-sample"],
                   help="LP formulation (--method lp, --export; default per-user)")
    p.add_argument("--backend", default="highspy", choices=["highspy", "cvxpy"], help="LP back-end (default highspy)")
    add_solver_arguments(p)
    p.add_argument("--export", metavar="FILE", help="write the LP to FILE (.mps or .lp)")
    p.add_argument("--per-user", action="store_true", help="also print the per-user intervals")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from .._validation import as_counts
    from ..clipping.closed_form import optimal_clipping
    from ..clipping.lp import clipping_model, solve_clipping
    from ..solve import write_model

    if args.export and not str(args.export).lower().endswith((".mps", ".lp")):
        raise CliError(f"`--export` must end in .mps or .lp; got {args.export!r}")
    options = solver_options(args)
    counts = as_counts(read_numbers(args.counts, "counts", column=args.counts_column))
    if args.method == "closed-form":
        plan = optimal_clipping(counts, args.bound, args.epsilon, dim=args.dim)
    else:
        plan = solve_clipping(counts, args.bound, args.epsilon, dim=args.dim,
                              formulation=args.formulation, backend=args.backend,
                              time_limit=args.time_limit, options=options)
    payload: dict[str, Any] = plan.summary()
    payload["samples"] = int(counts.sum())
    if args.export:
        model = clipping_model(counts, args.bound, args.epsilon, dim=args.dim, formulation=args.formulation)
        try:
            payload["exported"] = str(write_model(model, args.export))
        except OSError as exc:
            raise CliError(f"`--export`: {exc}") from None
    if args.per_user:
        payload["lower"] = plan.lower
        payload["upper"] = plan.upper
    emit(payload, args.json)
    return 0
