"""The ``public-occupancy`` privacy model (seed 002 §II-B, §III-B, §V): contributions → plan →
CLIP mechanism per grid → :class:`~dpopt.measurements.Measurements`, one function per step, read
top to bottom:

1. :func:`plan_release` — a :class:`~dpopt.plan.GridPlan` from the public counts only
   (:mod:`.planners`: BASELINE, CLIP-USER, the MILP, the total-budget planner; optionally
   pseudo-user clipping; plan="hierarchy": :mod:`.hierarchy_release`);
2. :func:`measure_release` — the plan's retained statistics per grid, then the CLIP mechanism
   (8) in every grid (:func:`dpopt.mechanisms.release_grids`) with noise from :mod:`dpopt.noise`
   (exact discrete Laplace or Gaussian on 2^-k with the OS CSPRNG for real releases);
3. accounting by seed 002 Theorem II.3 / Proposition V.1, recounted from the plan's retained
   counts (:func:`.budgets.exact_user_spend`, :attr:`GridPlan.degradation`);
4. the Measurements (:func:`measure`): per grid the noisy CLIP ``mean`` and ``variance`` with their
   exact noise laws (family, per-grid scale, lattice 2^-k) and worst-case clipping-bias bounds; the
   public per-grid columns (counts, sensitivities, the plan's budgets, the sampler's E|noise|); the
   exact spend (:class:`~dpopt.measurements.BudgetSpend`, every user's in ``info.user_spend``);
   the plan and the summary's public facts in ``info`` (:class:`~dpopt.measurements.PublicOccupancyInfo`).

The estimates and their error bounds are computed from the Measurements alone by
:func:`dpopt.estimation.direct.direct`; the published table and summary are formatted from both by
:func:`dpopt.writers.public_occupancy_result.public_occupancy_release`; the front door
:func:`dpopt.release.release_aggregate` composes the three.

Options: :class:`PublicOccupancyOptions` (this model's only: the user model cannot receive them).
Privacy model ``public-occupancy``: the occupancy array (which user has how many records in which
grid) is public (seed 002 §II-C), so ``n_users`` and ``n_records`` per grid and the suppressed
pairs are released without noise. If the occupancy is itself sensitive, this pipeline is not the
right tool (see models/release.md).
"""
from __future__ import annotations

import math
import time
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float
from ..calculus import mean_bias_from_totals, variance_bias_from_totals
from ..hierarchy.tree import profile_cycle
from ..mechanisms.grid import GridRelease, release_grids
from ..noise import Noise, check_granularity_bits, make_noise
from ..plan import GridPlan
from ..measurements import NODE_COLUMNS, BudgetSpend, Measurements, NoiseLaw, PublicOccupancyInfo, Statistic
from ..records.aggregate import Aggregate, RetainedStats
from ..records.grid import slot_text
from ..records.sample_key import SampleKey
from .contributions import TruncatedSums, progress_bar
from .model_text import PRIVACY_MODEL, PRIVACY_MODEL_SUMMARY
from .options import Budget, NoiseOptions, PerGridBudget, check_confidence
from .budgets import PrivacyBudget, exact_user_spend, per_grid_budget, resolve_budget
from .planners import PLANNERS, SPLITS, pseudo_user_plan, rebudget

__all__ = [
    "PLANS",
    "PRIVACY_MODEL",
    "MeasuredRelease",
    "PublicOccupancyOptions",
    "plan_release",
    "measure_release",
    "measure",
    "to_privacy_budget",
]

#: the plans: the seed-002 planners, the total-budget planner (models/budget.md) and the hierarchy plan
PLANS = (*PLANNERS, "budget", "hierarchy")
#: seconds the budget planner may take when no `time_limit` is given
DEFAULT_BUDGET_TIME_LIMIT = 25.0
CRITERIA = ("noise", "worst_case")
NOISES = ("discrete", "numpy")


