"""The exact discrete Laplace mechanism on the grid λ·ℤ (real releases).

Why not ``numpy.random.laplace`` for a real release
----------------------------------------------------
Floating-point Laplace samples leak: the set of doubles that ``x + Lap(b)`` can produce depends on
x, so an observer can tell neighbouring inputs apart from the low bits (Mironov, CCS 2012).
OpenDP and Google's DP library avoid this by releasing values on a fixed grid λ·ℤ with noise from
an exact *discrete* Laplace sampler that uses integer arithmetic only. dpopt does the same:

1. the statistic f(D) (a CLIP mean or variance, seed 002 eqs. (6)-(7)) is rounded to the nearest
   multiple of λ = 2^-k: q(D) = round(f(D)/λ) ∈ ℤ;
2. the sensitivity Δ of f (eq. (9) or Lemma III.3) is rounded *up* to grid units,
   t = ⌈(Δ·(1 + 10⁻⁹) + 2η)/λ⌉ + 1, where η bounds the floating-point error of the computed
   statistic f̃ (|f̃ − f| ≤ η, from the standard summation bound γ_n = n·u/(1 − n·u), u = 2^-53:
   η_μ = 2γ_{R+2}·U and η_Var = 8γ_{R+2}·U² for R retained samples in [0, U]: the sum S2,
   the division and |μ̃² − μ²| ≤ η_μ(2U + η_μ)) and the factor
   1 + 10⁻⁹ covers the relative error of computing Δ itself. For neighbours D ~ D',
   |f(D) − f(D')| ≤ Δ, so |f̃(D) − f̃(D')| ≤ Δ + 2η and, q being a rounding of f̃/λ,
   |q(D) − q(D')| ≤ ⌊(Δ + 2η)/λ⌋ + 1 ≤ t (the +1 covers the two roundings);
3. the released value is λ·(q(D) + Z) with Z ~ DLap(t/ε') on ℤ, P[Z = z] ∝ exp(−|z|·ε'/t),
   sampled exactly by Canonne, Kamath & Steinke (NeurIPS 2020, "The Discrete Gaussian for
   Differential Privacy", Algorithms 1-2) from uniform integers. ε' ≤ ε is ε rounded down to a
   multiple of 2^-30 so that every probability is an exact rational.

The discrete Laplace mechanism with integer sensitivity t and P ∝ exp(−|z|ε'/t) is ε'-DP (the ratio
of the two pmfs at any output is at most exp(ε'·|q − q'|/t) ≤ exp(ε')), hence ε-DP. The output
λ·(q + Z) is a multiple of 2^-k held exactly by a double while |q + Z| < 2^53.

Randomness: any :class:`~dpopt.noise.sources.IntegerSource`: :class:`~dpopt.noise.sources.SecureRandom`
(``secrets``, the OS CSPRNG) for real releases; the seeded source of
:func:`~dpopt.noise.sources.integer_source` for reproducible tests: NOT for a real release.

The expected absolute noise is λ·2r/(1 − r²) with r = exp(−ε'/t) (:func:`discrete_laplace_mean_abs`);
it is at most λ·t/ε' (the continuous Lap(λt/ε') value, itself Δ/ε up to the rounding of t and ε).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from .._validation import DpoptInputError, check_epsilon, check_nonnegative_float, check_positive_int
from .sources import IntegerSource

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_laplace_mean_abs",
    "grid_sensitivity",
    "summation_error",
    "epsilon_rational",
    "remaining_epsilon",
    "snap",
    "release_on_grid",
    "DEFAULT_GRANULARITY_BITS",
]

#: λ = 2^-DEFAULT_GRANULARITY_BITS
DEFAULT_GRANULARITY_BITS = 12
_EPS_BITS = 30
_REL_SLACK = 1e-9


def bernoulli(p: Fraction, rng: IntegerSource) -> int:
    """Bernoulli(p) for rational p ∈ [0, 1]: 1 iff U{0..den−1} < num."""
    return int(rng.randbelow(p.denominator) < p.numerator)


def bernoulli_exp(gamma: Fraction, rng: IntegerSource) -> int:
    """Bernoulli(exp(−γ)) for rational γ ≥ 0, exactly (Canonne–Kamath–Steinke Algorithm 1)."""
    gamma = Fraction(gamma)
    if gamma < 0:
        raise DpoptInputError(f"`gamma` must be >= 0; got {gamma}")
    return _bernoulli_exp(gamma.numerator, gamma.denominator, rng)


def _bernoulli_exp(num: int, den: int, rng: IntegerSource) -> int:
    """Bernoulli(exp(−num/den)), num ≥ 0, den ≥ 1, in integer arithmetic.

    γ > 1: exp(−γ) = exp(−1)^⌊γ⌋·exp(−(γ − ⌊γ⌋)). γ ≤ 1: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, ...
    until the first 0 at K; return 1 iff K is odd (P = Σ_{K odd} γ^{K−1}/(K−1)! − γ^K/K! = e^{−γ}).
    """
    while num > den:
        if not _bernoulli_exp(1, 1, rng):
            return 0
        num -= den
    k = 1
    while rng.randbelow(den * k) < num:  # Bernoulli(γ/k) = Bernoulli(num/(den·k))
        k += 1
    return k % 2


def discrete_laplace(scale: Fraction, rng: IntegerSource) -> int:
    """One exact sample of Z on ℤ with P[Z = z] ∝ exp(−|z|/scale) (CKS Algorithm 2).

    ``scale`` = t/s is a positive rational.
    """
    try:
        scale = Fraction(scale)
    except (TypeError, ValueError, OverflowError):  # nan, inf, text, None
        raise DpoptInputError(f"`scale` must be a positive finite rational; got {scale!r}") from None
    if scale <= 0:
        raise DpoptInputError(f"`scale` must be positive; got {scale}")
    t, s = scale.numerator, scale.denominator  # P ∝ exp(-|z|·s/t)
    while True:
        u = rng.randbelow(t)
        if not _bernoulli_exp(u, t, rng):  # D ~ Bernoulli(exp(-u/t))
            continue
        v = 0
        while _bernoulli_exp(1, 1, rng):  # V ~ Geometric(1 - exp(-1))
            v += 1
        y = (u + t * v) // s  # Y ~ Geometric(1 - exp(-s/t))
        b = rng.randbelow(2)
        if b and y == 0:
            continue
        return -y if b else y


def epsilon_rational(epsilon: float) -> Fraction:
    """ε rounded down to a multiple of 2^-30 (exact rational, ≤ ε, > 0)."""
    eps = check_epsilon(epsilon)
    num = math.floor(eps * 2**_EPS_BITS)
    if num < 1:
        raise DpoptInputError(f"`epsilon` must be >= 2^-{_EPS_BITS} for the discrete sampler; got {epsilon!r}")
    return Fraction(num, 2**_EPS_BITS)


def remaining_epsilon(total: float, spent: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per entry, the largest double ≤ ε'(total) − ε'(spent_i), all in exact rationals.

    With ``ε_var ≤ remaining_epsilon(ε, ε_μ)`` the sampler's budgets satisfy
    ε'_μ + ε'_Var ≤ ε exactly (:func:`epsilon_rational` rounds each down), even when the float split
    ε·f + ε·(1 − f) exceeds ε by an ulp, so each grid's release is ε-DP (seed 002 eq. (8)).
    """
    tot = epsilon_rational(total)
    spent = np.asarray(spent, dtype=float)
    out = np.empty(spent.shape)
    for i, s in enumerate(spent.ravel()):
        cap = tot - epsilon_rational(float(s))
        f = float(cap)
        if Fraction(f) > cap:  # float() rounded up: step one ulp down
            f = math.nextafter(f, -math.inf)
        out.flat[i] = max(f, 0.0)
    return out


