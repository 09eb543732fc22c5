"""A clamp histogram shows the users only where its kept bins hold half of them
(:func:`dpopt.privacy.user.place_bounds.shown_bins`, models/engine.md §2): a lone bin that clears its
threshold by its noise while most users are unseen sets no clamp."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt.privacy.user.place_bounds import (CLAMP_PHANTOM_RATE, CLAMP_SHOWN_SHARE, CLAMP_STEPS, USERS_LOWER_SDS,
                                             choose_clamp, choose_low_clamp, clamp_shown, shown_bins,
                                             users_lower_end)

U = 100.0


def _threshold(eps: float) -> float:
    return math.log(CLAMP_STEPS / CLAMP_PHANTOM_RATE) / eps


def _discrete_laplace(rng: np.random.Generator, eps: float, size) -> np.ndarray:
    """Z = G₁ − G₂ with G ~ Geometric(1 − e^{−ε}) − 1: P(Z = z) ∝ e^{−ε|z|} (the release's noise law)."""
    p = 1.0 - math.exp(-eps)
    return rng.geometric(p, size) - rng.geometric(p, size)


def test_users_lower_end_is_the_count_less_two_noise_sds():
    counts = np.array([0.0, 69.0, 0.0, 12.0, -3.0])
    eps = 0.15
    assert users_lower_end(counts, eps) == pytest.approx(81.0 - USERS_LOWER_SDS * math.sqrt(2 * 2) / eps)
    assert users_lower_end(np.array([5.0, 0.0]), 0.01) == 0.0  # never below 0
    assert users_lower_end(np.zeros(4), 1.0) == 0.0


def test_a_lone_bin_among_many_unseen_users_shows_nothing():
    """ε_B = 0.0375 (ε = 1's B): threshold ln(800)/0.0375 = 178 users. One bin at 220 of about 400
    users clears it; less two noise sds (75) it shows 36 % of them, so it sets no clamp (B = U, A = 0);
    with the users not given (a caller that does not measure them) the threshold alone reads it."""
    eps = 0.0375
    h = np.zeros(CLAMP_STEPS)
    h[3] = 220.0  # bin 3: B = U·4/16 at the quantile, raised to the floor min(U/2, its own step)
    assert h[3] >= _threshold(eps)
    assert choose_clamp(h, eps, U) == 25.0  # the threshold alone: every user above 25 clamped
    assert choose_clamp(h, eps, U, users=399.0) == U
    assert not clamp_shown(h, eps, 399.0) and clamp_shown(h, eps)
    assert np.all(shown_bins(h, eps, 399.0) == 0)
    low = np.zeros(CLAMP_STEPS)
    low[0] = 182.0  # the lower votes' bin 0: users whose 1st percentile lies in the top step
    assert choose_low_clamp(low, eps, U, U) == pytest.approx(87.5)
    assert choose_low_clamp(low, eps, U, U, users=395.0) == 0.0


def test_a_histogram_that_holds_half_of_the_users_reads_as_before():
    """Shown where the kept counts less two noise sds of their sum (√(2k)/ε over k kept bins) reach
    half of the users; the clamp is then the threshold rule's."""
    eps = 0.5
    h = np.zeros(CLAMP_STEPS)
    h[[7, 8, 9, 10]] = [30.0, 45.0, 31.0, 15.0]  # 121 users shown
    before = choose_clamp(h, eps, U)
    low = 121.0 - USERS_LOWER_SDS * math.sqrt(2 * 4) / eps
    assert before < U
    assert choose_clamp(h, eps, U, users=low / CLAMP_SHOWN_SHARE) == before  # exactly the share
    assert choose_clamp(h, eps, U, users=low / CLAMP_SHOWN_SHARE + 1.0) == U  # one user more: not shown
    assert choose_clamp(h, eps, U, users=0.0) == before  # no users counted: the threshold alone


@pytest.mark.parametrize(("true_bins", "old_least", "new_most"), [
    ({3: 60, 4: 90, 5: 100, 6: 80, 7: 50, 8: 20}, 0.03, 0.005),  # 400 users over six bins
    ({4: 100, 5: 150, 6: 150}, 0.10, 0.02),  # 400 users over three: B one or two steps below the top
])
def test_lone_bins_no_longer_clamp_most_users(true_bins, old_least, new_most):
    """Users' votes spread over a few bins at ε_B = 0.0375 (ε = 1's B; threshold 178): by its noise
    one bin clears the threshold alone in several histograms of a hundred, and the threshold alone
    then sets B at or below the median vote (every user above it clamped, the intervals not holding
    it). Read only where the kept counts' lower end holds half of the users' lower end (their record
    histogram at ε = 0.075): 3 in 1,000 draws over six bins, 13 in 1,000 over three (B then one or
    two steps of U/16 below the top users' votes), against 48 and 162 in 1,000."""
    rng = np.random.default_rng(20261205)
    eps, eps_users = 0.0375, 0.075
    true = np.zeros(CLAMP_STEPS)
    for b, n in true_bins.items():
        true[b] = n
    median_step = 1 + int(np.argmax(np.cumsum(true) >= 0.5 * true.sum()))  # bin i votes for U·(1 + i)/16
    draws = 4000
    noisy = true + _discrete_laplace(rng, eps, (draws, CLAMP_STEPS))
    users = true.sum() + _discrete_laplace(rng, eps_users, draws)
    old = np.array([choose_clamp(h, eps, U) for h in noisy])
    new = np.array([choose_clamp(h, eps, U, users=users_lower_end(np.array([n]), eps_users))
                    for h, n in zip(noisy, users)])
    cut = U * median_step / CLAMP_STEPS
    assert np.mean(old <= cut) > old_least  # the defect
    assert np.mean(new <= cut) <= new_most
    assert np.all((new == U) | (new == old))  # the rule only ever removes a clamp
