"""Property tests (hypothesis) of the calculus: vectorised kernels = scalar functions; known bounds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dpopt
from dpopt import calculus


@st.composite
def partitions(draw):
    m = np.array(draw(st.lists(st.integers(1, 50), min_size=1, max_size=30)))
    g = np.array([draw(st.integers(0, int(mi))) for mi in m])
    if g.sum() == 0:
        g[0] = 1
    return m, g


@settings(max_examples=200, deadline=None)
@given(partitions(), st.floats(0.5, 100.0))
def test_kernels_agree_and_respect_known_bounds(part, U):
    m, g = part
    dvar = dpopt.variance_sensitivity(g, U)
    bvar = dpopt.variance_bias(g, m, U)
    assert 0 <= dvar <= U * U / 4 + 1e-9  # seed 002 §III-A: Δ_Var ≤ U²/4
    assert 0 <= bvar <= U * U / 4 + 1e-9
    assert 0 <= dpopt.mean_bias(g, m, U) <= U
    # the vectorised kernel gives the same numbers
    t = calculus.grid_error_terms([m.sum()], [g.sum()], [g.max()], U, 1.0)
    assert np.isclose(t.variance_sensitivity[0], dvar) and np.isclose(t.variance_bias[0], bvar)
    # keeping everything: no bias; the baseline sensitivities (eq. (5), Prop. III.1)
    assert dpopt.variance_bias(m, m, U) == 0 and dpopt.mean_bias(m, m, U) == 0


@settings(max_examples=100, deadline=None)
@given(partitions())
def test_more_retained_never_increases_variance_bias(part):
    """Corrected E1 is non-increasing in R (the monotonicity CLIP-USER relies on)."""
    m, g = part
    b0 = dpopt.variance_bias(g, m, 1.0)
    i = int(np.argmax(m - g))
    if g[i] < m[i]:
        g2 = g.copy()
        g2[i] += 1
        assert dpopt.variance_bias(g2, m, 1.0) <= b0 + 1e-12
