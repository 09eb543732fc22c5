"""The budget planner over a public hierarchy of grids (``public-occupancy``; models/budget.md §9).

The finest grids (e.g. H3 res-7 cell × 1 h) have public ancestors at coarser levels (H3 parents,
aperture 7 × longer slots). A node's public occupancy is the sum of its finest grids' occupancy (a
user in several children: its records add). Choose which nodes to publish and their configuration
(cap c, budget ε_k from the planner's ladder; all of a published node's users are kept, truncated to
c) so that every occupied finest grid is answered by a published node (itself or an ancestor) whose
predicted error (the planner's :class:`~dpopt.budget.errors.Criterion`, ``noise`` or ``worst_case``)
is ≤ τ, every user spends Σ_{published n ∋ user} ε_n ≤ ε_total, and the answers are as fine as
possible. The explicit MILP (HiGHS via :mod:`dpopt.solve`), with g a finest grid, a_l(g) its level-l
ancestor, j a feasible configuration of node n(j) (:func:`~dpopt.budget.configs.config_table` on the
node occupancy), y_j, z_{g,l}, u_g ∈ {0, 1}:

    minimise   Σ_g (Σ_l l·z_{g,l} + P·u_g) + δ·Σ_j y_j          (P = (L − 1)·G + 1; δ = 1/(#configs + 1))
    subject to Σ_{j ∈ C(n)} y_j ≤ 1                                 per node
               z_{g,l} − Σ_{j ∈ C(a_l(g))} y_j ≤ 0                  per finest grid and level
               Σ_l z_{g,l} + u_g = 1                                per occupied finest grid
               Σ_{j: user ∈ n(j)} ε_j·y_j ≤ ε_total                 per user

u_g = 1 marks a grid no feasible plan answers; P exceeds any total coarseness, so the plan answers
as many grids as any plan can (every grid when possible) and, among those, as finely as possible; the
fallback reports, per level, the least τ any node of that level could meet at the whole ε_total.

Privacy (the plan only; the release executes it): node n's statistics are computed from the records
of its kept users truncated to c_n and are ε_n-DP in a user's values; a user's records reach every
published node containing one of its grids, and it is kept there, so by composition it spends
Σ_{published n ∋ user} ε_n ≤ ε_total — recounted by :class:`dpopt.plan.GridPlan` over the nodes.
The choice of nodes uses public counts only (``public-occupancy``).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import _fail, check_bound, check_epsilon
from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve import ModelBuilder, Status
from .configs import ConfigTable, budget_ladder, cap_table, config_table
from .planner import make_criterion, solve_by_deadline

__all__ = ["NodeTable", "HierarchyPlan", "node_table", "plan_hierarchy", "hierarchy_ancestors",
           "hierarchy_objective", "brute_force_hierarchy"]


@dataclass(frozen=True, eq=False)
class NodeTable:
    """The public hierarchy over the finest grids of an occupancy.

    Attributes
    ----------
    level : ndarray (n_nodes,)
        Level of each node (0 = finest).
    key : ndarray (n_nodes,)
        The node's ancestor code at its level (as given in ``ancestors``).
    of_grid : ndarray (n_levels, G)
        Node index of each finest grid's level-l ancestor.
    occupancy : Occupancy
        Users × nodes counts (a node's counts are the sums over its finest grids).
    """

    level: np.ndarray
    key: np.ndarray
    of_grid: np.ndarray
    occupancy: Occupancy

    @property
    def n_levels(self) -> int:
        return int(self.of_grid.shape[0])


def node_table(occ: Occupancy, ancestors: Any) -> NodeTable:
    """Nodes from ``ancestors`` (n_levels × G integer codes; row 0 = the finest grids themselves)."""
    anc = np.asarray(ancestors)
    if anc.ndim != 2 or anc.shape[1] != occ.n_grids or anc.dtype.kind not in "iu":
        raise _fail("ancestors", f"must be an integer array of shape (levels, {occ.n_grids})", anc.shape)
    L = anc.shape[0]
    levels, keys, of_grid, start = [], [], np.empty(anc.shape, dtype=np.int64), 0
    for lv in range(L):
        uniq, inv = np.unique(anc[lv], return_inverse=True)
        of_grid[lv] = start + inv
        levels.append(np.full(uniq.size, lv))
        keys.append(uniq)
        start += uniq.size
    member = sp.csr_array((np.ones(L * occ.n_grids), (np.tile(np.arange(occ.n_grids), L), of_grid.ravel())),
                          shape=(occ.n_grids, start))
    counts = sp.csr_array(occ.matrix @ member).astype(np.int64)
    counts.sort_indices()
    node_occ = Occupancy(counts, occ.users, np.arange(start))
    return NodeTable(level=np.concatenate(levels), key=np.concatenate(keys), of_grid=of_grid, occupancy=node_occ)


def hierarchy_ancestors(hierarchy: Any) -> np.ndarray:
    """The (levels, G) ancestor codes of a :class:`dpopt.hierarchy.Hierarchy` (H3 parents × coarser
    slots, built by :func:`dpopt.hierarchy.build_hierarchy` from the occupancy's grids in its column
    order): row l holds the node row (of ``hierarchy.nodes``) of each finest grid's level-l ancestor,
    so a :class:`NodeTable` key is that node row (its ``cell``, ``slot``, ``slot_ns``)."""
    parent = np.asarray(hierarchy.nodes["parent"].to_numpy(), dtype=np.int64)
    cur = np.asarray(hierarchy.finest_node, dtype=np.int64)
    out = [cur]
    for _ in range(1, int(hierarchy.n_levels)):
        cur = parent[cur]
        out.append(cur)
    return np.stack(out)


@dataclass(frozen=True, eq=False)
class HierarchyPlan:
    """Result of :func:`plan_hierarchy`: a :class:`~dpopt.plan.GridPlan` whose columns are nodes.

    Attributes
    ----------
    plan : GridPlan
        Over ``nodes.occupancy`` (users × nodes): retained Γ = min(m, cap) of every user of a
        published node, per-node budgets (mean/variance split), ``released`` = published nodes,
        ``array_length`` = caps. ``plan.total_cost`` ≤ ε_total (recounted).
    nodes : NodeTable
    answer : ndarray (G,)
        The node answering each finest grid (its finest published ancestor), −1 if none.
    predicted_error : ndarray (n_nodes,)
        Mean error bound of each published node at its configuration (inf elsewhere).
    coarseness : float
        The objective without the δ term: Σ over answered grids of their answer's level, plus
        P = (L − 1)·G + 1 per unanswered grid.
    status, gap : the MILP's (``heuristic`` for method="greedy").
    greedy_coarseness : float
        The fine-to-coarse greedy's coarseness (the MILP's warm start).
    uncovered : ndarray of int
        Occupied finest grids no published node answers within τ.
    fallback : dict
        Per level, the least τ a node of that level meets at the whole ε_total (``"least_tau"``)
        and the finest level whose least τ over the uncovered grids' ancestors is ≤ τ, if any.
    """

    plan: GridPlan
    nodes: NodeTable
    answer: np.ndarray
    predicted_error: np.ndarray
    coarseness: float
    status: Status
    gap: float
    greedy_coarseness: float
    uncovered: np.ndarray
    fallback: dict
    info: dict[str, Any] = field(default_factory=dict)

    def published_nodes(self) -> dict[str, np.ndarray]:
        """Per published node: index, level, key, budget (mean + variance), cap, kept users,
        retained records R and predicted mean error bound (what the release executes)."""
        n = np.flatnonzero(self.plan.released)
        kept = self.plan.kept()
        return {
            "node": n, "level": self.nodes.level[n], "key": self.nodes.key[n], "budget": self.plan.budget[n],
            "cap": np.asarray(self.plan.array_length)[n], "users": np.diff(kept.tocsc().indptr)[n],
            "retained": np.asarray(self.plan.retained.sum(axis=0)).ravel()[n],
            "predicted_error": self.predicted_error[n],
        }


def hierarchy_objective(nodes: NodeTable, published: np.ndarray) -> tuple[np.ndarray, float]:
    """(answer per finest grid, objective) of a set of published nodes (boolean per node): the
    objective is the answers' levels summed, plus P = (L − 1)·G + 1 per unanswered grid."""
    L, G = nodes.of_grid.shape
    answer = -np.ones(G, dtype=np.int64)
    level = np.full(G, (L - 1) * G + 1)
    for lv in range(L - 1, -1, -1):  # finest wins: visit it last
        n = nodes.of_grid[lv]
        on = published[n]
        answer[on] = n[on]
        level[on] = lv
    return answer, float(level.sum())


