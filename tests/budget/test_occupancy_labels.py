"""``Occupancy.from_triples`` factorises text labels before normalising them; the
labels and the matrix are those of normalising every value first (the code before the change)."""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt import Occupancy
from dpopt._validation import normalise_labels


def _reference(users, grids, counts):
    u = normalise_labels(np.asarray(users, dtype=object), "users")
    g = normalise_labels(np.asarray(grids, dtype=object), "grids")
    c = np.asarray(counts)
    keep = c > 0
    u, g, c = u[keep], g[keep], c[keep]
    ulab, ui = np.unique(u, return_inverse=True)
    glab, gi = np.unique(g, return_inverse=True)
    dense = np.zeros((ulab.size, glab.size), dtype=np.int64)
    np.add.at(dense, (ui, gi), c)
    return ulab, glab, dense


@pytest.mark.parametrize("seed", range(5))
def test_text_labels_match_normalising_every_value(seed):
    rng = np.random.default_rng(seed)
    pool_u = np.array(["a", " a", "b ", "7", " 7 ", "007", "x y", "bus-12", "bus-12 "], dtype=object)
    pool_g = np.array([f"cell{i}" for i in range(30)] + [" cell3", "cell4  "], dtype=object)
    n = 500
    mixed = seed >= 3  # "7", " 7 ", "007" normalise to the integer 7 next to text labels
    users = pool_u[rng.integers(0, 9 if mixed else 3, n)]
    users = np.where(rng.random(n) < 0.5, users, pool_u[-2])
    grids = pool_g[rng.integers(0, pool_g.size, n)]
    counts = rng.integers(0, 4, n)
    occ = Occupancy.from_triples(users, grids, counts)
    if mixed:  # mixed types cannot be sorted: compare the labelled entries
        ref = {(a, b): int(k) for a, b, k in zip(*Occupancy.from_triples(
            normalise_labels(users, "u"), normalise_labels(grids, "g"), counts).to_triples())}
        assert {(a, b): int(k) for a, b, k in occ} == ref
        return
    ulab, glab, dense = _reference(users, grids, counts)
    assert list(occ.users) == list(ulab) and list(occ.grids) == list(glab)
    assert np.array_equal(occ.to_dense(), dense)


def test_missing_text_label_names_the_index():
    users = np.array(["u1"] * 70 + ["  "] + ["u2"] * 5, dtype=object)
    with pytest.raises(dpopt.DpoptInputError, match="`users` must not hold missing labels.*index 70"):
        Occupancy.from_triples(users, np.zeros(users.size, dtype=int), np.ones(users.size, dtype=int))
