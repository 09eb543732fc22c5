"""Predicted error of a ``user``-model release from DP measurements (models/user_level.md §11).

Everything here is **post-processing** of DP outputs and public parameters: the noisy histogram of
the contribution distribution (:class:`ContributionHistogram`, measured by
:func:`dpopt.privacy.user.bounds.measure_contributions`), the noise budgets and the candidate bounds.
The same model serves two uses:

* :func:`predicted_release_error` — the objective the ``"histogram"`` bounds rule minimises over the
  public candidates (k, c) (:func:`dpopt.privacy.user.bounds.choose_bounds`);
* :func:`mean_error_bound_at` / :func:`release_outlook` — "never silently nothing": when a release
  publishes no node, or only nodes whose error bound is the whole range, a message that says so and
  what the same model predicts would meet the target (a coarser level, or the budget ε).

The model of one grid (a reference grid holding L users of the full data): a user of type (G, m)
(G grids, m records per grid, the bins of the histogram) holds a given one of its grids with weight
∝ G (users with more grids appear in more grids) and keeps it with probability P(k | G, q):

* own top-k (per-user ranks by count): P = min(1, k/G), the same for every grid;
* shared public priority (:mod:`.priority`), grid at priority quantile q: P = P[Bin(G − 1, q) ≤ k − 1]
  (the grid is kept iff fewer than k of the user's other grids come first in the public order).

Expected kept users Λ = L·Σ w·P, kept records L·Σ w·P·min(m, c), all records N = L·Σ w·m
(w = the pair-weighted type shares). The grid keeps no user with probability p₀ = e^{−Λ}
(Poisson) and is then pure noise (error h = U/2); given at least one kept user, L_k = Λ/(1 − p₀)
and n = L·Σ w·P·min(m, c)/(1 − p₀), and the predicted squared error of the grid's mean is

    v = Var(noise of Ỹ)/n² + (U/2)²·Var(noise of ñ)/n²         (delta method, worst-case mean, §4)
      + s²·(1/L_k − 1/L) + s²·(1/n − 1/N)                      (subsampling: dropped users, records)

(s the public within-grid spread of values), and its expected |error| after clipping into [0, U]
is e = r·h/√(r² + h²), r = √v (≈ r when r ≪ h, → h, the error of an uninformative answer,
when r ≫ h; smooth so that ties of saturated candidates still order by r). With private partition
selection the grid is released with probability p = P[L_k + Lap(k/ε_p) ≥ T(k)]
(:func:`dpopt.privacy.user.bounds.release_probability`) and an unreleased grid costs h. So
E = p₀·h + (1 − p₀)·(p·e + (1 − p)·h). The objective averages E over public reference sizes L
and, for a shared priority, over priority quantiles q.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.special import betainc

from ..._validation import DpoptInputError, check_bound, check_choice, check_epsilon, check_nonnegative_float
from ._thresholding import release_probability

__all__ = ["ContributionHistogram", "NoiseBudgets", "project_histogram", "predicted_release_error",
           "mean_error_bound_at", "denoise_histogram", "threshold_bins", "Outlook",
           "ReleaseModel", "epsilon_for_target", "EPSILON_LADDER", "release_outlook", "prior_only", "PRIORITIES"]

PRIORITIES = ("own", "shared")
#: public reference sizes (users of the full data in a grid) the objective averages over
DEFAULT_REFERENCE_USERS = (10, 20, 40, 80)


@dataclass(frozen=True)
class ContributionHistogram:
    """Noisy joint histogram of users by (grids per user G, median records per (user, grid) m).

    ``grids`` (len I) and ``records`` (len J): public representative values of the bins;
    ``noisy`` (I, J): the raw DP counts (integers); ``counts`` (I, J): the denoised counts the
    model uses (:func:`denoise_histogram`, post-processing);
    ``epsilon``: the budget spent.
    """

    grids: np.ndarray
    records: np.ndarray
    noisy: np.ndarray
    counts: np.ndarray
    epsilon: float

    @property
    def pair_weights(self) -> np.ndarray:
        """w_ij ∝ counts·G_i: the share of (user, grid) pairs held by users of type (i, j)."""
        w = self.counts * self.grids[:, None]
        tot = w.sum()
        return w / tot if tot > 0 else np.full(w.shape, 1.0 / w.size)


@dataclass(frozen=True)
class NoiseBudgets:
    """Budgets of the noisy count and centred sum (``unit`` "epsilon": Laplace, ℓ1 sensitivity
    k·c·(1, U/2); "rho": Gaussian, ℓ2 √k·c·(1, U/2)) and, with private selection, (ε_p, δ)."""

    count: float
    sum: float
    unit: str = "epsilon"
    selection: tuple[float, float] | None = None

    def noise_variances(self, k: np.ndarray, c: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
        """Variances of the noise on ñ and on Ỹ (value units) at bounds (k, c)."""
        kc = np.asarray(k, dtype=float) * np.asarray(c, dtype=float)
        if self.unit == "epsilon":  # Laplace of scale Δ1/ε: variance 2Δ1²/ε²
            return 2.0 * kc**2 / self.count**2, 2.0 * (kc * bound / 2.0) ** 2 / self.sum**2
        kc2 = np.asarray(k, dtype=float) * np.asarray(c, dtype=float) ** 2  # Δ2² = k·c²·(1, U²/4)
        return kc2 / (2.0 * self.count), kc2 * (bound / 2.0) ** 2 / (2.0 * self.sum)


def threshold_bins(noisy: np.ndarray, epsilon: float, phantom_rate: float = 1.0) -> np.ndarray:
    """Post-processing of a histogram with Laplace(1/ε) noise per bin: the bins whose noisy count
    reaches t = ln(#bins/``phantom_rate``)/ε, the others zeroed. An empty bin passes with probability
    ≤ phantom_rate/#bins (continuous Laplace: ½·e^{−εt} = phantom_rate/(2·#bins); the discrete
    Laplace of a real release: r^⌈t⌉/(1 + r) ≤ phantom_rate/#bins, r = e^{−ε}), so a phantom bin
    appears in at most phantom_rate of the histograms, about half of it at small ε (computed: 1.04 %
    of 8-bin histograms at ε = 0.1 and rate 0.02, 1.87 % at ε = 3)."""
    h = np.asarray(noisy, dtype=float)
    rate = check_nonnegative_float(phantom_rate, "phantom_rate")
    if not 0.0 < rate <= 1.0:
        raise DpoptInputError(f"`phantom_rate` must be in (0, 1]; got {phantom_rate!r}")
    t = math.log(max(h.size, 2) / rate) / check_epsilon(epsilon)
    return np.where(h >= t, h, 0.0)


def denoise_histogram(noisy: np.ndarray, epsilon: float, phantom_rate: float = 1.0) -> np.ndarray:
    """Post-processing of a histogram with Laplace(1/ε) noise per bin: :func:`threshold_bins` at
    t = ln(#bins/``phantom_rate``)/ε (at the default about one phantom bin in two histograms); if none
    survives, the projection of :func:`project_histogram`. Empty bins matter: the objective weights a
    user by its grids, so a few phantom users in a high-G bin would outweigh the real ones."""
    kept = threshold_bins(noisy, epsilon, phantom_rate)
    return kept if kept.sum() > 0 else project_histogram(np.asarray(noisy, dtype=float))


def project_histogram(noisy: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``noisy`` onto {x ≥ 0, Σx = max(Σnoisy, 0)}: x = max(noisy − θ, 0).

    Clipping alone at 0 turns the noise of the many empty bins into phantom users; the projection
    keeps the (unbiased) noisy total and removes that mass evenly (post-processing).
    """
    h = np.asarray(noisy, dtype=float).ravel()
    total = max(float(h.sum()), 0.0)
    if total == 0.0:
        return np.zeros(np.shape(noisy))
    s = np.sort(h)[::-1]
    css = np.cumsum(s) - total
    j = np.arange(1, s.size + 1)
    rho = int(np.flatnonzero(s - css / j > 0)[-1])
    theta = css[rho] / (rho + 1.0)
    return np.maximum(h - theta, 0.0).reshape(np.shape(noisy))


def _keep_probability(grids: np.ndarray, ks: np.ndarray, priority: str, quantiles: np.ndarray) -> np.ndarray:
    """P(k | G, q), shape (len ks, len quantiles, len grids)."""
    G = np.asarray(grids, dtype=float)
    k = np.asarray(ks, dtype=float)
    if priority == "own":
        p = np.minimum(1.0, k[:, None] / G[None, :])
        return np.broadcast_to(p[:, None, :], (k.size, quantiles.size, G.size))
    # shared order: kept iff at most k − 1 of the user's G − 1 other grids come first,
    # P[Bin(n, q) ≤ k − 1] = I_{1−q}(n − k + 1, k) for k ≤ n (1 beyond), n = G − 1 (real G: the
    # regularised incomplete beta extends the binomial tail to the bins' real representatives)
    n = np.maximum(G[None, None, :] - 1.0, 0.0)
    kk = k[:, None, None]
    q = np.broadcast_to(quantiles[None, :, None], (k.size, quantiles.size, G.size))
    with np.errstate(invalid="ignore"):
        tail = betainc(np.maximum(n - kk + 1.0, 1e-300), kk, 1.0 - q)
    return np.where(kk > n, 1.0, tail)


def predicted_release_error(
    hist: ContributionHistogram,
    ks: Sequence[int],
    cs: Sequence[int],
    *,
    bound: float,
    budgets: NoiseBudgets,
    priority: str = "own",
    reference_users: Sequence[float] = DEFAULT_REFERENCE_USERS,
    spread: float | None = None,
    quantiles: int = 16,
) -> np.ndarray:
    """The objective E(k, c) of the module doc for every candidate pair, shape (len ks, len cs).

    ``spread`` s: public within-grid spread of values (default U/8); ``quantiles``: number of
    priority quantiles q = (t + ½)/Q averaged over for ``priority="shared"``.
    """
    U = check_bound(bound)
    priority = check_choice(priority, "priority", PRIORITIES)
    ks = np.asarray(ks, dtype=np.int64)
    cs = np.asarray(cs, dtype=np.int64)
    s = U / 8.0 if spread is None else float(spread)
    h = U / 2.0
    Q = 1 if priority == "own" else int(quantiles)
    q = (np.arange(Q) + 0.5) / Q
    w = hist.pair_weights                                    # (I, J)
    P = _keep_probability(hist.grids, ks, priority, q)      # (K, Q, I)
    wi = w.sum(axis=1)                                       # (I,)
    keep_users = np.einsum("kqi,i->kq", P, wi)               # Σ w·P per reference user
    mc = np.minimum(hist.records[None, :], cs[:, None]).astype(float)  # (C, J)
    keep_records = np.einsum("kqi,ij,cj->kqc", P, w, mc)     # Σ w·P·min(m, c)
    all_records = float((w * hist.records[None, :]).sum())
    var_n, var_y = budgets.noise_variances(ks[:, None], cs[None, :], U)  # (K, C)
    out = np.zeros((ks.size, cs.size))
    for L in np.asarray(reference_users, dtype=float):
        lk = L * keep_users[:, :, None]                       # (K, Q, 1) expected kept users
        p0 = np.exp(-lk)                                      # P[no kept user] (Poisson)
        hit = np.maximum(1.0 - p0, 1e-300)
        n = L * keep_records / hit                            # given ≥ 1 kept user
        lkc = lk / hit
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            v = (var_y[:, None, :] + h * h * var_n[:, None, :]) / n**2 \
                + s * s * np.maximum(1.0 / lkc - 1.0 / L, 0.0) + s * s * np.maximum(1.0 / n - 1.0 / (L * all_records), 0.0)
            r = np.sqrt(v)
            e = np.where(np.isfinite(r), r * h / np.sqrt(r * r + h * h), h)
        if budgets.selection is not None:
            eps_p, delta = budgets.selection
            p = np.stack([release_probability(lkc[i], int(k), eps_p, delta) for i, k in enumerate(ks)])
            e = p * e + (1.0 - p) * h
        e = p0 * h + (1.0 - p0) * e
        out += e.mean(axis=1)
    return out / len(reference_users)


def mean_error_bound_at(noisy_count: np.ndarray, *, bound_now: np.ndarray, epsilon_now: float,
                        epsilon: float) -> np.ndarray:
    """A node's ``mean_error_bound`` if the release spent ``epsilon`` instead of ``epsilon_now``
    (same bounds and shares): every noise quantile scales as 1/ε (Laplace scale Δ/ε), so the
    noise part of D = (q_Y + (U/2)·q_n)/ñ scales by ε_now/ε at the same noisy count."""
    return np.asarray(bound_now, dtype=float) * (check_epsilon(epsilon_now, "epsilon_now") / check_epsilon(epsilon))


#: the public ladder of total budgets the outlook tries (ε)
EPSILON_LADDER = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


@dataclass(frozen=True)
class ReleaseModel:
    """What the outlook needs to predict a release at another budget: the DP histogram, the bounds,
    the shares of the total ε spent on the count, the sum and (private selection) the selection,
    δ, the priority rule, the model's reference sizes."""

    hist: ContributionHistogram
    k: int
    c: int
    shares: tuple[float, float, float]
    delta: float | None = None
    priority: str = "own"
    reference_users: tuple[float, ...] = DEFAULT_REFERENCE_USERS

    def error_at(self, epsilon: float, bound: float, users: float) -> float:
        """Predicted |error| of a grid with ``users`` users at total ε (the §11 objective at (k, c))."""
        sel = (self.shares[2] * epsilon, float(self.delta)) if self.shares[2] > 0 and self.delta else None
        b = NoiseBudgets(count=self.shares[0] * epsilon, sum=self.shares[1] * epsilon, selection=sel)
        return float(predicted_release_error(self.hist, [self.k], [self.c], bound=bound, budgets=b,
                                             priority=self.priority, reference_users=(users,))[0, 0])


def epsilon_for_target(model: ReleaseModel, *, bound: float, target: float, users: float) -> float | None:
    """The smallest ε of :data:`EPSILON_LADDER` at which the model predicts |error| ≤ ``target`` for
    a grid with ``users`` users (None if none does: coarsen instead)."""
    return next((e for e in EPSILON_LADDER if model.error_at(e, bound, users) <= target), None)


@dataclass(frozen=True)
class Outlook:
    """Whether a release is worth reading, and what the model predicts would be.

    ``useful``: nodes whose error bound is below the target; ``empty``: True when the release
    publishes nothing useful (no node, or every bound ≥ the target); ``level``: the finest level
    (of those offered) whose median node meets the target, or None; ``epsilon_needed``: the total ε
    at which the best node of the finest level would meet it (None if the level has no node);
    ``message``: one paragraph for stderr and the report ('' when the release is useful).
    """

    useful: int
    nodes: int
    empty: bool
    level: str | None
    epsilon_needed: float | None
    message: str


def release_outlook(
    levels: Mapping[str, tuple[np.ndarray, np.ndarray]],
    *,
    bound: float,
    epsilon: float,
    target: float | None = None,
    model: ReleaseModel | None = None,
    users: float = 20.0,
) -> Outlook:
    """Say whether a release publishes anything better than the whole range, and what would.

    Parameters
    ----------
    levels : mapping level name -> (noisy counts ñ, mean_error_bound) of its published nodes,
        finest level first (the flat release: one level; coarser levels: the same release's noisy
        counts summed over children, or a hierarchical release's own nodes). Public (DP outputs).
    bound : float
        U.
    epsilon : float
        The total ε the release spent.
    target : float, optional
        Error bound a node must meet to count as useful (default U/4: half the half-range).
    model : ReleaseModel, optional
        When the finest level publishes no node with a finite bound (e.g. private selection
        released nothing), the budget is predicted by :func:`epsilon_for_target` for a grid of
        ``users`` users (a public reference size).
    """
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    tgt = U / 4.0 if target is None else float(target)
    if not levels:
        raise DpoptInputError("`levels` must hold at least one level; got none")
    names = list(levels)
    n0, b0 = (np.asarray(a, dtype=float) for a in levels[names[0]])
    useful = int(np.sum(b0 < tgt))
    if useful > 0:
        return Outlook(useful=useful, nodes=int(b0.size), empty=False, level=names[0], epsilon_needed=None,
                       message="")
    level = next((nm for nm in names if np.asarray(levels[nm][1]).size
                  and float(np.median(np.asarray(levels[nm][1], dtype=float))) < tgt), None)
    # a bound of exactly half the range is the midpoint ± U/2 of a node nothing was measured for (every
    # record dropped, say), not noise that more epsilon would shrink: no projection from it
    finite = b0[np.isfinite(b0) & (b0 < U) & ~_at_half_range(b0, U)]
    need = float(eps * finite.min() / tgt) if finite.size else None
    if need is None and model is not None:
        need = epsilon_for_target(model, bound=U, target=tgt, users=users)
    message = _empty_message(b0, U=U, eps=eps, tgt=tgt, level=level, first=names[0], need=need,
                             projected=bool(finite.size), users=users)
    return Outlook(useful=0, nodes=int(b0.size), empty=True, level=level, epsilon_needed=need, message=message)


def _at_half_range(bounds: np.ndarray, U: float) -> np.ndarray:
    """Per bound: is it U/2, the midpoint ± U/2 of a node nothing was measured for (to rounding)?"""
    return np.isclose(np.asarray(bounds, dtype=float), U / 2.0, rtol=1e-9, atol=0.0)


def prior_only(bounds: np.ndarray, U: float) -> bool:
    """Is every published bound the midpoint ± U/2 of a node nothing was measured for? (DP outputs.)"""
    b = np.asarray(bounds, dtype=float)
    return bool(b.size) and bool(np.all(_at_half_range(b, U)))


def _empty_message(b0: np.ndarray, *, U: float, eps: float, tgt: float, level: str | None, first: str,
                   need: float | None, projected: bool, users: float) -> str:
    """:func:`release_outlook`'s words for a release with no useful node."""
    what = ("no node" if b0.size == 0 else
            f"{b0.size} nodes, none with an error bound below {tgt:g} (best {np.min(b0):.3g}, of a range {U:g} wide)")
    parts = [f"this release publishes nothing worth reading: {what} at epsilon = {eps:g}."]
    if level is not None and level != first:
        parts.append(f"The nodes of level '{level}' reach a median error bound below {tgt:g} for their own means "
                     "(a coarser place or time, not each grid): read those where one value per such node is enough.")
    if need is not None:
        parts.append(f"At the finest level {'the best node' if projected else f'a grid of {users:g} users'} "
                     f"would meet {tgt:g} at epsilon ≈ {math.ceil(need * 10) / 10:g}.")
    if prior_only(b0, U):
        parts.append("Every node is the midpoint of the range ± half of it: nothing was measured above its noise, "
                     "at this epsilon or because no record was read (the diagnostics count the dropped records).")
    if level is None and need is None:
        parts.append("No offered level meets the target: coarsen the grid (resolution or slot) or raise epsilon.")
    return " ".join(parts)
