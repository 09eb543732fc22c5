"""Hierarchical estimation: :class:`~dpopt.measurements.Measurements` of a tree of nodes →
:class:`~dpopt.measurements.Estimates` (models/hierarchy.md §8–10). Post-processing only.

1. **GLS** (:func:`dpopt.hierarchy.gls.tree_gls`) of the count, the centred sum and the centred sum
   of squares separately (their noises are independent), with the exact noise variances of the
   :class:`~dpopt.measurements.NoiseLaw`\\ s: consistent, unbiased node totals n̂, Ŷ, Ẑ and their
   variances V_n, V_Y, V_Z.
2. **Direct mean** μ̂ = U/2 + d̂, d̂ = Ŷ/n̂ clipped to [−U/2, U/2], with the **Fieller** interval
   {d ∈ [−U/2, U/2] : |Ŷ − d·n̂| ≤ z·√(V_Y + d²·V_n)}: at the truth d_b = Y/R of the bounded data,
   Ŷ − d_b·n̂ = e_Y − d_b·e_n exactly (no delta method), a zero-mean sum of independent noises of
   variance V_Y + d_b²·V_n, so the set covers d_b with the probability of that noise staying inside
   z standard deviations (z from :func:`two_sided_z`). Published as the half-width around μ̂ of the
   smallest symmetric interval holding the set (U when the set is unbounded or empty). With a
   clamp B < U (``info.declared_bound`` = U, ``m.bound`` = B) the estimate lies in [0, B] but a
   node's truth in [0, U]: a set that reaches B is extended to U (the clamped mean may be B, so the
   all-records mean may be anything above), and every half-width is capped at U, the whole range
   of the truths (a cap at B left truths above m + B outside it: aircraft B at ε = 1, 16 of 100
   direct intervals; models/hierarchy.md §9).
3. **Bias of bounding** (the truth of a node is the mean of *all* its records, the estimate that of
   the kept ones). What is proven: with κ = 0 the direct interval covers the mean of the node's
   **bounded** records (item 2), and the EB interval contains the direct one. The all-records mean
   is not covered by any argument: the worst-case bias U·D/A (D dropped of A records) has unbounded
   sensitivity under ``user`` and is vacuous here anyway (≥ 0.6·U on the benchmark data;
   models/hierarchy.md §9). ``bias_allowance`` κ adds κ·σ̄_v (σ̄_v² the upper end of the node's
   variance interval) to both half-widths: a stated, benchmark-calibrated allowance, not a bound.
   The decomposition (item 6) is decided on the noise half-width alone. Levels that
   :func:`~dpopt.privacy.user.levels.measure_levels` bounded on their own (``level_bounds``) are not tied
   to their parents in the GLS (``info.linked_levels``).
4. **Empirical Bayes** (the published ``mean``): top-down, each node's direct centred mean shrinks
   toward its parent's published one, m_v = m_p + B_v·(d̂_v − m_p), B_v = τ_l²/(τ_l² + s_v²),
   s_v² = (V_Y + d̂_v²·V_n)/max(n̂_v, 1)² (delta method), τ_l² the between-sibling variance of level
   l by the DerSimonian–Laird method of moments on the measurements (never the truth); unmeasured
   nodes take their parent's value. Interval: the direct interval widened by |m_v − μ̂_v|, so it
   contains the direct interval and covers whenever it does (per node, not only on average; the
   normal-prior posterior interval B_v·s_v² under-covered nodes far from their parent in the
   benchmark, models/hierarchy.md §10).
4b. **Tree BLUP** (default ``estimator="blup"``; models/hierarchy.md §11): the published ``mean``
   is the posterior mean of a Gaussian tree of nested random effects
   (:func:`dpopt.hierarchy.blup.tree_blup`) fed with every measured node's *own* centred mean
   Ŷ_v/n̂_v and a conservative variance ((V_Y + (U/2)²·V_n)/max(n̂ − sd(n̂), 1)²; nodes with a GLS
   count under :func:`count_snr_threshold` sds — at least 1.5, growing as ln N/√2 with the N nodes
   tested — are unmeasured), one unmeasured map-wide node above the roots, τ² per level by
   maximum marginal likelihood (:func:`dpopt.hierarchy.blup.fit_tau2`, measurements only). Each
   finest grid is answered by its deepest ancestor-or-self whose subtree holds a measurement (that
   node's posterior mean is the grid's). Interval (``interval="direct"``): the direct one widened by
   |BLUP − μ̂| (as item 4); it covers whenever the direct one does, but is far wider than the error.
4c. **Posterior interval** (option ``interval="posterior"``, off by default; models/hierarchy.md
   §12): z·√(posterior variance of θ_v under the fitted tree model, the parents' and root's
   uncertainty included) + the bias allowance κ·σ̄_v of item 3, capped at item 4b's interval (never wider). Plug-in
   empirical Bayes (τ² treated as known) and a benchmark-calibrated allowance: not a proven
   bound. Without the allowance it covers 9–93 % (under 90 % in 6 of 8 cells) of nodes'
   all-records truths on the benchmark and 56–63 % of the bounded truths on the synthetic test
   tree (so the posterior variance alone is not calibrated: τ² plug-in, misspecified nested
   effects); with it 100 % in 7 of 8 cells but 81 % in one, and the allowance is then most of the
   width (tests/benchmarks/results/multires.md). Hence not the default.
5. **Variance** σ̂² = Ẑ/n̂ + U²/8 − d̂²; interval from Fieller intervals of z̄ = Z/R and d (each at
   half the error probability, Bonferroni); published only where the interval is narrower than
   the range [0, U²/4] and σ̂² before clipping is not below 0 (a clipped 0 would claim all values
   equal), else ``variance_released`` False with one reason.
6. **Decomposition** (:func:`dpopt.hierarchy.decompose.answer_nodes`): each finest grid is answered
   by its finest ancestor-or-self whose direct half-width is ≤ ``target`` (item 4b: its deepest
   informed one); those nodes are released — unless the node table carries a ``released`` column
   (nodes chosen by a DP selection, :mod:`dpopt.privacy.user.strategies.private_adaptive`), which then decides.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..hierarchy.blup import count_snr_threshold, fit_tau2, tree_blup
from ..hierarchy.decompose import answer_nodes, published_mask
from ..hierarchy.gls import tree_gls
from ..hierarchy.tree import default_target
from ..measurements import ESTIMATE_COLUMNS, Estimates, EstimatesInfo, Measurements, Statistic, UserInfo
from .direct import VARIANCE_NEGATIVE_REASON, VARIANCE_WITHHELD_REASON

__all__ = ["estimate_hierarchical", "two_sided_z", "fieller_interval", "gls_totals", "released_ancestor"]

METHOD = "hierarchical"
#: κ of the bounding-bias allowance κ·σ̂ (module doc item 3; models/hierarchy.md §9)
DEFAULT_BIAS_ALLOWANCE = 0.5
def two_sided_z(confidence: float, family: str) -> float:
    """Half-width in standard deviations of a two-sided interval at ``confidence``: the normal
    quantile, or for the Laplace families the larger of it and the Laplace one ln(1/α)/√2 (a
    single Laplace noise is the heaviest-tailed term a GLS combination of them can hold)."""
    alpha = 1.0 - float(confidence)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    if family.endswith("laplace"):
        z = max(z, math.log(1.0 / alpha) / math.sqrt(2.0))
    return z


def fieller_interval(num: np.ndarray, den: np.ndarray, v_num: np.ndarray, v_den: np.ndarray, z: float,
                     half_range: float) -> tuple[np.ndarray, np.ndarray]:
    """{d ∈ [−h, h] : (num − d·den)² ≤ z²·(v_num + d²·v_den)} as (lo, hi) per node (module doc).

    The quadratic a·d² − 2b·d + c ≤ 0 with a = den² − z²v_den, b = num·den, c = num² − z²v_num:
    for a > 0 the roots' interval; otherwise the set is unbounded and the whole [−h, h] is returned
    (conservative hull). Empty intersections return (NaN, NaN).
    """
    a = den * den - z * z * v_den
    b = num * den
    c = num * num - z * z * v_num
    disc = b * b - a * c
    ok = (a > 0) & (disc >= 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sqrt(np.where(ok, disc, 0.0))
        lo = np.where(ok, (b - r) / np.where(ok, a, 1.0), -half_range)
        hi = np.where(ok, (b + r) / np.where(ok, a, 1.0), half_range)
    empty_q = (a > 0) & (disc < 0)
    lo, hi = np.clip(lo, -half_range, half_range), np.clip(hi, -half_range, half_range)
    bad = empty_q | (lo > hi) | ((a > 0) & ((b + r) / np.where(a > 0, a, 1.0) < -half_range)) \
        | ((a > 0) & ((b - r) / np.where(a > 0, a, 1.0) > half_range))
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def gls_totals(m: Measurements) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """GLS estimate and variance of the node totals of ``count``, ``sum`` and ``sumsq``."""
    parent = m.nodes["parent"].to_numpy()
    linked = m.info.linked_levels if isinstance(m.info, UserInfo) else None
    height = m.nodes["level"].to_numpy() if "level" in m.nodes.columns else None
    if linked is not None and not all(linked[:-1]):  # levels bounded separately (measure_levels'
        parent = np.where(np.asarray(linked, dtype=bool)[height], parent, -1)  # level_bounds): no sum constraint
        height = None
    out = {}
    for name in ("count", "sum", "sumsq"):
        if name not in m.statistics:
            raise DpoptInputError(f"`measurements` must hold the statistic {name!r} (user model); got {sorted(m.statistics)}")
        y, v = _measured(m.statistics[name])
        if name == "count" and "count_pilot" in m.statistics:  # two independent measurements of a node:
            y2, v2 = _measured(m.statistics["count_pilot"])    # their precision-weighted mean is the BLUE
            y, v = _combine(y, v, y2, v2)
        g = tree_gls(parent, y, v, height=height)
        out[name] = (g.estimate, g.variance)
    return out


def _measured(st: Statistic) -> tuple[np.ndarray, np.ndarray]:
    v = st.law.variance()
    ok = np.isfinite(st.value) & (v > 0)
    return np.where(ok, st.value, np.nan), np.where(ok, v, np.inf)


def _combine(y1: np.ndarray, v1: np.ndarray, y2: np.ndarray, v2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p1, p2 = np.where(np.isfinite(v1), 1.0 / v1, 0.0), np.where(np.isfinite(v2), 1.0 / v2, 0.0)
    p = p1 + p2
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(p > 0, (np.nan_to_num(y1) * p1 + np.nan_to_num(y2) * p2) / p, np.nan)
        return y, np.where(p > 0, 1.0 / p, np.inf)


def _half_width(point: np.ndarray, lo: np.ndarray, hi: np.ndarray, cap: float) -> np.ndarray:
    hw = np.maximum(point - lo, hi - point)
    return np.where(np.isfinite(hw), np.minimum(hw, cap), cap)


def _moment_tau2(dev: np.ndarray, s2: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """DerSimonian–Laird-type τ² per level: weighted mean of dev² − s² with weights 1/(s² + τ²),
    five fixed-point steps from τ² = mean(dev²), floored at 0."""
    tau2 = np.bincount(groups, weights=dev * dev, minlength=n_groups) / np.maximum(
        np.bincount(groups, minlength=n_groups), 1)
    for _ in range(5):
        w = 1.0 / (s2 + tau2[groups])
        tau2 = np.maximum(np.bincount(groups, weights=w * (dev * dev - s2), minlength=n_groups)
                          / np.maximum(np.bincount(groups, weights=w, minlength=n_groups), 1e-300), 0.0)
    return tau2


def _shrink(m: Measurements, d: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, EstimatesInfo]:
    """Top-down empirical-Bayes shrinkage of the centred means toward the parent (module doc):
    (shrunk centred mean, the facts with τ² per level)."""
    parent = m.nodes["parent"].to_numpy()
    level = m.nodes["level"].to_numpy()
    h = m.bound / 2.0
    mean = d.copy()
    top = int(level.max())
    tau2 = np.zeros(top + 1)
    for lev in range(top - 1, -1, -1):
        rows = np.flatnonzero((level == lev) & (parent >= 0))
        p = parent[rows]
        ok = np.isfinite(d[rows]) & np.isfinite(s2[rows])  # unmeasured nodes: the parent's value stands
        dev = np.where(ok, d[rows] - mean[p], 0.0)
        t2 = _moment_tau2(dev[ok], s2[rows][ok], np.zeros(int(ok.sum()), dtype=np.int64), 1)[0] if ok.any() \
            else tau2[lev + 1]
        tau2[lev] = t2
        B = np.where(ok, t2 / (t2 + np.where(ok, s2[rows], 1.0)), 0.0)
        mean[rows] = mean[p] + B * dev
        # posterior variance + squared bias at its moment estimate (1−B)²·τ² (robust to a normal prior failing)
    return np.clip(mean, -h, h), EstimatesInfo(tau2_by_level=tau2.tolist())


def _blup(m: Measurements, tot: dict) -> dict:
    """Tree BLUP of the node means (module doc, item 4b; models/hierarchy.md §11): every measured
    node's *own* centred mean Ŷ_v/n̂_v (its own sum measurement, independent across nodes; n̂ the
    GLS count) with delta-method variance, τ² per level by maximum marginal likelihood."""
    h = m.bound / 2.0
    y_own, v_own = _measured(m.statistics["sum"])
    n, vn = tot["count"]
    sd_n = np.sqrt(np.where(np.isfinite(vn), vn, np.inf))
    # a count within count_snr_threshold(N_level) noise sds of 0 makes the ratio meaningless (its delta-method
    # variance is wrong exactly when n̂ is overestimated): such nodes count as unmeasured, and the
    # others use a lower confidence end n̂ − sd(n̂) of the count in the variance (conservative)
    has = np.isfinite(y_own) & np.isfinite(n)  # the nodes tested: those with their own measurement
    lev = m.nodes["level"].to_numpy()
    tested = np.bincount(lev[has], minlength=int(lev.max()) + 1 if lev.size else 0)  # per level: a public count
    t_node = np.array([count_snr_threshold(int(x)) for x in tested])[lev] if lev.size else np.zeros(0)
    measured = has & (n >= t_node * sd_n) & (n >= 1.0)
    ne = np.maximum(n, 1.0)
    n_lo = np.maximum(n - sd_n, 1.0)
    d = np.clip(np.where(measured, y_own, 0.0) / ne, -h, h)
    s2 = np.where(measured, (np.where(measured, v_own, 0.0) + h * h * vn) / n_lo**2, np.inf)
    d = np.where(measured, d, np.nan)
    parent, level = m.nodes["parent"].to_numpy(), m.nodes["level"].to_numpy()
    # one unmeasured map-wide node above the roots: separate trees share one level of spread
    N = parent.size
    parent = np.append(np.where(parent < 0, N, parent), -1)
    level = np.append(level, int(level.max()) + 1 if level.size else 0)
    d, s2 = np.append(d, np.nan), np.append(s2, np.inf)
    tau2 = fit_tau2(parent, level, d, s2, scale=h)
    b = tree_blup(parent, level, d, s2, tau2)
    # second pass (item 4b): the count's noise enters a node's delta-method variance multiplied by
    # θ_v² (θ_v the centred mean); the first pass uses the worst case h², which over-shrinks where the
    # data sit far from h (the Austin buses: θ ≈ −11 to −41 km/h against h = 30 to 60); the second
    # uses the first pass's posterior mean of θ_v, a smoothed plug-in as in Fay–Herriot practice
    theta2 = np.append(np.where(np.isfinite(b.mean[:N]), np.clip(b.mean[:N], -h, h), h) ** 2, 0.0)
    s2 = np.where(np.isfinite(s2), (np.append(np.where(measured, v_own, 0.0), 0.0) + theta2 * np.append(vn, 0.0))
                  / np.append(n_lo, 1.0) ** 2, np.inf)
    tau2 = fit_tau2(parent, level, d, s2, scale=h)
    b = tree_blup(parent, level, d, s2, tau2)
    informed = b.up_precision[:N] > 0
    mean = np.where(np.isfinite(b.mean[:N]), np.clip(b.mean[:N], -h, h), 0.0)
    return {"mean": mean, "var": np.where(np.isfinite(b.mean[:N]), b.variance[:N], np.inf), "tau2": tau2,
            "measured": measured, "informed": informed | (m.nodes["parent"].to_numpy() < 0)}


def _variance_interval(d_lo: np.ndarray, d_hi: np.ndarray, zb_lo: np.ndarray, zb_hi: np.ndarray, U: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """σ² = z̄ + U²/8 − d² over the box [d_lo, d_hi] × [z̄_lo, z̄_hi], clipped to [0, U²/4]."""
    d2_max = np.maximum(d_lo * d_lo, d_hi * d_hi)
    d2_min = np.where((d_lo <= 0) & (d_hi >= 0), 0.0, np.minimum(d_lo * d_lo, d_hi * d_hi))
    lo = np.clip(zb_lo + U * U / 8.0 - d2_max, 0.0, U * U / 4.0)
    hi = np.clip(zb_hi + U * U / 8.0 - d2_min, 0.0, U * U / 4.0)
    bad = ~np.isfinite(lo) | ~np.isfinite(hi)
    return np.where(bad, 0.0, lo), np.where(bad, U * U / 4.0, hi)


def _direct(m: Measurements, tot: dict, confidence: float) -> dict[str, np.ndarray]:
    """Direct (GLS) mean and variance with their intervals (module doc, items 2 and 5)."""
    U = m.bound
    h = U / 2.0
    (n, vn), (y, vy), (zz, vz) = tot["count"], tot["sum"], tot["sumsq"]
    centre = m.info.sumsq_centre if isinstance(m.info, UserInfo) else None
    if not math.isclose(float(math.nan if centre is None else centre), U * U / 8.0):
        raise DpoptInputError("`measurements.info.sumsq_centre` must be U^2/8 (sums of squares centred as "
                              "dpopt.privacy.user.bounding does)")
    zs = zz
    fam = m.statistics["sum"].law.family
    z = two_sided_z(confidence, fam)
    z_half = two_sided_z(1.0 - (1.0 - confidence) / 2.0, fam)
    n_eff = np.maximum(n, 1.0)
    d = np.clip(y / n_eff, -h, h)
    lo, hi = fieller_interval(y, n, vy, vn, z, h)
    # the truths lie in [0, U] (centred: [−h, U − h]); with a clamp B < U a set that reaches B says
    # nothing about how far above B the all-records mean lies, so its upper end is U (B = U: unchanged)
    reach = truth_range(m)
    mean_hw = _half_width(d, lo, np.where(hi >= h, reach - h, hi), reach)
    dl, dh = fieller_interval(y, n, vy, vn, z_half, h)
    zl, zh = fieller_interval(zs, n, vz, vn, z_half, U * U / 8.0)
    zbar = np.clip(zs / n_eff, -U * U / 8.0, U * U / 8.0)
    var = np.clip(zbar + U * U / 8.0 - d * d, 0.0, U * U / 4.0)
    vlo, vhi = _variance_interval(dl, dh, zl, zh, U)
    s2 = (vy + d * d * vn) / n_eff**2
    return {"n": n, "d": d, "mean_hw": mean_hw, "var": var, "var_negative": zbar + U * U / 8.0 - d * d < 0.0,
            "var_lo": vlo, "var_hi": vhi,
            "var_hw": _half_width(var, vlo, vhi, U * U / 4.0), "s2": s2, "z": np.full(n.shape, z)}


def _clamp_reason(m: Measurements) -> str | None:
    """Why every variance is withheld when the values were measured clamped to [0, B], B < U (the
    place release, models/hierarchy.md §14.2): their variance is biased low. None otherwise."""
    clamp, declared = m.info.clamp, m.info.declared_bound
    if clamp is None or declared is None or float(clamp) >= float(declared):
        return None
    return (f"values measured clamped to [0, B = {float(clamp):g}] < U = {float(declared):g}: variance biased low"
            + ("" if m.info.sumsq_measured else " (no budget spent on it)"))


def truth_range(m: Measurements) -> float:
    """U of the values as declared (``info.declared_bound``, ≥ the clamp B = ``m.bound`` the
    statistics were measured on): the width of the range the nodes' truths lie in, so a half-width of
    U is the whole range whatever the estimate in [0, B]. Half-widths are capped at it, not at B: with
    the cap at B, truths in (m + B, U] fell outside "the whole range" (aircraft B at ε = 1: 16 of 100
    direct 95 % intervals)."""
    return max(float(m.bound if m.info.declared_bound is None else m.info.declared_bound), float(m.bound))


def _table(m: Measurements, released: np.ndarray, *, eb: np.ndarray, eb_hw: np.ndarray, dr: dict[str, np.ndarray],
           direct_hw: np.ndarray, var_ok: np.ndarray, shrink: bool, clamped: str | None = None) -> pd.DataFrame:
    """The estimates' table (:data:`ESTIMATE_COLUMNS`, level, count_estimate) of every node of ``m``.

    Parameters
    ----------
    m : Measurements
        The tree's measurements.
    released : np.ndarray
        Per node: published.
    eb, eb_hw : np.ndarray
        The published centred mean and its half-width.
    dr : dict
        The direct estimates (:func:`_direct`).
    direct_hw : np.ndarray
        The direct mean's half-width (bias allowance included).
    var_ok : np.ndarray
        Per node: the variance is published.
    shrink : bool
        The non-root means are empirical-Bayes ("gls_eb"), else direct.
    clamped : str, optional
        Why every variance is withheld (:func:`_clamp_reason`), if it is.
    """
    U, h = truth_range(m), m.bound / 2.0
    table = pd.DataFrame({
        "node": np.arange(m.n_nodes), "cell": m.nodes["cell"].to_numpy(),
        "h3_resolution": m.nodes["h3_resolution"].to_numpy(), "slot": m.nodes["slot"].to_numpy(),
        "slot_ns": m.nodes["slot_ns"].to_numpy(), "cycle_ns": m.node_cycles, "released": released,
        "mean": h + eb, "mean_error_bound": np.where(np.isfinite(dr["d"]), np.minimum(eb_hw, U), U),
        "mean_direct": h + dr["d"], "mean_direct_error_bound": direct_hw,
        "variance": np.where(var_ok, dr["var"], np.nan),
        "variance_error_bound": np.where(var_ok, dr["var_hw"], np.nan),
        "variance_released": var_ok,
        "variance_withheld_reason": np.where(var_ok, "", clamped or np.where(~np.isfinite(dr["var"]), "sum of squares "
            "not measured", np.where(dr["var_hi"] - dr["var_lo"] >= m.bound**2 / 4.0, VARIANCE_WITHHELD_REASON,
                                     VARIANCE_NEGATIVE_REASON))),
        "method": np.where(m.nodes["parent"].to_numpy() < 0, "gls_direct", "gls_eb" if shrink else "gls_direct"),
        "level": m.nodes["level"].to_numpy(), "count_estimate": dr["n"],
    })
    return table[list(ESTIMATE_COLUMNS) + ["level", "count_estimate"]]


def _model_means(m: Measurements, tot: dict, dr: dict, estimator: str, shrink: bool,
                 tau: float) -> tuple[np.ndarray, EstimatesInfo, np.ndarray, np.ndarray | None]:
    """(published centred means, the facts (τ² per level), answering node of every finest grid, posterior variance of
    the means or None) of ``estimator``."""
    finest = m.finest["node"].to_numpy()
    parent = m.nodes["parent"].to_numpy()
    if estimator == "blup":
        bl = _blup(m, tot)
        # a finest grid's posterior mean is that of its deepest ancestor-or-self whose subtree holds a
        # measurement (below it the random effects have prior mean 0): that node answers it
        ans = answer_nodes(parent, finest, np.where(bl["informed"], 0.0, np.inf), 1e-300)
        return bl["mean"], EstimatesInfo(tau2_by_level=bl["tau2"].tolist()), ans, bl["var"]
    ans = answer_nodes(parent, finest, dr["mean_hw"], tau)
    if shrink:
        eb, info = _shrink(m, dr["d"], dr["s2"])
        return eb, info, ans, None
    return np.where(np.isfinite(dr["d"]), dr["d"], 0.0), EstimatesInfo(), ans, None


def posterior_half_width(post_var: np.ndarray, z: float, allowance: np.ndarray) -> np.ndarray:
    """Item 4c: z·√(posterior variance of θ_v under the fitted tree model) + the bias allowance.

    The posterior variance of :func:`dpopt.hierarchy.blup.tree_blup` is that of the full Gaussian
    posterior with a flat prior on the map-wide mean, so it includes the uncertainty of the
    estimated parents and root; it does *not* include the uncertainty of the fitted τ² (plug-in
    empirical Bayes), nor the bias of bounding beyond the allowance. Infinite where unmeasured.
    Post-processing of the DP measurements only.
    """
    v = np.asarray(post_var, dtype=float)
    return np.where(np.isfinite(v), z * np.sqrt(np.where(np.isfinite(v), np.maximum(v, 0.0), 0.0)), np.inf) \
        + allowance


def released_ancestor(parent: np.ndarray, node: np.ndarray, released: np.ndarray) -> np.ndarray:
    """The smallest released ancestor-or-self of each ``node`` (−1 where none): the reader's rule
    (tests/benchmarks/scoring.py) when a DP selection, not the target, decides what is published."""
    parent = np.asarray(parent, dtype=np.int64)
    ans = np.asarray(node, dtype=np.int64).copy()
    for _ in range(parent.size + 1):
        move = (ans >= 0) & ~released[np.maximum(ans, 0)]
        if not move.any():
            break
        ans[move] = parent[ans[move]]
    return ans


def _check_arguments(m: Measurements, confidence: float, bias_allowance: float, estimator: str, interval: str) -> float:
    """One-line errors for :func:`estimate_hierarchical`'s arguments; returns κ."""
    if estimator not in ("blup", "shrink"):
        raise DpoptInputError(f"`estimator` must be 'blup' or 'shrink'; got {estimator!r}")
    if interval not in ("direct", "posterior") or (interval == "posterior" and estimator != "blup"):
        raise DpoptInputError(f"`interval` must be 'direct' or (with estimator='blup') 'posterior'; got {interval!r}")
    if not isinstance(m, Measurements):
        raise DpoptInputError(f"`measurements` must be a Measurements; got {type(m).__name__}")
    if not (isinstance(confidence, (int, float)) and 0.5 <= float(confidence) < 1.0):
        raise DpoptInputError(f"`confidence` must be a number in [0.5, 1); got {confidence!r}")
    if "level" not in m.nodes.columns:
        raise DpoptInputError("`measurements.nodes` must have the `level` column of dpopt.hierarchy.tree")
    kappa = float(bias_allowance)
    if not (math.isfinite(kappa) and kappa >= 0):
        raise DpoptInputError(f"`bias_allowance` must be a finite number >= 0; got {bias_allowance!r}")
    return kappa


