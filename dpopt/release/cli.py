"""``dpopt release``: records -> H3 x time grids -> plan -> DP release files.

Examples::

    dpopt release --example                      # the embedded Austin bus day (see data.EXAMPLE_*)
    dpopt release buses.csv --bound 120 --epsilon-total 10 --target 10 --out out/
    dpopt release buses.csv --bound 120 --mechanism gaussian --epsilon-total 10 --delta 1e-6 --out out/
    dpopt release buses.csv --bound 120 --epsilon 1 --out out/ --plan greedy --seed 7   # seed 002's mode
    dpopt release buses.parquet --bound 120 --epsilon 0.5 --user-col vehicle_id \\
        --time-col timestamp_utc --value-col speed_kmh --backend dask --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import math
import textwrap
from pathlib import Path
from typing import Any

from .._validation import DpoptInputError
from ..cli_common import CliError, emit
from .privacy_model import PRIVACY_MODEL_TEXT, USER_MODEL_TEXT

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``release`` sub-command to the ``dpopt`` parser."""
    p = subparsers.add_parser(
        "release",
        help="user-level DP release of per-(H3 cell, time slot) means and variances from records",
        description=textwrap.fill(
            "Read records (user, latitude, longitude, timestamp, value), grid them into H3 cells x "
            "UTC time slots and release every grid's mean and variance with user-level DP. Under "
            "--privacy user (default) contribution bounds and grids are chosen under DP and counts "
            "are noised; under --privacy public-occupancy a plan from the public counts chooses which "
            "contributions to keep and how to spend the budget, and the CLIP mechanism adds exact "
            "discrete Laplace or Gaussian noise. The budget is either what "
            "one user may lose over the whole release (--epsilon-total, or --rho / --delta with "
            "--mechanism gaussian; planned by --plan budget, the default) or seed 002's per-grid "
            "--epsilon (then the release costs K*epsilon, Thm II.3). Writes release.csv, "
            "summary.json, map.png and report.md into --out (for publication) and diagnostics/ "
            "(suppressed.csv, kept_pairs.csv, ingest.json: raw user ids and value-dependent counts, "
            "NOT for publication).",
            90,
        ),
        epilog="\n\n".join(textwrap.fill(t, 90) for t in (*USER_MODEL_TEXT, *PRIVACY_MODEL_TEXT)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("records", nargs="?", help="CSV (.csv, .csv.gz) or Parquet file/directory of records")
    p.add_argument("--example", action="store_true",
                   help="use the embedded Austin bus day (defaults: --privacy public-occupancy --bound 120 "
                   "--epsilon-total 10, the budget planner)")
    p.add_argument("--bound", type=float, help="public bound U of the values (e.g. 120 km/h)")
    p.add_argument("--privacy", choices=["user", "public-occupancy"],
                   help="who the neighbours are. user (the default for RECORDS): add or remove all of one "
                   "user's records, nothing about who is where is public (payments, phones, app traces); "
                   "public-occupancy (seed 002; the default of --example): one user's values change, which "
                   "user has how many records in which grid is public (broadcast vehicle positions)")
    _add_budget_arguments(p)
    p.add_argument("--out", default="dpopt-release", help="output directory (default ./dpopt-release); "
                   "written atomically, refused if it exists and is not empty unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty --out (only once the new release is complete)")
    p.add_argument("--h3-resolution", type=int, default=7, help="H3 resolution 0..15 (default 7)")
    p.add_argument("--slot", default="1h", help="time slot length, e.g. 1h, 15min (default 1h, UTC)")
    _add_plan_arguments(p)
    _add_input_arguments(p)
    p.set_defaults(func=run)


def _add_budget_arguments(p: Any) -> None:
    """The privacy budget flags."""
    b = p.add_argument_group("privacy budget (give one of --epsilon-total, --rho, --epsilon)")
    b.add_argument("--epsilon-total", type=float,
                   help="what one user may lose over the whole release (pure epsilon-DP with Laplace "
                   "noise; with --mechanism gaussian and --delta: the (epsilon, delta)-DP the release implies)")
    b.add_argument("--rho", type=float, help="total rho of zero-concentrated DP (--mechanism gaussian)")
    b.add_argument("--delta", type=float, help="delta of (epsilon, delta)-DP (--mechanism gaussian)")
    b.add_argument("--epsilon", type=float,
                   help="seed 002's mode: the budget of EACH grid's release (total K*epsilon)")
    b.add_argument("--mechanism", default="laplace", choices=["laplace", "gaussian"],
                   help="laplace (pure epsilon-DP, default) or gaussian (rho-zCDP; error grows like "
                   "sqrt(K) instead of K over the grids a user is in)")


def _add_plan_arguments(p: Any) -> None:
    """The planner flags (--privacy public-occupancy) and the error bounds reported."""
    p.add_argument("--plan", choices=["budget", "baseline", "greedy", "milp"],
                   help="budget: the total-budget planner (default with a total budget); baseline: keep "
                   "everything (default with --epsilon); greedy: CLIP-USER; milp: least-K suppression")
    p.add_argument("--target", type=float, help="--plan budget: the error tau the mean of a grid must "
                   "meet (data units) for the grid to be released (default: the knee of the "
                   "coverage-tau frontier, reported)")
    p.add_argument("--target-variance", type=float, help="--plan budget: a target for the variance too")
    p.add_argument("--criterion", default="noise", choices=["noise", "worst_case"],
                   help="error bounds (and --target) count the noise only (default) or the worst-case "
                   "clipping bias plus noise")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="probability of the per-grid error bounds (default 0.95)")
    p.add_argument("--pseudo-users", action="store_true", help="pseudo-user clipping per grid (eq. 15)")
    p.add_argument("--error-bound", type=float, help="worst-case error E every grid must meet "
                   "(default: max grid error of BASELINE)")
    p.add_argument("--split", default="equal", choices=["equal", "optimal"],
                   help="budget split between mean and variance (default equal)")
    p.add_argument("--time-limit", type=float, help="total seconds for planning (MILP or budget planner)")
    p.add_argument("--seed", type=int, help="seed the noise (reproducible; NOT for a real release)")


def _add_input_arguments(p: Any) -> None:
    """--privacy user options, input columns, cleaning, scale and output flags."""
    u = p.add_argument_group("--privacy user")
    u.add_argument("--partitions", help="public partition list: a CSV with columns cell (H3 index) and slot "
                   "(ISO start time, UTC); listed grids without records are released too (as noise). "
                   "Without it grids are selected privately (needs --delta)")
    u.add_argument("--bounds", default="select",
                   help="contribution bounds: select (default: chosen under DP by predicted error), quantile "
                   "(private quantiles), or K,C (public: at most K grids per user, C records per grid)")
    g = p.add_argument_group(
        "input columns and cleaning",
        "Records are rows (user, latitude, longitude, timestamp, value) of a CSV file (any separator, "
        "--sep), a Parquet file, or a directory of CSV or of Parquet files. Python: "
        "columns={dpopt_name: your_column}.")
    for flag, name, what in (("--user-col", "user_id", "user id (a user is who the privacy protects)"),
                             ("--lat-col", "latitude", "latitude, WGS84 degrees"),
                             ("--lng-col", "longitude", "longitude, WGS84 degrees"),
                             ("--time-col", "timestamp", "time: ISO 8601 text or Unix time (--timestamp-unit)"),
                             ("--value-col", "value", "values released, in [0, U]")):
        g.add_argument(flag, default=name, metavar="NAME", help=f"column of the {what} (default: {name})")
    g.add_argument("--sep", default=",", help="CSV field separator, e.g. ';' (default: ',')")
    g.add_argument("--timestamp-unit", default="s", choices=["s", "ms", "us", "ns"],
                   help="unit of numeric timestamps (Unix time; default s)")
    g.add_argument("--out-of-range", default="clip", choices=["clip", "drop", "error"],
                   help="values outside [0, U], +-inf included: clip (default), drop, or stop with an error. "
                   "drop makes the public counts depend on values (not covered by the DP guarantee "
                   "unless validity is public); use it only for sentinels")
    g.add_argument("--max-dropped", type=float, default=0.01, metavar="SHARE",
                   help="refuse the run when more than this share of the rows is dropped as invalid "
                   "(default 0.01; 1 disables the check); the causes are printed")
    g.add_argument("--time-window", default="1990,2100", metavar="START,END",
                   help="plausible timestamps, years or ISO dates (default 1990,2100): records outside are "
                   "dropped and counted (a wrong --timestamp-unit lands in 1970); 'none' for no window")
    g.add_argument("--chunksize", type=int, help="rows per chunk when streaming files")
    d = p.add_argument_group("scale")
    d.add_argument("--backend", default="local", choices=["local", "dask"],
                   help="aggregate locally (default) or on Dask (pip install 'dpopt[dask]')")
    d.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 "
                   "(default: a local cluster)")
    p.add_argument("--no-map", action="store_true", help="skip map.png")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress", action="store_true", help="progress bars on stderr even when not a terminal")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _client(args: argparse.Namespace) -> Any:
    if args.backend != "dask":
        if args.scheduler:
            raise CliError("`--scheduler` needs `--backend dask`")
        return None
    try:
        from distributed import Client
    except ImportError:
        raise CliError(
            "`--backend dask` needs Dask: pip install 'dask[dataframe,distributed]' (or 'dpopt[dask]')"
        ) from None
    if args.scheduler:
        try:
            return Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise CliError(f"`--scheduler` {args.scheduler!r}: cannot connect ({exc})") from None
    return None  # dask_backend starts a local cluster


