"""CLIP-USER (seed 002 Algorithm 1, ERRATA E1/E2): incremental vs naive reference, invariants."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError, Occupancy
from dpopt.calculus import grid_error_terms, grid_errors
from dpopt.solve import Status
from dpopt.suppression import clip_user, heavy_hitter_occupancy
from dpopt.suppression._kernel import least_grid_errors, error_array, error_scalar

from ._reference import clip_user_naive, random_tiny

EXACT_RTOL = 1e-12


def test_error_kernels_agree_with_calculus(rng):
    N = rng.integers(1, 400, size=500)
    R = np.minimum(N, rng.integers(1, 400, size=500))
    G = np.maximum(1, (R * rng.random(500)).astype(int))
    for split in ("equal", "optimal"):
        ref = grid_error_terms(N, R, G, 65.0, 0.3, split=split).error
        np.testing.assert_allclose(error_array(N, R, G, 65.0, 0.3, split), ref, rtol=EXACT_RTOL)
        scal = [error_scalar(int(a), int(b), int(c), 65.0, 0.3, split == "optimal") for a, b, c in zip(N, R, G)]
        np.testing.assert_allclose(scal, ref, rtol=1e-10)


@pytest.mark.parametrize("seed", range(12))
def test_incremental_equals_naive_random(seed):
    rng = np.random.default_rng(seed)
    occ = random_tiny(rng, users=int(rng.integers(3, 9)), grids=int(rng.integers(2, 5)), max_count=9)
    U, eps = 10.0, float(rng.choice([0.2, 0.5, 1.0, 3.0]))
    base = grid_errors(occ, U, eps)
    floor = float(least_grid_errors(occ, U, eps).max())  # below it no plan exists: ValueError
    for E in (None, float(base.max()) * 1.3, max(float(base.min()), floor)):
        for skip in (False, True):
            plan = clip_user(occ, U, eps, error_bound=E, skip_min_error_grid=skip)
            K, pairs, E_used = clip_user_naive(occ, U, eps, error_bound=E, skip_min_error_grid=skip)
            assert plan.degradation == K
            assert plan.suppressed == pairs
            assert plan.error_bound == pytest.approx(E_used, rel=EXACT_RTOL)


def test_incremental_equals_naive_optimal_split():
    rng = np.random.default_rng(42)
    for _ in range(4):
        occ = random_tiny(rng, users=7, grids=3, max_count=9)
        plan = clip_user(occ, 10.0, 0.5, split="optimal")
        K, pairs, _ = clip_user_naive(occ, 10.0, 0.5, split="optimal")
        assert (plan.degradation, plan.suppressed) == (K, pairs)


@pytest.mark.parametrize("gamma", [3, 9])
def test_incremental_equals_naive_synthetic(gamma):
    occ = heavy_hitter_occupancy(np.random.default_rng(gamma), n_grids=5, q=0.1, gamma=gamma)
    for eps in (0.1, 1.0):
        plan = clip_user(occ, 65, eps, skip_min_error_grid=True)
        K, pairs, _ = clip_user_naive(occ, 65, eps, skip_min_error_grid=True)
        assert (plan.degradation, plan.suppressed) == (K, pairs)


def test_greedy_keeps_error_bound_and_lowers_k():
    occ = heavy_hitter_occupancy(np.random.default_rng(7), n_grids=8, gamma=6)
    for eps in (0.1, 0.5, 1.0):
        plan = clip_user(occ, 65, eps)
        assert plan.feasible  # Algorithm 1 keeps max_g E_g <= E throughout
        assert plan.degradation <= occ.degradation
        assert plan.status is Status.HEURISTIC and not plan.is_optimal  # a heuristic: not certified
        # the returned K is recomputed from the suppressed pairs
        kept = occ.retained_matrix(list(plan.suppressed))
        assert np.diff(kept.indptr).max() == plan.degradation


def test_halts_immediately_when_bound_is_tight():
    # two grids, user 0 in both. BASELINE: E_g = 2(3/4 + 1/4) = 2 (U = ε = 1); suppressing user 0
    # leaves one sample: 3/4 + 1/4 + 2·1 = 3 > E = 2, so CLIP-USER halts at once
    occ = Occupancy.from_dense([[3, 3], [1, 0], [0, 1]])
    plan = clip_user(occ, 1.0, 1.0)
    assert plan.error_bound == pytest.approx(2.0)
    assert plan.degradation == 2 and not plan.suppressed
    assert plan.info["halt_reason"] == "error_bound"
    # a bound below what any plan reaches is refused, not silently violated
    with pytest.raises(ValueError, match=r"`error_bound` must be at least 2, .*; got 1e-06"):
        clip_user(occ, 1.0, 1.0, error_bound=1e-6)


def test_paper_argmin_not_argmax():
    """ERRATA E2: the grid of smallest post-suppression error is chosen."""
    # user 0 occupies grids 0 and 1; suppressing it in grid 1 (many other samples) costs less bias
    occ = Occupancy.from_dense([[2, 2], [2, 0], [0, 30]])
    errs = [grid_errors(occ, 1.0, 1.0, suppressed=[(0, g)])[g] for g in (0, 1)]
    assert errs[0] != errs[1]  # the instance discriminates arg min from arg max
    # E between the two post-suppression errors: arg max (eq. (14) as printed) would halt at once,
    # arg min suppresses user 0 in the cheaper grid; in stage 2 its other grid costs errs[0] > E
    plan = clip_user(occ, 1.0, 1.0, error_bound=0.5 * (errs[0] + errs[1]))
    assert plan.suppressed == {(0, int(np.argmin(errs)))}
    assert plan.degradation == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [(dict(bound=-1.0), "bound"), (dict(epsilon=0.0), "epsilon"), (dict(error_bound=-2.0), "error_bound"),
     (dict(error_bound=0.0), "error_bound"), (dict(error_bound="x"), "error_bound"),
     (dict(error_bound=np.nan), "error_bound"), (dict(split="best"), "split")],
)
def test_bad_input(kwargs, match):
    occ = Occupancy.from_dense([[1, 2], [3, 0]])
    args = dict(bound=1.0, epsilon=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        clip_user(occ, args.pop("bound"), args.pop("epsilon"), **args)


def test_bad_occupancy_type():
    with pytest.raises(DpoptInputError, match="occ"):
        clip_user([[1, 2]], 1.0, 1.0)


def test_infinite_error_bound_is_refused_not_a_licence_to_suppress_everything():
    """E = inf is refused: it would make every suppression feasible (every grid withheld)."""
    import dpopt

    occ = dpopt.Occupancy.from_dense([[3, 1], [1, 2]])
    for fn in (dpopt.clip_user, dpopt.solve_suppression):
        with pytest.raises(dpopt.DpoptInputError, match="`error_bound` must be a positive finite number"):
            fn(occ, 1.0, 1.0, error_bound=float("inf"))