def estimate_hierarchical(measurements: Measurements, *, confidence: float = 0.95, target: float | None = None,
                          shrink: bool = True, bias_allowance: float = DEFAULT_BIAS_ALLOWANCE,
                          estimator: str = "blup", interval: str = "direct") -> Estimates:
    """Measurements of a tree (``user`` model: count, sum, sumsq per node) → Estimates (module doc).

    Parameters
    ----------
    measurements : Measurements
        From :func:`dpopt.privacy.user.levels.measure_levels` (nodes with ``parent`` and ``level``).
    confidence : float
        Confidence of every published interval (default 0.95, as every estimator).
    target : float, optional
        τ: a node answers its finest grids when its direct half-width is ≤ τ (default U/10).
    shrink : bool
        Publish the empirical-Bayes ``mean`` (default) or the direct one in ``mean`` too.
    bias_allowance : float
        κ ≥ 0: both half-widths grow by κ·σ̂ for the bias of contribution bounding (module doc).
    estimator : str
        "blup" (default: the tree BLUP of item 4b, answers at the deepest informed node) or
        "shrink" (item 4's top-down shrinkage, answers by the τ rule of item 6).
    interval : str
        ``mean_error_bound`` of the BLUP: "direct" (default: the direct interval widened by
        |BLUP − direct|, item 4b) or "posterior" (experimental, off by default, item 4c:
        z·√(posterior variance) + the bias allowance, capped at the "direct" one; measured in
        tests/benchmarks/results/multires.md). ``mean_direct_error_bound`` is the direct one either way.
    """
    m = measurements
    kappa = _check_arguments(m, confidence, bias_allowance, estimator, interval)
    tau = default_target(m.bound) if target is None else float(target)
    U = m.bound
    tot = gls_totals(m)
    dr = _direct(m, tot, float(confidence))
    clamped = _clamp_reason(m)
    # a node without a measured sum of squares has no variance estimate (the private selection
    # release measures count and sum only), whatever its variance interval's width
    var_ok = ((dr["var_hi"] - dr["var_lo"]) < U * U / 4.0) & (clamped is None) & np.isfinite(dr["var"]) \
        & ~dr["var_negative"]  # a noisy variance below 0 is withheld, never published as a clipped 0
    sd = np.sqrt(dr["var_hi"])  # the upper end of the variance interval: a noisy σ̂² near 0 must not remove the allowance
    direct_hw = np.minimum(dr["mean_hw"] + kappa * sd, truth_range(m))  # the truths' range, not B (module doc)
    eb, info, ans, post_var = _model_means(m, tot, dr, estimator, shrink, tau)
    # the interval contains the direct one (item 4): |m − θ| ≤ |m − μ̂| + |μ̂ − θ|
    eb_hw = np.abs(eb - dr["d"]) + direct_hw
    if interval == "posterior":  # item 4c: never wider than the direct-widened interval
        eb_hw = np.minimum(eb_hw, posterior_half_width(post_var, float(dr["z"][0]) if dr["z"].size else 0.0,
                                                       kappa * sd))
    released = published_mask(m.n_nodes, ans)
    if "released" in m.nodes.columns:  # nodes published by a DP selection (strategies.private_adaptive): those,
        released = m.nodes["released"].to_numpy(dtype=bool)  # and each grid answered by the reader's rule
        ans = released_ancestor(m.nodes["parent"].to_numpy(), m.finest["node"].to_numpy(), released)
    table = _table(m, released, eb=eb, eb_hw=eb_hw, dr=dr, direct_hw=direct_hw, var_ok=var_ok, shrink=shrink,
                   clamped=clamped)
    answers = pd.DataFrame({"cell": m.finest["cell"].to_numpy(), "slot": m.finest["slot"].to_numpy(),
                            "node": ans})
    info = replace(info, target=tau, nodes_released=int(released.sum()),
                   z=float(dr["z"][0]) if dr["z"].size else None, bias_allowance=kappa,
                   interval="Fieller (direct) + bias allowance; EB: the direct interval widened by |EB - direct|"
                   if interval == "direct" else "EB: z * sqrt(tree BLUP posterior variance) + bias allowance, capped "
                   "at the direct interval widened by |EB - direct|")
    return Estimates(table=table, answers=answers,
                     confidence=float(confidence), method=METHOD, measurements=m, info=info)
