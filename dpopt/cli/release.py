"""``dpopt release``: records -> H3 x time grids -> plan -> DP release files.

Examples::

    dpopt release --example                      # the embedded Austin bus day (see data.EXAMPLE_*)
    dpopt release buses.csv --bound 120 --epsilon-total 10 --target 10 --out out/
    dpopt release buses.csv --bound 120 --mechanism gaussian --epsilon-total 10 --delta 1e-6 --out out/
    dpopt release temps.csv --lower -20 --upper 40 --epsilon-total 10 --out out/   # values in [-20, 40]
    dpopt release buses.csv --bound 120 --epsilon 1 --out out/ --plan greedy --seed 7   # a budget per grid
    dpopt release buses.parquet --bound 120 --epsilon 0.5 --user-col vehicle_id \\
        --time-col timestamp_utc --value-col speed_kmh --backend dask --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

from .._validation import DpoptInputError
from ..privacy.model_text import PRIVACY_MODEL_TEXT, USER_ID_RULE, USER_MODEL_TEXT
from .common import CliError, emit

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``release`` sub-command to the ``dpopt`` parser."""
    p = subparsers.add_parser(
        "release", allow_abbrev=False,
        help="user-level DP release of per-(H3 cell, time slot) means and variances from records",
        description=textwrap.fill(
            "Read records (user, latitude, longitude, timestamp, value), group them into H3 hexagons x "
            "time slots (UTC, or local with --timezone) and release every grid's mean and variance with "
            "user-level differential privacy. The budget is what one user may lose over the whole release "
            "(--epsilon-total, or --rho / --delta with --mechanism gaussian), or a budget per grid "
            "(--epsilon, public-occupancy only: a user in K grids spends K times it). Writes release.csv, "
            "answers.csv, summary.json, report.md, report.html, map.png, release.geojson, release.parquet "
            "(and the budget planner's frontier.png) into --out: publish that folder as it is. "
            "Files for the data holder only (raw user ids, what reading dropped, timings) go to the "
            "owner-only folder OUT.diagnostics: NOT for publication.",
            90,
        ),
        epilog="\n\n".join(textwrap.fill(t, 90) for t in (*USER_MODEL_TEXT, *PRIVACY_MODEL_TEXT, USER_ID_RULE)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("records", nargs="?", help="CSV (.csv, .csv.gz) or Parquet file/directory of records")
    p.add_argument("--example", action="store_true",
                   help="use the embedded Austin bus day (defaults: --bound 120 --epsilon-total 10; under "
                   "--privacy user also its public list of grids and its time zone)")
    p.add_argument("--bound", type=float, metavar="U",
                   help="upper bound U of the values: they lie in [0, U] (e.g. 120 for km/h)")
    p.add_argument("--lower", type=float, metavar="L",
                   help="lower bound L of the values, with --upper (or --bound) U: values lie in [L, U], "
                   "e.g. --lower -20 --upper 40 (default 0)")
    p.add_argument("--upper", type=float, metavar="U", help="the same as --bound (give one of them)")
    p.add_argument("--privacy", choices=["user", "public-occupancy"],
                   help="who is protected. user (default): adding or removing all of one user's records; "
                   "nothing about who is where is public (payments, phones, app traces). public-occupancy: "
                   "one user's values change; which user has how many records in which grid is public "
                   "(broadcast vehicle positions)")
    _add_budget_arguments(p)
    p.add_argument("--out", default="dpopt-release", help="output directory (default ./dpopt-release); "
                   "written atomically, refused if it exists and is not empty unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty --out (only once the new release is complete)")
    p.add_argument("--h3-resolution", type=int, default=7, help="H3 resolution 0..15 (default 7)")
    p.add_argument("--slot", default="1h", help="time slot length, e.g. 1h, 15min (default 1h; cut in UTC, or in local time with --timezone)")
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
                   help="public-occupancy: the budget of EACH grid; a user in K released grids spends K*epsilon")
    b.add_argument("--mechanism", default="laplace", choices=["laplace", "gaussian"],
                   help="laplace (pure epsilon-DP, default) or gaussian (rho-zCDP; error grows like "
                   "sqrt(K) instead of K over the grids a user is in)")


def _add_plan_arguments(p: Any) -> None:
    """The planner flags (--privacy public-occupancy; refused under user) and the error bounds reported."""
    o = p.add_argument_group("--privacy public-occupancy (refused under --privacy user)")
    o.add_argument("--plan", choices=["budget", "hierarchy", "baseline", "greedy", "milp"],
                   help="public-occupancy: which records to keep and where to spend the budget. budget "
                   "(default with a total budget): spend it on the grids that can meet --target; hierarchy: "
                   "also publish larger hexagons and longer slots so every grid is answered within --target "
                   "(default a twentieth of the value range); baseline: keep every record (default with "
                   "--epsilon); greedy: drop some users' records from some grids so that no user is in too "
                   "many (fast); milp: the same with the fewest grids per user, solved exactly")
    o.add_argument("--target", type=float, help="--plan budget or hierarchy: the largest error (+-, in the "
                   "values' units) a released mean may have (default: chosen from the public counts where a "
                   "looser target would release few more grids; reported)")
    o.add_argument("--target-variance", type=float, help="--plan budget: a target for the variance too")
    o.add_argument("--criterion", default="noise", choices=["noise", "worst_case"],
                   help="error bounds (and --target) count the noise only (default) or the worst-case "
                   "clipping bias plus noise")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="probability of the per-grid error bounds (default 0.95)")
    o.add_argument("--pseudo-users", action="store_true",
                   help="cap the records each user keeps in a grid (a cap per grid, from the public counts)")
    o.add_argument("--error-bound", type=float, help="worst-case error every grid must meet (default: the "
                   "largest grid error when every record is kept)")
    o.add_argument("--split", default="equal", choices=["equal", "optimal"],
                   help="budget split between mean and variance (default equal)")
    o.add_argument("--time-limit", type=float, help="total seconds for planning (MILP or budget planner)")
    p.add_argument("--seed", type=int, help="seed the noise (reproducible; NOT for a real release)")


