"""The error calculus: exact user-level sensitivities and worst-case clipping biases.

Notation (seed 002 §III–IV): a partition (grid) holds ``N = Σ_ℓ m_ℓ`` samples in ``[0, U]``; a
clipping keeps ``Γ_ℓ ∈ [0, m_ℓ]`` samples of user ℓ (the first Γ_ℓ, a rule fixed before seeing the
data); ``R = Σ_ℓ Γ_ℓ`` and ``Γ* = max_ℓ Γ_ℓ``. Neighbouring datasets differ in the sample values
of one user, the counts ``m_ℓ`` being public.

Everything here is exact (each formula is re-derived by brute force in ``tests/test_calculus.py``
with :mod:`dpopt.verify`) and vectorised: the ``*_from_totals`` kernels take arrays of
``(N, R, Γ*)`` for many grids at once.

Corrections implemented (models/errata.md):

* E1 — the cases of seed 002's Theorem IV.2 (worst-case variance bias) are swapped in the text;
  :func:`variance_bias` implements the corrected statement and :func:`variance_bias_seed_text`
  the printed one, kept only so the tests can show it disagreeing with brute force.
* E3 — for vector samples (d ≥ 2) the ℓ1-sensitivity of the clipped mean is
  ``max_ℓ 2·m_ℓ·b_ℓ / n``, not ``max_ℓ m_ℓ(b_ℓ − a_ℓ)/n`` (:func:`clipping_error_terms`).
* E9 — for d = 1 the worst-case bias of interval clipping is
  ``max{Σ m_ℓ(U − b_ℓ), Σ m_ℓ a_ℓ}/n``; Lemma III.1's ``Σ m_ℓ max{a_ℓ, U − b_ℓ}/n`` is only an upper
  bound (equal for symmetric strategies). :func:`clipping_error_terms` returns the exact value (E9).
* E11 — seed 002 Proposition II.1's Laplace tail ``Δ·ln(1/δ)/ε`` holds for d = 1 only; for d ≥ 2
  the ℓ1 norm of the noise is Gamma(d, Δ/ε) and :func:`laplace_l1_tail` gives the exact threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ._validation import (
    DpoptInputError,
    as_counts,
    as_epsilons,
    as_interval_bounds,
    as_retained,
    check_bound,
    check_choice,
    check_dim,
    check_delta,
    check_epsilon,
    check_positive_int,
)

if TYPE_CHECKING:  # pragma: no cover
    from .occupancy import Occupancy

__all__ = [
    "mean_sensitivity",
    "variance_sensitivity",
    "mean_bias",
    "variance_bias",
    "variance_bias_seed_text",
    "clipping_error",
    "clipping_error_terms",
    "ClippingErrorTerms",
    "mean_sensitivity_from_totals",
    "variance_sensitivity_from_totals",
    "mean_bias_from_totals",
    "variance_bias_from_totals",
    "grid_error_terms",
    "GridErrorTerms",
    "grid_errors",
    "basic_composition",
    "parallel_composition",
    "gaussian_sigma",
    "gaussian_mean_abs",
    "gaussian_quantile",
    "gaussian_rho_split",
    "pair_l2_sensitivity_from_totals",
    "gaussian_grid_error_terms",
    "GaussianGridErrorTerms",
    "gaussian_grid_errors",
    "laplace_l1_tail",
    "laplace_l1_tail_probability",
]

Split = Literal["equal", "optimal"]


# --------------------------------------------------------------------------------------------
# vectorised kernels on per-grid totals
# --------------------------------------------------------------------------------------------
def _half_split_max(total: np.ndarray) -> np.ndarray:
    """max_k k(n−k)/n² over integers 0 ≤ k ≤ n: 1/4 for n even, (1 − 1/n²)/4 for n odd."""
    total = np.asarray(total, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        odd = np.mod(total, 2) == 1
        return np.where(odd, 0.25 * (1.0 - 1.0 / total**2), 0.25)


def mean_sensitivity_from_totals(
    retained_total: Any, retained_max: Any, bound: float
) -> np.ndarray:
    """Δ_μ = U·Γ*/R (seed 002 eq. (5) and (9)); ``inf`` where R = 0 (nothing to release)."""
    R = np.asarray(retained_total, dtype=float)
    g = np.asarray(retained_max, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(R > 0, bound * g / R, np.inf)


def variance_sensitivity_from_totals(
    retained_total: Any, retained_max: Any, bound: float
) -> np.ndarray:
    """Exact Δ_Var of the clipped variance (seed 002 Prop. III.1 / Lemma III.3).

    ``U²·Γ*(R − Γ*)/R²`` if ``R > 2Γ*``; ``U²/4`` if ``R ≤ 2Γ*`` and R even;
    ``U²/4·(1 − 1/R²)`` if ``R ≤ 2Γ*`` and R odd; ``inf`` where R = 0.
    """
    R = np.asarray(retained_total, dtype=float)
    g = np.asarray(retained_max, dtype=float)
    U2 = bound * bound
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = U2 * g * (R - g) / R**2
        capped = U2 * _half_split_max(R)
        out = np.where(R > 2 * g, spread, capped)
        return np.where(R > 0, out, np.inf)


def mean_bias_from_totals(total: Any, retained_total: Any, bound: float) -> np.ndarray:
    """Worst-case clipping bias of the mean, E_μ = U·(1 − R/N) (seed 002 Thm IV.1)."""
    N = np.asarray(total, dtype=float)
    R = np.asarray(retained_total, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(R > 0, bound * (1.0 - R / N), np.inf)


def variance_bias_from_totals(total: Any, retained_total: Any, bound: float) -> np.ndarray:
    """Worst-case clipping bias of the variance, corrected seed 002 Thm IV.2 (ERRATA E1).

    ``0`` if R = N; ``U²·R(N − R)/N²`` if 2R > N; ``U²/4`` if 2R ≤ N, N even;
    ``U²/4·(1 − 1/N²)`` if 2R ≤ N, N odd. Equivalently ``U²·k(N − k)/N²`` with
    ``k = min(N − R, ⌊N/2⌋)``. ``inf`` where R = 0.
    """
    N = np.asarray(total, dtype=float)
    R = np.asarray(retained_total, dtype=float)
    k = np.minimum(N - R, np.floor(N / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = bound * bound * k * (N - k) / N**2
        return np.where(R > 0, out, np.inf)


# --------------------------------------------------------------------------------------------
# one partition
# --------------------------------------------------------------------------------------------
def mean_sensitivity(retained: Any, bound: float) -> float:
    """User-level sensitivity of the clipped mean, ``U·Γ*/ΣΓ`` (seed 002 eq. (9)).

    Parameters
    ----------
    retained : array_like of int
        Γ_ℓ, the number of samples kept per user (not all zero). With ``retained = counts`` this
        is the sensitivity of the plain mean, seed 002 eq. (5).
    bound : float
        U > 0; samples lie in [0, U].

    Returns
    -------
    float
        Δ_μ = U·max_ℓ Γ_ℓ/Σ_ℓ Γ_ℓ, in the units of the samples; finite, as Σ_ℓ Γ_ℓ > 0 is required.

    Raises
    ------
    DpoptInputError
        If ``retained`` is not a non-empty 1-D array of whole numbers ≥ 0 with a positive entry, or ``bound`` is
        not a positive finite number ≤ 1e100.
    """
    gamma = as_retained(retained)
    U = check_bound(bound)
    return float(mean_sensitivity_from_totals(gamma.sum(), gamma.max(), U))


def variance_sensitivity(retained: Any, bound: float) -> float:
    """Exact user-level sensitivity of the clipped variance (seed 002 Prop. III.1, Lemma III.3).

    See :func:`variance_sensitivity_from_totals` for the three cases. Verified by brute force
    over all one-user neighbours (ERRATA E1: this proposition is correct as printed). Seed 002
    eq. (12) keeps only its first case, which underprices some grids where one user holds more than
    half of the retained samples (ERRATA E10).

    Parameters
    ----------
    retained : array_like of int
        Γ_ℓ, the number of samples kept per user (not all zero); ``retained = counts`` for the
        plain variance.
    bound : float
        U > 0; samples lie in [0, U].

    Returns
    -------
    float
        Δ_Var in squared sample units, with R = Σ_ℓ Γ_ℓ and Γ* = max_ℓ Γ_ℓ: ``U²·Γ*(R − Γ*)/R²`` if
        R > 2Γ*, else ``U²/4`` (R even) or ``U²/4·(1 − 1/R²)`` (R odd); finite, as R > 0 is required.

    Raises
    ------
    DpoptInputError
        If ``retained`` is not a non-empty 1-D array of whole numbers ≥ 0 with a positive entry, or ``bound`` is
        not a positive finite number ≤ 1e100.
    """
    gamma = as_retained(retained)
    U = check_bound(bound)
    return float(variance_sensitivity_from_totals(gamma.sum(), gamma.max(), U))


def mean_bias(retained: Any, counts: Any, bound: float) -> float:
    """Worst-case bias of the clipped mean, ``U·(1 − ΣΓ/Σm)`` (seed 002 Thm IV.1).

    Parameters
    ----------
    retained : array_like of int
        Γ_ℓ, the number of samples kept per user, ``0 ≤ Γ_ℓ ≤ m_ℓ`` (not all zero).
    counts : array_like of int
        m_ℓ ≥ 1, the samples of each user (same shape as ``retained``).
    bound : float
        U > 0; samples lie in [0, U].

    Returns
    -------
    float
        E_μ = U·(1 − R/N) with R = Σ_ℓ Γ_ℓ, N = Σ_ℓ m_ℓ, in sample units; 0 when every sample is kept.

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1, ``retained`` is not whole numbers
        ``0 ≤ Γ_ℓ ≤ m_ℓ`` of the same shape with a positive entry, or ``bound`` is not a positive finite number
        ≤ 1e100.
    """
    m = as_counts(counts)
    gamma = as_retained(retained, m)
    U = check_bound(bound)
    return float(mean_bias_from_totals(m.sum(), gamma.sum(), U))


def variance_bias(retained: Any, counts: Any, bound: float) -> float:
    """Worst-case bias of the clipped variance, corrected seed 002 Thm IV.2 (ERRATA E1).

    See :func:`variance_bias_from_totals`.

    Parameters
    ----------
    retained : array_like of int
        Γ_ℓ, the number of samples kept per user, ``0 ≤ Γ_ℓ ≤ m_ℓ`` (not all zero).
    counts : array_like of int
        m_ℓ ≥ 1, the samples of each user (same shape as ``retained``).
    bound : float
        U > 0; samples lie in [0, U].

    Returns
    -------
    float
        E_Var in squared sample units, with R = Σ_ℓ Γ_ℓ and N = Σ_ℓ m_ℓ: 0 if R = N; ``U²·R(N − R)/N²`` if
        2R > N; ``U²/4`` (N even) or ``U²/4·(1 − 1/N²)`` (N odd) if 2R ≤ N.

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1, ``retained`` is not whole numbers
        ``0 ≤ Γ_ℓ ≤ m_ℓ`` of the same shape with a positive entry, or ``bound`` is not a positive finite number
        ≤ 1e100.
    """
    m = as_counts(counts)
    gamma = as_retained(retained, m)
    U = check_bound(bound)
    return float(variance_bias_from_totals(m.sum(), gamma.sum(), U))


def variance_bias_seed_text(retained: Any, counts: Any, bound: float) -> float:
    """Seed 002's Theorem IV.2 **as printed** (cases swapped). Wrong; kept for the errata tests (ERRATA E1).

    ``U²·R(N − R)/N²`` if N > 2R; ``U²/4`` (even N) or ``U²/4·(1 − 1/N²)`` (odd N) if N ≤ 2R.
    Use :func:`variance_bias` for the correct value.

    Parameters
    ----------
    retained : array_like of int
        Γ_ℓ, the number of samples kept per user, ``0 ≤ Γ_ℓ ≤ m_ℓ`` (not all zero).
    counts : array_like of int
        m_ℓ ≥ 1, the samples of each user (same shape as ``retained``).
    bound : float
        U > 0; samples lie in [0, U].

    Returns
    -------
    float
        The printed theorem's value in squared sample units (0 if R = N), with R = Σ_ℓ Γ_ℓ, N = Σ_ℓ m_ℓ.

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1, ``retained`` is not whole numbers
        ``0 ≤ Γ_ℓ ≤ m_ℓ`` of the same shape with a positive entry, or ``bound`` is not a positive finite number
        ≤ 1e100.
    """
    m = as_counts(counts)
    gamma = as_retained(retained, m)
    U = check_bound(bound)
    N, R = float(m.sum()), float(gamma.sum())
    if R == N:
        return 0.0
    if N > 2 * R:
        return U * U * R * (N - R) / N**2
    return float(U * U * _half_split_max(np.array(N)))


# --------------------------------------------------------------------------------------------
# clipping strategies of seeds 000/001
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClippingErrorTerms:
    """Worst-case error of a per-user clipping strategy: ``error = bias + noise``.

    Attributes
    ----------
    bias : float
        ``max_D ‖f(D) − f̄(D)‖₁`` (exact for d = 1; a supremum for d ≥ 2).
    sensitivity : float
        ℓ1 user-level sensitivity Δ of the clipped mean f̄.
    noise : float
        ``E‖Z‖₁ = d·Δ/ε`` for i.i.d. Laplace(Δ/ε) noise per coordinate.
    error : float
        ``bias + noise``.
    """

    bias: float
    sensitivity: float
    noise: float
    error: float


def clipping_error_terms(
    counts: Any,
    bound: float,
    epsilon: float,
    lower: Any,
    upper: Any,
    *,
    dim: int = 1,
) -> ClippingErrorTerms:
    """Bias, sensitivity, noise and worst-case error of per-user clipping (seeds 000/001).

    Parameters
    ----------
    counts : array_like of int
        m_ℓ ≥ 1, samples per user.
    bound : float
        U: samples satisfy ``0 ≤ x ≤ U`` (d = 1) or ``x ≥ 0, ‖x‖₁ ≤ U`` (d ≥ 2).
    epsilon : float
        ε > 0, the privacy parameter of the Laplace mechanism on the clipped mean.
    lower, upper : float or array_like
        Per-user ``a_ℓ ≤ b_ℓ`` in [0, U] (a scalar: the same for every user): for d = 1 each sample
        of user ℓ is clipped to ``[a_ℓ, b_ℓ]``; for d ≥ 2 it is ℓ1-projected on ``a_ℓ ≤ ‖y‖₁ ≤ b_ℓ``.
    dim : int, default 1
        d ≥ 1, the dimension of the samples.

    Returns
    -------
    ClippingErrorTerms
        ``bias`` and ``sensitivity`` Δ (sample units), ``noise = d·Δ/ε`` and ``error = bias + noise``.

    Raises
    ------
    DpoptInputError
        Bad ``counts``, ``bound``, ``epsilon`` or ``dim``, or bounds not of length L within ``0 ≤ a_ℓ ≤ b_ℓ ≤ U``.

    Notes
    -----
    With ``n = Σ m_ℓ``:

    * d = 1 (seed 000 Lemma III.1, exact form, ERRATA E9):
      bias ``= max{Σ m_ℓ(U − b_ℓ), Σ m_ℓ a_ℓ}/n``, ``Δ = max_ℓ m_ℓ(b_ℓ − a_ℓ)/n``.
    * d ≥ 2 (seed 001 Lemma III.2; sensitivity corrected by ERRATA E3):
      bias ``= Σ m_ℓ max{a_ℓ, U − b_ℓ}/n``, ``Δ = max_ℓ 2·m_ℓ·b_ℓ/n``, because two points of the
      annulus (``b·e₁`` and ``b·e₂``) are ``2b`` apart in ℓ1.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    a, b = as_interval_bounds(lower, upper, m.size, U)
    n = float(m.sum())
    mf = m.astype(float)
    if d == 1:
        bias = max(float(mf @ (U - b)), float(mf @ a)) / n
        sens = float(np.max(mf * (b - a))) / n
    else:
        bias = float(mf @ np.maximum(a, U - b)) / n
        sens = float(np.max(2.0 * mf * b)) / n
    noise = d * sens / eps
    return ClippingErrorTerms(bias=bias, sensitivity=sens, noise=noise, error=bias + noise)


