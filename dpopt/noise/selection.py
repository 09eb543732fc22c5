"""Exact private selection: permute-and-flip with integer arithmetic and an integer source.

Permute-and-flip (McKenna & Sheldon, NeurIPS 2020, Algorithm 1): visit the candidates in a uniformly
random order and accept candidate i with probability exp(ε·(u_i − u*)/(2Δu)), u* = max_j u_j; the
first accepted is output. It is ε-DP for utilities of sensitivity Δu (their Theorem 1) and never
worse in expected utility than the exponential mechanism.

Float-safety (the reason this module exists; numpy's Gumbel-max exponential mechanism has a bounded
support, so candidates more than ~40 log-units below the best get probability exactly 0 and pure
ε-DP fails): utilities are put on the lattice 2^-m as q_i = ⌊u_i·2^m⌋, which moves each by < 2^-m,
so the lattice utilities have sensitivity Δq ≤ ⌈Δu·(1 + 10⁻⁹)·2^m⌉ + 1 (the 10⁻⁹ covers the float
error of computing the utilities); ε is rounded down to ε' = ⌊ε·2^30⌋/2^30
(:func:`~dpopt.noise.discrete_laplace.epsilon_rational`); the permutation comes from ``randbelow``
(Fisher–Yates) and each acceptance is an exact Bernoulli(exp(−ε'(q* − q_i)/(2Δq)))
(:func:`~dpopt.noise.discrete_laplace.bernoulli_exp`, Canonne–Kamath–Steinke Algorithm 1). The best
candidate accepts with probability 1, so the loop ends within one pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_epsilon, check_positive_int
from .discrete_laplace import bernoulli_exp, epsilon_rational
from .sources import IntegerSource

__all__ = ["permute_and_flip", "UTILITY_BITS"]

#: m of the utility lattice 2^-m
UTILITY_BITS = 20


def permute_and_flip(utilities: Any, epsilon: float, *, sensitivity: float, source: IntegerSource,
                     utility_bits: int = UTILITY_BITS) -> int:
    """Index of the selected candidate (ε-DP for utilities of sensitivity ``sensitivity``).

    Parameters
    ----------
    utilities : array_like of float
        u_i of every candidate (finite).
    epsilon : float
        ε of the selection.
    sensitivity : float
        Δu: the most any u_i changes between neighbouring datasets.
    source : IntegerSource
        ``SecureRandom()`` for a real release; a seeded source only for tests.
    utility_bits : int
        m of the utility lattice.
    """
    u = np.asarray(utilities, dtype=float).ravel()
    if u.size == 0 or not np.all(np.isfinite(u)):
        raise DpoptInputError(f"`utilities` must be a non-empty array of finite numbers; got {u.size} values")
    eps = epsilon_rational(check_epsilon(epsilon))
    du = check_epsilon(sensitivity, "sensitivity")
    m = check_positive_int(utility_bits, "utility_bits", minimum=0)
    if np.max(np.abs(u)) * 2.0**m >= 2.0**62:
        raise DpoptInputError(f"`utilities` too large for the 2^-{m} lattice (|u| < 2^{62 - m} needed)")
    q = np.floor(u * 2.0**m).astype(np.int64)
    dq = math.ceil(du * (1.0 + 1e-9) * 2.0**m) + 1
    best = int(q.max())
    order = list(range(u.size))
    for i in range(u.size - 1, 0, -1):  # Fisher–Yates with the integer source
        j = source.randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    for i in order:
        if bernoulli_exp(eps * (best - int(q[i])) / (2 * dq), source):
            return i
    raise AssertionError("unreachable: the best candidate accepts with probability 1")  # pragma: no cover


def acceptance_probabilities(utilities: Any, epsilon: float, *, sensitivity: float,
                             utility_bits: int = UTILITY_BITS) -> np.ndarray:
    """The exact output distribution of :func:`permute_and_flip` (tests and audits; n ≤ 12).

    With acceptance probabilities p_j and a uniform order, candidate i wins when it is accepted and
    every candidate before it was rejected: P(i) = p_i·Σ_{S ⊆ others} |S|!(n−1−|S|)!/n!·Π_{j∈S}(1 − p_j)
    (S = the set placed before i), an O(n·2^n) sum.
    """
    u = np.asarray(utilities, dtype=float).ravel()
    n = u.size
    if n > 12:
        raise DpoptInputError(f"`utilities`: at most 12 candidates for the exact distribution; got {n}")
    eps = float(epsilon_rational(check_epsilon(epsilon)))
    m = utility_bits
    q = np.floor(u * 2.0**m)
    dq = math.ceil(sensitivity * (1.0 + 1e-9) * 2.0**m) + 1
    p = np.exp(-eps * (q.max() - q) / (2 * dq))
    # P(i) = Σ over random orders: i accepted and every earlier j rejected. With a uniform order,
    # P(i) = p_i · Σ_{S ⊆ others} |S|!(n−1−|S|)!/n! · Π_{j∈S}(1 − p_j).
    out = np.zeros(n)
    fact = [math.factorial(k) for k in range(n + 1)]
    for i in range(n):
        others = [j for j in range(n) if j != i]
        total = 0.0
        for mask in range(1 << (n - 1)):
            prod, size = 1.0, 0
            for b, j in enumerate(others):
                if mask >> b & 1:
                    prod *= 1.0 - p[j]
                    size += 1
            total += fact[size] * fact[n - 1 - size] / fact[n] * prod
        out[i] = p[i] * total
    return out
