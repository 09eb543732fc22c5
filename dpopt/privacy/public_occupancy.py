"""The ``public-occupancy`` privacy model (seed 002 §II-B, §III-B, §V): contributions → plan →
CLIP mechanism per grid, one function per step, read top to bottom:

1. :func:`plan_release` — a :class:`~dpopt.plan.GridPlan` from the public counts only
   (:mod:`.planners`: BASELINE, CLIP-USER, the MILP, the total-budget planner; optionally
   pseudo-user clipping);
2. :func:`release_aggregate` — the plan's retained statistics per grid, then the CLIP mechanism
   (8) in every grid (:func:`dpopt.mechanisms.release_grids`) with noise from :mod:`dpopt.noise`
   (exact discrete Laplace or Gaussian on 2^-k with the OS CSPRNG for real releases);
3. accounting by seed 002 Theorem II.3 / Proposition V.1, recounted from the plan's retained
   counts (:attr:`GridPlan.degradation`, :attr:`GridPlan.total_cost`), and the summary;
4. :meth:`ReleaseResult.measurements` / :func:`measure` — the release as
   :class:`~dpopt.measurements.Measurements` (statistics ``mean`` and ``variance`` with their noise
   laws and clipping-bias bounds, the public counts) for the estimation layer.

Options: :class:`PublicOccupancyOptions` (this model's only: the user model cannot receive them).
Privacy model ``public-occupancy``: the occupancy array (which user has how many records in which
grid) is public (seed 002 §II-C), so ``n_users`` and ``n_records`` per grid and the suppressed
pairs are released without noise. If the occupancy is itself sensitive, this pipeline is not the
right tool (see models/release.md).
"""

from __future__ import annotations

import time
import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float, check_positive_int
from ..calculus import mean_bias_from_totals, variance_bias_from_totals
from ..mechanisms.grid import GridRelease, release_grids
from ..noise import Noise, make_noise
from ..plan import GridPlan
from ..measurements import NODE_COLUMNS, BudgetSpend, Measurements, NoiseLaw, Statistic
from ..records.aggregate import Aggregate, RetainedStats
from ..records.grid import cell_centres, slot_text
from ..records.ingest import IngestReport
from .contributions import TruncatedSums, progress_bar
from .model_text import PRIVACY_MODEL, PRIVACY_MODEL_SUMMARY, VALUE_DEPENDENT_INGEST
from .options import Budget, NoiseOptions, PerGridBudget, check_confidence
from .budgets import PrivacyBudget, exact_user_spend, per_grid_budget, resolve_budget
from .planners import PLANNERS, SPLITS, pseudo_user_plan, rebudget

__all__ = [
    "PLANS",
    "PRIVACY_MODEL",
    "ReleaseSummary",
    "ReleaseResult",
    "PublicOccupancyOptions",
    "plan_release",
    "release_aggregate",
    "measure",
    "to_privacy_budget",
]

#: the plans: the seed-002 planners and the total-budget planner (issue 13)
PLANS = (*PLANNERS, "budget", "hierarchy")
#: seconds the budget planner may take when no `time_limit` is given
DEFAULT_BUDGET_TIME_LIMIT = 25.0
CRITERIA = ("noise", "worst_case")
NOISES = ("discrete", "numpy")


@dataclass(frozen=True)
class PublicOccupancyOptions:
    """Options of the ``public-occupancy`` model (validated on construction).

    ``plan`` "budget" (the total-budget planner, default with a total budget), "baseline" (default
    with a per-grid ε), "greedy" (CLIP-USER), "milp", or a ready :class:`GridPlan`; ``pseudo_users``
    pseudo-user clipping after the plan (eq. (15)); ``error_bound`` E every grid must meet;
    ``split`` of each grid's budget between mean and variance; ``time_limit`` seconds of planning;
    ``target``, ``target_variance`` τ of the budget planner; ``criterion`` of the published error
    bounds ("noise" or "worst_case", also the budget planner's).
    """

    plan: Any = None
    pseudo_users: bool = False
    error_bound: float | None = None
    split: str = "equal"
    time_limit: float | None = None
    target: Any = None
    target_variance: Any = None
    criterion: str = "noise"

    def __post_init__(self) -> None:
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

    def for_plan(self, plan: Any) -> PublicOccupancyOptions:
        """These options with ``plan`` filled in (the default for the budget); an option that would
        do nothing under that plan is refused (issue 22 item 7)."""
        name = "a ready GridPlan" if isinstance(plan, GridPlan) else f"plan={plan!r}"
        planned = plan in ("budget", "hierarchy")
        idle = [("target", self.target is not None and not planned),
                ("target_variance", self.target_variance is not None and plan != "budget"),
                ("pseudo_users", self.pseudo_users and planned),
                ("split", self.split != "equal" and planned),
                ("error_bound", self.error_bound is not None and plan == "hierarchy")]
        given = [n for n, on in idle if on]
        if given:
            raise DpoptInputError(f"`{given[0]}` does nothing with {name}: drop it"
                                  + (" (`target` is an option of plan='budget' or 'hierarchy')" if "target" in given[0] else ""))
        return dataclasses.replace(self, plan=plan)


