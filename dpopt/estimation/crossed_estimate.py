"""Estimates of the engine's release: one crossed random-effects model of the listed grids' means
(models/engine.md §4; the model and its REML fit: models/crossed.md). Post-processing only.

Every measured marginal's nodes (the final measurement of every round: models/engine.md §2) become
observations of weighted means of their grids (:func:`dpopt.hierarchy.node_means.crossed_inputs`);
:func:`dpopt.hierarchy.crossed.fit_crossed` fits μ + one random effect per coarser marginal + the
grid's own residual, variance components by REML from these observations alone. Every listed grid
is answered by its own row: the posterior mean of its θ_g, clamped to [0, B], with the interval

    z_{(1+conf)/2} · √Var(θ_g | measurements)

whose variance holds the estimation error of μ and of every effect *and* the grid-level variance
the model leaves unexplained (σ²_e, where the grid's own measurement says little): an interval
for that grid's truth, not for a coarser node's. Every measured coarser node is published too,
with the posterior of its weighted mean.

Where the model's factorisation does not fit in memory (hundreds of thousands of levels of an
interaction marginal), the factor with the most levels is left out and the fit repeated; its nodes
still enter as observations, and the fit's status says which factors were left out.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._validation import DpoptInputError
from ..hierarchy.crossed import RESIDUAL, fit_crossed, gls_posterior
from ..hierarchy.node_means import (between_upper, identified, combined_total, crossed_inputs, grid_weights,
                                   values_variance)
from ..measurements import ESTIMATE_COLUMNS, Estimates, EstimatesInfo, Measurements, UserInfo

__all__ = ["estimate_crossed", "METHOD", "VARIANCE_REASON"]

METHOD = "crossed"
#: the one reason a variance is not published by the engine
VARIANCE_REASON = "not measured: this release publishes means"


def _phases(m: Measurements, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(count, its variance, centred sum, its variance) of the nodes in ``rows``: the engine's final
    statistics ``count``/``sum`` hold every round of a marginal (refined or combined there,
    models/engine.md §2); the pilot's ``count_pilot``/``sum_pilot`` are an earlier, noisier view of
    the same measurement (post-processing of the final one under Laplace noise) and add nothing."""
    st = m.statistics
    return (st["count"].value[rows], st["count"].law.variance()[rows], st["sum"].value[rows],
            st["sum"].law.variance()[rows])


def _node_matrix(code: np.ndarray, n_nodes: int, weights: np.ndarray) -> sp.csr_matrix:
    """Row n: the weights of node n's grids, normalised (its weighted mean)."""
    wsum = np.bincount(code, weights=weights, minlength=n_nodes)
    return sp.csr_matrix((weights / wsum[code], (code, np.arange(code.size))), shape=(n_nodes, code.size))


def estimate_crossed(measurements: Measurements, *, confidence: float = 0.95) -> Estimates:
    """Posterior means and intervals of every listed grid and measured node (module doc)."""
    m = measurements
    info = m.info.engine if isinstance(m, Measurements) and isinstance(m.info, UserInfo) else None
    if info is None:
        raise DpoptInputError("`measurements` must come from the engine (dpopt.privacy.user.engine.measure_engine)")
    B = float(info.clamp)
    sizes = [int(n) for n in np.diff(np.append(info.offsets, m.n_nodes))]
    parts = [_phases(m, slice(int(o), int(o) + s)) for o, s in zip(info.offsets, sizes)]
    factors, A, y, s2, kept = crossed_inputs(list(info.codes), list(info.names), [p[0] for p in parts],
                                             [p[1] for p in parts], [p[2] for p in parts], [p[3] for p in parts],
                                             centre=B / 2.0, half_range=B / 2.0)
    if y.size == 0:  # nothing readable at this budget: every grid gets the whole declared range
        return _nothing(m, info, parts, float(confidence))
    z = NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    cap = min(spread_bound(m, info, parts), between_bound(info, parts))
    w = grid_weights(parts[0][0], parts[0][1])
    dropped: list[str] = []
    while True:  # a factor whose levels do not fit in memory is left out, the largest first (module doc)
        try:
            fit, upper, mean, var = _posterior(m, info, factors, A=A, y=y, s2=s2, kept=kept, w=w, cap=cap,
                                               confidence=float(confidence))
            break
        except MemoryError:
            if not factors:
                raise
            largest = max(factors, key=lambda f: int(np.max(factors[f])) + 1)
            dropped.append(largest)
            factors = {f: code for f, code in factors.items() if f != largest}
    direct = np.full(m.n_nodes, np.nan)
    direct_hw = np.full(m.n_nodes, np.inf)
    offset = 0
    for i, k in enumerate(kept):
        rows = int(info.offsets[i]) + k
        direct[rows] = y[offset: offset + k.size]
        direct_hw[rows] = z * np.sqrt(s2[offset: offset + k.size])
        offset += k.size
    released = np.zeros(m.n_nodes, dtype=bool)
    released[: sizes[0]] = True  # every listed grid
    for i, k in enumerate(kept):
        released[int(info.offsets[i]) + k] = True
    table = _table(m, released, mean, z * np.sqrt(np.maximum(var, 0.0)), direct, direct_hw, B)
    table["count_estimate"] = np.concatenate([p[0] for p in parts])
    table["level"] = m.nodes["marginal"].to_numpy()
    answers = pd.DataFrame({"cell": m.finest["cell"].to_numpy(), "slot": m.finest["slot"].to_numpy(),
                            "node": m.finest["node"].to_numpy(dtype=np.int64)})
    summary = EstimatesInfo(
        components=dict(fit.sigma2), components_upper=upper, spread_bound=cap, z=z,
        fit=fit.status + ("" if not dropped else f"; without the factors {', '.join(dropped)} (their levels did not "
                                                 "fit in memory: their nodes enter as observations only)"),
        interval="z * sqrt(posterior variance of the grid's mean under the crossed model)",
        nodes_released=int(released.sum()), target=float("nan"))
    return Estimates(table=table, answers=answers, confidence=float(confidence), method=METHOD, measurements=m,
                     info=summary)


