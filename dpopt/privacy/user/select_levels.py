"""Private partition selection over the levels of the hierarchy (no partition list;
models/hierarchy.md §15). :func:`dpopt.privacy.user.strategies.private_adaptive.measure_private_multires`
selects with it, measures the released nodes with :func:`dpopt.privacy.user.levels.bounded_level`, and
leaves the estimation (:func:`dpopt.estimation.hierarchical.estimate_hierarchical`) to the caller.

For each selected level ℓ = (H3 resolution r, slot length s) the node of a record is its H3 parent
at r and its slot floored to a multiple of s (epoch-aligned, UTC): a public function of the
record's grid key. Selection at level ℓ:

1. every user ranks its own level-ℓ nodes by a **shared public priority** (a 64-bit hash of the
   node's coarse group — its H3 parent two resolutions up and a slot three times longer — then of
   the node itself; :func:`node_priority`) and keeps its first ``k_ℓ``: users of one coarse group
   keep the same nodes, so their counts pile up (the idea of OpenDP's truncation in a public order);
   or, by a :class:`KeepRule` with ``own_top`` > 0, its first k_ℓ − own_top in that order, then,
   of its other nodes, the own_top where it has the most records among those where it dwells (≥
   ``dwell`` × its mean records per node; ties in the shared order), then that order again up to
   k_ℓ: counts then also pile up where users stop (aircraft at the gates);
2. the number of users u_v per node v (each kept node counts its user once); only nodes with
   u_v ≥ 1 are candidates (a node nobody kept is neither noised nor released);
3. release a candidate v iff u_v + Z_v ≥ T_ℓ, Z_v Laplace of scale k_ℓ/ε_ℓ (exact discrete Laplace in a real
   release), T_ℓ = 1 + x with P[Z ≥ x] ≤ δ_ℓ/k_ℓ (:func:`dpopt.privacy.user.partitions.selection_threshold`).

**Privacy** ((ε_ℓ, δ_ℓ)-DP per level; Korolova et al. 2009, Wilson et al. 2020, Desfontaines et al.
2022). Add or remove one user ℓ*. The priority is a function of node keys only and the own-records
choice a function of the user's own records, so every other user's kept set is unchanged (no
data-dependent or random choice reads another user). User ℓ*
changes the counts of ≤ k_ℓ nodes, each by exactly 1: on the nodes that are candidates in both
data sets the count vector has ℓ1 sensitivity k_ℓ, and Laplace noise of scale k_ℓ/ε_ℓ gives
ε_ℓ-DP for the released set restricted to them; a node that is a candidate only with ℓ* — kept by
ℓ* and by no one else, ≤ k_ℓ of them — has u_v = 1 and is released with probability
P[Z ≥ T_ℓ − 1] ≤ δ_ℓ/k_ℓ, at most δ_ℓ in total. (Nodes with u_v = 0 must not be candidates: ℓ*
can bring any number of nodes it does not keep.) Levels compose:
(Σ ε_ℓ, Σ δ_ℓ). Brute force: tests/privacy/user/test_select_levels.py enumerates every placement of an
added user in a small tree and checks the count vector moves by ≤ 1 on ≤ k_ℓ nodes and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._validation import DpoptInputError, check_positive_int
from ...hierarchy.tree import Level, cell_parents
from ...records.aggregate import Aggregate
from ...noise.mechanism import NoiseMechanism
from .partitions import selection_threshold
from .priority import _key_hash

__all__ = ["KeepRule", "LevelSelection", "level_nodes", "node_priority", "user_node_counts", "select_level",
           "threshold_counts"]


@dataclass(frozen=True)
class KeepRule:
    """Which of its nodes a user keeps at one level (module doc, step 1): ``k`` nodes, of which
    ``own_top`` are those where it has the most records among the nodes where it dwells (at least
    ``dwell`` × its mean records per node; 0: any node), the rest in the shared public order.
    Public parameters; the ℓ1 sensitivity of the level's user counts is ``k``."""

    k: int
    own_top: int = 0
    dwell: float = 0.0

    def __post_init__(self) -> None:
        k = check_positive_int(self.k, "k")
        if isinstance(self.own_top, bool) or not isinstance(self.own_top, (int, np.integer)) \
                or not 0 <= self.own_top <= k:
            raise DpoptInputError(f"`own_top` must be an integer in [0, k = {k}]; got {self.own_top!r}")
        if isinstance(self.dwell, bool) or not isinstance(self.dwell, (int, float, np.integer, np.floating)) \
                or not math.isfinite(self.dwell) or self.dwell < 0:
            raise DpoptInputError(f"`dwell` must be a finite number >= 0; got {self.dwell!r}")


@dataclass(frozen=True)
class LevelSelection:
    """Released nodes of one level (DP output): keys, noisy user counts, and the rule's public
    parameters (k, ε, δ, noise scale, threshold)."""

    level: Level
    cells: np.ndarray
    slots: np.ndarray
    noisy_users: np.ndarray
    k: int
    epsilon: float
    delta: float
    scale: float
    threshold: float


