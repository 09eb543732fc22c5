"""Levy et al. interval estimation on pseudo-user array means (seed 003 §III-D, Algorithm 3).

Pipeline (BestFit by default, ``m`` from eq. (9)):

1. Pack users into arrays (:mod:`dpopt.mechanisms.array_averaging`), array means ``Ā_1..Ā_K``.
2. Concentration radius, eq. (7): ``τ = U·sqrt(ln(2K/γ)/(2m))`` (γ = 0.2 in the authors' code).
3. Algorithm 3 with budget ``ε/2``: bins of width τ with centres ``c_j = (j − ½)τ`` in [0, U]; each
   ``Ā_k`` is quantised to its nearest centre; centre ``c_j`` is picked by the exponential mechanism
   with score ``s_j = max(#{k: Â_k < c_j}, #{k: Â_k > c_j})`` (lower is better), probability
   ``∝ exp(−(ε/2)·s_j/(2φ))``; the interval is ``[μ̂ − 1.5τ, μ̂ + 1.5τ]`` shifted into ``[0, U]``
   (length ``w = 3τ``; ``width_factor = 4`` gives the older code's ``±2τ``).
4. With budget ``ε/2``: ``(1/K) Σ_k Π_[a,b](Ā_k) + Lap(φ(b − a)/(K·ε/2))``.

Sensitivity of step 4 given ``[a, b]``: ``Δ_Levy = φ(b − a)/K`` (seed 003 eq. (6)); φ = 1 for
BestFit (a user touches one array), φ = 2 for WrapAround (a user may touch two arrays, each clipped
mean moving by up to ``b − a``). The score of step 3 moves by at most φ for the same reason.
Total budget ``ε/2 + ε/2 = ε`` (basic composition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_counts, check_choice, check_epsilon, check_positive_int
from ._common import BatchedEstimator, Release, laplace, prepare, split_budget
from .array_averaging import Grouping, Packing, array_means, grouping_label, pack
from .private_quantile import sample_log_weights

__all__ = ["levy", "levy_array_length", "levy_tau", "levy_interval", "clipped_array_release",
           "clipped_array_mean_estimator"]


def levy_array_length(counts: Any, *, search: str = "full") -> int:
    """Array length of seed 003 eq. (9): the smallest maximiser of ``Σ_ℓ min{m_ℓ, m}/√m``.

    ``search="full"`` scans ``m ∈ [m_*, m*]`` (the paper); ``"percentile"`` scans ``[P10, P90)`` of
    ``{m_ℓ}`` as the authors' code does. Both give 114 on the ITMS HAT. Delegates to
    :func:`dpopt.arrays.heuristic_length`.
    """
    from ..arrays import heuristic_length

    m = as_counts(counts)
    check_choice(search, "search", ("full", "percentile"))
    if search == "full":
        return heuristic_length(m)
    lo = max(int(np.percentile(m, 10)), 1)
    hi = max(int(np.percentile(m, 90)) - 1, lo)
    return heuristic_length(m, low=lo, high=hi)


def levy_tau(length: int, num_arrays: int, bound: float, gamma: float = 0.2) -> float:
    """Concentration radius of eq. (7): ``τ = U·sqrt(ln(2K/γ)/(2m))``."""
    if not 0.0 < gamma < 1.0:
        raise DpoptInputError(f"`gamma` must lie in (0, 1); got {gamma!r}")
    return float(bound) * math.sqrt(math.log(2.0 * num_arrays / gamma) / (2.0 * length))


def _shift_interval(centre: np.ndarray, width: float, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Interval of length ``width`` centred at ``centre``, shifted to stay inside ``[0, U]``."""
    if width >= bound:
        z = np.zeros_like(centre)
        return z, z + bound
    a = np.clip(centre - width / 2.0, 0.0, bound - width)
    return a, a + width


