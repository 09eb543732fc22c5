"""Vectorised exact building blocks: uniforms, Bernoulli(exp(−γ)), geometrics, discrete Laplace.

Everything here turns uniform 64-bit words (:func:`dpopt.noise.sources.random_words`) into draws of
an exactly specified law, over numpy arrays, with masks for the rejection loops. Every decision is
a comparison of uniform integers with exact integers (or, in :func:`bernoulli_exp_filtered`, a
comparison whose outcome is *certified* by a rigorous error bound and otherwise redone in exact
rational arithmetic), so the laws are exact, not approximations.

The pieces (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy",
Algorithms 1–2; von Neumann's exponential method for the table decomposition):

* :func:`uniform_below` — U{0..n−1} per entry: mask a word to n−1's bit length, reject ≥ n.
* Bernoulli(exp(−γ)), γ ≥ 0 rational: write 64γ = J + R, J = ⌊64γ⌋, R ∈ [0, 1). Then
  exp(−γ) = exp(−J/64)·exp(−R/64) and the two factors are drawn independently:
  exp(−J/64) by comparing one word W with the exact integer T_J = ⌊e^{−J/64}·2^64⌋ (W < T_J: yes,
  W > T_J: no, W = T_J: the uniform real W·2^-64 + … is refined bit by bit against exact
  brackets of e^{−J/64}, :class:`_LazyUniform`); exp(−R/64) by CKS Algorithm 1: draw
  A_k ~ Bernoulli(R/(64k)) for k = 1, 2, … until the first 0 at K, accept iff K is odd
  (P = Σ_{K odd} r^{K−1}/(K−1)! − r^K/K! = e^{−r}, r = R/64 < 1/64, so K ≤ 2 almost always).
* V ~ Geometric with P(V ≥ v) = e^{−v}: by inversion, V = #{j ≥ 1 : W < e^{−j}} with the same
  exact table (ties refined exactly).
* Y ~ Geometric with P(Y ≥ y) = e^{−y·b/a} (CKS Algorithm 2): U ∈ {0..a−1} accepted with
  probability e^{−U/a}, then Y = ⌊(U + a·V)/b⌋. Cost: a constant expected number of words per
  draw, whatever the scale a/b.
* discrete Laplace: Z = ±Y with the sign from one word, (−, 0) rejected (CKS Algorithm 2).

The table T_J is computed once, in exact integer arithmetic, from rigorous brackets of e^{−1/64}
(alternating series) raised to the power J in fixed point with floor/ceil rounding; every entry is
checked to have the same floor at both ends of its bracket.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._validation import DpoptInputError
from .sources import IntegerSource, random_words

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "uniform_below",
    "bernoulli_exp_ratio",
    "bernoulli_exp_filtered",
    "geometric_exp",
    "discrete_laplace_int",
    "MAX_NUMERATOR",
    "WIDE_LIMIT",
    "discrete_laplace_wide",
]

#: resolution of the exact table: T_J = ⌊e^{−J/RES}·2^64⌋
RES = 64
#: the vectorised sampler needs the reduced scale a/b with a < MAX_NUMERATOR (int64 numerators)
MAX_NUMERATOR = 2**63
_INT64_MAX = 2**63 - 1
_FIXED = 384  # fixed-point bits of the table computation


# ---------------------------------------------------------------------------------------------
# scalar exact helpers (Python ints and Fractions): the reference and the fallbacks
# ---------------------------------------------------------------------------------------------
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


@functools.lru_cache(maxsize=4096)
def _exp_neg_fixed(x: Fraction, bits: int) -> tuple[int, int]:
    """(lo, hi) integers with lo ≤ e^{−x}·2^bits ≤ hi, for rational x ≥ 0 (hi − lo small).

    e^{−x} = (e^{−y})^{2^s} with y = x/2^s ≤ 1/2; e^{−y} lies between consecutive partial sums of
    its alternating series (terms decrease for y ≤ 1); the 2^s-th power is taken by squaring in
    fixed point with floor (lo) and ceil (hi) rounding.
    """
    x = Fraction(x)
    s = 0
    while x > Fraction(1, 2) * 2**s:
        s += 1
    y = x / 2**s
    prec = bits + 2 * s + int(1.5 * float(x)) + 64
    lo_f = hi_f = Fraction(1)
    term, k = Fraction(1), 0
    while True:
        k += 1
        term = term * y / k
        if k % 2:
            lo_f = hi_f - term
        else:
            hi_f = lo_f + term
        if term * 2**prec < 1:
            break
    lo = (lo_f.numerator << prec) // lo_f.denominator
    hi = -((-hi_f.numerator << prec) // hi_f.denominator)
    for _ in range(s):
        lo = (lo * lo) >> prec
        hi = -((-(hi * hi)) >> prec)
    return lo >> (prec - bits), -((-hi) >> (prec - bits))


class _LazyUniform:
    """A uniform real W ∈ [0, 1) of which the leading ``nbits`` bits (``prefix``) are known; more
    bits come from the source on demand. :meth:`below` decides W < θ exactly."""

    def __init__(self, prefix: int, nbits: int, source: IntegerSource) -> None:
        self.prefix, self.nbits, self.source = int(prefix), int(nbits), source

    def below(self, bracket: Callable[[int], tuple[int, int]]) -> bool:
        """W < θ, θ given by ``bracket(bits) = (lo, hi)`` with lo ≤ θ·2^bits ≤ hi (exact integers).

        Decided once [W's known interval] lies on one side of [lo, hi]; else 64 more bits of W.
        Terminates with probability 1 when θ is irrational or the brackets are exact.
        """
        while True:
            lo, hi = bracket(self.nbits + 8)
            if (self.prefix + 1) << 8 <= lo:
                return True
            if self.prefix << 8 >= hi:
                return False
            self.prefix = (self.prefix << 64) | int(random_words(self.source, 1)[0])
            self.nbits += 64


def _rational_bracket(theta: Fraction) -> Callable[[int], tuple[int, int]]:
    return lambda bits: ((theta.numerator << bits) // theta.denominator,
                         -((-theta.numerator << bits) // theta.denominator))


def _exp_bracket(x: Fraction) -> Callable[[int], tuple[int, int]]:
    return lambda bits: _exp_neg_fixed(x, bits)


@functools.lru_cache(maxsize=1)
def _table() -> np.ndarray:
    """T_J = ⌊e^{−J/64}·2^64⌋ for J = 0, 1, … up to the first 0 (T_0 stored as 2^64 − 1; J = 0 is
    special-cased: e^0 = 1), exact (module doc)."""
    lo1, hi1 = _exp_neg_fixed(Fraction(1, RES), _FIXED)
    lo, hi = 1 << _FIXED, 1 << _FIXED
    out = [2**64 - 1]
    while True:
        lo = (lo * lo1) >> _FIXED
        hi = -((-(hi * hi1)) >> _FIXED)
        t_lo, t_hi = lo >> (_FIXED - 64), hi >> (_FIXED - 64)
        if t_lo != t_hi:  # pragma: no cover - the bracket is ~2^-370 wide
            raise RuntimeError("exact exp table: bracket too wide")
        out.append(t_lo)
        if t_lo == 0:
            return np.array(out, dtype=np.uint64)


@functools.lru_cache(maxsize=1)
def _table32() -> np.ndarray:
    """⌊e^{−J/64}·2^32⌋ = ⌊T_J/2^32⌋ (uint32; J = 0 special-cased as in :func:`_table`)."""
    return (_table() >> np.uint64(32)).astype(np.uint32)


# ---------------------------------------------------------------------------------------------
# vectorised pieces
# ---------------------------------------------------------------------------------------------
def _bits32(source: IntegerSource, n: int) -> np.ndarray:
    """n uniform 32-bit values (half words)."""
    return random_words(source, (n + 1) // 2).view(np.uint32)[:n]


def _bits8(source: IntegerSource, n: int) -> np.ndarray:
    """n uniform bytes."""
    return random_words(source, (n + 7) // 8).view(np.uint8)[:n]


def _bits1(source: IntegerSource, n: int) -> np.ndarray:
    """n uniform bits (as bool)."""
    return np.unpackbits(random_words(source, (n + 63) // 64).view(np.uint8))[:n].astype(bool)


def _bit_mask(nn: np.ndarray) -> np.ndarray:
    """2^bitlen(n−1) − 1 per entry of the unsigned array ``nn`` (n ≥ 1, same dtype): the smallest
    all-ones mask ≥ n − 1. The exponent of float(n − 1) is bitlen(n − 1), or one more where the
    float rounded up to a power of two (n − 1 ≥ 2^53); that one extra bit is then dropped."""
    n1 = nn - nn.dtype.type(1)
    _, e = np.frexp(n1.astype(float))
    ones = np.uint64(2**64 - 1)
    mask = np.where(e >= 64, ones, (np.uint64(1) << np.minimum(e, 63).astype(np.uint64)) - np.uint64(1))
    mask = mask.astype(nn.dtype)
    half = mask >> nn.dtype.type(1)
    return np.where(half >= n1, half, mask)


def gcd_arrays(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``np.gcd(x, y)`` for int64 arrays of one shape, computed once when every entry holds the
    same pair (a release's usual case: one Δ and one budget for all entries)."""
    if x.size and x.min() == x.max() and y.min() == y.max():
        return np.full(x.shape, math.gcd(int(x.flat[0]), int(y.flat[0])), dtype=np.int64)
    return np.gcd(x, y)


def uniform_below(bound: np.ndarray, source: IntegerSource) -> np.ndarray:
    """U{0..n−1} per entry, n = ``bound`` (integers in [1, 2^63)), as int64: each entry takes a
    32-bit value (when every n ≤ 2^31) or a word, masked to the bit length of n−1, and is redrawn
    while ≥ n (acceptance > 1/2)."""
    n = np.asarray(bound, dtype=np.int64)
    hi = int(n.max()) if n.size else 1
    narrow = hi <= 2**31
    dt = np.uint32 if narrow else np.uint64
    draw = _bits32 if narrow else random_words
    if n.size and hi == int(n.min()):  # one bound for all entries: scalar mask and comparison (same draws)
        nn = np.full(1, hi, dtype=dt)
        mask = _bit_mask(nn)
        nn, mask = np.broadcast_to(nn, n.shape), np.broadcast_to(mask, n.shape)
    else:
        nn = n.astype(dt)
        mask = _bit_mask(nn)
    w = draw(source, n.size) & mask
    out = w.astype(np.int64)
    bad = np.flatnonzero(w >= nn)
    while bad.size:
        w = draw(source, bad.size) & mask[bad]
        ok = w < nn[bad]
        out[bad[ok]] = w[ok]
        bad = bad[~ok]
    return out


def _table_bernoulli(j: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Bernoulli(e^{−J/64}) per entry for integers J ≥ 0: a 32-bit W against ⌊e^{−J/64}·2^32⌋
    (exact table; ties refined exactly from the 32 known bits)."""
    table = _table32()
    w = _bits32(source, j.size)
    tj = table[np.minimum(j, table.size - 1)]
    out = (w < tj) | (j == 0)
    for i in np.flatnonzero((w == tj) & (j > 0)):
        out[i] = _LazyUniform(int(w[i]), 32, source).below(_exp_bracket(Fraction(int(j[i]), RES)))
    return out


def _chain_int(r: np.ndarray, a: np.ndarray, source: IntegerSource,
               below: Callable[[np.ndarray, IntegerSource], np.ndarray] = uniform_below) -> np.ndarray:
    """Bernoulli(e^{−r/(64a)}) for integers 0 ≤ r < a < 2^63 (CKS Algorithm 1, γ = r/(64a) < 1/64).

    A_k ~ Bernoulli(r/(64a·k)) is [U{0..64a−1} < r] ∧ [U{0..k−1} = 0], and U{0..64a−1} = H·a + L
    with H ~ U{0..63}, L ~ U{0..a−1} independent, so [U < r] = [H = 0] ∧ [L < r] (r < a): six bits
    decide most steps. Accept iff the first 0 is at an odd k. ``below`` draws L (object arrays of
    Python ints for a ≥ 2^63: :func:`_uniform_wide`).
    """
    k = np.ones(r.size, dtype=np.int64)
    res = np.zeros(r.size, dtype=bool)
    pend = np.arange(r.size)
    while pend.size:
        a_k = (_bits8(source, pend.size) & np.uint8(RES - 1)) == 0
        go = np.flatnonzero(a_k)
        a_k[go] = below(a[pend[go]], source) < r[pend[go]]
        kk = k[pend]
        multi = np.flatnonzero(a_k & (kk > 1))
        if multi.size:
            a_k[multi] = uniform_below(kk[multi], source) == 0
        stop = ~a_k
        res[pend[stop]] = (kk[stop] % 2) == 1
        k[pend[a_k]] += 1
        pend = pend[a_k]
    return res


def bernoulli_exp_ratio(num: np.ndarray, den: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) per entry, exactly, for int64 0 ≤ num < 2^56, 1 ≤ den < 2^56.

    64γ = J + R/den with J = ⌊64·num/den⌋ and R = 64·num − J·den (module doc).
    """
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    j = (num * RES) // den
    r = num * RES - j * den
    out = _table_bernoulli(j, source)
    idx = np.flatnonzero(out)
    out[idx] = _chain_int(r[idx], den[idx], source)
    return out


def _ratio_split(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(J, R) with 64·num = J·den + R, J = ⌊64·num/den⌋ ∈ [0, 63], 0 ≤ R < den, exactly, for int64
    0 ≤ num < den < 2^63 (where 64·num may exceed int64).

    J̃ = ⌊64·f(num)/f(den) − 2^-40⌋ (clipped at 0) is J or J − 1: the float quotient has relative
    error ≤ 3u (u = 2^-53), an absolute error < 2^-45 below 64. Then 64·num − J̃·den ∈ [0, 2·den) ⊂
    [0, 2^64) is computed exactly in uint64 arithmetic modulo 2^64, and one step fixes J̃ = J − 1.
    """
    un, ud = num.astype(np.uint64), den.astype(np.uint64)
    jf = np.floor(num.astype(float) * float(RES) / den.astype(float) - 2.0**-40)
    j = np.maximum(jf, 0.0).astype(np.uint64)
    r = (un << np.uint64(6)) - j * ud  # wraps modulo 2^64 to the exact value in [0, 2·den)
    up = r >= ud
    j[up] += np.uint64(1)
    r[up] -= ud[up]
    return j.astype(np.int64), r.astype(np.int64)


def _bernoulli_exp_below_one(num: np.ndarray, den: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) per entry, exactly, for int64 0 ≤ num < den < 2^63: the same
    decisions and random bits as :func:`bernoulli_exp_ratio` (which needs 64·num < 2^63), with
    (J, R) from :func:`_ratio_split`."""
    j, r = _ratio_split(num, den)
    out = _table_bernoulli(j, source)
    idx = np.flatnonzero(out)
    out[idx] = _chain_int(r[idx], den[idx], source)
    return out


def bernoulli_exp_filtered(g64: np.ndarray, err: np.ndarray, exact_gamma: Callable[[int], Fraction],
                           source: IntegerSource) -> np.ndarray:
    """Bernoulli(exp(−γ_i)) per entry, exactly, for γ_i ≥ 0 given as a float g64_i ≈ 64γ_i with a
    rigorous bound |g64_i − 64γ_i| ≤ err_i, and the exact rational ``exact_gamma(i)``.

    The float is a certified filter, never the decision on its own: J = ⌊g64⌋ is used only when
    [g64 − err, g64 + err] contains no integer (then J = ⌊64γ⌋ exactly), otherwise the entry is
    drawn by the exact scalar :func:`bernoulli_exp` (before any of its randomness is used). The
    chain's comparisons W < R/(64k), R = 64γ − J, are taken from the float only when W's known
    interval lies outside R's error interval; otherwise that very comparison is refined exactly
    against the exact rational (:class:`_LazyUniform`) and the rest of the chain runs exactly.
    """
    g64 = np.asarray(g64, dtype=float)
    err = np.asarray(err, dtype=float)
    if np.any(err < 0):
        raise DpoptInputError("`err` must hold error bounds >= 0 (NaN: undecidable, drawn exactly)")
    j = np.floor(np.where(np.isfinite(g64), g64, 0.0))
    frac = g64 - j  # exact: the fractional part of a double
    amb = ~np.isfinite(g64) | ~np.isfinite(err) | (g64 >= 2.0**52) | (frac <= err) | (1.0 - frac <= err)
    out = np.zeros(g64.size, dtype=bool)
    for i in np.flatnonzero(amb):
        out[i] = bool(bernoulli_exp(exact_gamma(int(i)), source))
    ok = np.flatnonzero(~amb)
    ji = j[ok].astype(np.int64)
    first = _table_bernoulli(ji, source)
    sel = ok[first]
    out[sel] = _chain_float(frac[sel], err[sel], ji[first], lambda i: exact_gamma(int(sel[i])), source)
    return out


def _chain_float(rf: np.ndarray, err: np.ndarray, j: np.ndarray, exact_gamma: Callable[[int], Fraction],
                 source: IntegerSource) -> np.ndarray:
    """CKS Algorithm 1 for e^{−R/64}, R ∈ (err, 1 − err) known to ±err (see
    :func:`bernoulli_exp_filtered`); W's 53 leading bits decide when certified, else exactly."""
    k = np.ones(rf.size, dtype=np.int64)
    res = np.zeros(rf.size, dtype=bool)
    pend = np.arange(rf.size)
    margin = 2.0**-50  # covers the roundings of the two threshold divisions (≤ 2^-53 each)
    while pend.size:
        kk = (RES * k[pend]).astype(float)
        lo = (rf[pend] - err[pend]) / kk * (1.0 - margin)
        hi = (rf[pend] + err[pend]) / kk * (1.0 + margin)
        w53 = random_words(source, pend.size) >> np.uint64(11)
        wf = w53.astype(float)  # exact: < 2^53
        yes = (wf + 1.0) * 2.0**-53 <= lo
        no = wf * 2.0**-53 >= hi
        for i in np.flatnonzero(~(yes | no)):
            e = pend[i]
            r = Fraction(RES) * exact_gamma(int(e)) - int(j[e])  # R exactly
            kk_e = int(k[e])
            if _LazyUniform(int(w53[i]), 53, source).below(_rational_bracket(r / (RES * kk_e))):
                kk_e += 1
                while bernoulli(r / (RES * kk_e), source):
                    kk_e += 1
            res[e] = kk_e % 2 == 1
        res[pend[no]] = (k[pend[no]] % 2) == 1
        k[pend[yes]] += 1
        pend = pend[yes]
    return res


def _geometric_e(n: int, source: IntegerSource) -> np.ndarray:
    """V with P(V ≥ v) = e^{−v}, by inversion against the exact table: V = #{j ≥ 1 : W < e^{−j}},
    W's 32 leading bits against ⌊e^{−j}·2^32⌋ (ties refined exactly)."""
    desc = _table32()[RES::RES]  # ⌊e^{−j}·2^32⌋, j = 1, 2, ... (decreasing, ends at 0)
    desc = desc[: int(np.argmax(desc == 0)) + 1]
    asc = desc[::-1]
    w = _bits32(source, n)
    pos = np.searchsorted(asc, w, side="right")
    v = (desc.size - pos).astype(np.int64)  # entries > w: W < e^{−j} for sure
    tie = (pos > 0) & (asc[np.maximum(pos - 1, 0)] == w)
    for i in np.flatnonzero(tie):
        lazy = _LazyUniform(int(w[i]), 32, source)
        jj = int(v[i]) + 1
        while lazy.below(_exp_bracket(Fraction(jj))):
            jj += 1
        v[i] = jj - 1
    return v


def geometric_exp(a: np.ndarray, b: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Y ≥ 0 with P(Y ≥ y) = exp(−y·b/a) per entry (CKS Algorithm 2 without the sign), exactly.

    ``a``, ``b`` in [1, 2^63) (int64). U ∈ {0..a−1} is accepted with probability
    e^{−U/a} (so P(U = u) ∝ e^{−u/a}), V ~ P(V ≥ v) = e^{−v}, and U + a·V has P(≥ x) = e^{−x/a};
    Y = ⌊(U + a·V)/b⌋ (:func:`_geometric_floor`).
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    u = np.zeros(a.size, dtype=np.int64)
    pend = np.flatnonzero(a > 1)
    while pend.size:
        ap = a[pend]
        uu = uniform_below(ap, source)
        ok = _bernoulli_exp_below_one(uu, ap, source)
        u[pend[ok]] = uu[ok]
        pend = pend[~ok]
    return _geometric_floor(u, a, b, _geometric_e(a.size, source))


def _geometric_floor(u: np.ndarray, a: np.ndarray, b: np.ndarray, v: np.ndarray) -> np.ndarray:
    """⌊(u + a·v)/b⌋ per entry, exactly, for int64 0 ≤ u < a < 2^63, 1 ≤ b < 2^63, v ≥ 0.

    Directly in int64 where u + a·v ≤ 2^63 − 1 (v ≤ vmax); else as q·v + ⌊(u + r·v)/b⌋ with
    a = q·b + r (0 ≤ r < b) where u + r·v and the result (< (q + 1)·v + a/b) stay in int64
    (checked in floats with a relative margin of 2^-20); else in Python integers
    (U + a·V ≥ 2^63 needs V ≥ 2^63/a: rare unless a is within a few bits of 2^63).
    """
    vmax = (_INT64_MAX - a) // a
    y = (u + a * np.minimum(v, vmax)) // b
    over = np.flatnonzero(v > vmax)
    if over.size:
        ao, bo, uo, vo = a[over], b[over], u[over], v[over]
        q, r = ao // bo, ao % bo
        vf = vo.astype(float)
        cap = 2.0**63 * (1 - 2.0**-20)  # (u + r·v)/b < a/b + v bounds the second term
        fits = (uo + r * vf < cap) & ((q.astype(float) + 1.0) * vf + ao / bo + 1 < cap)
        f = np.flatnonzero(fits)
        y[over[f]] = q[f] * vo[f] + (uo[f] + r[f] * vo[f]) // bo[f]
        over = over[~fits]
    for i in over:  # Python integers
        big = (int(u[i]) + int(a[i]) * int(v[i])) // int(b[i])
        if big > _INT64_MAX:  # pragma: no cover - P < e^{-2^63/scale}
            raise OverflowError("discrete Laplace draw beyond int64")
        y[i] = big
    return y


#: the wide path's range: numerators and denominators below 2^126 (two 64-bit words per uniform)
WIDE_LIMIT = 2**126


def _uniform_wide(bound: np.ndarray, source: IntegerSource) -> np.ndarray:
    """U{0..n−1} per entry for Python ints n in [1, 2^126) (object arrays): two words as one
    128-bit integer, masked to the bit length of n − 1, redrawn while ≥ n (acceptance > 1/2)."""
    n = np.asarray(bound, dtype=object)
    if n.size and (n == n[0]).all():
        mask = np.full(n.size, (1 << (int(n[0]) - 1).bit_length()) - 1, dtype=object)
    else:
        mask = np.array([(1 << (int(v) - 1).bit_length()) - 1 for v in n], dtype=object)
    out = np.zeros(n.size, dtype=object)
    pend = np.arange(n.size)
    while pend.size:
        w = random_words(source, 2 * pend.size).reshape(-1, 2).astype(object)
        x = ((w[:, 0] << 64) | w[:, 1]) & mask[pend]
        ok = x < n[pend]
        out[pend[ok]] = x[ok]
        pend = pend[~ok]
    return out


def _geometric_wide(a: int, b: int, n: int, source: IntegerSource) -> np.ndarray:
    """:func:`geometric_exp` for one scale a/b with Python ints 1 ≤ a, b < 2^126 (object arrays):
    U ~ U{0..a−1} accepted w.p. e^{−U/a} (64U = J·a + R exactly, the table for e^{−J/64}, the
    chain for e^{−R/(64a)}), V by inversion, Y = ⌊(U + a·V)/b⌋ (Python ints; int64 result)."""
    u = np.zeros(n, dtype=object)
    pend = np.arange(n)
    while pend.size and a > 1:
        av = np.full(pend.size, a, dtype=object)
        uu = _uniform_wide(av, source)
        j = (uu * RES) // a
        ok = _table_bernoulli(j.astype(np.int64), source)
        idx = np.flatnonzero(ok)
        ok[idx] = _chain_int(uu[idx] * RES - j[idx] * a, av[idx], source, _uniform_wide)
        u[pend[ok]] = uu[ok]
        pend = pend[~ok]
    y = (u + a * _geometric_e(n, source).astype(object)) // b
    if n and max(y) > _INT64_MAX:  # pragma: no cover - P < e^{-2^63·b/a}
        raise OverflowError("discrete Laplace draw beyond int64")
    return y.astype(np.int64)


def discrete_laplace_wide(a: int, b: int, n: int, source: IntegerSource) -> np.ndarray:
    """n draws of Z with P[Z = z] ∝ exp(−|z|·b/a) (int64), for one reduced scale a/b with Python
    ints 1 ≤ a, b < :data:`WIDE_LIMIT` (:func:`_geometric_wide`, the sign as in
    :func:`discrete_laplace_int`): the numerators ≥ 2^63 of a `user` release's large sensitivities."""
    out = np.zeros(n, dtype=np.int64)
    pend = np.arange(n)
    while pend.size:
        y = _geometric_wide(a, b, pend.size, source)
        neg = _bits1(source, pend.size)
        out[pend] = np.where(neg, -y, y)
        pend = pend[neg & (y == 0)]
    return out


def discrete_laplace_int(a: np.ndarray, b: np.ndarray, source: IntegerSource) -> np.ndarray:
    """Z with P[Z = z] ∝ exp(−|z|·b/a) per entry (CKS Algorithm 2), a, b as in :func:`geometric_exp`:
    Z = ±Y with a uniform sign, the pair (−, 0) rejected so that 0 is not counted twice."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    out = np.zeros(a.size, dtype=np.int64)
    pend = np.arange(a.size)
    while pend.size:
        y = geometric_exp(a[pend], b[pend], source)
        neg = _bits1(source, pend.size)
        out[pend] = np.where(neg, -y, y)
        pend = pend[neg & (y == 0)]
    return out
