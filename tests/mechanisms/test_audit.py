"""Statistical audit: every Laplace-based release passes the likelihood-ratio histogram test on
worst-case neighbours; deliberately under-noised variants fail it."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.mechanisms import akmv, array_averaging, grid_release, laplace_mean, levy, opt_worst_case, quantile
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
    # (the audit tests coordinates separately, so a joint 2ε release with ε-DP marginals would pass)
    res = audit(_sampler(grid_release, {}, COUNTS, eps=4 * EPS), D1, D2, EPS, rng=np.random.default_rng(13),
                samples=100_000, alpha=ALPHA)
    assert not res.passed


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