def clipping_error(counts: Any, bound: float, epsilon: float, lower: Any, upper: Any, *, dim: int = 1) -> float:
    """Worst-case error (bias + expected ℓ1 Laplace noise) of any per-user clipping (seeds 000/001).

    See :func:`clipping_error_terms` for the terms and the formulas (exact d = 1 bias: ERRATA E9;
    d ≥ 2 sensitivity: ERRATA E3).

    Parameters
    ----------
    counts : array_like of int
        m_ℓ ≥ 1, samples per user.
    bound : float
        U > 0: samples satisfy ``0 ≤ x ≤ U`` (d = 1) or ``x ≥ 0, ‖x‖₁ ≤ U`` (d ≥ 2).
    epsilon : float
        ε > 0, the privacy parameter of the Laplace mechanism on the clipped mean.
    lower, upper : float or array_like
        Per-user ``a_ℓ ≤ b_ℓ`` in [0, U] (a scalar: the same for every user), as in
        :func:`clipping_error_terms`.
    dim : int, default 1
        d ≥ 1, the dimension of the samples.

    Returns
    -------
    float
        ``bias + d·Δ/ε``, the worst-case expected ℓ1 error in sample units.

    Raises
    ------
    DpoptInputError
        Bad ``counts``, ``bound``, ``epsilon`` or ``dim``, or bounds not of length L within ``0 ≤ a_ℓ ≤ b_ℓ ≤ U``.
    """
    return clipping_error_terms(counts, bound, epsilon, lower, upper, dim=dim).error


