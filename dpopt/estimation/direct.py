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
(:func:`variance_interval_informative`, issue 23.4); elsewhere ``variance_released`` is False with the
reason and ``variance``, its bound and ``variance_raw`` are NaN (post-processing: a function of the
published value and bound only).

``public-occupancy``: the CLIP estimates are already means and variances; the direct estimate is
their post-processing into the range with the error bounds the model computed
(:mod:`dpopt.privacy.public_occupancy`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..measurements import Estimates, Measurements, NoiseLaw
from ..privacy.options import check_confidence
from ..userdp.mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation

__all__ = ["direct", "abs_quantile", "check_confidence", "variance_interval_informative", "VARIANCE_WITHHELD_REASON"]

#: the row's reason when the variance interval is the whole range (same words as the GLS estimator)
VARIANCE_WITHHELD_REASON = "interval not narrower than the range [0, U^2/4]"

_QUANTILES = {"discrete_laplace": DiscreteLaplace, "laplace": LaplaceSimulation,
              "discrete_gaussian": DiscreteGaussian, "gaussian": GaussianSimulation}


def abs_quantile(law: NoiseLaw, prob: float) -> float:
    """x (value units) with P(|noise| > x) ≤ ``prob`` under ``law`` (one scale for all nodes): the
    samplers' exact tail quantiles (:mod:`dpopt.userdp.mechanism`) in lattice units, times λ. The
    quantile functions are stateless: an instance without a source serves."""
    cls = _QUANTILES[law.family]
    scale = float(np.max(law.scale)) if np.ndim(law.scale) else float(law.scale)
    lattice = law.lattice if law.lattice > 0 else 1.0
    return lattice * cls.__new__(cls).abs_quantile(scale / lattice, prob)


def variance_interval_informative(variance: np.ndarray, error_bound: np.ndarray, bound: float) -> np.ndarray:
    """True where the variance interval clipped to its range, min(v + e, U²/4) − max(v − e, 0), is
    narrower than the range [0, U²/4] itself (issue 23.4): elsewhere the interval says nothing the
    range does not, and the variance is withheld. Post-processing of the published v and e only."""
    top = bound * bound / 4.0
    v = np.asarray(variance, dtype=float)
    e = np.asarray(error_bound, dtype=float)
    with np.errstate(invalid="ignore"):
        width = np.minimum(v + e, top) - np.maximum(v - e, 0.0)
        return np.isfinite(width) & (width < top)


def _user_direct(m: Measurements, q: float) -> pd.DataFrame:
    U = m.bound
    lam = m.info["lattice"]
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
    informative = variance_interval_informative(var, err_var, U)
    shown = informative | ~rel  # unreleased rows keep their reason and values, as before
    reason = np.where(~rel, "not released", np.where(informative, "", VARIANCE_WITHHELD_REASON))
    return pd.DataFrame({
        "node": np.arange(n, dtype=np.int64), "cell": nodes["cell"].to_numpy(),
        "h3_resolution": nodes["h3_resolution"].to_numpy(), "slot": nodes["slot"].to_numpy(),
        "slot_ns": nodes["slot_ns"].to_numpy(), "released": rel,
        # post-processing of DP outputs into the valid ranges (no privacy cost); raw kept beside
        "mean": np.clip(mean_raw, 0.0, U), "mean_error_bound": err_mean,
        "mean_direct": mean_raw, "mean_direct_error_bound": err_mean,
        # withheld where the interval is the whole range: variance, its bound and raw value NaN
        "variance": np.where(shown, var, np.nan), "variance_error_bound": np.where(shown, err_var, np.nan),
        "variance_released": rel & informative, "variance_withheld_reason": reason,
        "method": "direct", "mean_raw": mean_raw, "variance_raw": np.where(shown, var_raw, np.nan), **extra,
    })


def _public_occupancy_direct(m: Measurements, q: float) -> pd.DataFrame:
    """The CLIP estimates post-processed into the range; error bounds as the model states them
    (``info["error_bounds"]``: per statistic and criterion, computed at ``info["confidence"]``)."""
    if q != m.info["confidence"]:
        raise DpoptInputError(f"`confidence` = {q!r} differs from the {m.info['confidence']!r} the "
                              "public-occupancy measurements were bounded at")
    crit = m.info["criterion"]
    b = m.info["error_bounds"]
    return _table(m, m.statistics["mean"].value, m.statistics["variance"].value, b[f"mean_{crit}"],
                  b[f"variance_{crit}"], extra={}, released=m.info["released"])


def direct(m: Measurements, *, confidence: float = 0.95) -> Estimates:
    """Direct estimates of every measured node of ``m`` (module doc)."""
    q = check_confidence(confidence)
    table = _user_direct(m, q) if m.privacy_model == "user" else _public_occupancy_direct(m, q)
    answers = m.finest.copy() if len(m.finest.columns) else pd.DataFrame({"node": np.arange(m.n_nodes)})
    return Estimates(table=table, answers=answers, confidence=q, method="direct", measurements=m)
