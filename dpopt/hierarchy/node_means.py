"""Noisy node counts and sums → node means and the observation matrix of the crossed model
(models/engine.md §3). Post-processing only: it reads DP outputs and the public list.

A measured node n of a marginal holds the kept records of the grids g with code(g) = n. Its noisy
count ñ_n and noisy centred sum Ỹ_n (Σ (x − centre) of the kept records) give the ratio mean

    y_n = centre + Ỹ_n / ñ_n,   s²_n = (Var Ỹ_n + (y_n − centre)² Var ñ_n) / ñ_n²     (delta method),

an observation of the record-weighted mean of its grids' means, y_n ≈ Σ_g w_g θ_g / Σ_g w_g + e_n.
The weights w_g (each grid's share of its node's kept records) are themselves estimated from the
finest grids' noisy counts. A node enters only where its noisy count is at least
:func:`count_threshold` noise sds, so that the ratio's linearisation holds and a node whose count is
noise alone rarely enters: such a node's ratio sits near the centre whatever the data, and where it
is the only observation it would pull every answer there. (A real node that passes only because its
noise was high still carries an inflated count; the strategy leaves out marginals none of whose nodes
could pass with the whole budget, so that such nodes are not all the release has.)

Two measurements of the same statistic (the pilot's and the main one, independent noise) combine
by inverse-variance weighting (:func:`combine`), the minimum-variance unbiased linear combination.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp


__all__ = ["combine", "combined_total", "grid_weights", "listed_weights", "node_observations", "crossed_inputs", "count_threshold", "pooled_observation", "pooled_sums", "ratio_row", "total_upper", "proportional_weights", "mostly_measured", "FALSE_PASSES", "MIN_SNR", "MIN_LEVELS", "BETWEEN_SDS",
           "values_variance", "between_estimate", "between_upper", "identified", "clear_nodes", "CLEAR_SDS"]

#: the expected number of a marginal's empty nodes that may pass the count threshold by noise alone:
#: one release in twenty has one such node in a given marginal (the conventional 5 % error rate). A
#: node selected by its noise carries a ratio at the centre B/2 *and* a small delta-method variance
#: (its count is inflated), so where few real nodes enter it sets the map-wide mean: at half a false
#: node per marginal the full Austin data at ε = 1 erred 7–12 km/h in one seed in three
FALSE_PASSES = 0.05
#: the fewest nodes of a marginal that enter on their own where the threshold left some of its
#: measured nodes out; a marginal with fewer above the threshold enters as the pool of all its nodes
#: but those far above it (:func:`clear_nodes`; one with every node above it keeps them: nothing was
#: selected). Two reasons, neither about data: a variance component from k
#: levels has relative standard error about √(2/(k − 1)), over 70 % below 5 (mixed-model practice,
#: lme4's FAQ, does not fit random effects with fewer than 5–6 levels); and the few nodes that pass
#: a threshold set on their own noisy count are those whose count noise was high (the winner's curse),
#: so their ratios sit toward the centre B/2 — on the full Austin data at ε = 1 three such nodes
#: moved every answer by +8 km/h, where the pool of all the marginal's nodes is not selected at all
MIN_LEVELS = 5
#: the least noise variance of a measured statistic (a numerical floor, far below any data's)
VARIANCE_FLOOR = 1e-12
#: the least count-to-noise ratio of a node that enters, whatever the number of nodes: below 3 sds
#: the ratio's linearisation error is over 10 % and a node passes by Laplace noise alone with
#: probability ½·exp(−3√2) ≈ 0.7 % (a statement about the approximation, not about data)
MIN_SNR = 3.0


def count_threshold(n_nodes: int) -> float:
    """Noise sds a node's count must reach: t with N·½·exp(−t·√2) = :data:`FALSE_PASSES` for a
    marginal of N nodes (the Laplace tail, the heaviest noise law of the release), at least
    :data:`MIN_SNR`. A public function of the node count; the rate is a stated tolerance (one false
    node per marginal in twenty releases), not a value fitted to data."""
    return max(MIN_SNR, math.log(max(int(n_nodes), 1) / (2.0 * FALSE_PASSES)) / math.sqrt(2.0))


def combine(values: list[np.ndarray], variances: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-variance weighted mean of independent unbiased measurements (NaN = not measured) and
    its variance; NaN where none was measured."""
    num = np.zeros(np.shape(values[0]), dtype=float)
    prec = np.zeros_like(num)
    for v, var in zip(values, variances):
        v = np.asarray(v, dtype=float)
        # a measured value (finite) whose noise variance underflows to 0 (a discrete Laplace of tiny
        # scale) is as good as exact: floored at a variance far below any data's
        var = np.maximum(np.broadcast_to(np.asarray(var, dtype=float), v.shape), VARIANCE_FLOOR)
        ok = np.isfinite(v) & np.isfinite(var)
        num[ok] += v[ok] / var[ok]
        prec[ok] += 1.0 / var[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prec > 0, num / prec, np.nan), np.where(prec > 0, 1.0 / prec, np.nan)