def _posterior(m: Measurements, info: Any, factors: dict[str, np.ndarray], *, A: Any, y: np.ndarray, s2: np.ndarray,
               kept: list[np.ndarray], w: np.ndarray, cap: float, confidence: float
               ) -> tuple[Any, dict[str, float], np.ndarray, np.ndarray]:
    """(point fit, the interval's components, mean and variance of every node) of the crossed model
    with ``factors``: REML fits only the components the measurements identify (module doc), the
    interval integrates the others over [0, ``cap``].

    Parameters
    ----------
    m : Measurements
        The engine's measurements.
    info : Any
        Their engine info (marginals' codes, names and offsets).
    factors : dict
        The factors' level codes of the listed grids (those left out for memory are not in it).
    A, y, s2, kept : Any
        The observations of :func:`dpopt.hierarchy.node_means.crossed_inputs`: the grid-weight
        matrix, the centred means, their variances and each marginal's nodes kept.
    w : np.ndarray
        The grids' weights (:func:`dpopt.hierarchy.node_means.grid_weights`).
    cap : float
        The bound of every component's variance (the spread bound).
    confidence : float
        The intervals' confidence.
    """
    known, grid_seen = identified(list(info.names), kept, factors)
    seen = {f: code for f, code in factors.items() if f in known}
    fit = fit_crossed(seen, A, y, s2, residual=grid_seen, confidence=confidence, variances=False)
    given = {**{f: fit.sigma2.get(f, 0.0) for f in factors}, RESIDUAL: fit.sigma2.get(RESIDUAL, 0.0)}
    every = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, sigma2=given, variances=False)
    upper = component_upper_bounds(every, A, y, s2, cap=cap)
    wide = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, sigma2=upper)
    sizes = [int(n) for n in np.diff(np.append(info.offsets, m.n_nodes))]
    mean, var = np.empty(m.n_nodes), np.empty(m.n_nodes)
    for i in range(len(info.codes)):
        rows = slice(int(info.offsets[i]), int(info.offsets[i]) + sizes[i])
        W = _node_matrix(info.codes[i], sizes[i], w)
        mean[rows] = W @ fit.grid_mean
        v = wide.grid_var[np.argsort(info.codes[i])] if i == 0 else wide.node(W).var  # the finest: the grids
        var[rows] = np.minimum(v, cap + fit.mu_var)  # a mean in [0, B] varies by ≤ cap
    return fit, upper, mean, var


#: points of the grid in log σ² over which each component's likelihood is integrated (a quadrature
#: resolution, not a modelling choice)
COMPONENT_GRID = 12


def spread_bound(m: Measurements, info: Any, parts: list[tuple[np.ndarray, ...]]) -> float:
    """The DP upper end of the variance of the kept values (:func:`dpopt.hierarchy.node_means.values_variance`)
    from the pilot's sum of squares of the smallest marginal (with the pilot's count of the same
    nodes) and that marginal's final count and centred sum, each with its noise: by the law of total
    variance the grid means' record-weighted variance is at most this; B²/4 (Popoviciu) where the
    noisy statistics give nothing usable."""
    B = float(info.clamp)
    st = m.statistics.get("sumsq_pilot")
    rows = np.flatnonzero(np.isfinite(st.value)) if st is not None else np.zeros(0, dtype=np.int64)
    if rows.size == 0:
        return B * B / 4.0
    i = int(np.searchsorted(info.offsets, rows[0], side="right")) - 1
    pilot = m.statistics["count_pilot"]
    return values_variance(float(np.nansum(parts[i][0])), float(np.nansum(parts[i][2])),
                           float(np.nansum(st.value[rows])), clamp=B, count_var=float(np.nansum(parts[i][1])),
                           total_var=float(np.nansum(parts[i][3])),
                           sumsq_count=float(np.nansum(pilot.value[rows])),
                           sumsq_var=float(np.nansum(st.law.variance()[rows])),
                           sumsq_count_var=float(np.nansum(pilot.law.variance()[rows])))


