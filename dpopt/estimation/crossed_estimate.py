"""Estimates of the engine's release: one crossed random-effects model of the listed grids' means
(models/engine.md §4; the model and its REML fit: models/crossed.md). Post-processing only.

Every measured marginal's nodes (the final measurement of every round: models/engine.md §2) become
observations of weighted means of their grids (:func:`dpopt.hierarchy.node_means.crossed_inputs`);
:func:`dpopt.hierarchy.crossed.fit_crossed` fits μ + one random effect per coarser marginal + the
grid's own residual, variance components by REML from these observations alone. Every listed grid
is answered by its own row: the posterior mean of its θ_g, clamped to [A, B] (the DP clamp's ends;
the measurements read values shifted by −A and the means are moved back), with the interval

    z_{(1+conf)/2} · √Var(θ_g | measurements)

whose variance holds the estimation error of μ and of every effect *and* the grid-level variance
the model leaves unexplained (σ²_e, where the grid's own measurement says little): an interval
for that grid's truth, not for a coarser node's. The components it uses are posterior means under
a flat prior on {Σ σ² ≤ the DP spread bound} with the between-grid statistic read as a noisy
measurement of Σ σ²; a grid not measured on its own gets the predictive
interval, mixed over the residual component's posterior (:func:`grid_halfwidths`). Every measured
coarser node is published too, with the posterior of its weighted mean.

Where the model's factorisation does not fit in memory (hundreds of thousands of levels of an
interaction marginal), the factor with the most levels is left out and the fit repeated; its nodes
still enter as observations, and the fit's status says which factors were left out.
"""

from __future__ import annotations

import logging
import math
from statistics import NormalDist
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import chdtri, ndtr

from .._memory import trim_heap
from .._validation import DpoptInputError
from ..hierarchy.crossed import RESIDUAL, component_profile, fit_crossed, fit_kernel, means_only, within_memory
from ..hierarchy.lattice import main_effects
from ..hierarchy.node_means import (BETWEEN_SDS, MIN_LEVELS, between_estimate, between_upper, identified,
                                   combined_total, crossed_inputs, grid_weights, listed_weights, mostly_measured,
                                   proportional_weights, values_variance)
from ..measurements import ESTIMATE_COLUMNS, Estimates, EstimatesInfo, Measurements, UserInfo

__all__ = ["estimate_crossed", "offcentre_halfwidth", "JOINT_TEST_LEVEL", "POINT_FIT_PENALTY", "POINT_FIT_TEST", "component_rises", "own_sampling", "residual_scales", "resolved_grids", "weak_components", "sampling_variance", "within_grid_spread",
           "WITHIN_LOWER_SDS", "METHOD", "VARIANCE_REASON"]

METHOD = "crossed"
#: the estimate's progress lines (INFO; :func:`dpopt.writers.console.phase_lines`): the fits' components
#: and evaluations, computed from the DP measurements only
_log = logging.getLogger(__name__)
#: the one reason a variance is not published by the engine
VARIANCE_REASON = "not measured: this release publishes means"


#: the key of the days' spread inside a window in :func:`component_upper_bounds`' masses (no fit component)
DAYS = "days"


class Mixture(NamedTuple):
    """The posterior masses a grid not measured on its own is mixed over (:func:`interval_fit`): the
    grid ``u``, the grids' own residual ``p`` and, over a folded list, the days' spread inside a
    window ``days`` (None otherwise)."""

    u: np.ndarray
    p: np.ndarray
    days: np.ndarray | None = None


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
    _log.info("estimate: %d node means above their count thresholds, %d listed grids", y.size, sizes[0])
    if y.size == 0:  # nothing readable at this budget: every grid gets the whole declared range
        return _nothing(m, info, parts, float(confidence))
    z = NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    cap = spread_bound(m, info, parts)
    total = between_measurement(info, parts)
    w = listed_weights(list(info.codes), [p[0] for p in parts], [p[1] for p in parts])
    within = within_grid_spread(cap, total)
    sampling = sampling_variance(parts, info, kept, spread=cap, grid_spread=within)
    floor = own_sampling(m, info, parts, w, total)
    days = between_measurement(info, parts, name="day_between")
    (fit, upper, mean, var), dropped = within_memory(  # a factor whose levels do not fit: left out (module doc)
        lambda fs: _posterior(m, info, fs, A=A, y=y, s2=s2, kept=kept, w=w, cap=cap, spreads=(total, days),
                              confidence=float(confidence), sampling=sampling, floor=floor,
                              scale=residual_scales(info, parts, w)), factors)
    direct = np.full(m.n_nodes, np.nan)
    direct_hw = np.full(m.n_nodes, np.nan)  # no direct measurement: none (published empty)
    offset = 0
    for i, k in enumerate(kept):
        rows = int(info.offsets[i]) + k
        direct[rows] = y[offset: offset + k.size]
        direct_hw[rows] = z * np.sqrt(s2[offset: offset + k.size] + sampling[rows])
        offset += k.size
    released = np.zeros(m.n_nodes, dtype=bool)
    released[: sizes[0]] = True  # every listed grid
    for i, k in enumerate(kept):
        released[int(info.offsets[i]) + k] = True
    table = _table(m, released, mean, z * np.sqrt(np.maximum(var, 0.0)), direct, direct_hw, B,
                   low=float(getattr(info, "low", 0.0)))
    table["count_estimate"] = np.concatenate([p[0] for p in parts])
    table["level"] = m.nodes["marginal"].to_numpy()
    answers = pd.DataFrame({"cell": m.finest["cell"].to_numpy(), "slot": m.finest["slot"].to_numpy(),
                            "node": m.finest["node"].to_numpy(dtype=np.int64)})
    summary = EstimatesInfo(
        components=dict(fit.sigma2), components_upper=upper, spread_bound=cap, z=z,
        fit=fit.status + ("" if not dropped else f"; without the factors {', '.join(dropped)} (their levels did not "
                                                 "fit in memory: their nodes enter as observations only)"),
        interval=_interval_text(days is not None, info.period is not None),
        nodes_released=int(released.sum()), target=float("nan"))
    return Estimates(table=table, answers=answers, confidence=float(confidence), method=METHOD, measurements=m,
                     info=summary)


def _interval_text(windows: bool, private: bool) -> str:
    """What the published intervals are, in words (summary.json): over a folded list (``windows``) and
    without a public list (``private``) they say more."""
    return ("the posterior predictive interval of the grid's mean under the crossed model: variance "
            "components under a flat prior on their sum ≤ the spread bound, the between-grid statistic "
            "a noisy measurement of that sum; a grid not measured on its own mixed over its residual's "
            "posterior (scaled by 1/its estimated records where cell-level counts give them), a measured "
            "grid or coarser node z * sqrt(posterior variance)"
            + ("; each window of the day also holds the days' spread inside it (a DP statistic), so its "
               "row's interval is for the window's grid on any one day" if windows else "")
            + ("; a row coarser than the selected cells is, by the smallest published node containing a grid, "
               "the answer for the grids of places the selection left out, of which nothing was measured: its "
               "interval holds the whole declared range (its own measurement: mean_direct)" if private else ""))


#: the between-grid statistic's lower end V̂ − this·sd(V̂) is taken from the values' variance bound to
#: bound the records' variance within a grid: under Laplace noise it is above the truth in
#: ½·exp(−3√2) ≈ 0.7 % of releases (a statement about the noise law, not about data)
WITHIN_LOWER_SDS = 3.0


def within_grid_spread(spread: float, total: tuple[float, float, str] | None) -> float:
    """An upper end of the records' variance about their grid's mean (record-weighted over the
    listed grids): the law of total variance, R minus a lower end of the grids' means' spread,
    R − max(V̂ − :data:`WITHIN_LOWER_SDS`·sd(V̂), 0), with R = ``spread`` the values' variance bound and
    ``total`` = (V̂, sd, family) the between-grid statistic (:func:`between_measurement`); R where that
    was not measured. Post-processing of DP outputs."""
    if total is None:
        return float(spread)
    v, sd, _ = total
    return float(spread) - min(max(v - WITHIN_LOWER_SDS * sd, 0.0), float(spread))


