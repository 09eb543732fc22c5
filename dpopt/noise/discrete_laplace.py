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
from typing import NamedTuple
from fractions import Fraction

import numpy as np

from .._validation import DpoptInputError, check_epsilon, check_nonnegative_float, check_positive_int
from .exact import (
    MAX_NUMERATOR,
    WIDE_LIMIT,
    _bernoulli_exp,
    bernoulli,
    bernoulli_exp,
    discrete_laplace_int,
    discrete_laplace_wide,
    gcd_arrays,
)
from .sources import IntegerSource

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_laplace_array",
    "discrete_laplace_rational",
    "draw_grouped",
    "laplace_entries",
    "epsilon_rational_array",
    "epsilon_numerators",
    "grid_sensitivities",
    "grid_inputs",
    "GridInputs",
    "report_progress",
    "discrete_laplace_mean_abs",
    "grid_sensitivity",
    "summation_error",
    "epsilon_rational",
    "remaining_epsilon",
    "snap",
    "release_on_grid",
    "DEFAULT_GRANULARITY_BITS",
    "check_granularity_bits",
    "lattice_bits",
]

#: λ = 2^-DEFAULT_GRANULARITY_BITS
DEFAULT_GRANULARITY_BITS = 12
#: the granularity bits k any sampler accepts (λ = 2^-k from 2^-128 to 2^64: every λ and 1/λ a normal float)
GRANULARITY_BITS_RANGE = (-64, 128)


def check_granularity_bits(value: object, name: str = "granularity_bits") -> int:
    """Validate the exponent k of a lattice λ = 2^-k: an integer in :data:`GRANULARITY_BITS_RANGE`
    (negative k is a lattice coarser than 1, for values of large units)."""
    lo, hi = GRANULARITY_BITS_RANGE
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
        raise DpoptInputError(f"`{name}` must be an integer in {lo}..{hi}; got {value!r}")
    return int(value)


def lattice_bits(bound: float) -> int:
    """The lattice λ = 2^-k a release uses for values in a range of width U (public: U only).

    k = 12 (λ = 2^-12) for 1 ≤ U < 128, the lattice of every release before the rule; above, λ
    doubles with U, k = 18 − ⌊log2 U⌋, so that the range keeps 2^18 to 2^19 steps however large the
    unit (the lattice sums of squares then hold c·U²/(8λ) < c·U·2^16, which int64 carries up to
    c·U < 2^46); below 1, λ shrinks with U², k = 12 − 2⌊log2 U⌋, so that the squares' half-range
    U²/8 keeps at least 2^9 steps (it has 2^9 at U = 1). Rounding to the lattice moves a value by
    λ/2, at most 2^-13 of its range whatever the unit (2^-19 of it from U = 64 up). From U = 128 up
    values and U times 2^s give the same lattice integers of the centred sums; the sums of squares are
    in units of λ, not λ², so their integers (and noise draws) differ and the release agrees in law
    (tests/privacy/user/test_engine_release.py, ``test_the_release_does_not_depend_on_the_values_unit``).

    Parameters
    ----------
    bound : float
        U > 0, the width of the values' declared range (U − L for values in [L, U]).

    Returns
    -------
    int
        k, the granularity bits of the lattice (may be negative: λ > 1 for U ≥ 2^19).

    Raises
    ------
    ValueError
        (:class:`dpopt.DpoptInputError`) U not positive, or k outside :data:`GRANULARITY_BITS_RANGE`
        (U < 2^-58 or U ≥ 2^83; the capacity of :func:`~dpopt.privacy.user.bounding.check_lattice_capacity`
        refuses earlier, about 6·10^-14 and 2·10^12 at c = 64).
    """
    U = check_nonnegative_float(bound, "bound")
    if not U > 0:
        raise DpoptInputError(f"`bound` must be positive; got {bound!r}")
    e = math.frexp(U)[1] - 1  # ⌊log2 U⌋, exact for every positive float
    k = DEFAULT_GRANULARITY_BITS - max(0, e - 6) - 2 * min(0, e)
    if not GRANULARITY_BITS_RANGE[0] <= k <= GRANULARITY_BITS_RANGE[1]:
        raise DpoptInputError(f"`bound` = {U:g}: the values' range is too {'wide' if e > 0 else 'narrow'} for an "
                              "exact lattice; express the values in a unit where the range is between 1e-12 and 1e12")
    return k


_EPS_BITS = 30
_REL_SLACK = 1e-9


