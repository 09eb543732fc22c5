"""Laplace noise reduction: make an earlier Laplace draw less noisy, paying only the difference.

A query answered with noise of scale s_from (ε_from) may later be answered again at a larger
ε_to > ε_from. Drawn independently, the two answers cost ε_from + ε_to and, combined by inverse
variance, are worth a single answer at √(ε_from² + ε_to²) only. *Noise reduction* (Koufogiannis,
Han & Pappas 2016, "Gradual release of sensitive data under differential privacy", J. Privacy and
Confidentiality 7(2); Ligett, Neel, Roth, Waggoner & Wu 2017, "Accuracy first", NeurIPS) draws the
second noise Z_to **conditionally on the first** Z_from so that the pair has the law

    Z_to ~ L(s_to),   Z_from = Z_to + B·L'   with B ~ Bernoulli(1 − w), L' ~ L(s_from) independent,

i.e. the earlier answer is a randomised post-processing of the later one. The later answer then
costs ε_to in all (the earlier one adds nothing: its law given the later one does not depend on
the data), and its accuracy is that of one draw at ε_to. models/engine.md §2 states the privacy
argument for the engine's rounds.

The identity behind w (characteristic functions φ):

* continuous Laplace, scale b: φ_b(t) = 1/(1 + b²t²), and φ_{b_from} = φ_{b_to}·(w + (1 − w)·φ_{b_from})
  with w = (b_to/b_from)²;
* discrete Laplace on ℤ, P[Z = z] ∝ r^|z| with r = exp(−1/s): φ_r(t) = (1 − r)²/(1 − 2r cos t + r²),
  and φ_{r_from} = φ_{r_to}·(w + (1 − w)·φ_{r_from}) with w = (r_to/r_from)·((1 − r_from)/(1 − r_to))².

Sampling Z_to given Z_from = c (the forward direction, so that ε_to can be chosen after the earlier
answer is published): with probability P₀ = w·f_to(c)/f_from(c) the branch B = 0, Z_to = c; otherwise
Z_to has density ∝ f_to(a)·f_from(c − a), drawn by rejection from one of two proposals (:func:`_rejoin`):
*near*, f_to itself with acceptance exp(−|c − a|/s_from); *far*, the discrete Laplace of rate
γ = 1/s_to − 1/s_from with acceptance exp(−(|a| + |c − a| − |c|)/s_from) ≤ 1 (the target over this
proposal is ∝ exp(−(|a| + |c − a|)/s_from), at most exp(−|c|/s_from) by the triangle inequality,
attained on the segment between 0 and c). Their acceptance rates are tanh(1/(2s_to))·r_from^|c|·S(c)
and tanh(γ/2)·S(c) with the same S(c) = Σ_a r_to^|a| r_from^(|c−a|−|c|), so the sampler takes the far
one where tanh(γ/2) > tanh(1/(2s_to))·exp(−|c|/s_from): the near proposal alone needs about
exp(|c|/s_from) draws for a far-out c, the far one accepts at least 1/(1 + e^{−γ}) ≥ 1/2 as |c| grows. For the discrete law P₀ = (r_to/r_from)^{|c|+1}·(1 − r_from²)/(1 − r_to²), drawn
exactly as Bernoulli(exp(−(|c| + 1)γ)) × Bernoulli((1 − r_from²)/(1 − r_to²)), γ = 1/s_to − 1/s_from,
the second factor as P(G < m | G < n) for a geometric G with P(G ≥ k) = e^{−kδ} where 2/s_from = mδ
and 2/s_to = nδ (:func:`_keep_ratio`; its cost does not grow with the scales). Every coin is an exact Bernoulli(exp(−rational))
(:func:`dpopt.noise.exact.bernoulli_exp`), every proposal an exact discrete Laplace draw; so the
law is exact, as the rest of a real release.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._validation import DpoptInputError
from .discrete_laplace import discrete_laplace
from .exact import bernoulli_exp
from .sources import IntegerSource

__all__ = ["refine_discrete_laplace", "refine_laplace", "discrete_keep_probability"]


def _scales(scale_from: Any, scale_to: Any) -> tuple[Fraction, Fraction]:
    try:
        s_from, s_to = Fraction(scale_from), Fraction(scale_to)
    except (TypeError, ValueError, OverflowError):
        raise DpoptInputError(f"`scale_from` and `scale_to` must be positive rationals; got {scale_from!r}, "
                              f"{scale_to!r}") from None
    if not 0 < s_to <= s_from:
        raise DpoptInputError(f"`scale_to` must be in (0, scale_from] (noise is only ever reduced); got "
                              f"scale_from={s_from}, scale_to={s_to}")
    return s_from, s_to


def _geometric(delta: Fraction, source: IntegerSource) -> int:
    """G ≥ 0 with P(G ≥ k) = exp(−k·δ), δ = s/t rational > 0, exactly (CKS 2020 Algorithm 2's Y)."""
    t, s = delta.denominator, delta.numerator
    while True:
        u = source.randbelow(t)
        if bernoulli_exp(Fraction(u, t), source):
            break
    v = 0
    while bernoulli_exp(Fraction(1), source):
        v += 1
    return (u + t * v) // s


def _keep_ratio(x: Fraction, y: Fraction, source: IntegerSource) -> bool:
    """Bernoulli((1 − e^{−x})/(1 − e^{−y})) for rationals 0 < x ≤ y, exactly: with δ the largest
    rational dividing both (x = mδ, y = nδ) and G geometric with P(G ≥ k) = e^{−kδ}, it is
    P(G < m | G < n). G given G < n: for y ≤ 1 a uniform K on {0..n−1} accepted with probability
    e^{−Kδ} ≥ e^{−1}; else G itself, rejected while G ≥ n (acceptance 1 − e^{−y} > 0.63)."""
    delta = Fraction(math.gcd(x.numerator * y.denominator, y.numerator * x.denominator),
                     x.denominator * y.denominator)
    m, n = int(x / delta), int(y / delta)
    while True:
        if y <= 1:
            k = source.randbelow(n)
            if bernoulli_exp(k * delta, source):
                return k < m
        else:
            g = _geometric(delta, source)
            if g < n:
                return g < m


def refine_discrete_laplace(noise: Any, *, scale_from: Any, scale_to: Any, source: IntegerSource) -> np.ndarray:
    """Exact draws of Z_to given Z_from = ``noise`` (integers, one per entry) for the discrete Laplace
    P[Z = z] ∝ exp(−|z|/s) at scales ``scale_from`` ≥ ``scale_to`` (positive rationals, module doc).

    The result is distributed as discrete Laplace(``scale_to``) and ``noise`` given it as
    Z_to + Bernoulli(1 − w)·L(``scale_from``), whatever the values the noise was added to.
    """
    s_from, s_to = _scales(scale_from, scale_to)
    c = np.asarray(noise)
    if c.size and not np.issubdtype(c.dtype, np.integer) and c.dtype != object:
        raise DpoptInputError(f"`noise` must hold integers (an exact discrete draw); got dtype {c.dtype}")
    flat = [int(v) for v in c.ravel()]
    if s_to == s_from:
        return np.asarray(flat, dtype=c.dtype if c.size else np.int64).reshape(c.shape)
    gamma = 1 / s_to - 1 / s_from
    inv_from = 1 / s_from
    # the far proposal beats the near one where tanh(γ/2) > tanh(1/(2 s_to))·exp(−|c|/s_from) (module doc)
    g, t = math.tanh(float(gamma) / 2.0), math.tanh(0.5 / float(s_to))
    far_from = math.log(g) - math.log(t) if g > 0 and t > 0 else -math.inf  # beyond floats: always near
    out = []
    for ci in flat:
        if bernoulli_exp((abs(ci) + 1) * gamma, source) and _keep_ratio(2 * inv_from, 2 / s_to, source):
            out.append(ci)
            continue
        out.append(_rejoin(ci, s_to, gamma, inv_from, far=far_from > -abs(ci) * float(inv_from), source=source))
    big = any(abs(v) >= 2**62 for v in out)
    return np.asarray(out, dtype=object if big else np.int64).reshape(c.shape)


def _rejoin(c: int, s_to: Fraction, gamma: Fraction, inv_from: Fraction, *, far: bool, source: IntegerSource) -> int:
    """Z_to given Z_from = c on the branch B = 1: the law ∝ r_to^|a|·r_from^|c − a| on ℤ, by rejection
    from one of two exact proposals (the choice depends on c and the scales only, so the law is the
    same either way): *near*, L(s_to) with acceptance r_from^|c − a|; *far*, L(1/γ) with acceptance
    r_from^(|a| + |c − a| − |c|), which is 1 on the segment between 0 and c (module doc)."""
    while True:
        if far:
            a = discrete_laplace(1 / gamma, source)
            if bernoulli_exp((abs(a) + abs(c - a) - abs(c)) * inv_from, source):
                return a
        else:
            a = discrete_laplace(s_to, source)
            if bernoulli_exp(abs(c - a) * inv_from, source):
                return a


def discrete_keep_probability(c: int, *, scale_from: Any, scale_to: Any) -> float:
    """P(Z_to = c | Z_from = c) restricted to the branch B = 0: (r_to/r_from)^{|c|+1}·(1 − r_from²)/(1 − r_to²)
    (a float, for tests and diagnostics; the sampler never uses it)."""
    s_from, s_to = _scales(scale_from, scale_to)
    r_from, r_to = math.exp(-1 / float(s_from)), math.exp(-1 / float(s_to))
    return (r_to / r_from) ** (abs(int(c)) + 1) * (1 - r_from**2) / (1 - r_to**2)


def refine_laplace(noise: Any, *, scale_from: float, scale_to: float, rng: np.random.Generator) -> np.ndarray:
    """Continuous counterpart of :func:`refine_discrete_laplace` (numpy simulation, NOT for a real
    release): Z_to given Z_from = ``noise`` for Laplace scales b_from ≥ b_to; P₀ = (b_to/b_from)·
    exp(−|c|·(1/b_to − 1/b_from)), else rejection from Laplace(b_to) with acceptance exp(−|c − a|/b_from)."""
    b_from, b_to = float(scale_from), float(scale_to)
    if not (0 < b_to <= b_from < math.inf):
        raise DpoptInputError(f"`scale_to` must be in (0, scale_from]; got scale_from={scale_from!r}, "
                              f"scale_to={scale_to!r}")
    c = np.asarray(noise, dtype=float)
    if b_to == b_from:
        return c.copy()
    out = c.copy()
    keep = rng.random(c.shape) < (b_to / b_from) * np.exp(-np.abs(c) * (1 / b_to - 1 / b_from))
    pend = np.flatnonzero(~keep.ravel())
    flat, cf = out.ravel(), c.ravel()
    while pend.size:
        a = rng.laplace(0.0, b_to, pend.size)
        ok = rng.random(pend.size) < np.exp(-np.abs(cf[pend] - a) / b_from)
        flat[pend[ok]] = a[ok]
        pend = pend[~ok]
    return flat.reshape(c.shape)