def _greedy(nodes: NodeTable, table: ConfigTable, eps: float) -> np.ndarray:
    """Fine to coarse over a coarse safety net; returns the configuration per node (−1 = none).

    1. Safety net: every coarsest node takes its cheapest configuration all its users can pay
       (reserved, not yet spent). 2. From the finest level up, each node holding an unanswered grid
       takes its cheapest configuration every user can pay on top of what it spent and what is
       reserved for it; a reserved node whose grids all get a finer answer is released (its budget
       returns to its users). 3. The reserved nodes still needed are published.
    """
    occ = nodes.occupancy
    csc = occ.csc
    lim = eps * (1 + 1e-12)
    spend = np.zeros(occ.n_users)
    reserve = np.zeros(occ.n_users)
    choice = -np.ones(occ.n_grids, dtype=np.int64)
    order = np.lexsort((table.cfg_budget, table.cfg_grid))
    first = np.searchsorted(table.cfg_grid[order], np.arange(occ.n_grids + 1))
    users_of = lambda n: csc.indices[csc.indptr[n]:csc.indptr[n + 1]]  # noqa: E731
    top = nodes.n_levels - 1

    def cheapest(n: int, extra: np.ndarray) -> int:
        us = users_of(n)
        for j in order[first[n]:first[n + 1]].tolist():  # cheapest budget first
            if np.all(spend[us] + extra[us] + table.cfg_budget[j] <= lim):
                return j
        return -1

    net = -np.ones(occ.n_grids, dtype=np.int64)
    for n in np.unique(nodes.of_grid[top]).tolist():
        net[n] = cheapest(n, reserve)
        if net[n] >= 0:
            reserve[users_of(n)] += table.cfg_budget[net[n]]
    answered = np.zeros(nodes.of_grid.shape[1], dtype=bool)
    for lv in range(top):
        for n in np.unique(nodes.of_grid[lv][~answered]).tolist():
            j = cheapest(n, reserve)
            if j >= 0:
                choice[n] = j
                spend[users_of(n)] += table.cfg_budget[j]
        answered |= choice[nodes.of_grid[lv]] >= 0  # a level's nodes hold disjoint sets of grids
        done = np.ones(occ.n_grids, dtype=bool)
        np.logical_and.at(done, nodes.of_grid[top], answered)
        for n in np.flatnonzero((net >= 0) & done).tolist():  # answered finer everywhere: release
            reserve[users_of(n)] -= table.cfg_budget[net[n]]
            net[n] = -1
    choice[net >= 0] = net[net >= 0]
    return choice


