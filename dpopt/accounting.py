"""Privacy accounting in ρ-zCDP and its conversion to (ε, δ)-DP.

Zero-concentrated DP (Bun & Steinke, TCC 2016): M is ρ-zCDP if D_α(M(D) ‖ M(D')) ≤ ρα for every
α > 1 and neighbours D ~ D'. Facts used (models/gaussian.md):

* Gaussian noise N(0, σ²) (or the discrete N_ℤ(0, σ²) on integer statistics, Canonne–Kamath–Steinke
  2020 Theorem 4) on a statistic of ℓ2 sensitivity Δ is Δ²/(2σ²)-zCDP;
* composition: ρ-zCDP then ρ'-zCDP is (ρ + ρ')-zCDP (Bun–Steinke Lemma 2.3); over grids a user
  spends Σ_{g: user kept in g} ρ_g (:func:`user_rho`, via :meth:`dpopt.plan.GridPlan.user_cost`);
* pure ε-DP implies (ε²/2)-zCDP (Bun–Steinke Proposition 1.4);
* ρ-zCDP implies (ε, δ)-DP for (CKS 2020 Proposition 12 / Corollary 13)

      ε(ρ, δ) = inf_{α>1} ρα + (log(1/δ) + (α − 1)·log(1 − 1/α) − log α)/(α − 1),

  tighter than the classical ε = ρ + 2√(ρ·log(1/δ)) (Bun–Steinke Proposition 1.3), which is the
  same expression without the two last terms at α = 1 + √(log(1/δ)/ρ).

Every release's spend is one record, :class:`dpopt.measurements.BudgetSpend`, built by
:func:`compose_spend` from the pieces a release spent (basic composition of pure ε, or zCDP with the
pure-ε pieces at ε²/2 each); :func:`pure_epsilon` is the one ρ → ε step of a pure-ε piece inside a
ρ budget and :func:`split_delta` the one split of δ between private selection and the conversion.

Every α > 1 gives a valid (ε, δ) pair, so a numerical minimiser can only lose tightness, never
privacy; :func:`rho_from_epsilon` returns the lower end of its bisection bracket, whose computed ε is
≤ the target.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import optimize

from ._validation import DpoptInputError, _fail, _finite_real, check_delta, check_epsilon
from .measurements import BudgetSpend

if TYPE_CHECKING:  # pragma: no cover
    from .plan import GridPlan

__all__ = [
    "check_rho",
    "check_delta",
    "zcdp_epsilon",
    "zcdp_epsilon_alpha",
    "zcdp_epsilon_simple",
    "rho_from_epsilon",
    "pure_to_zcdp",
    "pure_epsilon",
    "compose_zcdp",
    "compose_spend",
    "split_delta",
    "user_rho",
    "ZcdpAccount",
    "zcdp_account",
]


def check_rho(rho: Any, name: str = "rho") -> float:
    """Validate a zCDP parameter ρ: a finite number > 0."""
    rule = "must be a positive finite number"
    out = _finite_real(rho, name, rule)
    if out <= 0:
        raise _fail(name, rule, rho)
    return out


def _objective(alpha: float, rho: float, log_inv_delta: float) -> float:
    """ρα + (log(1/δ) + (α − 1)log(1 − 1/α) − log α)/(α − 1) (CKS 2020 Corollary 13)."""
    am1 = alpha - 1.0
    return rho * alpha + (log_inv_delta + am1 * math.log1p(-1.0 / alpha) - math.log(alpha)) / am1


def _objective_x(x: float, rho: float, log_inv_delta: float) -> float:
    """:func:`_objective` at α = 1 + eˣ, written in α − 1 = eˣ so that it stays finite when eˣ is
    below the float spacing at 1 (huge ρ: α − 1 ≈ 1e-50 would round α to 1.0 and log(1 − 1/α) fail)."""
    am1 = math.exp(x)
    l1a = math.log1p(am1)  # log α
    return rho * (1.0 + am1) + (log_inv_delta + am1 * (x - l1a) - l1a) / am1


def zcdp_epsilon_alpha(rho: float, delta: float) -> tuple[float, float]:
    """(ε, α*) of :func:`zcdp_epsilon`: the tight ε and the Rényi order attaining it."""
    r = check_rho(rho)
    d = check_delta(delta)
    lid = -math.log(d)
    # the objective is smooth on α > 1; search x = log(α − 1) around the classical optimum
    x0 = 0.5 * math.log(lid / r)
    res = optimize.minimize_scalar(
        lambda x: _objective_x(x, r, lid),
        bounds=(x0 - 12.0, x0 + 12.0), method="bounded", options={"xatol": 1e-10, "maxiter": 500},
    )
    cands = [(float(res.fun), 1.0 + math.exp(float(res.x))), (_objective_x(x0, r, lid), 1.0 + math.exp(x0))]
    eps, alpha = min(cands)
    return max(eps, 0.0), alpha


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The ε such that ρ-zCDP implies (ε, δ)-DP, by the tight conversion of Canonne, Kamath &
    Steinke (2020, Proposition 12 / Corollary 13):

        ε = inf_{α>1} ρα + (log(1/δ) + (α − 1)·log(1 − 1/α) − log α)/(α − 1),

    minimised over α with :func:`scipy.optimize.minimize_scalar` on log(α − 1). Any α gives a valid
    ε, so the result is a valid (ε, δ) for ρ-zCDP even if the minimiser stops early.

    Parameters
    ----------
    rho : float
        ρ > 0 (finite), the zCDP parameter.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ε ≥ 0 such that ρ-zCDP implies (ε, δ)-DP; at most the classical :func:`zcdp_epsilon_simple`
        ρ + 2√(ρ·log(1/δ)) (Bun & Steinke 2016, Proposition 1.3).

    Raises
    ------
    DpoptInputError
        If ``rho`` is not a positive finite number or ``delta`` is not in (0, 1).
    """
    return zcdp_epsilon_alpha(rho, delta)[0]


