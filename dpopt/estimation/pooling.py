"""Empirical-Bayes pooling of the released grid means and variances (post-processing only).

Under the ``user`` model most grids get noise far larger than the spread of their true means (each
user may touch k grids, so every noise scale carries a factor k·c while a grid holds few users): the
unbiased per-grid estimates of :mod:`.direct` are then mostly noise and, after clipping to [0, U],
pile up at 0 and U. Shrinking each estimate toward the map-wide mean by its own predicted noise
(the normal-means empirical Bayes / James–Stein rule, Efron & Morris 1973) trades a bias toward the
map-wide value for much less noise. Everything is computed from DP outputs (ñ, Ỹ, Z̃ of the released
grids) and public noise scales, so it costs no budget; it is *not* covered by the per-grid 95 %
bounds, which hold for the unpooled ``mean``/``variance`` only.

With θ̂_g a raw estimate, v_g its delta-method noise variance (models/user_level.md §4) at
max(ñ_g, 1) and the map-wide (ȳ₀, z̄₀) (for the variance plus the second-order term 2·v_mean² of
the squared mean), τ² estimated on the informative grids (v_g ≤ range²/4), the centre θ₀ is the map-wide value from three noisy totals (R, Y, Z over all
released grids, released with a small share of ε: one user moves them by ≤ k·c·(1, U/2, U²/8), like
one grid) — a ratio of totals, far less noisy than any precision-weighted mean of the grids, whose
weights ∝ ñ_g² correlate with the noise — and τ² the between-grid variance solving the Paule–Mandel
equation around θ₀ (random-effects meta-analysis). The pooled estimate is
θ₀ + τ²/(τ² + v_g)·(θ̂_g − θ₀), clipped to the range (the raw values are pooled: clipping first
would bias the moments, noise clipped at 0 and U is not centred on the truth).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["pool_estimates", "between_variance", "paule_mandel", "pooled"]


def _bisect_tau2(excess: Callable[[float], float], hi: float, iterations: int) -> float:
    """τ² ≥ 0 where the non-increasing ``excess`` crosses 0, by bisection on [0, hi]; 0 when
    ``excess(0) ≤ 0`` (no between-variance needed)."""
    if excess(0.0) <= 0.0:
        return 0.0
    lo = 0.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def between_variance(theta: np.ndarray, v: np.ndarray, centre: float, *, iterations: int = 60) -> float:
    """τ² solving Σ w(θ − θ₀)² = n with w = 1/(v + τ²) and θ₀ = ``centre`` given (bisection; 0 when
    τ² = 0 already over-explains the spread): the Paule–Mandel equation with a known centre."""
    ok = np.isfinite(theta) & np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return 0.0
    d2 = (theta[ok] - centre) ** 2
    vv = v[ok]

    def excess(tau2: float) -> float:
        return float((d2 / (vv + tau2)).sum() - vv.size)

    return _bisect_tau2(excess, float(d2.max()) + 1.0, iterations)


def paule_mandel(theta: np.ndarray, v: np.ndarray, *, iterations: int = 60) -> tuple[float, float]:
    """Paule–Mandel (θ₀, τ²): θ₀ = Σ wθ/Σ w and Σ w(θ − θ₀)² = n − 1 with w = 1/(v + τ²), τ² by
    bisection (τ² = 0 when even that over-explains the spread)."""
    ok = np.isfinite(theta) & np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        t = theta[ok]
        return (float(t.mean()) if t.size else float("nan")), 0.0
    t, vv = theta[ok], v[ok]

    def centre(tau2: float) -> float:
        w = 1.0 / (vv + tau2)
        return float((w * t).sum() / w.sum())

    def excess(tau2: float) -> float:
        w = 1.0 / (vv + tau2)
        return float((w * (t - centre(tau2)) ** 2).sum() - (w.size - 1))

    tau2 = _bisect_tau2(excess, float(np.ptp(t)) ** 2 + 1.0, iterations)
    return centre(tau2), tau2


def pool_estimates(
    n_t: np.ndarray,
    y_t: np.ndarray,
    z_t: np.ndarray,
    *,
    bound: float,
    scales: tuple[float, float, float],
    totals: tuple[float, float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Pooled (mean, variance) per grid from the noisy count, centred sum and sum of squares (value
    units) and the Laplace scales (b_n, b_Y, b_Z) in value units. ``totals`` = noisy map-wide
    (R, Y, Z) released for this purpose (else the sums of the per-grid values). Returns also the
    map-wide values."""
    U = float(bound)
    bn, by, bz = (float(s) for s in scales)
    n_t = np.asarray(n_t, dtype=float)
    y_t = np.asarray(y_t, dtype=float)
    z_t = np.asarray(z_t, dtype=float)
    tot_n, tot_y, tot_z = (float(np.sum(n_t)), float(np.sum(y_t)), float(np.sum(z_t))) if totals is None \
        else (float(v) for v in totals)
    total_n = tot_n
    if n_t.size == 0 or total_n < 1.0:
        mid = np.full(n_t.shape, U / 2.0)
        return mid, np.full(n_t.shape, U * U / 8.0), {"mean0": U / 2.0, "var0": U * U / 8.0, "tau2_mean": 0.0,
                                                      "tau2_var": 0.0}
    ybar0 = float(np.clip(tot_y / total_n, -U / 2.0, U / 2.0))
    zbar0 = float(np.clip(tot_z / total_n, -U * U / 8.0, U * U / 8.0))
    n_eff = np.maximum(n_t, 1.0)
    ybar = y_t / n_eff
    mean_raw = U / 2.0 + ybar
    var_raw = z_t / n_eff + U * U / 8.0 - ybar**2
    v_mean = 2.0 * (by**2 + ybar0**2 * bn**2) / n_eff**2
    v_var = 2.0 * (bz**2 + 4.0 * ybar0**2 * by**2 + (2.0 * ybar0**2 - zbar0) ** 2 * bn**2) / n_eff**2
    # (Ỹ/ñ)² in the variance: add the second-order term 2·Var(Ỹ/ñ)² the delta method drops
    v_var = v_var + 2.0 * v_mean**2
    mean0 = U / 2.0 + ybar0
    # τ² from the informative grids only (predicted noise sd ≤ half the range): where the noise
    # swamps the range the delta method understates the ratio's tails and would inflate τ²
    inf_m = v_mean <= U * U / 4.0
    tau_m = between_variance(mean_raw[inf_m], v_mean[inf_m], mean0)
    # map-wide variance of all kept records (within-grid variance plus the spread of the grid means,
    # which is small next to it on the data we know; subtracting a noisy τ² estimate is worse)
    var0 = float(np.clip(zbar0 + U * U / 8.0 - ybar0**2, 0.0, U * U / 4.0))
    inf_v = v_var <= U**4 / 64.0
    tau_v = between_variance(var_raw[inf_v], v_var[inf_v], var0)
    with np.errstate(invalid="ignore", divide="ignore"):
        wm = np.where(tau_m + v_mean > 0, tau_m / (tau_m + v_mean), 0.0)
        wv = np.where(tau_v + v_var > 0, tau_v / (tau_v + v_var), 0.0)
    mean = np.clip(mean0 + wm * (mean_raw - mean0), 0.0, U)
    var = np.clip(var0 + wv * (var_raw - var0), 0.0, U * U / 4.0)
    return mean, var, {"mean0": mean0, "var0": var0, "tau2_mean": tau_m, "tau2_var": tau_v}


