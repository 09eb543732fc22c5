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


__all__ = ["combine", "grid_weights", "node_observations", "crossed_inputs", "count_threshold", "pooled_observation", "total_upper", "proportional_weights", "FALSE_PASSES", "MIN_SNR"]

#: the expected number of a marginal's empty nodes that may pass the count threshold by noise alone:
#: one release in twenty has one such node in a given marginal (the conventional 5 % error rate). A
#: node selected by its noise carries a ratio at the centre B/2 *and* a small delta-method variance
#: (its count is inflated), so where few real nodes enter it sets the map-wide mean: at half a false
#: node per marginal the full Austin data at ε = 1 erred 7–12 km/h in one seed in three
FALSE_PASSES = 0.05
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
    count is lost in the noise weighs as much as a grid with one sd of records)."""
    sd = np.nan_to_num(np.sqrt(np.broadcast_to(np.asarray(count_var, dtype=float), np.shape(count))))  # unmeasured: 0
    c = np.where(np.isfinite(count), count, 0.0)
    return np.maximum(c, np.maximum(sd, 1.0))


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
    thr = count_threshold(n_nodes) * np.sqrt(var_n)
    kept = np.flatnonzero(np.isfinite(count) & np.isfinite(total) & (count >= np.maximum(thr, 1.0))
                          & (count - thr <= most) & (thr <= most))
    n = count[kept]
    d = np.clip(total[kept] / n, -half_range, half_range)
    y = centre + total[kept] / n
    # the count's lower end n − sd(n) in the denominator (conservative): the delta method's variance
    # is too small exactly where the count's noise made n too large, the nodes whose ratio it pulls
    # toward the centre (the tree BLUP's rule, models/hierarchy.md)
    n_lo = np.maximum(n - np.sqrt(var_n[kept]), 1.0)
    s2 = (var_y[kept] + d * d * var_n[kept]) / (n_lo * n_lo)
    row_of = np.full(n_nodes, -1, dtype=np.int64)
    row_of[kept] = np.arange(kept.size)
    g = np.flatnonzero(row_of[code] >= 0)
    w = np.asarray(weights, dtype=float)[g]
    r = row_of[code[g]]
    wsum = np.bincount(r, weights=w, minlength=kept.size)
    A = sp.csr_matrix((w / wsum[r], (r, g)), shape=(kept.size, code.size))
    return A, y, s2, kept


def pooled_observation(code: np.ndarray, count: np.ndarray, count_var: np.ndarray, total: np.ndarray,
                       total_var: np.ndarray, kept: np.ndarray, *, centre: float, half_range: float,
                       weights: np.ndarray, most: float = np.inf
                       ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
    """(A, y, s²) of one row, the pool of a marginal's measured nodes that did not enter on their own
    (not in ``kept``): their counts and centred sums added (independent noises, variances added) make
    one node, an observation of the weighted mean of all their grids, by the same ratio, threshold
    (:func:`count_threshold` of one node) and conservative variance as :func:`node_observations`.
    Independent of the entered nodes' noise, so nothing is counted twice. Where no single node is
    above its noise (a budget too small for the marginal's nodes) the pool is the marginal's total,
    the map-wide mean. None where fewer than two nodes are pooled or the pool does not pass."""
    code = np.asarray(code, dtype=np.int64)
    n_nodes = int(np.size(count))
    var_n = np.broadcast_to(np.asarray(count_var, dtype=float), (n_nodes,))
    var_y = np.broadcast_to(np.asarray(total_var, dtype=float), (n_nodes,))
    rest = np.ones(n_nodes, dtype=bool)
    rest[np.asarray(kept, dtype=np.int64)] = False
    rest &= np.isfinite(count) & np.isfinite(total) & np.isfinite(var_n) & np.isfinite(var_y)
    if rest.sum() < 2:
        return None
    n, vn = float(count[rest].sum()), float(var_n[rest].sum())
    t, vt = float(total[rest].sum()), float(var_y[rest].sum())
    thr = count_threshold(1) * math.sqrt(vn)
    if not (n >= max(thr, 1.0) and n - thr <= most and thr <= most):
        return None
    d = min(max(t / n, -half_range), half_range)
    n_lo = max(n - math.sqrt(vn), 1.0)
    g = np.flatnonzero(rest[code])
    w = np.asarray(weights, dtype=float)[g]
    A = sp.csr_matrix((w / w.sum(), (np.zeros(g.size, dtype=np.int64), g)), shape=(1, code.size))
    return A, np.array([centre + t / n]), np.array([(vt + d * d * vn) / (n_lo * n_lo)])


def proportional_weights(codes: list[np.ndarray], counts: list[np.ndarray]) -> np.ndarray:
    """Grid weights where the grids' own counts were not measured: one sweep of iterative
    proportional fitting to the measured marginals' noisy counts (each clipped at 1 record), from
    equal weights — the independence model of place and time (Private-PGM's maximum-entropy answer
    for two margins)."""
    w = np.ones(np.size(codes[0]) if codes else 0)
    for code, n in zip(codes, counts):
        if not np.all(np.isfinite(n)):
            continue
        now = np.bincount(code, weights=w, minlength=np.size(n))
        w = w * np.maximum(n, 1.0)[code] / np.maximum(now[code], 1e-12)
    return w


def total_upper(counts: list[np.ndarray], count_vars: list[np.ndarray]) -> float:
    """An upper bound of the total kept count: every marginal's node counts add up to the same total;
    their sums, combined by inverse variance, estimate it, plus :data:`MIN_SNR` sds of that estimate
    (post-processing of the noisy counts; ∞ where nothing was measured)."""
    sums, variances = [], []
    for n, vn in zip(counts, count_vars):
        vn = np.broadcast_to(np.asarray(vn, dtype=float), np.shape(n))
        if np.all(np.isfinite(n)) and np.all(vn > 0):
            sums.append(np.array([float(np.sum(n))]))
            variances.append(np.array([float(np.sum(vn))]))
    if not sums:
        return float("inf")
    total, var = combine(sums, variances)
    return float(total[0] + MIN_SNR * np.sqrt(var[0]))


def crossed_inputs(codes: list[np.ndarray], names: list[str], counts: list[np.ndarray], count_vars: list[np.ndarray],
                   totals: list[np.ndarray], total_vars: list[np.ndarray], *, centre: float, half_range: float
                   ) -> tuple[dict[str, np.ndarray], sp.csr_matrix, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The crossed model's inputs from every measured marginal (the first is the finest grid itself):
    ``factors`` (one random effect per coarser marginal with more than one node of which some entered;
    the finest grid's own deviation is the model's residual), the stacked observation matrix A, y, s² and, per
    marginal, the node rows that entered; after every marginal's node rows come the rows of the pools
    of the nodes that did not enter (:func:`pooled_observation`). Grid weights come from the finest
    marginal's counts."""
    w = grid_weights(counts[0], count_vars[0]) if np.isfinite(counts[0]).any() else \
        proportional_weights(codes[1:], counts[1:])
    most = total_upper(counts, count_vars)
    blocks, ys, s2s, kept, pools = [], [], [], [], []
    for code, n, vn, t, vt in zip(codes, counts, count_vars, totals, total_vars):
        A, y, s2, k = node_observations(code, n, vn, t, vt, centre=centre, half_range=half_range, weights=w,
                                        most=most)
        blocks.append(A)
        ys.append(y)
        s2s.append(s2)
        kept.append(k)
        pool = pooled_observation(code, n, vn, t, vt, k, centre=centre, half_range=half_range, weights=w, most=most)
        if pool is not None:
            pools.append(pool)
    # the pools' rows last, after every marginal's node rows (whose order ``kept`` gives)
    blocks += [p[0] for p in pools]
    ys += [p[1] for p in pools]
    s2s += [p[2] for p in pools]
    # a marginal none of whose nodes entered is no factor: nothing estimates its variance, and its
    # effects would only enlarge the system (the residual holds what it would explain)
    factors = {name: np.asarray(code, dtype=np.int64) for name, code, cnt, k in
               zip(names[1:], codes[1:], counts[1:], kept[1:]) if np.size(cnt) > 1 and k.size > 0}
    return factors, sp.vstack(blocks, format="csr"), np.concatenate(ys), np.concatenate(s2s), kept