def _model(nodes: NodeTable, table: ConfigTable, eps: float) -> tuple[Any, float]:
    """The MILP of the module docstring; returns (model, δ)."""
    occ = nodes.occupancy
    L, G = nodes.of_grid.shape
    nc = table.cfg_gc.size
    delta = 1.0 / (nc + 1)
    b = ModelBuilder(name="hierarchy", sense="min")
    y = b.add_cols("y", nc, lower=0, upper=1, integer=True, cost=delta)
    z = b.add_cols("z", L * G, lower=0, upper=1, integer=True, cost=np.repeat(np.arange(L, dtype=float), G))
    u = b.add_cols("u", G, lower=0, upper=1, integer=True, cost=float((L - 1) * G + 1))
    b.add_rows("one", rows=table.cfg_grid, cols=y, vals=1.0, lower=-np.inf, upper=1.0, count=occ.n_grids)
    # link: z_{g,l} ≤ Σ_{j of node a_l(g)} y_j
    node_of_z = nodes.of_grid.ravel()
    order = np.argsort(table.cfg_grid, kind="stable")
    start = np.searchsorted(table.cfg_grid[order], np.arange(occ.n_grids + 1))
    k = start[node_of_z + 1] - start[node_of_z]
    zr = np.repeat(np.arange(L * G), k)
    offs = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k)
    yj = order[np.repeat(start[node_of_z], k) + offs]
    b.add_rows("link", rows=np.concatenate([np.arange(L * G), zr]), cols=np.concatenate([z, y[yj]]),
               vals=np.concatenate([np.ones(L * G), -np.ones(zr.size)]), lower=-np.inf, upper=0.0, count=L * G)
    g_idx = np.tile(np.arange(G), L)
    b.add_rows("cover", rows=np.concatenate([g_idx, np.arange(G)]), cols=np.concatenate([z, u]), vals=1.0,
               lower=1.0, upper=1.0, count=G)
    # users: Σ ε_j y_j over the configurations of the nodes each user is in
    csc = occ.csc
    per = np.diff(csc.indptr)[table.cfg_grid]
    jj = np.repeat(np.arange(nc), per)
    offs = np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per)
    uu = csc.indices[np.repeat(csc.indptr[table.cfg_grid], per) + offs]
    b.add_rows("user", rows=uu, cols=y[jj], vals=table.cfg_budget[jj], lower=-np.inf, upper=float(eps),
               count=occ.n_users)
    return b.build(), delta


