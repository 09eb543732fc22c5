"""How the ``place`` release splits its levels' budget between the cells and the map
(models/hierarchy.md §13.3): an explicit minimisation of the predicted error of the published
means, on DP pilot counts (post-processing; no budget of its own).

The published mean of a finest grid is its cell's tree-BLUP estimate. With a cell v measured at
share f of the levels' budget and the map at 1 − f, the BLUP's error is predicted by the Gaussian
model of :mod:`dpopt.hierarchy.blup` with a public **prior spread** τ₀ of cells around the map:

    MSE_v(f) = τ₀²·s_v²(f)/(τ₀² + s_v²(f)) + σ²_map(1 − f),     MSE_v(0) = τ₀² + σ²_map(1),

s_v²(f) = (Var Ỹ_v + h²·Var ñ_v)/n_v² the delta-method noise variance of the cell's direct mean
(h = B/2, the estimator's own worst-case multiplier), n_v the pilot count's lower end, σ²_map the
same for the map's node. The share minimises Σ_v w_v·MSE_v over the public candidates
:data:`CANDIDATES`, w_v = the cell's pilot count (errors weighted per record: the busy cells, where
the finest grids with many users are). τ₀ (the place release passes U/30) is used only here; the estimator
fits the spread from the measurements. On the Austin day this gives f = 0 (the map alone; cells
would only add noise) at ε = 1 in 30 runs of 30, and f = 0.8–0.9 at ε = 10.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["CANDIDATES", "place_share", "predicted_place_error"]

#: public candidate shares of the cells (the rest goes to the map)
CANDIDATES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9)


def predicted_place_error(f: float, cells: np.ndarray, cells_low: np.ndarray, map_low: float, h: float, tau0: float,
                          noise_var: Callable[[str, str, float], float]) -> float:
    """Σ_v w_v·MSE_v(f)/Σ_v w_v (module doc). ``cells`` the pilot counts (weights, clipped at 0),
    ``cells_low``/``map_low`` their lower ends (≥ 1); ``noise_var(level, stat, share)`` the noise
    variance of statistic ``stat`` ("count" or "sum") of ``level`` ("cells" or "map") measured at
    ``share`` of the levels' budget (value units)."""
    w = np.maximum(np.asarray(cells, dtype=float), 0.0)
    if w.sum() <= 0:
        w = np.ones_like(w)
    def direct_var(level: str, share: float, n: np.ndarray | float) -> np.ndarray | float:
        return (noise_var(level, "sum", share) + h * h * noise_var(level, "count", share)) / np.square(n)

    t2 = float(tau0) ** 2
    if f <= 0.0:
        return t2 + float(direct_var("map", 1.0, map_low))
    s2 = direct_var("cells", f, np.asarray(cells_low, dtype=float))
    blup = t2 * s2 / (t2 + s2)
    return float(np.sum(w * blup) / np.sum(w)) + float(direct_var("map", 1.0 - f, map_low))


def place_share(cells: np.ndarray, cells_low: np.ndarray, map_low: float, h: float, tau0: float,
                noise_var: Callable[[str, str, float], float]) -> tuple[float, list[float]]:
    """The candidate share of the cells with the least predicted error (ties: the smaller share),
    and every candidate's predicted error."""
    scores = [predicted_place_error(f, cells, cells_low, map_low, h, tau0, noise_var) for f in CANDIDATES]
    return float(CANDIDATES[int(np.argmin(scores))]), scores
