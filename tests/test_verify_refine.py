"""dpopt.verify never reports a grid value as the worst case when a finer point beats it."""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt import verify
from dpopt.verify import estimators as est


def _signed_gap_by_hand(x: float) -> float:
    # four one-sample users, keep {0, 0, U} (U = 1), drop x: Var_clip − Var (computed directly)
    kept = np.array([0.0, 0.0, 1.0])
    return kept.var() - np.array([0.0, 0.0, 1.0, x]).var()


def test_maximiser_between_levels_is_found():
    r = verify.worst_case_error(est.clipped_variance([1, 1, 1, 0]), [1, 1, 1, 1], 1.0,
                                target="variance", side="over")
    xs = np.linspace(0, 1, 100_001)
    dense = max(_signed_gap_by_hand(x) for x in xs[::100])
    assert r.value == pytest.approx(1 / 18, abs=1e-9)          # dropped value at U/3
    assert r.value >= dense - 1e-12
    assert r.grid_value == pytest.approx(0.0542535, abs=1e-6)   # the 5-level grid's answer
    assert r.between_levels and r.refined and not r.is_lower_bound


def test_grid_only_result_says_it_is_a_lower_bound():
    # the 5-level grid's value by hand: kept {0, 0, 1}, dropped 1/4
    r = verify.worst_case_error(est.clipped_variance([1, 1, 1, 0]), [1, 1, 1, 1], 1.0,
                                target="variance", side="over", refine=False,
                                formula=_signed_gap_by_hand(0.25))
    assert r.is_lower_bound and r.spacing == pytest.approx(0.25)
    assert "lower bound" in r.summary() and "agrees on the grid only" in r.summary()


def test_a_formula_a_finer_grid_breaks_does_not_agree():
    grid_answer = verify.worst_case_error(est.clipped_variance([1, 1, 1, 0]), [1, 1, 1, 1], 1.0,
                                          target="variance", side="over", refine=False).value
    r = verify.worst_case_error(est.clipped_variance([1, 1, 1, 0]), [1, 1, 1, 1], 1.0,
                                target="variance", side="over", formula=grid_answer)
    assert not r.agrees() and not r.respects()
    assert "BROKEN" in r.summary()


def test_signed_sides_of_the_variance_bias():
    # ERRATA E1: Var − Var_clip reaches U^2 R(N − R)/N^2 = 3/16 for N = 4, R = 3; the other side is
    # smaller (at most (N − R)/N · U^2/4 = 1/16, attained 1/18 as above)
    g, m = [1, 1, 1, 0], [1, 1, 1, 1]
    under = verify.worst_case_error(est.clipped_variance(g), m, 1.0, target="variance", side="under",
                                    formula=dpopt.variance_bias(g, m, 1.0))
    over = verify.worst_case_error(est.clipped_variance(g), m, 1.0, target="variance", side="over")
    both = verify.worst_case_error(est.clipped_variance(g), m, 1.0, target="variance")
    assert under.agrees() and under.value == pytest.approx(3 / 16)
    assert over.value < under.value <= 1 / 16 * 3 + 1e-12
    assert both.value == pytest.approx(max(under.value, over.value))


def test_signed_side_refused_for_vector_outputs():
    with pytest.raises(ValueError, match="`side`"):
        verify.worst_case_error(est.mean, [1], 1.0, dim=2, levels=2, side="over")
    with pytest.raises(ValueError, match="`side` must be"):
        verify.worst_case_error(est.mean, [1], 1.0, side="up")


def test_sensitivity_refines_between_levels():
    # f(D) = x1 * (1 - x1) + x2 for one-sample users: changing user 0 moves f by at most 1/4,
    # attained at x1 = 1/2, which a 4-level grid {0, 1/3, 2/3, 1} misses (2/9)
    f = lambda s, c: s[:, 0] * (1 - s[:, 0]) + s[:, 1]  # noqa: E731
    r = verify.sensitivity(f, [1, 1], 1.0, levels=4)
    assert r.grid_value == pytest.approx(1.0)  # user 1's change dominates here
    r0 = verify.sensitivity(lambda s, c: s[:, 0] * (1 - s[:, 0]), [1, 1], 1.0, levels=4, formula=0.25)
    assert r0.grid_value == pytest.approx(2 / 9) and r0.agrees() and r0.between_levels
    a, b = r0.dataset[0][0], r0.neighbour[0][0]
    assert abs(a * (1 - a) - b * (1 - b)) == pytest.approx(0.25)


def test_refinement_stays_in_the_simplex_for_vectors():
    r = verify.worst_case_error(est.annulus_clipped_mean([0.0], [0.5]), [2], 1.0, dim=2, levels=3)
    for x in r.dataset[0]:
        assert np.all(x >= -1e-12) and x.sum() <= 1 + 1e-9
    assert r.value == pytest.approx(0.5)  # every sample at l1 norm U loses U − b


def test_repr_is_one_line():
    r = verify.sensitivity(est.mean, [2, 1], 1.0, formula=2 / 3)
    assert "\n" not in repr(r) and "agrees" in repr(r)


def test_to_frame_lists_the_maximiser():
    r = verify.sensitivity(est.mean, [2, 1], 1.0, formula=2 / 3)
    df = r.to_frame()
    assert list(df.columns) == ["value", "neighbour"] and len(df) == 3
    moved = df.xs(r.user, level="user")
    assert (moved["value"] != moved["neighbour"]).any()
    d2 = verify.worst_case_error(est.mean, [1], 1.0, dim=2, levels=2).to_frame()
    assert list(d2.columns) == ["value_0", "value_1"]
