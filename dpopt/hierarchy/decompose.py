"""Which nodes to publish: the finest ancestor-or-self of every finest grid whose predicted error
meets the target (models/hierarchy.md §7).

Post-processing only: the rule reads the per-node predicted half-widths (computed from DP outputs
and the known noise laws) and the public tree. For every finest grid g the answering node is the
first node on the path g → parent → … → root whose half-width is ≤ τ, or the root if none is;
the published set is the set of answering nodes. So every finest grid (with records or not) is
covered by exactly one published node — the map has no holes — and a node is published only if it
answers some finest grid.
"""

from __future__ import annotations

import numpy as np

from .._validation import DpoptInputError

__all__ = ["answer_nodes", "published_mask"]


def answer_nodes(parent: np.ndarray, finest_node: np.ndarray, half_width: np.ndarray, target: float) -> np.ndarray:
    """Answering node of every finest grid (module doc): ≤ depth vectorised steps up the tree."""
    parent = np.asarray(parent, dtype=np.int64)
    hw = np.asarray(half_width, dtype=float)
    if not (np.isfinite(target) and target > 0):
        raise DpoptInputError(f"`target` must be a positive finite number; got {target!r}")
    if hw.shape != parent.shape:
        raise DpoptInputError(f"`half_width` must have one value per node ({parent.size}); got {hw.shape}")
    ans = np.asarray(finest_node, dtype=np.int64).copy()
    for _ in range(parent.size + 1):
        move = ~(hw[ans] <= target) & (parent[ans] >= 0)  # NaN half-widths never meet the target
        if not move.any():
            return ans
        ans[move] = parent[ans[move]]
    raise DpoptInputError("`parent` has a cycle")  # pragma: no cover - trees built by build_hierarchy


def published_mask(n_nodes: int, answers: np.ndarray) -> np.ndarray:
    """Boolean mask of the nodes that answer at least one finest grid."""
    mask = np.zeros(int(n_nodes), dtype=bool)
    mask[np.asarray(answers, dtype=np.int64)] = True
    return mask
