"""Gaussian noise for releases: an exact discrete Gaussian sampler, its λ·ℤ release, numpy simulation.

The discrete Gaussian N_ℤ(0, σ²) on ℤ has P[Z = z] = exp(−z²/(2σ²)) / Σ_{y∈ℤ} exp(−y²/(2σ²))
(Canonne, Kamath & Steinke, NeurIPS 2020, "The Discrete Gaussian for Differential Privacy", eq. (1)).

Privacy (CKS Theorem 4). For f with integer values and |f(D) − f(D')| ≤ Δ ∈ ℤ on neighbours, the
mechanism f(D) + N_ℤ(0, σ²) is ρ-zCDP with ρ = Δ²/(2σ²): its Rényi divergence of every order
α > 1 is at most α·Δ²/(2σ²), exactly as for the continuous Gaussian. For k statistics each with its
own (Δ_i, σ_i) the ρ_i add (zCDP composition, Bun & Steinke 2016 Lemma 2.3).

Sampler (CKS Algorithm 3, σ² rational): with t = ⌊σ⌋ + 1, draw Y ~ DLap(t) (P ∝ exp(−|y|/t),
CKS Algorithm 2) and accept with probability exp(−(|Y| − σ²/t)²/(2σ²)) (CKS Algorithm 1,
Bernoulli(exp(−γ)) for rational γ). Accepted Y is exactly N_ℤ(0, σ²); everything is integer or
:class:`fractions.Fraction` arithmetic on uniform integers from the randomness source
(``randbelow(n)``), so no floating-point value ever touches the noise.

Release on the grid λ·ℤ, λ = 2^-k, as :func:`dpopt.noise.discrete_laplace.release_on_grid` does for Laplace
(models/release.md §5 "Noise that is safe for a real release"):

1. q = round(f̃/λ) for the float64 statistic f̃;
2. t = ⌈(Δ(1 + 10⁻⁹) + 2η)/λ⌉ + 1 (:func:`~dpopt.noise.discrete_laplace.grid_sensitivity`, η the proven
   float-error bound of f̃) bounds |q(D) − q(D')| for neighbours;
3. ρ' = ⌊ρ·2³⁰⌋/2³⁰ ≤ ρ (exact rational), σ_Z² = t²/(2ρ') (exact rational, in grid units);
4. release λ·(q + Z), Z ~ N_ℤ(0, σ_Z²).

By CKS Theorem 4 with integer sensitivity t the release is ρ'-zCDP ≤ ρ-zCDP. The noise standard
deviation in value units is λ·σ_Z = λt/√(2ρ') ≈ Δ/√(2ρ).

Vectorised: :func:`discrete_gaussian_array` and the release draw many samples per numpy call,
exactly (models/samplers.md: the acceptance test is integer arithmetic, or a float filter with a
rigorous error bound whose undecided cases are redone in exact rationals).

Randomness: :class:`~dpopt.noise.sources.SecureRandom` (OS CSPRNG) for real releases; a seeded
source (:func:`~dpopt.noise.sources.integer_source` with a seed) is NOT for a real release.
:func:`gaussian_simulation` (numpy, continuous) is for simulations only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from .._validation import DpoptInputError, check_positive_int
from .discrete_laplace import (
    DEFAULT_GRANULARITY_BITS,
    bernoulli_exp,
    discrete_laplace,
    draw_grouped,
    epsilon_numerators,
    epsilon_rational,
    grid_inputs,
    report_progress,
)
from .exact import bernoulli_exp_filtered, bernoulli_exp_ratio, discrete_laplace_int, gcd_arrays
from .sources import IntegerSource

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_array",
    "discrete_gaussian_pmf",
    "discrete_gaussian_mean_abs",
    "rho_rational",
    "grid_sigma2",
    "release_on_grid_gaussian",
    "gaussian_entries",
    "entry_sigma2",
    "gaussian_simulation",
]


def discrete_gaussian(sigma2: Fraction | int, rng: IntegerSource) -> int:
    """One exact sample of N_ℤ(0, σ²) (CKS 2020 Algorithm 3).

    Parameters
    ----------
    sigma2 : Fraction or int
        σ² > 0, a rational (a float is accepted and read exactly, ``Fraction(float)``).
    rng : IntegerSource
        ``randbelow(n)`` uniform integers.

    Notes
    -----
    t = ⌊σ⌋ + 1 (⌊σ⌋ = ``isqrt(⌊σ²⌋)``, exact); repeat Y ~ DLap(t) until a
    Bernoulli(exp(−(|Y| − σ²/t)²/(2σ²))) succeeds. The expected number of rounds is a small
    constant (CKS §5.3); about 20 µs per sample here at every σ from 0.5 to 10⁶.
    """
    s2 = Fraction(sigma2)
    if s2 <= 0:
        raise DpoptInputError(f"`sigma2` must be a positive rational; got {sigma2!r}")
    t = math.isqrt(s2.numerator // s2.denominator) + 1
    centre = s2 / t  # σ²/t
    two_s2 = 2 * s2
    while True:
        y = discrete_laplace(Fraction(t), rng)
        gamma = (abs(y) - centre) ** 2 / two_s2
        if bernoulli_exp(gamma, rng):
            return y


#: u = 2^-53, the unit roundoff of float64
_U = 2.0**-53
#: the vectorised sampler's range: proposal scale L < 2^40 (|Y| < 2^52 but with probability e^{-4096})
_MAX_L = 2**40
#: ... and σ² ≥ 2^-40, so that no float of the filter is subnormal (:func:`_gamma64_filter`); the
#: release's σ² = t²·2^29/m with t ≥ 1, m ≤ 2^62 is ≥ 2^-33
_MIN_SIGMA2 = Fraction(1, 2**40)
_BLOCK = 1 << 20


def _gamma64_filter(x: np.ndarray, c: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, err): g ≈ 64γ = (x − σ²/L)²·32/σ² in float64 and a rigorous bound |g − 64γ| ≤ err.

    ``x`` = |Y| (exact integers in float64), ``c`` ≈ σ²/L and ``h`` ≈ 32/σ² with relative error
    ≤ 4u (u = 2^-53). Every rounding below is relative (≤ u) because the callers keep
    2^-40 ≤ σ² and L < 2^40 (:data:`_MIN_SIGMA2`): then c̃ ≥ 2^-41, h̃ ≤ 2^45, a non-zero |d̃| is
    ≥ 2^-94 and |d̃| < 2^52, so no intermediate is subnormal or overflows. With d̃ = x − c̃:
    |d̃ − d| ≤ e_d = 5u|c̃| + 2u|d̃| and
    |64γ̃ − 64γ| ≤ h̃·(3u·d̃² + e_d(2|d̃| + e_d) + 5u(|d̃| + e_d)²), doubled for the roundings of
    the bound itself. g is NaN (the exact test decides) where x ≥ 2^52 (|Y| not exact).
    """
    d = x - c
    ad = np.abs(d)
    e_d = 5.0 * _U * np.abs(c) + 2.0 * _U * ad
    g = d * d * h
    err = 2.0 * h * (3.0 * _U * d * d + e_d * (2.0 * ad + e_d) + 5.0 * _U * (ad + e_d) ** 2) + 2.0**-1000
    return np.where(x < 2.0**52, g, np.nan), err


