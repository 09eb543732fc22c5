"""The clipping LPs of seeds 000/001 in standard form, solved with HiGHS (highspy or cvxpy).

Two formulations, both built from vectorised arrays with :class:`dpopt.solve.ModelBuilder`:

``per-user`` — LP (8) of seed 000 (eq. (5) of seed 001), after the symmetry lemma
(Lemma III.2 of 000 / III.4 of 001)::

    minimise   Σ_ℓ α_ℓ + c·τ
    s.t.       κ·α_ℓ + τ ≥ U·m_ℓ     (row block "range", multiplier λ_ℓ)
               α_ℓ ≥ 0               (column bound, multiplier μ_ℓ)
               τ ≥ 0                 (column bound, multiplier λ_τ = the paper's λ_S)

with ``κ = 2, c = d/ε`` for d = 1 (``α_ℓ = m_ℓ a_ℓ``) and ``κ = 1, c = 2d/ε`` for d ≥ 2 (ERRATA E3,
``α_ℓ = m_ℓ(U − b_ℓ)``, ``a_ℓ = 0``). The worst-case error is the objective divided by ``n = Σ m_ℓ``.

``per-sample`` — the general LP behind seed 000 Lemma III.1 / seed 001 Prop. III.1: one interval
``[a_j, b_j]`` per sample (no symmetry assumed), ``max{a_j, U − b_j}`` and ``max_ℓ`` linearised::

    minimise   Σ_j e_j + c'·τ
    s.t.       b_j − a_j ≥ 0,   e_j − a_j ≥ 0,   e_j + b_j ≥ U         (one row of each per sample)
               τ − Σ_{j∈ℓ} (b_j − a_j) ≥ 0   (d = 1)                   (row block "range", per user)
               τ − Σ_{j∈ℓ} b_j ≥ 0           (d ≥ 2; ℓ1 sensitivity 2·Σ b_j/n, ERRATA E3)
               0 ≤ a_j, b_j ≤ U,  e_j ≥ 0,  τ ≥ 0

with ``c' = d/ε`` (d = 1) and ``c' = 2d/ε`` (d ≥ 2). Its bias is the paper's
``Σ_j max{a_j, U − b_j}/n``: exact for d ≥ 2, an upper bound for d = 1 (exact:
``max{Σ_j(U − b_j), Σ_j a_j}/n``, ERRATA E9); the optimum is E^OPT under either (tests).

The solver's duals are mapped to the multipliers of the reduced LP (see
:mod:`dpopt.clipping.closed_form`) and returned as a :class:`KKTCertificate`, which the caller can
check. :func:`standard_form_kkt` checks the KKT conditions of any solved :class:`LinearModel`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import (as_counts, check_bound, check_choice, check_dim, check_epsilon, check_nonnegative_float,
                           solver_options)
from ..calculus import clipping_error_terms
from ..solve import LinearModel, ModelBuilder, SolveResult
from ..solve import solve_bounded as _solve_highs
from .closed_form import ClippingPlan, KKTCertificate, _lp_constants

__all__ = [
    "FORMULATIONS",
    "BACKENDS",
    "DEFAULT_HIGHS_OPTIONS",
    "per_user_model",
    "per_sample_model",
    "clipping_model",
    "solve_model",
    "solve_clipping",
    "standard_form_kkt",
    "StandardFormKKT",
]

FORMULATIONS = ("per-user", "per-sample")
BACKENDS = ("highspy", "cvxpy")

#: HiGHS options dpopt sets on these LPs; the caller's ``options`` are merged over them. Presolve is off: on these LPs it
#: removes nothing useful and costs more than the solve (tests/benchmarks/results/clipping.md).
DEFAULT_HIGHS_OPTIONS: dict[str, Any] = {"presolve": "off"}


def per_user_model(counts: Any, bound: float, epsilon: float, *, dim: int = 1) -> LinearModel:
    """LP (8) of seed 000 (d = 1) / its ERRATA-E3 analogue (d ≥ 2): L + 1 columns, L rows.

    Column blocks ``"alpha"`` (L) and ``"tau"`` (1); row block ``"range"`` (L). See module docstring.
    Names (exports, :meth:`~dpopt.solve.SolveResult.named_duals`): ``alpha_u<ℓ>``, ``tau_T``,
    ``range_u<ℓ>`` with ℓ the user's position in ``counts``.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    kappa, c = _lp_constants(eps, d)
    L = m.size
    b = ModelBuilder(name=f"clipping_per_user_d{d}")
    users = [f"u{i}" for i in range(L)]  # user ℓ in the order of `counts`
    alpha = b.add_cols("alpha", L, lower=0.0, upper=np.inf, cost=1.0, labels=users)
    tau = b.add_cols("tau", 1, lower=0.0, upper=np.inf, cost=c, labels=["T"])
    rows = np.arange(L)
    b.add_rows(
        "range",
        rows=np.concatenate([rows, rows]),
        cols=np.concatenate([alpha, np.full(L, tau[0])]),
        vals=np.concatenate([np.full(L, kappa), np.ones(L)]),
        lower=U * m.astype(float),
        upper=np.inf,
        count=L,
        labels=users,
    )
    return b.build()