def _as_scale(scale: Fraction | int) -> Fraction:
    """A positive finite rational scale, or a one-line DpoptInputError."""
    try:
        out = Fraction(scale)
    except (TypeError, ValueError, OverflowError):  # nan, inf, text, None
        raise DpoptInputError(f"`scale` must be a positive finite rational; got {scale!r}") from None
    if out <= 0:
        raise DpoptInputError(f"`scale` must be positive; got {out}")
    return out


def discrete_laplace(scale: Fraction, rng: IntegerSource) -> int:
    """One exact sample of Z on ℤ with P[Z = z] ∝ exp(−|z|/scale) (CKS Algorithm 2), scalar.

    ``scale`` = t/s is a positive rational. The reference implementation (Python ints, one call per
    draw); releases use the vectorised :func:`discrete_laplace_array` / :func:`discrete_laplace_rational`.
    """
    scale = _as_scale(scale)
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


#: draws per vectorised block (bounds the memory of the rejection loops)
_BLOCK = 1 << 20


def discrete_laplace_array(scale: Fraction | int, n: int, source: IntegerSource) -> np.ndarray:
    """n independent exact draws (int64) of Z with P[Z = z] ∝ exp(−|z|/scale).

    Vectorised (:func:`dpopt.noise.exact.discrete_laplace_int`, CKS Algorithm 2 on uniform words)
    when the reduced scale a/b has a < 2^63 and b < 2^63 (int64); with Python ints over numpy
    object arrays (:func:`dpopt.noise.exact.discrete_laplace_wide`, the same algorithm) when
    a, b < 2^126; otherwise the scalar :func:`discrete_laplace` per draw (the same law; its cost
    does not grow with the scale either).
    """
    sc = _as_scale(scale)
    n = check_positive_int(n, "n", minimum=0)
    a, b = sc.numerator, sc.denominator
    wide = a >= MAX_NUMERATOR or b > 2**63 - 1
    if wide and (a >= WIDE_LIMIT or b >= WIDE_LIMIT):
        return np.fromiter((discrete_laplace(sc, source) for _ in range(n)), dtype=np.int64, count=n)
    out = np.empty(n, dtype=np.int64)
    for lo in range(0, n, _BLOCK):
        m = min(_BLOCK, n - lo)
        out[lo:lo + m] = discrete_laplace_wide(a, b, m, source) if wide else \
            discrete_laplace_int(np.full(m, a, np.int64), np.full(m, b, np.int64), source)
    return out