def levy_interval(
    means: Any,
    tau: float,
    epsilon: float,
    *,
    bound: float,
    influence: int = 1,
    width_factor: float = 3.0,
    rng: np.random.Generator,
    runs: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3: ε-DP interval ``[a, b]`` of length ``width_factor·τ`` around a private median bin.

    ``means`` shape ``(K,)`` or ``(B, K)``; returns ``(a, b)`` each of shape ``(runs,)``.
    """
    epsilon = check_epsilon(epsilon)
    influence = check_positive_int(influence, "influence")
    width_factor = check_epsilon(width_factor, "width_factor")
    x = np.atleast_2d(np.asarray(means, dtype=float))
    B, K = x.shape
    U = float(bound)
    J = max(1, math.ceil(U / tau + 0.5) - 1)  # centres (j - 1/2)τ < U, j = 1..J
    idx = np.clip(np.floor(x / tau).astype(np.int64), 0, J - 1)
    hist = np.zeros((B, J))
    np.add.at(hist, (np.repeat(np.arange(B), K), idx.ravel()), 1.0)
    cum = np.cumsum(hist, axis=1)
    below = cum - hist
    above = K - cum
    score = np.maximum(below, above)
    log_w = -epsilon * score / (2.0 * influence)
    R = runs if B == 1 else B
    j = sample_log_weights(log_w, rng, R)
    centre = (j + 0.5) * tau
    return _shift_interval(centre, width_factor * tau, U)


def clipped_array_release(
    means: np.ndarray, a: np.ndarray, b: np.ndarray, epsilon: float, *, bound: float, influence: int,
    rng: np.random.Generator, clip_output: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(1/K) Σ Π_[a,b](Ā_k) + Lap(φ(b − a)/(K·ε))`` per run; returns (values, estimate, Δ, scale)."""
    influence = check_positive_int(influence, "influence")
    x = np.atleast_2d(means)
    K = x.shape[1]
    est = np.clip(x, a[:, None], b[:, None]).mean(axis=1)
    sens = influence * (b - a) / K
    scale = sens / epsilon
    values = est + laplace(rng, scale, est.shape)
    if clip_output:
        values = np.clip(values, 0.0, bound)
    return values, est, sens, scale


def clipped_array_mean_estimator(length: int, lower: float, upper: float, grouping: Grouping = "best_fit",
                                 *, substitute_means: bool = True) -> BatchedEstimator:
    """Batched ``(1/K) Σ_k Π_[a,b](Ā_k)`` for a fixed interval, packing from the given counts (verify)."""

    def estimator(samples: Any, counts: Any) -> np.ndarray:
        p = pack(counts, length, grouping)
        am = array_means(samples, np.asarray(counts), p, substitute_means=substitute_means)
        return np.clip(am, lower, upper).mean(axis=-1)

    return estimator


@dataclass(frozen=True)
class ArrayMeansInput:
    """Validated input of an interval mechanism on pseudo-user array means (Levy, Quantile).

    ``means`` has shape (B, K); ``epsilon_interval + epsilon_mean = epsilon``.
    """

    epsilon: float
    epsilon_interval: float
    epsilon_mean: float
    rng: np.random.Generator
    runs: int
    bound: float
    length: int
    packing: Packing
    means: np.ndarray


def array_means_input(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None,
    length: int | None, grouping: Grouping, interval_share: float, substitute_means: bool, order: Any,
) -> ArrayMeansInput:
    """Validate, choose m (eq. (9) by default), pack from the counts and compute the array means."""
    d = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    eps_i, eps_m = split_budget(d.epsilon, interval_share, "interval_share")
    mlen = levy_array_length(d.counts) if length is None else check_positive_int(length, "length")
    p = pack(d.counts, mlen, grouping, order=order)
    return ArrayMeansInput(d.epsilon, eps_i, eps_m, d.rng, d.runs, d.bound, mlen, p,
                           array_means(d.samples, d.counts, p, substitute_means=substitute_means))


def interval_release(
    inp: ArrayMeansInput, a: np.ndarray, b: np.ndarray, *, clip_output: bool, mechanism: str,
    budget: dict[str, float], details: dict[str, Any],
) -> Release:
    """Step 2 of Levy / step 3 of Quantile with the private ``[a, b]``, packed into a :class:`Release`."""
    values, est, sens, scale = clipped_array_release(inp.means, a, b, inp.epsilon_mean, bound=inp.bound,
                                                     influence=inp.packing.influence, rng=inp.rng,
                                                     clip_output=clip_output)
    p = inp.packing
    return Release(
        values=values, estimate=est, sensitivity=sens, noise_scale=scale, epsilon=inp.epsilon,
        mechanism=f"{mechanism}-{grouping_label(p.grouping)}", budget=dict(budget, mean=inp.epsilon_mean),
        details=dict(details, length=inp.length, num_arrays=p.num_arrays, lower=a, upper=b,
                     influence=p.influence),
    )


def levy(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None = None,
    length: int | None = None, grouping: Grouping = "best_fit", gamma: float = 0.2, width_factor: float = 3.0,
    interval_share: float = 0.5,
    substitute_means: bool = True, clip_output: bool = False, order: Any = "nonincreasing",
) -> Release:
    """Levy et al. mechanism on pseudo-users (seed 003 §III-D), user-level ε-DP.

    Parameters
    ----------
    samples, counts, bound, epsilon, rng, runs
        As for :func:`dpopt.mechanisms.laplace.laplace_mean`.
    length : int, optional
        Array length m (default eq. (9), :func:`levy_array_length`).
    grouping : {"best_fit", "wrap_around"}
    gamma : float
        Failure probability γ of the concentration radius (7).
    width_factor : float
        Interval length in units of τ (3: final code; 4: older code).
    interval_share : float
        Fraction of ε for Algorithm 3 (paper: 1/2).
    substitute_means, clip_output, order
        See :func:`dpopt.mechanisms.array_averaging.array_averaging`.
    """
    check_epsilon(width_factor, "width_factor")
    inp = array_means_input(samples, counts, bound, epsilon, rng=rng, runs=runs, length=length, grouping=grouping,
                            interval_share=interval_share, substitute_means=substitute_means, order=order)
    p = inp.packing
    tau = levy_tau(inp.length, p.num_arrays, inp.bound, gamma)
    a, b = levy_interval(inp.means, tau, inp.epsilon_interval, bound=inp.bound, influence=p.influence,
                         width_factor=width_factor, rng=inp.rng, runs=inp.runs)
    return interval_release(inp, a, b, clip_output=clip_output, mechanism="Levy",
                            budget={"interval": inp.epsilon_interval}, details={"tau": tau})
