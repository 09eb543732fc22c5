"""records → H3 × time grids → plan → user-level DP release of every grid's mean and variance.

The pipeline of seed 002 (§II-B, §III-B, §V):

1. ingestion and gridding (:mod:`.ingest`, :mod:`.grid`) and aggregation to the occupancy array
   A (public, as the paper assumes) and per-pair sufficient statistics (:mod:`.aggregate`);
2. a *plan* on the public counts only: BASELINE (keep everything), CLIP-USER (seed 002 Algorithm 1,
   :func:`dpopt.clip_user`) or the exact MILP (:func:`dpopt.solve_suppression`), each keeping every
   grid's worst-case error ≤ E (E = max_g E_g of BASELINE unless given); optionally followed by
   pseudo-user clipping per grid (eq. (15), :func:`dpopt.pseudo_user_clipping`);
3. the CLIP mechanism (8) in every grid: μ_clip (6) and Var_clip (7) of the retained samples plus
   Laplace noise of scale Δ/ε_i with ε_μ + ε_Var = ε (ε/2 each by default, as in the paper),
   Δ_μ_clip = U·Γ*/R (9) and Δ_Var_clip of Lemma III.3; real releases draw the noise from the
   exact discrete Laplace sampler of :mod:`.noise` on the grid 2^-k;
4. accounting by seed 002 Theorem II.3 / Proposition V.1: every grid's release is ε-DP and acts on
   that grid's records only, so the whole release is K·ε user-level DP with
   K = max_ℓ |{g : Γ_{g,ℓ} > 0}|, recounted here from the retained counts (not taken from the plan).

What is public in this model: the occupancy array (which user has how many records in which grid) is
assumed public by seed 002 (§II-C), so ``n_users`` and ``n_records`` per grid and the suppressed
pairs are released without noise. If the occupancy is itself sensitive, this pipeline is not the
right tool (see models/release.md).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from .aggregate import Aggregate, Aggregator, truncated_sums_stream
from .grid import check_resolution, parse_slot
from .ingest import ColumnMap, IngestReport, count_rows, read_records
from .noise import (
    DEFAULT_GRANULARITY_BITS,
    discrete_laplace_mean_abs,
    epsilon_rational,
    integer_source,
    release_on_grid,
    remaining_epsilon,
    summation_error,
)

__all__ = [
    "PLANS",
    "ReleaseSummary",
    "ReleaseResult",
    "aggregate_records",
    "plan_release",
    "release",
    "release_aggregate",
    "RetainedPlan",
]

PLANS = ("baseline", "greedy", "milp")
NOISES = ("discrete", "numpy")
BACKENDS = ("local", "dask")


@dataclass(frozen=True)
class RetainedPlan:
    """The outcome of planning: Γ_{g,ℓ} for every pair and what produced it.

    ``gamma`` per pair of the aggregate; ``suppressed`` pair indices with Γ = 0; ``plan`` the
    :class:`dpopt.suppression.SuppressionPlan` (None for BASELINE); ``pseudo`` the pseudo-user
    result (or None); ``array_length`` per-grid m_g of the pseudo-user clipping (or None);
    ``error_bound`` the target E; ``status`` of the plan.
    """

    gamma: np.ndarray
    suppressed: np.ndarray
    plan: Any
    pseudo: Any
    array_length: np.ndarray | None
    error_bound: float
    status: str
    method: str
    solve_time: float


@dataclass(frozen=True)
class ReleaseSummary:
    """Headline numbers of a release (written to summary.json).

    ``degradation`` K = max_ℓ (grids ℓ keeps) after the plan; ``epsilon_total`` = K·ε (seed 002
    Thm II.3); ``degradation_baseline`` G₁ and ``epsilon_total_baseline`` = G₁·ε without a plan;
    ``epsilon_basic_composition`` = G·ε (Thm II.2, for comparison); ``error_bound`` the largest
    per-grid worst-case error E = max_g E_g of the released mechanism (continuous-Laplace formula
    of eq. (11)-(13)); ``error_bound_target`` the E the plan had to meet; ``error_bound_released``
    the same with the discrete sampler's actual noise (rounded-up sensitivity, grid rounding).
    """

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
    timings: dict[str, float] = field(default_factory=dict)
    ingest: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (summary.json)."""
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True, eq=False)
class ReleaseResult:
    """A DP release: per-grid ``table``, ``summary``, and what produced them.

    ``table`` columns: grid, cell, slot, cell_lat, cell_lng, n_users, n_records, max_user_records,
    n_users_retained, n_records_retained, mean, variance, released, mean_sensitivity,
    variance_sensitivity, epsilon_mean, epsilon_variance, mean_noise_scale, variance_noise_scale,
    error_bound, array_length. Grids whose retained set is empty are not released (NaN).
    """

    table: pd.DataFrame
    summary: ReleaseSummary
    ingest: IngestReport
    aggregate: Aggregate
    retained: RetainedPlan

    def suppressed_frame(self) -> pd.DataFrame:
        """The suppressed (user, grid) pairs: user, grid, cell, slot, records."""
        agg = self.aggregate
        p = self.retained.suppressed
        g = agg.pair_grid[p]
        return pd.DataFrame(
            {
                "user": agg.users[agg.pair_user[p]],
                "grid": g,
                "cell": self.table["cell"].to_numpy()[g] if len(p) else np.empty(0, object),
                "slot": self.table["slot"].to_numpy()[g] if len(p) else np.empty(0, object),
                "records": agg.count[p],
            }
        )

    def user_grids(self) -> np.ndarray:
        """Grids each user keeps after the plan (Γ_{g,ℓ} > 0), per user."""
        agg = self.aggregate
        return np.bincount(agg.pair_user, weights=self.retained.gamma > 0, minlength=agg.n_users).astype(np.int64)


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
    """Read, clean, grid and aggregate records (local streaming or Dask); see :mod:`.aggregate`."""
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
    agg = Aggregator(h3_resolution=res, slot_ns=slot_ns, keep_samples=keep_samples)
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