def per_sample_model(counts: Any, bound: float, epsilon: float, *, dim: int = 1) -> LinearModel:
    """The per-sample LP of seed 000 Lemma III.1 / seed 001 Prop. III.1 (see module docstring).

    Column blocks ``"a"``, ``"b"``, ``"e"`` (N = Σ m_ℓ each) and ``"tau"``; row blocks ``"order"``,
    ``"bias_low"``, ``"bias_high"`` (N each) and ``"range"`` (L). Samples are ordered user by user.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    c = d / eps if d == 1 else 2.0 * d / eps
    L, N = m.size, int(m.sum())
    owner = np.repeat(np.arange(L), m)
    bld = ModelBuilder(name=f"clipping_per_sample_d{d}")
    smp = [f"u{u}s{j}" for u, mu in enumerate(m) for j in range(int(mu))]  # user u, sample j
    a = bld.add_cols("a", N, lower=0.0, upper=U, cost=0.0, labels=smp)
    b = bld.add_cols("b", N, lower=0.0, upper=U, cost=0.0, labels=smp)
    e = bld.add_cols("e", N, lower=0.0, upper=np.inf, cost=1.0, labels=smp)
    tau = bld.add_cols("tau", 1, lower=0.0, upper=np.inf, cost=c, labels=["T"])
    r = np.arange(N)
    rr = np.concatenate([r, r])
    bld.add_rows("order", rows=rr, cols=np.concatenate([b, a]),
                 vals=np.concatenate([np.ones(N), -np.ones(N)]), lower=0.0, upper=np.inf, count=N, labels=smp)
    bld.add_rows("bias_low", rows=rr, cols=np.concatenate([e, a]),
                 vals=np.concatenate([np.ones(N), -np.ones(N)]), lower=0.0, upper=np.inf, count=N, labels=smp)
    bld.add_rows("bias_high", rows=rr, cols=np.concatenate([e, b]),
                 vals=np.ones(2 * N), lower=U, upper=np.inf, count=N, labels=smp)
    if d == 1:
        rows = np.concatenate([np.arange(L), owner, owner])
        cols = np.concatenate([np.full(L, tau[0]), b, a])
        vals = np.concatenate([np.ones(L), -np.ones(N), np.ones(N)])
    else:
        rows = np.concatenate([np.arange(L), owner])
        cols = np.concatenate([np.full(L, tau[0]), b])
        vals = np.concatenate([np.ones(L), -np.ones(N)])
    bld.add_rows("range", rows=rows, cols=cols, vals=vals, lower=0.0, upper=np.inf, count=L,
                 labels=[f"u{i}" for i in range(L)])
    return bld.build()


def clipping_model(
    counts: Any, bound: float, epsilon: float, *, dim: int = 1, formulation: str = "per-user"
) -> LinearModel:
    """Build the standard form of the chosen formulation (for export with ``dpopt.solve.write_model``)."""
    check_choice(formulation, "formulation", FORMULATIONS)
    build = per_user_model if formulation == "per-user" else per_sample_model
    return build(counts, bound, epsilon, dim=dim)


def solve_model(
    model: LinearModel,
    *,
    backend: str = "highspy",
    options: Mapping[str, Any] | None = None,
    time_limit: float | None = None,
) -> SolveResult:
    """Solve a standard-form model with HiGHS through highspy or through cvxpy (same duals)."""
    check_choice(backend, "backend", BACKENDS)
    if time_limit is not None:
        time_limit = check_nonnegative_float(time_limit, "time_limit")
    opts = {**DEFAULT_HIGHS_OPTIONS, **solver_options(options)}  # the caller's options win, key by key
    if backend == "highspy":
        return _solve_highs(model, options=opts, time_limit=time_limit)
    from ..solve.cvxpy_backend import solve_linear_model

    return solve_linear_model(model, options=opts, time_limit=time_limit)


# --------------------------------------------------------------------------------------------
# generic KKT check of a solved standard form
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StandardFormKKT:
    """KKT residuals of ``min c·x s.t. rl ≤ Ax ≤ ru, cl ≤ x ≤ cu`` at (x, y, z).

    HiGHS convention ``c − Aᵀy − z = 0``; y ≥ 0 may only be non-zero on active lower row bounds,
    y ≤ 0 on active upper ones (likewise z for columns). Residuals are relative to the data scale.
    """

    primal: float
    dual: float
    complementary: float
    stationarity: float
    tol: float

    @property
    def ok(self) -> bool:
        return max(self.primal, self.dual, self.complementary, self.stationarity) <= self.tol


def standard_form_kkt(model: LinearModel, result: SolveResult, tol: float = 1e-7) -> StandardFormKKT:
    """Check primal/dual feasibility, complementary slackness and stationarity of an LP solution."""
    if result.x is None or result.row_duals is None or result.col_duals is None:
        raise ValueError(f"result has no primal-dual pair (status {result.status.value})")
    x, y, z = result.x, result.row_duals, result.col_duals
    sgn = -1.0 if model.sense == "max" else 1.0
    y, z = sgn * y, sgn * z
    ax = model.A @ x
    scale = max(1.0, float(np.max(np.abs(model.row_lower[np.isfinite(model.row_lower)]), initial=0.0)),
                float(np.max(np.abs(model.col_upper[np.isfinite(model.col_upper)]), initial=0.0)))
    cscale = max(1.0, float(np.max(np.abs(model.c), initial=0.0)))
    primal = model.max_violation(x) / scale
    stat = float(np.max(np.abs(sgn * model.c - model.A.T @ y - z), initial=0.0)) / cscale

    def parts(val: np.ndarray, lo: np.ndarray, up: np.ndarray, mult: np.ndarray) -> tuple[float, float]:
        pos, neg = np.maximum(mult, 0.0), np.maximum(-mult, 0.0)
        # dual sign: a positive multiplier needs a finite lower bound, a negative one an upper bound
        dual = max(float(np.max(pos[~np.isfinite(lo)], initial=0.0)),
                   float(np.max(neg[~np.isfinite(up)], initial=0.0)))
        slack_lo = np.where(np.isfinite(lo), val - np.where(np.isfinite(lo), lo, 0.0), 0.0)
        slack_up = np.where(np.isfinite(up), np.where(np.isfinite(up), up, 0.0) - val, 0.0)
        comp = max(float(np.max(np.abs(pos * slack_lo), initial=0.0)),
                   float(np.max(np.abs(neg * slack_up), initial=0.0)))
        return dual, comp

    d1, c1 = parts(ax, model.row_lower, model.row_upper, y)
    d2, c2 = parts(x, model.col_lower, model.col_upper, z)
    return StandardFormKKT(primal, max(d1, d2) / cscale, max(c1, c2) / (scale * cscale), stat, tol)


# --------------------------------------------------------------------------------------------
# solve_clipping
# --------------------------------------------------------------------------------------------
def _per_user_sums(values: np.ndarray, m: np.ndarray) -> np.ndarray:
    starts = np.concatenate(([0], np.cumsum(m)[:-1]))
    return np.add.reduceat(values, starts)


def _aggregate_sample_duals(res: SolveResult, m: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """Map an optimal dual of the per-sample LP to an optimal dual of the reduced LP.

    With q_j the dual of ``e_j + b_j ≥ U`` and ν_j ≥ 0 the duals of the upper bounds ``a_j ≤ U``,
    ``b_j ≤ U``, the per-sample dual objective is ``Σ_j U (q_j − ν_j)``. Put
    ``λ_ℓ = max{0, mean_{j∈ℓ}(q_j − ν_j)}``. The per-sample dual constraints give
    ``q_j − ν_j ≤ min{p_j, q_j} ≤ 1/2`` (d = 1; ``≤ 1`` for d ≥ 2, i.e. ``≤ 1/κ``) and
    ``q_j − ν_j ≤ ρ_ℓ`` (ρ_ℓ the dual of user ℓ's range row, ``Σ ρ_ℓ ≤ c``), so λ is feasible for
    the reduced dual with objective ``Σ λ_ℓ U m_ℓ`` ≥ the per-sample optimum: by weak duality it is
    optimal. (The raw range duals ρ_ℓ are not always valid multipliers: when ``τ = 0`` the rows
    ``b_j ≥ a_j`` are active and can carry dual weight.) ``λ_τ = c − Σ λ_ℓ``.
    """
    q = res.dual("bias_high")
    za = res.col_duals[res.col_blocks["a"]]
    zb = res.col_duals[res.col_blocks["b"]]
    nu = np.maximum(-za, 0.0) + np.maximum(-zb, 0.0)
    lam = np.maximum(_per_user_sums(q - nu, m) / m.astype(float), 0.0)
    return lam, float(c - lam.sum())


def solve_clipping(counts: Any, bound: float, epsilon: float, *, dim: int = 1, formulation: str = "per-user",
                   backend: str = "highspy", options: Mapping[str, Any] | None = None,
                   time_limit: float | None = None) -> ClippingPlan:
    """Solve the clipping LP (seed 000 LP (8) or the per-sample LP of Lemma III.1) with HiGHS.

    Parameters
    ----------
    counts, bound, epsilon, dim
        As in :func:`dpopt.clipping.optimal_clipping`.
    formulation : {"per-user", "per-sample"}
        The per-user LP (L + 1 columns) or the general per-sample LP (3N + 1 columns).
    backend : {"highspy", "cvxpy"}
        highspy directly (vectorised arrays) or the same standard form through cvxpy.
    options : mapping, optional
        HiGHS options, merged over :data:`DEFAULT_HIGHS_OPTIONS` (presolve off) key by key.
    time_limit : float, optional
        Total seconds for the solve (model loading included).

    Returns
    -------
    ClippingPlan
        ``method="lp"``, the solver ``status``; per-user ``lower``/``upper`` read from the LP
        (per-sample: the per-user means of the sample intervals, which have the same worst-case
        error for d = 1 and no larger for d ≥ 2); ``bias``/``noise``/``sensitivity``/``error``
        evaluated independently by :func:`dpopt.calculus.clipping_error_terms`; ``objective`` the
        LP optimum divided by n; ``certificate`` the solver's duals mapped to the paper's
        multipliers at the per-user primal point (α_ℓ, τ) — per-user LP: λ_ℓ = dual of "range",
        μ_ℓ = reduced cost of α_ℓ, λ_τ = reduced cost of τ; per-sample LP: see
        :func:`_aggregate_sample_duals` and μ_ℓ = 1 − κλ_ℓ — ; ``info["kkt"]`` the :class:`StandardFormKKT` of the LP itself.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    check_choice(formulation, "formulation", FORMULATIONS)
    check_choice(backend, "backend", BACKENDS)
    model, unit, res = _solved_in_units_of_bound(m, U, eps, d, formulation, backend=backend, options=options,
                                                  time_limit=time_limit)
    n = float(m.sum())
    info: dict[str, Any] = {"raw_status": res.raw_status, "solve_time": res.solve_time,
                            "num_cols": model.num_cols, "num_rows": model.num_rows}
    if res.x is None:
        nan = np.full(m.size, math.nan)
        return ClippingPlan(nan, nan, math.nan, math.nan, math.nan, math.nan, math.nan, None, U, eps,
                            d, method="lp", status=res.status, formulation=formulation,
                            backend=backend, solve_time=res.solve_time, info=info, gap=math.inf)
    tau = float(res.value("tau")[0])
    lower, upper, s = _lp_intervals(res, m, U, d, formulation, info)
    cert = _lp_certificate(model, unit, m, s, tau, U=U, eps=eps, d=d, formulation=formulation, backend=backend,
                           info=info)
    terms = clipping_error_terms(m, U, eps, lower, upper, dim=d)
    return ClippingPlan(
        lower=lower, upper=upper, threshold=tau, error=terms.error, bias=terms.bias, noise=terms.noise,
        sensitivity=terms.sensitivity, certificate=cert, bound=U, epsilon=eps, dim=d, method="lp",
        status=res.status, formulation=formulation, backend=backend,
        objective=res.objective / n if math.isfinite(res.objective) else math.nan, solve_time=res.solve_time,
        info=info, gap=res.proven_gap,
    )


def _solved_in_units_of_bound(m: np.ndarray, U: float, eps: float, d: int, formulation: str, *, backend: str,
                              options: Mapping[str, Any] | None, time_limit: float | None
                              ) -> tuple[LinearModel, SolveResult, SolveResult]:
    """(the LP at bound 1, its result, that result in the units of U). Every bound of both LPs is U
    times a number and the costs do not depend on U, so the optimum at bound 1, times U, is the
    optimum at U, with the same duals. In its own units, at U = 1e-7, the LP sat at HiGHS's 1e-7
    feasibility tolerance, and "optimal" plans erred 667× E^OPT (a fuzz run)."""
    t0 = time.perf_counter()
    model = clipping_model(m, 1.0, eps, dim=d, formulation=formulation)
    if time_limit is not None:  # the limit is the whole solve's, model building included
        time_limit = max(check_nonnegative_float(time_limit, "time_limit") - (time.perf_counter() - t0), 0.0)
    unit = solve_model(model, backend=backend, options=options, time_limit=time_limit)
    if unit.x is None:
        return model, unit, unit
    return model, unit, replace(unit, x=unit.x * U, objective=unit.objective * U, bound=unit.bound * U)


def _lp_intervals(res: SolveResult, m: np.ndarray, U: float, d: int, formulation: str,
                  info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-user (lower, upper) read from the LP's point, and the per-user bias mass s (α_ℓ, or the
    per-sample e summed per user: a feasible point of the reduced LP). Per-sample: the sample
    intervals go to ``info["sample_lower"]``/``info["sample_upper"]``."""
    mf = m.astype(float)
    L = m.size
    if formulation == "per-user":
        s = res.value("alpha")
        if d == 1:
            lower = np.clip(s / mf, 0.0, U / 2.0)
            upper = U - lower
        else:
            lower = np.zeros(L)
            upper = np.clip(U - s / mf, 0.0, U)
    else:
        a_s, b_s, e_s = res.value("a"), res.value("b"), res.value("e")
        upper = np.clip(_per_user_sums(b_s, m) / mf, 0.0, U)
        if d == 1:
            lower = np.clip(_per_user_sums(a_s, m) / mf, 0.0, upper)
        else:  # a only adds bias for d >= 2 (ERRATA E3); the LP is indifferent to a_j <= U - b_j
            lower = np.zeros(L)
        s = _per_user_sums(e_s, m)  # per-user bias mass: a feasible point of the reduced LP
        info["sample_lower"] = a_s
        info["sample_upper"] = b_s
    return lower, upper, s


def _lp_certificate(model: LinearModel, res: SolveResult, m: np.ndarray, s: np.ndarray, tau: float, *, U: float,
                    eps: float, d: int, formulation: str, backend: str,
                    info: dict[str, Any]) -> KKTCertificate | None:
    """The solver's duals mapped to the paper's multipliers at the per-user point (s, τ) (None
    without duals); sets ``info["kkt"]`` (and ``info["range_duals"]`` for the per-sample LP).
    ``model`` and ``res`` are the LP in units of U (:func:`solve_clipping`), whose duals are the LP's."""
    if res.row_duals is None or res.col_duals is None:
        return None
    mf = m.astype(float)
    kappa, c = _lp_constants(eps, d)
    if formulation == "per-user":
        lam = res.dual("range").copy()
        lam_tau = float(res.col_duals[res.col_blocks["tau"]][0])
        # μ_ℓ = reduced cost of α_ℓ as the solver reports it, so stationarity 1 − κλ − μ = 0
        # is checked on the solver's numbers (cvxpy back-end: z = c − Aᵀy by construction)
        mu = res.col_duals[res.col_blocks["alpha"]].copy()
    else:
        lam, lam_tau = _aggregate_sample_duals(res, m, c)
        info["range_duals"] = res.dual("range").copy()
        mu = 1.0 - kappa * lam
    cert = KKTCertificate(U * mf, kappa, c, np.asarray(s, float), tau, lam, mu, lam_tau,
                          source=f"lp:{formulation}:{backend}")
    info["kkt"] = standard_form_kkt(model, res)
    return cert