def _check_targets(value: Any, name: str) -> None:
    """``target``/``target_variance``: None, or a number or array of numbers, each finite and > 0."""
    if value is None:
        return
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise DpoptInputError(f"`{name}` must be a positive number (or one per grid); got {value!r}") from None
    if isinstance(value, bool) or arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 0)):
        raise DpoptInputError(f"`{name}` must be a positive number (or one per grid); got {value!r}")


@dataclass(frozen=True)
class PublicOccupancyOptions:
    """Options of the ``public-occupancy`` model (validated on construction).

    ``plan`` "budget" (the total-budget planner, default with a total budget), "baseline" (default
    with a per-grid ε), "greedy" (CLIP-USER), "milp", or a ready :class:`GridPlan`; ``pseudo_users``
    pseudo-user clipping after the plan (eq. (15)); ``error_bound`` E every grid must meet;
    ``split`` of each grid's budget between mean and variance; ``time_limit`` seconds of planning;
    ``target``, ``target_variance`` τ of the budget planner; ``criterion`` of the published error
    bounds ("noise" or "worst_case", also the budget planner's); ``profile`` "day" / "week" with
    plan="hierarchy": the hierarchy's time steps recur every day (hour-of-day …) or week
    (models/hierarchy.md §2).
    """

    plan: Any = None
    pseudo_users: bool = False
    error_bound: float | None = None
    split: str = "equal"
    time_limit: float | None = None
    target: Any = None
    target_variance: Any = None
    criterion: str = "noise"
    profile: str | None = None

    def __post_init__(self) -> None:
        if self.profile is not None:
            profile_cycle(self.profile)  # the one validator of a profile name
        if isinstance(self.plan, GridPlan):
            if self.pseudo_users or self.time_limit is not None:
                raise DpoptInputError("`pseudo_users` and `time_limit` are planner options: with a ready "
                                      "GridPlan apply dpopt.release.pseudo_user_plan to it instead")
        elif self.plan is not None:
            check_choice(self.plan, "plan", PLANS)
        check_choice(self.split, "split", SPLITS)
        check_choice(self.criterion, "criterion", CRITERIA)
        if self.error_bound is not None:
            check_nonnegative_float(self.error_bound, "error_bound")
        if self.time_limit is not None:
            check_nonnegative_float(self.time_limit, "time_limit")
        for name in ("target", "target_variance"):  # a number, or one per grid: each finite and > 0
            _check_targets(getattr(self, name), name)

    def for_plan(self, plan: Any) -> PublicOccupancyOptions:
        """These options with ``plan`` filled in (the default for the budget); an option that would
        do nothing under that plan is refused."""
        name = "a ready GridPlan" if isinstance(plan, GridPlan) else f"plan={plan!r}"
        planned = plan in ("budget", "hierarchy")
        idle = [("target", self.target is not None and not planned),
                ("target_variance", self.target_variance is not None and plan != "budget"),
                ("pseudo_users", self.pseudo_users and planned),
                ("split", self.split != "equal" and planned),
                ("error_bound", self.error_bound is not None and plan == "hierarchy"),
                ("profile", self.profile is not None and plan != "hierarchy")]
        given = [n for n, on in idle if on]
        if given:
            why = {"target": " (`target` is an option of plan='budget' or 'hierarchy')",
                   "profile": " (`profile` is an option of plan='hierarchy')"}.get(given[0].split("_")[0], "")
            raise DpoptInputError(f"`{given[0]}` does nothing with {name}: drop it" + why)
        return dataclasses.replace(self, plan=plan)


# ----------------------------------------------------------------------------------------------
# 2. planning


