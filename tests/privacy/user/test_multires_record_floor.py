"""The multi-resolution release's record floor on c (dpopt.privacy.user.strategies.adaptive.coarse_record_floor):
post-processing of the DP histogram, checked against a brute-force pair-weighted median."""

import numpy as np
import pytest

from dpopt.privacy.user.strategies.adaptive import RECORD_FLOOR_FACTOR, coarse_record_floor
from dpopt.privacy.user.predict import ContributionHistogram


def brute_floor(grids, records, counts, cap):
    pairs = []  # one entry per (user, grid) pair, its user's median records per pair
    for i, g in enumerate(grids):
        for j, r in enumerate(records):
            pairs += [r] * int(round(counts[i, j] * g))
    pairs.sort()
    m50 = pairs[(len(pairs) - 1) // 2] if len(pairs) % 2 else pairs[len(pairs) // 2 - 1]
    cands = [c for c in (1, 2, 4, 8, 16, 32, 64, 128) if c <= cap] + [cap]
    ok = [c for c in sorted(set(cands)) if c >= RECORD_FLOOR_FACTOR * m50]
    return ok[0] if ok else max(cands)


@pytest.mark.parametrize("seed", range(6))
def test_floor_is_twice_the_pair_weighted_median(seed):
    rng = np.random.default_rng(seed)
    grids = np.array([1.0, 3.0, 6.0, 12.0])
    records = np.array([1.0, 2.0, 3.0, 6.0, 12.0])
    counts = rng.integers(0, 5, size=(4, 5)).astype(float)
    counts[rng.integers(0, 4), rng.integers(0, 5)] += 1
    h = ContributionHistogram(grids=grids, records=records, noisy=counts.astype(np.int64), counts=counts, epsilon=1.0)
    assert coarse_record_floor(h, 64) == brute_floor(grids, records, counts, 64)
    assert coarse_record_floor(h, 3) <= 3  # never above the public cap
