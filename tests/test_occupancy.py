"""Occupancy: constructors agree, derived quantities match a direct recount, graph and components."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import dpopt


@pytest.fixture
def dense(rng):
    d = (rng.random((25, 9)) < 0.35) * rng.integers(1, 7, size=(25, 9))
    d[:, 0] = np.maximum(d[:, 0], 0)
    d[d.sum(1) == 0, 1] = 1
    d[:, d.sum(0) == 0] = 0
    return d[:, d.sum(0) > 0]


def test_constructors_agree(dense):
    users = [f"user{i}" for i in range(dense.shape[0])]
    grids = [("cell", j) for j in range(dense.shape[1])]  # tuple labels, as (cell, slot)
    a = dpopt.Occupancy.from_dense(dense, users=users, grids=grids)
    r, c = np.nonzero(dense)
    b = dpopt.Occupancy.from_triples([users[i] for i in r], [grids[j] for j in c], dense[r, c])
    frame = pd.DataFrame({"u": [users[i] for i in r], "g": [str(grids[j]) for j in c], "n": dense[r, c]})
    f = dpopt.Occupancy.from_frame(frame, user="u", grid="g", count="n")
    np.testing.assert_array_equal(a.to_dense(), b.to_dense())
    assert sorted(f.grid_totals.tolist()) == sorted(a.grid_totals.tolist())
    assert a.n_users == dense.shape[0] and a.n_grids == dense.shape[1]


def test_derived_quantities_match_recount(dense):
    occ = dpopt.Occupancy.from_dense(dense)
    np.testing.assert_array_equal(occ.user_occupancy, (dense > 0).sum(1))
    np.testing.assert_array_equal(occ.users_per_grid, (dense > 0).sum(0))
    np.testing.assert_array_equal(occ.grid_totals, dense.sum(0))
    np.testing.assert_array_equal(occ.grid_max, dense.max(0))
    np.testing.assert_array_equal(
        occ.grid_min, [dense[dense[:, j] > 0, j].min() for j in range(dense.shape[1])]
    )
    assert occ.degradation == (dense > 0).sum(1).max()


def test_duplicate_triples_are_summed_and_zeros_dropped():
    occ = dpopt.Occupancy.from_triples(["a", "a", "b", "c"], ["g", "g", "g", "h"], [1, 2, 4, 0])
    assert occ.n_users == 2 and occ.n_grids == 1
    assert occ.grid_totals.tolist() == [7] and occ.grid_max.tolist() == [4]


def test_networkx_graph_and_components(dense):
    occ = dpopt.Occupancy.from_dense(dense)
    graph = occ.to_networkx()
    assert graph.number_of_edges() == (dense > 0).sum()
    assert nx.is_bipartite(graph)
    comps = occ.components()
    expected = sorted(
        (sum(1 for n in cc if n[0] == "grid") for cc in nx.connected_components(graph)), reverse=True
    )
    assert sorted((c.n_grids for c in comps), reverse=True) == expected
    assert sum(c.n_pairs for c in comps) == occ.n_pairs


def test_two_disjoint_blocks_are_two_components():
    d = np.zeros((4, 4), int)
    d[:2, :2] = 1
    d[2:, 2:] = 2
    comps = dpopt.Occupancy.from_dense(d).components()
    assert len(comps) == 2 and {c.n_users for c in comps} == {2}


def test_suppress_and_retained_matrix(dense):
    occ = dpopt.Occupancy.from_dense(dense)
    i, j = map(int, np.argwhere(dense > 0)[0])
    kept = occ.retained_matrix([(i, j)]).toarray()
    expect = dense.copy()
    expect[i, j] = 0
    np.testing.assert_array_equal(kept, expect)
    smaller = occ.suppress([(i, j)])
    assert smaller.n_pairs == occ.n_pairs - 1
