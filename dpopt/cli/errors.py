"""``dpopt errors``: sensitivities and worst-case errors of one partition from count files."""

from __future__ import annotations

import argparse

from .. import calculus
from .._validation import as_counts, as_retained, check_bound, check_epsilon, check_noise_scale
from .common import add_partition_command, emit, read_numbers


def register(sub: argparse._SubParsersAction) -> None:
    p = add_partition_command(
        sub,
        "errors",
        help="exact sensitivities and worst-case errors of a clipped mean/variance",
        description=(
            "Worst-case error of the CLIP mechanism on one partition (seed 002 eq. (11)-(13)): "
            "biases (Thm IV.1, corrected Thm IV.2) plus Laplace noise for the exact sensitivities."
        ),
        run=run,
    )
    p.add_argument("--retained", metavar="FILE", help="file with Gamma_l (default: keep everything = BASELINE)")
    p.add_argument("--split", choices=("equal", "optimal"), default="equal",
                   help="budget split between mean and variance (default: eps/2 each)")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    counts = as_counts(read_numbers(args.counts, "counts", column=args.counts_column))
    retained = counts if args.retained is None else as_retained(read_numbers(args.retained, "retained"), counts)
    U = check_bound(args.bound)
    eps = check_epsilon(args.epsilon)
    # the printed noise 2(Δμ + ΔVar)/ε is at most 2(U + U²/4)/ε: refuse an ε that makes it overflow
    check_noise_scale(2.0 * (U + U * U / 4.0), eps, f"2(U + U²/4)/ε at U = {U!r}")
    terms = calculus.grid_error_terms(
        [counts.sum()], [retained.sum()], [retained.max()], U, eps, split=args.split
    )
    emit(
        {
            "users": int(counts.size),
            "samples": int(counts.sum()),
            "retained": int(retained.sum()),
            "retained_max": int(retained.max()),
            "bound": U,
            "epsilon": eps,
            "split": args.split,
            "mean_sensitivity": float(terms.mean_sensitivity[0]),
            "variance_sensitivity": float(terms.variance_sensitivity[0]),
            "mean_bias": float(terms.mean_bias[0]),
            "variance_bias": float(terms.variance_bias[0]),
            "epsilon_mean": float(terms.epsilon_mean[0]),
            "epsilon_variance": float(terms.epsilon_variance[0]),
            "noise": float(terms.noise[0]),
            "error": float(terms.error[0]),
        },
        args.json,
    )
    return 0