def own_sampling(m: Measurements, info: Any, parts: list[tuple[np.ndarray, ...]], w: np.ndarray,
                 total: tuple[float, float, str] | None) -> np.ndarray:
    """Per listed grid (grid order), f_g = s²/n̂_g, the variance of the mean of its n_g records about
    their expectation: what no coarser node can tell of a grid (:func:`grid_halfwidths`). s² is the
    point estimate of the records' variance within a grid, the kept values' variance
    (:func:`spread_bound` at 0 sds) less the grids' means' spread max(V̂, 0) (the law of total
    variance), n̂_g the grid's own noisy kept count floored at one noise sd
    (:func:`dpopt.hierarchy.node_means.grid_weights`). A point estimate, not an upper end as in
    :func:`sampling_variance`: the floor enters every grid whose count was measured, and at ε ≤ 10 an
    upper end is mostly the statistics' noise allowance. Where the grids' own counts were not
    measured, n̂_g is the count :func:`resolved_grids` fits for a grid that measured cell-level
    marginals single out, and f_g is 0 for the others: weights fitted to a coarser place's margins
    are no count of a single grid's records. Post-processing of DP outputs."""
    s2 = max(spread_bound(m, info, parts, sds=0.0) - (max(total[0], 0.0) if total is not None else 0.0), 0.0)
    if np.isfinite(parts[0][0]).any():
        return s2 / np.maximum(np.asarray(w, dtype=float), 1.0)
    resolved, counts = resolved_grids(info, parts)
    return np.where(resolved, s2 / np.maximum(counts, 1.0), 0.0)