def grid_sensitivity(sensitivity: float, granularity_bits: int = DEFAULT_GRANULARITY_BITS,
                     value_error: float = 0.0) -> int:
    """Sensitivity in grid units, rounded up: t = ⌈(Δ(1 + 1e-9) + 2η)/λ⌉ + 1, λ = 2^-k, with η
    the floating-point error bound of the statistic (see module doc)."""
    delta = check_nonnegative_float(sensitivity, "sensitivity")
    eta = check_nonnegative_float(value_error, "value_error")
    k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    return int(math.ceil((delta * (1.0 + _REL_SLACK) + 2.0 * eta) * 2.0**k)) + 1


def summation_error(retained: np.ndarray, scale: float) -> np.ndarray:
    """γ_{R+2}·scale, γ_n = n·u/(1 − n·u), u = 2^-53: a bound on the float error of a sum of R
    terms in [0, scale] divided by R (see module doc; η_μ = 2γU, η_Var = 8γU²)."""
    n = np.asarray(retained, dtype=float) + 2.0
    u = 2.0**-53
    return n * u / (1.0 - n * u) * scale


def snap(values: np.ndarray, granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> np.ndarray:
    """round(f/λ) as Python-int-safe int64 (the statistic on the grid, in grid units)."""
    return np.rint(np.asarray(values, dtype=float) * 2.0**granularity_bits).astype(np.int64)


def release_on_grid(
    values: Sequence[float] | np.ndarray,
    sensitivities: Sequence[float] | np.ndarray,
    epsilons: Sequence[float] | np.ndarray,
    rng: IntegerSource,
    *,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    callback: Callable[[int], None] | None = None,
    value_errors: Sequence[float] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Release each value f_i with the discrete Laplace mechanism (module doc) at budget ε_i.

    ``value_errors`` η_i bound the floating-point error of each computed value (default 0).
    An entry with ε_i = 0 and Δ_i = 0 is released without noise: the caller guarantees that the
    computed value does not depend on the data.

    Returns (released values λ·(q_i + Z_i), the integer sensitivities t_i).
    Entries with NaN value are left NaN (nothing released). ``callback(n)`` is called after every
    1000 samples (progress bars).
    """
    vals = np.asarray(values, dtype=float)
    sens = np.asarray(sensitivities, dtype=float)
    eps = np.broadcast_to(np.asarray(epsilons, dtype=float), vals.shape)
    k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    etas = np.zeros(vals.shape) if value_errors is None else np.broadcast_to(
        np.asarray(value_errors, dtype=float), vals.shape)
    out = np.full(vals.shape, np.nan)
    tgrid = np.zeros(vals.shape, dtype=np.int64)
    lam = 2.0**-k
    q = np.zeros(vals.shape, dtype=np.int64)
    ok = np.isfinite(vals)
    q[ok] = snap(vals[ok], k)
    for i in np.flatnonzero(ok):
        if eps[i] == 0 and sens[i] == 0:
            # a statistic given no budget must be data-independent even as computed: the caller's
            # promise (the variance of one sample, s² − s², is exactly 0 in floating point too)
            out[i] = int(q[i]) * lam
            continue
        t = grid_sensitivity(float(sens[i]), k, float(etas[i]))
        e = epsilon_rational(float(eps[i]))
        z = discrete_laplace(Fraction(t) / e, rng)
        tgrid[i] = t
        out[i] = (int(q[i]) + z) * lam
        if callback is not None and (i + 1) % 1000 == 0:
            callback(1000)
    if callback is not None and vals.size % 1000:
        callback(vals.size % 1000)
    return out, tgrid


def discrete_laplace_mean_abs(t: np.ndarray, epsilon: np.ndarray | float,
                              granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> np.ndarray:
    """E|λ·Z| for Z ~ DLap(t/ε'): λ·2r/(1 − r²), r = exp(−ε'/t), with ε' as used by the sampler."""
    t = np.asarray(t, dtype=float)
    eps_used = np.vectorize(lambda e: float(epsilon_rational(float(e))))(np.broadcast_to(epsilon, t.shape)) \
        if np.size(t) else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.exp(-eps_used / t)
        out = 2.0 * r / -np.expm1(np.log(r) * 2.0)
    return out * 2.0**-granularity_bits