# --------------------------------------------------------------------------------------------
# many grids (seed 002 §V)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridErrorTerms:
    """Per-grid worst-case error of BASELINE/CLIP and its parts (arrays of length G).

    ``error = mean_bias + variance_bias + noise`` with
    ``noise = 2Δ_μ/ε + 2Δ_Var/ε`` (equal split, seed 002 eq. (12)) or
    ``(√Δ_μ + √Δ_Var)²/ε`` (best split ε₁ + ε₂ = ε).
    """

    mean_bias: np.ndarray
    variance_bias: np.ndarray
    mean_sensitivity: np.ndarray
    variance_sensitivity: np.ndarray
    noise: np.ndarray
    error: np.ndarray
    epsilon_mean: np.ndarray
    epsilon_variance: np.ndarray


def _grid_count_array(value: Any, name: str) -> np.ndarray:
    """Per-grid counts: 1-D (a scalar is one grid), whole numbers >= 0 (NaN, 2.5, -1 refused)."""
    arr = np.atleast_1d(np.asarray(value)) if np.isscalar(value) or np.ndim(value) == 0 else value
    return as_retained(arr, name=name, require_positive_total=False)


def _check_grid_counts(N: np.ndarray, R: np.ndarray, g: np.ndarray) -> None:
    """0 <= Γ* <= R <= N per grid, and Γ* >= 1 exactly when R >= 1 (R samples kept by users who each
    keep at most Γ*: Γ* = 0 with R = 3 is impossible and would give sensitivity 0)."""
    checks = (
        (R > N, "`retained_totals` must not exceed `totals`", R, N),
        (g > R, "`retained_max` must not exceed `retained_totals`", g, R),
        ((g == 0) & (R > 0), "`retained_max` must be >= 1 where `retained_totals` > 0", g, R),
    )
    for bad, rule, a, b in checks:
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise DpoptInputError(f"{rule} (grid {i}: {a[i]} vs {b[i]})")