def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """The classical conversion ε = ρ + 2√(ρ·log(1/δ)) (Bun & Steinke 2016, Proposition 1.3)."""
    r = check_rho(rho)
    d = check_delta(delta)
    return r + 2.0 * math.sqrt(r * -math.log(d))


def rho_from_epsilon(epsilon: float, delta: float, *, rtol: float = 1e-12) -> float:
    """The largest ρ (to relative ``rtol``) whose :func:`zcdp_epsilon` (ρ, δ) is ≤ ε: a total
    (ε, δ) budget as a zCDP budget. Bisection on log ρ; the lower end is returned, so
    ``zcdp_epsilon(rho_from_epsilon(ε, δ), δ) <= ε`` always holds.

    Inverts the tight conversion of Canonne, Kamath & Steinke (2020, Proposition 12 / Corollary 13),
    which is increasing in ρ.

    Parameters
    ----------
    epsilon : float
        ε > 0 (finite, ≤ 1e100) of the (ε, δ)-DP budget.
    delta : float
        δ in (0, 1) of the ρ → (ε, δ) conversion.
    rtol : float, default 1e-12, keyword-only
        Relative width > 0 of the final bisection bracket [ρ_lo, ρ_hi]: the answer is within a factor
        1 + ``rtol`` of the largest ρ.

    Returns
    -------
    float
        ρ > 0, the lower end of the final bracket (a zCDP budget that fits in (ε, δ)).

    Raises
    ------
    DpoptInputError
        If ``epsilon`` is not a positive finite number ≤ 1e100 or ``delta`` is not in (0, 1).
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 1e-15 <= float(rtol) < 1.0:
        raise DpoptInputError(f"`rtol` must be a number in [1e-15, 1) (the bisection stops within it; a float "
                              f"cannot resolve less); got {rtol!r}")
    # ε(ρ) is increasing in ρ; ρ = ε²/(4 log(1/δ)) satisfies the classical bound ≈ ε, bracket around it
    lo = eps * eps / (4.0 * (-math.log(d) + eps))
    while zcdp_epsilon(lo, d) > eps:
        lo /= 2.0
    hi = max(eps, 2.0 * lo)
    while zcdp_epsilon(hi, d) <= eps:
        hi *= 2.0
    while hi - lo > rtol * lo:
        mid = math.sqrt(lo * hi)
        if zcdp_epsilon(mid, d) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def pure_to_zcdp(epsilon: float) -> float:
    """ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 1.4)."""
    eps = check_epsilon(epsilon)
    return 0.5 * eps * eps


def pure_epsilon(rho: float) -> float:
    """The largest float ε with ε²/2 ≤ ρ exactly: the ε a pure ε-DP piece may spend inside a ρ-zCDP
    budget (it costs ε²/2, Bun & Steinke 2016 Proposition 1.4); 0 for ρ ≤ 0."""
    if rho <= 0:
        return 0.0
    e = math.sqrt(2.0 * rho)
    while Fraction(e) ** 2 / 2 > Fraction(rho):
        e = math.nextafter(e, 0.0)
    return e


def split_delta(delta: float, *, selection_share: float) -> tuple[float, float]:
    """(δ of private partition selection, δ of the ρ → (ε, δ) conversion): ``selection_share`` of
    δ to the selection, the rest to the conversion (the two add up to δ: basic composition of δ's)."""
    d_sel = selection_share * delta
    return d_sel, delta - d_sel


def compose_spend(pieces: Mapping[str, float], *, unit: str, pure: Collection[str] = (), delta: float = 0.0,
                  delta_conversion: float = 0.0) -> BudgetSpend:
    """The exact budget one user spends on a release, from what each of its steps spent.

    Parameters
    ----------
    pieces : Mapping[str, float]
        What each step spent, in order: ε under ``unit="epsilon"``; under ``unit="rho"`` ρ, except
        the names in ``pure``, which are pure ε-DP steps (bounds choice, partition selection)
        given in ε.
    unit : {"epsilon", "rho"}
        Pure ε-DP with basic composition (ε = Σ ε_i), or ρ-zCDP (ρ = Σ ρ_i + Σ_pure ε_i²/2,
        Bun & Steinke 2016 Lemma 2.3 and Proposition 1.4).
    pure : collection of str
        The pure-ε pieces under ``unit="rho"`` (ignored under ``"epsilon"``).
    delta : float
        δ of the (ε, δ) statement (selection's δ plus the conversion's).
    delta_conversion : float
        The part of δ the ρ → (ε, δ) conversion uses (:func:`zcdp_epsilon`; CKS 2020 Cor. 13).

    Returns
    -------
    BudgetSpend
        Totals summed exactly in rationals. Under ``"rho"`` the pieces are renamed ``<name>_rho``
        (first) and ``<name>_epsilon`` (the pure ones, after), and ``epsilon`` is the (ε, δ)
        conversion where δ > 0, else None.
    """
    if unit == "epsilon":
        total = float(sum((Fraction(v) for v in pieces.values()), Fraction(0)))
        return BudgetSpend("epsilon", total, dict(pieces), float(delta), total)
    if unit != "rho":
        raise _fail("unit", "must be 'epsilon' or 'rho'", unit)
    rho = sum((Fraction(v) for n, v in pieces.items() if n not in pure), Fraction(0)) \
        + sum((Fraction(v) ** 2 / 2 for n, v in pieces.items() if n in pure), Fraction(0))
    named = {**{f"{n}_rho": v for n, v in pieces.items() if n not in pure},
             **{f"{n}_epsilon": v for n, v in pieces.items() if n in pure}}
    total = float(rho)
    return BudgetSpend("rho", total, named, float(delta), zcdp_epsilon(total, delta_conversion) if delta > 0 else None)


def compose_zcdp(rhos: Sequence[float] | np.ndarray) -> float:
    """Sequential composition: Σ ρ_i (Bun & Steinke 2016, Lemma 2.3). Each ρ_i ≥ 0."""
    arr = np.asarray(rhos, dtype=float)
    if arr.ndim > 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise _fail("rhos", "must be a 1-D array of finite numbers >= 0", rhos)
    return float(arr.sum())


def user_rho(plan: "GridPlan") -> np.ndarray:
    """Each user's zCDP cost Σ_{g: Γ_{ℓ,g} > 0, released} (ρ_μ,g + ρ_Var,g)
    (:meth:`dpopt.plan.GridPlan.user_cost` for a plan in unit ``"rho"``)."""
    if plan.unit != "rho":
        raise DpoptInputError(f"`plan.unit` must be 'rho' for zCDP accounting; got {plan.unit!r}")
    return plan.user_cost()


@dataclass(frozen=True)
class ZcdpAccount:
    """A zCDP release's total cost and its (ε, δ) equivalents.

    Attributes
    ----------
    rho_total : float
        The largest ρ any user spends (Σ over the grids the user is kept in).
    delta : float
    epsilon_total : float
        The tight ε (CKS 2020 Corollary 13) with ρ_total-zCDP ⇒ (ε_total, δ)-DP.
    alpha : float
        The Rényi order attaining ``epsilon_total``.
    epsilon_simple : float
        ρ + 2√(ρ log(1/δ)), for comparison (always ≥ ``epsilon_total``).
    """

    rho_total: float
    delta: float
    epsilon_total: float
    alpha: float
    epsilon_simple: float


def zcdp_account(plan_or_rho: "GridPlan | float", delta: float) -> ZcdpAccount:
    """The (ρ_total, δ, ε_total) of a plan in unit ``"rho"`` (or of a total ρ given directly)."""
    from .plan import GridPlan

    rho = float(user_rho(plan_or_rho).max(initial=0.0)) if isinstance(plan_or_rho, GridPlan) else check_rho(plan_or_rho)
    d = check_delta(delta)
    if rho == 0.0:
        return ZcdpAccount(rho_total=0.0, delta=d, epsilon_total=0.0, alpha=math.inf, epsilon_simple=0.0)
    eps, alpha = zcdp_epsilon_alpha(rho, d)
    return ZcdpAccount(rho_total=rho, delta=d, epsilon_total=eps, alpha=alpha,
                       epsilon_simple=zcdp_epsilon_simple(rho, d))