def grid_weights(count: np.ndarray, count_var: np.ndarray) -> np.ndarray:
    """Each grid's weight in its nodes: its noisy kept count, floored at one noise sd (a grid whose
    count is lost in the noise weighs as much as a grid with one sd of records) and at a numerical
    floor √``VARIANCE_FLOOR`` (a weight must be positive); an unmeasured grid (NaN count) weighs one
    record. No floor at one record for a measured grid: where the count's noise sd is below a record
    (ε on the finest counts above √2·T), a grid measured at 0 holds no kept record, and a larger weight
    would make it absorb the mismatch of its coarser nodes once their noise vanishes
    (models/engine.md §4, "The grids' weights")."""
    sd = np.nan_to_num(np.sqrt(np.broadcast_to(np.asarray(count_var, dtype=float), np.shape(count))))
    measured = np.isfinite(count)
    c = np.where(measured, count, 0.0)
    return np.where(measured, np.maximum(c, np.maximum(sd, math.sqrt(VARIANCE_FLOOR))), 1.0)  # unmeasured: one record


def _ratio(n: np.ndarray, var_n: np.ndarray, total: np.ndarray, var_y: np.ndarray, *, centre: float,
           half_range: float) -> tuple[np.ndarray, np.ndarray]:
    """(y, s²) of nodes with noisy counts n and centred sums: the ratio mean centre + total/n and its
    delta-method variance with (y − centre)² capped at ``half_range``² and the count's lower end
    n − sd(n) in the denominator (conservative: the delta method's variance is too small exactly where
    the count's noise made n too large, the nodes whose ratio it pulls toward the centre; the tree
    BLUP's rule, models/hierarchy.md)."""
    d = np.clip(total / n, -half_range, half_range)
    n_lo = np.maximum(n - np.sqrt(var_n), 1.0)
    return centre + total / n, (var_y + d * d * var_n) / (n_lo * n_lo)


#: a node mean's noise sd is never taken below this fraction of the values' half-range: at ε ≈ 10⁹
#: the noise variances (≈ 10⁻¹⁴) against components of ≈ 10² made the crossed model's matrices
#: singular (Cholesky failed). A numerical resolution (10⁻⁴ of the range: 0.006 km/h on 0–120), far
#: below any published interval, not a property of the data
NOISE_SD_FLOOR = 1e-4