def _budget_options(args: argparse.Namespace) -> dict[str, Any]:
    """The budget flags as keyword options of :func:`dpopt.release.release` (validated, one line)."""
    from .budgets import resolve_budget

    opts = {"epsilon": args.epsilon, "epsilon_total": args.epsilon_total, "rho": args.rho,
            "delta": args.delta, "mechanism": args.mechanism}
    try:
        resolve_budget(**opts)
    except DpoptInputError as exc:
        text = str(exc)
        for api, flag in (("`epsilon_total`", "`--epsilon-total`"), ("`epsilon`", "`--epsilon`"), ("`rho`", "`--rho`"),
                          ("`delta`", "`--delta`"), ("mechanism='gaussian'", "--mechanism gaussian"),
                          ("rho=", "--rho "), ("delta=", "--delta ")):
            text = text.replace(api, flag)
        raise CliError(text) from None
    return opts


def _check_numbers(bound: float, args: argparse.Namespace) -> None:
    """Every numeric flag checked before any data is read (no error after the expensive steps)."""
    from .._validation import check_bound, check_nonnegative_float
    from .release import DEFAULT_GRANULARITY_BITS, check_confidence

    bound = check_bound(bound)
    check_confidence(args.confidence)
    for flag in ("target", "target_variance"):
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CliError(f"`--{flag.replace('_', '-')}` must be a positive finite number; got {value!r}")
    if args.error_bound is not None:
        eb = check_nonnegative_float(args.error_bound, "error_bound")
        if eb == 0 or not math.isfinite(eb):  # pragma: no cover - check_nonnegative_float refuses inf
            raise CliError(f"`--error-bound` must be a positive finite number; got {args.error_bound!r}")
    if args.time_limit is not None:
        check_nonnegative_float(args.time_limit, "time_limit")
    if args.chunksize is not None and args.chunksize < 1:
        raise CliError(f"`--chunksize` must be an integer >= 1; got {args.chunksize!r}")
    # the discrete sampler's integer arithmetic (release.py refuses these only after aggregating)
    if bound * bound * 2.0**DEFAULT_GRANULARITY_BITS > 2.0**60:
        raise CliError(f"`--bound` must be at most 2^24 = {2**24} (U^2 * 2^{DEFAULT_GRANULARITY_BITS} "
                       f"must stay below 2^60 on the release grid); got {bound!r}")