def _point(nodes: NodeTable, table: ConfigTable, choice: np.ndarray) -> np.ndarray:
    L, G = nodes.of_grid.shape
    nc = table.cfg_gc.size
    x = np.zeros(nc + L * G + G)
    x[choice[choice >= 0]] = 1.0
    answer, _ = hierarchy_objective(nodes, choice >= 0)
    lv = nodes.level[np.maximum(answer, 0)]
    zi = nc + lv * G + np.arange(G)
    x[zi[answer >= 0]] = 1.0
    x[nc + L * G + np.flatnonzero(answer < 0)] = 1.0
    return x


def plan_hierarchy(occ: Occupancy, ancestors: Any, bound: float, epsilon_total: float, *, target: float,
                   criterion: str = "noise", confidence: float = 0.95, mean_share: float = 0.5,
                   max_caps: int | None = 3, ladder_ratio: float = 2.0, noise: Any = None,
                   method: str = "milp", time_limit: float | None = 60.0) -> HierarchyPlan:
    """Plan the published nodes of a public hierarchy (module docstring; models/budget.md §9).

    Parameters
    ----------
    occ : Occupancy
        Public user × finest-grid counts.
    ancestors : array_like (levels, G) of int
        Row l = the level-l ancestor code of every finest grid (row 0: the grids themselves), e.g.
        :func:`hierarchy_ancestors` of :func:`dpopt.hierarchy.build_hierarchy` (H3 parents, aperture
        7, × coarser slots).
    bound, epsilon_total, target, criterion, confidence, mean_share, max_caps, ladder_ratio, noise
        As in :func:`dpopt.budget.plan_budget` (``target`` τ: a scalar, in data units).
    method : {"milp", "greedy"}
    time_limit : float or None
        Seconds for the MILP, a hard bound (:func:`dpopt.budget.planner.solve_by_deadline`: a large
        model's solver process is killed; the greedy choice is then kept, status ``time_limit``).
    """
    t0 = time.perf_counter()
    U = check_bound(bound)
    eps = check_epsilon(epsilon_total, "epsilon_total")
    if method not in ("milp", "greedy"):
        raise _fail("method", "must be 'milp' or 'greedy'", method)
    nodes = node_table(occ, ancestors)
    nocc = nodes.occupancy
    crit = make_criterion(nocc, U, target=target, criterion=criterion, confidence=confidence,
                          mean_share=mean_share, noise=noise)
    ladder, _ = budget_ladder(eps, int(nocc.degradation), ratio=ladder_ratio)
    # every configuration is met with all of the node's users kept: R_max(c) ≥ R_min (config_table)
    table = config_table(nocc, crit, ladder, max_caps=max_caps, truncate=True)
    choice = _greedy(nodes, table, eps)
    _, g_coarse = hierarchy_objective(nodes, choice >= 0)
    status, gap, info = Status.HEURISTIC, math.nan, {"n_configs": int(table.cfg_gc.size)}
    if method == "milp":
        model, delta = _model(nodes, table, eps)
        deadline = None if time_limit is None else time.perf_counter() + time_limit
        res = solve_by_deadline(model, _point(nodes, table, choice), deadline, info)  # hard limit
        if res is not None:
            info["solve"].update(objective=res.objective, bound=res.bound)
        info.update(delta=delta, model=model)
        if res is not None and res.x is not None:
            y = np.asarray(res.x[: table.cfg_gc.size]) > 0.5  # the y block comes first
            cand = -np.ones(nocc.n_grids, dtype=np.int64)
            cand[table.cfg_grid[y]] = np.flatnonzero(y)
            if hierarchy_objective(nodes, cand >= 0)[1] <= g_coarse:
                choice = cand
        status = Status.TIME_LIMIT if res is None else res.status
        gap = 0.0 if status is Status.OPTIMAL else (math.nan if res is None else res.gap)
    return _result(nodes, table, crit, choice, eps, status=status, gap=gap, g_coarse=g_coarse, info=info, t0=t0)