def plan_release(agg: Aggregate, budget: PrivacyBudget, options: "PublicOccupancyOptions", *, bound: float,
                 confidence: float = 0.95, progress: bool = False) -> GridPlan:
    """A :class:`GridPlan` from the public occupancy array of ``agg`` only (:mod:`.planners`).

    The budget: ``budget.per_grid`` (the seeds' mode), or a total that the plan spends: the budget
    planner (``plan="budget"``, :func:`dpopt.budget.plan_budget`), or BASELINE / CLIP-USER / the
    MILP made at b₀ = B/G₁ per grid and then given B/K per grid (:func:`.planners.rebudget`).
    """
    o = options
    plan = check_choice(default_plan(o.plan, budget), "plan", PLANS)
    occ = agg.occupancy()
    if plan == "budget":
        return _budget_plan(occ, budget, bound, o, confidence=confidence, progress=progress)
    if o.target is not None or o.target_variance is not None:
        raise DpoptInputError(f"`target` is an option of plan='budget'; got plan={plan!r}")
    per_grid = budget.per_grid if budget.per_grid is not None else per_grid_budget(budget.total, occ.degradation)
    kw: dict[str, Any] = {"split": o.split, "error_bound": o.error_bound, "mechanism": budget.mechanism}
    if plan == "milp":
        kw["time_limit"] = o.time_limit
    result = PLANNERS[plan](occ, bound, per_grid, **kw)
    if o.pseudo_users:
        result = pseudo_user_plan(result, occ, bound, per_grid, split=o.split)
    if budget.per_grid is None and result.degradation > 0:  # spend the total: B/K per grid
        result = rebudget(result, occ, bound, per_grid_budget(budget.total, result.degradation), split=o.split)
    return result


def default_plan(plan: Any, budget: PrivacyBudget) -> Any:
    """The plan when none is named: the budget planner for a total budget, BASELINE per grid."""
    if plan is not None:
        return plan
    return "baseline" if budget.per_grid is not None else "budget"


def _budget_plan(occ: Any, budget: PrivacyBudget, bound: float, o: "PublicOccupancyOptions", *,
                 confidence: float, progress: bool) -> GridPlan:
    """The budget planner's GridPlan (its BudgetPlan kept in ``plan.info["budget_plan"]``)."""
    from ..budget import GaussianNoise, LaplaceNoise, plan_budget

    if budget.total is None:
        raise DpoptInputError("plan='budget' spends a total budget: give `epsilon_total` (or `rho`), not "
                              f"the per-grid `epsilon` = {budget.per_grid!r}")
    if o.pseudo_users:
        raise DpoptInputError("plan='budget' chooses the per-grid caps itself: drop `pseudo_users`")
    noise = LaplaceNoise() if budget.mechanism == "laplace" else GaussianNoise()
    result = plan_budget(occ, bound, budget.total, target=o.target, target_variance=o.target_variance,
                         criterion=o.criterion, confidence=confidence, noise=noise,
                         time_limit=DEFAULT_BUDGET_TIME_LIMIT if o.time_limit is None else o.time_limit,
                         progress=progress, frontier=True)  # the published frontier, inside time_limit
    frontier = result.frontier()
    return dataclasses.replace(result.plan, info={**result.plan.info, "budget_plan": result, "frontier": frontier})


def pair_retained(agg: Aggregate, plan: GridPlan) -> np.ndarray:
    """Γ of every pair of ``agg`` from the plan (rows/columns = the aggregate's user/grid indices)."""
    if plan.retained.shape != (agg.n_users, agg.n_grids):
        raise DpoptInputError(
            f"`plan` is for {plan.retained.shape} users x grids; the aggregate has "
            f"{(agg.n_users, agg.n_grids)}"
        )
    if agg.n_pairs == 0:  # e.g. a hierarchy plan that publishes no node (sparse indexing by [] is no array)
        return np.zeros(0, dtype=np.int64)
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


def _check_noise_options(bound: float, budget: PrivacyBudget, noise: str, granularity_bits: int) -> int:
    """Noise options, before any data is read; returns k of λ = 2^-k."""
    noise = check_choice(noise, "noise", NOISES)
    if noise == "discrete" and budget.per_grid is not None and budget.per_grid < 2.0**-29:
        raise DpoptInputError(
            f"`epsilon` must be >= 2^-29 (about {2.0**-29:.3g}) for the discrete sampler, which gives "
            f"each grid's mean and variance a budget of at least 2^-30; got {budget.per_grid!r}"
        )
    k = check_granularity_bits(granularity_bits)
    # the variance's sensitivity U²/4 on the lattice: below 2^62 for the discrete Laplace, and below
    # 2^53 for the discrete Gaussian, whose sampler takes it as an exact float integer
    top, widest = (54, "1e10") if budget.mechanism == "gaussian" else (60, "1e12")
    if bound * bound * 2.0**k > 2.0**top:
        raise DpoptInputError(
            f"the value range {bound:g} does not fit the exact lattice 2^{-k}: U²·2^k must stay below 2^{top}; "
            f"express the values in a unit where the range is below {widest} (or use granularity_bits <= "
            f"{math.floor(top - 2 * math.log2(bound))})"
        )
    return k