def _add_user_arguments(p: Any) -> None:
    """The --privacy user options."""
    u = p.add_argument_group("--privacy user")
    u.add_argument("--partitions", help="public partition list: a CSV with columns cell (H3 index) and slot "
                   "(ISO 8601 start time: UTC, or with --timezone a local time with its offset or naive in the zone; on the night "
                   "clocks go back both 01:00 hours may be listed, and share one answer); listed grids without records "
                   "are released too (as noise). "
                   "Without it grids are selected privately (needs --delta)")
    u.add_argument("--bounds", default="histogram",
                   help="contribution bounds: histogram (default: noisy histograms of the contributions, then the "
                   "(k, c) of least predicted error), select (chosen under DP by predicted error), quantile "
                   "(private quantiles), or K,C (public: at most K grids per user, C records per grid). The "
                   "optimised and place strategies choose their own record cap and value clamp under DP: "
                   "another --bounds goes with --strategy adaptive or fixed")
    u.add_argument("--strategy", default="optimised", metavar="{optimised,place,adaptive,fixed}",
                   help="what to measure. optimised (the default): totals by cell and for the map "
                   "over slots, days, hours of the day and the whole period, budget shares chosen on a small "
                   "private pilot; one model combines them into each listed grid's answer and interval. Without "
                   "--partitions (then needs --delta) half the budget selects cells privately and each selected "
                   "cell's hours of the day are answered, recurring daily. Earlier "
                   "shapes, for comparison: place (each cell over the whole period, and the map), adaptive "
                   "(larger hexagons and longer slots where data are thin), fixed (every grid alone)")
    u.add_argument("--resolution", default="auto", metavar="{auto,place,adaptive,fixed}",
                   help="the old name of --strategy (auto = optimised); kept for one release cycle")
    u.add_argument("--coarsest-resolution", type=int, metavar="R0",
                   help="with --partitions: the coarsest H3 resolution offered (the engine's map level, the "
                   "top of the place and adaptive hierarchies; below --h3-resolution; default --h3-resolution - 4)")
    u.add_argument("--profile", default=None, metavar="{day,week}",
                   help="with --partitions and --strategy adaptive (the default engine measures the hours of the "
                   "day and days of the week itself), or under --privacy public-occupancy with "
                   "--plan hierarchy: the longer time slots are windows that recur every day (hour of the day, "
                   "then 3 hours of the day, at --slot 1h) or week (hour, 3 hours, day of the week); "
                   "release.csv's repeat_every and repeat_until say when a window recurs")