def _result(nodes: NodeTable, table: ConfigTable, crit: Any, choice: np.ndarray, eps: float, *, status: Status,
            gap: float, g_coarse: float, info: dict, t0: float) -> HierarchyPlan:
    nocc = nodes.occupancy
    N = nocc.n_grids
    rel = choice >= 0
    cap = nocc.grid_max.astype(np.int64).copy()
    cap[rel] = table.cfg_cap[choice[rel]]
    bud = np.zeros(N)
    bud[rel] = table.cfg_budget[choice[rel]]
    coo = nocc.matrix.tocoo()
    gam = np.where(rel[coo.col], np.minimum(coo.data, cap[coo.col]), 0)
    retained = sp.csr_array((gam, (coo.row, coo.col)), shape=nocc.matrix.shape)
    retained.eliminate_zeros()
    plan = GridPlan(retained=retained, budget_mean=bud * crit.mean_share, budget_variance=bud * (1 - crit.mean_share),
                    released=rel, unit=crit.noise.unit, method="hierarchy-milp" if status is not Status.HEURISTIC
                    else "hierarchy-greedy", status=status, gap=gap, error_bound=float(crit.target[0]),
                    array_length=cap, info={"criterion": crit.criterion, "confidence": crit.confidence})
    if plan.total_cost > eps * (1 + 1e-9):
        raise RuntimeError("hierarchy plan spends more than epsilon_total")  # pragma: no cover
    R = np.bincount(coo.col, weights=gam, minlength=N)
    gmax = np.zeros(N)
    np.maximum.at(gmax, coo.col, gam)
    err = np.full(N, np.inf)
    err[rel] = crit.bounds(nocc.grid_totals[rel], R[rel], gmax[rel], bud[rel], envelope=False).mean
    if np.any(err[rel] > crit.target[rel] * (1 + 1e-9)):
        raise RuntimeError("hierarchy plan publishes a node above tau")  # pragma: no cover
    answer, coarse = hierarchy_objective(nodes, rel)
    return HierarchyPlan(plan=plan, nodes=nodes, answer=answer, predicted_error=err, coarseness=coarse,
                         status=status, gap=gap, greedy_coarseness=g_coarse, uncovered=np.flatnonzero(answer < 0),
                         fallback=_fallback(nodes, crit, eps, answer), info={**info, "time": time.perf_counter() - t0})


def _fallback(nodes: NodeTable, crit: Any, eps: float, answer: np.ndarray) -> dict:
    """Least τ per level at the whole ε_total (every user kept, best cap among all distinct counts),
    over the ancestors of the unanswered grids; and the finest level where it is ≤ τ."""
    nocc = nodes.occupancy
    out: dict[str, Any] = {"least_tau": {}, "finest_level_within_tau": None}
    miss = answer < 0
    if not np.any(miss):
        return out
    ct = cap_table(nocc, max_caps=None, truncate=True)
    sb = crit.bounds(nocc.grid_totals[ct.gc_grid], ct.gc_rmax, ct.gc_cap, np.full(ct.gc_grid.size, eps),
                     envelope=False)
    least = np.full(nocc.n_grids, np.inf)
    np.minimum.at(least, ct.gc_grid, sb.mean)
    for lv in range(nodes.n_levels):
        t = float(np.min(least[nodes.of_grid[lv][miss]]))
        out["least_tau"][lv] = t
        if out["finest_level_within_tau"] is None and t <= float(crit.target[0]):
            out["finest_level_within_tau"] = lv
    return out


def brute_force_hierarchy(occ: Occupancy, ancestors: Any, bound: float, epsilon_total: float, *,
                          target: float, max_caps: int | None = 3, **kw: Any) -> float:
    """The least objective (coarseness + δ·#published) over every choice of a configuration or
    none per node (tiny instances only; the configurations of :func:`config_table`)."""
    nodes = node_table(occ, ancestors)
    nocc = nodes.occupancy
    crit = make_criterion(nocc, check_bound(bound), target=target, **kw)
    ladder, _ = budget_ladder(epsilon_total, int(nocc.degradation), ratio=2.0)
    table = config_table(nocc, crit, ladder, max_caps=max_caps, truncate=True)
    delta = 1.0 / (table.cfg_gc.size + 1)
    opts = [[-1] + np.flatnonzero(table.cfg_grid == n).tolist() for n in range(nocc.n_grids)]
    dense = nocc.to_dense() > 0
    best = math.inf
    for ch in itertools.product(*opts):
        c = np.asarray(ch)
        on = c >= 0
        spend = dense[:, on] @ table.cfg_budget[c[on]] if on.any() else np.zeros(nocc.n_users)
        if np.any(spend > epsilon_total * (1 + 1e-12)):
            continue
        best = min(best, hierarchy_objective(nodes, on)[1] + delta * on.sum())
    return best