def node_observations(code: np.ndarray, count: np.ndarray, count_var: np.ndarray, total: np.ndarray,
                      total_var: np.ndarray, *, centre: float, half_range: float, weights: np.ndarray,
                      most: float = np.inf) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """(A, y, s², kept) of one marginal: the rows of the nodes that pass the count threshold and
    whose count, less the same number of its noise sds, is at most ``most`` (a node cannot hold more
    records than all the nodes together: one that seems to is its noise), of marginals whose threshold
    is at most ``most`` (a node that could not pass even holding every record passes only by its noise),
    A[i, g] = w_g / Σ_{g' in node} w_g' for the grids g of the i-th kept node, y and s² as in the
    module doc with (y − centre)² capped at ``half_range``² (the values lie within centre ±
    half_range), and ``kept`` the node rows used."""
    code = np.asarray(code, dtype=np.int64)
    n_nodes = int(np.size(count))
    var_n = np.broadcast_to(np.asarray(count_var, dtype=float), (n_nodes,))
    var_y = np.broadcast_to(np.asarray(total_var, dtype=float), (n_nodes,))
    thr = _count_thresholds(count, count_var)
    kept = np.flatnonzero(np.isfinite(count) & np.isfinite(total) & (count >= np.maximum(thr, 1.0))
                          & (count - thr <= most) & (thr <= most))
    y, s2 = _ratio(count[kept], var_n[kept], total[kept], var_y[kept], centre=centre, half_range=half_range)
    s2 = np.maximum(s2, (NOISE_SD_FLOOR * half_range) ** 2)
    row_of = np.full(n_nodes, -1, dtype=np.int64)
    row_of[kept] = np.arange(kept.size)
    g = np.flatnonzero(row_of[code] >= 0)
    w = np.asarray(weights, dtype=float)[g]
    r = row_of[code[g]]
    wsum = np.bincount(r, weights=w, minlength=kept.size)
    A = sp.csr_matrix((w / wsum[r], (r, g)), shape=(kept.size, code.size))
    return A, y, s2, kept


#: noise sds above a noisy variance that :func:`between_upper` takes as its upper end (one-sided:
#: P(noise > 2 sd) is 2.3 % for Gaussian noise and ½·exp(−2√2) = 3 % for Laplace noise)
BETWEEN_SDS = 2.0


#: noise sds by which a node's count must clear its threshold to enter on its own where too few of its
#: marginal's nodes pass (:func:`clear_nodes`): twice :data:`BETWEEN_SDS`, the one-sided margin of the
#: other DP ends. Laplace noise overstates a count by more than BETWEEN_SDS sds in ½·exp(−2√2) ≈ 3 % of
#: draws, and a node whose true count is BETWEEN_SDS sds above its threshold passes in 97 % of draws,
#: so selection moves its count by E[δ | pass] = ½e^{−2√2}(2 + 1/√2)/(1 − ½e^{−2√2}) ≈ 0.08 sd (its
#: ratio by under 2 % of |μ − B/2| at a 3-sd threshold). Statements about the noise law, not data
CLEAR_SDS = 2.0 * BETWEEN_SDS


def clear_nodes(count: np.ndarray, count_var: np.ndarray, passed: np.ndarray) -> np.ndarray:
    """The nodes of ``passed`` (a marginal's nodes above their count threshold) whose count clears
    that threshold by :data:`CLEAR_SDS` noise sds: no plausible draw of the noise selected them, so
    the winner's curse that pools a few passing nodes (:data:`MIN_LEVELS`) does not apply. The map of
    a list that straddles two coarse cells is the case: one node at a count-to-noise ratio of 25 and
    one nearly empty; pooled, the empty node's noise doubled the map-wide mean's variance. Public
    function of DP counts."""
    n = np.asarray(count, dtype=float)
    sd = np.sqrt(np.broadcast_to(np.asarray(count_var, dtype=float), n.shape))
    passed = np.asarray(passed, dtype=np.int64)
    return passed[n[passed] >= _count_thresholds(n, count_var)[passed] + CLEAR_SDS * sd[passed]]


def _count_thresholds(count: np.ndarray, count_var: np.ndarray) -> np.ndarray:
    """Each node's count threshold in records: :func:`count_threshold` of the marginal's node number
    times the node's count noise sd (the rule of :func:`node_observations`)."""
    n_nodes = int(np.size(count))
    return count_threshold(n_nodes) * np.sqrt(np.broadcast_to(np.asarray(count_var, dtype=float), (n_nodes,)))


