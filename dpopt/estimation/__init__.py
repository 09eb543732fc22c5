"""Layer 3 — estimation: :class:`~dpopt.measurements.Measurements` → :class:`~dpopt.measurements.Estimates`.

Post-processing only: nothing here sees records. One entry, :func:`estimate`, and a registry of
methods (name → ``f(measurements, *, confidence) -> Estimates``):

* ``"direct"`` (:mod:`.direct`): each node from its own noisy statistics, with error bounds (both
  models: ``user``'s ratio estimates; ``public-occupancy``'s CLIP values with their noise and
  worst-case bounds and seed 002's E_g, :func:`.direct.clip_error_bounds`);
* ``"pooled"`` (:mod:`.pooling`): empirical-Bayes shrinkage toward the map-wide values (``user``);
* ``"hierarchical"`` (:mod:`.hierarchical`, models/hierarchy.md): tree GLS and empirical Bayes over the
  measured levels (:func:`dpopt.privacy.user.levels.measure_levels`);
* ``"crossed"`` (:mod:`.crossed_estimate`): the engine's release — one crossed random-effects model
  of the listed grids over every measured marginal (:func:`dpopt.privacy.user.engine.measure_engine`).
"""

from __future__ import annotations

from collections.abc import Callable

from .._validation import check_choice
from ..measurements import Estimates, Measurements
from ..hierarchy.crossed import CrossedFit, GLSPosterior, fit_crossed, gls_posterior
from .direct import abs_quantile, check_confidence, direct
from .crossed_estimate import estimate_crossed
from .hierarchical import estimate_hierarchical
from .pooling import pool_estimates, pooled

__all__ = ["ESTIMATORS", "estimate", "direct", "pooled", "pool_estimates", "abs_quantile", "check_confidence",
           "fit_crossed", "CrossedFit", "gls_posterior", "GLSPosterior"]

#: the estimation methods: name -> f(measurements, *, confidence) -> Estimates
ESTIMATORS: dict[str, Callable[..., Estimates]] = {
    "direct": direct,
    "pooled": pooled,
    "hierarchical": estimate_hierarchical,
    "crossed": estimate_crossed,
}


def estimate(measurements: Measurements, *, method: str = "direct", confidence: float = 0.95) -> Estimates:
    """Estimates of every measured node of ``measurements`` by ``method`` (:data:`ESTIMATORS`),
    with intervals at ``confidence``."""
    check_choice(method, "method", tuple(ESTIMATORS))
    return ESTIMATORS[method](measurements, confidence=check_confidence(confidence))