def _add_input_arguments(p: Any) -> None:
    """--privacy user options, input columns, cleaning, scale and output flags."""
    _add_user_arguments(p)
    g = p.add_argument_group(
        "input columns and cleaning",
        "Records are rows (user, latitude, longitude, timestamp, value) of a CSV file (any separator, "
        "--sep), a Parquet file, or a directory of CSV or of Parquet files. Python: "
        "columns={dpopt_name: your_column}.")
    for flag, name, what in (("--user-col", "user_id", "user id (a user is who the privacy protects)"),
                             ("--lat-col", "latitude", "latitude, WGS84 degrees"),
                             ("--lng-col", "longitude", "longitude, WGS84 degrees"),
                             ("--time-col", "timestamp", "time: ISO 8601 text or Unix time (--timestamp-unit)"),
                             ("--value-col", "value", "values released, in [L, U]")):
        g.add_argument(flag, default=name, metavar="NAME", help=f"column of the {what} (default: {name})")
    g.add_argument("--sep", default=",", help="CSV field separator, e.g. ';' (default: ',')")
    g.add_argument("--decimal", default=".", choices=[".", ","],
                   help="decimal mark of the CSV's numbers (default '.'); ',' reads 77,11 as 77.11 (a spreadsheet "
                   "export in a European or Brazilian locale, separated by ';': --sep ';' --decimal ,)")
    g.add_argument("--timestamp-unit", default="s", choices=["s", "ms", "us", "ns"],
                   help="unit of numeric timestamps (Unix time; default s)")
    g.add_argument("--out-of-range", default="clip", choices=["clip", "drop", "error"],
                   help="values outside [L, U], +-inf included: clip (default), drop, or stop with an error. "
                   "drop and error are --privacy public-occupancy only (under the default user model which "
                   "records count may not depend on their values: values are always clipped). drop makes the "
                   "public counts depend on values (not covered by the DP guarantee unless validity is "
                   "public); use it only for sentinels")
    g.add_argument("--max-dropped", type=float, default=None, metavar="SHARE",
                   help="--privacy public-occupancy: refuse the run when more than this share of the rows is "
                   "dropped as invalid (default 0.01; 1 disables the check); the causes are printed. Under "
                   "--privacy user dropped records are counted in OUT.diagnostics only (whether a release "
                   "happens may not depend on the data)")
    g.add_argument("--timezone", metavar="AREA/CITY", default=None,
                   help="IANA time zone (e.g. America/Chicago, or UTC) in which times without a UTC offset "
                   "were written; without it such times are refused (--privacy user: dropped, and counted in "
                   "OUT.diagnostics). Times with Z or +hh:mm and Unix "
                   "times need no zone. A wall time without an offset that the zone's clock change makes occur "
                   "twice (the night clocks go back) or never is dropped, counted as an unparseable timestamp: "
                   "write offsets to keep those records")
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
    p.add_argument("--quiet", action="store_true", help="no progress bar, no progress lines")
    p.add_argument("--progress", action="store_true",
                   help="progress bars and the release's progress lines (bounds, rounds, fits, each with its "
                        "elapsed seconds) on stderr even when not a terminal")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (and nothing else on stdout)")
    p.add_argument("--unit", metavar="TEXT", default=None,
                   help="unit of the values, shown in report.html, the console summary and summary.json "
                        "(default: km/h with --example, else none)")


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


#: API option name -> CLI flag, for one-line errors that name the flag the user typed
_FLAGS = {"epsilon_total": "--epsilon-total", "epsilon": "--epsilon", "rho": "--rho", "delta": "--delta",
          "mechanism": "--mechanism", "bound": "--bound", "lower": "--lower", "upper": "--upper",
          "confidence": "--confidence", "plan": "--plan",
          "target": "--target", "target_variance": "--target-variance", "time_limit": "--time-limit",
          "pseudo_users": "--pseudo-users", "error_bound": "--error-bound", "split": "--split",
          "criterion": "--criterion", "h3_resolution": "--h3-resolution", "slot": "--slot",
          "chunksize": "--chunksize", "partitions": "--partitions", "bounds": "--bounds",
          "out_of_range": "--out-of-range", "backend": "--backend", "timestamp_unit": "--timestamp-unit",
          "seed": "--seed", "resolution": "--resolution", "strategy": "--strategy",
          "coarsest_resolution": "--coarsest-resolution",
          "profile": "--profile", "timezone": "--timezone", "max_dropped": "--max-dropped",
          "time_window": "--time-window", "sep": "--sep", "decimal": "--decimal"}