def resolved_grids(info: Any, parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """(resolved, counts) per listed grid (grid order): a grid is *resolved* where the measured
    marginals at its own place level (the finest resolution, other time levels) single it out — no
    other listed grid lies in the same node of every one of them (cell × hour-of-day and cell × day
    single out the cell's hour) — and ``counts`` is then its estimated kept count, one sweep of
    proportional fitting to those marginals' noisy counts floored at one noise sd
    (:func:`dpopt.hierarchy.node_means.grid_weights`): the independence of the two time levels within
    one cell, never of places within a coarser one (on the Austin buses, fitting a cell's count over
    its region's time profile gave the busiest grids a median of 1.9 records against their 52).
    Elsewhere (resolved False) no count of a single grid's records is known and ``counts`` is NaN.
    Public structure and DP counts only (post-processing)."""
    finest = info.levels[0][0]
    same = [i for i in range(1, len(info.codes))
            if info.levels[i][0] == finest and np.isfinite(parts[i][0]).all() and np.size(parts[i][0]) > 0]
    n_grids = np.size(info.codes[0])
    if not same:
        return np.zeros(n_grids, dtype=bool), np.full(n_grids, np.nan)
    _, inverse, shared = np.unique(np.stack([np.asarray(info.codes[i]) for i in same]), axis=1,
                                   return_inverse=True, return_counts=True)
    resolved = shared[np.ravel(inverse)] == 1
    counts = proportional_weights([info.codes[i] for i in same], [grid_weights(parts[i][0], parts[i][1]) for i in same])
    return resolved, np.where(resolved, counts, np.nan)


def residual_scales(info: Any, parts: list[tuple[np.ndarray, ...]], w: np.ndarray) -> np.ndarray | None:
    """Per listed grid (grid order), r_g = max(w̄/w_g, 1): a grid's residual variance at least σ²_e and
    larger in proportion to the inverse of its weight where the weight is below the mean w̄ — where
    the weights can tell a grid's records: the grids' own counts were not measured, and a marginal at
    the grids' own place level (the finest resolution, a coarser time) entered the weights'
    proportional fit (:func:`dpopt.hierarchy.node_means.mostly_measured`). None elsewhere (one scale
    for every grid). A grid's unexplained variance holds the sampling of its users, r² ≈ b/users on
    every benchmark set (models/engine.md §6, "What the residual is"), which falls with the grid's
    weight, and whatever the measured marginals miss (an hour-of-day profile no factor carries), the
    same for a busy grid as for a thin one; the data at these budgets do not tell the two apart, so
    each grid gets the larger of the two readings, σ²_e·(s + (1 − s)·w̄/w_g) at its worst over the
    unknown share s ∈ [0, 1]. With w̄/w_g alone the busiest grids' intervals shrank to their
    sampling and covered 0.67–0.71 of the grids' truths where the hour of the day set the value and
    no time factor was seen (models/engine.md §6). A weight fitted to coarser places only does not
    tell a busy cell from a thin one in the same region. Post-processing of DP outputs and the public
    lattice."""
    if np.isfinite(parts[0][0]).any():
        return None
    finest = info.levels[0][0]
    if not any(info.levels[i][0] == finest and np.all(np.isfinite(parts[i][0])) and np.size(parts[i][0])
               and mostly_measured(parts[i][0], parts[i][1]) for i in range(1, len(info.codes))):
        return None
    w = np.maximum(np.asarray(w, dtype=float), np.finfo(float).tiny)
    return np.maximum(float(np.mean(w)) / w, 1.0)


def sampling_variance(parts: list[tuple[np.ndarray, ...]], info: Any, kept: list[np.ndarray], *,
                      spread: float, grid_spread: float | None = None) -> np.ndarray:
    """Per node row: the variance of its kept records' mean about the mean of all its records,
    κ·s²/m̂ for every node that entered on its own (0 for the others), κ the share of a kept record's
    user's records the cap did not keep (``info.unkept``, from the DP histogram of records per user;
    1 where unknown), s² the records' variance about their node's mean — ``grid_spread`` for the
    listed grids (:func:`within_grid_spread`), for coarser nodes R = ``spread``, the DP upper end of
    the kept values' variance (which holds it) — and m̂ the node's noisy count at its lower end n − sd(n)
    (at least 1). The cap keeps a uniform share of each user's records, so a node's kept mean is a
    sample of its records' mean, the finite-population correction κ (models/engine.md §4). The
    model's θ_g is the kept mean; where a node is measured on its own, its posterior pins the kept
    mean and this term is what separates it from the truth (at ε = 1000 on the embedded day the
    grids' direct intervals without it covered 0.72 of their truths). Post-processing of DP outputs."""
    kappa = float(getattr(info, "unkept", 1.0))
    out = np.zeros(int(sum(p[0].size for p in parts)))
    for i, k in enumerate(kept):
        n, n_var = parts[i][0][k], parts[i][1][k]
        s2 = float(spread) if i > 0 or grid_spread is None else float(grid_spread)
        out[int(info.offsets[i]) + k] = kappa * s2 / np.maximum(n - np.sqrt(np.maximum(n_var, 0.0)), 1.0)
    return out


def _posterior(m: Measurements, info: Any, factors: dict[str, np.ndarray], *, A: Any, y: np.ndarray, s2: np.ndarray,
               kept: list[np.ndarray], w: np.ndarray, cap: float, confidence: float,
               spreads: tuple[Any, Any] = (None, None), sampling: np.ndarray | None = None,
               floor: np.ndarray | None = None, scale: np.ndarray | None = None
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
    spreads : tuple
        (V̂, V̂_d), each (value, sd, family) or None: the between-grid statistic and, over a folded
        list, the days' spread inside the windows (:func:`between_measurement`, :func:`grid_halfwidths`).
    sampling : np.ndarray, optional
        Per node row, the variance of its kept mean about all its records' mean
        (:func:`sampling_variance`); added to the variance of the nodes measured on their own.
    floor : np.ndarray, optional
        Per listed grid (grid order), the variance of its own records' mean about what any coarser
        measurement can tell of it, s²_within/n̂_g (:func:`grid_halfwidths`).
    scale : np.ndarray, optional
        Per listed grid, r_g of :func:`residual_scales` (None: every grid's residual on one scale).
    """
    samp = np.zeros(m.n_nodes) if sampling is None else np.asarray(sampling, dtype=float)
    known, grid_seen = identified(list(info.names), kept, factors)
    fit, upper, wide, mix = interval_fit(factors, A, y, s2, cap=cap, seen=known, residual_seen=grid_seen,
                                         confidence=confidence, total=spreads[0], days=spreads[1],
                                         mains=implied_main_effects(m, info, factors, kept, known))
    cap = region_end(cap, fit)  # the region interval_fit used
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    mean, var = np.empty(m.n_nodes), np.empty(m.n_nodes)
    for i, size in enumerate(np.diff(np.append(info.offsets, m.n_nodes)).astype(int).tolist()):
        rows = slice(int(info.offsets[i]), int(info.offsets[i]) + size)
        W = _node_matrix(info.codes[i], size, w)
        mean[rows] = W @ fit.grid_mean
        if i == 0:  # the finest: the grids (the fit's order is the list's; node k is grid argsort(code)[k])
            code = info.codes[0]
            alone, direct = np.ones(size, dtype=bool), np.full(size, np.inf)
            alone[kept[0]], direct[kept[0]] = False, s2[: kept[0].size]  # the finest's rows come first in y
            h = grid_halfwidths(fit, upper, wide, mix, alone=alone[code], cap=cap, confidence=confidence,
                                sampling=samp[rows][code], floor=floor, direct_var=direct[code], residual_scale=scale)
            var[rows] = (h[np.argsort(code)] / z) ** 2  # read back as z·√var
        else:
            var[rows] = _coarse_variance(info, i, wide.node(W), mean[rows], samp[rows], cap + fit.mu_var, confidence)
    return fit, upper, mean, var


def _coarse_variance(info: Any, i: int, node: Any, published: np.ndarray, sampling: np.ndarray, top: float,
                     confidence: float) -> np.ndarray:
    """Marginal ``i``'s nodes' interval variances: :func:`_node_variance` (a mean in [0, B] varies by
    ≤ cap, ``top``); without a list, a node coarser than the selected cells answers, by the reader's
    rule, the grids of places the selection left out, of which nothing was measured: inf, its
    interval then the declared range (:func:`_table`; models/engine.md §8)."""
    if info.period is not None and info.levels[i][0] < info.levels[0][0]:
        return np.full(published.size, math.inf)
    return _node_variance(node, published, sampling, top=top, confidence=confidence)


def _node_variance(node: Any, published: np.ndarray, sampling: np.ndarray, *, top: float, confidence: float
                   ) -> np.ndarray:
    """A coarser node's interval as a variance (its half-width / z, squared): the interval fit's
    posterior ``node`` (its variance + the kept mean's ``sampling``, at most ``top``) about the
    ``published`` mean (:func:`offcentre_halfwidth`)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    v = np.minimum(node.var + sampling, top)
    h = offcentre_halfwidth(z * np.sqrt(v), published - node.mean, v[:, None], np.ones(1), confidence=confidence)
    return (h / z) ** 2


#: the likelihood-ratio test of :func:`interval_fit`: the components the point fit leaves out (the
#: `MIN_LEVELS` rule, the grids' residual where no grid was measured) are fitted with the others by
#: REML for the intervals' likelihoods where the data reject "all of them 0" at this level (ℓ_R
#: rising by more than χ²_k(1 − level)/2 for k freed components; conservative beside the boundary's
#: χ̄² mixture, Self & Liang 1987). A test's conventional level, not a tuned value
JOINT_TEST_LEVEL = 0.05

#: where no component of the point fit passes the test (χ²₁(0.95)/2 = 1.92), those that raise ℓ_R by
#: more than this above the same fit with them alone at 0 stay (:func:`weak_components`): Akaike's
#: criterion, one log-likelihood unit per variance parameter (Akaike 1973; for variance components
#: Vaida & Blanchard 2005, Greven & Kneib 2010 — on the boundary it already leans to the smaller
#: model). There the alternative is the map-wide mean for every grid, and the point fit is a
#: prediction: the test dropped a cell component the plan had bought wherever its nodes' noise was
#: comparable to it (models/engine.md §4). A criterion's constant, not a tuned value
POINT_FIT_PENALTY = 1.0

#: the test's cut for a component of the point fit beside one that passes it: ℓ_R's fall at
#: χ²₁(1 − :data:`JOINT_TEST_LEVEL`)/2 = 1.92 (the same conventional level)
POINT_FIT_TEST = float(chdtri(1, JOINT_TEST_LEVEL) / 2.0)


def interval_fit(factors: dict[str, np.ndarray], A: Any, y: np.ndarray, s2: np.ndarray, *, cap: float,
                 seen: Collection[str], residual_seen: bool, confidence: float = 0.95,
                 total: tuple[float, float, str] | None = None, days: tuple[float, float, str] | None = None,
                 mains: tuple[dict[str, np.ndarray], dict[str, tuple[str, ...]]] | None = None
                 ) -> tuple[Any, dict[str, float], Any, Mixture]:
    """(point fit, the interval's components, the interval's fit) of the crossed model: REML fits the
    components of ``seen`` (and the grids' residual where ``residual_seen``), the point estimate,
    refitted without those :func:`weak_components` finds (a REML value the likelihood does not favour
    over 0);
    each component's likelihood for the intervals is taken with the others at that fit, or at a REML
    fit of every component where the data reject the left-out ones being 0
    (:data:`JOINT_TEST_LEVEL`: else interactions fitted without the residual absorb the grids' own
    variation and its likelihood is pinned near 0, models/engine.md §4);
    every component's value for the intervals is its posterior mean under the flat prior on
    {Σ σ² ≤ ``cap``} with ``total`` a noisy measurement of the sum (:func:`component_upper_bounds`),
    and the interval's fit holds the posterior
    variance of every grid under them, and (u, p) the posterior masses of the grids' own residual
    component (for :func:`predictive_halfwidth`; models/engine.md §4) and, with ``days``, of the
    days' spread inside a window (:func:`component_upper_bounds`). ``mains``: the implied main effects
    (codes) and each factor's main effects (:func:`implied_main_effects`, :func:`point_fit`).
    Post-processing of (A, y, s2, cap)."""
    implied, parents = mains if mains is not None else ({}, None)
    factors = {**factors, **implied}
    fit, seen, replaced = point_fit(factors, A, y, s2, seen=seen, residual_seen=residual_seen,
                                    confidence=confidence, parents=parents)
    cap = region_end(cap, fit)
    # a factor of fewer than MIN_LEVELS levels left out of the point fit is left out here too: its few
    # nodes measure its effects, so under the flat prior it would take V̂'s spread from the residual
    # while widening nothing; an implied main effect enters only where the point fit holds it, and then
    # in place of the factor it replaced (one more component shared the spread bound's prior, and the
    # unseen residual's share fell with it; models/engine.md §4, "Main effects")
    factors = {f: c for f, c in factors.items()
               if f in seen or (f not in implied and f not in replaced and _level_count(c) >= MIN_LEVELS)}
    given = {**{f: fit.sigma2.get(f, 0.0) for f in factors}, RESIDUAL: fit.sigma2.get(RESIDUAL, 0.0)}
    every = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, sigma2=given, variances=False)
    if len(given) > len(fit.sigma2):  # components the point fit left out: does the data reject them all at 0?
        at_given = every.loglik
        del every  # its n × n factorisation is not held through the joint REML search (refitted if it stands)
        joint = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, variances=False,
                            start=fit.sigma2)  # the point fit's components; the left-out ones at the moment share
        freed = len(given) - len(fit.sigma2)
        if joint.loglik - at_given > chdtri(freed, JOINT_TEST_LEVEL) / 2.0:  # χ²_k upper quantile
            _log.info("interval: the %d component%s the point fit left out fitted with the others (the data "
                      "reject 0)", freed, "" if freed == 1 else "s")
            every = joint
        else:
            every = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, sigma2=given,
                                variances=False)
        del joint
    every = means_only(every)  # the profiles read its components and kernel only (memory only)
    trim_heap()
    upper, u, posts = component_upper_bounds(every, A, y, s2, cap=cap, total=total, days=days)
    del every  # its factorisation (n × n) is not needed by the wide fit
    trim_heap()
    _log.info("interval: the grids' posterior variances at %s", _components_text(upper))
    wide = fit_crossed(factors, A, y, s2, residual=True, confidence=confidence, sigma2=upper)
    return fit, upper, wide, Mixture(u, posts[RESIDUAL], posts.get(DAYS))


def point_fit(factors: dict[str, np.ndarray], A: Any, y: np.ndarray, s2: np.ndarray, *, seen: Collection[str],
              residual_seen: bool, confidence: float, parents: dict[str, tuple[str, ...]] | None = None
              ) -> tuple[Any, list[str], list[str]]:
    """(the point fit, means and components only; its factors; the factors main effects replaced):
    REML of the components of ``seen`` (and the grids' residual where ``residual_seen``), each factor
    the measurements cannot tell from its main effects (``parents``) replaced by them
    (:func:`main_effects_instead`), then refitted without the :func:`weak_components` (a REML value the
    likelihood does not favour over 0; their nodes still observe the grids, and the intervals keep them).
    Post-processing."""
    seen, replaced = [f for f in factors if f in seen], []
    fit = _reml_fit(factors, seen, A, y, s2, residual=residual_seen, confidence=confidence)
    _log.info("point fit: %s (REML, %d evaluations)", _components_text(fit.sigma2), fit.n_evaluations)
    if parents:
        seen, fit, replaced = main_effects_instead(fit, factors, seen, parents, A, y, s2, residual=residual_seen,
                                                   confidence=confidence)
        _log.info("main effects: %s", f"in place of {', '.join(replaced)}" if replaced else "no factor replaced")
    weak = weak_components(fit, A, y, s2)
    if weak:
        _log.info("point fit: refitted without %s (the likelihood does not favour them over 0)",
                  ", ".join(sorted(weak)))
        seen = [f for f in seen if f not in weak]
        fit = _reml_fit(factors, seen, A, y, s2, residual=residual_seen and RESIDUAL not in weak,
                        confidence=confidence, start=(fit.sigma2,))
    trim_heap()  # the REML searches' freed work, before the interval's fits (memory only)
    return fit, seen, replaced


def implied_main_effects(m: Measurements, info: Any, factors: dict[str, np.ndarray], kept: list[np.ndarray],
                         seen: Collection[str]) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, ...]]]:
    """(the main effects the measured factors imply that no measured marginal is, those the
    measurements identify; per factor, its identified main effects)
    (:func:`dpopt.hierarchy.lattice.main_effects`; models/engine.md §4, "Main effects"), of the
    factors at the lattice's coarsest place level only: there a place with no node above its noise had
    nothing to borrow from (a finer factor's places borrow the map-level factor's pattern already),
    and each test costs REML fits (a cell-level factor's, minutes each on a large list). An implied
    main effect is identified where it has at least :data:`MIN_LEVELS` levels among the nodes that
    entered of the factors it is a main effect of (the rule of
    :func:`dpopt.hierarchy.node_means.identified`); a measured one where it is in ``seen``. Public
    lattice and which nodes entered (a function of DP outputs)."""
    sizes = np.diff(np.append(info.offsets, m.n_nodes))
    index = {name: i for i, name in enumerate(info.names)}
    rows = {f: m.nodes.iloc[int(info.offsets[index[f]]): int(info.offsets[index[f]] + sizes[index[f]])]
            for f in factors}
    top = min(int(lv[0]) for lv in info.levels)  # the lattice's coarsest place level (the map's)
    me = main_effects(factors, {f: info.levels[index[f]] for f in factors}, rows,
                      finest_slot_ns=int(info.levels[0][1]),
                      of=[f for f in factors if int(info.levels[index[f]][0]) == top])
    entered: dict[str, set[int]] = {}
    for (child, main), node_key in me.node_levels.items():
        entered.setdefault(main, set()).update(np.unique(node_key[kept[index[child]]]).tolist())
    implied = {f: c for f, c in me.codes.items() if len(entered.get(f, ())) >= MIN_LEVELS}
    parents = {child: tuple(p for p in ps if p in implied or p in seen) for child, ps in me.parents.items()}
    return implied, {child: ps for child, ps in parents.items() if ps}


