"""Private selection primitives: the exponential mechanism and Smith's private quantile.

Both are vectorised over repetitions: inputs with a leading axis ``(B, K)`` give one draw per row;
a single row with ``runs=R`` gives ``R`` independent draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_epsilon, check_positive_int
from ._common import check_rng

__all__ = ["exponential_mechanism", "smith_quantile", "sample_log_weights"]


def sample_log_weights(log_w: np.ndarray, rng: np.random.Generator, runs: int) -> np.ndarray:
    """Draw one index per row from the categorical ∝ ``exp(log_w)`` (Gumbel-max trick).

    ``log_w`` has shape ``(1, J)`` (the same weights for ``runs`` draws) or ``(runs, J)``.
    Entries ``-inf`` have probability 0. Returns int array of shape ``(runs,)``.
    """
    log_w = np.asarray(log_w, dtype=float)
    if log_w.shape[0] == 1 and runs > 1:
        w = log_w[0] - np.max(log_w[0])
        p = np.exp(w)
        p /= p.sum()
        return rng.choice(p.size, size=runs, p=p)
    g = rng.gumbel(size=log_w.shape)
    return np.argmax(log_w + g, axis=-1)


def exponential_mechanism(
    scores: Any, epsilon: float, *, sensitivity: float = 1.0, rng: np.random.Generator, runs: int = 1,
) -> np.ndarray:
    """McSherry–Talwar exponential mechanism: pick j with probability ∝ exp(ε·u_j / (2Δu)).

    Parameters
    ----------
    scores : array_like, shape (J,) or (B, J)
        Utilities u_j (larger is better). One row per run, or one row shared by ``runs`` draws.
    epsilon : float
        Budget of this step; the choice is ε-DP when every u_j changes by at most ``sensitivity``
        between neighbouring datasets.
    sensitivity : float
        Δu, the user-level sensitivity of the scores.
    rng : numpy.random.Generator
    runs : int
        Number of draws when ``scores`` is one row.
    """
    eps = check_epsilon(epsilon)
    rng = check_rng(rng)
    sensitivity = check_epsilon(sensitivity, "sensitivity")
    u = np.atleast_2d(np.asarray(scores, dtype=float))
    runs = u.shape[0] if u.shape[0] > 1 else check_positive_int(runs, "runs")
    return sample_log_weights(eps * u / (2.0 * sensitivity), rng, runs)


def smith_quantile(
    values: Any, target: Any, epsilon: float, *, lower: float, upper: float, sensitivity: float = 1.0,
    rng: np.random.Generator, runs: int = 1,
) -> np.ndarray:
    """Smith (STOC 2011), Algorithm 2: ε-DP quantile by the exponential mechanism over gaps.

    The values are clipped to ``[lower, upper]``, sorted and padded:
    ``z_0 = lower ≤ z_1 ≤ … ≤ z_K ≤ z_{K+1} = upper``. Gap ``i ∈ {0..K}`` (the interval
    ``[z_i, z_{i+1}]``, with exactly ``i`` values below it) is chosen with probability
    ``∝ (z_{i+1} − z_i)·exp(−ε·|i − t| / (2Δ))`` and a uniform point of it is returned.
    The rank utility ``−|i − t|`` changes by at most 1 when one value changes, so ``Δ = 1`` for
    item-level data; ``Δ = φ`` when one user can move ``φ`` of the values (WrapAround arrays).

    Parameters
    ----------
    values : array_like, shape (K,) or (B, K)
    target : float or array_like (B,)
        Target gap index ``t`` (e.g. ``α·(K+1)`` for the α-quantile as in the authors' code, or
        ``K − k + 1`` for the k-th largest value).
    epsilon : float
        Budget of this quantile.
    lower, upper : float
        Public range of the values.
    sensitivity : float
        Δ of the rank utility (see above).
    rng : numpy.random.Generator
    runs : int
        Number of draws when ``values`` is one row.

    Returns
    -------
    ndarray, shape (runs,)
    """
    eps = check_epsilon(epsilon)
    rng = check_rng(rng)
    sensitivity = check_epsilon(sensitivity, "sensitivity")
    if not upper > lower:
        raise DpoptInputError(f"`upper` must exceed `lower`; got lower={lower}, upper={upper}")
    x = np.atleast_2d(np.asarray(values, dtype=float))
    runs = x.shape[0] if x.shape[0] > 1 else check_positive_int(runs, "runs")
    B, K = x.shape
    z = np.empty((B, K + 2))
    z[:, 0] = lower
    z[:, -1] = upper
    z[:, 1:-1] = np.sort(np.clip(x, lower, upper), axis=1)
    gaps = np.diff(z, axis=1)  # (B, K+1)
    idx = np.arange(K + 1)
    t = np.asarray(target, dtype=float).reshape(-1, 1)
    with np.errstate(divide="ignore"):
        log_w = np.log(gaps) - eps * np.abs(idx[None, :] - t) / (2.0 * sensitivity)
    if log_w.shape[0] == 1 and B == 1 and runs > 1:
        choice = sample_log_weights(log_w, rng, runs)
        left, right = z[0, choice], z[0, choice + 1]
    else:
        log_w = np.broadcast_to(log_w, (max(B, log_w.shape[0]), K + 1))
        choice = sample_log_weights(log_w, rng, log_w.shape[0])
        zz = np.broadcast_to(z, (log_w.shape[0], K + 2))
        rows = np.arange(log_w.shape[0])
        left, right = zz[rows, choice], zz[rows, choice + 1]
    return left + (right - left) * rng.random(left.shape)
