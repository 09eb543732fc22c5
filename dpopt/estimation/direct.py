"""Direct estimates: each measured node's mean and variance from its own noisy statistics, with
error bounds at a stated confidence (post-processing only: Measurements in, Estimates out).

``user`` model (models/user_level.md §5, §7): with ñ, λỸ, λZ̃ the noisy count, centred sum and sum of
squares (centre U/2),

    μ̂ = U/2 + λỸ/max(ñ, 1),   σ̂² = λZ̃/max(ñ, 1) + U²/8 − (λỸ/max(ñ, 1))²,

published post-processed into [0, U] and [0, U²/4] with the raw values kept. The error bounds are a
union bound over the three noises, each at probability (1 − q)/3 with its exact law's |noise|
quantile q_n, q_Y, q_Z (:func:`abs_quantile`): where ñ ≥ 1,
|μ̂ − μ| ≤ (q_Y + U/2·q_n)/ñ and |σ̂² − σ²| ≤ (q_Z + U²/8·q_n)/ñ + d_μ(2|Ȳ| + d_μ), plus the lattice
rounding λ/2 (resp. λ/2·(1 + U)), capped at the range (U, U²/4); where ñ < 1 the bound is the range.
They hold against the bounded data's statistics (noise only, not the bias of bounding). The variance
is published only where its interval clipped to the range is narrower than [0, U²/4]
(:func:`variance_interval_informative`) and its noisy value is not below 0 (a clipped 0
would claim that all values are equal); elsewhere ``variance_released`` is False with one reason and ``variance``, its bound and ``variance_raw`` are NaN (post-processing: a function of the
published value and bound only).

``public-occupancy`` (seed 002, models/release.md): the noisy CLIP mean μ̃ and variance Ṽ of each
grid are already estimates; published post-processed into [0, U] and [0, U²/4] with the raw values
kept. From the Measurements alone (each statistic's noise law — family, scale s per grid, lattice λ —,
its clipping-bias bound β, and the public sensitivities Δ, budgets b and the sampler's E|noise|):

* per statistic, at confidence q (:func:`clip_error_bounds`), ``noise``: s·F(q) + slack with
  F(q) = ln(1/(1 − q)) (Laplace) or Φ⁻¹((1 + q)/2) (Gaussian) and slack λ (discrete Laplace) or
  1.5λ (discrete Gaussian), 0 for the continuous laws (the lattice tails and the output rounding,
  argued beside :func:`clip_error_bounds`); ``worst_case``: that plus β (seed 002 Thm IV.1, IV.2
  with ERRATA E1). The model's ``criterion`` names the published one; both are kept;
* seed 002's worst-case error E_g (:func:`clip_worst_case_errors`, eq. (11)-(13)):
  β_μ + β_Var + c·(Δ_μ/s_μ(b_μ) + Δ_Var/s_Var(b_Var)) with the plan's budgets (Laplace Δ/b, c = 1;
  Gaussian Δ/√(2ρ), c = √(2/π)), and the same with the sampler's exact E|noise| and roundings.

Unreleased grids get NaN bounds (E_g = ∞). The variance is withheld as for ``user``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..budget.noise import GaussianNoise, LaplaceNoise
from ..measurements import Estimates, EstimatesInfo, Measurements, NoiseLaw
from ..privacy.options import check_confidence
from ..noise.mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation

__all__ = ["direct", "abs_quantile", "check_confidence", "variance_interval_informative", "VARIANCE_WITHHELD_REASON",
           "VARIANCE_NEGATIVE_REASON",
           "clip_error_bounds", "clip_worst_case_errors"]

#: the row's reason when the variance interval is the whole range (same words as the GLS estimator)
VARIANCE_WITHHELD_REASON = "its interval covers every possible variance, so it says nothing"
#: the row's reason when the noisy variance is below 0 (its interval narrower than the range): clipped
#: to 0 it would read "all values equal", which the data do not say (same words as the GLS estimator)
VARIANCE_NEGATIVE_REASON = "noisy variance below 0: the noise is larger than the spread of the values"

_QUANTILES = {"discrete_laplace": DiscreteLaplace, "laplace": LaplaceSimulation,
              "discrete_gaussian": DiscreteGaussian, "gaussian": GaussianSimulation}


def abs_quantile(law: NoiseLaw, prob: float) -> float:
    """x (value units) with P(|noise| > x) ≤ ``prob`` under ``law`` (one scale for all nodes): the
    samplers' exact tail quantiles (:mod:`dpopt.privacy.user.mechanism`) in lattice units, times λ. The
    quantile functions are stateless: an instance without a source serves."""
    cls = _QUANTILES[law.family]
    scale = float(np.max(law.scale)) if np.ndim(law.scale) else float(law.scale)
    lattice = law.lattice if law.lattice > 0 else 1.0
    return lattice * cls.__new__(cls).abs_quantile(scale / lattice, prob)


def variance_interval_informative(variance: np.ndarray, error_bound: np.ndarray, bound: float) -> np.ndarray:
    """True where the variance interval clipped to its range, min(v + e, U²/4) − max(v − e, 0), is
    narrower than the range [0, U²/4] itself: elsewhere the interval says nothing the
    range does not, and the variance is withheld. Post-processing of the published v and e only."""
    top = bound * bound / 4.0
    v = np.asarray(variance, dtype=float)
    e = np.asarray(error_bound, dtype=float)
    with np.errstate(invalid="ignore"):
        width = np.minimum(v + e, top) - np.maximum(v - e, 0.0)
        return np.isfinite(width) & (width < top)


def _user_direct(m: Measurements, q: float) -> pd.DataFrame:
    U = m.bound
    lam = m.info.lattice
    n_t = m.statistics["count"].value
    ly, lz = m.statistics["sum"].value, m.statistics["sumsq"].value
    n_eff = np.maximum(n_t, 1.0)
    ybar = ly / n_eff
    mean_raw = U / 2.0 + ybar
    var_raw = lz / n_eff + U * U / 8.0 - ybar**2
    p = (1.0 - q) / 3.0
    q_n, q_y, q_z = (abs_quantile(m.statistics[s].law, p) for s in ("count", "sum", "sumsq"))
    ok = n_t >= 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        d_mean = np.where(ok, (q_y + U / 2.0 * q_n) / n_t, np.inf)
        d_var = np.where(ok, (q_z + U * U / 8.0 * q_n) / n_t + d_mean * (2.0 * np.abs(ybar) + d_mean), np.inf)
    err_mean = np.minimum(d_mean + lam / 2.0, U)
    err_var = np.minimum(d_var + lam / 2.0 * (1.0 + U), U * U / 4.0)
    return _table(m, mean_raw, var_raw, err_mean, err_var, extra={"noisy_count": n_t})


def _table(m: Measurements, mean_raw: np.ndarray, var_raw: np.ndarray, err_mean: np.ndarray,
           err_var: np.ndarray, *, extra: dict[str, np.ndarray], released: np.ndarray | None = None) -> pd.DataFrame:
    U = m.bound
    n = m.n_nodes
    rel = np.ones(n, dtype=bool) if released is None else np.asarray(released, dtype=bool)
    nodes = m.nodes
    var = np.clip(var_raw, 0.0, U * U / 4.0)
    whole = ~variance_interval_informative(var, err_var, U)
    with np.errstate(invalid="ignore"):
        negative = ~whole & (np.asarray(var_raw, dtype=float) < 0.0)  # never published as a clipped 0
    informative = ~whole & ~negative
    shown = informative | ~rel  # unreleased rows keep their reason and values, as before
    reason = np.where(~rel, "not released", np.where(informative, "", np.where(
        whole, VARIANCE_WITHHELD_REASON, VARIANCE_NEGATIVE_REASON)))
    return pd.DataFrame({
        "node": np.arange(n, dtype=np.int64), "cell": nodes["cell"].to_numpy(),
        "h3_resolution": nodes["h3_resolution"].to_numpy(), "slot": nodes["slot"].to_numpy(),
        "slot_ns": nodes["slot_ns"].to_numpy(), "cycle_ns": m.node_cycles, "released": rel,
        # post-processing of DP outputs into the valid ranges (no privacy cost); raw kept beside
        "mean": np.clip(mean_raw, 0.0, U), "mean_error_bound": err_mean,
        "mean_direct": mean_raw, "mean_direct_error_bound": err_mean,
        # withheld where the interval is the whole range: variance, its bound and raw value NaN
        "variance": np.where(shown, var, np.nan), "variance_error_bound": np.where(shown, err_var, np.nan),
        "variance_released": rel & informative, "variance_withheld_reason": reason,
        "method": "direct", "mean_raw": mean_raw, "variance_raw": np.where(shown, var_raw, np.nan), **extra,
    })


def _laplace(m: Measurements) -> bool:
    return m.statistics["mean"].law.family.endswith("laplace")


def clip_error_bounds(m: Measurements, confidence: float) -> dict[str, np.ndarray]:
    """Per grid of a ``public-occupancy`` ``m`` and statistic (mean, variance), bounds on
    |released − statistic| holding with probability ≥ q each (keys ``{stat}_noise``,
    ``{stat}_worst_case``; NaN where not released).

    ``noise``: the q-quantile of |noise| at the scale s drawn (Laplace: s·ln(1/(1 − q));
    Gaussian: s·Φ⁻¹((1 + q)/2)) plus, for the exact samplers on λ·ℤ, a slack that makes it a bound
    for the lattice noise and the output rounding (λ/2):

    * discrete Laplace, r = e^{−1/t} (t the scale in lattice units), y₀ = t·ln(1/(1 − q)):
      P(|Z| > y₀ + ½) = 2r^{⌊y₀+½⌋+1}/(1 + r) ≤ r^{y₀}·2√r/(1 + r) ≤ r^{y₀} = 1 − q (AM–GM), so
      |released − f| ≤ λ(y₀ + ½) + λ/2 = λy₀ + λ;
    * discrete Gaussian, y₀ = σ_Z·Φ⁻¹((1 + q)/2): for k ≥ 1, Σ_{z≥k} e^{−z²/2σ²} ≤ ∫_{k−1}^∞ and the
      normaliser Σ_z e^{−z²/2σ²} ≥ √(2π)σ (Poisson summation), so P(|Z| ≥ k) ≤ P(|N| ≥ k − 1) and
      P(|Z| > y₀ + 1) ≤ P(|N| ≥ ⌊y₀ + 1⌋) ≤ 1 − q: |released − f| ≤ λy₀ + λ + λ/2.

    This bounds the error against the statistic of the kept records. ``worst_case``: that plus the
    worst-case clipping bias of the kept set against the statistic of all records (the statistic's
    ``bias_bound``, seed 002 Thm IV.1, Thm IV.2 corrected by ERRATA E1) — it holds for any data.
    """
    q = check_confidence(confidence)
    laplace = _laplace(m)
    factor = (LaplaceNoise if laplace else GaussianNoise).factor(q)
    ok = m.public["released"].to_numpy(dtype=bool)
    out: dict[str, np.ndarray] = {}
    for stat in ("mean", "variance"):
        s = m.statistics[stat]
        slack = s.law.lattice * (1.0 if laplace else 1.5)  # 0 for the continuous laws
        noise = np.nan_to_num(s.law.scale) * factor + slack
        out[f"{stat}_noise"] = np.where(ok, noise, np.nan)
        out[f"{stat}_worst_case"] = np.where(ok, noise + s.bias_bound, np.nan)
    return out


def clip_worst_case_errors(m: Measurements) -> tuple[np.ndarray, np.ndarray]:
    """Per grid of a ``public-occupancy`` ``m``, seed 002's worst-case error E_g = biases +
    E|noise of μ| + E|noise of Var| (eq. (11)-(13) with the plan's budgets: Laplace Δ/ε, Gaussian
    √(2/π)·Δ/√(2ρ)) and the same with the sampler's exact E|noise| and roundings (public
    ``noise_abs``); ∞ where not released."""
    pub = m.public
    bias = m.statistics["mean"].bias_bound + m.statistics["variance"].bias_bound
    d_mu, d_var = pub["mean_sensitivity"].to_numpy(float), pub["variance_sensitivity"].to_numpy(float)
    b_mu, b_var = pub["budget_mean"].to_numpy(float), pub["budget_variance"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if _laplace(m):
            scale_mu, scale_var, factor = d_mu / b_mu, d_var / b_var, 1.0
        else:
            scale_mu, scale_var = d_mu / np.sqrt(2.0 * b_mu), d_var / np.sqrt(2.0 * b_var)
            factor = float(np.sqrt(2.0 / np.pi))
    noise = factor * (np.nan_to_num(scale_mu) + np.nan_to_num(scale_var))
    ok = pub["released"].to_numpy(dtype=bool)
    return np.where(ok, bias + noise, np.inf), np.where(ok, bias + pub["noise_abs"].to_numpy(float), np.inf)


def _public_occupancy_direct(m: Measurements, q: float) -> tuple[pd.DataFrame, EstimatesInfo]:
    """The CLIP estimates post-processed into the range with the ``criterion``'s bounds (module
    doc); both criteria's bounds, the variance in range before withholding and E_g beside them;
    the summary's headline bounds and the bounds per grid in the returned facts."""
    crit = m.info.criterion
    b = clip_error_bounds(m, q)
    errors, released_errors = clip_worst_case_errors(m)
    mean_raw, var_raw = m.statistics["mean"].value, m.statistics["variance"].value
    U = m.bound
    extra = {**{f"{s}_error_bound_{c}": b[f"{s}_{c}"] for s in ("mean", "variance") for c in ("noise", "worst_case")},
             "variance_in_range": np.clip(var_raw, 0.0, U * U / 4.0), "error_bound": errors,
             "error_bound_released": released_errors}
    table = _table(m, mean_raw, var_raw, b[f"mean_{crit}"], b[f"variance_{crit}"], extra=extra,
                   released=m.public["released"].to_numpy(dtype=bool))
    finite = errors[np.isfinite(errors)]
    summary = {"error_bound": float(finite.max()) if finite.size else float("inf"),
               "error_bound_released": float(np.max(released_errors[np.isfinite(released_errors)], initial=0.0)),
               "criterion": crit, "confidence": q, "released_grids": int(np.isfinite(errors).sum())}
    return table, EstimatesInfo(summary=summary, error_bounds=b)


def direct(m: Measurements, *, confidence: float = 0.95) -> Estimates:
    """Direct estimates of every measured node of ``m`` (module doc)."""
    q = check_confidence(confidence)
    table, info = (_user_direct(m, q), EstimatesInfo()) if m.privacy_model == "user" else _public_occupancy_direct(m, q)
    answers = m.finest.copy() if len(m.finest.columns) else pd.DataFrame({"node": np.arange(m.n_nodes)})
    return Estimates(table=table, answers=answers, confidence=q, method="direct", measurements=m, info=info)