def _suppression_api() -> Any:
    try:
        from .. import suppression
    except ImportError as exc:  # pragma: no cover - partial builds
        raise DpoptInputError(
            f"plans 'greedy' and 'milp' and pseudo-user clipping need dpopt.suppression, which "
            f"failed to import in this build ({exc})"
        ) from None
    return suppression


def _call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` with the keyword options it accepts (others are dropped)."""
    params = inspect.signature(func).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return func(*args, **kwargs)


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
) -> RetainedPlan:
    """Retained counts Γ_{g,ℓ} per pair from a plan on the public occupancy array only."""
    from ..calculus import grid_error_terms

    bound = check_bound(bound)
    epsilon = check_epsilon(epsilon)
    plan = check_choice(plan, "plan", PLANS)
    split = check_choice(split, "split", ("equal", "optimal"))
    if error_bound is not None:
        error_bound = check_nonnegative_float(error_bound, "error_bound")
    N = agg.grid_records()
    base = grid_error_terms(N, N, _grid_max(agg), bound, epsilon, split=split).error
    target = float(base.max()) if error_bound is None else float(error_bound)
    gamma = agg.count.copy()
    suppressed = np.zeros(0, dtype=np.int64)
    plan_obj = None
    status = "baseline"
    t0 = time.perf_counter()
    if plan != "baseline":
        api = _suppression_api()
        occ = agg.occupancy()
        if plan == "greedy":
            plan_obj = _call(api.clip_user, occ, bound, epsilon, error_bound=error_bound, split=split)
        else:
            plan_obj = _call(
                api.solve_suppression, occ, bound, epsilon, error_bound=error_bound,
                time_limit=time_limit, split=split,
            )
        status = str(getattr(plan_obj, "status", "unknown"))
        pairs = list(plan_obj.suppressed)
        if pairs:
            us = np.asarray([int(u) for u, _ in pairs], dtype=np.int64)
            gs = np.asarray([int(g) for _, g in pairs], dtype=np.int64)
            key = agg.pair_grid * agg.n_users + agg.pair_user
            want = gs * agg.n_users + us
            idx = np.searchsorted(key, want)
            if np.any(idx >= key.size) or np.any(key[np.minimum(idx, key.size - 1)] != want):
                raise RuntimeError("the plan suppressed a pair that is not occupied")  # pragma: no cover
            suppressed = np.sort(idx)
            gamma[suppressed] = 0
        if plan_obj.error_bound is not None and np.isfinite(plan_obj.error_bound):
            target = float(plan_obj.error_bound)
    pseudo = None
    length = None
    if pseudo_users:
        length, pseudo = _pseudo_lengths(agg, gamma, bound=bound, epsilon=epsilon, split=split,
                                         plan_obj=plan_obj)
        has = gamma > 0
        gamma = np.where(has, np.minimum(gamma, length[agg.pair_grid]), 0)
    return RetainedPlan(
        gamma=gamma, suppressed=suppressed, plan=plan_obj, pseudo=pseudo, array_length=length,
        error_bound=target, status=status, method=plan, solve_time=time.perf_counter() - t0,
    )


def _pseudo_lengths(
    agg: Aggregate, gamma: np.ndarray, *, bound: float, epsilon: float, split: str, plan_obj: Any
) -> tuple[np.ndarray, Any]:
    """Per-grid array length m_g of pseudo-user clipping (seed 002 eq. (15)).

    Uses :func:`dpopt.pseudo_user_clipping` (the minimiser m of every grid, ``.clip``, in the
    grid order of the occupancy array, whose labels here are the grid indices 0..G-1).
    """
    api = _suppression_api()
    occ = agg.occupancy()
    func = getattr(api, "pseudo_user_clipping", None)
    if func is None:  # pragma: no cover - partial builds
        raise DpoptInputError("pseudo-user clipping is not available in this build")
    suppressed = plan_obj.suppressed if plan_obj is not None else None
    res = _call(func, occ, bound, epsilon, suppressed=suppressed, plan=plan_obj, split=split)
    grids = getattr(res, "grids", None)
    if grids is not None and not np.array_equal(np.asarray(grids), np.arange(agg.n_grids)):
        raise RuntimeError("pseudo-user result is not in grid-index order")  # pragma: no cover
    for name in ("clip", "lengths", "array_length", "m"):
        if hasattr(res, name):
            length = np.asarray(getattr(res, name), dtype=np.int64)
            break
    else:  # pragma: no cover - unknown result type
        raise RuntimeError(f"cannot read per-grid lengths from {type(res).__name__}")
    if length.shape != (agg.n_grids,):  # pragma: no cover
        raise RuntimeError("pseudo-user lengths do not match the grids")
    return length, res


# ----------------------------------------------------------------------------------------------
# 3. release


def release_aggregate(
    agg: Aggregate,
    ingest: IngestReport | None = None,
    *,
    bound: float,
    epsilon: float,
    plan: str = "baseline",
    pseudo_users: bool = False,
    error_bound: float | None = None,
    split: str = "equal",
    time_limit: float | None = None,
    seed: int | None = None,
    noise: str = "discrete",
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    truncated_sums: Callable[[Aggregate, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    timings: dict[str, float] | None = None,
    progress: bool = False,
) -> ReleaseResult:
    """Plan and release from an existing aggregate (see :func:`release`)."""
    from ..calculus import grid_error_terms

    bound = check_bound(bound)
    epsilon = check_epsilon(epsilon)
    noise = check_choice(noise, "noise", NOISES)
    _check_discrete_epsilon(epsilon, noise)
    k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    if k > 40:
        raise DpoptInputError(f"`granularity_bits` must be an integer in 0..40; got {granularity_bits!r}")
    if bound * bound * 2.0**k > 2.0**60:
        raise DpoptInputError(
            f"`granularity_bits` = {k} is too fine for bound {bound:g}: U²·2^k must stay below 2^60 "
            f"(use granularity_bits <= {max(0, int(60 - 2 * np.log2(bound)))})"
        )
    timings = dict(timings or {})
    ingest = ingest or IngestReport()
    t0 = time.perf_counter()
    bar = _progress(progress and (plan != "baseline" or pseudo_users), 1, desc=f"plan ({plan})", unit=" plan")
    rp = plan_release(agg, bound=bound, epsilon=epsilon, plan=plan, pseudo_users=pseudo_users,
                      error_bound=error_bound, split=split, time_limit=time_limit)
    if bar is not None:
        bar.update(1)
        bar.close()
    timings["plan"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    part = np.flatnonzero((rp.gamma > 0) & (rp.gamma < agg.count))
    tsums = None
    if part.size and agg.samples is None:
        if truncated_sums is None:
            raise DpoptInputError(
                "pseudo-user clipping needs the retained samples: aggregate with keep_samples=True"
            )
        tsums = truncated_sums(agg, part, rp.gamma[part])
    st = agg.retained_stats(rp.gamma, truncated_sums=tsums)
    N = agg.grid_records()
    terms = grid_error_terms(N, st.retained, st.retained_max, bound, epsilon, split=split)
    worst = float(np.max(terms.error))
    if error_bound is not None and worst > float(error_bound) * (1 + 1e-9):
        raise DpoptInputError(
            f"`error_bound` = {float(error_bound):g} cannot be met: plan {plan!r} "
            f"(status {rp.status}) leaves a grid with worst-case error {worst:.6g} "
            f"(BASELINE's largest is {_baseline_max(agg, bound, epsilon, split):.6g}); "
            "raise the error bound or omit it (default: BASELINE's largest grid error)"
        )
    ok = st.retained > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(ok, st.sum / np.maximum(st.retained, 1), np.nan)
        var = np.where(ok, np.maximum(st.sumsq / np.maximum(st.retained, 1) - mean**2, 0.0), np.nan)
    timings["statistics"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    lam = 2.0**-k
    eps_var = terms.epsilon_variance.copy()
    if noise == "discrete":
        src = integer_source(seed)
        bar = _progress(progress, 2 * agg.n_grids, desc="noise", unit=" draws")
        cb = bar.update if bar is not None else None
        gamma_r = summation_error(st.retained, 1.0)  # float error bounds of μ̃ and Var̃
        rel_mean, t_mean = release_on_grid(mean, terms.mean_sensitivity, terms.epsilon_mean, src,
                                           granularity_bits=k, callback=cb,
                                           value_errors=2.0 * gamma_r * bound)
        # ε'_μ + ε'_Var ≤ ε exactly, whatever the float rounding of the split
        eps_var[ok] = np.minimum(eps_var[ok], remaining_epsilon(epsilon, terms.epsilon_mean[ok]))
        rel_var, t_var = release_on_grid(var, terms.variance_sensitivity, eps_var, src,
                                         granularity_bits=k, callback=cb,
                                         value_errors=8.0 * gamma_r * bound * bound)
        if bar is not None:
            bar.close()
        # a statistic given no budget (split="optimal", zero sensitivity) was released without noise
        scale_mean, abs_mean = _discrete_scale(ok, t_mean, terms.epsilon_mean, k)
        scale_var, abs_var = _discrete_scale(ok, t_var, eps_var, k)
        noise_abs = np.where(ok, abs_mean + abs_var + lam, np.inf)  # + two roundings, λ/2 each
        noise_label = f"discrete Laplace on 2^-{k} (Canonne-Kamath-Steinke), " + (
            "seeded: NOT for a real release" if seed is not None else "OS CSPRNG (secrets)"
        )
    else:
        rng = np.random.default_rng(seed)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale_mean = np.where(ok, np.where(terms.epsilon_mean > 0, terms.mean_sensitivity / terms.epsilon_mean, 0.0), np.nan)
            scale_var = np.where(ok, np.where(terms.epsilon_variance > 0, terms.variance_sensitivity / terms.epsilon_variance, 0.0), np.nan)
        rel_mean = np.where(ok, mean + rng.laplace(0.0, np.where(ok, scale_mean, 1.0)), np.nan)
        rel_var = np.where(ok, var + rng.laplace(0.0, np.where(ok, scale_var, 1.0)), np.nan)
        noise_abs = terms.noise
        noise_label = "numpy continuous Laplace: simulation only, NOT for a real release"
    timings["noise"] = time.perf_counter() - t0

    # accounting: recount K from the retained counts (Thm II.3 with ε_g = ε)
    kept_grids = np.bincount(agg.pair_user, weights=rp.gamma > 0, minlength=agg.n_users)
    K = int(kept_grids.max()) if kept_grids.size else 0
    G1 = int(agg.user_grids().max())
    released_err = np.where(ok, terms.mean_bias + terms.variance_bias + noise_abs, np.inf)
    cells, slots = agg.grid_labels()
    table = pd.DataFrame(
        {
            "grid": np.arange(agg.n_grids, dtype=np.int64),
            "cell": cells,
            "slot": slots,
            "n_users": agg.grid_users(),
            "n_records": N,
            "max_user_records": _grid_max(agg),
            "n_users_retained": st.users,
            "n_records_retained": st.retained,
            "mean": rel_mean,
            "variance": rel_var,
            "released": ok,
            "mean_sensitivity": np.where(ok, terms.mean_sensitivity, np.nan),
            "variance_sensitivity": np.where(ok, terms.variance_sensitivity, np.nan),
            "epsilon_mean": np.where(ok, terms.epsilon_mean, np.nan),
            "epsilon_variance": np.where(ok, eps_var, np.nan),
            "mean_noise_scale": scale_mean,
            "variance_noise_scale": scale_var,
            "error_bound": terms.error,
            "array_length": rp.array_length if rp.array_length is not None else np.full(agg.n_grids, -1),
        }
    )
    lat, lng = _cell_centres(agg.cells)
    table.insert(3, "cell_lat", lat)
    table.insert(4, "cell_lng", lng)
    suppressed_records = int(agg.count[rp.suppressed].sum())
    summary = ReleaseSummary(
        users=agg.n_users,
        grids=agg.n_grids,
        records=agg.n_records,
        pairs=agg.n_pairs,
        plan=rp.method,
        plan_status=rp.status,
        plan_gap=float(getattr(rp.plan, "gap", float("nan"))) if rp.plan is not None else 0.0,
        pseudo_users=bool(pseudo_users),
        degradation=K,
        degradation_baseline=G1,
        epsilon=epsilon,
        epsilon_total=K * epsilon,
        epsilon_total_baseline=G1 * epsilon,
        epsilon_basic_composition=agg.n_grids * epsilon,
        error_bound=float(np.max(terms.error)),
        error_bound_target=float(rp.error_bound),
        error_bound_released=float(np.max(released_err)),
        suppressed_pairs=int(rp.suppressed.size),
        suppressed_records=suppressed_records,
        truncated_records=int(agg.count.sum() - rp.gamma.sum()) - suppressed_records,
        withheld_grids=int((~ok).sum()),
        dropped_records=ingest.dropped_records,
        bound=bound,
        h3_resolution=agg.h3_resolution,
        slot=_slot_text(agg.slot_ns),
        split=split,
        noise=noise_label,
        granularity=lam if noise == "discrete" else 0.0,
        seeded=seed is not None,
        timings={k2: round(v, 4) for k2, v in timings.items()},
        ingest=ingest.as_dict(),
    )
    return ReleaseResult(table=table, summary=summary, ingest=ingest, aggregate=agg, retained=rp)


def _check_discrete_epsilon(epsilon: float, noise: str) -> None:
    """The discrete sampler needs ε/2 ≥ 2^-30 (its budgets are multiples of 2^-30)."""
    if noise == "discrete" and epsilon < 2.0**-29:
        raise DpoptInputError(
            f"`epsilon` must be >= 2^-29 (about {2.0**-29:.3g}) for the discrete sampler, which gives "
            f"each grid's mean and variance a budget of at least 2^-30; got {epsilon!r}"
        )


def _discrete_scale(ok: np.ndarray, t: np.ndarray, eps: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Noise scale λt/ε' and E|noise| per grid of the discrete sampler (0 where ε = 0: no noise)."""
    scale = np.full(t.shape, np.nan)
    mean_abs = np.zeros(t.shape)
    noisy = ok & (eps > 0)
    scale[ok & ~noisy] = 0.0
    if np.any(noisy):
        e_used = np.asarray([float(epsilon_rational(float(e))) for e in eps[noisy]])
        scale[noisy] = 2.0**-k * t[noisy] / e_used
        mean_abs[noisy] = discrete_laplace_mean_abs(t[noisy], eps[noisy], k)
    return scale, mean_abs


def _baseline_max(agg: Aggregate, bound: float, epsilon: float, split: str) -> float:
    from ..calculus import grid_error_terms

    N = agg.grid_records()
    return float(np.max(grid_error_terms(N, N, _grid_max(agg), bound, epsilon, split=split).error))


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


def release(
    records: Any,
    *,
    bound: float,
    epsilon: float,
    h3_resolution: int = 7,
    slot: Any = "1h",
    plan: str = "baseline",
    pseudo_users: bool = False,
    error_bound: float | None = None,
    split: str = "equal",
    time_limit: float | None = None,
    seed: int | None = None,
    columns: ColumnMap | Mapping[str, str] | None = None,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
    chunksize: int | None = None,
    backend: str = "local",
    client: Any = None,
    noise: str = "discrete",
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    progress: bool = False,
) -> ReleaseResult:
    """User-level ε-DP release of the mean and variance of every (H3 cell, time slot) grid.

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
        No suppression, CLIP-USER (seed 002 Algorithm 1) or the exact MILP.
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
        Exact discrete Laplace (real releases) or numpy Laplace (simulation only).
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
    check_choice(plan, "plan", PLANS)
    _check_discrete_epsilon(epsilon, check_choice(noise, "noise", NOISES))
    check_choice(split, "split", ("equal", "optimal"))
    if error_bound is not None:
        check_nonnegative_float(error_bound, "error_bound")
    if time_limit is not None:
        check_nonnegative_float(time_limit, "time_limit")
    t0 = time.perf_counter()
    backend = check_choice(backend, "backend", BACKENDS)
    agg, ingest = aggregate_records(
        records, bound=bound, h3_resolution=h3_resolution, slot=slot, columns=columns,
        out_of_range=out_of_range, timestamp_unit=timestamp_unit, chunksize=chunksize,
        keep_samples=bool(pseudo_users) and backend == "local" and isinstance(records, pd.DataFrame),
        backend=backend, client=client, progress=progress,
    )
    timings = {"aggregate": time.perf_counter() - t0}
    truncated = None
    if pseudo_users and backend == "local" and agg.samples is None:
        # files: a second streaming pass collects only the truncated pairs' records
        def truncated(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            chunks = (c for c, _ in read_records(
                records, bound=bound, columns=columns, out_of_range=out_of_range,
                timestamp_unit=timestamp_unit, chunksize=chunksize,
            ))
            return truncated_sums_stream(chunks, a, pairs, keep)
    elif pseudo_users and backend == "dask":
        from .dask_backend import truncated_sums_dask

        def truncated(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return truncated_sums_dask(
                records, a, pairs, keep, bound=bound, columns=columns, out_of_range=out_of_range,
                timestamp_unit=timestamp_unit, client=client,
            )

    return release_aggregate(
        agg, ingest, bound=bound, epsilon=epsilon, plan=plan, pseudo_users=pseudo_users,
        error_bound=error_bound, split=split, time_limit=time_limit, seed=seed, noise=noise,
        granularity_bits=granularity_bits, truncated_sums=truncated, timings=timings,
        progress=progress,
    )
