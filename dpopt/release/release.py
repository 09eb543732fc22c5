"""The Python front door: one entry, options grouped by concern.

::

    from dpopt.release import release, Budget, UserOptions
    r = release("records.csv", bound=120, budget=Budget(epsilon_total=10, delta=1e-6),
                model=UserOptions(strategy="adaptive", bounds=(4, 8)))
    write_release(r, "out/")
    r = release("temperatures.csv", lower=-20, upper=40, budget=Budget(epsilon_total=10))  # values in [L, U]

The layers it composes, top to bottom: records are read once through
:func:`dpopt.privacy.contributions.contributions` (the release's only door to the records) into the
contributions table; the privacy model named by the *type* of ``model`` measures it
(:class:`~dpopt.privacy.user.UserOptions` → :func:`dpopt.privacy.user.measure`,
:class:`~dpopt.privacy.public_occupancy.PublicOccupancyOptions` →
:func:`dpopt.privacy.public_occupancy.measure_release`), so a model cannot receive the other
model's options; estimation (:func:`dpopt.estimation.estimate`) turns the measurements into
estimates; the writers (:mod:`dpopt.writers`) format and write them. :func:`release_user` and
:func:`release_aggregate` run the same three steps on a contributions table. Every option object validates
itself when it is built, and :func:`check_options` checks the combination, before any record is
read.

Values in [L, U] (``lower``/``upper``; ``bound`` U alone is [0, U]) are read as x − L, so every
model, sensitivity and noise draw sees values in [0, U − L]; L is added back to every published
mean at the end (:func:`dpopt.writers.values.with_value_range`), the one place of the shift.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from .._memory import trim_heap
from .._validation import DpoptInputError, check_bound, check_choice, value_range
from ..estimation import ESTIMATORS, estimate
from ..privacy.contributions import InputOptions, contributions, truncated_reader
from ..privacy.options import Budget, GridOptions, NoiseOptions, PerGridBudget, check_confidence
from ..plan import GridPlan
from ..privacy.contributions import TruncatedSums
from ..privacy.budgets import PrivacyBudget
from ..privacy.public_occupancy import PublicOccupancyOptions, default_plan, measure_release, to_privacy_budget
from ..privacy.public_occupancy import _check_noise_options as _check_public_noise
from ..privacy.user.options import UserOptions, _partition_list
from ..privacy.user.strategies.fixed import measure
from ..privacy.user.strategies.adaptive import measure_multires
from ..privacy.user.strategies.place import measure_place
from ..privacy.user.engine import measure_engine
from ..records.aggregate import Aggregate
from ..records.grid import instant_strings, local_time_strings, localize_wall, slot_strings, wall_clock
from ..records.ingest import IngestReport, as_frame, parse_times
from ..records.sample_key import SampleKey
from ..privacy.user.bounding import check_lattice_capacity, check_lattice_resolution
from ..noise.mechanism import NoiseMechanism
from ..estimation.outlook import flat_outlook, levels_outlook
from ..writers.public_occupancy_result import public_occupancy_release
from ..writers.result import Release
from ..writers.user import multires_release, user_release
from ..writers.values import with_info, with_value_range

__all__ = ["EstimationOptions", "ModelOptions", "release", "release_user", "release_aggregate", "check_options"]

#: the privacy model's options; their type chooses the model
ModelOptions = Union[UserOptions, PublicOccupancyOptions]


@dataclass(frozen=True)
class EstimationOptions:
    """``method`` of :func:`dpopt.estimation.estimate` for the published ``mean``/``variance``
    ("direct", "pooled", "hierarchical": :data:`dpopt.estimation.ESTIMATORS`; None: the shape's
    own, "hierarchical" for the multi-resolution ``user`` release, else "direct") and
    ``confidence`` of the stated error bounds."""

    method: str | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.method is not None:
            check_choice(self.method, "method", tuple(ESTIMATORS))
        check_confidence(self.confidence)

    def method_for(self, adaptive: bool) -> str:
        """The method run: the given one, or the shape's default."""
        return self.method or ("hierarchical" if adaptive else "direct")