def _pool_scales(m: Any) -> tuple[float, float, float]:
    """(b_n, b_Y, b_Z) in value units as :func:`pool_estimates` models them (noise variance 2·b²):
    the Laplace scales, or σ/√2 for the Gaussians."""
    out = []
    for name in ("count", "sum", "sumsq"):
        law = m.statistics[name].law
        s = float(np.max(law.scale)) if np.ndim(law.scale) else float(law.scale)
        out.append(s if law.family.endswith("laplace") else s / math.sqrt(2.0))
    return out[0], out[1], out[2]


def pooled(m: Any, *, confidence: float = 0.95) -> Any:
    """Estimates by empirical-Bayes pooling (module doc) of a ``user``-model Measurements: ``mean``
    and ``variance`` the pooled values (no interval: the bounds of the direct estimate do not cover
    them, ``mean_error_bound`` NaN), ``mean_direct`` and its bound the direct estimate's."""
    from .._validation import DpoptInputError
    from ..measurements import Estimates, EstimatesInfo
    from .direct import direct

    if m.privacy_model != "user":
        raise DpoptInputError(f"method='pooled' pools the user model's noisy counts and sums; got "
                              f"{m.privacy_model!r} measurements")
    base = direct(m, confidence=confidence)
    mean, var, info = pool_estimates(m.statistics["count"].value, m.statistics["sum"].value,
                                     m.statistics["sumsq"].value, bound=m.bound, scales=_pool_scales(m),
                                     totals=m.info.totals)
    table = base.table.assign(mean=mean, variance=var, mean_error_bound=np.nan, variance_error_bound=np.nan,
                              method="pooled")
    return Estimates(table=table, answers=base.answers, confidence=base.confidence, method="pooled",
                     measurements=m, info=EstimatesInfo(pooling=info))