def pooled_sums(count: np.ndarray, count_var: np.ndarray, total: np.ndarray, total_var: np.ndarray,
                kept: np.ndarray) -> tuple[np.ndarray, float, float, float, float] | None:
    """(mask of the pooled nodes, their count, its variance, their centred sum, its variance): the
    measured nodes not in ``kept`` added up (independent noises: variances add); None where none
    remains. A single remaining node is tested again alone: it is the remainder, not chosen by its
    value, so the one-node threshold is the right one."""
    n_nodes = int(np.size(count))
    var_n = np.broadcast_to(np.asarray(count_var, dtype=float), (n_nodes,))
    var_y = np.broadcast_to(np.asarray(total_var, dtype=float), (n_nodes,))
    rest = np.ones(n_nodes, dtype=bool)
    rest[np.asarray(kept, dtype=np.int64)] = False
    rest &= np.isfinite(count) & np.isfinite(total) & np.isfinite(var_n) & np.isfinite(var_y)
    if not rest.any():
        return None
    return rest, float(count[rest].sum()), float(var_n[rest].sum()), float(total[rest].sum()), float(var_y[rest].sum())


def ratio_row(grids: np.ndarray, n: float, vn: float, t: float, vt: float, *, centre: float, half_range: float,
              weights: np.ndarray, most: float = np.inf) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
    """(A, y, s²) of one node over the grids ``grids`` (bool, one per listed grid) with noisy count n
    and centred sum t (variances vn, vt): the ratio mean, the one-node threshold (:func:`count_threshold`
    of 1) and the conservative variance of :func:`node_observations`; None where it does not pass."""
    thr = count_threshold(1) * math.sqrt(vn)
    if not (n >= max(thr, 1.0) and n - thr <= most and thr <= most):
        return None
    y, s2 = _ratio(np.array([n]), np.array([vn]), np.array([t]), np.array([vt]), centre=centre,
                   half_range=half_range)
    g = np.flatnonzero(grids)
    w = np.asarray(weights, dtype=float)[g]
    A = sp.csr_matrix((w / w.sum(), (np.zeros(g.size, dtype=np.int64), g)), shape=(1, np.size(grids)))
    return A, y, s2