def check_options(bound: float | None, budget: Budget | PerGridBudget, model: ModelOptions, noise: NoiseOptions,
                  estimation: EstimationOptions, io: InputOptions, grid: GridOptions | None = None, *,
                  lower: float | None = None, upper: float | None = None) -> float:
    """The combination of options, checked before any record is read; returns the bound the
    privacy models see: U − L for values in [L, U] (:func:`dpopt._validation.value_range` of
    ``bound``, ``lower``, ``upper``), U itself without a lower end."""
    for name, value, kind in (("noise", noise, NoiseOptions), ("estimation", estimation, EstimationOptions),
                              ("io", io, InputOptions)):
        if not isinstance(value, kind):
            raise DpoptInputError(f"`{name}` must be {kind.__name__}(...) (or omitted); got {type(value).__name__}")
    L, top = value_range(bound, lower, upper)
    U = top - L if L else top
    if grid is not None and isinstance(model, UserOptions) and model.partitions is not None \
            and model.place_for(budget) and int(grid.h3_resolution) == 0:
        raise DpoptInputError("`h3_resolution` = 0 leaves no coarser H3 level for the map above the listed cells "
                              "that the place release measures; use `h3_resolution` >= 1, or strategy='fixed' "
                              "or 'adaptive'")
    top = getattr(model, "coarsest_resolution", None)  # the engine's map / the place release's top level
    if grid is not None and top is not None and (model.engine or model.place) and top >= int(grid.h3_resolution):
        raise DpoptInputError(f"`coarsest_resolution` must be below `h3_resolution` = {grid.h3_resolution} (the map "
                              f"level above the listed cells); got {top!r}")
    if grid is not None and io.timezone is not None and (24 * 3600 * 10**9) % int(grid.slot_ns):
        raise DpoptInputError(f"`slot` must divide a day (24 h) when `timezone` names a wall clock: its slots run "
                              f"from each local midnight; got {grid.slot!r}")
    engine = isinstance(model, UserOptions) and model.engine
    if engine != (estimation.method in (None, "crossed")) and (engine or estimation.method == "crossed"):
        raise DpoptInputError(f"`estimation.method` = {estimation.method!r} " + (
            "does not fit the optimised engine: use 'crossed' (its default) or name a fixed strategy" if engine
            else "needs the engine's measurements (a partition list and strategy='optimised')"))
    adaptive = isinstance(model, UserOptions) and model.adaptive and not engine
    method = "hierarchical" if engine else estimation.method_for(adaptive)
    if not engine and (method == "hierarchical") != adaptive:
        raise DpoptInputError(f"`estimation.method` = {method!r} " + (
            "does not fit the multi-resolution release: use 'hierarchical' (its default)" if adaptive else
            "needs the measurements of the levels of the public hierarchy: the multi-resolution user release "
            "(UserOptions(resolution='adaptive'), with or without a partition list)"))
    if isinstance(model, UserOptions):
        model.check_budget(budget)
        # the lattice's int64 capacity from public numbers only, before any record is read:
        # fixed bounds, or the caps the automatic rules choose within
        k, c = model.fixed_bounds or (model.max_grids, model.max_records)
        check_lattice_capacity(k, c, U, noise.bits_for(U))
        check_lattice_resolution(U, noise.bits_for(U))
        if io.out_of_range != "clip":
            raise DpoptInputError(f"`out_of_range` = {io.out_of_range!r} makes which records count depend on "
                                  "their values; the user model clips values to their range: use 'clip'")
        if io.max_dropped is not None:
            raise DpoptInputError(f"`max_dropped` = {io.max_dropped!r} would refuse a release by how many records "
                                  "were dropped, a private count under the user model; drop it (dropped records are "
                                  "counted in the diagnostics folder, never published)")
        return U
    if not isinstance(model, PublicOccupancyOptions):
        raise DpoptInputError(f"`model` must be UserOptions or PublicOccupancyOptions; got {type(model).__name__}")
    if method != "direct":
        raise DpoptInputError(f"`estimation.method` = {method!r}: public-occupancy publishes its "
                              "CLIP estimates directly; use 'direct'")
    pb = to_privacy_budget(budget)
    model.for_plan(default_plan(model.plan, pb))
    _check_public_noise(U, pb, noise.noise, noise.bits_for(U))
    return U


