"""The audit tests vector releases jointly and searches neighbours itself: a release
giving the full ε to both mean and variance (2ε in truth) and an under-noised Laplace audited on a
pair that is not its worst must both fail; correct mechanisms pass the searched family."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.mechanisms import grid_release, laplace_mean
from dpopt.mechanisms.audit import audit, neighbour_family, under_noised_laplace

U = 10.0
EPS = 1.0
ALPHA = 1e-3
COUNTS = np.array([3, 1, 2])
D1 = np.zeros(6)
D2 = np.where(np.arange(6) < 3, U, 0.0)  # the worst pair of the mean: user 0 (m* = 3) from 0 to U
D_WEAK = np.where(np.arange(6) == 3, U, 0.0)  # user 1 (one sample) from 0 to U: a third of the shift


def _sampler(mech, counts=COUNTS, eps=EPS, **kw):
    return lambda data, runs, rng: mech(data, counts, U, eps, rng=rng, runs=runs, **kw).values


def test_full_epsilon_to_mean_and_variance_fails_jointly():
    """Regression: each coordinate gets the full ε (the pair of Laplace noises of a 2ε release):
    every marginal is ε-DP, the joint release is not; coordinate-wise testing passed it."""
    res = audit(_sampler(grid_release, eps=2 * EPS), D1, D2, EPS, rng=np.random.default_rng(31),
                samples=100_000, alpha=ALPHA)
    assert not res.passed, res
    assert res.worst_ratio > np.exp(EPS)


def test_half_scale_laplace_on_a_weak_pair_fails_by_search():
    """Regression: half-scale Laplace (2ε-DP) audited on a pair moving only the one-sample user
    (loss 2ε/3 < ε) passed; with counts and bound the audit finds user 0's pair itself."""
    broken = _sampler(under_noised_laplace(0.5))
    weak_only = audit(broken, D1, D_WEAK, EPS, rng=np.random.default_rng(32), samples=100_000, alpha=ALPHA)
    assert weak_only.passed  # the caller's pair alone cannot show it: why the search is needed
    res = audit(broken, D1, D_WEAK, EPS, rng=np.random.default_rng(33), samples=100_000, alpha=ALPHA,
                counts=COUNTS, bound=U)
    assert not res.passed, res
    assert res.pairs > 10 and res.worst_pair.startswith("user 0")


@pytest.mark.parametrize(
    "mech,kw",
    [(laplace_mean, {}), (grid_release, {}), (grid_release, {"retained": np.array([1, 1, 2])}),
     (grid_release, {"mean_share": 0.3})],
)
def test_correct_mechanisms_pass_the_searched_family(mech, kw):
    res = audit(_sampler(mech, **kw), D1, None, EPS, rng=np.random.default_rng(34), samples=60_000,
                alpha=ALPHA, counts=COUNTS, bound=U)
    assert res.passed, res
    assert res.pairs == 4 * COUNTS.size + 4


def test_neighbour_family_pairs_differ_in_one_user_only():
    rng = np.random.default_rng(0)
    fam = neighbour_family(np.arange(6.0), COUNTS, U, random_pairs=5, rng=rng)
    starts = np.concatenate(([0], np.cumsum(COUNTS)[:-1]))
    owner = np.repeat(np.arange(COUNTS.size), COUNTS)
    assert len(fam) == 4 * 3 + 5
    for name, a, b in fam:
        changed = np.unique(owner[a != b])
        assert changed.size == 1, name
        assert np.all((a >= 0) & (a <= U) & (b >= 0) & (b <= U))
    assert starts.tolist() == [0, 3, 4]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"counts": COUNTS}, "`counts` and `bound` must be given together"),
        ({"counts": [3, 1], "bound": U}, "`dataset` must be a flat array"),
        ({"counts": COUNTS, "bound": -1.0}, "`bound`"),
        ({"joint_bins": 1}, "`joint_bins`"),
        ({"alpha": float("nan")}, "`alpha`"),
    ],
)
def test_audit_search_bad_input(kwargs, match):
    with pytest.raises(DpoptInputError, match=match):
        audit(_sampler(laplace_mean), D1, D2, EPS, rng=np.random.default_rng(0), samples=100, **kwargs)


def test_audit_needs_a_pair():
    with pytest.raises(DpoptInputError, match="`neighbour` must be given"):
        audit(_sampler(laplace_mean), D1, None, EPS, rng=np.random.default_rng(0), samples=100)
    with pytest.raises(DpoptInputError, match="`sampler` must be callable"):
        audit("laplace", D1, D2, EPS, rng=np.random.default_rng(0), samples=100)
