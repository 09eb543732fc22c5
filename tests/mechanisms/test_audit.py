"""Statistical audit: every Laplace-based release passes the likelihood-ratio histogram test on
worst-case neighbours; deliberately under-noised variants fail it."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.mechanisms import (
    akmv,
    array_averaging,
    grid_release,
    laplace_mean,
    levy,
    opt_worst_case,
    quantile,
    smith_quantile,
)
from dpopt.mechanisms.audit import audit, under_noised_laplace

U = 10.0
EPS = 1.0
#: family-wise false-positive rate of each audit
ALPHA = 1e-3
COUNTS = np.array([3, 1, 2])
D1 = np.zeros(6)
D2 = np.where(np.arange(6) < 3, U, 0.0)  # user 1 (m* = 3) moves all its samples from 0 to U
AA_COUNTS = np.array([3, 2, 2, 1, 1, 1])
AA1 = np.zeros(10)
AA2 = np.where(np.arange(10) < 3, U, 0.0)
# WrapAround with m = 3: stream u1 u1 u1 | u2 u2 u3 | u3 u4 u5 | (u6 dropped), so user 3 (samples
# 5, 6) is split over arrays 2 and 3; its neighbour moves both of them (φ = 2 is needed)
WA_KW = {"length": 3, "grouping": "wrap_around"}
WA2 = np.where((np.arange(10) >= 5) & (np.arange(10) < 7), U, 0.0)

CASES = {
    "Laplace": (laplace_mean, {}, COUNTS, D1, D2),
    "OPT-worst-case": (opt_worst_case, {}, COUNTS, D1, D2),
    "AKMV": (akmv, {}, COUNTS, D1, D2),
    "BASELINE": (grid_release, {}, COUNTS, D1, D2),
    "CLIP": (grid_release, {"retained": np.array([1, 1, 2])}, COUNTS, D1, D2),
    "AA-BestFit": (array_averaging, {"length": 2}, AA_COUNTS, AA1, AA2),
    "AA-WrapAround": (array_averaging, {"length": 2, "grouping": "wrap_around"}, AA_COUNTS, AA1, AA2),
    "Levy-BestFit": (levy, {"length": 2}, AA_COUNTS, AA1, AA2),
    "Quantile-BestFit": (quantile, {"length": 2}, AA_COUNTS, AA1, AA2),
    "EpsDependentQuantile-BestFit": (quantile, {"length": 2, "variant": "eps_dependent"}, AA_COUNTS, AA1, AA2),
    "AA-WrapAround-split": (array_averaging, WA_KW, AA_COUNTS, AA1, WA2),
    "Levy-WrapAround-split": (levy, WA_KW, AA_COUNTS, AA1, WA2),
    "Quantile-WrapAround-split": (quantile, WA_KW, AA_COUNTS, AA1, WA2),
}


def _sampler(mech, kw, counts, eps=EPS):
    return lambda data, runs, rng: mech(data, counts, U, eps, rng=rng, runs=runs, **kw).values


@pytest.mark.parametrize("name", list(CASES))
def test_mechanism_passes_audit(name):
    mech, kw, counts, d1, d2 = CASES[name]
    res = audit(_sampler(mech, kw, counts), d1, d2, EPS, rng=np.random.default_rng(11), samples=100_000,
                alpha=ALPHA)
    assert res.passed, res


def test_under_noised_laplace_fails_audit():
    broken = under_noised_laplace(0.5)  # only 2ε-DP
    res = audit(_sampler(broken, {}, COUNTS), D1, D2, EPS, rng=np.random.default_rng(12), samples=100_000,
                alpha=ALPHA)
    assert not res.passed
    assert res.worst_ratio > np.exp(EPS)


def test_under_noised_grid_release_fails_audit():
    # claim ε but add the noise of a 4ε release: each of the two coordinates is then only 2ε-DP
    # (a joint 2ε release with ε-DP marginals fails too: test_audit_search.py)
    res = audit(_sampler(grid_release, {}, COUNTS, eps=4 * EPS), D1, D2, EPS, rng=np.random.default_rng(13),
                samples=100_000, alpha=ALPHA)
    assert not res.passed


# Smith's exponential-mechanism quantile (the private step of AKMV and Quantile): one value moves
# from the bottom to the top of the range, so the rank of every point in between changes by one
Q1 = np.linspace(1.0, 9.0, 9)
Q2 = np.concatenate(([9.5], Q1[1:]))


def _quantile_sampler(sensitivity):
    return lambda data, runs, rng: smith_quantile(data, 4, EPS, lower=0.0, upper=U, sensitivity=sensitivity,
                                                  rng=rng, runs=runs)


def test_smith_quantile_passes_audit():
    res = audit(_quantile_sampler(1.0), Q1, Q2, EPS, rng=np.random.default_rng(14), samples=100_000, alpha=ALPHA)
    assert res.passed, res


def test_under_noised_smith_quantile_fails_audit():
    # rank-utility sensitivity understated as 1/4: the selection is then only 4ε-DP
    res = audit(_quantile_sampler(0.25), Q1, Q2, EPS, rng=np.random.default_rng(15), samples=100_000,
                alpha=ALPHA)
    assert not res.passed
    assert res.worst_ratio > np.exp(EPS)


def _clipped_wrap_sampler(influence):
    """Step 4 of Levy / step 3 of Quantile on the split-user pair with the interval [0.4U, 0.6U] fixed."""
    from dpopt.mechanisms.array_averaging import array_means, pack
    from dpopt.mechanisms.levy import clipped_array_release

    p = pack(AA_COUNTS, 3, "wrap_around")

    def sampler(data, runs, rng):
        means = np.repeat(array_means(data, AA_COUNTS, p), runs, axis=0)
        lo, hi = np.full(runs, 0.4 * U), np.full(runs, 0.6 * U)
        return clipped_array_release(means, lo, hi, EPS, bound=U, influence=influence, rng=rng)[0]

    return sampler


def test_wrap_around_clipped_release_needs_phi_two():
    # others at U/2; the split user 3 goes from 0 to U: arrays 2 and 3 go from U/3 to 2U/3, so both
    # clipped means move by b − a. φ = 2 passes, φ = 1 is only 2ε-DP
    split = (np.arange(10) >= 5) & (np.arange(10) < 7)
    low, high = np.where(split, 0.0, U / 2), np.where(split, U, U / 2)
    ok = audit(_clipped_wrap_sampler(2), low, high, EPS, rng=np.random.default_rng(16), samples=100_000,
               alpha=ALPHA)
    assert ok.passed, ok
    bad = audit(_clipped_wrap_sampler(1), low, high, EPS, rng=np.random.default_rng(17), samples=100_000,
                alpha=ALPHA)
    assert not bad.passed


def test_audit_bad_input():
    s = _sampler(laplace_mean, {}, COUNTS)
    with pytest.raises(DpoptInputError, match="`alpha`"):
        audit(s, D1, D2, EPS, rng=np.random.default_rng(0), alpha=1.5)
    with pytest.raises(DpoptInputError, match="`bins`"):
        audit(s, D1, D2, EPS, rng=np.random.default_rng(0), bins=1)
    with pytest.raises(DpoptInputError, match="`epsilon`"):
        audit(s, D1, D2, 0.0, rng=np.random.default_rng(0))


def test_false_positive_rate_is_controlled():
    """Exact ε-DP Laplace on boundary neighbours (likelihood ratio exactly e^ε in the tails): with
    α = 0.1 per audit, 20 audits fail at most a handful of times (Bonferroni makes it conservative)."""
    s = _sampler(laplace_mean, {}, COUNTS)
    rng = np.random.default_rng(21)
    fails = sum(not audit(s, D1, D2, EPS, rng=rng, samples=20_000, alpha=0.1).passed for _ in range(20))
    assert fails <= 6  # P[Bin(20, 0.1) > 6] < 0.3 %