def release(records: Any, *, bound: float | None = None, budget: Budget | PerGridBudget,
            model: ModelOptions = UserOptions(), grid: GridOptions = GridOptions(),
            estimation: EstimationOptions = EstimationOptions(), noise: NoiseOptions = NoiseOptions(),
            io: InputOptions = InputOptions(), lower: float | None = None,
            upper: float | None = None) -> Release:
    """User-level DP release of the mean and variance of every (H3 cell, time slot) grid.

    Parameters
    ----------
    records : a DataFrame, a CSV or Parquet path (or a directory of them).
    bound : U: the values lie in [0, U] (values outside are clipped by default, ``io.out_of_range``).
    lower, upper : L and U: the values lie in [L, U] (L < U, either sign). ``upper`` alone is
        ``bound``; give ``bound`` or ``upper``, not both; ``lower`` needs one of them.
    budget : what one user may lose (:class:`Budget`; the seeds' :class:`PerGridBudget` under
        public-occupancy only).
    model : :class:`UserOptions` (the default: add/remove one user, nothing about who is where is
        public) or :class:`PublicOccupancyOptions` (seed 002: the occupancy is public).
    grid, estimation, noise, io : the finest grid; how values and intervals are estimated; the
        sampler and seed; how records are read.

    Returns
    -------
    Release
        Either model's result (:class:`dpopt.release.Release`; ``summary.privacy_model`` names it):
        Means in [L, U] (every mean-like column; variances and error bounds do not depend on L),
        the range in ``summary.lower`` and ``summary.bound``. Write it with
        :func:`dpopt.release.write_release`.

    Raises
    ------
    ValueError
        (:class:`dpopt.DpoptInputError`) bad options, before any record is read: ``bound`` with
        ``upper``, ``lower`` alone, L >= U, a non-finite number.
    """
    U = check_options(bound, budget, model, noise, estimation, io, grid, lower=lower, upper=upper)
    L, top = value_range(bound, lower, upper)  # U is top − L: the bound the models see
    records = as_frame(records, io.columns)  # polars / GeoPandas frames as pandas, read once
    t0 = time.perf_counter()
    key = SampleKey.from_seed(noise.seed)  # which records a user keeps: a keyed uniform sample
    if isinstance(model, UserOptions):  # no refusal by a dropped share: whether a release happens is public
        model, aliases = _local_list(model, io.timezone, grid.slot_ns)
        agg, ingest = contributions(records, bound=U, grid=grid, io=replace(io, max_dropped=1.0, naive_times="drop"),
                                    first_records=model.first_records, sample_key=key, lower=L)
        return _with_aliases(release_user(agg, budget, model, lower=L, upper=top, noise=noise, estimation=estimation,
                                          timings={"aggregate": time.perf_counter() - t0}, ingest=ingest), aliases)
    second_pass = model.pseudo_users or default_plan(model.plan, to_privacy_budget(budget)) in ("budget", "hierarchy")
    keep = second_pass and io.backend == "local" and _is_frame(records)
    agg, ingest = contributions(records, bound=U, grid=grid, io=io, keep_samples=keep, sample_key=key, lower=L)
    return release_aggregate(agg, budget, model, lower=L, upper=top, noise=noise, confidence=estimation.confidence,
                             ingest=ingest, truncated_sums=truncated_reader(records, bound=U, io=io, sample_key=key,
                                                                            lower=L) if second_pass
                             else None, timings={"aggregate": time.perf_counter() - t0}, progress=io.progress)