def _flagged(exc: DpoptInputError) -> CliError:
    """The error with the API's option names replaced by the CLI's flags."""
    text = _named(str(exc))
    for api, flag in sorted(_FLAGS.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f"{api}=", f"{flag} ")
    return CliError(text.replace("mechanism='gaussian'", "--mechanism gaussian"))


def _named(text: str) -> str:
    """``text`` with each backticked API option name (`partitions`) written as its flag (`--partitions`)."""
    for api, flag in sorted(_FLAGS.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f"`{api}`", f"`{flag}`")
    return text


def _idle_flags(args: argparse.Namespace, privacy: str) -> list[str]:
    """Flags given that would do nothing under ``privacy`` (refused)."""
    common = [("--chunksize", args.chunksize is not None and args.backend == "dask")]
    if privacy == "user":
        return [f for f, on in common + [
            ("--epsilon", args.epsilon is not None), ("--plan", args.plan is not None),
            ("--pseudo-users", args.pseudo_users), ("--error-bound", args.error_bound is not None),
            ("--split", args.split != "equal"), ("--target", args.target is not None),
            ("--target-variance", args.target_variance is not None), ("--time-limit", args.time_limit is not None),
            ("--criterion", args.criterion != "noise"), ("--out-of-range", args.out_of_range != "clip"),
            ("--max-dropped", args.max_dropped is not None),
            ("--no-map", args.no_map and args.resolution == "fixed"),
            ("--coarsest-resolution", args.coarsest_resolution is not None
             and not (args.partitions and args.resolution != "fixed"))] if on]
    return [f for f, on in common + [("--partitions", args.partitions is not None),
                                     ("--bounds", args.bounds != "histogram"),
                                     ("--strategy", args.strategy != "optimised"),
                                     ("--resolution", args.resolution != "auto"),
                                     ("--coarsest-resolution", args.coarsest_resolution is not None)] if on]


def _options(args: argparse.Namespace, privacy: str, bound: float) -> dict[str, Any]:
    """Every flag as the front door's typed options, validated before any record is read."""
    from ..privacy.contributions import InputOptions
    from ..privacy.options import Budget, GridOptions, NoiseOptions, PerGridBudget
    from ..privacy.public_occupancy import PublicOccupancyOptions
    from ..privacy.user.options import UserOptions
    from ..release.release import EstimationOptions, check_options

    idle = _idle_flags(args, privacy)
    if idle:
        other = "--privacy public-occupancy" if privacy == "user" else "--privacy user"
        if idle[0] == "--chunksize":  # the one flag idle by the back-end, not by the model
            raise CliError("`--chunksize` does nothing with --backend dask: drop it (Dask reads in its own partitions)")
        why = {"--no-map": " (no map is drawn with --resolution fixed)",
               "--max-dropped": " (a refusal by the share of dropped records would depend on the private data; "
                                "they are counted in the diagnostics folder)",
               "--coarsest-resolution": " (it goes with --partitions and a multi-resolution --resolution)"}
        raise CliError(f"`{idle[0]}` does nothing under --privacy {privacy}: drop it"
                       + why.get(idle[0], f" (it is an option of {other})"))
    columns = {"user_id": args.user_col, "latitude": args.lat_col, "longitude": args.lng_col,
               "timestamp": args.time_col, "value": args.value_col}
    try:
        if args.epsilon is not None and privacy != "user":
            if args.epsilon_total is not None or args.rho is not None or args.delta is not None \
                    or args.mechanism != "laplace":
                raise DpoptInputError("`epsilon` (per grid) goes alone with Laplace noise: drop `epsilon_total`, "
                                      "`rho`, `delta` and mechanism='gaussian'")
            budget: Any = PerGridBudget(args.epsilon)
        else:
            budget = Budget(epsilon_total=args.epsilon_total, rho=args.rho, delta=args.delta, mechanism=args.mechanism)
        model: Any = UserOptions(partitions=args.partitions, bounds=_bounds_option(args.bounds),
                                 resolution=args.resolution, coarsest_resolution=args.coarsest_resolution,
                                 profile=args.profile, strategy=_strategy(args)) \
            if privacy == "user" else PublicOccupancyOptions(
                plan=args.plan, pseudo_users=args.pseudo_users, error_bound=args.error_bound, split=args.split,
                time_limit=args.time_limit, target=_positive(args.target, "target"),
                target_variance=_positive(args.target_variance, "target_variance"), criterion=args.criterion,
                profile=args.profile)
        if args.coarsest_resolution is not None and not 0 <= args.coarsest_resolution <= args.h3_resolution:
            raise DpoptInputError(f"`coarsest_resolution` must be an H3 resolution in [0, --h3-resolution = "
                                  f"{args.h3_resolution}]; got {args.coarsest_resolution!r}")
        if args.profile is not None:  # the slot must divide the cycle: refused before any record is read
            from ..hierarchy.tree import default_levels
            from ..records.grid import parse_slot

            default_levels(args.h3_resolution, parse_slot(args.slot), profile=args.profile)
        opts = {"budget": budget, "model": model, "grid": GridOptions(args.h3_resolution, args.slot),
                "estimation": EstimationOptions(confidence=args.confidence), "noise": NoiseOptions(seed=args.seed),
                "io": InputOptions(columns=columns, out_of_range=args.out_of_range,
                                   timestamp_unit=args.timestamp_unit, chunksize=args.chunksize,
                                   backend=args.backend, progress=_progress(args), sep=args.sep, decimal=args.decimal,
                                   max_dropped=args.max_dropped, time_window=_window(args.time_window),
                                   timezone=args.timezone)}
        check_options(bound, opts["budget"], opts["model"], opts["noise"], opts["estimation"], opts["io"], opts["grid"],
                      lower=args.lower, upper=args.upper)
    except DpoptInputError as exc:
        raise _flagged(exc) from None
    return opts