def _records(args: argparse.Namespace) -> tuple[Any, float]:
    """RECORDS (or the embedded example) and U; the example's budget defaults are filled into args."""
    from ..records.data import EXAMPLE_BOUND, EXAMPLE_EPSILON_TOTAL, austin_sample_path

    if args.example:
        if args.records:
            raise CliError(f"give either RECORDS or --example, not both; got RECORDS {args.records!r}")
        if all(getattr(args, k) is None for k in ("epsilon", "epsilon_total", "rho")):
            args.epsilon_total = EXAMPLE_EPSILON_TOTAL
        return austin_sample_path(), EXAMPLE_BOUND if args.bound is None else args.bound
    if not args.records:
        raise CliError("RECORDS is required (a CSV or Parquet path), or use --example for the embedded sample")
    remote = args.backend == "dask" and ("://" in args.records or "*" in args.records)
    if not remote and not Path(args.records).exists():
        raise CliError(f"RECORDS must be an existing CSV or Parquet path; got {args.records!r} (not found)")
    if args.bound is None:
        raise CliError("`--bound` is required: the public upper bound U of the values (e.g. --bound 120)")
    if all(getattr(args, k) is None for k in ("epsilon", "epsilon_total", "rho")):
        raise CliError("a privacy budget is required: --epsilon-total (what one user may lose over the whole "
                       "release, e.g. --epsilon-total 10), --rho with --mechanism gaussian, or seed 002's "
                       "per-grid --epsilon")
    return (args.records if remote else Path(args.records)), args.bound