def release_aggregate(agg: Aggregate, budget: Budget | PerGridBudget | PrivacyBudget,
                      options: PublicOccupancyOptions = PublicOccupancyOptions(), *, bound: float | None = None,
                      noise: NoiseOptions = NoiseOptions(), confidence: float = 0.95,
                      ingest: IngestReport | None = None, truncated_sums: TruncatedSums | None = None,
                      timings: dict[str, float] | None = None, progress: bool = False,
                      lower: float | None = None, upper: float | None = None) -> Release:
    """The ``public-occupancy`` model on a contributions table: measure
    (:func:`dpopt.privacy.public_occupancy.measure_release`), estimate (direct, at ``confidence``,
    from the Measurements only), check ``options.error_bound`` on seed 002's worst-case errors,
    format (:func:`dpopt.writers.public_occupancy_result.public_occupancy_release`), add the
    table's lower end L back to the means (:func:`dpopt.writers.values.with_value_range`).

    ``bound`` (or ``lower``/``upper``, as in :func:`release`) defaults to the range the aggregate
    was read with and must equal it when given; ``options.plan`` is a planner name or a ready
    :class:`GridPlan` for this aggregate.
    """
    L, U, bound = _table_range(agg, bound, lower, upper)
    run = measure_release(agg, budget, options, bound=bound, noise=noise, confidence=confidence,
                          truncated_sums=truncated_sums, timings=timings, progress=progress)
    t0 = time.perf_counter()
    est = estimate(run.measurements, method="direct", confidence=confidence)
    _check_error_bound(est.table["error_bound"].to_numpy(), options.error_bound, run.measurements.info.plan)
    times = {**run.timings, "estimate": time.perf_counter() - t0}
    ingest = ingest or IngestReport()
    diagnostics = {"timings": {key: round(v, 4) for key, v in times.items()}, "ingest": ingest.for_diagnostics()}
    result = public_occupancy_release(run.measurements, est, contributions=run.contributions, grids=run.grids,
                                      ingest=ingest, diagnostics=diagnostics)
    return local_times(with_value_range(result, L, U), agg.timezone)


def _table_range(table: Aggregate, bound: float | None, lower: float | None,
                 upper: float | None) -> tuple[float, float | None, float | None]:
    """(L, U, the bound the models see) of a release on a contributions table: the table's own
    range (``table.lower``; U None: the models use ``table.bound``) unless ``bound``/``lower``/``upper``
    are given (:func:`dpopt._validation.value_range`); L must be the one the table was read with."""
    if bound is None and lower is None and upper is None:
        return float(table.lower), None, None
    L, U = value_range(bound, lower, upper)
    if L != table.lower:
        raise DpoptInputError(f"`lower` must be the L the contributions table was read with ({table.lower:g}); "
                              f"got {L:g} (read the records again with that lower end)")
    return L, U, (U - L if L else U)


def _check_error_bound(errors: Any, error_bound: float | None, plan: GridPlan) -> None:
    """``error_bound`` E (a model option the planners plan for) holds in every grid: seed 002's
    worst-case error E_g (∞ where withheld) of the estimates, a function of the plan alone."""
    import numpy as np

    worst = float(np.max(errors)) if errors.size else 0.0
    if error_bound is not None and worst > float(error_bound) * (1 + 1e-9):
        raise DpoptInputError(
            f"`error_bound` = {float(error_bound):g} cannot be met: plan {plan.method!r} "
            f"(status {plan.status}) leaves a grid with worst-case error {worst:.6g}; raise the error "
            "bound or omit it (default: BASELINE's largest grid error)"
        )


def _is_frame(records: Any) -> bool:
    import pandas as pd

    return isinstance(records, pd.DataFrame)