def _progress(args: argparse.Namespace) -> bool:
    from ..writers.console import progress_wanted  # on stderr: a terminal, or --progress

    return progress_wanted(args.progress or None, quiet=args.quiet)


def _window(text: str) -> Any:
    """--time-window as the records layer reads it ("none": no window)."""
    return None if str(text).lower() == "none" else text


def _positive(value: Any, name: str) -> Any:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise DpoptInputError(f"`{name}` must be a positive finite number; got {value!r}")
    return value


def _records(args: argparse.Namespace) -> tuple[Any, float | None]:
    """RECORDS (or the embedded example) and --bound (None with --upper; the range itself is
    checked with the options); the example's budget and bound defaults are filled into args."""
    from ..records.data import EXAMPLE_BOUND, EXAMPLE_EPSILON_TOTAL, austin_sample_path

    if args.example:
        if args.records:
            raise CliError(f"give either RECORDS or --example, not both; got RECORDS {args.records!r}")
        if all(getattr(args, k) is None for k in ("epsilon", "epsilon_total", "rho")):
            args.epsilon_total = EXAMPLE_EPSILON_TOTAL
        ranged = args.bound is not None or args.upper is not None or args.lower is not None
        return austin_sample_path(), args.bound if ranged else EXAMPLE_BOUND
    if not args.records:
        raise CliError("RECORDS is required (a CSV or Parquet path), or use --example for the embedded sample")
    remote = args.backend == "dask" and ("://" in args.records or "*" in args.records)
    try:
        found = remote or Path(args.records).exists()
    except OSError as exc:  # a name the file system refuses (too long)
        raise CliError(f"RECORDS must be an existing CSV or Parquet path; got {args.records!r} ({exc.strerror})") from None
    if not found:
        raise CliError(f"RECORDS must be an existing CSV or Parquet path; got {args.records!r} (not found)")
    if args.bound is None and args.upper is None and args.lower is None:
        raise CliError("`--bound` is required: the public upper bound U of the values (e.g. --bound 120, or "
                       "--lower -20 --upper 40 for values in [-20, 40])")
    if all(getattr(args, k) is None for k in ("epsilon", "epsilon_total", "rho")):
        raise CliError("a privacy budget is required: --epsilon-total (what one user may lose over the whole "
                       "release, e.g. --epsilon-total 10), --rho with --mechanism gaussian, or (--privacy "
                       "public-occupancy only) a budget per grid --epsilon")
    return (args.records if remote else Path(args.records)), args.bound