def _grid_totals(totals: Any, retained_totals: Any, retained_max: Any) -> tuple[np.ndarray, ...]:
    """N_g, R_g, Γ*_g validated (whole numbers, one 1-D shape, :func:`_check_grid_counts`), as floats."""
    N, R, g = (
        _grid_count_array(v, name)
        for v, name in ((totals, "totals"), (retained_totals, "retained_totals"), (retained_max, "retained_max"))
    )
    if not (N.shape == R.shape == g.shape):
        raise DpoptInputError(
            f"`totals`, `retained_totals`, `retained_max` must be 1-D of one shape; "
            f"got {N.shape}, {R.shape}, {g.shape}"
        )
    _check_grid_counts(N, R, g)
    return N.astype(float), R.astype(float), g.astype(float)


def grid_error_terms(
    totals: Any,
    retained_totals: Any,
    retained_max: Any,
    bound: float,
    epsilon: Any,
    *,
    split: Split = "equal",
) -> GridErrorTerms:
    """Worst-case error of the CLIP mechanism in many grids at once (seed 002 eq. (11)–(13)).

    Parameters
    ----------
    totals : array_like
        N_g = Σ_ℓ m_{g,ℓ} per grid.
    retained_totals : array_like
        R_g = Σ_ℓ Γ_{g,ℓ} (equal to N_g for BASELINE).
    retained_max : array_like
        Γ*_g = max_ℓ Γ_{g,ℓ} (m*_g for BASELINE).
    bound : float
        U.
    epsilon : float or array_like
        ε per grid (a scalar is used for every grid).
    split : {"equal", "optimal"}
        ``"equal"``: ε/2 to the mean and ε/2 to the variance, as in the paper;
        ``"optimal"``: the split minimising the noise, ``ε₁ = ε·√Δ_μ/(√Δ_μ + √Δ_Var)``.

    Returns
    -------
    GridErrorTerms
        A grid with R_g = 0 (everything suppressed) has error ``inf``.
    """
    U = check_bound(bound)
    check_choice(split, "split", ("equal", "optimal"))
    N, R, g = _grid_totals(totals, retained_totals, retained_max)
    eps = as_epsilons(epsilon, size=N.size)
    dmu = mean_sensitivity_from_totals(R, g, U)
    dvar = variance_sensitivity_from_totals(R, g, U)
    if split == "equal":
        e_mu = e_var = eps / 2
        noise = 2 * dmu / eps + 2 * dvar / eps
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            smu, svar = np.sqrt(dmu), np.sqrt(dvar)
            frac = np.where(np.isfinite(smu + svar) & (smu + svar > 0), smu / (smu + svar), 0.5)
        e_mu, e_var = eps * frac, eps * (1 - frac)
        noise = (np.sqrt(dmu) + np.sqrt(dvar)) ** 2 / eps
    bmu = mean_bias_from_totals(N, R, U)
    bvar = variance_bias_from_totals(N, R, U)
    error = bmu + bvar + noise
    return GridErrorTerms(mean_bias=bmu, variance_bias=bvar, mean_sensitivity=dmu, variance_sensitivity=dvar,
                          noise=noise, error=error, epsilon_mean=e_mu, epsilon_variance=e_var)