def release_user(contributions_table: Aggregate, budget: Budget, options: UserOptions = UserOptions(), *,
                 bound: float | None = None, noise: NoiseOptions = NoiseOptions(),
                 estimation: EstimationOptions = EstimationOptions(), sampler: NoiseMechanism | None = None,
                 timings: dict[str, float] | None = None, ingest: IngestReport | None = None,
                 lower: float | None = None, upper: float | None = None) -> Release:
    """The ``user`` model on a contributions table (samples kept): measure, estimate (the chosen
    method for ``mean``/``variance``, the pooled values beside them), format, add the table's lower
    end L back to the means (:func:`dpopt.writers.values.with_value_range`). ``bound`` (or
    ``lower``/``upper``, as in :func:`release`; L must be the table's) defaults to the table's
    range. ``ingest`` (what reading dropped, by cause: private counts) goes to the diagnostics only."""
    L, U, bound = _table_range(contributions_table, bound, lower, upper)
    given = options.typical
    options = _shifted_typical(options, L, U if U is not None else L + float(contributions_table.bound or 0.0))
    t0 = time.perf_counter()
    held = {**({} if ingest is None else {"ingest": ingest.for_diagnostics()}),
            **_off_list(contributions_table, options)}
    zone = contributions_table.timezone
    trim_heap()  # the aggregation's freed pages (memory only, dpopt/_memory.py)
    if options.adaptive:
        r = _release_multires(contributions_table, budget, options, bound=bound, noise=noise,
                              estimation=estimation, sampler=sampler, timings=timings)
        r = _typical_text(with_value_range(replace(r, diagnostics={**r.diagnostics, **held}), L, U), options, given)
        return local_times(r, zone)
    m = measure(contributions_table, budget, options, bound=bound, noise=noise, sampler=sampler)
    trim_heap()  # the measurement's freed pages, before the estimate (memory only)
    t1 = time.perf_counter()
    method = estimation.method_for(False)
    est = estimate(m, method=method, confidence=estimation.confidence)
    pooled = est if method == "pooled" else estimate(m, method="pooled", confidence=estimation.confidence)
    times = {**(timings or {}), "measure": t1 - t0, "estimate": time.perf_counter() - t1}
    r = user_release(m, est, pooled, outlook=flat_outlook(m, est),
                     diagnostics={"timings": {k: round(v, 4) for k, v in times.items()}, **held})
    return local_times(_typical_text(with_value_range(r, L, U), options, given), zone)


def _off_list(agg: Aggregate, options: UserOptions) -> dict[str, dict[str, int]]:
    """The diagnostics' count of the records and grids the public partition list leaves out (records
    read and cleaned whose grid is not listed: the release neither measures nor mentions them — a
    position's jitter into an unlisted cell, a slot outside the list's days). Private counts, for the
    data holder only; empty without a public list."""
    if options.private:
        return {}
    _, _, listed = _partition_list(agg, options)
    off = ~np.asarray(listed, dtype=bool)
    count = np.asarray(agg.count)
    return {"partition_list": {"records_on_list": int(count[~off].sum()), "records_off_list": int(count[off].sum()),
                               "grids_off_list": int(np.unique(np.asarray(agg.pair_grid)[off]).size)}}


def _shifted_typical(options: UserOptions, L: float, U: float) -> UserOptions:
    """``options.typical`` (a public guess of a grid's (mean, sd), in the values' units) in the
    units the model sees, values shifted by −L: (mean − L, sd); checked against [L, U] first."""
    if not L or options.typical is None:
        return options
    try:
        mu, sd = (float(v) for v in options.typical)
    except (TypeError, ValueError):
        raise DpoptInputError(f"`typical` must be a (mean, sd) pair of numbers; got {options.typical!r}") from None
    if not (L <= mu <= U) or not (0.0 <= sd <= (U - L) / 2.0):
        raise DpoptInputError(f"`typical` must have mean in [L, U] = [{L:g}, {U:g}] and sd in [0, (U - L)/2]; "
                              f"got {options.typical!r}")
    return replace(options, typical=(mu - L, sd))


def _typical_text(r: Release, options: UserOptions, given: Any) -> Release:
    """summary.json's split rule naming the guessed mean in the values' units (not shifted by −L)."""
    if given is None or options.typical == given:
        return r
    shown, meant = f"public guess mean={options.typical[0]:g}", f"public guess mean={float(given[0]):g}"
    return replace(r, summary=replace(r.summary, split_rule=r.summary.split_rule.replace(shown, meant)))


#: the time columns of release.csv and answers.csv (ISO 8601 start and end times)
TIME_COLUMNS = ("slot", "slot_end", "repeat_until", "node_slot", "node_slot_end", "node_repeat_until")


