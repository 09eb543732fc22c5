"""label_pairs and rechecked_plan: the plan fields come from the re-check, the labels from the occupancy."""

import numpy as np

from dpopt import Occupancy
from dpopt.solve import Status
from dpopt.suppression.plan import label_pairs, recheck, rechecked_plan


def _occ():
    return Occupancy.from_triples(["a", "a", "b", "c", "c"], [10, 20, 20, 10, 30], [3, 1, 2, 5, 1])


def test_label_pairs_maps_matrix_positions_to_labels():
    occ = _occ()
    csr = occ.matrix.tocsr()
    rows = np.repeat(np.arange(occ.n_users), np.diff(csr.indptr))
    cols = csr.indices
    got = label_pairs(occ, rows, cols)
    users, grids = occ.users.tolist(), occ.grids.tolist()
    assert got == {(users[r], grids[c]) for r, c in zip(rows.tolist(), cols.tolist())}
    assert len(got) == 5 and label_pairs(occ, [], []) == frozenset()


def test_rechecked_plan_takes_k_errors_samples_from_recheck():
    occ = _occ()
    sup = frozenset({("c", 10)})
    checked = recheck(occ, sup, 10.0, 1.0)
    plan = rechecked_plan(occ, sup, checked, U=10.0, eps=1.0, error_bound=100.0, status=Status.HEURISTIC,
                          gap=float("nan"), lower_bound=float("nan"), method="greedy", solve_time=0.0, info={})
    assert plan.degradation == 2  # user a keeps grids 10 and 20; c keeps grid 30 only
    assert plan.suppressed_samples == 5
    assert plan.original_degradation == 2
    np.testing.assert_array_equal(plan.grid_errors, checked[1])