def _bounds_option(text: str) -> Any:
    if text in ("select", "quantile"):
        return text
    try:
        k, c = (int(x) for x in text.split(","))
    except ValueError:
        raise CliError(f"`--bounds` must be select, quantile or K,C (two integers); got {text!r}") from None
    return (k, c)


def _run_user_model(args: argparse.Namespace, records: Any, bound: float) -> int:
    """``--privacy user``: :func:`dpopt.userdp.release_user_records`, written atomically."""
    from .._validation import check_bound
    from ..userdp import write_user_release
    from .release import release
    from .report import check_out

    if args.epsilon is not None or (args.epsilon_total is None and args.rho is None):
        raise CliError("--privacy user needs --epsilon-total (what one user may lose over the whole release; with "
                       "--mechanism gaussian also --delta) or --rho with --mechanism gaussian; the per-grid "
                       "--epsilon is seed 002's mode of --privacy public-occupancy")
    if args.rho is not None and args.mechanism != "gaussian":
        raise CliError(f"`--rho` is a zCDP budget: use it with --mechanism gaussian; got --rho {args.rho!r}")
    if args.rho is not None and args.epsilon_total is not None:
        raise CliError("give one budget: `--rho` or `--epsilon-total` (with --delta), not both")
    if args.mechanism == "gaussian" and args.epsilon_total is not None and args.delta is None:
        raise CliError("`--delta` is required with --mechanism gaussian and --epsilon-total (e.g. --delta 1e-6)")
    foreign = [flag for flag, on in (("--plan", args.plan is not None), ("--pseudo-users", args.pseudo_users),
                                     ("--error-bound", args.error_bound is not None), ("--split", args.split != "equal"),
                                     ("--target", args.target is not None), ("--time-limit", args.time_limit is not None),
                                     ("--backend", args.backend != "local"), ("--out-of-range", args.out_of_range != "clip"),
                                     ("--criterion", args.criterion != "noise"),
                                     ("--confidence", args.confidence != 0.95))
               if on]
    if foreign:
        raise CliError(f"`{foreign[0]}` is an option of --privacy public-occupancy (add it to choose that model)")
    check_bound(bound)
    check_out(args.out, overwrite=args.overwrite)
    columns = {"user_id": args.user_col, "latitude": args.lat_col, "longitude": args.lng_col,
               "timestamp": args.time_col, "value": args.value_col}
    try:
        result = release(records, bound=bound, privacy="user", epsilon_total=args.epsilon_total, rho=args.rho,
                         mechanism=args.mechanism, delta=args.delta,
                         partitions=args.partitions, bounds=_bounds_option(args.bounds),
                         h3_resolution=args.h3_resolution, slot=args.slot, columns=columns,
                         timestamp_unit=args.timestamp_unit, chunksize=args.chunksize, seed=args.seed)
        paths = write_user_release(result, args.out, overwrite=args.overwrite)
    except (CliError, DpoptInputError):
        raise
    except (MemoryError, OSError) as exc:
        raise CliError(f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # never a traceback on the command line
        raise CliError(f"unexpected {type(exc).__name__}: {exc} (please report this with the command line)") from None
    s = result.summary
    emit({"out": str(Path(args.out).resolve()),
          "files": sorted(str(p.relative_to(paths["release"].parent)) for p in paths.values()),
          "privacy_model": s.privacy_model, "mechanism": s.mechanism, "rho_total": s.rho_total,
          "epsilon_total": s.epsilon_total, "delta": s.delta,
          "k": s.k, "c": s.c, "bounds_rule": s.bounds_rule, "partitions": s.partitions,
          "grids_released": s.grids_released, "noise": s.noise}, args.json)
    return 0


def _progress(args: argparse.Namespace) -> bool:
    from ..writers.console import progress_wanted  # on stderr: a terminal, or --progress

    return progress_wanted(args.progress or None, quiet=args.quiet)


def run(args: argparse.Namespace) -> int:
    """Run ``dpopt release``: release, write the files into ``--out``, print the summary; 0 on success."""
    from .release import release
    from .report import check_out, write_report

    records, bound = _records(args)
    privacy = args.privacy or ("public-occupancy" if args.example else "user")
    if privacy == "user":
        return _run_user_model(args, records, bound)
    if args.partitions is not None or args.bounds != "select":
        raise CliError("`--partitions` and `--bounds` belong to --privacy user")
    budget = _budget_options(args)
    _check_numbers(bound, args)
    check_out(args.out, overwrite=args.overwrite)
    columns = {"user_id": args.user_col, "latitude": args.lat_col, "longitude": args.lng_col,
               "timestamp": args.time_col, "value": args.value_col}
    client = _client(args)
    try:
        result = release(
            records, bound=bound, privacy="public-occupancy", **budget, h3_resolution=args.h3_resolution, slot=args.slot,
            plan=args.plan, pseudo_users=args.pseudo_users, error_bound=args.error_bound, split=args.split,
            time_limit=args.time_limit, target=args.target, target_variance=args.target_variance,
            criterion=args.criterion, confidence=args.confidence, seed=args.seed, columns=columns,
            out_of_range=args.out_of_range, timestamp_unit=args.timestamp_unit,
            chunksize=args.chunksize, backend=args.backend, client=client, progress=_progress(args),
        )
        paths = write_report(result, args.out, make_map=not args.no_map, overwrite=args.overwrite)
    except CliError:
        raise
    except (MemoryError, OSError) as exc:
        raise CliError(f"{type(exc).__name__}: {exc}") from None
    except DpoptInputError:
        raise
    except Exception as exc:  # never a traceback on the command line
        raise CliError(f"unexpected {type(exc).__name__}: {exc} (please report this with the command line)") from None
    finally:
        if client is not None:
            client.close()
    emit(_payload(result, paths, args.out), args.json)
    return 0


def _payload(result: Any, paths: dict[str, Path], out: str) -> dict[str, Any]:
    """What ``dpopt release`` prints (public-occupancy): the published headline numbers."""
    s = result.summary
    ing = result.ingest
    payload = {
        "out": str(Path(out).resolve()),
        "files": sorted(str(p.relative_to(paths["release"].parent)) for p in paths.values()),
        "users": s.users,
        "grids": s.grids,
        "records_read": ing.records_read,
        "dropped_records": s.dropped_records,
        "plan": s.plan + (" + pseudo-users" if s.pseudo_users else ""),
        "plan_status": s.plan_status,
        "degradation": s.degradation,
        "degradation_baseline": s.degradation_baseline,
        "privacy_model": s.privacy_model,
        "mechanism": s.mechanism,
        "budget": s.budget,
        "epsilon": s.epsilon,
        "epsilon_total": s.epsilon_total,
        "rho_total": s.rho_total,
        "delta": s.delta,
        "released_grids": s.released_grids,
        "target": s.target,
        "grids_within_target": s.grids_within_target,
        "error_bound": s.error_bound,
        "suppressed_pairs": s.suppressed_pairs,
        "noise": s.noise,
    }
    return payload