@dataclass(frozen=True)
class ReleaseSummary:
    """Headline numbers of a release (written to summary.json): all public by the privacy model or
    computed from DP outputs and public counts (no timings, no value-dependent counts).

    ``privacy_model`` "public-occupancy" with ``privacy_model_description`` in plain words.
    ``mechanism`` "laplace" (pure ε-DP) or "gaussian" (ρ-zCDP); ``budget_mode`` "per-grid" (the
    seeds' ε per grid) or "total"; ``budget`` the budget in words.
    ``degradation`` K = max_ℓ (released grids ℓ is kept in) after the plan.
    ``epsilon`` the per-grid ε (per-grid mode; else None). ``epsilon_total``: per-grid mode K·ε
    (seed 002 Thm II.3); total mode, Laplace: the largest exact spend of any user (the samplers'
    rounded budgets summed); Gaussian: the (ε, δ) that ``rho_total`` implies (CKS 2020 Cor. 13; None
    without δ). ``rho_total`` the largest ρ any user spends (Gaussian). ``delta`` δ (Gaussian).
    ``degradation_baseline`` G₁, ``epsilon_total_baseline`` = G₁·ε and ``epsilon_basic_composition``
    = G·ε (Thm II.2) in per-grid mode, for comparison.
    ``error_bound`` the largest per-grid worst-case error E = max_g E_g over released grids (bias +
    expected |noise| at the plan's budgets, eq. (11)-(13)); ``error_bound_target`` the E the plan
    had to meet; ``error_bound_released`` the same with the sampler's actual noise.
    ``criterion`` and ``confidence`` of the per-grid ``mean_error_bound``/``variance_error_bound``
    of release.csv; ``released_grids``; ``target`` τ, ``grids_within_target`` and ``frontier``
    (coverage against τ, from public counts only) of the budget plan.
    ``ingest`` the value-independent ingestion counts.
    """

    privacy_model: str
    privacy_model_description: str
    mechanism: str
    budget_mode: str
    budget: str
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
    epsilon: float | None
    epsilon_total: float | None
    rho_total: float | None
    delta: float | None
    epsilon_total_baseline: float | None
    epsilon_basic_composition: float | None
    error_bound: float
    error_bound_target: float
    error_bound_released: float
    criterion: str
    confidence: float
    released_grids: int
    target: float | None
    grids_within_target: int | None
    frontier: dict[str, Any] | None
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
    #: plan="hierarchy" only (None otherwise): occupied finest grids, those answered by a published
    #: node within τ, those answered by none, the levels [(H3 resolution, slot ns; 0 = period)],
    #: and the planner's fallback (least τ per level over the unanswered grids)
    finest_grids: int | None = None
    answered_grids: int | None = None
    uncovered_grids: int | None = None
    levels: list[Any] | None = None
    fallback: dict[str, Any] | None = None

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
    #: per statistic and criterion, the half-widths of :func:`confidence_bounds`
    error_bounds: dict[str, np.ndarray] = field(default_factory=dict)

    def measurements(self) -> Measurements:
        """This release as :class:`Measurements`: per grid the noisy (raw) ``mean`` and
        ``variance`` with their noise laws and worst-case clipping-bias bounds; ``public`` the
        public counts; ``info`` the plan, the criterion, confidence and error bounds."""
        return _measurements(self)

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
    k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    if k > 40:
        raise DpoptInputError(f"`granularity_bits` must be an integer in 0..40; got {granularity_bits!r}")
    if bound * bound * 2.0**k > 2.0**60:
        raise DpoptInputError(
            f"`granularity_bits` = {k} is too fine for bound {bound:g}: U²·2^k must stay below 2^60 "
            f"(use granularity_bits <= {max(0, int(60 - 2 * np.log2(bound)))})"
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


def _mean_abs_factor(mechanism: str) -> float:
    """E|X|/scale of the noise: 1 for Laplace (scale b), √(2/π) for Gaussian (scale σ)."""
    return 1.0 if mechanism == "laplace" else float(np.sqrt(2.0 / np.pi))


def grid_error_bounds(agg: Aggregate, st: RetainedStats, rel: GridRelease, bound: float,
                      mechanism: str = "laplace") -> tuple[np.ndarray, np.ndarray]:
    """Per grid, seed 002's worst-case error E_g = biases + E|noise of μ| + E|noise of Var|
    (eq. (11)-(13) with the plan's budgets: Laplace Δ/ε, Gaussian √(2/π)·Δ/√(2ρ)) and the same with
    the sampler's actual E|noise| and rounding (inf: withheld)."""
    N = agg.grid_records()
    bias = mean_bias_from_totals(N, st.retained, bound) + variance_bias_from_totals(N, st.retained, bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        if mechanism == "laplace":
            scale_mu = rel.mean_sensitivity / rel.budget_mean
            scale_var = rel.variance_sensitivity / rel.budget_variance
        else:
            scale_mu = rel.mean_sensitivity / np.sqrt(2.0 * rel.budget_mean)
            scale_var = rel.variance_sensitivity / np.sqrt(2.0 * rel.budget_variance)
    noise = _mean_abs_factor(mechanism) * (np.nan_to_num(scale_mu) + np.nan_to_num(scale_var))
    ok = rel.released
    return np.where(ok, bias + noise, np.inf), np.where(ok, bias + rel.noise_abs, np.inf)


def confidence_bounds(agg: Aggregate, st: RetainedStats, rel: GridRelease, bound: float, sampler: Noise, *,
                      confidence: float) -> dict[str, np.ndarray]:
    """Per grid and statistic, bounds on |released − statistic| holding with probability ≥ q each.

    ``noise``: the q-quantile of |noise| at the scale actually drawn (Laplace: b·ln(1/(1 − q));
    Gaussian: σ·Φ⁻¹((1 + q)/2)) plus, for the exact samplers on λ·ℤ, a slack that makes it a bound
    for the lattice noise and the output rounding (λ/2):

    * discrete Laplace, r = e^{−1/s} (s the scale in grid units), y₀ = s·ln(1/(1 − q)):
      P(|Z| > y₀ + ½) = 2r^{⌊y₀+½⌋+1}/(1 + r) ≤ r^{y₀}·2√r/(1 + r) ≤ r^{y₀} = 1 − q (AM–GM), so
      |released − f| ≤ λ(y₀ + ½) + λ/2 = λy₀ + λ;
    * discrete Gaussian, y₀ = σ_Z·Φ⁻¹((1 + q)/2): for k ≥ 1, Σ_{z≥k} e^{−z²/2σ²} ≤ ∫_{k−1}^∞ and the
      normaliser Σ_z e^{−z²/2σ²} ≥ √(2π)σ (Poisson summation), so P(|Z| ≥ k) ≤ P(|N| ≥ k − 1) and
      P(|Z| > y₀ + 1) ≤ P(|N| ≥ ⌊y₀ + 1⌋) ≤ 1 − q: |released − f| ≤ λy₀ + λ + λ/2.

    This bounds the error against the statistic of the kept records. ``worst_case``: that plus the
    worst-case clipping bias of the kept set against the statistic of all records (seed 002
    Thm IV.1, Thm IV.2 corrected by ERRATA E1) — it holds for any data.
    """
    from ..budget.noise import GaussianNoise, LaplaceNoise

    q = check_confidence(confidence)
    factor = (LaplaceNoise if sampler.mechanism == "laplace" else GaussianNoise).factor(q)
    slack = sampler.granularity * (1.0 if sampler.mechanism == "laplace" else 1.5)  # 0 for numpy
    N = agg.grid_records()
    ok = rel.released
    out: dict[str, np.ndarray] = {}
    for stat, scale, bias in (
        ("mean", rel.mean_noise_scale, mean_bias_from_totals(N, st.retained, bound)),
        ("variance", rel.variance_noise_scale, variance_bias_from_totals(N, st.retained, bound)),
    ):
        noise = np.nan_to_num(scale) * factor + slack
        out[f"{stat}_noise"] = np.where(ok, noise, np.nan)
        out[f"{stat}_worst_case"] = np.where(ok, noise + bias, np.nan)
    return out


def _check_error_bound(errors: np.ndarray, error_bound: float | None, plan: GridPlan, agg: Aggregate,
                       bound: float) -> None:
    worst = float(np.max(errors)) if errors.size else 0.0
    if error_bound is not None and worst > float(error_bound) * (1 + 1e-9):
        raise DpoptInputError(
            f"`error_bound` = {float(error_bound):g} cannot be met: plan {plan.method!r} "
            f"(status {plan.status}) leaves a grid with worst-case error {worst:.6g}; raise the error "
            "bound or omit it (default: BASELINE's largest grid error)"
        )


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


def release_aggregate(agg: Aggregate, budget: Budget | PerGridBudget | PrivacyBudget,
                      options: PublicOccupancyOptions = PublicOccupancyOptions(), *, bound: float | None = None,
                      noise: NoiseOptions = NoiseOptions(), confidence: float = 0.95,
                      ingest: IngestReport | None = None, truncated_sums: TruncatedSums | None = None,
                      timings: dict[str, float] | None = None, progress: bool = False) -> ReleaseResult:
    """Plan and release from an existing contributions table (module doc).

    ``bound`` defaults to the U the aggregate was clipped with and must equal it when given;
    ``options.plan`` is a planner name or a ready :class:`GridPlan` for this aggregate (budgets in
    the noise's unit, within the given budget). :meth:`ReleaseResult.measurements` gives the
    :class:`~dpopt.measurements.Measurements` of the release.
    """
    U = _aggregate_bound(agg, bound)
    pb = to_privacy_budget(budget)
    o = options.for_plan(default_plan(options.plan, pb))
    confidence = check_confidence(confidence)
    k = _check_noise_options(U, pb, noise.noise, noise.granularity_bits)
    if o.plan == "hierarchy":  # plan the public hierarchy, then this function on its published nodes
        return _release_hierarchy(agg, pb, o, bound=U, noise=noise, confidence=confidence, ingest=ingest,
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
    errors, released_errors = grid_error_bounds(agg, st, rel, U, pb.mechanism)
    _check_error_bound(errors, o.error_bound, plan, agg, U)
    bounds = confidence_bounds(agg, st, rel, U, sampler, confidence=confidence)
    table = release_table(agg, st, plan, rel, errors, bounds, bound=U, criterion=o.criterion)
    ingest = ingest or IngestReport()
    summary = _release_summary(agg, ingest, plan, gamma, errors, released_errors, bounds, bound=U, budget=pb,
                              split=o.split, sampler=sampler, seeded=noise.seed is not None, criterion=o.criterion,
                              confidence=confidence)
    diagnostics = {"timings": {key: round(v, 4) for key, v in timings.items()}, "ingest": ingest.as_dict()}
    return ReleaseResult(table=table, summary=summary, ingest=ingest, aggregate=agg, plan=plan, grids=rel,
                         diagnostics=diagnostics, error_bounds=bounds)


def _release_hierarchy(agg: Aggregate, pb: PrivacyBudget, o: PublicOccupancyOptions, *, bound: float,
                       noise: NoiseOptions, confidence: float, ingest: IngestReport | None,
                       truncated_sums: TruncatedSums | None, timings: dict[str, float] | None,
                       progress: bool) -> ReleaseResult:
    """plan="hierarchy" (:mod:`.hierarchy_release`): plan the public hierarchy, then
    :func:`release_aggregate` on the published nodes with that plan as a ready GridPlan; the table
    gains each node's ``slot_end``, ``h3_resolution``, ``level``, the summary the coverage."""
    from .hierarchy_release import prepare_hierarchy

    t0 = time.perf_counter()
    prep = prepare_hierarchy(agg, pb, bound=bound, target=o.target, criterion=o.criterion, confidence=confidence,
                             time_limit=o.time_limit)
    timings = {**(timings or {}), "plan": time.perf_counter() - t0}
    r = release_aggregate(prep.aggregate, pb, PublicOccupancyOptions(plan=prep.plan, criterion=o.criterion),
                          bound=bound, noise=noise, confidence=confidence, ingest=ingest,
                          truncated_sums=prep.truncated_sums(truncated_sums), timings=timings, progress=progress)
    summary = dataclasses.replace(r.summary, **prep.summary_fields())
    return dataclasses.replace(r, table=prep.table(r.table), summary=summary)


def _plan(agg: Aggregate, pb: PrivacyBudget, o: PublicOccupancyOptions, U: float, confidence: float,
          progress: bool) -> GridPlan:
    bar = progress_bar(progress and o.plan in ("greedy", "milp"), 1, desc=f"plan ({o.plan})", unit=" plan")
    plan = plan_release(agg, pb, o, bound=U, confidence=confidence, progress=progress)
    if bar is not None:
        bar.update(1)
        bar.close()
    return plan


def measure(contributions: Aggregate, budget: Budget | PerGridBudget,
            options: PublicOccupancyOptions = PublicOccupancyOptions(), *, bound: float | None = None,
            noise: NoiseOptions = NoiseOptions(), confidence: float = 0.95,
            truncated_sums: TruncatedSums | None = None) -> Measurements:
    """The ``public-occupancy`` model's :class:`Measurements` (:func:`release_aggregate`)."""
    return release_aggregate(contributions, budget, options, bound=bound, noise=noise, confidence=confidence,
                             truncated_sums=truncated_sums).measurements()


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


def release_table(agg: Aggregate, st: RetainedStats, plan: GridPlan, rel: GridRelease, errors: np.ndarray,
                  bounds: dict[str, np.ndarray], *, bound: float, criterion: str) -> pd.DataFrame:
    """One row per grid: public counts, released values (post-processed into [0, U] and
    [0, U²/4], raw beside them), error bounds, sensitivities, budgets, noise scales.

    Budget columns are named after the unit: ``epsilon``, ``epsilon_mean``, ``epsilon_variance``
    (Laplace) or ``rho``, ``rho_mean``, ``rho_variance`` (Gaussian, zCDP).
    """
    cells, slots = agg.grid_labels()
    lat, lng = cell_centres(agg.cells)
    length = plan.array_length if plan.array_length is not None else np.full(agg.n_grids, -1)
    unit = rel.unit
    other = "worst_case" if criterion == "noise" else "noise"
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
        "released": rel.released,
        # post-processing of DP outputs into the valid ranges (no privacy cost); raw kept beside
        "mean": np.clip(rel.mean, 0.0, bound),
        "variance": np.clip(rel.variance, 0.0, bound * bound / 4.0),
        "mean_raw": rel.mean,
        "variance_raw": rel.variance,
        "mean_error_bound": bounds[f"mean_{criterion}"],
        "variance_error_bound": bounds[f"variance_{criterion}"],
        f"mean_error_bound_{other}": bounds[f"mean_{other}"],
        f"variance_error_bound_{other}": bounds[f"variance_{other}"],
        unit: np.where(rel.released, rel.budget_mean + rel.budget_variance, np.nan),
        "mean_sensitivity": rel.mean_sensitivity,
        "variance_sensitivity": rel.variance_sensitivity,
        f"{unit}_mean": rel.budget_mean,
        f"{unit}_variance": rel.budget_variance,
        "mean_noise_scale": rel.mean_noise_scale,
        "variance_noise_scale": rel.variance_noise_scale,
        "error_bound": errors,
        "array_length": length,
    })


def _release_summary(agg: Aggregate, ingest: IngestReport, plan: GridPlan, gamma: np.ndarray,
                    errors: np.ndarray, released_errors: np.ndarray, bounds: dict[str, np.ndarray], *,
                    bound: float, budget: PrivacyBudget, split: str, sampler: Noise, seeded: bool,
                    criterion: str, confidence: float) -> ReleaseSummary:
    """The published headline numbers; the spend is recounted from the plan's retained counts."""
    G1 = int(agg.user_grids().max()) if agg.n_users else 0
    suppressed = gamma == 0
    suppressed_records = int(agg.count[suppressed].sum())
    published_ingest = {key: v for key, v in ingest.as_dict().items() if key not in VALUE_DEPENDENT_INGEST}
    spend = float(exact_user_spend(plan).max()) if plan.n_users else 0.0
    released = np.asarray(plan.released, dtype=bool) & np.isfinite(errors)
    eps = budget.per_grid
    if budget.mechanism == "laplace":
        # per-grid mode: K·ε (seed 002 Thm II.3), an upper bound of the exact spend
        # (and never below the samplers' exact spend, which the 1e-12 check tolerance could exceed)
        epsilon_total, rho_total = (max(plan.degradation * eps, spend) if eps is not None else spend), None
    else:
        from ..accounting import zcdp_epsilon

        rho_total = spend
        epsilon_total = zcdp_epsilon(spend, budget.delta) if budget.delta is not None and spend > 0 else None
    finite = errors[np.isfinite(errors)]
    bp = plan.info.get("budget_plan")
    return ReleaseSummary(
        privacy_model=PRIVACY_MODEL, privacy_model_description=PRIVACY_MODEL_SUMMARY,
        mechanism=budget.mechanism, budget_mode=budget.mode, budget=budget.describe(),
        users=agg.n_users, grids=agg.n_grids, records=agg.n_records, pairs=agg.n_pairs,
        plan=plan.method, plan_status=str(plan.status), plan_gap=float(plan.gap),
        pseudo_users=plan.array_length is not None and not plan.method.startswith(("budget", "hierarchy")),
        degradation=plan.degradation, degradation_baseline=G1,
        epsilon=eps, epsilon_total=epsilon_total, rho_total=rho_total, delta=budget.delta,
        epsilon_total_baseline=G1 * eps if eps is not None else None,
        epsilon_basic_composition=agg.n_grids * eps if eps is not None else None,
        error_bound=float(finite.max()) if finite.size else float("inf"),
        error_bound_target=float(plan.error_bound) if plan.error_bound is not None else float("nan"),
        error_bound_released=float(np.max(released_errors[np.isfinite(released_errors)], initial=0.0)),
        criterion=criterion, confidence=confidence,
        released_grids=int(released.sum()),
        target=float(bp.target.max()) if bp is not None and np.ptp(bp.target) == 0 else None,
        grids_within_target=int(bp.within_target.sum()) if bp is not None else None,
        frontier=plan.info["frontier"].as_dict() if "frontier" in plan.info else None,
        suppressed_pairs=int(suppressed.sum()), suppressed_records=suppressed_records,
        truncated_records=int(agg.count.sum() - gamma.sum()) - suppressed_records,
        withheld_grids=int((~np.asarray(plan.released, dtype=bool)).sum()),
        dropped_records=ingest.dropped_records, bound=bound, h3_resolution=agg.h3_resolution,
        slot=slot_text(agg.slot_ns), split=split, noise=sampler.label, granularity=sampler.granularity,
        seeded=seeded, ingest=published_ingest,
    )


def _grid_max(agg: Aggregate) -> np.ndarray:
    out = np.zeros(agg.n_grids, dtype=np.int64)
    np.maximum.at(out, agg.pair_grid, agg.count)
    return out




def _measurements(r: ReleaseResult) -> Measurements:
    agg, rel, s = r.aggregate, r.grids, r.summary
    n = agg.n_grids
    nodes = pd.DataFrame({"cell": np.asarray(agg.cells, dtype=np.int64), "h3_resolution": agg.h3_resolution,
                          "slot": np.asarray(agg.slots, dtype=np.int64), "slot_ns": agg.slot_ns,
                          "parent": np.full(n, -1, dtype=np.int64)})
    finest = nodes[["cell", "slot", "slot_ns"]].assign(node=np.arange(n, dtype=np.int64))
    tables = r.plan.info.get("hierarchy")
    if tables is not None:  # plan="hierarchy": nodes at their own resolutions; finest grid -> answering node
        nodes = tables["nodes"][list(NODE_COLUMNS)].reset_index(drop=True)
        finest = tables["finest"]
    family = ("discrete_" if s.granularity > 0 else "") + s.mechanism
    N = agg.grid_records()
    st_ret = r.table["n_records_retained"].to_numpy()
    stats = {
        "mean": Statistic("mean", rel.mean, NoiseLaw(family, rel.mean_noise_scale, s.granularity),
                          mean_bias_from_totals(N, st_ret, s.bound)),
        "variance": Statistic("variance", rel.variance, NoiseLaw(family, rel.variance_noise_scale, s.granularity),
                              variance_bias_from_totals(N, st_ret, s.bound)),
    }
    unit = "epsilon" if s.mechanism == "laplace" else "rho"
    total = s.epsilon_total if unit == "epsilon" else s.rho_total
    spend = BudgetSpend(unit, float(total or 0.0), {}, float(s.delta or 0.0), s.epsilon_total)
    public = r.table[["n_users", "n_records", "max_user_records", "n_users_retained", "n_records_retained"]]
    info = {"plan": r.plan, "criterion": s.criterion, "confidence": s.confidence, "error_bounds": r.error_bounds,
            "released": np.asarray(rel.released, dtype=bool), "summary": s}
    return Measurements(privacy_model="public-occupancy", bound=s.bound, nodes=nodes, statistics=stats,
                        spend=spend, public=public.reset_index(drop=True), finest=finest, info=info)
