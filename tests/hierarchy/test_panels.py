"""TrianglePanels (dpopt/hierarchy/panels.py): the lower triangle of symmetric matrices by column
panels, against the dense matrices it stands for — the same numbers, not merely close ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg.blas import daxpy

from dpopt.hierarchy.panels import TrianglePanels


def _design(rng: np.random.Generator, n: int, q: int) -> sp.csr_matrix:
    H = sp.random(n, q, density=min(1.0, 4.0 / max(q, 1)), random_state=rng, format="csr")
    H = (H @ sp.diags(rng.uniform(0.1, 2.0, q))).tocsr()
    H.sort_indices()  # as every design the fits pass (the order of a row's nonzeros is the sums' order)
    return H


@pytest.mark.parametrize("n, width", [(1, 4), (7, 3), (12, 4), (37, 5), (50, 64), (200, 512)])
def test_the_panels_of_a_gram_matrix_are_its_entries(n, width):
    """Every stored entry is the dense product's entry (exactly: the same sum in the same order),
    the symmetric matrix is the dense one, the lower matrix holds the lower triangle and zeros
    outside the panels (also formed directly, without the packed vector), and the size is
    n(n + w)/2 up to the last panel's width."""
    rng = np.random.default_rng(n * 100 + width)
    H = _design(rng, n, 3 * n + 1)
    G = (H @ H.T).toarray()
    layout = TrianglePanels.of_size(n, width)
    packed, diag = layout.gram(H)
    assert packed.size == layout.size == sum((n - a) * (b - a) for a, b in zip(layout.edges[:-1], layout.edges[1:]))
    np.testing.assert_array_equal(layout.symmetric(packed), G)
    lower = layout.lower(packed)
    assert lower.flags.f_contiguous
    np.testing.assert_array_equal(np.tril(lower), np.tril(G))
    in_panel = np.zeros((n, n), dtype=bool)
    for a, b in zip(layout.edges[:-1], layout.edges[1:]):
        in_panel[a:, a:b] = True
    assert not np.any(lower[~in_panel])
    np.testing.assert_array_equal(layout.lower_gram(H), lower)  # the same matrix without the packed vector
    np.testing.assert_array_equal(layout.mirror(layout.lower_gram(H)), G)
    np.testing.assert_array_equal(diag, np.diag(G))
    for J in range(len(layout.edges) - 1):
        a, b = layout.edges[J], layout.edges[J + 1]
        np.testing.assert_array_equal(layout.panel(packed, J), G[a:, a:b])


def test_a_weighted_sum_of_panels_is_the_dense_axpy_sum():
    """combine() sums in the order given by the same BLAS axpy the dense sum used: the lower
    triangle of Σ_k w_k G_k is bit for bit the dense sum's (zero weights skipped, work reused)."""
    rng = np.random.default_rng(5)
    n = 61
    layout = TrianglePanels.of_size(n, 8)
    Hs = [_design(rng, n, q) for q in (5, 40, 200)]
    packed = [layout.gram(H)[0] for H in Hs]
    weights = [2.7, 0.0, 0.013]
    dense = np.zeros(n * n)
    for w, H in zip(weights, Hs):
        if w:
            daxpy((H @ H.T).toarray().reshape(-1), dense, a=w)
    dense = dense.reshape(n, n)
    work = np.full(layout.size, np.nan)  # garbage in the buffer must not leak into the sum
    summed = layout.combine(weights, packed, work=work)
    assert summed is work
    np.testing.assert_array_equal(np.tril(layout.lower(summed)), np.tril(dense))
    np.testing.assert_array_equal(layout.combine(weights, packed), summed)


def test_the_lower_inner_product_is_the_dense_one():
    """Σ_{i≥j} low_ij G_ij for a matrix whose strict upper triangle is 0 (potri's), of each packed
    matrix, in either memory order of ``low``."""
    rng = np.random.default_rng(9)
    n = 45
    layout = TrianglePanels.of_size(n, 7)
    Hs = [_design(rng, n, q) for q in (3, 90)]
    packed = [layout.gram(H)[0] for H in Hs]
    low = np.tril(rng.normal(size=(n, n)))
    expect = [float(np.sum(low * (H @ H.T).toarray())) for H in Hs]
    np.testing.assert_allclose(layout.lower_inner(low, packed), expect, rtol=1e-13)
    np.testing.assert_allclose(layout.lower_inner(np.asfortranarray(low), packed), expect, rtol=1e-13)


@pytest.mark.parametrize("width", [1, 7, 45, 60])
def test_the_inner_product_read_panel_by_panel_is_the_packed_one_to_the_last_bit(width):
    """gram_inner (each panel of H Hᵀ read against ``low`` as it is made, no packed vector) gives
    lower_inner of gram's packed panels exactly, and gram's diagonal; both the dense sums closely."""
    rng = np.random.default_rng(10 + width)
    n = 45
    layout = TrianglePanels.of_size(n, width)
    low = np.tril(rng.normal(size=(n, n)))
    for q in (1, 3, 90):
        H = _design(rng, n, q)
        packed, diag = layout.gram(H)
        total, d = layout.gram_inner(low, H)
        assert total == float(layout.lower_inner(low, [packed])[0])
        np.testing.assert_array_equal(d, diag)
        np.testing.assert_allclose(total, float(np.sum(low * (H @ H.T).toarray())), rtol=1e-12)
        np.testing.assert_allclose(d, (H @ H.T).diagonal(), rtol=1e-13)


def test_an_empty_matrix_has_no_panels():
    layout = TrianglePanels.of_size(0)
    assert layout.size == 0 and layout.symmetric(np.empty(0)).shape == (0, 0)