def _check_occupancy(occ: Any) -> None:
    from .occupancy import Occupancy

    if not isinstance(occ, Occupancy):
        raise DpoptInputError(
            f"`occ` must be a dpopt.Occupancy (Occupancy.from_triples/from_frame); got {type(occ).__name__}"
        )


def grid_errors(occ: "Occupancy", bound: float, epsilon: Any, *, suppressed: Any = None, split: Split = "equal",
                terms: bool = False) -> np.ndarray | GridErrorTerms:
    """Per-grid worst-case error E_g of BASELINE (``suppressed=None``) or CLIP after suppression.

    Parameters
    ----------
    occ : Occupancy
        The public user × grid count array.
    bound : float
        U.
    epsilon : float or array_like
        ε per grid.
    suppressed : iterable of (user, grid) label pairs, optional
        Contributions removed entirely (Γ_{g,ℓ} = 0), as CLIP-USER does.
    split : {"equal", "optimal"}
        Budget split between mean and variance (see :func:`grid_error_terms`).
    terms : bool
        Return the :class:`GridErrorTerms` instead of the error array.

    Returns
    -------
    ndarray of shape (G,) in the order of ``occ.grids`` (or the terms).
    """
    R, gmax = _retained_totals(occ, suppressed)
    out = grid_error_terms(occ.grid_totals, R, gmax, bound, epsilon, split=split)
    return out if terms else out.error


def _retained_totals(occ: "Occupancy", suppressed: Any) -> tuple[np.ndarray, np.ndarray]:
    """(R_g, Γ*_g) per grid after removing the ``suppressed`` (user, grid) pairs."""
    _check_occupancy(occ)
    retained = occ.retained_matrix(suppressed)
    R = np.asarray(retained.sum(axis=0)).ravel()
    gmax = np.asarray(retained.max(axis=0).toarray()).ravel() if retained.nnz else np.zeros(occ.n_grids)
    return R, gmax