def local_times(result: Any, timezone: str | None) -> Any:
    """With ``timezone`` (slots cut on its wall clock, :func:`dpopt.records.grid.time_slots`): every
    time column of release.csv and answers.csv written with the zone's UTC offset, and the zone
    recorded in the measurements' facts (summary.json's ``timezone``). Without one: unchanged."""
    if timezone is None:
        return result

    def fix(table: Any) -> Any:
        if table is None:
            return None
        table = table.copy()
        for col in TIME_COLUMNS:
            if col in table.columns:
                table[col] = local_time_strings(table[col].to_numpy(dtype=object), timezone)
        return table

    result = with_info(result, timezone=timezone)
    return replace(result, table=fix(result.table), answers=fix(result.answers))


def _local_list(model: UserOptions, timezone: str | None, slot_ns: int) -> tuple[UserOptions, pd.DataFrame | None]:
    """The public partition list's slot times on the wall clock of ``timezone`` (:func:`_wall_slots`),
    as the records' slots are, so the two match; and the listed grids whose own instant is not the one
    their wall-clock slot is written with — the second of the two hours that share one slot on the
    night clocks go back (:func:`dpopt.records.grid.time_slots`) — as (cell, slot written with its own
    offset, slot as the release writes it), for :func:`_with_aliases`; None where there is none."""
    if timezone is None or model.partitions is None or not isinstance(model.partitions, (str, Path, pd.DataFrame)):
        return model, None
    frame = model.partitions
    if not isinstance(frame, pd.DataFrame):
        if not Path(frame).is_file():
            return model, None  # the user model refuses it with its own message
        try:
            frame = pd.read_csv(frame, dtype=str)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            return model, None  # the user model refuses it with its own message
    if "slot" not in frame.columns or "cell" not in frame.columns:
        return model, None
    text = frame["slot"].astype(str)
    wall, own_text = _wall_slots(text, timezone, slot_ns)
    ok = wall != np.iinfo(np.int64).min
    slots = text.to_numpy(dtype=object).copy()
    slots[ok] = slot_strings(wall[ok])
    written = slot_strings(wall, timezone)  # the wall slot as the release writes it (the first offset)
    second = ok & (own_text != "") & (own_text != written)
    aliases = None
    if second.any():
        cells = frame["cell"].astype(str).str.strip().to_numpy(dtype=object)
        listed = pd.MultiIndex.from_arrays([cells[ok], np.where(own_text[ok] != "", own_text[ok], written[ok])])
        aliases = pd.DataFrame({"cell": cells[second], "slot": own_text[second], "written": written[second]})
        aliases["written_listed"] = pd.MultiIndex.from_arrays([aliases["cell"], aliases["written"]]).isin(listed)
        aliases = aliases.drop_duplicates()
    return replace(model, partitions=frame.assign(slot=slots)), aliases


