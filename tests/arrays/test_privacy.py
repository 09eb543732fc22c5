"""Sensitivity of Array-Averaging on the groupings of seed 003, by brute force (dpopt.verify).

The groupings are functions of the public counts only (``best_fit(counts, m)``, ``wrap_around(counts,
m)`` take no sample values), so user-level neighbours (same counts, one user's samples replaced) are
packed identically and only the arrays holding that user's kept samples change:

* BestFit: the user sits in one array k with fill n_k, its c ≤ n_k slots move the array mean by at
  most U·c/n_k ≤ U, so the mean of the K^BF array means moves by at most U/K^BF;
* WrapAround: the user's c ≤ m slots lie in at most two full arrays of length m, so the change is at
  most U·c/(m·K^WA) ≤ U/K^WA — the paper's factor 2 is not needed (notes-003 §9.7).

The same holds with the user-mean substitution of §IV-A (every slot holds S̄_ℓ ∈ [0, U]).
Also: eq. (15) models *full* arrays. For BestFit with partially filled arrays the worst-case clipping
bias can exceed Lemma V.1's U(1 − Γ_m/M), and for WrapAround with a discarded tail the noise U/K^WA
exceeds U·m/Γ_m; the known answers below pin both down.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt import verify
from dpopt.arrays import array_averaging_error, best_fit, wrap_around

from ..conftest import EXACT_ATOL, EXACT_RTOL

#: largest number of samples per brute-force instance (levels**N datasets)
MAX_SAMPLES = 10


def aa_estimator(grouping, counts, *, substitute: bool = False):
    """Batched Array-Averaging (mean of array means) for a grouping built from the counts alone.

    The estimator is linear in the samples; its weights are read off unit vectors (user ℓ's samples
    are the consecutive block of ``verify``'s layout).
    """
    counts = np.asarray(counts)
    users = np.repeat(np.arange(counts.size), counts)
    N = users.size
    weights = np.array(
        [grouping.array_means(np.eye(N)[i], users, substitute_user_mean=substitute).mean() for i in range(N)]
    )

    def f(samples: np.ndarray, _counts: np.ndarray) -> np.ndarray:
        return samples @ weights

    return f


def small_instances(rng, n):
    out = []
    while len(out) < n:
        L = int(rng.integers(1, 6))
        counts = rng.integers(1, 5, size=L)
        if counts.sum() <= MAX_SAMPLES:
            out.append(counts)
    return out


@pytest.mark.parametrize("substitute", [False, True])
def test_array_averaging_sensitivity_is_u_over_k(rng, substitute):
    U = 3.0
    attained_bf = attained_wa = split_wa = 0
    for counts in small_instances(rng, 30):
        for m in range(1, int(counts.max()) + 1):
            bf = best_fit(counts, m)
            r = verify.sensitivity(aa_estimator(bf, counts, substitute=substitute), counts, U, levels=2)
            # hand formula: the user alone in the least-filled array relative to its share
            share = max(min(int(c), m) / bf.fills[k] for c, k in zip(counts, bf.user_array))
            assert math.isclose(r.value, U * share / bf.num_arrays, rel_tol=EXACT_RTOL, abs_tol=EXACT_ATOL)
            assert r.value <= U / bf.num_arrays * (1 + EXACT_RTOL)
            attained_bf += math.isclose(r.value, U / bf.num_arrays, rel_tol=EXACT_RTOL)
            wa = wrap_around(counts, m, order=rng.permutation(counts.size))
            if wa.num_arrays == 0:
                continue
            r = verify.sensitivity(aa_estimator(wa, counts, substitute=substitute), counts, U, levels=2)
            assert r.value <= U / wa.num_arrays * (1 + EXACT_RTOL)  # factor 1, not 2
            attained_wa += math.isclose(r.value, U / wa.num_arrays, rel_tol=EXACT_RTOL)
            split_wa += int(wa.arrays_per_user.max() == 2)
    assert attained_bf >= 10 and attained_wa >= 10 and split_wa >= 5


def test_wrap_around_known_answers():
    """Hand-computed WrapAround sensitivities (U = 1).

    counts [3, 3], m = 2: each user keeps 2 samples, stream u0 u0 | u1 u1, K = 2: a user moves one
    array mean by U, the released mean by U/2 = U/K. counts [2, 2, 2], m = 3: stream u0 u0 u1 | u1 u2 u2,
    K = 2; user 1 straddles both arrays and moves each by U/3, the released mean by U/3 < U/K.
    """
    counts = np.array([3, 3])
    wa = wrap_around(counts, 2)
    assert wa.num_arrays == 2 and wa.discarded == 0  # Γ = 4
    r = verify.sensitivity(aa_estimator(wa, counts), counts, 1.0, levels=2)
    assert math.isclose(r.value, 0.5)
    # m = 3 with counts [2, 2, 2]: u0 u0 u1 | u1 u2 u2 — user 1 straddles, K = 2, Δ = U·2/(3·2) = U/3
    counts = np.array([2, 2, 2])
    wa = wrap_around(counts, 3)
    assert wa.num_arrays == 2 and wa.arrays_per_user[1] == 2
    r = verify.sensitivity(aa_estimator(wa, counts), counts, 1.0, levels=2)
    assert math.isclose(r.value, 1 / 3)


def test_eq15_models_full_arrays_only():
    """Known answers where the actual grouping departs from the full-array model of eq. (15)."""
    U = 6.0
    # BestFit, counts [2, 1], m = 2: arrays {u0, u0} and {u1} (fill 1). f_m = (S1 + S2)/4 + S3/2,
    # f = (S1 + S2 + S3)/3: worst bias = U·(2·(1/3 − 1/4)) = U/6, yet Γ_m = M gives U(1 − Γ_m/M) = 0.
    counts = np.array([2, 1])
    bf = best_fit(counts, 2)
    np.testing.assert_array_equal(bf.fills, [2, 1])
    r = verify.worst_case_error(aa_estimator(bf, counts), counts, U, levels=2)
    assert math.isclose(r.value, U / 6, rel_tol=EXACT_RTOL)
    assert math.isclose(array_averaging_error(counts, U, 1e12, 2), 0.0, abs_tol=1e-9)
    # WrapAround, counts [3, 1], m = 2: Γ = 3, K^WA = 1, noise scale U/K = U > U·m/Γ_m = 2U/3
    wa = wrap_around([3, 1], 2)
    assert wa.num_arrays == 1 and wa.discarded == 1
    r = verify.sensitivity(aa_estimator(wa, [3, 1]), [3, 1], U, levels=2)
    assert math.isclose(r.value, U) and U > U * 2 / 3