# --------------------------------------------------------------------------------------------
# composition accounting (seed 002 §II)
# --------------------------------------------------------------------------------------------
def basic_composition(epsilon: Any, n_grids: int | None = None) -> float:
    """Basic composition (seed 002 Thm II.2): Σ_g ε_g (``n_grids·ε`` for a uniform ε).

    Parameters
    ----------
    epsilon : float or array_like
        ε_g > 0 (finite) per grid: a number (the same ε in every grid) or a non-empty 1-D array.
    n_grids : int, optional
        G ≥ 1: the number of grids a scalar ``epsilon`` is spent in, or the length an array must have.
        Default None: an array's own length; a scalar then counts once.

    Returns
    -------
    float
        Σ_g ε_g, the privacy loss of releasing every grid when one user may appear in all of them.

    Raises
    ------
    DpoptInputError
        If ``n_grids`` is not an integer ≥ 1, an ε_g is not a positive finite number ≤ 1e100, or the
        array's length is not ``n_grids``.
    """
    n_grids = None if n_grids is None else check_positive_int(n_grids, "n_grids")
    eps = as_epsilons(epsilon, size=n_grids)
    return float(eps.sum())


def parallel_composition(
    occ: "Occupancy", epsilon: Any, *, suppressed: Any = None
) -> float:
    """User-level parallel composition (seed 002 Thm II.3): ``max_ℓ Σ_{g ∈ G_ℓ} ε_g``.

    Only grids where a user keeps at least one sample count (a suppressed contribution does not
    touch the release of that grid). With a uniform ε this is ``K·ε`` where ``K = max_ℓ G_ℓ``.

    Parameters
    ----------
    occ : Occupancy
        The public user × grid count array.
    epsilon : float or array_like
        ε_g > 0 per grid, in the order of ``occ.grids`` (a number: the same in every grid).
    suppressed : iterable of (user, grid) label pairs, optional
        Contributions removed entirely (Γ_{g,ℓ} = 0), as CLIP-USER does; each must be an occupied
        pair. Default None: nothing suppressed.

    Returns
    -------
    float
        ``max_ℓ Σ_{g ∈ G_ℓ} ε_g``, G_ℓ the grids where user ℓ keeps a sample; 0.0 if no user keeps any.

    Raises
    ------
    DpoptInputError
        If ``occ`` is not an :class:`Occupancy`, ``epsilon`` is not positive finite numbers (one per
        grid), or a ``suppressed`` entry is not an occupied (user, grid) pair.
    """
    _check_occupancy(occ)
    eps = as_epsilons(epsilon, size=occ.n_grids)
    retained = occ.retained_matrix(suppressed)
    member = retained.copy()
    member.data = (member.data > 0).astype(float)
    per_user = member @ eps
    return float(per_user.max()) if per_user.size else 0.0