def main_effects_instead(fit: Any, factors: dict[str, np.ndarray], seen: list[str],
                         parents: dict[str, tuple[str, ...]], A: Any, y: np.ndarray, s2: np.ndarray, *,
                         residual: bool, confidence: float, level: float = JOINT_TEST_LEVEL
                         ) -> tuple[list[str], Any, list[str]]:
    """(the factors of the point fit, its REML fit, the factors replaced) after each (place × time)
    factor of the fit whose variance REML put above 0 is replaced by its main effects (``parents``: the
    place alone and the time alone, those identified) wherever the measurements cannot tell it from
    them: the restricted likelihood of the fit with the main effects instead is at most
    χ²₁(1 − ``level``)/2 below the fit's *and* below that of the fit with both (the nested test of the
    factor's component at 0 beside its main effects). The places then share the time's pattern (or the
    times the place's) as far as the measurements tell. Largest component first. Without it, a region
    whose nodes are noise kept its effects of the factor at 0 and its grids were answered by μ (two
    regions, the day of the week setting the value: the thin region's weekdays at 46 against a truth
    of 30); the first test alone also replaced aircraft A's r3 × slot, which the fit with both holds
    (ℓ_R 3.4 above the main effects alone; models/engine.md §4, "Main effects"). Post-processing."""
    crit = chdtri(1, level) / 2.0
    replaced = []
    for f in sorted((f for f in parents if f in seen), key=lambda f: -float(fit.sigma2.get(f, 0.0))):
        if float(fit.sigma2.get(f, 0.0)) <= 0.0:
            continue
        added = [p for p in parents[f] if p not in seen]
        trial = [g for g in seen if g != f] + added
        share = {p: float(fit.sigma2[f]) / max(len(added), 1) for p in added}  # F's spread, split among its mains
        refit = _reml_fit(factors, trial, A, y, s2, residual=residual, confidence=confidence,
                          start=(fit.sigma2, share))
        if fit.loglik - refit.loglik > crit:  # the factor explains more than its main effects
            continue
        # the model of both holds the two fits as faces (F's component at 0, or the main effects'):
        # its search starts at the higher of them, the other's components at their bound
        face = refit.sigma2 if refit.loglik >= fit.loglik else fit.sigma2
        if added and _reml_fit(factors, seen + added, A, y, s2, residual=residual, confidence=confidence,
                               start=(face, dict.fromkeys(seen + added, 0.0))).loglik - refit.loglik > crit:
            continue  # beside its main effects the factor still explains more: it stays
        seen, fit = trial, refit
        replaced.append(f)
    return seen, fit, replaced


def _reml_fit(factors: dict[str, np.ndarray], names: list[str], A: Any, y: np.ndarray, s2: np.ndarray, *,
              residual: bool, confidence: float, start: Sequence[Mapping[str, float]] = ()) -> Any:
    """The REML fit (:func:`means_only`) of the factors ``names`` of ``factors``, its search
    started at each component's value in the first of ``start`` (fits of nearby models) that holds
    it, else at the moment start's share (:func:`dpopt.hierarchy.crossed.fit_crossed`): each refit
    of a model one factor away from a fit starts next to its maximum, not at the moment start (the
    large list's, 38,252 grids, 20–30 s per factorisation: 10 of them from the moment start)."""
    keys = list(names) + ([RESIDUAL] if residual else [])
    begin = {k: float(next(s[k] for s in start if k in s)) for k in keys if any(k in s for s in start)}
    # its means and components are read from here on, never its factorisation: the main effects'
    # tests hold two fits through a third's search (3.1 GiB peak on the large list, 1.7 before them)
    return means_only(fit_crossed({g: factors[g] for g in names}, A, y, s2, residual=residual,
                                  confidence=confidence, variances=False, start=begin or None))


def _components_text(sigma2: Mapping[str, float]) -> str:
    """The components of a fit as a progress line reads them: σ²(name) = value, each."""
    return ", ".join(f"σ²({k}) = {float(v):.4g}" for k, v in sigma2.items()) or "μ alone"


def _level_count(code: np.ndarray) -> int:
    """The number of levels a factor takes over the listed grids (public: the lattice)."""
    return int(np.unique(np.asarray(code)).size)


