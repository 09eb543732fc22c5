"""The published nodes: every finest grid answered by its finest ancestor-or-self meeting τ."""

import numpy as np
import pytest

from dpopt.hierarchy.decompose import answer_nodes, published_mask
from dpopt.hierarchy.tree import HOUR_NS, Level, build_hierarchy

from .test_tree import _cells


@pytest.mark.parametrize("seed", range(10))
def test_no_holes_and_finest_meeting_target(seed):
    rng = np.random.default_rng(seed)
    cells = _cells(rng, 30, 8)
    slots = rng.integers(0, 6, 30) * HOUR_NS
    keys = np.unique(np.stack([slots, cells], 1), axis=0)
    H = build_hierarchy(keys[:, 1], keys[:, 0], (Level(8, HOUR_NS), Level(7, HOUR_NS), Level(7, 0), Level(5, 0)))
    parent = H.nodes["parent"].to_numpy()
    hw = rng.uniform(0, 10, len(parent))
    hw[rng.random(len(parent)) < 0.2] = np.nan  # unmeasured nodes never meet the target
    tau = 4.0
    ans = answer_nodes(parent, H.finest_node, hw, tau)
    for g, a in enumerate(ans):
        path = [H.finest_node[g]]
        while parent[path[-1]] >= 0:
            path.append(parent[path[-1]])
        assert a in path  # covered by an ancestor-or-self: no holes
        meets = [v for v in path if hw[v] <= tau]
        assert a == (meets[0] if meets else path[-1])  # the finest meeting τ, else the root
    pub = published_mask(len(parent), ans)
    assert set(np.flatnonzero(pub)) == set(ans.tolist())
