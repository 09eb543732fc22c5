"""dpopt.verify on problems whose answers are known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import verify
from dpopt.verify import estimators as est


def test_value_grid_contains_ends():
    g = verify.value_grid(65.0, levels=5)
    assert g[0] == 0 and g[-1] == 65 and len(g) == 5
    g2 = verify.value_grid(1.0, levels=3, dim=2)
    assert len(g2) == 6 and np.all(g2.sum(1) <= 1 + 1e-12)
    assert any(np.allclose(p, [1, 0]) for p in g2) and any(np.allclose(p, [0, 1]) for p in g2)


def test_mean_sensitivity_by_hand():
    # two users with 2 and 1 samples in [0, 1]: user 1 moves the mean by 2/3
    r = verify.sensitivity(est.mean, [2, 1], 1.0, formula=2 / 3)
    assert r.agrees() and r.user == 0
    assert abs(np.mean(np.concatenate(r.dataset)) - np.mean(np.concatenate(r.neighbour))) == pytest.approx(2 / 3)
    for u in range(2):
        if u != r.user:
            np.testing.assert_array_equal(r.dataset[u], r.neighbour[u])


def test_worst_case_error_by_hand():
    # drop user 2's only sample from 3 samples: worst mean bias is U/3
    r = verify.worst_case_error(est.clipped_mean([2, 0]), [2, 1], 3.0, formula=1.0)
    assert r.agrees() and r.respects()
    kept, dropped = r.dataset
    # the maximiser keeps the low values and drops a high one (or the reverse)
    assert abs(kept.mean() - np.concatenate(r.dataset).mean()) == pytest.approx(1.0)


def test_batched_wrapper_matches_vectorised():
    slow = verify.batched(lambda users: np.concatenate(users).var())
    a = verify.sensitivity(slow, [2, 1], 1.0, levels=3)
    b = verify.sensitivity(est.variance, [2, 1], 1.0, levels=3)
    assert a.value == pytest.approx(b.value)


def test_vector_outputs_use_l1():
    # d = 2 mean of one user with one sample: U·e1 vs U·e2 differ by 2U in l1
    r = verify.sensitivity(est.mean, [1], 1.0, dim=2, levels=2)
    assert r.value == pytest.approx(2.0)


def test_too_many_datasets_is_refused():
    with pytest.raises(ValueError, match="exceeds `max_datasets`"):
        verify.sensitivity(est.mean, [10, 10], 1.0, levels=5)


def test_formula_required_for_agrees():
    r = verify.sensitivity(est.mean, [1, 1], 1.0, levels=2)
    with pytest.raises(ValueError):
        r.agrees()
