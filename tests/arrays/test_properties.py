"""Hypothesis property tests of the array-length lemmas (seed 003, Sections III and V)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.arrays import (
    array_averaging_error,
    best_fit,
    exact_length_path,
    gain,
    max_gain,
    median_length,
    optimal_array_length,
    surrogate_length,
    surrogate_objective,
    wrap_around,
)

counts_st = st.lists(st.integers(1, 300), min_size=1, max_size=40).map(lambda v: np.array(v, dtype=np.int64))
eps_st = st.floats(1e-3, 10.0, allow_nan=False, allow_infinity=False)
bound_st = st.floats(0.1, 100.0, allow_nan=False, allow_infinity=False)
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


@SETTINGS
@given(counts=counts_st, data=st.data())
def test_gain_bounds(counts, data):
    """Lemma III.1 / eq. (5): 1 ≤ G(m) ≤ G_max for m ≤ m^*; Lemma III.2 at the median."""
    m = data.draw(st.integers(1, int(counts.max())))
    g = gain(counts, m)
    assert 1 - 1e-12 <= g <= max_gain(counts) * (1 + 1e-12)
    assert gain(counts, median_length(counts)) >= max_gain(counts) / 2 - 1e-12


@SETTINGS
@given(counts=counts_st, bound=bound_st, e1=eps_st, e2=eps_st)
def test_minimiser_monotone_in_epsilon(counts, bound, e1, e2):
    """Lemma V.3: m_UB(ε) is non-decreasing; Lemma V.2: it is one of the counts."""
    lo, hi = sorted((e1, e2))
    a, b = exact_length_path(counts, bound, [lo, hi])
    assert a <= b
    assert a in set(counts.tolist()) and b in set(counts.tolist())


@SETTINGS
@given(counts=counts_st, bound=bound_st, eps=eps_st)
def test_exact_beats_every_other_choice(counts, bound, eps):
    """E_ε(m_UB) ≤ E_ε(m) for the surrogate, heuristic and median lengths and every integer m."""
    best = optimal_array_length(counts, bound, eps)
    for method in ("surrogate", "heuristic", "median"):
        assert optimal_array_length(counts, bound, eps, method=method).excess >= -1e-12 * bound
    m = np.arange(counts.min(), counts.max() + 1)
    assert array_averaging_error(counts, bound, eps, m).min() >= best.error * (1 - 1e-12)


@SETTINGS
@given(counts=counts_st, bound=bound_st, eps=eps_st)
def test_surrogate_is_upper_bound_and_minimised(counts, bound, eps):
    """(19): F_ε ≥ E_ε on [m_*, m^*]; the closed form minimises F_ε over the integers."""
    m = np.arange(counts.min(), counts.max() + 1)
    f = surrogate_objective(counts, bound, eps, m)
    assert np.all(f >= array_averaging_error(counts, bound, eps, m) - 1e-9 * bound)
    assert surrogate_objective(counts, bound, eps, surrogate_length(counts, eps)) <= f.min() * (1 + 1e-12) + 1e-12


@SETTINGS
@given(counts=counts_st, data=st.data())
def test_groupings_respect_capacity(counts, data):
    """Every fill ≤ m; K^BF ≥ K^WA = ⌊Γ_m/m⌋; every kept sample placed by BestFit."""
    m = data.draw(st.integers(1, int(counts.max()) + 2))
    bf, wa = best_fit(counts, m), wrap_around(counts, m)
    gamma = int(np.minimum(counts, m).sum())
    assert bf.fills.max() <= m and int(bf.fills.sum()) == gamma
    assert bf.num_arrays >= wa.num_arrays == gamma // m