# --------------------------------------------------------------------------------------------
# Gaussian noise and ρ-zCDP (models/gaussian.md)
# --------------------------------------------------------------------------------------------
def _as_rhos(rho: Any, size: int) -> np.ndarray:
    """A scalar or 1-D array of ρ ≥ 0 (finite) of length ``size``."""
    arr = np.asarray(rho, dtype=float)
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    if arr.shape != (size,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DpoptInputError(f"`rho` must be a number or a 1-D array of {size} finite numbers >= 0; got shape {arr.shape}")
    return arr


def gaussian_sigma(sensitivity: Any, rho: Any) -> np.ndarray:
    """σ = Δ/√(2ρ): the Gaussian noise scale that makes a statistic of ℓ2 sensitivity Δ ρ-zCDP
    (Bun & Steinke 2016 Prop. 1.6; for the discrete Gaussian CKS 2020 Thm 4).

    Elementwise; Δ = 0 gives σ = 0 (no noise needed), ρ = 0 with Δ > 0 gives ``inf``.
    """
    d = np.asarray(sensitivity, dtype=float)
    r = np.asarray(rho, dtype=float)
    if np.any(d < 0) or np.any(r < 0) or np.any(np.isnan(d)) or np.any(np.isnan(r)):
        raise DpoptInputError("`sensitivity` and `rho` must be >= 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d == 0, 0.0, d / np.sqrt(2.0 * r))


def gaussian_mean_abs(sigma: Any) -> np.ndarray:
    """E|Z| = σ√(2/π) for Z ~ N(0, σ²) (the Gaussian analogue of E|Lap(b)| = b)."""
    return np.asarray(sigma, dtype=float) * np.sqrt(2.0 / np.pi)


def gaussian_quantile(sigma: Any, q: float) -> np.ndarray:
    """The q-quantile of |Z|, Z ~ N(0, σ²): σ·Φ⁻¹((1 + q)/2), so P[|Z| ≤ it] = q."""
    from scipy.special import ndtri

    qq = float(q)
    if not 0.0 < qq < 1.0:
        raise DpoptInputError(f"`q` must lie in (0, 1); got {q!r}")
    return np.asarray(sigma, dtype=float) * float(ndtri(0.5 * (1.0 + qq)))


def gaussian_rho_split(
    mean_sensitivity: Any, variance_sensitivity: Any, rho: Any, *, split: Split = "equal"
) -> tuple[np.ndarray, np.ndarray]:
    """(ρ_μ, ρ_Var) with ρ_μ + ρ_Var = ρ per grid.

    ``"equal"``: ρ/2 each. ``"optimal"``: ρ_i = ρ·Δ_i^{2/3}/(Δ_μ^{2/3} + Δ_Var^{2/3}), the minimiser of
    the total noise σ_μ + σ_Var = Δ_μ/√(2ρ_μ) + Δ_Var/√(2ρ_Var) (Lagrange: Δ_i·ρ_i^{-3/2} equal),
    with minimum (Δ_μ^{2/3} + Δ_Var^{2/3})^{3/2}/√(2ρ). Expected absolute errors and quantiles are
    fixed multiples of σ, so the same split minimises them. A statistic with Δ = 0 gets ρ = 0.
    """
    check_choice(split, "split", ("equal", "optimal"))
    dmu = np.asarray(mean_sensitivity, dtype=float)
    dvar = np.asarray(variance_sensitivity, dtype=float)
    r = np.asarray(rho, dtype=float)
    if split == "equal":
        return r / 2, r / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b = np.cbrt(dmu * dmu), np.cbrt(dvar * dvar)
        frac = np.where(np.isfinite(a + b) & (a + b > 0), a / (a + b), 0.5)
    return r * frac, r * (1.0 - frac)


def pair_l2_sensitivity_from_totals(retained_total: Any, retained_max: Any, bound: float) -> np.ndarray:
    """√(Δ_μ² + Δ_Var²), the ℓ2 sensitivity bound of the CLIP pair (μ_clip, Var_clip).

    Always an upper bound on sup_{D~D'} ‖(μ, Var)(D) − (μ, Var)(D')‖₂ (each coordinate is bounded
    by its own sensitivity). **Exact iff R ≥ 2Γ* − 1**: put the other users' R − Γ* samples at 0
    and move the changed user's Γ* samples from 0 to U: the mean moves by UΓ*/R = Δ_μ and the
    variance by U²Γ*(R − Γ*)/R², which is Δ_Var when R > 2Γ* and when Γ* ∈ {⌊R/2⌋, ⌈R/2⌉}.
    For R < 2Γ* − 1 brute force (tests/test_gaussian_calculus.py) finds the sup strictly smaller:
    the mean's extreme needs all of the user's samples to move together, the variance's an
    interior split. Because the same pair attains both extremes, the bound is also exact for
    every weighting (Δ_μ/σ_μ, Δ_Var/σ_Var), i.e. separate ρ shares ρ_i = Δ_i²/(2σ_i²) lose nothing
    against joint accounting when R ≥ 2Γ* − 1. ``inf`` where R = 0.
    """
    U = check_bound(bound)
    return np.hypot(mean_sensitivity_from_totals(retained_total, retained_max, U),
                    variance_sensitivity_from_totals(retained_total, retained_max, U))


@dataclass(frozen=True)
class GaussianGridErrorTerms:
    """Per-grid worst-case error of CLIP with Gaussian noise (arrays of length G).

    ``error = mean_bias + variance_bias + noise`` with ``noise = c·(σ_μ + σ_Var)``, ``c = √(2/π)``
    (expected absolute noise) or ``c = Φ⁻¹((1 + q)/2)`` (each statistic's q-quantile), and
    ``σ_i = Δ_i/√(2ρ_i)``.
    """

    mean_bias: np.ndarray
    variance_bias: np.ndarray
    mean_sensitivity: np.ndarray
    variance_sensitivity: np.ndarray
    rho_mean: np.ndarray
    rho_variance: np.ndarray
    sigma_mean: np.ndarray
    sigma_variance: np.ndarray
    noise: np.ndarray
    error: np.ndarray


def gaussian_grid_error_terms(
    totals: Any,
    retained_totals: Any,
    retained_max: Any,
    bound: float,
    rho: Any,
    *,
    split: Split = "equal",
    quantile: float | None = None,
) -> GaussianGridErrorTerms:
    """Worst-case error of CLIP with Gaussian noise in many grids: the Gaussian counterpart of
    :func:`grid_error_terms` (seed 002 eq. (11)–(13) with N(0, σ_i²) in place of Lap(Δ_i/ε_i)).

    Parameters
    ----------
    totals, retained_totals, retained_max : array_like
        N_g, R_g, Γ*_g per grid (as :func:`grid_error_terms`).
    bound : float
        U.
    rho : float or array_like
        ρ_g per grid (zCDP; mean and variance together).
    split : {"equal", "optimal"}
        ρ_g/2 each, or ρ_i ∝ Δ_i^{2/3} (:func:`gaussian_rho_split`).
    quantile : float in (0, 1), optional
        Plan for each statistic's q-quantile of |noise| instead of its expectation.

    Returns
    -------
    GaussianGridErrorTerms
        A grid with R_g = 0 has error ``inf``; ρ_g = 0 with Δ > 0 gives ``inf`` noise.
    """
    U = check_bound(bound)
    check_choice(split, "split", ("equal", "optimal"))
    N, R, g = _grid_totals(totals, retained_totals, retained_max)
    r = _as_rhos(rho, N.size)
    dmu = mean_sensitivity_from_totals(R, g, U)
    dvar = variance_sensitivity_from_totals(R, g, U)
    r_mu, r_var = gaussian_rho_split(dmu, dvar, r, split=split)
    s_mu, s_var = gaussian_sigma(dmu, r_mu), gaussian_sigma(dvar, r_var)
    if quantile is None:
        noise = gaussian_mean_abs(s_mu) + gaussian_mean_abs(s_var)
    else:
        noise = gaussian_quantile(s_mu, quantile) + gaussian_quantile(s_var, quantile)
    bmu = mean_bias_from_totals(N, R, U)
    bvar = variance_bias_from_totals(N, R, U)
    return GaussianGridErrorTerms(
        mean_bias=bmu, variance_bias=bvar, mean_sensitivity=dmu, variance_sensitivity=dvar,
        rho_mean=r_mu, rho_variance=r_var, sigma_mean=s_mu, sigma_variance=s_var,
        noise=noise, error=bmu + bvar + noise,
    )


def gaussian_grid_errors(
    occ: "Occupancy",
    bound: float,
    rho: Any,
    *,
    suppressed: Any = None,
    split: Split = "equal",
    quantile: float | None = None,
    terms: bool = False,
) -> np.ndarray | GaussianGridErrorTerms:
    """Per-grid worst-case error with Gaussian noise of BASELINE or CLIP after suppression:
    :func:`grid_errors` with ρ_g in place of ε_g (:func:`gaussian_grid_error_terms`)."""
    R, gmax = _retained_totals(occ, suppressed)
    out = gaussian_grid_error_terms(occ.grid_totals, R, gmax, bound, rho, split=split, quantile=quantile)
    return out if terms else out.error


# --------------------------------------------------------------------------------------------
# tail of d-dimensional Laplace noise (seed 002 Prop. II.1, corrected: models/errata.md E11)
# --------------------------------------------------------------------------------------------
def laplace_l1_tail(sensitivity: float, epsilon: float, delta: float, *, dim: int = 1) -> float:
    """The threshold t with ``P[‖Z‖₁ ≥ t] = δ`` for ``Z`` = d i.i.d. Laplace(Δ/ε) coordinates.

    ``‖Z‖₁`` is a sum of d exponentials of mean Δ/ε, i.e. Gamma(d, scale Δ/ε), so
    ``t = Δ·Q_d(1 − δ)/ε`` with ``Q_d`` the Gamma(d, 1) quantile. For d = 1 this is seed 002
    Proposition II.1's ``Δ·ln(1/δ)/ε``; for d ≥ 2 that expression is too small (ERRATA E11:
    ``P[‖Z‖₁ ≥ Δ·ln(1/δ)/ε] = δ·Σ_{k<d} ln(1/δ)^k/k!``, 0.330 for d = 2, δ = 0.1).

    Parameters
    ----------
    sensitivity : float
        The ℓ1 sensitivity Δ of the released vector (> 0).
    epsilon : float
        The privacy parameter ε (> 0).
    delta : float
        Failure probability in (0, 1).
    dim : int, default 1
        Number of noisy coordinates d ≥ 1.

    Returns
    -------
    float
        t = Δ·Q_d(1 − δ)/ε, in the units of Δ.

    Raises
    ------
    DpoptInputError
        If ``sensitivity`` or ``epsilon`` is not a positive finite number ≤ 1e100, ``delta`` is not in
        (0, 1), or ``dim`` is not an integer ≥ 1.

    Examples
    --------
    >>> round(laplace_l1_tail(1.0, 1.0, 0.1), 6)  # ln(10)
    2.302585
    >>> round(laplace_l1_tail(1.0, 1.0, 0.1, dim=2), 4)
    3.8897
    """
    from scipy.stats import gamma

    sens = check_bound(sensitivity, "sensitivity")
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_dim(dim)
    return float(sens / eps * gamma.isf(dlt, d))


def laplace_l1_tail_probability(threshold: float, sensitivity: float, epsilon: float, *, dim: int = 1) -> float:
    """``P[‖Z‖₁ ≥ threshold]`` for d i.i.d. Laplace(Δ/ε) coordinates (Gamma(d) survival function).

    The inverse of :func:`laplace_l1_tail`: seed 002 Proposition II.1's tail, exact for every d
    (ERRATA E11; for d ≥ 2 the seed's ``Δ·ln(1/δ)/ε`` is exceeded with probability above δ).

    Parameters
    ----------
    threshold : float
        t ≥ 0 (finite), in the units of Δ.
    sensitivity : float
        The ℓ1 sensitivity Δ of the released vector (> 0).
    epsilon : float
        The privacy parameter ε (> 0).
    dim : int, default 1
        Number of noisy coordinates d ≥ 1.

    Returns
    -------
    float
        ``P[Gamma(d, 1) ≥ t·ε/Δ] = e^{−x}·Σ_{k<d} x^k/k!`` with ``x = t·ε/Δ``; 1.0 at t = 0.

    Raises
    ------
    DpoptInputError
        If ``threshold`` is not a finite number ≥ 0, ``sensitivity`` or ``epsilon`` not a positive finite
        number ≤ 1e100, or ``dim`` not an integer ≥ 1.
    """
    from scipy.stats import gamma

    sens = check_bound(sensitivity, "sensitivity")
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    t = float(threshold)
    if not math.isfinite(t) or t < 0:
        raise DpoptInputError(f"`threshold` must be a finite number >= 0; got {threshold!r}")
    return float(gamma.sf(t * eps / sens, d))
