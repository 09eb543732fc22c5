"""Optimal per-user clipping in closed form (seeds 000/001, Theorem III.1) with a KKT certificate.

The model (seed 000 Lemma III.1 / seed 001 Prop. III.1): user ℓ holds ``m_ℓ`` samples bounded by
``U`` (``0 ≤ x ≤ U`` for d = 1, ``x ≥ 0, ‖x‖₁ ≤ U`` for d ≥ 2); each sample of user ℓ is clipped to
``[a_ℓ, b_ℓ]`` (d = 1) or ℓ1-projected on the ball of radius ``b_ℓ`` (d ≥ 2, ERRATA E3); the clipped
mean is released with i.i.d. Laplace noise. The worst-case error is bias + E‖Z‖₁.

Every optimum is described by one threshold ``T_ε`` = the ``⌈2d/ε⌉``-th largest of ``{U·m_ℓ}``
(0 when ``⌈2d/ε⌉ > L``), found here with a selection (:func:`numpy.partition`, O(L)).

The reduced LP behind the closed form, in a single parametrisation used for both cases::

    minimise   Σ_ℓ s_ℓ + c·τ
    subject to U·m_ℓ − κ·s_ℓ ≤ τ      (multiplier λ_ℓ ≥ 0)
               s_ℓ ≥ 0                 (multiplier μ_ℓ ≥ 0)
               τ ≥ 0                   (multiplier λ_τ ≥ 0)

* d = 1 (seed 000 LP (8), seed 001 eq. (5)): ``s_ℓ = α_ℓ = Σ_j a_j = m_ℓ·a_ℓ`` (bias mass of user ℓ),
  ``τ = max_ℓ m_ℓ(b_ℓ − a_ℓ)``, ``κ = 2``, ``c = d/ε``.
* d ≥ 2 (ERRATA E3): ``a_ℓ = 0``, ``s_ℓ = m_ℓ(U − b_ℓ)``, ``τ = max_ℓ m_ℓ·b_ℓ`` (half the ℓ1
  sensitivity times n), ``κ = 1``, ``c = 2d/ε``. This LP is exactly twice the d = 1 LP (substitute
  ``s = 2α``), hence the same ``T_ε`` and the error ``2·E^OPT``.

The worst-case error is ``(Σ s_ℓ + c·τ)/n`` with ``n = Σ m_ℓ``.

The certificate (ERRATA E4, generalised to κ, c): with ``G = {U m_ℓ > T}``,
``E = {U m_ℓ = T}``: ``λ_τ = 0``, ``λ_ℓ = 1/κ`` on G, ``θ = (c − |G|/κ)/|E|`` on E, 0 elsewhere,
``μ_ℓ = 1 − κ λ_ℓ``; when ``⌈2d/ε⌉ > L``: ``τ = 0``, ``λ_ℓ = 1/κ``, ``μ = 0``, ``λ_τ = c − L/κ``.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import as_counts, as_epsilons, check_bound, check_choice, check_dim, check_epsilon, \
    check_nonnegative_float
from ..solve.result import Status

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "KKT_TOL",
    "LP_KKT_TOL",
    "RANK_SNAP_TOL",
    "KKTCertificate",
    "KKTReport",
    "ClippingPlan",
    "threshold_rank",
    "clipping_threshold",
    "optimal_clipping",
    "optimal_error",
    "check_certificate",
    "closed_form_certificate",
]

#: default tolerance of :meth:`KKTCertificate.check` (relative to the scale of the data U·m*).
KKT_TOL = 1e-9
#: default tolerance for certificates read from solver duals (HiGHS feasibility tolerance 1e-7).
LP_KKT_TOL = 1e-7
#: ``2d/ε`` within this relative distance of an integer k is taken as k (ties; models/clipping.md).
RANK_SNAP_TOL = 1e-12


def threshold_rank(epsilon: float | np.ndarray, dim: int = 1) -> np.ndarray | int:
    """``k = ⌈2d/ε⌉``, the rank of ``T_ε`` (seed 001 Theorem III.1).

    ``2d/ε`` is snapped to the nearest integer when within :data:`RANK_SNAP_TOL` (relative), so that
    ε given as ``2/3`` in floating point still yields the tie rank 3 rather than 4 (models/clipping.md).
    """
    with np.errstate(over="ignore"):
        x = 2.0 * dim / np.asarray(epsilon, dtype=float)
    x = np.minimum(x, 2.0**62)  # ε so small that 2d/ε overflows: rank beyond any L
    r = np.round(x)
    k = np.where(np.abs(x - r) <= RANK_SNAP_TOL * np.maximum(x, 1.0), r, np.ceil(x))
    k = np.maximum(k, 1.0)
    if k.ndim == 0:
        return int(k)
    return k.astype(np.int64)


def clipping_threshold(counts: Any, bound: float, epsilon: float, *, dim: int = 1) -> float:
    """``T_ε``: the ``⌈2d/ε⌉``-th largest of ``{U·m_ℓ}``, 0 when ``⌈2d/ε⌉ > L``. O(L) selection."""
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    return _threshold(m, U, eps, d)


def _threshold(m: np.ndarray, U: float, eps: float, d: int) -> float:
    k = threshold_rank(eps, d)
    L = m.size
    if k > L:
        return 0.0
    # k-th largest = (L − k)-th smallest; partition the integer counts (cheaper than floats)
    return U * float(np.partition(m, L - k)[L - k])


# --------------------------------------------------------------------------------------------
# certificate
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KKTReport:
    """Residuals of the four KKT conditions of the reduced LP (all ≥ 0; 0 is exact).

    ``primal``: largest violation of ``U m_ℓ − κ s_ℓ ≤ τ``, ``s ≥ 0``, ``τ ≥ 0``;
    ``dual``: largest negative part of ``λ, μ, λ_τ``;
    ``complementary``: largest ``|λ_ℓ·slack_ℓ|, |μ_ℓ s_ℓ|, |λ_τ τ|``;
    ``stationarity``: largest ``|1 − κλ_ℓ − μ_ℓ|`` and ``|c − Σλ_ℓ − λ_τ|``;
    ``duality_gap``: ``|primal objective − Σ λ_ℓ U m_ℓ|`` (zero follows from the four, reported
    as a cross-check). Residuals are scaled: products by ``U·m*``, sums and λ_τ by ``max(1, c)``;
    λ_ℓ, μ_ℓ (which lie in [0, 1]) are not scaled.
    """

    primal: float
    dual: float
    complementary: float
    stationarity: float
    duality_gap: float
    tol: float

    @property
    def ok(self) -> bool:
        return max(self.primal, self.dual, self.complementary, self.stationarity,
                   self.duality_gap) <= self.tol

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, eq=False)
class KKTCertificate:
    """A primal–dual pair of the reduced clipping LP (see module docstring) and its data.

    Attributes
    ----------
    values : ndarray
        ``U·m_ℓ`` per user.
    kappa, cost : float
        κ (2 for d = 1, 1 for d ≥ 2) and c (the price of τ: d/ε or 2d/ε).
    s : ndarray
        Per-user bias mass ``s_ℓ`` (d = 1: the paper's ``α_ℓ = S^(ℓ)``).
    tau : float
        The largest per-user range (the paper's ``S`` in seed 000, ``τ`` in seed 001).
    lam, mu : ndarray
        Multipliers λ_ℓ (range rows) and μ_ℓ (``s_ℓ ≥ 0``).
    lam_tau : float
        Multiplier of ``τ ≥ 0`` (the paper's ``λ_S``).
    """

    values: np.ndarray
    kappa: float
    cost: float
    s: np.ndarray
    tau: float
    lam: np.ndarray
    mu: np.ndarray
    lam_tau: float
    source: str = "closed-form"

    def __repr__(self) -> str:  # one line: never the per-user arrays
        return (f"KKTCertificate({self.source}, users={self.values.size}, tau={self.tau:.6g}, "
                f"sum lambda={float(self.lam.sum()):.6g}, lambda_tau={self.lam_tau:.3g}, "
                f"ok={self.check()})")

    def to_frame(self) -> "pd.DataFrame":
        """One row per user: ``U m_l``, ``s_l``, λ_l (the range row's multiplier), μ_l."""
        import pandas as pd

        return pd.DataFrame({"value": self.values, "s": self.s, "lam": self.lam, "mu": self.mu},
                            index=pd.RangeIndex(self.values.size, name="user"))

    @property
    def primal_objective(self) -> float:
        """``Σ s_ℓ + c·τ`` (n times the worst-case error)."""
        return float(np.sum(self.s) + self.cost * self.tau)

    @property
    def dual_objective(self) -> float:
        """``Σ λ_ℓ U m_ℓ`` (the Lagrange dual at a stationary point)."""
        return float(self.lam @ self.values)

    def report(self, tol: float = KKT_TOL) -> KKTReport:
        """Residuals of primal/dual feasibility, complementary slackness and stationarity."""
        tol = check_nonnegative_float(tol, "tol")
        v, k, c = self.values, self.kappa, self.cost
        # relative to the data's own scale, however small U (a floor of 1 passed plans 667× off at U = 1e-7)
        top = float(np.max(v, initial=0.0))
        scale = top if top > 0 else 1.0
        cscale = max(1.0, c)
        slack = self.tau + k * self.s - v  # ≥ 0 when feasible
        primal = max(
            float(np.max(-slack, initial=0.0)),
            float(np.max(-self.s, initial=0.0)),
            max(-self.tau, 0.0),
        ) / scale + 0.0
        # λ_ℓ, μ_ℓ live in [0, 1]; only λ_τ (up to c) is measured relative to c
        dual = max(
            float(np.max(-self.lam, initial=0.0)),
            float(np.max(-self.mu, initial=0.0)),
            max(-self.lam_tau, 0.0) / cscale,
        ) + 0.0
        comp = max(
            float(np.max(np.abs(self.lam * slack), initial=0.0)),
            float(np.max(np.abs(self.mu * self.s), initial=0.0)),
            abs(self.lam_tau * self.tau),
        ) / scale
        stat = max(
            float(np.max(np.abs(1.0 - k * self.lam - self.mu), initial=0.0)),
            abs(c - float(np.sum(self.lam)) - self.lam_tau) / cscale,
        )
        gap = abs(self.primal_objective - self.dual_objective) / (scale * cscale)
        return KKTReport(primal, dual, comp, stat, gap, tol)

    def check(self, tol: float = KKT_TOL) -> bool:
        """True when all four KKT conditions hold to ``tol`` (see :class:`KKTReport`)."""
        return self.report(tol).ok


def check_certificate(certificate: KKTCertificate, tol: float = KKT_TOL) -> KKTReport:
    """Check a certificate; raise :class:`AssertionError` naming the failed condition.

    Parameters
    ----------
    certificate : KKTCertificate
        A primal–dual pair of the reduced clipping LP: the closed form's (ERRATA E4,
        ``optimal_clipping(...).certificate``) or one mapped from an LP solver's duals.
    tol : float, default KKT_TOL (1e-9)
        Largest accepted residual of each condition, scaled as in :class:`KKTReport` (certificates
        read from solver duals are checked at :data:`LP_KKT_TOL`, 1e-7, by :meth:`ClippingPlan.check`).

    Returns
    -------
    KKTReport
        The residuals, all ≤ ``tol``.

    Raises
    ------
    AssertionError
        If a residual exceeds ``tol``; the message names each failed condition and its residual.
    """
    rep = certificate.report(tol)
    if not rep.ok:
        bad = {k: getattr(rep, k) for k in ("primal", "dual", "complementary", "stationarity",
                                             "duality_gap") if getattr(rep, k) > tol}
        raise AssertionError(f"KKT certificate ({certificate.source}) fails at tol={tol:g}: {bad}")
    return rep


def _lp_constants(eps: float, d: int) -> tuple[float, float]:
    """(κ, c) of the reduced LP for dimension d (module docstring)."""
    return (2.0, d / eps) if d == 1 else (1.0, 2.0 * d / eps)


def closed_form_certificate(
    m: np.ndarray, U: float, eps: float, d: int, T: float, *, values: np.ndarray | None = None,
    excess: np.ndarray | None = None,
) -> KKTCertificate:
    """The valid certificate of ERRATA E4 (models/errata.md), generalised to d ≥ 2.

    ``values = U·m`` and ``excess = max(U·m − T, 0)`` may be passed to avoid recomputing them.
    """
    kappa, c = _lp_constants(eps, d)
    v = U * m.astype(float) if values is None else values
    L = m.size
    if T == 0.0:  # ⌈2d/ε⌉ > L: τ = 0, every user at the centre
        s = v / kappa
        lam = np.full(L, 1.0 / kappa)
        mu = np.zeros(L)
        lam_tau = c - L / kappa
        return KKTCertificate(v, kappa, c, s, 0.0, lam, mu, lam_tau)
    if excess is None:
        excess = np.maximum(v - T, 0.0)
    s = excess / kappa if kappa != 1.0 else excess
    G = excess > 0.0  # U m_ℓ > T
    nG = int(np.count_nonzero(G))
    lam = G * (1.0 / kappa)
    # users at the threshold (U m_ℓ = T) share the rest: Σ λ = c, each in (0, 1/κ]
    E = np.flatnonzero(v == T)
    lam[E] = (c - nG / kappa) / E.size
    mu = 1.0 - kappa * lam
    return KKTCertificate(v, kappa, c, s, float(T), lam, mu, 0.0)


# --------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ClippingPlan:
    """An optimal (or LP-computed) per-user clipping strategy and its worst-case error.

    Attributes
    ----------
    lower, upper : ndarray
        Per-user ``a_ℓ ≤ b_ℓ``: d = 1 clips every sample of user ℓ to ``[a_ℓ, b_ℓ]``; d ≥ 2
        ℓ1-projects it on ``{y ≥ 0 : a_ℓ ≤ ‖y‖₁ ≤ b_ℓ}`` (dpopt's plans have ``a_ℓ = 0``, E3).
    threshold : float
        ``T_ε`` (closed form) or the LP's largest per-user range ``τ``.
    error, bias, noise, sensitivity : float
        Worst-case error = bias + noise; noise = d·sensitivity/ε; sensitivity is the ℓ1
        user-level sensitivity of the clipped mean (``T/n`` for d = 1, ``2T/n`` for d ≥ 2).
    certificate : KKTCertificate or None
        Primal–dual pair of the reduced LP (for LP plans: the solver's duals, mapped).
    status : Status
        ``OPTIMAL`` for the closed form; the solver's mapped status for LP plans.
    gap : float
        The solver's relative gap: 0 for the closed form and an optimal LP, ``inf`` where a limit
        stopped the solve or no point was returned (the objective is then not proven).
    """

    lower: np.ndarray
    upper: np.ndarray
    threshold: float
    error: float
    bias: float
    noise: float
    sensitivity: float
    certificate: KKTCertificate | None
    bound: float
    epsilon: float
    dim: int
    method: str = "closed-form"
    status: Status = Status.OPTIMAL
    formulation: str | None = None
    backend: str | None = None
    objective: float = math.nan
    solve_time: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    gap: float = 0.0

    @property
    def n_clipped(self) -> int:
        """Users whose interval is a strict sub-interval of ``[0, U]``."""
        return int(np.sum((self.lower > 0) | (self.upper < self.bound)))

    def check(self, tol: float | None = None) -> bool:
        """Check the certificate (False when there is none).

        Default tolerance: :data:`KKT_TOL` for the closed form, :data:`LP_KKT_TOL` for LP plans.
        """
        if tol is None:
            tol = KKT_TOL if self.method == "closed-form" else LP_KKT_TOL
        return self.certificate is not None and self.certificate.check(tol)

    def __repr__(self) -> str:  # one screen: the summary, never the per-user arrays
        items = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in self.summary().items() if v is not None)
        return f"ClippingPlan({items})"

    def to_frame(self) -> "pd.DataFrame":
        """One row per user: the interval ``[lower, upper]``, whether it clips, and λ_ℓ if certified."""
        import pandas as pd

        df = pd.DataFrame({"lower": self.lower, "upper": self.upper,
                           "clipped": (self.lower > 0) | (self.upper < self.bound)},
                          index=pd.RangeIndex(self.lower.size, name="user"))
        if self.certificate is not None and self.certificate.lam.size == df.shape[0]:
            df["lam"] = self.certificate.lam
        return df

    def error_with_probability(self, delta: float) -> float:
        """A bound on ‖release − mean‖₁ that holds with probability ≥ 1 − δ on every dataset.

        Worst-case bias plus the exact (1 − δ) quantile of the ℓ1 norm of the d Laplace
        coordinates, ``sensitivity·Q_d(1 − δ)/ε`` (:func:`dpopt.calculus.laplace_l1_tail`; seed 002
        Prop. II.1's ``ln(1/δ)`` is right for d = 1 only, ERRATA E11).
        """
        from ..calculus import laplace_l1_tail

        if self.sensitivity == 0:
            return float(self.bias)
        return float(self.bias + laplace_l1_tail(self.sensitivity, self.epsilon, delta, dim=self.dim))

    def summary(self) -> dict[str, Any]:
        """A short JSON-friendly summary (no per-user arrays)."""
        return {
            "method": self.method,
            "formulation": self.formulation,
            "backend": self.backend,
            "status": self.status.value,
            "gap": self.gap,
            "dim": self.dim,
            "bound": self.bound,
            "epsilon": self.epsilon,
            "users": int(self.lower.size),
            "threshold": self.threshold,
            "error": self.error,
            "bias": self.bias,
            "noise": self.noise,
            "sensitivity": self.sensitivity,
            "users_clipped": self.n_clipped if np.all(np.isfinite(self.lower)) else None,  # no solution: unknown
            "certificate_ok": self.check() if self.certificate is not None else None,
        }


def optimal_clipping(counts: Any, bound: float, epsilon: float, *, dim: int = 1,
                     geometry: str = "l1") -> ClippingPlan:
    """The optimal clipping strategy of seed 001 Theorem III.1 (d = 1) / ERRATA E3 (d ≥ 2).

    Parameters
    ----------
    counts : array_like of int
        ``m_ℓ ≥ 1``: samples of each user (public).
    bound : float
        ``U > 0``: sample bound (``0 ≤ x ≤ U``; d ≥ 2: ``x ≥ 0``, ``‖x‖₁ ≤ U``).
    epsilon : float
        ε > 0 of the Laplace release.
    dim : int
        Sample dimension d ≥ 1.
    geometry : {"l1", "cube"}
        d ≥ 2: samples in the ℓ1 ball ``{x ≥ 0, ‖x‖₁ ≤ U}`` (seed 001) or in the cube ``[0, U]^d``
        (each coordinate clipped to the user's interval; models/clipping.md, "The cube"): the
        optimum is ``d·E^OPT(ε/d)``, attained by Theorem III.1's intervals at ε/d on every
        coordinate; ``certificate`` is that 1-D plan's KKT pair (``info["certificate_epsilon"]``).

    Returns
    -------
    ClippingPlan
        d = 1: ``a_ℓ = max{(U m_ℓ − T)/(2 m_ℓ), 0}``, ``b_ℓ = U − a_ℓ``, sensitivity ``T/n``,
        error ``E^OPT(ε) = (1/n)[Σ (U m_ℓ − T)⁺/2 + d T/ε]`` (seed 001; ERRATA E5).
        d ≥ 2: ``a_ℓ = 0``, ``b_ℓ = min{U, T/m_ℓ}``, ℓ1-sensitivity ``2T/n`` (ERRATA E3), error
        ``2 E^OPT(ε)``. ``certificate`` is the valid KKT certificate of ERRATA E4.

    Notes
    -----
    O(L): ``T_ε`` is found by :func:`numpy.partition`; everything else is elementwise.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    if check_choice(geometry, "geometry", ("l1", "cube")) == "cube" and d >= 2:
        return _cube_plan(optimal_clipping(m, U, eps / d), d, eps)
    n = float(m.sum())
    T = _threshold(m, U, eps, d)
    mf = m.astype(float)
    v = U * mf  # U·m_ℓ
    excess = np.subtract(v, T)
    np.maximum(excess, 0.0, out=excess)  # (U m_ℓ − T)⁺
    excess_sum = float(excess.sum())
    if d == 1:
        lower, upper, sens, bias = _intervals_1d(mf, U, T, n, excess, excess_sum)
    else:
        lower, upper, sens, bias = _intervals_l1_ball(mf, U, T, n, excess_sum)
    noise = d * sens / eps
    cert = closed_form_certificate(m, U, eps, d, T, values=v, excess=excess)
    return ClippingPlan(lower=lower, upper=upper, threshold=T, error=bias + noise, bias=bias, noise=noise,
                        sensitivity=sens, certificate=cert, bound=U, epsilon=eps, dim=d,
                        objective=cert.primal_objective)


def _intervals_1d(mf: np.ndarray, U: float, T: float, n: float, excess: np.ndarray,
                  excess_sum: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """d = 1 (Theorem III.1): (a_ℓ, b_ℓ, sensitivity, bias) from ``excess`` = (U m_ℓ − T)⁺."""
    lower = excess / mf
    lower *= 0.5  # a_ℓ = (U m_ℓ − T)⁺ / (2 m_ℓ)
    # (U m)/m may round above U (U = 0.1, m = 3): cap at U/2 so that a_ℓ ≤ U/2 ≤ b_ℓ exactly;
    # at T = 0 no noise is added, so the intervals must be exactly the point U/2
    if T == 0.0:
        lower.fill(0.5 * U)
    else:
        np.minimum(lower, 0.5 * U, out=lower)
    upper = U - lower
    # Δ = max_ℓ m_ℓ(b_ℓ − a_ℓ)/n = T/n; taken from the rounded intervals so that it is never
    # an ulp below the sensitivity of what is actually released
    sens = max(T, float(np.max(mf * (upper - lower)))) / n
    bias = excess_sum / (2.0 * n)
    return lower, upper, sens, bias


def _intervals_l1_ball(mf: np.ndarray, U: float, T: float, n: float,
                       excess_sum: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """d ≥ 2, ℓ1 ball (ERRATA E3): (a_ℓ = 0, b_ℓ = min{U, T/m_ℓ}, sensitivity, bias)."""
    lower = np.zeros(mf.size)
    upper = np.minimum(U, T / mf)
    # the corrected ℓ1 sensitivity of ℓ1-ball clipping: max_ℓ 2 m_ℓ b_ℓ / n (ERRATA E3)
    sens = 2.0 * float(np.max(mf * upper)) / n
    if not math.isclose(sens, 2.0 * T / n, rel_tol=1e-12, abs_tol=1e-300):
        raise AssertionError(f"d >= 2 sensitivity condition broken: {sens} != 2T/n = {2 * T / n}")
    bias = excess_sum / n
    return lower, upper, sens, bias


def optimal_error(counts: Any, bound: float, epsilons: Any, *, dim: int = 1) -> np.ndarray:
    """Worst-case error of the optimal plan over a grid of ε, in one vectorised call.

    d = 1: ``E^OPT(ε) = (1/n)[Σ_ℓ max{(U m_ℓ − T_ε)/2, 0} + d·T_ε/ε]`` (seed 001; ERRATA E5).
    d ≥ 2: ``2·E^OPT(ε)``, the error of the corrected strategy (ERRATA E3).

    Parameters
    ----------
    counts : array_like of int
    bound : float
    epsilons : float or array_like of float
        A scalar gives a length-1 array.
    dim : int

    Returns
    -------
    ndarray
        One error per ε, non-increasing in ε (constant ``U/2``, resp. ``U``, for ε ≤ 2d/L).

    Notes
    -----
    One sort of ``m`` (O(L log L)) and prefix sums, then O(log L) per ε via ``searchsorted``.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = as_epsilons(epsilons, "epsilons")
    d = check_dim(dim)
    L = m.size
    n = float(m.sum())
    v = U * np.sort(m)[::-1].astype(float)  # descending
    csum = np.concatenate(([0.0], np.cumsum(v)))
    k = threshold_rank(eps, d)
    T = np.where(k <= L, v[np.minimum(k, L) - 1], 0.0)
    # users strictly above T: count c, bias mass Σ (v − T) over them
    asc = v[::-1]
    c = L - np.searchsorted(asc, T, side="right")
    excess = csum[c] - c * T
    err = (excess / 2.0 + d * T / eps) / n
    return err if d == 1 else 2.0 * err


def _cube_plan(one: ClippingPlan, d: int, eps: float) -> ClippingPlan:
    """The cube plan from the 1-D optimum at ε/d: the same intervals on each of d coordinates.

    Bias and ℓ1 sensitivity add over coordinates (d times the 1-D ones), the noise is d Laplace
    coordinates of scale Δ/ε, so every term is d times the 1-D plan's at ε/d (models/clipping.md).
    """
    return dataclasses.replace(
        one, error=d * one.error, bias=d * one.bias, noise=d * one.noise, sensitivity=d * one.sensitivity,
        epsilon=eps, dim=d, objective=d * one.objective,
        info={**one.info, "geometry": "cube", "certificate_epsilon": one.epsilon})
