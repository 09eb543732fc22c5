"""How the ``place`` release splits its levels' budget between the cells and the map
(models/hierarchy.md §14.3): an explicit minimisation of the predicted error of the published
means, on DP pilot counts (post-processing; no budget of its own).

The published mean of a finest grid is its cell's tree-BLUP estimate. With a cell v measured at
share f of the levels' budget and the map at 1 − f, the BLUP's error is predicted by the Gaussian
model of :mod:`dpopt.hierarchy.blup` with a public **prior spread** τ₀ of cells around the map:

    MSE_v(f) = τ₀²·s_v²(f)/(τ₀² + s_v²(f)) + σ²_map(1 − f)   where v's count clears the SNR rule,
    MSE_v(f) = τ₀² + σ²_map(1 − f)                            elsewhere,     MSE_v(0) = τ₀² + σ²_map(1),

s_v²(f) = (Var Ỹ_v + h²·Var ñ_v)/n_v² the delta-method noise variance of the cell's direct mean
(h = B/2, the estimator's own worst-case multiplier), σ²_map the same for the map's node at its
pilot count's lower end (one sd). The SNR rule is the estimator's
(:func:`dpopt.hierarchy.blup.count_snr_threshold` over the cells): a cell whose count n_v is under
t·sd(ñ_v) is not used by the BLUP, so its grids are answered by the map, measured at only 1 − f.

The cells' sizes n_v are **empirical-Bayes estimates** from their pilot counts
(:func:`cell_sizes`): each pilot shrunk toward the map's pilot count spread over the cells by
their listed grids (public), as much as the pilots' spread beyond their noise warrants
(Fay–Herriot). Why not the pilot's one-sd lower end, weighted by the pilot: at ε = 1 the cells'
pilots are noise of sd ≈ 20,000 records against cells of 200–3,000 on the Austin day, and a lucky
draw posed as a busy cell, so 2 runs in 60 measured the cells at f = 0.5 for a predicted gain of
5 %, leaving the map half its budget (5.2–5.3 km/h against 3.6). Neither half of the remedy alone
was enough: with the SNR case but raw pilots the same 2 runs chose cells;
a stricter lower end (the SNR threshold, 3.2 sds) removed them but made the pilots blind at
ε = 10 too (13 of 30 day runs fell back to the map, 3.19 km/h against 2.77). With the
Fay–Herriot sizes the choice matches the one made on the exact counts: the map alone at ε = 1 on
the day (59 of 60 runs), the cells at ε = 10 (30 of 30). The shares minimise Σ_v w_v·MSE_v over
the public candidates :data:`CANDIDATES`, w_v = n_v (errors weighted per record: the busy cells,
where the finest grids with many users are). τ₀ (the place release passes U/20) is used only
here; the estimator fits the spread from the measurements.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...hierarchy.blup import count_snr_threshold

__all__ = ["CANDIDATES", "cell_sizes", "place_share", "predicted_place_error"]

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
    low = np.asarray(cells_low, dtype=float)
    s2 = direct_var("cells", f, low)
    used = low >= count_snr_threshold(low.size) * np.sqrt(noise_var("cells", "count", f))
    mse = np.where(used, t2 * s2 / (t2 + s2), t2)
    return float(np.sum(w * mse) / np.sum(w)) + float(direct_var("map", 1.0 - f, map_low))


def place_share(cells: np.ndarray, cells_low: np.ndarray, map_low: float, h: float, tau0: float,
                noise_var: Callable[[str, str, float], float]) -> tuple[float, list[float]]:
    """The candidate share of the cells with the least predicted error (ties: the smaller share),
    and every candidate's predicted error."""
    scores = [predicted_place_error(f, cells, cells_low, map_low, h, tau0, noise_var) for f in CANDIDATES]
    return float(CANDIDATES[int(np.argmin(scores))]), scores


def cell_sizes(pilot: np.ndarray, pilot_sd: np.ndarray, listed: np.ndarray, map_count: float) -> np.ndarray:
    """Empirical-Bayes sizes of the cells from their noisy pilot counts (Fay–Herriot; post-processing).

    The synthetic estimate of cell v is the map's count spread over the cells in proportion to
    their listed finest grids g_v (public): m_v = map_count·g_v/Σg. The pilots are y_v = n_v + e_v,
    e_v of sd σ_v; the cells' spread around the synthetic estimate, A = mean (n_v − m_v)², is
    estimated by moments, Â = max(mean((y − m)²) − mean(σ²), 0), and

        n̂_v = m_v + (y_v − m_v)·Â/(Â + σ_v²).

    Where the pilots are noise (ε = 1 on the Austin day: σ ≈ 20,000 records against cells of
    200–3,000) Â ≈ 0 and every cell is its synthetic share; where they are informative (ε = 10) the
    busy cells stand out. ``pilot`` NaN or ``pilot_sd`` ∞: the synthetic estimate alone."""
    y = np.asarray(pilot, dtype=float)
    s2 = np.square(np.asarray(pilot_sd, dtype=float))
    g = np.asarray(listed, dtype=float)
    m = max(float(map_count), 0.0) * g / max(float(g.sum()), 1.0)
    ok = np.isfinite(y) & np.isfinite(s2)
    r = np.where(ok, y - m, 0.0)
    A = max(float(np.mean(np.square(r[ok])) - np.mean(s2[ok])), 0.0) if ok.any() else 0.0
    return m + np.where(ok, A / np.maximum(A + np.where(ok, s2, 0.0), 1e-300), 0.0) * r
