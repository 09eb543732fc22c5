"""``public-occupancy`` with ``plan="hierarchy"``: the hierarchy plan executed (models/budget.md §9).

1. The public hierarchy over the occupied finest grids (:func:`dpopt.hierarchy.build_hierarchy`,
   :func:`dpopt.hierarchy.default_levels`: H3 parents × coarser slots) and the plan
   (:func:`dpopt.budget.hierarchy.plan_hierarchy`, a MILP over public counts only): which nodes to
   publish, each with a budget ε_n and a cap c_n, every finest grid answered by a published node
   within τ, every user's Σ_{published n ∋ user} ε_n ≤ ε_total.
2. :func:`node_aggregate`: the contributions of the published nodes. A node's pair (user ℓ, node n)
   holds ℓ's records in the finest grids below n (count, sum, sum of squares added).
3. (in :mod:`.public_occupancy`) the model's measurement (``measure_release``) on that node
   aggregate with the plan restricted to the published nodes as a ready
   :class:`~dpopt.plan.GridPlan`: the CLIP mechanism per node (:func:`dpopt.mechanisms.release_grids`,
   the exact samplers), the exact per-user spend recounted and checked ≤ the total; the node table
   and the answers join the Measurements. The error bounds are the estimation layer's.

Truncation to the cap keeps a uniform sample of Γ = min(m, c_n) of a user's records in the node:
the split of Γ over its finest pairs is drawn from the multivariate hypergeometric law from the
public counts and the release's randomness (:func:`dpopt.records.node_split_counts`), and each pair
keeps its Γ_p smallest sample keys (:mod:`dpopt.records.sample_key`); a partially kept finest pair
is read by the same prefix sums (or second pass over the records) as pseudo-user clipping. The rule
picks a user's kept records from that user's own records only, so the node's sensitivities (seed 002 (9),
Lemma III.3, in terms of Γ* ≤ c_n) hold; the node's statistics are ε_n-DP in a user's values, a user
reaches only the published nodes that contain one of its grids, and composition gives the recounted
Σ ε_n ≤ ε_total (models/release.md §hierarchy plan). Everything else published — the node table, the
answers (finest grid → node), counts — is a function of the public occupancy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..plan import GridPlan
from ..records.aggregate import Aggregate, _prefix_sums
from ..records.kept import node_split_counts
from ..records.grid import cell_strings, repeat_strings, slot_strings
from .budgets import PrivacyBudget
from .contributions import TruncatedSums

__all__ = ["plan_nodes", "node_aggregate", "hierarchy_tables", "prepare_hierarchy", "PreparedHierarchy",
           "DEFAULT_TARGET_FRACTION"]

#: τ when none is given: this fraction of U (the hierarchy planner needs a target)
DEFAULT_TARGET_FRACTION = 0.05


def plan_nodes(agg: Aggregate, budget: PrivacyBudget, *, bound: float, target: float | None, criterion: str,
               confidence: float, time_limit: float | None, profile: str | None = None) -> tuple[Any, Any]:
    """(hierarchy, HierarchyPlan) of the aggregate's occupied finest grids (public counts only);
    ``profile`` "day"/"week": recurring-window time steps (models/hierarchy.md §2)."""
    from ..budget import GaussianNoise, LaplaceNoise
    from ..budget.hierarchy import hierarchy_ancestors, plan_hierarchy
    from ..hierarchy import build_hierarchy, default_levels

    if budget.total is None:
        raise DpoptInputError("plan='hierarchy' spends a total budget: give `epsilon_total` (or `rho`), not "
                              f"the per-grid `epsilon` = {budget.per_grid!r}")
    if agg.n_grids == 0:
        raise DpoptInputError("plan='hierarchy' needs at least one occupied grid; the contributions hold none")
    tau = DEFAULT_TARGET_FRACTION * bound if target is None else float(target)
    h = build_hierarchy(agg.cells, agg.slots, default_levels(agg.h3_resolution, agg.slot_ns, profile=profile))
    noise = LaplaceNoise() if budget.mechanism == "laplace" else GaussianNoise()
    hp = plan_hierarchy(agg.occupancy(), hierarchy_ancestors(h), bound, budget.total, target=tau,
                        criterion=criterion, confidence=confidence, noise=noise,
                        time_limit=60.0 if time_limit is None else time_limit)
    return h, hp


def _expanded(agg: Aggregate, hp: Any, pub: np.ndarray) -> dict[str, np.ndarray]:
    """Every (finest pair, published ancestor) combination, sorted by (node, user, grid)."""
    of_grid = hp.nodes.of_grid  # (levels, G): node of each finest grid's level-l ancestor
    pos = -np.ones(hp.nodes.level.size, dtype=np.int64)
    pos[pub] = np.arange(pub.size)
    parts = []
    for lv in range(of_grid.shape[0]):
        k = pos[of_grid[lv][agg.pair_grid]]
        p = np.flatnonzero(k >= 0)
        parts.append((k[p], p, np.full(p.size, lv)))
    node = np.concatenate([a for a, _, _ in parts])
    pair = np.concatenate([b for _, b, _ in parts])
    level = np.concatenate([c for _, _, c in parts])
    order = np.lexsort((agg.pair_grid[pair], agg.pair_user[pair], node))
    return {"node": node[order], "pair": pair[order], "level": level[order]}


def node_aggregate(agg: Aggregate, hierarchy: Any, hp: Any) -> tuple[Aggregate, dict[str, np.ndarray]]:
    """The published nodes' contributions (module doc, step 2) and the expansion used to build them.

    Grid j of the result is the j-th published node (``hp.plan.released`` order); its ``cells`` are
    the node's H3 cell at its own resolution, ``slots`` its slot start; ``h3_resolution`` and
    ``slot_ns`` stay the finest ones (the node table carries each node's own)."""
    pub = np.flatnonzero(hp.plan.released)
    ex = _expanded(agg, hp, pub)
    u = agg.pair_user[ex["pair"]]
    key = ex["node"] * max(agg.n_users, 1) + u
    first = np.r_[True, key[1:] != key[:-1]] if key.size else np.zeros(0, bool)
    q = np.cumsum(first) - 1  # node pair of every expanded row
    nq = int(first.sum())
    count = np.bincount(q, weights=agg.count[ex["pair"]], minlength=nq).astype(np.int64)
    s1 = np.bincount(q, weights=agg.sum[ex["pair"]], minlength=nq)
    s2 = np.bincount(q, weights=agg.sumsq[ex["pair"]], minlength=nq)
    rows = hierarchy.nodes.iloc[hp.nodes.key[pub]]
    node_agg = Aggregate(users=agg.users, cells=rows["cell"].to_numpy(np.int64), slots=rows["slot"].to_numpy(np.int64),
                         pair_user=u[first], pair_grid=ex["node"][first], count=count, sum=s1, sumsq=s2,
                         h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns, samples=None, bound=agg.bound,
                         out_of_range=agg.out_of_range, lower=agg.lower)
    return node_agg, {**ex, "q": q}


def _node_truncated_sums(agg: Aggregate, ex: dict[str, np.ndarray], finest_sums: TruncatedSums | None,
                         rng: np.random.Generator) -> TruncatedSums:
    """Retained (sum, sumsq) of node pairs keeping a uniform sample of Γ records (module doc)."""
    cnt = agg.count[ex["pair"]]
    q = ex["q"]

    def sums(_node_agg: Aggregate, part: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        want = np.zeros(int(q.max()) + 1 if q.size else 0, dtype=np.int64)
        on = np.zeros(want.size, dtype=bool)
        want[part], on[part] = keep, True
        rows = np.flatnonzero(on[q])
        g = node_split_counts(cnt[rows], q[rows], want[q[rows]], rng)  # Γ_p per finest pair of a node pair
        t1 = np.where(g == cnt[rows], agg.sum[ex["pair"][rows]], 0.0)
        t2 = np.where(g == cnt[rows], agg.sumsq[ex["pair"][rows]], 0.0)
        partial = np.flatnonzero((g > 0) & (g < cnt[rows]))
        for lv in np.unique(ex["level"][rows[partial]]).tolist():  # per level: each finest pair once
            sel = partial[ex["level"][rows[partial]] == lv]
            p = ex["pair"][rows[sel]]
            if agg.samples is not None:
                agg.samples.check_first(np.bincount(p, weights=g[sel], minlength=agg.n_pairs).astype(np.int64))
                a, b = _prefix_sums(agg.samples, p, g[sel])
            elif finest_sums is not None:
                a, b = finest_sums(agg, p, g[sel])
            else:
                raise DpoptInputError("plan='hierarchy' truncates users to the nodes' caps and needs the "
                                      "retained samples: aggregate with keep_samples=True")
            t1[sel], t2[sel] = a, b
        out1 = np.bincount(q[rows], weights=t1, minlength=want.size)[part]
        out2 = np.bincount(q[rows], weights=t2, minlength=want.size)[part]
        return out1, out2

    return sums


def _published_plan(hp: Any) -> GridPlan:
    """The hierarchy plan restricted to its published nodes (columns in published order)."""
    p = hp.plan
    pub = np.flatnonzero(p.released)
    return dataclasses.replace(
        p, retained=p.retained[:, pub], budget_mean=np.asarray(p.budget_mean)[pub],
        budget_variance=np.asarray(p.budget_variance)[pub], released=np.asarray(p.released)[pub],
        array_length=np.asarray(p.array_length)[pub],
        info={**p.info, "hierarchy_plan": hp})


def hierarchy_tables(agg: Aggregate, hierarchy: Any, hp: Any) -> dict[str, Any]:
    """The public node table (published nodes; ``parent`` = row of the nearest published ancestor)
    and the answers (each finest grid → its answering published node, −1 if none)."""
    pub = np.flatnonzero(hp.plan.released)
    pos = -np.ones(hp.nodes.level.size, dtype=np.int64)
    pos[pub] = np.arange(pub.size)
    rows = hierarchy.nodes.iloc[hp.nodes.key[pub]].reset_index(drop=True)
    L = hp.nodes.of_grid.shape[0]
    lv = hp.nodes.level[pub]
    G = hp.nodes.of_grid.shape[1]
    some_grid = np.zeros(hp.nodes.level.size, dtype=np.int64)  # one finest grid below every node
    for row in hp.nodes.of_grid:
        some_grid[row] = np.arange(G)
    g = some_grid[pub]
    parent = -np.ones(pub.size, dtype=np.int64)
    for up in range(L - 1, 0, -1):  # coarse to fine: the last published ancestor written is the nearest
        cand = pos[hp.nodes.of_grid[up][g]]
        on = (up > lv) & (cand >= 0)
        parent[on] = cand[on]
    nodes = pd.DataFrame({"cell": rows["cell"].to_numpy(np.int64), "h3_resolution": rows["h3_resolution"].to_numpy(int),
                          "slot": rows["slot"].to_numpy(np.int64), "slot_ns": rows["slot_ns"].to_numpy(np.int64),
                          "cycle_ns": rows["cycle_ns"].to_numpy(np.int64), "parent": parent, "level": lv})
    ans = np.where(hp.answer >= 0, pos[np.maximum(hp.answer, 0)], -1)
    node_cells = np.append(cell_strings(nodes["cell"].to_numpy()), "")  # index -1: no answer
    node_slots = np.append(slot_strings(nodes["slot"].to_numpy()), "")
    node_ends = np.append(slot_strings(nodes["slot"].to_numpy() + nodes["slot_ns"].to_numpy()), "")
    period_end = int(np.max(agg.slots)) + int(agg.slot_ns)  # the public occupancy's last slot end
    every, until = (np.append(x, "") for x in repeat_strings(nodes["cycle_ns"].to_numpy(), period_end))
    answers = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots), "node": ans,
                            "node_cell": node_cells[ans], "node_slot": node_slots[ans], "node_slot_end": node_ends[ans],
                            "node_repeat_every": every[ans], "node_repeat_until": until[ans],
                            "node_level": np.append(lv, -1)[ans]})
    finest = pd.DataFrame({"cell": np.asarray(agg.cells, dtype=np.int64), "slot": np.asarray(agg.slots, dtype=np.int64),
                           "slot_ns": np.int64(agg.slot_ns), "node": ans})
    return {"nodes": nodes, "answers": answers, "answer": ans, "finest": finest}


