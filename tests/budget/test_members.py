"""The group expansion of the budget MILP builder (``_members``) against a double loop."""

import numpy as np
import pytest

from dpopt.budget.milp import _members


@pytest.mark.parametrize("seed", range(20))
def test_members_matches_double_loop(seed):
    rng = np.random.default_rng(seed)
    n_keys = int(rng.integers(1, 6))
    key = rng.integers(0, n_keys, size=int(rng.integers(0, 12)))
    query = rng.integers(0, n_keys, size=int(rng.integers(0, 8)))
    expected = [(i, j) for i in range(query.size) for j in range(key.size) if key[j] == query[i]]
    i_out, j_out = _members(key, n_keys, query)
    assert list(zip(i_out.tolist(), j_out.tolist())) == expected