def between_bound(info: Any, parts: list[tuple[np.ndarray, ...]]) -> float:
    """:func:`dpopt.hierarchy.node_means.between_upper` of the engine's between-grid statistic with the
    total kept count every marginal measures, combined (:func:`dpopt.hierarchy.node_means.combined_total`;
    post-processing)."""
    n, n_var = combined_total([p[0] for p in parts], [p[1] for p in parts])
    return between_upper(float(getattr(info, "between", np.nan)), float(getattr(info, "between_sd", np.nan)), n,
                         count_var=n_var)


def component_upper_bounds(fit: Any, A: Any, y: np.ndarray, s2: np.ndarray, *, cap: float) -> dict[str, float]:
    """The variance components the intervals use: each component's posterior mean given the
    measurements, under a flat prior on [0, ``cap``] with the other components at their REML values
    (the restricted likelihood integrated over a log grid). Where the measurements say nothing about
    a component its likelihood is flat and the value is cap/2; where they pin it, its REML value.
    So a grid's interval never rests on a component the data cannot see being 0, the plug-in
    empirical-Bayes error (models/engine.md §4)."""
    names = list(fit.sigma2)
    sizes = [fit.effects[k].levels.size if k in fit.effects else fit.grid_mean.size for k in names]
    H = (A @ fit.grid_map).tocsc()
    base = np.array([min(max(fit.sigma2[k], 0.0), cap) for k in names])
    local = fit.grid_mean.size if RESIDUAL in fit.sigma2 else 0  # the grid residuals, eliminated first
    out = {}
    for j, k in enumerate(names):
        grid = cap * np.logspace(-6, 0, COMPONENT_GRID)  # σ² values; flat prior on σ²: weight ∝ σ² in log space
        ll = np.empty(grid.size)
        for i, v in enumerate(grid):
            trial = base.copy()
            trial[j] = v
            ll[i] = float(gls_posterior(H, y, s2, np.repeat(trial, sizes), n_local=local).loglik)
        w = np.exp(ll - ll.max()) * grid
        out[k] = float(np.sum(w * grid) / np.sum(w))
    return out


def _nothing(m: Measurements, info: Any, parts: list[tuple[np.ndarray, ...]], confidence: float) -> Estimates:
    """No node's count passed its threshold: every node is answered by the centre of the declared
    range with the whole range as its interval (a release that says it publishes nothing useful)."""
    U = float(m.bound if m.info.declared_bound is None else m.info.declared_bound)
    n = m.n_nodes
    released = np.zeros(n, dtype=bool)
    released[: int(np.bincount(info.codes[0]).size)] = True
    table = _table(m, released, np.full(n, U / 2.0), np.full(n, U / 2.0), np.full(n, np.nan), np.full(n, np.inf), U)
    table["count_estimate"] = np.concatenate([p[0] for p in parts])
    table["level"] = m.nodes["marginal"].to_numpy()
    answers = pd.DataFrame({"cell": m.finest["cell"].to_numpy(), "slot": m.finest["slot"].to_numpy(),
                            "node": m.finest["node"].to_numpy(dtype=np.int64)})
    summary = EstimatesInfo(components={}, components_upper={}, spread_bound=float("nan"), z=float("nan"),
                            fit="no node measured above its noise: nothing estimated",
                            nodes_released=int(released.sum()), target=float("nan"),
                            interval="the whole declared range (no node measured above its noise)")
    return Estimates(table=table, answers=answers, confidence=confidence, method=METHOD, measurements=m, info=summary)


def _table(m: Measurements, released: np.ndarray, mean: np.ndarray, hw: np.ndarray, direct: np.ndarray,
           direct_hw: np.ndarray, B: float) -> pd.DataFrame:
    nodes = m.nodes
    n = m.n_nodes
    return pd.DataFrame({
        "node": np.arange(n), "cell": nodes["cell"].to_numpy(), "h3_resolution": nodes["h3_resolution"].to_numpy(),
        "slot": nodes["slot"].to_numpy(), "slot_ns": nodes["slot_ns"].to_numpy(), "cycle_ns": m.node_cycles,
        "released": released, "mean": np.clip(mean, 0.0, B), "mean_error_bound": hw,
        "mean_direct": direct, "mean_direct_error_bound": direct_hw,
        "variance": np.full(n, np.nan), "variance_error_bound": np.full(n, np.nan),
        "variance_released": np.zeros(n, dtype=bool), "variance_withheld_reason": VARIANCE_REASON,
        "method": METHOD}, columns=list(ESTIMATE_COLUMNS))