def _example_list(args: argparse.Namespace, privacy: str) -> None:
    """``--example`` under ``user``: the shipped public list (the bus network's cells x its service
    hours, :func:`dpopt.records.data.example_partitions`) and the city's time zone, unless given."""
    from ..records.data import EXAMPLE_TIMEZONE, example_partitions_path

    if not args.example or privacy != "user":
        return
    if args.partitions is None:
        if args.timezone not in (None, EXAMPLE_TIMEZONE):  # the shipped list is of that zone's hours
            raise CliError(f"--timezone {args.timezone} with --example: the example's list of grids is of "
                           f"{EXAMPLE_TIMEZONE} hours; leave --timezone out (or give --partitions)")
        args.partitions = str(example_partitions_path())
    if args.timezone is None:
        args.timezone = EXAMPLE_TIMEZONE


def _example_answer(result: Any, unit: str | None) -> str:
    """The example's question in words: how fast do buses go at one downtown place at 17:00 local
    time, and how sure is that (the release row answers.csv names for that grid)."""
    import h3

    from ..records.data import EXAMPLE_PLACE

    lat, lng, hour = EXAMPLE_PLACE
    cell = h3.latlng_to_cell(lat, lng, 7)
    t = result.table
    ans = getattr(result, "answers", None)
    if ans is None:  # the flat release: every released grid is its own row
        node = t[(t["cell"].astype(str) == cell) & t["slot"].astype(str).str.contains(f"T{hour:02d}:00")]
        node = node[node["released"].astype(bool)] if "released" in node.columns else node
    else:
        hit = ans[(ans["cell"].astype(str) == cell) & ans["slot"].astype(str).str.contains(f"T{hour:02d}:00")]
        if hit.empty:
            return ""
        row = hit.iloc[0]
        node = t[(t["cell"].astype(str) == str(row["node_cell"])) & (t["slot"].astype(str) == str(row["node_slot"]))
                 & (t["slot_end"].astype(str) == str(row["node_slot_end"]))]
    if node.empty:
        return ""
    mean, bound = float(node["mean"].iloc[0]), float(node["mean_error_bound"].iloc[0])
    u = f" {unit}" if unit else ""
    same = getattr(result.summary, "answers_vary_by", None) == []
    return (f"Congress Ave at 6th St (H3 {cell}), {hour}:00-{hour + 1}:00 local time: buses averaged "
            f"{mean:.1f}{u}, within ±{bound:.1f}{u} of the true mean with 95 % confidence"
            + (" (the map-wide mean: this release answers every place and hour alike, see 'answers')." if same else "."))


def _strategy(args: Any) -> str:
    """``--strategy``; ``--resolution`` (its old name) says so on stderr when given."""
    if args.resolution != "auto":  # said on stderr once the release ran (an error stays one line)
        if args.strategy not in ("optimised", args.resolution):
            raise DpoptInputError(f"--strategy {args.strategy} and --resolution {args.resolution} disagree: give one")
        return str(args.resolution)
    return str(args.strategy)


def _bounds_option(text: str) -> Any:
    if text in ("histogram", "select", "quantile"):
        return text
    try:
        k, c = (int(x) for x in text.split(","))
    except ValueError:
        raise DpoptInputError(f"`bounds` must be histogram, select, quantile or K,C (two integers); got {text!r}") \
            from None
    return (k, c)