def pooled_observation(code: np.ndarray, count: np.ndarray, count_var: np.ndarray, total: np.ndarray,
                       total_var: np.ndarray, kept: np.ndarray, *, centre: float, half_range: float,
                       weights: np.ndarray, most: float = np.inf
                       ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
    """(A, y, s²) of one row, the pool of a marginal's measured nodes that did not enter on their own
    (not in ``kept``; :func:`pooled_sums`): one node, an observation of the weighted mean of all their
    grids (:func:`ratio_row`). Independent of the entered nodes' noise, so nothing is counted twice.
    None where no node is pooled or the pool does not pass."""
    pool = pooled_sums(count, count_var, total, total_var, kept)
    if pool is None:
        return None
    rest, n, vn, t, vt = pool
    return ratio_row(rest[np.asarray(code, dtype=np.int64)], n, vn, t, vt, centre=centre, half_range=half_range,
                     weights=weights, most=most)


def identified(names: list[str], kept: list[np.ndarray], factors: dict[str, np.ndarray]) -> tuple[list[str], bool]:
    """(the factors whose variance the measurements identify, in the order of ``names``; whether the
    grids' own residual is): a factor where at least :data:`MIN_LEVELS` of its marginal's nodes entered
    (``kept``, per marginal, the finest first), the residual where that many listed grids did
    (models/engine.md §4). The one rule of the estimate and of the engine's plan. A list, not a set:
    the order of the factors is the order of the fit's columns, and a set's order changes with the
    process's string hashing (a seeded release then differed from run to run in the plan's last digits)."""
    seen = [name for name, k in zip(names, kept) if name in factors and k.size >= MIN_LEVELS]
    return seen, bool(kept[0].size >= MIN_LEVELS)


def values_variance(count: float, total: float, sumsq: float, *, clamp: float, count_var: float = 0.0,
                    total_var: float = 0.0, sumsq_count: float | None = None, sumsq_var: float = 0.0,
                    sumsq_count_var: float = 0.0, sds: float = BETWEEN_SDS) -> float:
    """A DP upper end of the variance of the kept values, from their noisy count n, centred sum t
    (Σ (x − B/2)) and shifted sum of squares z (Σ ((x − B/2)² − B²/8)) — the last possibly measured
    with its own count n_z (``sumsq_count``, default n):

        v̂ = z/n_z + B²/8 − (t/n)²,   upper end v̂ + ``sds`` · sd(v̂) (``sds`` = BETWEEN_SDS; 0: v̂ itself),

    sd(v̂)² = Var z/n_z² + (z/n_z²)²·Var n_z + (2t/n)²·(Var t/n² + (t/n²)²·Var n) (the delta method;
    the noises independent), within (0, B²/4] (Popoviciu); B²/4 where the noisy statistics give
    nothing usable. By the law of total variance the record-weighted variance of any grouping's means
    is at most the values' variance. Post-processing."""
    top = clamp * clamp / 4.0
    nz = count if sumsq_count is None else sumsq_count
    if not (np.isfinite(count) and np.isfinite(total) and np.isfinite(sumsq) and np.isfinite(nz) and count > 0
            and nz > 0):
        return top
    m1 = total / count
    v = sumsq / nz + clamp * clamp / 8.0 - m1 ** 2
    var_m2 = max(sumsq_var, 0.0) / nz ** 2 + (sumsq / nz ** 2) ** 2 * max(sumsq_count_var, 0.0)
    var_m1 = max(total_var, 0.0) / count ** 2 + (total / count ** 2) ** 2 * max(count_var, 0.0)
    upper = v + float(sds) * math.sqrt(var_m2 + (2.0 * m1) ** 2 * var_m1)
    return float(min(upper, top)) if np.isfinite(upper) and upper > 0 else top


def between_estimate(between: float, sd: float, count: float, *, count_var: float = 0.0) -> tuple[float, float]:
    """(V̂, sd(V̂)): the record-weighted variance of the listed grids' kept means read off the noisy
    between-grid statistic Q̃ (``between``, value², the sum of squares about their mean of
    :func:`dpopt.privacy.user.engine.between_sumsq`; its noise ``sd``) and the noisy total kept
    count n (noise variance ``count_var``):

        V̂ = Q̃/n,   sd(V̂)² = (sd/n)² + (Q̃/n²)²·Var n

    (the delta method; the two noises are independent): n's relative error moves V̂ by the same
    relative amount. Σ_g R_g·(ȳ_g − ȳ)² holds the grids' sampling noise too (about one within-grid
    variance per grid), so V̂ overstates the spread of the grids' means, never understates it.
    (NaN, NaN) where Q̃ was not measured or the count is not positive. Post-processing."""
    if not (np.isfinite(between) and np.isfinite(sd) and np.isfinite(count) and count > 0):
        return float("nan"), float("nan")
    return between / count, math.sqrt((sd / count) ** 2 + (between / count ** 2) ** 2 * max(count_var, 0.0))


def between_upper(between: float, sd: float, count: float, *, count_var: float = 0.0) -> float:
    """A DP upper end of the record-weighted variance of the listed grids' kept means:
    V̂ + BETWEEN_SDS · sd(V̂) of :func:`between_estimate`. ∞ where Q̃ was not measured or the count
    is not positive. Positive (at least sd(V̂)): a prior's range."""
    v, sd_v = between_estimate(between, sd, count, count_var=count_var)
    if not np.isfinite(v):
        return float("inf")
    return float(max(v + BETWEEN_SDS * sd_v, sd_v))


def listed_weights(codes: list[np.ndarray], counts: list[np.ndarray], count_vars: list[np.ndarray], *,
                   every_margin: bool = False) -> np.ndarray:
    """The listed grids' weights (estimated kept records) from every measured marginal (the finest
    first): the grids' own noisy counts where the finest marginal was measured
    (:func:`grid_weights`), else :func:`proportional_weights` to the coarser marginals' counts — those
    mostly measured above their noise, or, with ``every_margin``, all of them (the engine's plans:
    models/engine.md §4, "The grids' weights")."""
    if np.isfinite(counts[0]).any():
        return grid_weights(counts[0], count_vars[0])
    return proportional_weights(codes[1:], counts[1:], None if every_margin else count_vars[1:])


def proportional_weights(codes: list[np.ndarray], counts: list[np.ndarray],
                         count_vars: list[np.ndarray] | None = None) -> np.ndarray:
    """Grid weights where the grids' own counts were not measured: one sweep of iterative
    proportional fitting to the measured marginals' noisy counts (each clipped at 1 record), from
    equal weights — the independence model of place and time (Private-PGM's maximum-entropy answer
    for two margins).

    With ``count_vars`` (the counts' noise variances) a marginal enters the sweep only where its
    counts are mostly measured: at least half of its noisy records lie in nodes above their count
    threshold (:func:`count_threshold` noise sds, the rule by which a node enters as an observation,
    :func:`node_observations`). Fitted anyway, the pilot's counts of a marginal the plan did not
    raise (r3 × slot on the full Austin records: noise sd 17,000 against 1,200 records a node) spread
    random factors over the grids that the later margins' sweeps do not undo (models/engine.md §4,
    "The grids' weights"). The rule is a marginal's, not a node's: rescaling only the nodes above
    their threshold leaves the others at the sweep's starting scale of one record a grid, and one
    grid then held 90 % of the weight of its node. Without ``count_vars`` every count is taken as
    exact."""
    w = np.ones(np.size(codes[0]) if codes else 0)
    for i, (code, n) in enumerate(zip(codes, counts)):
        if not np.all(np.isfinite(n)):
            continue
        if count_vars is not None and not mostly_measured(n, count_vars[i]):
            continue
        now = np.bincount(code, weights=w, minlength=np.size(n))
        w = w * (np.maximum(n, 1.0) / np.maximum(now, 1e-12))[code]
    return w


def mostly_measured(count: np.ndarray, count_var: np.ndarray) -> bool:
    """Whether at least half of a marginal's noisy records (negative counts as 0; none: False) lie in
    nodes above their count threshold (:func:`proportional_weights`): a majority, no statement about
    data."""
    n = np.maximum(np.asarray(count, dtype=float), 0.0)
    total = float(np.sum(n))
    return total > 0 and float(np.sum(n[n >= _count_thresholds(count, count_var)])) >= 0.5 * total


def combined_total(values: list[np.ndarray], variances: list[np.ndarray]) -> tuple[float, float]:
    """(estimate, variance) of a total every marginal measures: its node values add up to the same
    total in each marginal (they partition the same kept records); each fully measured marginal's
    sum, with the sum of its nodes' noise variances, combined by inverse variance (a variance of 0, an
    exact total, is floored as :func:`combine` floors it; post-processing; (nan, ∞) where no marginal
    was measured)."""
    sums, sum_vars = [], []
    for x, vx in zip(values, variances):
        vx = np.broadcast_to(np.asarray(vx, dtype=float), np.shape(x))
        if np.size(x) and np.all(np.isfinite(x)) and np.all(vx >= 0):
            sums.append(np.array([float(np.sum(x))]))
            sum_vars.append(np.array([float(np.sum(vx))]))
    if not sums:
        return float("nan"), float("inf")
    total, var = combine(sums, sum_vars)
    return float(total[0]), float(var[0])


def total_upper(counts: list[np.ndarray], count_vars: list[np.ndarray]) -> float:
    """An upper bound of the total kept count: :func:`combined_total` of the node counts plus
    :data:`MIN_SNR` sds of that estimate (post-processing of the noisy counts; ∞ where nothing was
    measured)."""
    noisy = [(n, vn) for n, vn in zip(counts, count_vars) if np.all(np.asarray(vn, dtype=float) > 0)]
    total, var = combined_total([n for n, _ in noisy], [vn for _, vn in noisy])
    return float(total + MIN_SNR * np.sqrt(var)) if np.isfinite(total) else float("inf")


def crossed_inputs(codes: list[np.ndarray], names: list[str], counts: list[np.ndarray], count_vars: list[np.ndarray],
                   totals: list[np.ndarray], total_vars: list[np.ndarray], *, centre: float, half_range: float,
                   every_margin: bool = False
                   ) -> tuple[dict[str, np.ndarray], sp.csr_matrix, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The crossed model's inputs from every measured marginal (the first is the finest grid itself):
    ``factors`` (one random effect per coarser marginal with more than one node of which some entered;
    the finest grid's own deviation is the model's residual), the stacked observation matrix A, y, s² and, per
    marginal, the node rows that entered; after every marginal's node rows come the rows of the nodes
    clear of the curse among too few that passed (:func:`clear_nodes`, one row each, not in ``kept``),
    of the pools of the nodes that did not enter (:func:`pooled_observation`), the totals of the marginals none of
    whose nodes entered combined into one row (inverse variance, before the ratio: one total measured
    several times). Grid weights: :func:`listed_weights` (``every_margin`` passed on)."""
    w = listed_weights(codes, counts, count_vars, every_margin=every_margin)
    most = total_upper(counts, count_vars)
    blocks, ys, s2s, kept, pools, whole = [], [], [], [], [], []
    for code, n, vn, t, vt in zip(codes, counts, count_vars, totals, total_vars):
        A, y, s2, k = node_observations(code, n, vn, t, vt, centre=centre, half_range=half_range, weights=w,
                                        most=most)
        measured = int(np.sum(np.isfinite(n) & np.isfinite(t)))
        clear = np.zeros(0, dtype=np.int64)
        if 0 < k.size < min(MIN_LEVELS, measured):  # a few selected by their noise: pooled (MIN_LEVELS)
            clear = clear_nodes(n, vn, k)  # … but not those no noise draw could have selected
            A, y, s2, k = A[:0], y[:0], s2[:0], k[:0]
        blocks.append(A)
        ys.append(y)
        s2s.append(s2)
        kept.append(k)
        for j in clear:  # each its own row, an observation of its grids' weighted mean (no factor)
            row = ratio_row(np.asarray(code) == j, float(n[j]), float(np.broadcast_to(vn, np.shape(n))[j]),
                            float(t[j]), float(np.broadcast_to(vt, np.shape(n))[j]), centre=centre,
                            half_range=half_range, weights=w, most=most)
            if row is not None:
                pools.append(row)
        entered = np.union1d(k, clear)
        sums = pooled_sums(n, vn, t, vt, entered)
        if sums is None:
            continue
        if k.size == 0 and sums[0].all():  # no node entered: the pool is the marginal's total
            whole.append(sums[1:])
            continue
        row = pooled_observation(code, n, vn, t, vt, entered, centre=centre, half_range=half_range, weights=w,
                                 most=most)
        if row is not None:
            pools.append(row)
    if whole:  # the totals of several marginals measure one total: combined before the ratio is taken
        (cnt,), (vcnt,) = combine([np.array([x[0]]) for x in whole], [np.array([x[1]]) for x in whole])
        (tot,), (vtot,) = combine([np.array([x[2]]) for x in whole], [np.array([x[3]]) for x in whole])
        row = ratio_row(np.ones(np.size(codes[0]), dtype=bool), float(cnt), float(vcnt), float(tot), float(vtot),
                        centre=centre, half_range=half_range, weights=w, most=most)
        if row is not None:
            pools.append(row)
    # the pools' rows last, after every marginal's node rows (whose order ``kept`` gives)
    blocks += [p[0] for p in pools]
    ys += [p[1] for p in pools]
    s2s += [p[2] for p in pools]
    # a marginal none of whose nodes entered is no factor: nothing estimates its variance, and its
    # effects would only enlarge the system (the residual holds what it would explain)
    factors = {name: np.asarray(code, dtype=np.int64) for name, code, cnt, k in
               zip(names[1:], codes[1:], counts[1:], kept[1:]) if np.size(cnt) > 1 and k.size > 0}
    return factors, sp.vstack(blocks, format="csr"), np.concatenate(ys), np.concatenate(s2s), kept