@dataclass(frozen=True, eq=False)
class PreparedHierarchy:
    """What the release of a hierarchy plan runs on: the published nodes' ``aggregate`` and
    ``plan`` (a ready GridPlan over them), the ``tables`` of :func:`hierarchy_tables`, the planner's
    ``hierarchy_plan``, the ``hierarchy`` and the expansion behind :meth:`truncated_sums`."""

    aggregate: Aggregate
    plan: GridPlan
    tables: dict[str, Any]
    hierarchy_plan: Any
    hierarchy: Any
    finest: Aggregate
    expansion: dict[str, np.ndarray]

    def truncated_sums(self, finest_sums: TruncatedSums | None, rng: np.random.Generator) -> TruncatedSums:
        """Node-pair truncated sums (module doc) from the finest pairs' samples or ``finest_sums``;
        ``rng`` draws the split of a node pair's kept records over its finest pairs."""
        return _node_truncated_sums(self.finest, self.expansion, finest_sums, rng)

    def summary_fields(self) -> dict[str, Any]:
        """The summary's counts of the finest data and the coverage of the plan (public)."""
        agg, hp = self.finest, self.hierarchy_plan
        answered = int((self.tables["answer"] >= 0).sum())
        return {"users": agg.n_users, "records": agg.n_records, "pairs": agg.n_pairs,
                "target": float(hp.plan.error_bound), "grids_within_target": answered,
                "finest_grids": agg.n_grids, "answered_grids": answered, "uncovered_grids": int(hp.uncovered.size),
                "levels": [[int(lv.h3_resolution), int(lv.slot_ns), int(lv.cycle_ns)] for lv in self.hierarchy.levels],
                "fallback": _jsonable_fallback(hp.fallback)}


def prepare_hierarchy(agg: Aggregate, budget: PrivacyBudget, *, bound: float, target: float | None,
                      criterion: str, confidence: float, time_limit: float | None,
                      profile: str | None = None) -> PreparedHierarchy:
    """Plan the hierarchy and aggregate its published nodes (module doc, steps 1–2)."""
    h, hp = plan_nodes(agg, budget, bound=bound, target=target, criterion=criterion, confidence=confidence,
                       time_limit=time_limit, profile=profile)
    tables = hierarchy_tables(agg, h, hp)
    plan = _published_plan(hp)
    plan = dataclasses.replace(plan, info={**plan.info, "hierarchy": tables})
    node_agg, ex = node_aggregate(agg, h, hp)
    return PreparedHierarchy(aggregate=node_agg, plan=plan, tables=tables, hierarchy_plan=hp, hierarchy=h,
                             finest=agg, expansion=ex)


def _jsonable_fallback(fb: dict) -> dict:
    return {"least_tau": {str(k): float(v) for k, v in fb.get("least_tau", {}).items()},
            "finest_level_within_tau": fb.get("finest_level_within_tau")}