def run(args: argparse.Namespace) -> int:
    """Run ``dpopt release``: every option validated, then release, write the files into ``--out``
    atomically, print the summary; 0 on success."""
    from ..writers import check_out, write_release
    from ..writers.console import phase_lines
    from ..release.release import release

    records, bound = _records(args)
    privacy = args.privacy or "user"
    _example_list(args, privacy)
    opts = _options(args, privacy, bound)
    try:  # before any record is read: never an input, nor a folder holding one
        check_out(args.out, overwrite=args.overwrite, inputs=(records, args.partitions))
    except DpoptInputError as exc:
        raise CliError(str(exc).replace("`out`", "`--out`").replace("overwrite=True (CLI: --overwrite)",
                                                                      "--overwrite")) from None
    client = _client(args)
    if client is not None:
        import dataclasses

        opts["io"] = dataclasses.replace(opts["io"], client=client)
    try:
        with phase_lines(opts["io"].progress):
            result = release(records, bound=bound, lower=args.lower, upper=args.upper, **opts)
            unit = args.unit or ("km/h" if args.example else None)
            logging.getLogger(__name__).info("writing the release into %s", args.out)
            paths = write_release(result, args.out, make_map=not args.no_map, overwrite=args.overwrite, unit=unit)
    except CliError:
        raise
    except DpoptInputError as exc:  # the release's own checks name Python arguments: the CLI's flags here
        raise CliError(_named(str(exc))) from None
    except (MemoryError, OSError) as exc:
        raise CliError(f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # never a traceback on the command line
        raise CliError(f"unexpected {type(exc).__name__}: {exc} (please report this with the command line)") from None
    finally:
        if client is not None:
            client.close()
    if args.json:
        emit(_printed_summary(paths, args.out), True)
    else:  # people: units, no field that does not apply, where the report is
        sys.stdout.write(_console(paths, unit, args.out))
    _say_inputs(result, paths, privacy)
    _say_delta(result, args, privacy)
    _say_list_lattice(result, privacy)
    _say_reweighting(result, privacy)
    if args.example and privacy == "user" and not args.json:
        print(_example_answer(result, unit))
    if privacy == "user" and args.resolution != "auto":
        print(f"dpopt release: note: --resolution is the old name of --strategy; ran --strategy {args.resolution}",
              file=sys.stderr)
    outlook = getattr(result.summary, "outlook", "") if privacy == "user" else _nothing_released(result)
    if outlook:  # never silently nothing
        print(f"dpopt release: warning: {outlook}", file=sys.stderr)
    if privacy == "user" and args.profile is not None and not _recurring_levels(result):
        print(f"dpopt release: warning: --profile {args.profile} added no recurring window: no node holds slots of two "
              "cycles (e.g. a list within one UTC day), so the release answers what the plain chain would",
              file=sys.stderr)
    return 0


def _say_inputs(result: Any, paths: dict[str, Path], privacy: str) -> None:
    """On stderr: the files read (public: the data holder's own paths) and, under ``user``, where
    the dropped records are counted (never how many: a private count)."""
    files = (getattr(result, "diagnostics", None) or {}).get("ingest", {}).get("files") or []
    if files:
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        print(f"dpopt release: read {len(files)} file{'s' if len(files) > 1 else ''}: {shown}", file=sys.stderr)
    where = _diagnostics_dir(paths)
    if privacy == "user" and where:  # the same words whatever was dropped: messages never depend on one user
        zone = getattr(getattr(getattr(result, "measurements", None), "info", None), "timezone", None)
        naive = "" if zone else " (a time without a UTC offset is one, unless --timezone Area/City names its zone)"
        policy = (getattr(result, "diagnostics", None) or {}).get("ingest", {}).get("out_of_range_policy", "clip")
        clip = "; values outside the declared range are moved to its nearer end and counted there too" \
            if policy == "clip" else ""  # the user model's one policy (--out-of-range is public-occupancy's)
        print(f"dpopt release: records that fail cleaning are dropped and counted by cause in {where}{naive} (not "
              f"for publication){clip}", file=sys.stderr)


def _say_list_lattice(result: Any, privacy: str) -> None:
    """When every listed slot lies on a coarser lattice than ``--slot`` (an hourly list read with
    --slot 30min), say so: the records of the slots between them are off the list (public: the list
    and the slot length)."""
    import math

    import numpy as np

    from ..records.grid import slot_text

    m = getattr(result, "measurements", None)
    finest = getattr(m, "finest", None) if privacy == "user" else None
    slot_ns = getattr(getattr(m, "info", None), "slot_ns", None)
    if finest is None or not len(finest) or not slot_ns:
        return
    slots = np.unique(finest["slot"].to_numpy(dtype=np.int64))
    step = math.gcd(*[int(d) for d in np.diff(slots)]) if slots.size > 1 else 0
    if step and step % int(slot_ns) == 0 and step // int(slot_ns) > 1:
        print(f"dpopt release: warning: every listed slot lies on a {slot_text(step)} lattice while "
              f"--slot is {slot_text(int(slot_ns))}: the records in the slots between them are off the "
              "list and not released; list every slot, or set --slot to the list's own slot length", file=sys.stderr)


def _say_reweighting(result: Any, privacy: str) -> None:
    """What the cap T's re-weighting of users does to the published means and their intervals:
    where summary.json ``reweighting`` (from the DP histogram of records per user) shows it, by how
    much; where it reads 0, which groups the histogram cannot see (:func:`unseen_heavy_users_text`)."""
    from ..writers._published import reweighting_caveat, reweighting_seen, unseen_heavy_users_text

    d = getattr(result.summary, "reweighting", None) if privacy == "user" else None
    cap = getattr(result.summary, "record_cap", None)
    if d is None or cap is None:
        return
    if not reweighting_seen(result.summary):
        print(f"dpopt release: note: {unseen_heavy_users_text(result.summary)}", file=sys.stderr)
        return
    kept = f"{cap} record{'s' if cap != 1 else ''}"
    print(f"dpopt release: note: the record cap T = {cap} keeps at most {kept} of each user, so a published "
          f"mean weighs a user with many records like one with {kept}: the records' weights move by about {d:.2g} "
          f"(total variation, 0 to 1; summary.json `reweighting`: {reweighting_caveat(result.summary)}). Where users with many records have other values than "
          "the rest, a grid's mean of all its records can lie outside its interval: the intervals leave this out",
          file=sys.stderr)


def _say_delta(result: Any, args: argparse.Namespace, privacy: str) -> None:
    """When a ``user`` release spends less δ than --delta allows, say so and why (the private
    selection spends an equal share of δ at each level it selects: public, from the plan)."""
    spent = getattr(result.summary, "delta", None) if privacy == "user" else None
    if args.delta is None or spent is None or not spent < float(args.delta) * (1 - 1e-9):
        return
    print(f"dpopt release: note: this release spends δ = {spent:g} of the --delta {args.delta:g} allowed: the "
          "private selection of grids spends an equal share of δ at each level of the hierarchy it selects, and "
          "levels it does not select spend none (--strategy adaptive)", file=sys.stderr)


def _recurring_levels(result: Any) -> int:
    """How many measured levels of a ``user`` release have a window that recurs over the listed
    slots (:func:`dpopt.hierarchy.tree.windows_recur`; public: the list and the levels)."""
    import numpy as np

    from ..hierarchy.tree import Level, windows_recur

    m = getattr(result, "measurements", None)
    if m is None or m.finest is None or not len(m.finest):
        return 0
    slots, cells = m.finest["slot"].to_numpy(dtype=np.int64), m.finest["cell"].to_numpy(dtype=np.int64)
    return sum(windows_recur(slots, Level(int(lv[0]), int(lv[1]), int(lv[2])), int(slots.min()), cells)
               for lv in m.info.levels or () if len(lv) > 2 and int(lv[2]) > 0)


def _nothing_released(result: Any) -> str:
    """public-occupancy: the warning when no grid (node) is released, with what would change that
    (the planner's own levers); empty otherwise."""
    t = result.table
    n = int(t["released"].astype(bool).sum()) if "released" in t.columns else len(t)
    if n:
        return ""
    status = str(getattr(result.summary, "plan_status", ""))
    if status in ("time_limit", "interrupted", "iteration_limit"):
        return (f"this release publishes nothing: the planner stopped at its limit ({status}) before it found a "
                "plan that serves any grid within the target; give it more --time-limit (or none)")
    return ("this release publishes nothing: no grid (or node) can be served within the target at this budget; "
            "raise --epsilon-total or --target, or coarsen --h3-resolution / --slot (with --plan hierarchy, "
            "--profile day offers hour-of-day nodes)")


def _console(paths: dict[str, Path], unit: str | None, out: str) -> str:
    """The end-of-run summary for people, read back from the published summary.json and release.csv."""
    import json

    from ..writers._published import read_release_table
    from ..writers.console import console_summary

    summary = json.loads(Path(paths["summary"]).read_text(encoding="utf-8"))
    table = read_release_table(paths["release"])
    return console_summary(summary, paths, unit=unit, table=table, out=out)


def _published_names(paths: dict[str, Path]) -> list[str]:
    """The files of the published folder (names), for --json."""
    from ..writers.folder import is_diagnostic

    return sorted(Path(p).name for p in paths.values() if not is_diagnostic(p))


def _diagnostics_dir(paths: dict[str, Path]) -> str | None:
    """The data holder's diagnostics folder (not for publication), for --json."""
    from ..writers.folder import is_diagnostic

    return next((str(Path(p).parent) for p in paths.values() if is_diagnostic(p)), None)


def _printed_summary(paths: dict[str, Path], out: str) -> dict[str, Any]:
    """What ``dpopt release --json`` prints: the published summary.json, read back as written, with
    where the folder is (``out``), its files and the diagnostics folder (not for publication)."""
    import json

    summary = json.loads(Path(paths["summary"]).read_text(encoding="utf-8"))
    return {"out": str(Path(out).resolve()), "files": _published_names(paths),
            "diagnostics": _diagnostics_dir(paths), **summary}