def _wall_slots(text: pd.Series, timezone: str, slot_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(each listed slot's start on ``timezone``'s wall clock, int64 ns, INT64 min where it does not
    parse; the listed instant written with its own offset, "" where the slot was written without one).
    A slot with an offset is an instant: its wall time, or the start of the wall slot the release
    writes with that instant (a slot whose wall start the clock change skips is written with the
    first instant after the gap: São Paulo's 2018-11-04 as 01:00-02:00). A slot without one is a
    wall time as written (the hour the night clocks go back is one wall slot either way); one whose
    whole slot the clocks skip holds no record and would be written as the next one: refused."""
    text = text.str.strip()
    has_offset = text.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", case=False, regex=True).to_numpy(dtype=bool)
    wall = np.full(len(text), np.iinfo(np.int64).min, dtype=np.int64)
    own = np.full(len(text), "", dtype=object)
    if has_offset.any():
        ns = parse_times(text[has_offset], timezone=timezone, column="slot")
        good = ns != np.iinfo(np.int64).min
        at = wall_clock(ns[good], timezone)
        start = np.floor_divide(at, np.int64(slot_ns)) * np.int64(slot_ns)
        own_text = instant_strings(ns[good], timezone)
        shifted = (at != start) & (slot_strings(start, timezone) == own_text)
        wall[np.flatnonzero(has_offset)[good]] = np.where(shifted, start, at)
        own[np.flatnonzero(has_offset)[good]] = own_text
    if (~has_offset).any():
        naive = parse_times(text[~has_offset], timezone="UTC", column="slot")  # the wall time as written
        good = naive != np.iinfo(np.int64).min
        skipped = wall_clock(localize_wall(naive[good], timezone).as_unit("ns").asi8, timezone) >= naive[good] + slot_ns
        if skipped.any():
            raise DpoptInputError(f"`partitions` slot {text[~has_offset][good].iloc[int(np.argmax(skipped))]!r} is a "
                                  f"wall time whose whole slot the clock change skips in {timezone}: no record can "
                                  "fall in it; leave it out")
        wall[np.flatnonzero(~has_offset)[good]] = naive[good]
    off = (wall != np.iinfo(np.int64).min) & (wall % np.int64(slot_ns) != 0)
    if off.any():
        i = int(np.argmax(off))
        raise DpoptInputError(f"`partitions` slots must start on the slot lattice of the {timezone} wall clock (slots "
                              f"of {slot_ns // 10**9} s from midnight); got {text.iloc[i]!r}")
    return wall, own


def _with_aliases(result: Release, aliases: pd.DataFrame | None) -> Release:
    """answers.csv with one row per listed grid of the repeated hour (:func:`_local_list`): the grid as
    listed (its own offset), answered by the row of the wall-clock slot that holds both hours, so that
    every listed (cell, slot) has its row and no unlisted one has (the contract of answers.csv)."""
    if aliases is None or result.answers is None or len(result.answers) == 0:
        return result
    ans = result.answers
    keyed = ans.merge(aliases.rename(columns={"slot": "alias"}), left_on=["cell", "slot"], right_on=["cell", "written"])
    if len(keyed) == 0:
        return result
    extra = keyed.rename(columns={"slot": "_written", "alias": "slot"})[list(ans.columns)]
    unlisted = keyed.loc[~keyed["written_listed"].to_numpy(dtype=bool), ["cell", "written"]]
    drop = pd.MultiIndex.from_arrays([ans["cell"], ans["slot"]]).isin(
        pd.MultiIndex.from_arrays([unlisted["cell"], unlisted["written"]]))
    merged = pd.concat([ans[~drop], extra], ignore_index=True).drop_duplicates(["cell", "slot"])
    return replace(result, answers=merged)


def _release_multires(agg: Aggregate, budget: Budget, options: UserOptions, *, bound: float | None,
                      noise: NoiseOptions, estimation: EstimationOptions, sampler: NoiseMechanism | None,
                      timings: dict[str, float] | None) -> Release:
    """The multi-resolution ``user`` release: every level measured
    (:func:`dpopt.privacy.user.strategies.adaptive.measure_multires`), hierarchical estimation, formatting."""
    if sampler is not None:
        raise DpoptInputError("`sampler` is an option of the flat release (resolution='fixed'); the "
                              "multi-resolution release draws from `noise`")
    t0 = time.perf_counter()
    U = check_bound(agg.bound if bound is None else bound)
    if options.engine:
        m = measure_engine(agg, budget, options, U=U, noise=noise)
    elif options.place_for(budget):
        m = measure_place(agg, budget, options, U=U, noise=noise)
    else:
        m = measure_multires(agg, budget, options, bound=bound, noise=noise)
    trim_heap()  # the measurement's freed pages, before the estimate (memory only)
    t1 = time.perf_counter()
    crossed = options.engine and m.info.engine is not None  # None: no place selected, nothing measured
    est = estimate(m, method="crossed" if crossed else estimation.method_for(True),
                   confidence=estimation.confidence)
    times = {**(timings or {}), "measure": t1 - t0, "estimate": time.perf_counter() - t1}
    return multires_release(m, est, diagnostics={"timings": {k: round(v, 4) for k, v in times.items()}},
                            outlook=levels_outlook(m, est))