def _gaussian_core(scale: np.ndarray, centre: np.ndarray, h: np.ndarray,
                   exact_sigma2: Callable[[int], Fraction], source: IntegerSource,
                   small: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """One exact N_ℤ(0, σ_i²) per entry by CKS Algorithm 3, vectorised (see
    :func:`discrete_gaussian_array`).

    ``scale`` L_i (int64, 1 ≤ L < 2^40) is the Laplace proposal's scale (any positive integer
    gives the exact law; ⌊σ⌋ + 1 makes it efficient); ``centre`` ≈ σ²/L and ``h`` ≈ 32/σ² are
    floats with relative error ≤ 4u (u = 2^-53); ``exact_sigma2(i)`` is σ_i² exactly.

    Y ~ DLap(L) is accepted with probability exp(−γ), γ = (|Y| − σ²/L)²/(2σ²), drawn by
    :func:`dpopt.noise.exact.bernoulli_exp_filtered` from the float 64γ̃ = d̃²·h̃ (d̃ = |Y| − c̃)
    and the rigorous bound (each float operation has relative error ≤ u):
    |d̃ − d| ≤ e_d = 5u|c̃| + 2u|d̃| and
    |64γ̃ − 64γ| ≤ h̃·(3u·d̃² + e_d(2|d̃| + e_d) + 5u(|d̃| + e_d)²), doubled below for the roundings
    of the bound itself. Where it cannot certify a decision the exact rational test decides.

    ``small`` = (p_i, q_i) int64 arrays with σ_i² = p_i/q_i and 2·p_i·q_i·L_i² < 2^56, or q_i = 0
    where that does not hold: then γ = N/D with N = (|Y|·L·q − p)², D = 2pqL² is exact in int64
    wherever |(|Y|·L·q − p)| < 2^25, and those entries use the all-integer
    :func:`dpopt.noise.exact.bernoulli_exp_ratio` (this also covers the σ² for which 64γ is often
    an integer, where a float cannot certify ⌊64γ⌋).
    """
    out = np.zeros(scale.size, dtype=np.int64)
    pend = np.arange(scale.size)
    while pend.size:
        lp = scale[pend]
        y = discrete_laplace_int(lp, np.ones_like(lp), source)
        x = np.abs(y).astype(float)

        def exact_gamma(i: int, _p: np.ndarray = pend, _y: np.ndarray = y, _l: np.ndarray = lp) -> Fraction:
            s2 = exact_sigma2(int(_p[i]))
            return (abs(int(_y[i])) - s2 / int(_l[i])) ** 2 / (2 * s2)

        acc = np.zeros(pend.size, dtype=bool)
        ints = np.zeros(pend.size, dtype=bool)
        if small is not None:
            p, q = small[0][pend], small[1][pend]
            lq = lp * q
            ints = (q > 0) & (np.abs(x * lq.astype(float) - p.astype(float)) < 2.0**25)
            iy = np.flatnonzero(ints)
            num = (np.abs(y[iy]) * lq[iy] - p[iy]) ** 2
            acc[iy] = bernoulli_exp_ratio(num, 2 * p[iy] * q[iy] * lp[iy] ** 2, source)
        fl = np.flatnonzero(~ints)
        g, err = _gamma64_filter(x[fl], centre[pend[fl]], h[pend[fl]])
        acc[fl] = bernoulli_exp_filtered(g, err, lambda i: exact_gamma(int(fl[i])), source)
        out[pend[acc]] = y[acc]
        pend = pend[~acc]
    return out


def discrete_gaussian_array(sigma2: Fraction | int, n: int, source: IntegerSource) -> np.ndarray:
    """n independent exact draws (int64) of N_ℤ(0, σ²), σ² > 0 rational (CKS 2020 Algorithm 3),
    vectorised over numpy arrays (:func:`_gaussian_core`); σ ≥ 2^40 or σ² < 2^-40 falls back to
    the scalar :func:`discrete_gaussian` (the same law)."""
    s2 = Fraction(sigma2)
    if s2 <= 0:
        raise DpoptInputError(f"`sigma2` must be a positive rational; got {sigma2!r}")
    n = check_positive_int(n, "n", minimum=0)
    t = math.isqrt(s2.numerator // s2.denominator) + 1
    if t >= _MAX_L or s2 < _MIN_SIGMA2:
        return np.fromiter((discrete_gaussian(s2, source) for _ in range(n)), dtype=np.int64, count=n)
    c, h = float(s2 / t), float(32 / s2)  # correctly rounded: relative error ≤ u
    p, q = s2.numerator, s2.denominator
    is_small = 2 * p * q * t * t < 2**56
    out = np.empty(n, dtype=np.int64)
    for lo in range(0, n, _BLOCK):
        m = min(_BLOCK, n - lo)
        small = (np.full(m, p, np.int64), np.full(m, q, np.int64)) if is_small else None
        out[lo:lo + m] = _gaussian_core(np.full(m, t, np.int64), np.full(m, c), np.full(m, h),
                                        lambda i: s2, source, small)
    return out


def discrete_gaussian_pmf(z: np.ndarray | Sequence[int] | int, sigma: float) -> np.ndarray:
    """P[Z = z] for Z ~ N_ℤ(0, σ²) in float64: exp(−z²/2σ²)/Σ_y exp(−y²/2σ²).

    The normaliser sums |y| ≤ ⌈40σ⌉ + 40 (the omitted tail is below e^{-800}).
    """
    sig = float(sigma)
    if not (math.isfinite(sig) and sig > 0):
        raise DpoptInputError(f"`sigma` must be a positive finite number; got {sigma!r}")
    zz = np.asarray(z, dtype=float)
    y = np.arange(-(math.ceil(40 * sig) + 40), math.ceil(40 * sig) + 41, dtype=float)
    norm = np.exp(-(y**2) / (2 * sig * sig)).sum()
    return np.exp(-(zz**2) / (2 * sig * sig)) / norm


def discrete_gaussian_mean_abs(sigma: np.ndarray | float) -> np.ndarray:
    """E|Z| for Z ~ N_ℤ(0, σ²), per entry (σ in grid units).

    Exact summation for σ ≤ 1000; above, the continuous σ√(2/π) (the discrete value is
    σ√(2/π)(1 − 1/(12σ²) + …) by Euler–Maclaurin and Poisson summation, a relative gap < 10⁻⁷,
    checked in the tests at σ = 1000).
    """
    sig = np.atleast_1d(np.asarray(sigma, dtype=float))
    out = sig * math.sqrt(2.0 / math.pi)
    small = np.flatnonzero(sig <= 1000)
    uniq, inv = np.unique(sig[small], return_inverse=True)  # one sum per distinct σ
    vals = np.empty(uniq.size)
    for j, s in enumerate(uniq.tolist()):
        y = np.arange(1, math.ceil(40 * s) + 41, dtype=float)
        w = np.exp(-(y**2) / (2 * s * s))
        vals[j] = 2.0 * (y * w).sum() / (1.0 + 2.0 * w.sum())
    out[small] = vals[inv.ravel()]
    return out.reshape(np.shape(sigma))


def rho_rational(rho: float) -> Fraction:
    """ρ rounded down to a multiple of 2^-30 (exact rational, ≤ ρ, > 0), as ε for Laplace."""
    try:
        return epsilon_rational(rho)
    except DpoptInputError:
        raise DpoptInputError(
            f"`rho` must be a finite number >= 2^-30 for the discrete sampler; got {rho!r}"
        ) from None


def grid_sigma2(t: int, rho: float) -> Fraction:
    """σ_Z² = t²/(2ρ') in grid units (exact), ρ' = :func:`rho_rational` (ρ): N_ℤ(0, σ_Z²) with
    integer sensitivity t is then ρ'-zCDP ≤ ρ-zCDP (CKS Theorem 4)."""
    t = check_positive_int(t, "t")
    return Fraction(t * t) / (2 * rho_rational(rho))


def release_on_grid_gaussian(
    values: Sequence[float] | np.ndarray,
    sensitivities: Sequence[float] | np.ndarray,
    rhos: Sequence[float] | np.ndarray | float,
    rng: IntegerSource,
    *,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    callback: Callable[[int], None] | None = None,
    value_errors: Sequence[float] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Release each value f_i with the discrete Gaussian mechanism on λ·ℤ at budget ρ_i (zCDP).

    Mirrors :func:`dpopt.noise.discrete_laplace.release_on_grid` (same rounding, same sensitivity slack):
    entry i is released as λ·(round(f_i/λ) + Z_i), Z_i ~ N_ℤ(0, t_i²/(2ρ'_i)) with
    t_i = grid_sensitivity(Δ_i, k, η_i); it is ρ_i-zCDP for |f_i(D) − f_i(D')| ≤ Δ_i
    (module doc; CKS 2020 Theorem 4).

    Parameters
    ----------
    values : array_like of float
        The statistics f_i (NaN = not released, left NaN).
    sensitivities : array_like of float
        Δ_i ≥ 0 of each statistic (ℓ2 = ℓ1 for a scalar).
    rhos : float or array_like of float
        ρ_i per statistic. ρ_i = 0 together with Δ_i = 0 releases the value without noise (the
        caller guarantees it is data-independent, as for Laplace).
    rng : IntegerSource
        ``SecureRandom()`` for a real release; a seeded source only for tests.
    granularity_bits : int
        k, λ = 2^-k.
    callback : callable, optional
        Called with 1000 after every 1000 entries (progress bars).
    value_errors : array_like of float, optional
        η_i, bounds on the float error of each computed value (default 0).

    Returns
    -------
    (released, t, sigma) : released values λ·(q_i + Z_i); integer sensitivities t_i in grid units;
    noise standard deviation parameters λ·σ_{Z,i} in value units (0 where not noised, NaN where
    not released).
    """
    g = grid_inputs(values, sensitivities, rhos, granularity_bits, value_errors)
    idx, t, r, out, tgrid = g.idx, g.t, g.budget.flat[g.idx], g.out, g.tgrid
    sigma = np.where(g.free, 0.0, np.nan)
    z, s2 = gaussian_entries(t, r, rng)
    tgrid.flat[idx] = t.astype(np.int64)
    out.flat[idx] = (g.q.flat[idx] + z) * g.lam
    sigma.flat[idx] = np.sqrt(s2) * g.lam
    report_progress(callback, int(g.free.sum()) + idx.size)
    return out, tgrid, sigma


def gaussian_entries(t: np.ndarray, rhos: np.ndarray, source: IntegerSource) -> tuple[np.ndarray, np.ndarray]:
    """Z_i ~ N_ℤ(0, t_i²/(2ρ'_i)), one exact draw (int64) per entry in entry order, and σ_i² as
    float (:func:`entry_sigma2`). ``t``: positive integer sensitivities (float64 holding exact
    integers, 1-D), ``rhos`` the budgets ρ_i (ρ'_i = :func:`rho_rational` (ρ_i)). Entries with
    t_i < 2^33 and ρ_i ≤ 2^32 are drawn together (:func:`_release_noise`), the others per group of
    equal (t, ρ) by :func:`discrete_gaussian_array` (:func:`~dpopt.noise.discrete_laplace.draw_grouped`)."""
    z = np.zeros(t.size, dtype=np.int64)
    s2 = np.zeros(t.size)
    fast = (t < 2.0**33) & (rhos <= 2.0**32)
    if np.any(fast):
        z[fast], s2[fast] = _release_noise(t[fast], epsilon_numerators(rhos[fast]).astype(float), source)
    slow = np.flatnonzero(~fast)
    z[slow], s2[slow] = draw_grouped(t[slow], rhos[slow], grid_sigma2, discrete_gaussian_array, source)
    return z, s2


def entry_sigma2(t: np.ndarray, rhos: np.ndarray) -> np.ndarray:
    """σ_i² = t_i²/(2ρ'_i) as float per entry, as :func:`gaussian_entries` returns it (without
    drawing): t²·2^29/m in floats (m = ⌊ρ·2^30⌋) where t < 2^33 and ρ ≤ 2^32, else
    float(:func:`grid_sigma2`)."""
    s2 = np.zeros(t.size)
    fast = (t < 2.0**33) & (rhos <= 2.0**32)
    if np.any(fast):
        tf = t[fast]
        s2[fast] = tf * tf * 2.0**29 / epsilon_numerators(rhos[fast]).astype(float)
    for i in np.flatnonzero(~fast):
        s2[i] = float(grid_sigma2(int(t[i]), float(rhos[i])))
    return s2


def _release_noise(t: np.ndarray, m: np.ndarray, rng: IntegerSource) -> tuple[np.ndarray, np.ndarray]:
    """Z_i ~ N_ℤ(0, σ_i²), σ_i² = t_i²·2^29/m_i = t_i²/(2ρ'_i) exactly (ρ'_i = m_i/2^30,
    :func:`grid_sigma2`), for float arrays of exact integers t < 2^33, m < 2^63; returns (Z, σ² as
    float). The proposal scale is ⌊σ̃⌋ + 1 from the float σ̃ (any positive integer is exact);
    entries with σ ≥ 2^40 use the scalar sampler (σ² ≥ 2^29/m ≥ 2^-33 ≥ :data:`_MIN_SIGMA2` here)."""
    s2f = t * t * 2.0**29 / m
    scale = np.floor(np.sqrt(s2f)) + 1.0
    z = np.zeros(t.size, dtype=np.int64)
    fast = np.flatnonzero(scale < _MAX_L)
    lf = scale[fast]
    centre = t[fast] * t[fast] * 2.0**29 / (m[fast] * lf)  # 3 roundings: relative error ≤ 4u
    h = 32.0 * m[fast] / (t[fast] * t[fast] * 2.0**29)  # 2 roundings

    def exact(i: int) -> Fraction:
        return Fraction(int(t[fast[i]]) ** 2 * 2**29, int(m[fast[i]]))

    small = _small_ratios(t[fast], m[fast], lf)
    for lo in range(0, fast.size, _BLOCK):
        sl = slice(lo, lo + _BLOCK)
        z[fast[sl]] = _gaussian_core(lf[sl].astype(np.int64), centre[sl], h[sl],
                                     lambda i, _lo=lo: exact(_lo + i), rng, (small[0][sl], small[1][sl]))
    for i in np.flatnonzero(scale >= _MAX_L):
        z[i] = discrete_gaussian(Fraction(int(t[i]) ** 2 * 2**29, int(m[i])), rng)
    return z, s2f


def _small_ratios(t: np.ndarray, m: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_i, q_i) int64 with σ_i² = t_i²·2^29/m_i = p_i/q_i in lowest terms where t_i < 2^16 (so
    t²·2^29 < 2^61) and 2·p·q·L² < 2^56 for the proposal scale L = ``scale``; q_i = 0 elsewhere.
    The float test 2pqL² < 2^55 (relative error ≤ 4u) certifies the int64 bound with room; those
    entries take :func:`_gaussian_core`'s all-integer acceptance test. Entries with 8 ∤ m are not
    tried: there g = gcd(t²·2^29, m) ≤ 4t², so pq ≥ 2^25·m/t² and, L² > σ² = t²·2^29/m,
    2pqL² > 2^55 (the release's ρ' = m/2^30 of a generic ρ: its gcd would be wasted)."""
    p = np.zeros(t.size, dtype=np.int64)
    q = np.zeros(t.size, dtype=np.int64)
    ok = np.flatnonzero((t < 2.0**16) & (np.fmod(m, 8.0) == 0))
    ti = t[ok].astype(np.int64)
    num, den = (ti * ti) << 29, m[ok].astype(np.int64)
    g = gcd_arrays(num, den)
    pp, qq = num // g, den // g
    fits = 2.0 * pp * qq * scale[ok] ** 2 < 2.0**55
    p[ok[fits]], q[ok[fits]] = pp[fits], qq[fits]
    return p, q


def gaussian_simulation(
    scale: np.ndarray | float, rng: np.random.Generator, size: int | tuple[int, ...] | None = None
) -> np.ndarray:
    """Continuous N(0, scale²) noise from numpy: for simulations only, never for a real release."""
    if not isinstance(rng, np.random.Generator):
        raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
    return rng.normal(0.0, scale, size=size)