def discrete_laplace_rational(num: np.ndarray, den: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Z_i with P[Z_i = z] ∝ exp(−|z|·den_i/num_i), one exact draw per entry (int64 array).

    ``num``, ``den``: positive integers (int64 arrays of one shape), the scale of entry i being
    num_i/den_i; every int64 scale is in the vectorised range (module :mod:`dpopt.noise.exact`).
    """
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    if np.any(num < 1) or np.any(den < 1):
        raise DpoptInputError("`num` and `den` must hold positive integers (the scale num/den)")
    g = gcd_arrays(num, den)
    a, b = (num // g).ravel(), (den // g).ravel()
    out = np.empty(a.size, dtype=np.int64)
    for lo in range(0, a.size, _BLOCK):
        out[lo:lo + _BLOCK] = discrete_laplace_int(a[lo:lo + _BLOCK], b[lo:lo + _BLOCK], source)
    return out.reshape(num.shape)


def draw_grouped(t: np.ndarray, budget: np.ndarray, param: Callable[[int, float], Fraction],
                 draw_array: Callable[[Fraction, int, IntegerSource], np.ndarray],
                 source: IntegerSource) -> tuple[np.ndarray, np.ndarray]:
    """One draw (int64) per entry of the law ``param(t_i, budget_i)`` (an exact rational), the
    entries that share (t_i, budget_i) drawn together by ``draw_array(param, count, source)``, groups
    in the order of the sorted distinct pairs: the release's entries outside the per-entry int64
    range, which usually share one Δ and one budget. Returns (draws, float(param) per entry)."""
    out = np.zeros(t.size, dtype=np.int64)
    value = np.zeros(t.size)
    if t.size == 0:
        return out, value
    if t.min() == t.max() and budget.min() == budget.max():
        order, ends = np.arange(t.size), np.array([0, t.size])
    else:  # sort by (t, budget), stable: a group's entries stay in index order
        order = np.lexsort((budget, t))
        ts, bs = t[order], budget[order]
        ends = np.concatenate([[0], np.flatnonzero((ts[1:] != ts[:-1]) | (bs[1:] != bs[:-1])) + 1, [t.size]])
    for k in range(ends.size - 1):
        members = order[ends[k]:ends[k + 1]]
        p = param(int(t[members[0]]), float(budget[members[0]]))
        out[members], value[members] = draw_array(p, members.size, source), float(p)
    return out, value


def epsilon_rational(epsilon: float) -> Fraction:
    """ε rounded down to a multiple of 2^-30 (exact rational, ≤ ε, > 0)."""
    eps = check_epsilon(epsilon)
    num = math.floor(eps * 2**_EPS_BITS)
    if num < 1:
        raise DpoptInputError(f"`epsilon` must be >= 2^-{_EPS_BITS} for the discrete sampler; got {epsilon!r}")
    return Fraction(num, 2**_EPS_BITS)


def epsilon_numerators(epsilons: np.ndarray) -> np.ndarray:
    """⌊ε_i·2^30⌋ per entry (int64): ε'_i = this/2^30 is :func:`epsilon_rational` (ε_i), vectorised
    (the same float operations, so the same values); the first invalid ε raises as there."""
    eps = np.asarray(epsilons, dtype=float)
    if eps.size > 1 and eps.min() == eps.max():  # one budget for all entries (NaN fails the test)
        return np.full(eps.shape, epsilon_numerators(eps.flat[:1])[0], dtype=np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        num = np.floor(eps * 2.0**_EPS_BITS)
        bad = ~(np.isfinite(eps) & (num >= 1) & (eps <= 2.0**32))
    for e in eps[bad][:1]:
        epsilon_rational(float(e))  # raises the one-line error of an invalid ε
        raise DpoptInputError(f"`epsilon` = {e!r} is above 2^32: no int64 numerator (use epsilon_rational)")
    return num.astype(np.int64)


def epsilon_rational_array(epsilons: np.ndarray) -> np.ndarray:
    """float(:func:`epsilon_rational` (ε_i)) per entry, vectorised (exact: a multiple of 2^-30)."""
    eps = np.asarray(epsilons, dtype=float)
    small = eps <= 2.0**32
    out = np.empty(eps.shape)
    out[small] = epsilon_numerators(eps[small]) * 2.0**-_EPS_BITS
    out[~small] = [float(epsilon_rational(float(e))) for e in eps[~small]]
    return out


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
    k = check_granularity_bits(granularity_bits)
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


def grid_sensitivities(sensitivities: np.ndarray, granularity_bits: int = DEFAULT_GRANULARITY_BITS,
                       value_errors: np.ndarray | float = 0.0) -> np.ndarray:
    """:func:`grid_sensitivity` per entry, vectorised: the same float operations, so the same t
    (returned as float64 holding exact integers); the first invalid entry raises as there."""
    sens = np.asarray(sensitivities, dtype=float)
    eta = np.broadcast_to(np.asarray(value_errors, dtype=float), sens.shape)
    k = check_granularity_bits(granularity_bits)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(sens) & (sens >= 0) & np.isfinite(eta) & (eta >= 0))
    for i in np.flatnonzero(bad)[:1]:
        grid_sensitivity(float(sens.flat[i]), k, float(eta.flat[i]))  # raises its one-line error
    return np.ceil((sens * (1.0 + _REL_SLACK) + 2.0 * eta) * 2.0**k) + 1.0


def report_progress(callback: Callable[[int], None] | None, total: int) -> None:
    """``callback(1000)`` per thousand entries and once with the remainder (progress bars)."""
    if callback is None:
        return
    for _ in range(total // 1000):
        callback(1000)
    if total % 1000:
        callback(total % 1000)


class GridInputs(NamedTuple):
    """What both λ·ℤ releases compute first (:func:`grid_inputs`)."""

    q: np.ndarray  # round(f/λ) (int64; 0 where NaN)
    budget: np.ndarray  # ε or ρ per entry (broadcast)
    idx: np.ndarray  # flat indices of the entries that get noise
    t: np.ndarray  # their grid sensitivities (float64 holding exact integers)
    out: np.ndarray  # released values so far: NaN, or q·λ for the noise-free entries
    tgrid: np.ndarray  # int64 sensitivities (0 until filled in)
    free: np.ndarray  # mask of the entries released without noise (budget 0 and Δ = 0)
    lam: float


def grid_inputs(values: Sequence[float] | np.ndarray, sensitivities: Sequence[float] | np.ndarray,
                budgets: Sequence[float] | np.ndarray | float, granularity_bits: int,
                value_errors: Sequence[float] | np.ndarray | None) -> GridInputs:
    """Snap the values to λ·ℤ, release the noise-free entries, and compute the grid sensitivities
    t_i of the others (shared by :func:`release_on_grid` and the Gaussian release).

    A statistic given no budget and Δ = 0 must be data-independent even as computed: the caller's
    promise (the variance of one sample, s² − s², is exactly 0 in floating point too).
    """
    vals = np.asarray(values, dtype=float)
    sens = np.broadcast_to(np.asarray(sensitivities, dtype=float), vals.shape)
    budget = np.broadcast_to(np.asarray(budgets, dtype=float), vals.shape)
    k = check_granularity_bits(granularity_bits)
    etas = np.zeros(vals.shape) if value_errors is None else np.broadcast_to(
        np.asarray(value_errors, dtype=float), vals.shape)
    lam = 2.0**-k
    out = np.full(vals.shape, np.nan)
    ok = np.isfinite(vals)
    big = np.abs(np.where(ok, vals, 0.0)) >= 2.0 ** (62 - k)
    if np.any(big):  # round(f/λ) would overflow int64 (a garbage q, not an error)
        raise DpoptInputError(f"`values` must be below 2^{62 - k} in magnitude for the 2^{-k} output grid; "
                              f"got {float(vals[big].flat[0])!r}")
    q = np.zeros(vals.shape, dtype=np.int64)
    q[ok] = snap(vals[ok], k)
    free = ok & (budget == 0) & (sens == 0)
    out[free] = q[free] * lam
    idx = np.flatnonzero(ok & ~free)
    t = grid_sensitivities(sens.flat[idx], k, etas.flat[idx])
    return GridInputs(q, budget, idx, t, out, np.zeros(vals.shape, dtype=np.int64), free, lam)


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
    Entries with NaN value are left NaN (nothing released). ``callback(n)`` reports progress
    (1000 per thousand entries, :func:`report_progress`). All draws are vectorised
    (:func:`discrete_laplace_rational` with scale t_i·2^30/⌊ε_i·2^30⌋ = t_i/ε'_i); an entry with
    t_i ≥ 2^33 or ε_i > 2^32 is drawn by :func:`discrete_laplace_array` with its exact scale
    (:func:`draw_grouped`).
    """
    g = grid_inputs(values, sensitivities, epsilons, granularity_bits, value_errors)
    idx, t, e, out, tgrid, lam = g.idx, g.t, g.budget.flat[g.idx], g.out, g.tgrid, g.lam
    z = laplace_entries(t, e, rng)
    tgrid.flat[idx] = t.astype(np.int64)
    out.flat[idx] = (g.q.flat[idx] + z) * lam
    report_progress(callback, out.size)
    return out, tgrid


def laplace_entries(t: np.ndarray, epsilons: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Z_i with P[Z_i = z] ∝ exp(−|z|·ε'_i/t_i), one exact draw (int64) per entry, in entry order.

    ``t``: positive integer sensitivities (float64 holding exact integers, 1-D), ``epsilons`` the
    budgets ε_i (ε'_i = :func:`epsilon_rational` (ε_i)). Entries with t_i < 2^33 and ε_i ≤ 2^32 are
    drawn together by :func:`discrete_laplace_rational` (scale t_i·2^30/⌊ε_i·2^30⌋ = t_i/ε'_i);
    the others by :func:`discrete_laplace_array` with their exact scale (:func:`draw_grouped`).
    """
    z = np.zeros(t.size, dtype=np.int64)
    fast = (t < 2.0**33) & (epsilons <= 2.0**32)
    if np.any(fast):
        num = t[fast].astype(np.int64) << _EPS_BITS
        z[fast] = discrete_laplace_rational(num, epsilon_numerators(epsilons[fast]), source)
    slow = np.flatnonzero(~fast)
    z[slow] = draw_grouped(t[slow], epsilons[slow], lambda ti, ei: Fraction(ti) / epsilon_rational(ei),
                           discrete_laplace_array, source)[0]
    return z


def discrete_laplace_mean_abs(t: np.ndarray, epsilon: np.ndarray | float,
                              granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> np.ndarray:
    """E|λ·Z| for Z ~ DLap(t/ε'): λ·2r/(1 − r²), r = exp(−ε'/t), with ε' as used by the sampler."""
    t = np.asarray(t, dtype=float)
    eps_used = epsilon_rational_array(np.broadcast_to(np.asarray(epsilon, dtype=float), t.shape))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.exp(-eps_used / t)
        out = 2.0 * r / -np.expm1(np.log(r) * 2.0)
    return out * 2.0**-granularity_bits
