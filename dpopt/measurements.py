"""The contract between the privacy models and the estimation layer (models/README.md, "The release in layers").

Every privacy model (``public-occupancy``, ``user``) turns the contributions table into
:class:`Measurements`: for each *measured node* (a finest grid or one of its public ancestors, an
H3 parent cell × a coarser time slot) the noisy statistics, the exact law of the noise each one
carries, what is public about the node, and the exact budget one user can spend on the whole set.
The estimation layer (:mod:`dpopt.estimation`) turns Measurements into :class:`Estimates`
(a value and an interval per node); it never sees records, so everything it computes is
post-processing of DP outputs and public facts. Private-PGM and OpenDP keep the same split between
measuring and estimating.

This module holds types only (numpy and pandas, no dpopt imports above the core): privacy models
import it to build Measurements, estimation imports it to read them.

Node table (``Measurements.nodes``), one row per measured node, row i is node i:

=============== ===========================================================================
column          meaning
=============== ===========================================================================
cell            int64 H3 index at the node's own resolution
h3_resolution   int, the node's H3 resolution (≤ the finest one)
slot            int64, start of the node's time slot (ns since the epoch, UTC)
slot_ns         int64, length of the slot (ns); the slot is [slot, slot + slot_ns)
parent          int64, row of the node's parent in this table, -1 for a root
cycle_ns        optional int64, 0 or the cycle of a recurring window (an hour-of-day profile
                node covers [slot + j·cycle_ns, slot + j·cycle_ns + slot_ns) for j = 0, 1, …
                up to the period's end; models/hierarchy.md §14); absent means 0
=============== ===========================================================================

Statistics (``Measurements.statistics``), each aligned with the node table (NaN: the node was not
measured for that statistic):

* ``user`` model: ``count`` (noisy record count ñ), ``sum`` (noisy Σ (x − centre) of the kept
  records), ``sumsq`` (noisy Σ (x − centre)²); ``centre`` = U/2.
* ``public-occupancy``: ``mean`` and ``variance`` (the CLIP estimates (6)-(7) with noise, the
  denominators public), each with the worst-case clipping bias bound of seed 002 eq. (11)-(13) in
  :attr:`Statistic.bias_bound`. ``public`` per node: the counts (``n_users``, ``n_records``,
  ``max_user_records``, ``n_users_retained``, ``n_records_retained``), ``released``, the
  sensitivities (``mean_sensitivity``, ``variance_sensitivity``), the plan's budgets
  (``budget_mean``, ``budget_variance``, their sum ``budget``), ``array_length`` and ``noise_abs``
  (the sampler's exact E|noise| of both statistics plus their output roundings). ``info``:
  ``criterion`` (which bound is published), ``plan``, ``user_spend`` (every user's exact spend),
  ``summary`` (the model's public facts for summary.json) and, for plan="hierarchy", ``hierarchy``.
  The direct estimate needs only ``statistics``, ``public`` (``released``, sensitivities, budgets,
  ``noise_abs``), ``bound`` and ``info["criterion"]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "NOISE_FAMILIES",
    "NODE_COLUMNS",
    "ESTIMATE_COLUMNS",
    "NoiseLaw",
    "Statistic",
    "BudgetSpend",
    "Measurements",
    "Estimates",
]

#: the noise families a statistic can carry: exact lattice samplers for real releases, numpy's
#: continuous ones for simulations
NOISE_FAMILIES = ("discrete_laplace", "discrete_gaussian", "laplace", "gaussian")
NODE_COLUMNS = ("cell", "h3_resolution", "slot", "slot_ns", "parent")
#: columns every :class:`Estimates` table has (models/hierarchy.md)
ESTIMATE_COLUMNS = (
    "node", "cell", "h3_resolution", "slot", "slot_ns", "cycle_ns", "released",
    "mean", "mean_error_bound", "mean_direct", "mean_direct_error_bound",
    "variance", "variance_error_bound", "variance_released", "variance_withheld_reason", "method",
)


@dataclass(frozen=True, eq=False)
class NoiseLaw:
    """The exact law of the noise added to one statistic, per node.

    ``family`` one of :data:`NOISE_FAMILIES`. ``scale`` per node (or one value for every node, a
    0-d array: the ``user`` model's statistics share one scale), in the statistic's units:
    Laplace b with density (or pmf on the lattice) ∝ exp(−|z|/b); Gaussian σ with ∝ exp(−z²/2σ²).
    ``lattice`` the spacing of the noise support in the statistic's units (0.0: continuous); for
    the exact samplers the noise is ``lattice``·Z with Z an integer (CKS 2020).
    """

    family: str
    scale: np.ndarray
    lattice: float = 0.0

    def __post_init__(self) -> None:
        if self.family not in NOISE_FAMILIES:
            raise ValueError(f"`family` must be one of {NOISE_FAMILIES}; got {self.family!r}")
        object.__setattr__(self, "scale", np.asarray(self.scale, dtype=float))
        if not (math.isfinite(self.lattice) and self.lattice >= 0.0):
            raise ValueError(f"`lattice` must be a finite number >= 0; got {self.lattice!r}")

    @property
    def discrete(self) -> bool:
        return self.family.startswith("discrete_")

    def variance(self) -> np.ndarray:
        """Var(noise) per node: exact for both Laplace families; σ² for the Gaussians (the discrete
        Gaussian's variance is below σ², CKS 2020 Prop. 19, so σ² is a valid upper bound)."""
        b = self.scale
        if self.family == "discrete_laplace":
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                t = self.lattice / b  # pmf ∝ r^|z|, r = exp(−t); Var(Z) = 2r/(1−r)² = 1/(2 sinh²(t/2))
                v = self.lattice**2 / (2.0 * np.sinh(t / 2.0) ** 2)
            return np.where(b > 0, v, 0.0)
        if self.family == "laplace":
            return 2.0 * b**2
        return b**2


@dataclass(frozen=True, eq=False)
class Statistic:
    """One noisy statistic over the node table: ``value`` (float, NaN where not measured), its
    noise ``law``, and ``bias_bound`` (per node, the largest |bias| contribution bounding can cause
    by the model's public facts; None where the model states none)."""

    name: str
    value: np.ndarray
    law: NoiseLaw
    bias_bound: np.ndarray | None = None


@dataclass(frozen=True)
class BudgetSpend:
    """The exact budget one user can spend on the whole release.

    ``unit`` "epsilon" (pure ε-DP, basic composition) or "rho" (ρ-zCDP). ``pieces`` what each step
    spent per user (bounds choice, selection, each statistic, each level), in ``unit`` except names
    ending in ``_epsilon``. ``total`` the largest total any user spends (recounted exactly from the
    pieces or the plan). ``delta`` δ of the (ε, δ) statement (0 for pure ε). ``epsilon`` the ε the
    release satisfies (``total`` for pure ε; the tight zCDP → (ε, δ) conversion for ρ; None if δ = 0
    under ρ).
    """

    unit: str
    total: float
    pieces: Mapping[str, float] = field(default_factory=dict)
    delta: float = 0.0
    epsilon: float | None = None


@dataclass(frozen=True, eq=False)
class Measurements:
    """What a privacy model publishes before estimation (module doc).

    ``privacy_model`` "user" or "public-occupancy"; ``bound`` U (values in [0, U]); ``centre`` the
    value sums are centred at (U/2 under ``user``, 0 otherwise); ``nodes`` the node table
    (:data:`NODE_COLUMNS`); ``statistics`` name → :class:`Statistic`; ``public`` per node, the
    columns public under the model (``n_users``, ``n_records`` under public-occupancy; none under
    ``user``); ``finest`` the finest grids the release answers (cell, slot at the finest resolution
    and slot length: a public list, the released grids, or the public occupancy), each mapped to the
    node that is itself (column ``node``, -1 if that grid was not measured); ``spend`` the budget;
    ``info`` public facts of the model (bounds k and c, the plan, its status) for the report.
    """

    privacy_model: str
    bound: float
    nodes: pd.DataFrame
    statistics: Mapping[str, Statistic]
    spend: BudgetSpend
    centre: float = 0.0
    public: pd.DataFrame = field(default_factory=pd.DataFrame)
    finest: pd.DataFrame = field(default_factory=pd.DataFrame)
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in NODE_COLUMNS if c not in self.nodes.columns]
        if missing:
            raise ValueError(f"`nodes` lacks the columns {missing}; got {list(self.nodes.columns)}")
        n = len(self.nodes)
        for name, stat in self.statistics.items():
            if np.shape(stat.value) != (n,):
                raise ValueError(f"statistic {name!r} has shape {np.shape(stat.value)}; the node table has {n} rows")

    @property
    def n_nodes(self) -> int:
        return int(len(self.nodes))

    @property
    def node_cycles(self) -> np.ndarray:
        """Each node's ``cycle_ns`` (0 where the table has none: contiguous slots)."""
        if "cycle_ns" in self.nodes.columns:
            return self.nodes["cycle_ns"].to_numpy(dtype=np.int64)
        return np.zeros(self.n_nodes, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Estimates:
    """Measurements → values with intervals (post-processing only).

    ``table`` one row per node with :data:`ESTIMATE_COLUMNS`: ``mean`` the published (model)
    estimate and ``mean_error_bound`` the half-width of its interval at ``confidence``;
    ``mean_direct`` the unbiased (direct or GLS) estimate and its half-width; the variance likewise,
    ``variance_released`` False with the reason where its interval is not narrower than its range;
    ``method`` how the row was estimated. ``answers`` one row per finest grid (cell, slot) with the
    ``node`` that answers it (the smallest released node containing it). ``measurements`` what they
    were computed from.
    """

    table: pd.DataFrame
    answers: pd.DataFrame
    confidence: float
    method: str
    measurements: Measurements
    info: Mapping[str, Any] = field(default_factory=dict)