def region_end(cap: float, fit: Any) -> float:
    """The end of the components' prior region {Σ σ² ≤ end}: the spread bound ``cap`` or, where the
    components the point fit keeps (identified, not weak) already sum above it, their REML sum. The
    spread bound is a 2-sd upper end that the truth exceeds in ≈ 3 % of releases under Laplace
    noise; where REML's pinned components sum above it, its draw fell low, and a region without the
    point fit squeezes the pinned components, and every interval with them, below what their nodes
    show (the synthetic sensors at ε = 10, seed 1006: R = 26.3 against REML 45 + 12, the hour
    component's posterior 17.8, coverage 0.66; models/engine.md §4). Components the point fit left out
    (freed only for the intervals' likelihoods) do not move it. Post-processing."""
    return float(max(cap, sum(max(float(v), 0.0) for v in fit.sigma2.values())))


def component_rises(fit: Any, A: Any, y: np.ndarray, s2: np.ndarray) -> dict[str, float]:
    """Per component of ``fit`` (REML) above 0, how far ℓ_R falls when it alone is set to 0, the
    others at their REML values (a conditional comparison, which keeps a component more often than
    the profile one would). Post-processing."""
    names = list(fit.sigma2)
    base = np.array([max(float(fit.sigma2[k]), 0.0) for k in names])
    if not np.any(base > 0):
        return {}
    H, inner, order, kernel = fit_kernel(fit, A)
    at_base = component_profile(H, y, s2, base[order], inner, 0, base[order[:1]], **kernel)[0]  # one for every j
    rises = {}
    for j in np.flatnonzero(base > 0):
        i = int(np.flatnonzero(order == j)[0])
        rises[names[j]] = float(at_base - component_profile(H, y, s2, base[order], inner, i, np.zeros(1), **kernel)[0])
    return rises


def weak_components(fit: Any, A: Any, y: np.ndarray, s2: np.ndarray) -> set[str]:
    """The components of ``fit`` (REML) above 0 that leave the point fit (:func:`component_rises`):
    beside a component whose rise passes the test (:data:`POINT_FIT_TEST` = 1.92), those
    that do not pass it; where none passes, those that do not earn :data:`POINT_FIT_PENALTY`
    (Akaike's unit) — the map-wide mean is then the other answer, and a component the data favour by
    more than a unit predicts the grids better than none (models/engine.md §4). REML's maximum on a
    flat likelihood is a draw of the noise: seven day nodes of noise sd ≈ 120 gave a day component of
    1,636 at ℓ_R 1.8 above its value at 0, ±50 effects, and answers 2.8× the constant's error
    (heavy-tailed amounts at ε = 1, beside the hour's component). Post-processing."""
    rises = component_rises(fit, A, y, s2)
    cut = POINT_FIT_TEST if any(r > POINT_FIT_TEST for r in rises.values()) else POINT_FIT_PENALTY
    return {k for k, r in rises.items() if r <= cut}


def grid_halfwidths(fit: Any, upper: dict[str, float], wide: Any, residual: Mixture | tuple[np.ndarray, np.ndarray], *,
                    alone: np.ndarray, cap: float, confidence: float = 0.95,
                    sampling: np.ndarray | None = None, floor: np.ndarray | None = None,
                    direct_var: np.ndarray | None = None, residual_scale: np.ndarray | None = None) -> np.ndarray:
    """The grids' interval half-widths (the fit's grid order) from :func:`interval_fit`'s outputs.

    A grid measured on its own: z·√(Var + its ``sampling`` variance) under the components' posterior
    means (:func:`sampling_variance`: its kept mean against all its records' mean). A grid not measured
    on its own (``alone``) holds its residual e_g whole, so its error variance given σ²_e = t is
    Var − E σ²_e + t and its interval is the predictive one, mixed over the residual's posterior
    (:func:`predictive_halfwidth`). Either capped at cap + Var(μ̂): a mean in [0, B] varies about
    the map-wide mean by at most the spread bound (models/engine.md §4). Each is then taken about the
    published mean ``fit.grid_mean``, off the interval fit's own centre (:func:`offcentre_halfwidth`).

    ``floor`` f_g = s²_within/n̂_g: a grid's truth is the mean of its n_g records, which deviates
    from anything coarser nodes can tell by their own sampling, whatever the model's σ²_e (which
    REML can put at 0 where noisy grid measurements over-explain the spread). A grid not measured on
    its own then holds at least f_g: its mixture is shifted by max(f_g − E σ²_e, 0); a measured one
    has at least the posterior variance of a prior of variance f_g and its own measurement
    (``direct_var`` s²_g), f_g·s²_g/(f_g + s²_g).

    ``residual_scale`` r_g (:func:`residual_scales`; None: 1; not with ``residual.days``): a grid not
    measured on its own holds its residual as r_g·σ²_e, its error variance given σ²_e = t is
    Var − E σ²_e + r_g·t (:func:`_mixed_halfwidths`).

    ``residual.days`` (a :class:`Mixture`'s; over a folded list, models/engine.md §8): each row is a
    window of the day in a cell and answers that window's grid on every day, whose truth deviates
    from the window's by the days' spread τ² (a day's effect and its own records' sampling). τ²'s
    posterior masses (:func:`component_upper_bounds`) are convolved into the residual's mixture of a
    grid not measured on its own (the two taken as independent: their joint posterior, bound by one
    region, is negatively dependent, so the sum's spread is overstated — conservative), and its
    mean is added to a measured one's variance."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    top = cap + fit.mu_var
    v = np.asarray(wide.grid_var, dtype=float)
    u_e, p_e = residual[0], residual[1]
    p_d = getattr(residual, "days", None)
    tau = None if p_d is None else (p_d, float(np.sum(u_e * p_d)))
    f = np.zeros(v.size) if floor is None else np.asarray(floor, dtype=float)
    d = np.full(v.size, np.inf) if direct_var is None else np.asarray(direct_var, dtype=float)
    seen, own = f.copy(), np.isfinite(d)
    seen[own] = f[own] * d[own] / np.maximum(f[own] + d[own], 1e-300)
    v_own = np.maximum(v, seen) + (0.0 if sampling is None else np.asarray(sampling, dtype=float))
    v_own = v_own + (0.0 if tau is None else tau[1])
    alone = np.asarray(alone, dtype=bool)
    shift = np.asarray(fit.grid_mean, dtype=float) - np.asarray(wide.grid_mean, dtype=float)
    h = np.empty(v.size)
    v_seen = np.minimum(v_own[~alone], top)
    h[~alone] = offcentre_halfwidth(z * np.sqrt(v_seen), shift[~alone], v_seen[:, None], np.ones(1),
                                    confidence=confidence)
    if alone.any():
        u, p = u_e, p_e
        if tau is not None:  # the residual and the days' spread taken as independent: their sum's masses
            p = np.convolve(p_e, tau[0])  # (both on the grid of step u_e[1], from 0)
            u = np.arange(p.size) * float(u_e[1] - u_e[0])
        base = np.maximum(v[alone] - upper[RESIDUAL], 0.0) + np.maximum(f[alone] - upper[RESIDUAL], 0.0)
        r = None if residual_scale is None or tau is not None else np.asarray(residual_scale, dtype=float)[alone]
        h[alone] = _mixed_halfwidths(base, (u, p), shift[alone], r, top=top, confidence=confidence)
    return h


def _mixed_halfwidths(base: np.ndarray, residual: tuple[np.ndarray, np.ndarray], shift: np.ndarray,
                      scale: np.ndarray | None, *, top: float, confidence: float) -> np.ndarray:
    """:func:`grid_halfwidths` of the grids not measured on their own: error variance min(base +
    r·t, ``top``) given the residual's component t (masses ``residual`` = (u, p)), about the
    published mean ``shift`` off the interval fit's centre (:func:`offcentre_halfwidth`); r the
    grids' ``scale`` (None: 1), its centred half-width capped after the scaling at z·√top, which
    holds any mixture of variances ≤ top (conservative beside capping each)."""
    u, p = residual
    ub, pb = _binned_masses(u, p)
    if scale is None:
        scale = np.ones(base.size)
        centred = predictive_halfwidth(base, u, p, confidence=confidence, top=top)
    else:
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        centred = np.minimum(np.sqrt(scale) * predictive_halfwidth(base / scale, u, p, confidence=confidence),
                             z * math.sqrt(top))
    var = np.minimum(np.maximum(base[:, None] + scale[:, None] * ub[None, :], 1e-300), top)
    return offcentre_halfwidth(centred, shift, var, pb, confidence=confidence)


#: rows (grids or nodes) solved together by :func:`offcentre_halfwidth`: its arrays hold rows × mixture
#: points floats (a memory bound, not a modelling choice)
OFFCENTRE_ROWS = 4096


def offcentre_halfwidth(centred: np.ndarray, shift: np.ndarray, var: np.ndarray, p: np.ndarray, *,
                        confidence: float) -> np.ndarray:
    """Half-widths h of intervals about the published mean where the interval's posterior is centred
    ``shift`` d away from it. The published mean is the point fit's (REML components,
    :func:`interval_fit`), the posterior the interval fit's (the components' posterior means), whose
    centre is that fit's posterior mean: given the measurements the truth minus the published mean is
    the mixture Σ_i p_i·N(−d, s_i²) (s_i² = ``var``[:, i]; one column and p = [1] for a normal), and h
    solves Σ_i p_i·(Φ((h − d)/s_i) − Φ((−h − d)/s_i)) = ``confidence``. ``centred`` holds each row's
    half-width at d = 0 (:func:`predictive_halfwidth` or z·s); h lies in [max(h0, |d|), h0 + |d|]
    (a symmetric unimodal law covers less off centre; the wider end holds the centred interval), and
    safeguarded Newton steps solve it on that bracket (:func:`_offcentre_solve`). Where REML read two
    noisy time components at 67 and 157 (km/h)² and the interval's fit at 47 and 89, the centred
    half-widths about the REML answers covered 0.866 of the day-set's grids (full Austin records,
    ε = 10, seed 1014; models/engine.md §4, "The published centre"). Post-processing."""
    h0 = np.asarray(centred, dtype=float)
    d = np.abs(np.asarray(shift, dtype=float))  # the law is symmetric about −d: |d| gives the same h
    out = h0 + d  # the bracket's wide end: kept where d is below OFFCENTRE_NEGLIGIBLE of h0
    rows = np.flatnonzero(d > OFFCENTRE_NEGLIGIBLE * h0)
    pw = np.asarray(p, dtype=float)
    live = pw > OFFCENTRE_MASS  # masses far below the coverage's resolution are dropped
    pw = pw[live] / pw[live].sum()
    sd = np.sqrt(np.asarray(var, dtype=float)[:, live])
    for start in range(0, rows.size, OFFCENTRE_ROWS):
        r = rows[start: start + OFFCENTRE_ROWS]
        out[r] = _offcentre_solve(h0[r], d[r], sd[r], pw, confidence)
    return out


#: a shift below this share of the centred half-width takes the bracket's wide end h₀ + |d| (too wide
#: by less than this share); masses of the mixture below OFFCENTRE_MASS are dropped (the coverage moves
#: by less than their sum, ≤ 128·OFFCENTRE_MASS). Resolutions, not modelling choices
OFFCENTRE_NEGLIGIBLE = 1e-3
OFFCENTRE_MASS = 1e-9
#: the coverage of :func:`offcentre_halfwidth`'s solution is at least confidence − this
OFFCENTRE_TOL = 1e-10


def _offcentre_solve(h0: np.ndarray, d: np.ndarray, sd: np.ndarray, p: np.ndarray, confidence: float) -> np.ndarray:
    """The root in [max(h0, d), h0 + d] of C(h) = Σ_i p_i·(Φ((h − d)/s_i) − Φ((−h − d)/s_i)) = confidence
    (:func:`offcentre_halfwidth`): Newton steps, C'(h) = Σ_i p_i·(φ((h − d)/s_i) + φ((h + d)/s_i))/s_i,
    kept inside the bracket (a bisection step where Newton leaves it); the bracket's upper end where
    the iterate's coverage is short of confidence − OFFCENTRE_TOL. A zero variance gives infinite
    standardised ends (Φ = 0 or 1, φ = 0: no Newton step, a bisection one), hence no float warnings."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return _offcentre_iterate(h0, d, sd, p, confidence)