def level_nodes(agg: Aggregate, level: Level) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node of every aggregate grid, node cells, node slot starts) at ``level`` (module doc)."""
    if level.slot_ns <= 0 or level.slot_ns % agg.slot_ns or level.h3_resolution > agg.h3_resolution:
        raise DpoptInputError(f"`level` must be a coarsening with a whole slot multiple of {agg.slot_ns} ns "
                              f"(no whole-period level without a list); got {level}")
    cells = cell_parents(np.asarray(agg.cells, dtype=np.int64), int(level.h3_resolution))
    slots = (np.asarray(agg.slots, dtype=np.int64) // level.slot_ns) * level.slot_ns
    key = np.stack([cells, slots], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), uniq[:, 0], uniq[:, 1]


def node_priority(cells: np.ndarray, slots: np.ndarray, level: Level, *, salt: int = 0) -> np.ndarray:
    """Public rank (0 first) of nodes by (hash of their coarse group, hash of the node): a function
    of the keys only (module doc)."""
    gres = max(int(level.h3_resolution) - 2, 0)
    gslot = 3 * int(level.slot_ns)
    coarse = _key_hash(cell_parents(np.asarray(cells, dtype=np.int64), gres), (slots // gslot) * gslot, int(salt))
    fine = _key_hash(cells, slots, int(salt) + 1)
    order = np.lexsort((fine, coarse))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank


def user_node_counts(pair_user: np.ndarray, pair_node: np.ndarray, n_nodes: int, priority: np.ndarray,
                     rule: KeepRule | int, *, records: np.ndarray | None = None) -> np.ndarray:
    """Users per node when every user keeps its nodes by ``rule`` (an int k: the shared order only):
    its first ``k − own_top`` distinct nodes by the shared ``priority``, then, of its other nodes,
    the ``own_top`` where it has the most ``records`` (per pair, summed per node; ties by
    ``priority``) among those where it dwells, then the shared order up to k: a rule of the user's
    own pairs and the public keys (module doc)."""
    rule = rule if isinstance(rule, KeepRule) else KeepRule(rule)
    k, own_top = int(rule.k), int(rule.own_top)
    if own_top and records is None:
        raise DpoptInputError("`records` (one count per pair) is needed when `own_top` > 0")
    key, inv = np.unique(np.asarray(pair_user, dtype=np.int64) * (n_nodes + 1) + np.asarray(pair_node, dtype=np.int64),
                         return_inverse=True)
    user, node = key // (n_nodes + 1), key % (n_nodes + 1)
    kept = _first(user, (priority[node],), k - own_top)
    if own_top:
        held = np.bincount(inv.reshape(-1), weights=np.asarray(records, dtype=float), minlength=key.size)
        mean = np.bincount(user, weights=held) / np.maximum(np.bincount(user), 1)
        busy = held >= float(rule.dwell) * mean[user]
        # its own_top busiest other nodes, those where it dwells (busy is monotone in held)
        kept |= _first(user, (priority[node], -held, kept), own_top) & ~kept & busy
        kept = _first(user, (priority[node], ~kept), k)  # the kept ones, then the shared order up to k
    return np.bincount(node[kept], minlength=n_nodes).astype(np.int64)


def _first(user: np.ndarray, keys: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """Mask of each user's first ``n`` rows ordered by ``keys`` (np.lexsort order: last key primary)."""
    order = np.lexsort((*keys, user))
    u_sorted = user[order]
    rank = np.arange(order.size) - np.searchsorted(u_sorted, u_sorted, side="left")
    out = np.zeros(user.size, dtype=bool)
    out[order[rank < n]] = True
    return out


def select_level(agg: Aggregate, level: Level, *, keep: KeepRule | int, epsilon: float, delta: float,
                 mechanism: NoiseMechanism, salt: int = 0) -> LevelSelection:
    """(ε, δ)-DP selection of the nodes of ``level`` (module doc); ``keep`` a :class:`KeepRule` or
    the number k of nodes a user keeps in the shared public order."""
    rule = keep if isinstance(keep, KeepRule) else KeepRule(keep)
    k = rule.k
    grid_node, cells, slots = level_nodes(agg, level)
    pr = node_priority(cells, slots, level, salt=salt)
    counts = user_node_counts(agg.pair_user, grid_node[agg.pair_grid], cells.size, pr, rule, records=agg.count)
    return threshold_counts(level, cells, slots, counts, k=k, epsilon=epsilon, delta=delta, mechanism=mechanism)


def threshold_counts(level: Level, cells: np.ndarray, slots: np.ndarray, counts: np.ndarray, *, k: int, epsilon: float,
                     delta: float, mechanism: NoiseMechanism) -> LevelSelection:
    """Steps 2–3 of the module doc: Laplace thresholding of the users per node ``counts`` (each
    user counted once in each of at most ``k`` nodes, by any keep rule that reads only the user's
    own records, public keys and independent randomness); (ε, δ)-DP."""
    thr = selection_threshold(k, epsilon, delta, mechanism)
    # candidates: nodes some user kept (u_v >= 1). A node nobody kept is never noised nor released: a
    # user's nodes beyond its k would otherwise each be a chance of release only with that user
    # present, unbounded in number (the flat release's _select_private alike)
    cand = np.flatnonzero(counts > 0)
    noisy = np.asarray(mechanism.integer(counts[cand], l1=k, l2=float(np.sqrt(k)), budget=thr.epsilon))
    on = noisy.astype(float) >= thr.threshold
    rows = cand[on]
    return LevelSelection(level=level, cells=cells[rows], slots=slots[rows], noisy_users=noisy[on], k=k,
                          epsilon=thr.epsilon, delta=thr.delta, scale=thr.scale, threshold=thr.threshold)
