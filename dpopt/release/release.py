"""records → H3 × time grids → plan → user-level DP release of every grid's mean and variance.

The pipeline of seed 002 (§II-B, §III-B, §V), one function per step, read top to bottom:

1. :func:`aggregate_records` — ingestion, gridding and aggregation (:mod:`.ingest`, :mod:`.grid`,
   :mod:`.aggregate`): the occupancy array A (public, as the paper assumes) and per-pair
   sufficient statistics, clipped to [0, U] (the aggregate remembers U and the policy);
2. :func:`plan_release` — a :class:`~dpopt.plan.GridPlan` from the public counts only
   (:mod:`.planners`: BASELINE, CLIP-USER, the MILP; optionally pseudo-user clipping);
3. :func:`release_aggregate` — the plan's retained statistics per grid, then the CLIP mechanism
   (8) in every grid (:func:`dpopt.mechanisms.release_grids`) with noise from :mod:`dpopt.noise`
   (exact discrete Laplace on 2^-k with the OS CSPRNG for real releases);
4. accounting by seed 002 Theorem II.3 / Proposition V.1, recounted from the plan's retained
   counts (:attr:`GridPlan.degradation`, :attr:`GridPlan.total_cost`), and the summary.

Privacy model ``public-occupancy``: the occupancy array (which user has how many records in which
grid) is public (seed 002 §II-C), so ``n_users`` and ``n_records`` per grid and the suppressed
pairs are released without noise. If the occupancy is itself sensitive, this pipeline is not the
right tool (see models/release.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import (
    DpoptInputError,
    check_bound,
    check_choice,
    check_epsilon,
    check_nonnegative_float,
    check_positive_int,
)
from ..calculus import mean_bias_from_totals, variance_bias_from_totals
from ..mechanisms.grid import GridRelease, release_grids
from ..noise import DEFAULT_GRANULARITY_BITS, Noise, make_noise
from ..plan import GridPlan
from .aggregate import Aggregate, Aggregator, RetainedStats, truncated_sums_stream
from .grid import check_resolution, parse_slot
from .ingest import ColumnMap, IngestReport, count_rows, read_records
from .privacy_model import PRIVACY_MODEL, PRIVACY_MODEL_SUMMARY, VALUE_DEPENDENT_INGEST
from .planners import PLANNERS, SPLITS, baseline_error_bound, pseudo_user_plan

__all__ = [
    "PLANS",
    "PRIVACY_MODEL",
    "ReleaseSummary",
    "ReleaseResult",
    "aggregate_records",
    "plan_release",
    "release",
    "release_aggregate",
]

PLANS = tuple(PLANNERS)
NOISES = ("discrete", "numpy")
BACKENDS = ("local", "dask")

TruncatedSums = Callable[[Aggregate, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ReleaseSummary:
    """Headline numbers of a release (written to summary.json): all public or computed from DP
    outputs and public counts (no timings, no value-dependent counts).

    ``privacy_model`` "public-occupancy" with ``privacy_model_description`` in plain words;
    ``degradation`` K = max_ℓ (grids ℓ keeps) after the plan; ``epsilon_total`` = K·ε (seed 002
    Thm II.3); ``degradation_baseline`` G₁ and ``epsilon_total_baseline`` = G₁·ε without a plan;
    ``epsilon_basic_composition`` = G·ε (Thm II.2, for comparison); ``error_bound`` the largest
    per-grid worst-case error E = max_g E_g of the released mechanism (continuous-Laplace formula
    of eq. (11)-(13) with the plan's budgets); ``error_bound_target`` the E the plan had to meet;
    ``error_bound_released`` the same with the sampler's actual noise (rounded-up sensitivity,
    grid rounding). ``ingest`` the value-independent ingestion counts.
    """

    privacy_model: str
    privacy_model_description: str
    users: int
    grids: int
    records: int
    pairs: int
    plan: str
    plan_status: str
    plan_gap: float
    pseudo_users: bool
    degradation: int
    degradation_baseline: int
    epsilon: float
    epsilon_total: float
    epsilon_total_baseline: float
    epsilon_basic_composition: float
    error_bound: float
    error_bound_target: float
    error_bound_released: float
    suppressed_pairs: int
    suppressed_records: int
    truncated_records: int
    withheld_grids: int
    dropped_records: int
    bound: float
    h3_resolution: int
    slot: str
    split: str
    noise: str
    granularity: float
    seeded: bool
    ingest: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (summary.json)."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class ReleaseResult:
    """A DP release: per-grid ``table``, ``summary``, and what produced them.

    ``table`` columns: grid, cell, slot, cell_lat, cell_lng, n_users, n_records, max_user_records,
    n_users_retained, n_records_retained, mean, variance, released, mean_sensitivity,
    variance_sensitivity, epsilon_mean, epsilon_variance, mean_noise_scale, variance_noise_scale,
    error_bound, array_length. Grids whose retained set is empty are not released (NaN).
    ``plan`` the :class:`GridPlan` released; ``grids`` the mechanism's :class:`GridRelease`;
    ``diagnostics`` what is for the data holder only, never published: ``timings`` (s) and the
    full ``ingest`` counts (including value-dependent ones).
    """

    table: pd.DataFrame
    summary: ReleaseSummary
    ingest: IngestReport
    aggregate: Aggregate
    plan: GridPlan
    grids: GridRelease
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def gamma(self) -> np.ndarray:
        """Retained count Γ of every pair of the aggregate."""
        return pair_retained(self.aggregate, self.plan)

    def suppressed(self) -> np.ndarray:
        """Indices of the pairs the plan suppressed (Γ = 0), in pair order."""
        return np.flatnonzero(self.gamma() == 0)

    def suppressed_frame(self) -> pd.DataFrame:
        """The suppressed (user, grid) pairs: user, grid, cell, slot, records."""
        agg = self.aggregate
        p = self.suppressed()
        g = agg.pair_grid[p]
        return pd.DataFrame({
            "user": agg.users[agg.pair_user[p]],
            "grid": g,
            "cell": self.table["cell"].to_numpy()[g] if len(p) else np.empty(0, object),
            "slot": self.table["slot"].to_numpy()[g] if len(p) else np.empty(0, object),
            "records": agg.count[p],
        })

    def user_grids(self) -> np.ndarray:
        """Grids each user keeps after the plan (Γ_{g,ℓ} > 0), per user."""
        return self.plan.user_grids()


# ----------------------------------------------------------------------------------------------
# 1. aggregation


def aggregate_records(
    records: Any,
    *,
    bound: float,
    h3_resolution: int = 7,
    slot: Any = "1h",
    columns: ColumnMap | Mapping[str, str] | None = None,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
    chunksize: int | None = None,
    keep_samples: bool = False,
    backend: str = "local",
    client: Any = None,
    progress: bool = False,
) -> tuple[Aggregate, IngestReport]:
    """Read, clean, grid and aggregate records (local streaming or Dask); see :mod:`.aggregate`.

    The aggregate carries ``bound`` and ``out_of_range``: a release of it uses that U.
    """
    bound = check_bound(bound)
    res = check_resolution(h3_resolution)
    slot_ns = parse_slot(slot)
    backend = check_choice(backend, "backend", BACKENDS)
    if backend == "dask":
        from .dask_backend import aggregate_dask

        return aggregate_dask(
            records, bound=bound, h3_resolution=res, slot=slot, columns=columns,
            out_of_range=out_of_range, timestamp_unit=timestamp_unit, client=client,
            keep_samples=keep_samples,
        )
    agg = Aggregator(h3_resolution=res, slot_ns=slot_ns, keep_samples=keep_samples, bound=bound,
                     out_of_range=out_of_range)
    report = IngestReport(out_of_range_policy=out_of_range)
    bar = _progress(progress, count_rows(records) if not isinstance(records, Aggregate) else None)
    try:
        for chunk, rep in read_records(
            records, bound=bound, columns=columns, out_of_range=out_of_range,
            timestamp_unit=timestamp_unit, chunksize=chunksize,
        ):
            agg.add(chunk)
            report = report + rep
            if bar is not None:
                bar.update(rep.records_read)
    finally:
        if bar is not None:
            bar.close()
    return agg.result(), report


def _progress(enabled: bool, total: int | None, *, desc: str = "aggregate", unit: str = " records") -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, leave=False)


# ----------------------------------------------------------------------------------------------
# 2. planning


def plan_release(
    agg: Aggregate,
    *,
    bound: float,
    epsilon: float,
    plan: str = "baseline",
    pseudo_users: bool = False,
    error_bound: float | None = None,
    split: str = "equal",
    time_limit: float | None = None,
) -> GridPlan:
    """A :class:`GridPlan` from the public occupancy array of ``agg`` only (:mod:`.planners`)."""
    plan = check_choice(plan, "plan", PLANS)
    occ = agg.occupancy()
    options: dict[str, Any] = {"split": split, "error_bound": error_bound}
    if plan == "milp":
        options["time_limit"] = time_limit
    result = PLANNERS[plan](occ, bound, epsilon, **options)
    if pseudo_users:
        result = pseudo_user_plan(result, occ, bound, epsilon, split=split)
    return result


def pair_retained(agg: Aggregate, plan: GridPlan) -> np.ndarray:
    """Γ of every pair of ``agg`` from the plan (rows/columns = the aggregate's user/grid indices)."""
    if plan.retained.shape != (agg.n_users, agg.n_grids):
        raise DpoptInputError(
            f"`plan` is for {plan.retained.shape} users x grids; the aggregate has "
            f"{(agg.n_users, agg.n_grids)}"
        )
    return np.asarray(plan.retained[agg.pair_user, agg.pair_grid]).ravel().astype(np.int64)


# ----------------------------------------------------------------------------------------------
# 3. release


def _aggregate_bound(agg: Aggregate, bound: float | None) -> float:
    """The U the aggregate's values were clipped with; a different ``bound`` is refused (12.1)."""
    if bound is None:
        if agg.bound is None:
            raise DpoptInputError("`bound` is required: this aggregate does not record the U its values "
                                  "were clipped with")
        return float(agg.bound)
    U = check_bound(bound)
    if agg.bound is not None and U != agg.bound:
        raise DpoptInputError(
            f"`bound` must be the U the aggregate's values were clipped with ({agg.bound:g}, policy "
            f"{agg.out_of_range}); got {U:g} (aggregate again with the new bound)"
        )
    return U


def _check_noise_options(bound: float, epsilon: float, noise: str, granularity_bits: int) -> int:
    """Noise options, before any data is read; returns k of λ = 2^-k."""
    noise = check_choice(noise, "noise", NOISES)
    if noise == "discrete" and epsilon < 2.0**-29:
        raise DpoptInputError(
            f"`epsilon` must be >= 2^-29 (about {2.0**-29:.3g}) for the discrete sampler, which gives "
            f"each grid's mean and variance a budget of at least 2^-30; got {epsilon!r}"
        )
    k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    if k > 40:
        raise DpoptInputError(f"`granularity_bits` must be an integer in 0..40; got {granularity_bits!r}")
    if bound * bound * 2.0**k > 2.0**60:
        raise DpoptInputError(
            f"`granularity_bits` = {k} is too fine for bound {bound:g}: U²·2^k must stay below 2^60 "
            f"(use granularity_bits <= {max(0, int(60 - 2 * np.log2(bound)))})"
        )
    return k


def _check_plan_options(plan: Any, split: str, error_bound: float | None, time_limit: float | None,
                        pseudo_users: bool = False) -> None:
    if isinstance(plan, GridPlan):
        if pseudo_users or time_limit is not None:
            raise DpoptInputError("`pseudo_users` and `time_limit` are planner options: with a ready "
                                  "GridPlan apply dpopt.release.pseudo_user_plan to it instead")
    else:
        check_choice(plan, "plan", PLANS)
    check_choice(split, "split", SPLITS)
    if error_bound is not None:
        check_nonnegative_float(error_bound, "error_bound")
    if time_limit is not None:
        check_nonnegative_float(time_limit, "time_limit")


def _check_plan_budgets(plan: GridPlan, epsilon: float) -> None:
    """Every released grid's budget ε_μ + ε_Var ≤ ε (up to float rounding of the split), so that
    the published ε_total = K·ε bounds every user's loss (seed 002 Thm II.3)."""
    over = np.flatnonzero(np.asarray(plan.released, dtype=bool) & (plan.budget > epsilon * (1 + 1e-12)))
    if over.size:
        g = int(over[0])
        raise DpoptInputError(
            f"`plan` gives grid {g} a budget {plan.budget[g]:.6g} above `epsilon` = {epsilon:g}: a per-grid "
            "release needs budget_mean + budget_variance <= epsilon in every released grid"
        )


def retained_statistics(agg: Aggregate, gamma: np.ndarray, truncated_sums: TruncatedSums | None) -> RetainedStats:
    """Per-grid R, Γ*, S1, S2 of the retained samples (a second pass for truncated pairs)."""
    part = np.flatnonzero((gamma > 0) & (gamma < agg.count))
    tsums = None
    if part.size and agg.samples is None:
        if truncated_sums is None:
            raise DpoptInputError(
                "pseudo-user clipping needs the retained samples: aggregate with keep_samples=True"
            )
        tsums = truncated_sums(agg, part, gamma[part])
    return agg.retained_stats(gamma, truncated_sums=tsums)


def grid_error_bounds(agg: Aggregate, st: RetainedStats, rel: GridRelease, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Per grid, the worst-case error E_g = biases + Δ_μ/ε_μ + Δ_Var/ε_Var (seed 002 eq. (11)-(13)
    with the plan's budgets) and the same with the sampler's actual E|noise| (inf: withheld)."""
    N = agg.grid_records()
    bias = mean_bias_from_totals(N, st.retained, bound) + variance_bias_from_totals(N, st.retained, bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        noise = np.nan_to_num(rel.mean_sensitivity / rel.budget_mean) + np.nan_to_num(
            rel.variance_sensitivity / rel.budget_variance)
    ok = rel.released
    return np.where(ok, bias + noise, np.inf), np.where(ok, bias + rel.noise_abs, np.inf)


def _check_error_bound(errors: np.ndarray, error_bound: float | None, plan: GridPlan, agg: Aggregate,
                       bound: float, epsilon: float, split: str) -> None:
    worst = float(np.max(errors))
    if error_bound is not None and worst > float(error_bound) * (1 + 1e-9):
        base = baseline_error_bound(agg.occupancy(), bound, epsilon, split=split)
        raise DpoptInputError(
            f"`error_bound` = {float(error_bound):g} cannot be met: plan {plan.method!r} "
            f"(status {plan.status}) leaves a grid with worst-case error {worst:.6g} "
            f"(BASELINE's largest is {base:.6g}); raise the error bound or omit it (default: "
            "BASELINE's largest grid error)"
        )


def release_aggregate(
    agg: Aggregate,
    ingest: IngestReport | None = None,
    *,
    bound: float | None = None,
    epsilon: float,
    plan: str | GridPlan = "baseline",
    pseudo_users: bool = False,
    error_bound: float | None = None,
    split: str = "equal",
    time_limit: float | None = None,
    seed: int | None = None,
    noise: str = "discrete",
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    truncated_sums: TruncatedSums | None = None,
    timings: dict[str, float] | None = None,
    progress: bool = False,
) -> ReleaseResult:
    """Plan and release from an existing aggregate (see :func:`release`).

    ``bound`` defaults to the U the aggregate was clipped with and must equal it when given;
    ``plan`` is a planner name or a ready :class:`GridPlan` (budgets in ε) for this aggregate.
    """
    U = _aggregate_bound(agg, bound)
    epsilon = check_epsilon(epsilon)
    _check_plan_options(plan, split, error_bound, time_limit, pseudo_users)
    k = _check_noise_options(U, epsilon, noise, granularity_bits)
    timings = dict(timings or {})
    t0 = time.perf_counter()
    if not isinstance(plan, GridPlan):
        bar = _progress(progress and (plan != "baseline" or pseudo_users), 1, desc=f"plan ({plan})", unit=" plan")
        plan = plan_release(agg, bound=U, epsilon=epsilon, plan=plan, pseudo_users=pseudo_users,
                            error_bound=error_bound, split=split, time_limit=time_limit)
        if bar is not None:
            bar.update(1)
            bar.close()
    timings["plan"] = time.perf_counter() - t0
    _check_plan_budgets(plan, epsilon)
    gamma = pair_retained(agg, plan)
    t0 = time.perf_counter()
    st = retained_statistics(agg, gamma, truncated_sums)
    timings["statistics"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sampler = make_noise("laplace", sampler=noise, seed=seed, granularity_bits=k)
    rel = _release_grids(st, plan, U, sampler, progress=progress)
    timings["noise"] = time.perf_counter() - t0
    errors, released_errors = grid_error_bounds(agg, st, rel, U)
    _check_error_bound(errors, error_bound, plan, agg, U, epsilon, split)
    table = release_table(agg, st, plan, rel, errors)
    summary = release_summary(agg, ingest or IngestReport(), plan, gamma, errors, released_errors,
                              bound=U, epsilon=epsilon, split=split, sampler=sampler, seeded=seed is not None)
    diagnostics = {"timings": {key: round(v, 4) for key, v in timings.items()},
                   "ingest": (ingest or IngestReport()).as_dict()}
    return ReleaseResult(table=table, summary=summary, ingest=ingest or IngestReport(), aggregate=agg,
                         plan=plan, grids=rel, diagnostics=diagnostics)


def _release_grids(st: RetainedStats, plan: GridPlan, bound: float, sampler: Noise, *,
                   progress: bool) -> GridRelease:
    """The CLIP mechanism in every grid with the plan's budgets (unit checked against the noise)."""
    if plan.unit != sampler.unit:
        raise DpoptInputError(f"`plan` budgets are in {plan.unit!r}; {sampler.mechanism} noise needs {sampler.unit!r}")
    bar = _progress(progress and sampler.sampler == "discrete", 2 * st.retained.size, desc="noise", unit=" draws")
    try:
        return release_grids(
            retained=st.retained, retained_max=st.retained_max, sums=st.sum, sums_of_squares=st.sumsq,
            bound=bound, budget_mean=plan.budget_mean, budget_variance=plan.budget_variance,
            noise=sampler, released=plan.released, callback=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()


def release_table(agg: Aggregate, st: RetainedStats, plan: GridPlan, rel: GridRelease,
                  errors: np.ndarray) -> pd.DataFrame:
    """One row per grid: public counts, released values, sensitivities, budgets, noise scales."""
    cells, slots = agg.grid_labels()
    lat, lng = _cell_centres(agg.cells)
    length = plan.array_length if plan.array_length is not None else np.full(agg.n_grids, -1)
    return pd.DataFrame({
        "grid": np.arange(agg.n_grids, dtype=np.int64),
        "cell": cells,
        "slot": slots,
        "cell_lat": lat,
        "cell_lng": lng,
        "n_users": agg.grid_users(),
        "n_records": agg.grid_records(),
        "max_user_records": _grid_max(agg),
        "n_users_retained": st.users,
        "n_records_retained": st.retained,
        "mean": rel.mean,
        "variance": rel.variance,
        "released": rel.released,
        "mean_sensitivity": rel.mean_sensitivity,
        "variance_sensitivity": rel.variance_sensitivity,
        "epsilon_mean": rel.budget_mean,
        "epsilon_variance": rel.budget_variance,
        "mean_noise_scale": rel.mean_noise_scale,
        "variance_noise_scale": rel.variance_noise_scale,
        "error_bound": errors,
        "array_length": length,
    })


def release_summary(agg: Aggregate, ingest: IngestReport, plan: GridPlan, gamma: np.ndarray,
                    errors: np.ndarray, released_errors: np.ndarray, *, bound: float, epsilon: float,
                    split: str, sampler: Noise, seeded: bool) -> ReleaseSummary:
    """The published headline numbers; K recounted from the plan's retained counts (Thm II.3)."""
    G1 = int(agg.user_grids().max())
    suppressed = gamma == 0
    suppressed_records = int(agg.count[suppressed].sum())
    published_ingest = {key: v for key, v in ingest.as_dict().items() if key not in VALUE_DEPENDENT_INGEST}
    return ReleaseSummary(
        privacy_model=PRIVACY_MODEL, privacy_model_description=PRIVACY_MODEL_SUMMARY,
        users=agg.n_users, grids=agg.n_grids, records=agg.n_records, pairs=agg.n_pairs,
        plan=plan.method, plan_status=str(plan.status), plan_gap=float(plan.gap),
        pseudo_users=plan.array_length is not None,
        degradation=plan.degradation, degradation_baseline=G1,
        epsilon=epsilon, epsilon_total=plan.degradation * epsilon, epsilon_total_baseline=G1 * epsilon,
        epsilon_basic_composition=agg.n_grids * epsilon,
        error_bound=float(np.max(errors)),
        error_bound_target=float(plan.error_bound) if plan.error_bound is not None else float("nan"),
        error_bound_released=float(np.max(released_errors)),
        suppressed_pairs=int(suppressed.sum()), suppressed_records=suppressed_records,
        truncated_records=int(agg.count.sum() - gamma.sum()) - suppressed_records,
        withheld_grids=int((~np.asarray(plan.released, dtype=bool)).sum()),
        dropped_records=ingest.dropped_records, bound=bound, h3_resolution=agg.h3_resolution,
        slot=_slot_text(agg.slot_ns), split=split, noise=sampler.label, granularity=sampler.granularity,
        seeded=seeded, ingest=published_ingest,
    )


def _grid_max(agg: Aggregate) -> np.ndarray:
    out = np.zeros(agg.n_grids, dtype=np.int64)
    np.maximum.at(out, agg.pair_grid, agg.count)
    return out


def _cell_centres(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import h3

    uniq, inv = np.unique(cells, return_inverse=True)
    pts = np.asarray([h3.cell_to_latlng(h3.int_to_str(int(c))) for c in uniq], dtype=float).reshape(-1, 2)
    return pts[inv, 0], pts[inv, 1]


def _slot_text(slot_ns: int) -> str:
    seconds = slot_ns // 1_000_000_000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# ----------------------------------------------------------------------------------------------
# the whole pipeline


def _truncated_reader(records: Any, *, bound: float, columns: Any, out_of_range: str, timestamp_unit: str,
                      chunksize: int | None, backend: str, client: Any) -> TruncatedSums:
    """A second pass over the records for the pseudo-user truncated pairs (files or Dask)."""
    if backend == "dask":
        from .dask_backend import truncated_sums_dask

        def dask_pass(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return truncated_sums_dask(records, a, pairs, keep, bound=bound, columns=columns,
                                       out_of_range=out_of_range, timestamp_unit=timestamp_unit, client=client)

        return dask_pass

    def local_pass(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chunks = (c for c, _ in read_records(records, bound=bound, columns=columns, out_of_range=out_of_range,
                                             timestamp_unit=timestamp_unit, chunksize=chunksize))
        return truncated_sums_stream(chunks, a, pairs, keep)

    return local_pass


def release(
    records: Any, *, bound: float, epsilon: float,
    # the gridding
    h3_resolution: int = 7, slot: Any = "1h",
    # the plan
    plan: str = "baseline", pseudo_users: bool = False, error_bound: float | None = None, split: str = "equal",
    time_limit: float | None = None,
    # ingestion and aggregation
    columns: ColumnMap | Mapping[str, str] | None = None, out_of_range: str = "clip", timestamp_unit: str = "s",
    chunksize: int | None = None, backend: str = "local", client: Any = None,
    # the noise
    seed: int | None = None, noise: str = "discrete", granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    progress: bool = False,
) -> ReleaseResult:
    """User-level ε-DP release of the mean and variance of every (H3 cell, time slot) grid.

    Privacy model ``public-occupancy``: neighbours differ in one user's values; which user has how
    many records in which grid is public (seed 002 §II-C).

    Parameters
    ----------
    records : DataFrame, CSV path or Parquet path
        Columns user_id, latitude, longitude, timestamp, value (other names via ``columns``).
    bound : float
        U: values are in [0, U] (outside: ``out_of_range`` = "clip" | "drop" | "error").
    epsilon : float
        ε of each grid's release (ε/2 for the mean and ε/2 for the variance with ``split="equal"``).
    h3_resolution, slot
        Gridding: H3 resolution 0..15 and slot length (``"1h"``, ``"15min"``), UTC.
    plan : {"baseline", "greedy", "milp"}
        No suppression, CLIP-USER (seed 002 Algorithm 1) or the exact MILP (:mod:`.planners`).
    pseudo_users : bool
        Pseudo-user clipping per grid after the plan (seed 002 eq. (15)).
    error_bound : float, optional
        E every grid's worst-case error must meet (default: max_g E_g of BASELINE).
    split : {"equal", "optimal"}
        Budget split between mean and variance.
    time_limit : float, optional
        Seconds for the MILP (a time-limited plan reports its status and gap).
    seed : int, optional
        Seed for reproducible noise: tests and demos only. ``None`` (default) draws from the OS CSPRNG.
    columns, timestamp_unit, chunksize
        Ingestion (see :mod:`dpopt.release.ingest`).
    backend : {"local", "dask"}, client
        Aggregate locally (streamed in chunks) or on a Dask cluster (``client`` a
        ``distributed.Client``; default a local cluster).
    noise : {"discrete", "numpy"}
        Exact discrete Laplace (real releases) or numpy Laplace (simulation only), :mod:`dpopt.noise`.
    granularity_bits : int
        k of the output grid λ = 2^-k.
    progress : bool
        Show tqdm progress bars on stderr.

    Returns
    -------
    ReleaseResult
        ``summary.epsilon_total = K·ε`` (seed 002 Thm II.3) with K recounted from the retained counts.
    """
    bound = check_bound(bound)
    epsilon = check_epsilon(epsilon)
    _check_plan_options(plan, split, error_bound, time_limit)
    _check_noise_options(bound, epsilon, noise, granularity_bits)
    backend = check_choice(backend, "backend", BACKENDS)
    t0 = time.perf_counter()
    agg, ingest = aggregate_records(
        records, bound=bound, h3_resolution=h3_resolution, slot=slot, columns=columns,
        out_of_range=out_of_range, timestamp_unit=timestamp_unit, chunksize=chunksize,
        keep_samples=bool(pseudo_users) and backend == "local" and isinstance(records, pd.DataFrame),
        backend=backend, client=client, progress=progress,
    )
    timings = {"aggregate": time.perf_counter() - t0}
    truncated = _truncated_reader(records, bound=bound, columns=columns, out_of_range=out_of_range,
                                  timestamp_unit=timestamp_unit, chunksize=chunksize, backend=backend,
                                  client=client) if pseudo_users else None
    return release_aggregate(
        agg, ingest, bound=bound, epsilon=epsilon, plan=plan, pseudo_users=pseudo_users,
        error_bound=error_bound, split=split, time_limit=time_limit, seed=seed, noise=noise,
        granularity_bits=granularity_bits, truncated_sums=truncated, timings=timings,
        progress=progress,
    )