def _offcentre_iterate(h0: np.ndarray, d: np.ndarray, sd: np.ndarray, p: np.ndarray, confidence: float
                       ) -> np.ndarray:
    """:func:`_offcentre_solve`'s iteration. A row whose coverage at the bracket's lower end already
    reaches confidence − OFFCENTRE_TOL takes that end (the coverage rises with h: the root is no
    larger; the centred half-width capped at z·√top is such a row); the others iterate until their
    |gap| ≤ OFFCENTRE_TOL or their bracket is a float's width, each leaving the iteration then."""
    lo, hi = np.maximum(h0, d), h0 + d
    x = lo.copy()
    at_x, _ = _offcentre_gap(x, d, sd, p, confidence)  # each row's gap at its x
    live = np.flatnonzero(at_x < -OFFCENTRE_TOL)
    x[live] = (lo[live] + hi[live]) / 2.0
    for _ in range(OFFCENTRE_STEPS):
        if live.size == 0:
            break
        xl, lol, hil = x[live], lo[live], hi[live]
        gap, slope = _offcentre_gap(xl, d[live], sd[live], p, confidence)
        lol, hil = np.where(gap < 0, xl, lol), np.where(gap >= 0, xl, hil)
        lo[live], hi[live] = lol, hil
        done = (np.abs(gap) <= OFFCENTRE_TOL) | (hil - lol <= 4.0 * np.finfo(float).eps * hil)
        at_x[live[done]] = gap[done]
        step = xl - gap / np.maximum(slope, 1e-300)
        x[live[~done]] = np.where((step > lol) & (step < hil), step, (lol + hil) / 2.0)[~done]
        live = live[~done]
    if live.size:
        at_x[live], _ = _offcentre_gap(x[live], d[live], sd[live], p, confidence)
    return np.where(at_x >= -OFFCENTRE_TOL, x, hi)


#: Newton steps of :func:`_offcentre_iterate` at most (bisection steps halve the bracket, so this
#: many take it to a float's width; Newton's steps converge in a few)
OFFCENTRE_STEPS = 60