def _check_plan_budgets(plan: GridPlan, budget: PrivacyBudget) -> None:
    """The plan's budgets fit what the data holder allowed, so the published totals bound every
    user's loss: per-grid mode, b_μ + b_Var ≤ ε in every released grid (seed 002 Thm II.3); total
    mode, every user's exact spend (the samplers' rounded budgets, summed in integers) ≤ the total."""
    if plan.unit != budget.unit:
        raise DpoptInputError(f"`plan` budgets are in {plan.unit!r}; {budget.mechanism} noise needs {budget.unit!r}")
    if budget.per_grid is not None:
        eps = budget.per_grid
        over = np.flatnonzero(np.asarray(plan.released, dtype=bool) & (plan.budget > eps * (1 + 1e-12)))
        if over.size:
            g = int(over[0])
            raise DpoptInputError(
                f"`plan` gives grid {g} a budget {plan.budget[g]:.6g} above `epsilon` = {eps:g}: a per-grid "
                "release needs budget_mean + budget_variance <= epsilon in every released grid"
            )
        return
    spend = exact_user_spend(plan)
    if spend.size and spend.max() > budget.total:
        raise DpoptInputError(
            f"`plan` spends {spend.max():.10g} {budget.unit} for user {int(spend.argmax())}, above the total "
            f"{budget.total:.10g}: a total-budget release needs every user's spend <= the total"
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


def to_privacy_budget(budget: Budget | PerGridBudget) -> PrivacyBudget:
    """The model's validated :class:`PrivacyBudget` of a front-door budget."""
    if isinstance(budget, PerGridBudget):
        return resolve_budget(epsilon=budget.epsilon)
    if isinstance(budget, Budget):
        return resolve_budget(epsilon_total=budget.epsilon_total, rho=budget.rho, delta=budget.delta,
                              mechanism=budget.mechanism)
    if isinstance(budget, PrivacyBudget):
        return budget
    raise DpoptInputError(f"`budget` must be a Budget or a PerGridBudget; got {type(budget).__name__}")


def _plan(agg: Aggregate, pb: PrivacyBudget, o: PublicOccupancyOptions, U: float, confidence: float,
          progress: bool) -> GridPlan:
    bar = progress_bar(progress and o.plan in ("greedy", "milp"), 1, desc=f"plan ({o.plan})", unit=" plan")
    plan = plan_release(agg, pb, o, bound=U, confidence=confidence, progress=progress)
    if bar is not None:
        bar.update(1)
        bar.close()
    return plan


def _release_grids(st: RetainedStats, plan: GridPlan, bound: float, sampler: Noise, *,
                   progress: bool) -> GridRelease:
    """The CLIP mechanism in every grid with the plan's budgets (unit checked against the noise)."""
    if plan.unit != sampler.unit:
        raise DpoptInputError(f"`plan` budgets are in {plan.unit!r}; {sampler.mechanism} noise needs {sampler.unit!r}")
    bar = progress_bar(progress and sampler.sampler == "discrete", 2 * st.retained.size, desc="noise", unit=" draws")
    try:
        return release_grids(
            retained=st.retained, retained_max=st.retained_max, sums=st.sum, sums_of_squares=st.sumsq,
            bound=bound, budget_mean=plan.budget_mean, budget_variance=plan.budget_variance,
            noise=sampler, released=plan.released, callback=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()


def _grid_max(agg: Aggregate) -> np.ndarray:
    out = np.zeros(agg.n_grids, dtype=np.int64)
    np.maximum.at(out, agg.pair_grid, agg.count)
    return out


# ----------------------------------------------------------------------------------------------
# 4. the model's output: Measurements


@dataclass(frozen=True, eq=False)
class MeasuredRelease:
    """What :func:`measure_release` returns: the ``measurements`` (everything the estimation layer
    and the published files read) and, for the data holder only — never published, never passed to
    estimation — the ``contributions`` measured (the published nodes' under plan="hierarchy"; the
    kept and suppressed pairs of diagnostics/ are read from them), the mechanism's ``grids``
    (:class:`GridRelease`, which holds the statistics before noise) and ``timings`` (s)."""

    measurements: Measurements
    contributions: Aggregate
    grids: GridRelease
    timings: dict[str, float]


def measure_release(agg: Aggregate, budget: Budget | PerGridBudget | PrivacyBudget,
                    options: PublicOccupancyOptions = PublicOccupancyOptions(), *, bound: float | None = None,
                    noise: NoiseOptions = NoiseOptions(), confidence: float = 0.95,
                    truncated_sums: TruncatedSums | None = None, timings: dict[str, float] | None = None,
                    progress: bool = False) -> MeasuredRelease:
    """Plan, then the CLIP mechanism in every grid (module doc, steps 1–4).

    ``bound`` defaults to the U the aggregate was clipped with and must equal it when given;
    ``options.plan`` is a planner name or a ready :class:`GridPlan` for this aggregate (budgets in
    the noise's unit, within the given budget); ``confidence`` is the planners' (their targets hold
    at it). The error bounds are not computed here: :func:`dpopt.estimation.direct.direct` derives
    them from the Measurements.
    """
    U = _aggregate_bound(agg, bound)
    pb = to_privacy_budget(budget)
    o = options.for_plan(default_plan(options.plan, pb))
    confidence = check_confidence(confidence)
    k = _check_noise_options(U, pb, noise.noise, noise.bits_for(U))
    if o.plan == "hierarchy":  # plan the public hierarchy, then this function on its published nodes
        return _measure_hierarchy(agg, pb, o, bound=U, noise=noise, confidence=confidence,
                                  truncated_sums=truncated_sums, timings=timings, progress=progress)
    timings = dict(timings or {})
    t0 = time.perf_counter()
    plan = o.plan if isinstance(o.plan, GridPlan) else _plan(agg, pb, o, U, confidence, progress)
    timings["plan"] = time.perf_counter() - t0
    _check_plan_budgets(plan, pb)
    gamma = pair_retained(agg, plan)
    t0 = time.perf_counter()
    st = retained_statistics(agg, gamma, truncated_sums)
    timings["statistics"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sampler = make_noise(pb.mechanism, sampler=noise.noise, seed=noise.seed, granularity_bits=k)
    rel = _release_grids(st, plan, U, sampler, progress=progress)
    timings["noise"] = time.perf_counter() - t0
    m = _measurements(agg, st, plan, rel, bound=U, budget=pb, sampler=sampler, criterion=o.criterion)
    facts = _summary_facts(agg, plan, gamma, bound=U, budget=pb, spend=m.spend, split=o.split, sampler=sampler,
                           seeded=noise.seed is not None)
    m = dataclasses.replace(m, info=dataclasses.replace(m.info, summary=facts))
    return MeasuredRelease(measurements=m, contributions=agg, grids=rel, timings=timings)


def measure(contributions: Aggregate, budget: Budget | PerGridBudget,
            options: PublicOccupancyOptions = PublicOccupancyOptions(), *, bound: float | None = None,
            noise: NoiseOptions = NoiseOptions(), confidence: float = 0.95,
            truncated_sums: TruncatedSums | None = None) -> Measurements:
    """The ``public-occupancy`` model's :class:`Measurements` (:func:`measure_release`)."""
    return measure_release(contributions, budget, options, bound=bound, noise=noise, confidence=confidence,
                           truncated_sums=truncated_sums).measurements


def _measure_hierarchy(agg: Aggregate, pb: PrivacyBudget, o: PublicOccupancyOptions, *, bound: float,
                       noise: NoiseOptions, confidence: float, truncated_sums: TruncatedSums | None,
                       timings: dict[str, float] | None, progress: bool) -> MeasuredRelease:
    """plan="hierarchy" (:mod:`.hierarchy_release`): plan the public hierarchy, then
    :func:`measure_release` on the published nodes with that plan as a ready GridPlan; the node
    table at the nodes' own resolutions, the finest grids with their answering node, the hierarchy
    tables and the coverage facts join the Measurements."""
    from .hierarchy_release import prepare_hierarchy

    t0 = time.perf_counter()
    prep = prepare_hierarchy(agg, pb, bound=bound, target=o.target, criterion=o.criterion, confidence=confidence,
                             time_limit=o.time_limit, profile=o.profile)
    timings = {**(timings or {}), "plan": time.perf_counter() - t0}
    run = measure_release(prep.aggregate, pb, PublicOccupancyOptions(plan=prep.plan, criterion=o.criterion),
                          bound=bound, noise=noise, confidence=confidence,
                          truncated_sums=prep.truncated_sums(truncated_sums, SampleKey.from_seed(noise.seed).generator()),
                          timings=timings, progress=progress)
    m, tables = run.measurements, prep.tables
    info = dataclasses.replace(m.info, summary={**m.info.summary, **prep.summary_fields()}, hierarchy=tables)
    m = dataclasses.replace(m, nodes=tables["nodes"][[*NODE_COLUMNS, "cycle_ns"]].reset_index(drop=True),
                            finest=tables["finest"], info=info)
    return dataclasses.replace(run, measurements=m)


def _measurements(agg: Aggregate, st: RetainedStats, plan: GridPlan, rel: GridRelease, *, bound: float,
                  budget: PrivacyBudget, sampler: Noise, criterion: str) -> Measurements:
    """Per grid: the noisy CLIP mean and variance (eq. (8)) with their exact noise laws and
    worst-case clipping-bias bounds (seed 002 eq. (11)-(13), from the public N_g and R_g); what is
    public (counts, sensitivities, the plan's budgets, the sampler's E|noise|); the exact spend."""
    n = agg.n_grids
    nodes = pd.DataFrame({"cell": np.asarray(agg.cells, dtype=np.int64), "h3_resolution": agg.h3_resolution,
                          "slot": np.asarray(agg.slots, dtype=np.int64), "slot_ns": agg.slot_ns,
                          "parent": np.full(n, -1, dtype=np.int64)})
    finest = nodes[["cell", "slot", "slot_ns"]].assign(node=np.arange(n, dtype=np.int64))
    family = ("discrete_" if sampler.granularity > 0 else "") + budget.mechanism
    N = agg.grid_records()
    stats = {
        "mean": Statistic("mean", rel.mean, NoiseLaw(family, rel.mean_noise_scale, sampler.granularity),
                          mean_bias_from_totals(N, st.retained, bound)),
        "variance": Statistic("variance", rel.variance, NoiseLaw(family, rel.variance_noise_scale, sampler.granularity),
                              variance_bias_from_totals(N, st.retained, bound)),
    }
    length = plan.array_length if plan.array_length is not None else np.full(n, -1)
    public = pd.DataFrame({
        "n_users": agg.grid_users(), "n_records": N, "max_user_records": _grid_max(agg),
        "n_users_retained": st.users, "n_records_retained": st.retained, "released": rel.released,
        "mean_sensitivity": rel.mean_sensitivity, "variance_sensitivity": rel.variance_sensitivity,
        "budget_mean": rel.budget_mean, "budget_variance": rel.budget_variance,
        "budget": np.where(rel.released, rel.budget_mean + rel.budget_variance, np.nan),
        "noise_abs": rel.noise_abs, "array_length": length,
    })
    spend, user_spend = _spend(plan, budget)
    info = PublicOccupancyInfo(plan=plan, criterion=criterion, user_spend=user_spend, mechanism=budget.mechanism)
    return Measurements(privacy_model="public-occupancy", bound=bound, nodes=nodes, statistics=stats, spend=spend,
                        public=public, finest=finest, info=info)


def _spend(plan: GridPlan, budget: PrivacyBudget) -> tuple[BudgetSpend, np.ndarray]:
    """The exact budget spent: every user's spend recounted from the plan's retained counts and the
    samplers' rounded budgets (:func:`.budgets.exact_user_spend`), and the release's total — per-grid
    mode K·ε (seed 002 Thm II.3, an upper bound of the exact spend, and never below it: the 1e-12
    tolerance of the plan check could exceed it); total mode the largest exact spend (Laplace), or
    ρ with the (ε, δ) it implies (CKS 2020 Cor. 13; None without δ)."""
    per_user = exact_user_spend(plan) if plan.n_users else np.zeros(0)
    spend = float(per_user.max()) if plan.n_users else 0.0
    eps = budget.per_grid
    if budget.mechanism == "laplace":
        epsilon_total = max(plan.degradation * eps, spend) if eps is not None else spend
        return BudgetSpend("epsilon", float(epsilon_total), {}, 0.0, epsilon_total), per_user
    from ..accounting import zcdp_epsilon

    epsilon_total = zcdp_epsilon(spend, budget.delta) if budget.delta is not None and spend > 0 else None
    return BudgetSpend("rho", spend, {}, float(budget.delta or 0.0), epsilon_total), per_user


def _summary_facts(agg: Aggregate, plan: GridPlan, gamma: np.ndarray, *, bound: float, budget: PrivacyBudget,
                   spend: BudgetSpend, split: str, sampler: Noise, seeded: bool) -> dict[str, Any]:
    """The summary's fields this model states (:class:`dpopt.writers.public_occupancy_result.ReleaseSummary`):
    public parameters, counts of the public occupancy and the plan, the spend. The error bounds
    are the estimation layer's, the ingest counts the records layer's."""
    G1 = int(agg.user_grids().max()) if agg.n_users else 0
    suppressed = gamma == 0
    suppressed_records = int(agg.count[suppressed].sum())
    eps = budget.per_grid
    bp = plan.info.get("budget_plan")
    rho = spend.total if spend.unit == "rho" else None
    return dict(
        privacy_model=PRIVACY_MODEL, privacy_model_description=PRIVACY_MODEL_SUMMARY,
        mechanism=budget.mechanism, budget_mode=budget.mode, budget=budget.describe(),
        users=agg.n_users, grids=agg.n_grids, records=agg.n_records, pairs=agg.n_pairs,
        plan=plan.method, plan_status=str(plan.status), plan_gap=float(plan.gap),
        pseudo_users=plan.array_length is not None and not plan.method.startswith(("budget", "hierarchy")),
        degradation=plan.degradation, degradation_baseline=G1,
        epsilon=eps, epsilon_total=spend.epsilon, rho_total=rho, delta=budget.delta,
        epsilon_total_baseline=G1 * eps if eps is not None else None,
        epsilon_basic_composition=agg.n_grids * eps if eps is not None else None,
        error_bound_target=float(plan.error_bound) if plan.error_bound is not None else float("nan"),
        target=float(bp.target.max()) if bp is not None and np.ptp(bp.target) == 0 else None,
        grids_within_target=int(bp.within_target.sum()) if bp is not None else None,
        frontier=plan.info["frontier"].as_dict() if "frontier" in plan.info else None,
        suppressed_pairs=int(suppressed.sum()), suppressed_records=suppressed_records,
        truncated_records=int(agg.count.sum() - gamma.sum()) - suppressed_records,
        withheld_grids=int((~np.asarray(plan.released, dtype=bool)).sum()),
        bound=bound, h3_resolution=agg.h3_resolution, slot=slot_text(agg.slot_ns), split=split,
        noise=sampler.label, granularity=sampler.granularity, seeded=seeded,
    )