def _offcentre_gap(x: np.ndarray, d: np.ndarray, sd: np.ndarray, p: np.ndarray, confidence: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """C(x) − confidence and C'(x) of :func:`_offcentre_solve` for each row."""
    a, b = (x[:, None] - d[:, None]) / sd, (x[:, None] + d[:, None]) / sd
    gap = (ndtr(a) - ndtr(-b)) @ p - confidence
    slope = ((np.exp(-0.5 * a * a) + np.exp(-0.5 * b * b)) / (sd * math.sqrt(2.0 * math.pi))) @ p
    return gap, slope


#: nodes of the quadrature of each component's likelihood over [0, cap] (models/engine.md §4): 0, a
#: log grid of COMPONENT_GRID points over six decades (a component far below the cap), an even grid
#: of COMPONENT_EVEN points (the flat part of the prior's range, where a log grid is too sparse) and
#: the REML value times COMPONENT_NEAR (a pinned component's peak). A quadrature resolution, not a
#: modelling choice: tested against a fine brute-force integral
COMPONENT_GRID = 12
COMPONENT_EVEN = 8
COMPONENT_NEAR = (0.5, 0.7, 1.0, 1.4, 2.0)


def component_nodes(cap: float, reml: float) -> np.ndarray:
    """The quadrature nodes of one component's likelihood (:data:`COMPONENT_GRID`): sorted, distinct,
    in [0, cap], 0 and cap included."""
    nodes = [np.zeros(1), cap * np.logspace(-6, 0, COMPONENT_GRID),
             cap * np.arange(1, COMPONENT_EVEN + 1) / COMPONENT_EVEN]
    if 0.0 < reml < cap:
        nodes.append(reml * np.asarray(COMPONENT_NEAR))
    return np.unique(np.clip(np.concatenate(nodes), 0.0, cap))


#: intervals of the common grid over [0, cap] on which the joint prior's integrals are summed (a
#: quadrature resolution: the error of a component's mean is O(cap/JOINT_GRID))
JOINT_GRID = 2048


def joint_prior_posteriors(cap: float, nodes: list[np.ndarray], logliks: list[np.ndarray],
                           total: tuple[float, float, str] | None = None, *,
                           outside: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """(u, masses): each variance component's posterior masses on the grid u_i = i·cap/M
    (M = :data:`JOINT_GRID`) under the flat prior on the region {σ²_k ≥ 0, Σ_k σ²_k ≤ cap} with the
    likelihood Π_k L_k(σ²_k), L_k = exp(``logliks[k]``) at ``nodes[k]`` (in [0, cap]) interpolated
    linearly (models/engine.md §4).

    Each L_k becomes masses m_k(i) = L_k(u_i)·w_i (trapezoid weights); the others' sum has the
    masses of their discrete convolution (an index sum is a value sum on this grid) and the
    constraint leaves component j the weight p_j(i) ∝ m_j(i)·P(Σ_{k≠j} ≤ u_{M−i}). With ``total`` =
    (V̂, sd, family), a noisy measurement of the sum (Laplace or Gaussian noise of that sd), the weight is
    p_j(i) ∝ m_j(i)·Σ_s P(Σ_{k≠j} = u_s)·ℓ(V̂ | u_i + u_s) over u_i + u_s ≤ cap.

    ``outside`` (nodes, loglik): one more component τ in the region, {Σ_k σ²_k + τ ≤ cap}, but not
    in the sum ``total`` measures (the days' spread inside the windows of a folded list, §8). With
    F_τ its masses' cumulative sum, component j's weight is the same cross-correlation with ℓ(V̂ | u_k)
    replaced by g(k) = ℓ(V̂ | u_k)·F_τ(M − k) (the sum at index k leaves τ at most M − k), and τ's is
    m_τ(t)·Σ_{S ≤ M − t} P(Σ_k = u_S)·ℓ(V̂ | u_S); its masses are returned last.

    The convolutions are direct sums (``np.convolve``, ≈ 2 ms each at M = 2048), exact in their
    small tails: by FFT, rounding left a floor of ≈ 10⁻¹⁶ of the peak that swamped those tails where
    two likelihoods peak above ``cap``, and the posterior means then summed to 17.5 on {Σ ≤ 8}
    (tests/estimation/test_crossed_intervals.py)."""
    M = JOINT_GRID
    u = np.linspace(0.0, cap, M + 1)
    w = np.full(M + 1, cap / M)
    w[[0, -1]] /= 2.0

    def masses_of(v: np.ndarray, ll: np.ndarray) -> np.ndarray:
        ll = np.where(np.isfinite(ll), ll, -np.inf)
        top = float(np.max(ll)) if np.any(np.isfinite(ll)) else 0.0
        m = np.interp(u, v, np.exp(ll - top)) * w
        mass = float(m.sum())
        return m / mass if mass > 0 else w / w.sum()

    masses = [masses_of(v, ll) for v, ll in zip(nodes, logliks)]
    like = np.ones(M + 1)
    if total is not None and np.isfinite(total[0]) and np.isfinite(total[1]) and total[1] > 0:
        ll = _measurement_loglik(u, total)
        like = np.exp(ll - ll.max())
    m_out = None if outside is None else masses_of(*outside)
    g = like if m_out is None else like * np.cumsum(m_out)[::-1]  # g(k) = ℓ(V̂ | u_k)·F_τ(M − k)
    out = []
    for j in range(len(masses)):
        conv = np.zeros(M + 1)
        conv[0] = 1.0  # the sum of no component: 0
        for k, m in enumerate(masses):
            if k != j:
                conv = np.convolve(conv, m)[: M + 1]
        # Σ_s conv(s)·g(i + s) over i + s ≤ M (a cross-correlation); g ≡ 1: P(Σ_{k≠j} ≤ u_{M−i})
        p = masses[j] * np.convolve(g, conv[::-1])[M: 2 * M + 1]
        out.append(p / p.sum() if p.sum() > 0 else w / w.sum())
    if m_out is not None:
        conv = np.eye(1, M + 1).ravel()  # the sum of no component: 0
        for m in masses:
            conv = np.convolve(conv, m)[: M + 1]
        p = m_out * np.cumsum(conv * like)[::-1]  # Σ_{S ≤ M − t} P(Σ = u_S)·ℓ(V̂ | u_S)
        out.append(p / p.sum() if p.sum() > 0 else w / w.sum())
    return u, out


def _measurement_loglik(u: np.ndarray, total: tuple[float, float, str]) -> np.ndarray:
    """log ℓ(V̂ | u) of a noisy measurement (V̂, sd, family) of u: Laplace or Gaussian noise of that sd."""
    v_hat, sd, family = total
    r = (v_hat - np.asarray(u, dtype=float)) / sd
    return -math.sqrt(2.0) * np.abs(r) if family == "laplace" else -0.5 * r * r


def joint_prior_means(cap: float, nodes: list[np.ndarray], logliks: list[np.ndarray],
                      total: tuple[float, float, str] | None = None) -> list[float]:
    """The posterior mean of each variance component of :func:`joint_prior_posteriors`. A single
    component gets the trapezoid mean of its likelihood on [0, cap] (cap/2 where it is flat); k flat
    likelihoods get cap/(k + 1) each (the uniform law on the simplex)."""
    u, posts = joint_prior_posteriors(cap, nodes, logliks, total)
    return [float(np.sum(u * p)) for p in posts]


#: points the residual's posterior is binned to for the predictive interval (a quadrature
#: resolution: the coverage of the mixture moves by far less than 10⁻³)
PREDICTIVE_POINTS = 128
#: at most this many distinct base variances are solved exactly; others are interpolated in h²
#: between geometrically spaced nodes (relative error far below 10⁻³: a resolution, not a choice)
PREDICTIVE_BASES = 512


def _binned_masses(u: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points, masses): the posterior masses p on u binned to :data:`PREDICTIVE_POINTS` points, each at
    its bin's mean, empty bins dropped, the masses normalised (no binning where u has no more points)."""
    u, p = np.asarray(u, dtype=float), np.asarray(p, dtype=float)
    if u.size <= PREDICTIVE_POINTS:  # reduceat over repeated edges would count a point twice
        keep = p > 0
        return u[keep], p[keep] / p[keep].sum()
    edges = np.linspace(0, u.size, PREDICTIVE_POINTS + 1).astype(int)
    pb = np.add.reduceat(p, edges[:-1])
    ub = np.add.reduceat(p * u, edges[:-1]) / np.where(pb > 0, pb, 1.0)
    keep = pb > 0
    return ub[keep], pb[keep] / pb[keep].sum()


def predictive_halfwidth(base: np.ndarray, u: np.ndarray, p: np.ndarray, *, confidence: float,
                         top: float = np.inf) -> np.ndarray:
    """Half-widths h of the posterior predictive intervals of grids whose error variance, given the
    grids' own residual component σ²_e = t, is min(base + t, ``top``) (the grid-level effect enters a
    grid not measured on its own with weight 1): h solves Σ_i p_i·(2Φ(h/√min(base + u_i, top)) − 1)
    = confidence, the mixture of normals over the residual's posterior masses p on u
    (:func:`joint_prior_posteriors`). Wider than z·√(base + E σ²_e), the plug-in of the posterior
    mean, which under-covers draws from the prior (a scale mixture has heavier tails)."""
    base = np.asarray(base, dtype=float)
    ub, pb = _binned_masses(u, p)
    uniq = np.unique(base)
    if uniq.size > PREDICTIVE_BASES:  # h² is smooth in the base: solved at nodes, interpolated between
        lo_b, hi_b = float(uniq[0]), float(uniq[-1])
        uniq = np.unique(np.concatenate([[lo_b, hi_b], lo_b + (hi_b - lo_b) * np.geomspace(1e-9, 1.0,
                                                                                            PREDICTIVE_BASES - 2)]))
    var = np.minimum(np.maximum(uniq[:, None] + ub[None, :], 1e-300), top)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    lo, hi = z * np.sqrt(var.min(axis=1)), z * np.sqrt(var.max(axis=1))
    for _ in range(50):  # bisection: the coverage is increasing in h (to 2⁻⁵⁰ of the bracket)
        mid = (lo + hi) / 2.0
        cover = (2.0 * ndtr(mid[:, None] / np.sqrt(var)) - 1.0) @ pb
        low = cover < confidence
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return np.sqrt(np.interp(base, uniq, hi * hi))


def spread_bound(m: Measurements, info: Any, parts: list[tuple[np.ndarray, ...]], *,
                 sds: float = BETWEEN_SDS) -> float:
    """The DP upper end of the variance of the kept values (:func:`dpopt.hierarchy.node_means.values_variance`)
    from the pilot's sum of squares of the smallest marginal (with the pilot's count of the same
    nodes) and that marginal's final count and centred sum, each with its noise: by the law of total
    variance the grid means' record-weighted variance is at most this; B²/4 (Popoviciu) where the
    noisy statistics give nothing usable. ``sds`` = 0: the point estimate instead of the upper end."""
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
                           sumsq_count_var=float(np.nansum(pilot.law.variance()[rows])), sds=sds)


def between_measurement(info: Any, parts: list[tuple[np.ndarray, ...]], *, name: str = "between"
                        ) -> tuple[float, float, str] | None:
    """(V̂, sd(V̂), noise family) of the engine's between-grid statistic
    (:func:`dpopt.hierarchy.node_means.between_estimate` with the total kept count every marginal
    measures, combined), None where it was not measured. The family is the release's: Laplace under
    pure ε, Gaussian under ρ. ``name="day_between"``: the days' spread inside the windows of a
    folded list, read the same way (:func:`dpopt.privacy.user.engine.nested_sumsq`)."""
    n, n_var = combined_total([p[0] for p in parts], [p[1] for p in parts])
    v, sd_v = between_estimate(float(getattr(info, name, np.nan)), float(getattr(info, f"{name}_sd", np.nan)),
                               n, count_var=n_var)
    if not np.isfinite(v):
        return None
    return v, sd_v, "laplace" if getattr(info, "unit", "epsilon") == "epsilon" else "gaussian"


def between_bound(info: Any, parts: list[tuple[np.ndarray, ...]]) -> float:
    """:func:`dpopt.hierarchy.node_means.between_upper` of the engine's between-grid statistic with the
    total kept count every marginal measures, combined (:func:`dpopt.hierarchy.node_means.combined_total`;
    post-processing)."""
    n, n_var = combined_total([p[0] for p in parts], [p[1] for p in parts])
    return between_upper(float(getattr(info, "between", np.nan)), float(getattr(info, "between_sd", np.nan)), n,
                         count_var=n_var)


def component_upper_bounds(fit: Any, A: Any, y: np.ndarray, s2: np.ndarray, *, cap: float,
                           total: tuple[float, float, str] | None = None,
                           days: tuple[float, float, str] | None = None
                           ) -> tuple[dict[str, float], np.ndarray, dict[str, np.ndarray]]:
    """(the variance components the intervals use, the quadrature grid u, each component's posterior
    masses on u): each component's posterior mean given the measurements under the flat prior on
    {σ² ≥ 0, Σ σ² ≤ ``cap``} (the spread bound holds the variance of the grids' means, the sum of
    the components), with each component's restricted likelihood taken with the others at their
    REML values, evaluated at :func:`component_nodes`, and the likelihood of ``total`` (V̂, sd,
    family), a noisy measurement of the sum, combined by :func:`joint_prior_posteriors`.
    Where the measurements say nothing about k components and pin the others, each of the k gets
    what the others leave of the cap divided by k + 1; where they pin a component, about its REML
    value. So a grid's interval never rests on a component the data cannot see being 0, the plug-in
    empirical-Bayes error (models/engine.md §4). ``days`` (V̂_d, sd, family): the days' spread inside
    the windows of a folded list, one more component of the region outside the sum ``total``
    measures (``outside`` of :func:`joint_prior_posteriors`), its likelihood that measurement's; its
    masses are returned under the key :data:`DAYS` (not a component of the fit)."""
    names = list(fit.sigma2)
    base = np.array([min(max(fit.sigma2[k], 0.0), cap) for k in names])
    H, inner, order, kernel = fit_kernel(fit, A)  # the fit's elimination order; its Gram matrices once
    nodes, logliks = [], []
    for j, k in enumerate(names):
        grid = component_nodes(cap, float(base[j]))
        _log.info("interval: the likelihood of σ²(%s) at %d values (%d of %d)", k, grid.size, j + 1, len(names))
        nodes.append(grid)
        logliks.append(component_profile(H, y, s2, base[order], inner, int(np.flatnonzero(order == j)[0]), grid,
                                         **kernel))
    outside = None
    if days is not None and np.isfinite(days[0]) and np.isfinite(days[1]) and days[1] > 0:
        grid = np.linspace(0.0, cap, JOINT_GRID + 1)
        outside = (grid, _measurement_loglik(grid, days))
    u, posts = joint_prior_posteriors(cap, nodes, logliks, total, outside=outside)
    masses = dict(zip(names + ([DAYS] if outside is not None else []), posts))
    return {k: float(np.sum(u * p)) for k, p in zip(names, posts)}, u, masses


def _nothing(m: Measurements, info: Any, parts: list[tuple[np.ndarray, ...]], confidence: float) -> Estimates:
    """No node's count passed its threshold: every node is answered by the centre of the clamp's
    range (A + B)/2 — A and B are DP outputs, and every published mean lies in [A, B] — with an
    interval holding the whole declared range [0, U] (a release that says it publishes nothing
    useful: the interval covers every truth, the clamp's bias included). The centre of [0, U]
    instead answered sensors reading 15–60 of [0, 200] with 100 ± 100 where the DP clamp was
    [0, 50] (an error of 77 against 2; models/engine.md §4)."""
    U = float(m.bound if m.info.declared_bound is None else m.info.declared_bound)
    n = m.n_nodes
    released = np.zeros(n, dtype=bool)
    released[: int(np.bincount(info.codes[0]).size)] = True
    centre = float(info.clamp) / 2.0  # in the measurements' units (values shifted by −A): (A + B)/2 published
    low = float(getattr(info, "low", 0.0))
    reach = max(centre + low, U - centre - low)  # to the farther end of [0, U]
    table = _table(m, released, np.full(n, centre), np.full(n, reach), np.full(n, np.nan), np.full(n, np.inf),
                   float(info.clamp), low=low)
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
           direct_hw: np.ndarray, B: float, *, low: float = 0.0) -> pd.DataFrame:
    """The estimates' table: ``mean`` and ``direct`` are in the measurements' units (values shifted by
    −``low``, the lower clamp A, in [0, ``B``]) and are published in the declared range's, + A
    (post-processing)."""
    nodes = m.nodes
    n = m.n_nodes
    mean = np.clip(mean, 0.0, B) + low
    direct = direct + low
    # an interval that already holds the whole declared range [0, U] holds every truth: wider says nothing
    U = float(getattr(m.info, "declared_bound", None) or B + low)
    hw = np.minimum(hw, np.maximum(mean, U - mean))
    return pd.DataFrame({
        "node": np.arange(n), "cell": nodes["cell"].to_numpy(), "h3_resolution": nodes["h3_resolution"].to_numpy(),
        "slot": nodes["slot"].to_numpy(), "slot_ns": nodes["slot_ns"].to_numpy(), "cycle_ns": m.node_cycles,
        "released": released, "mean": mean, "mean_error_bound": hw,
        "mean_direct": direct, "mean_direct_error_bound": direct_hw,
        "variance": np.full(n, np.nan), "variance_error_bound": np.full(n, np.nan),
        "variance_released": np.zeros(n, dtype=bool), "variance_withheld_reason": VARIANCE_REASON,
        "method": METHOD}, columns=list(ESTIMATE_COLUMNS))
