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
                up to the period's end; models/hierarchy.md §2); absent means 0
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
  (the sampler's exact E|noise| of both statistics plus their output roundings).

The model's public facts (``Measurements.info``), one typed object per model:

* :class:`UserInfo` (the ``user`` model): the bounds (``k``, ``c``; for the place and engine
  releases also ``record_cap``, ``clamp``, ``declared_bound``), the lattice step ``lattice``, the
  levels measured and their selection, the rules in words for summary.json, and ``engine`` (the
  optimised engine's ``EngineInfo``);
* :class:`PublicOccupancyInfo` (``public-occupancy``): ``plan``, ``criterion`` (which error bound
  is published), ``user_spend`` (every user's exact spend), ``mechanism``, ``summary`` (the public
  facts for summary.json) and, for plan="hierarchy", ``hierarchy``.

Both also carry ``lower`` (L of values read in [L, U], set after formatting; the Measurements stay
in the shifted units) and ``timezone`` (the zone the slots were cut in). The class docstrings give
every field's meaning. The direct estimate needs only ``statistics``, ``public`` (``released``,
sensitivities, budgets, ``noise_abs``), ``bound`` and ``info.criterion``.

Measurements built by hand may give ``info`` as a plain mapping of field names (e.g.
``{"criterion": "worst_case"}``): it is converted to the model's class on construction
(:meth:`UserInfo.from_mapping`, :meth:`PublicOccupancyInfo.from_mapping`), unknown names refused.
For code written against the earlier ``info`` dict, both classes also read as a read-only mapping
(``info["k"]``, ``info.get("clamp")``, ``"clamp" in info``, ``{**info}``) of the fields that are not
None (``info["granularity"]``, the earlier second name of ``lattice``, still reads it); dpopt's own
code reads the attributes.

The estimator's own facts (``Estimates.info``) are one typed object too, :class:`EstimatesInfo`,
one class for every estimator (the hierarchical and crossed estimators share most of their facts,
and the writers read them without asking which estimator ran); each estimator sets its fields and
leaves the others None:

* ``direct`` of ``public-occupancy``: ``summary`` (the headline bounds for summary.json) and
  ``error_bounds`` (per grid, both criteria's bounds on the mean and the variance); ``direct`` of
  ``user`` sets none;
* ``pooled``: ``pooling`` (the map-wide values pooled toward and the between-grid variances);
* ``hierarchical``: ``target``, ``nodes_released``, ``z``, ``bias_allowance``, ``interval`` and,
  with shrinkage, ``tau2_by_level``;
* ``crossed``: ``components``, ``components_upper``, ``spread_bound``, ``fit``, ``z``,
  ``interval``, ``nodes_released`` and ``target`` (NaN).

Like the model's facts it reads as a read-only mapping of the fields that are set
(``est.info["target"]``), and a plain mapping given as ``Estimates(info=...)`` is converted
(:meth:`EstimatesInfo.from_mapping`), unknown names refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
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
    "UserInfo",
    "PublicOccupancyInfo",
    "INFO_CLASSES",
    "EstimatesInfo",
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


class _ReadOnlyMapping:
    """Read-only mapping access to a frozen dataclass's fields that are not None (the earlier
    ``info`` dict's reading: ``info["k"]``, ``info.get(...)``, ``in``, ``{**info}``); no warning,
    so code written against the dict keeps working. ``_ALIASES`` earlier names of a field."""

    _ALIASES: Mapping[str, str] = {}

    def __getitem__(self, key: str) -> Any:
        name = self._ALIASES.get(key, key)
        value = getattr(self, name, None) if name in self._field_names() else None
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> list[str]:
        return [n for n in self._field_names() if getattr(self, n) is not None]

    def items(self) -> list[tuple[str, Any]]:
        return [(n, getattr(self, n)) for n in self.keys()]

    def values(self) -> list[Any]:
        return [getattr(self, n) for n in self.keys()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    @classmethod
    def _field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    @classmethod
    def from_mapping(cls, info: Mapping[str, Any]) -> Any:
        """The typed facts from a mapping of field names (earlier names in ``_ALIASES`` accepted);
        unknown names and missing required fields are refused."""
        given = {cls._ALIASES.get(k, k): v for k, v in info.items()}
        unknown = sorted(set(given) - set(cls._field_names()))
        if unknown:
            raise ValueError(f"{cls.__name__} has no fields {unknown}; its fields are {list(cls._field_names())}")
        try:
            return cls(**given)
        except TypeError as e:
            raise ValueError(f"{cls.__name__}: {e}") from None


@dataclass(frozen=True, eq=False)
class UserInfo(_ReadOnlyMapping):
    """The ``user`` model's public facts (module doc). Every release sets the first five; the
    others are set by the strategies that have them (None: not this release's).

    Attributes
    ----------
    k : int
        Grids a user keeps (1 under the place and engine releases).
    c : int
        Records a user keeps per grid (the record cap T under the place and engine releases).
    lattice : float
        λ, the lattice step values are rounded to (sums are λ·integers); ``granularity`` is accepted
        as its earlier name on input.
    noise : str
        The sampler in words (the engine: the noise option's name).
    h3_resolution : int
        The finest H3 resolution.
    slot, slot_ns : str, int
        The finest slot length in words (e.g. "1h") and in ns.
    levels : sequence
        The measured levels as (h3_resolution, slot_ns, cycle_ns), finest first.
    bounds_rule, split_rule, partitions, public : str
        In words: how (k, c) (or T and B) were chosen; how the budget was split between the
        statistics; where the grids come from; what the release takes as public.
    shape : str
        "adaptive", "place" or "engine" (None: the flat release).
    mechanism : str
        "laplace" or "gaussian".
    seeded : bool
        Whether the noise was seeded (a simulation).
    delta_selection : float
        δ spent on private selection (0 with a list).
    selection_threshold, noisy_users, totals : float, ndarray, tuple
        The flat release: the private selection's threshold (None with a list), its noisy user
        counts per released grid, the noisy (count, sum, sumsq) over all grids for pooling.
    sumsq_centre : float
        Levels: the centre² the sums of squares are taken about (U²/8).
    first_level, first_level_scores, target : int, sequence, float
        Levels: the first level measured, each level's score for it, τ the target error.
    level_sensitivity, level_bounds, linked_levels, tree_consistent : sequence, sequence, sequence, bool
        Levels: each level's (count ℓ1, merge) sensitivities; each level's record cap (None: the
        (k, c) bounds); which levels keep the tree constraint; whether every level but the last does.
    selection, epsilon_budget : sequence, float
        Private selection: per level its k, threshold and released count; the ε given.
    record_cap, map_record_cap, clamp, declared_bound : int, int, float, float
        Place and engine: T, the map's own cap, the clamp B ≤ U the values were clamped to, U as
        declared (``Measurements.bound`` is then B).
    record_histogram, clamp_histogram : Mapping
        Place and engine: the DP histograms T and B were chosen from (the engine's clamp histograms,
        this and ``clamp_low_histogram``, also hold their ``epsilon`` and ``unseen_first``: the first
        histogram where it showed nothing and was measured again; models/engine.md §2).
    clamp_low, clamp_low_histogram : float, Mapping
        The engine: the DP lower clamp A < B (values clamped to [A, B]; its ``Measurements`` read
        them shifted by −A: ``bound`` = B − A) and the DP histogram it was chosen from.
    sumsq_measured : bool
        Whether sums of squares were bought.
    engine : EngineInfo
        The optimised engine's measurement record (:class:`dpopt.privacy.user.engine.EngineInfo`).
    lower, timezone : float, str
        After formatting: L of values read in [L, U]; the zone slots were cut in.
    """

    _ALIASES = {"granularity": "lattice"}

    k: int
    c: int
    lattice: float
    noise: str
    h3_resolution: int
    slot: str | None = None
    slot_ns: int | None = None
    levels: Any = None
    bounds_rule: str | None = None
    split_rule: str | None = None
    partitions: str | None = None
    shape: str | None = None
    mechanism: str | None = None
    seeded: bool | None = None
    delta_selection: float = 0.0
    public: str | None = None
    selection_threshold: float | None = None
    noisy_users: np.ndarray | None = None
    totals: tuple | None = None
    sumsq_centre: float | None = None
    first_level: int | None = None
    first_level_scores: Any = None
    target: float | None = None
    level_sensitivity: Any = None
    level_bounds: Any = None
    linked_levels: Any = None
    tree_consistent: bool | None = None
    selection: Any = None
    epsilon_budget: float | None = None
    record_cap: int | None = None
    map_record_cap: int | None = None
    clamp: float | None = None
    declared_bound: float | None = None
    record_histogram: Mapping[str, Any] | None = None
    clamp_histogram: Mapping[str, Any] | None = None
    clamp_low: float | None = None
    clamp_low_histogram: Mapping[str, Any] | None = None
    sumsq_measured: bool = True
    engine: Any = None
    lower: float | None = None
    timezone: str | None = None


@dataclass(frozen=True, eq=False)
class PublicOccupancyInfo(_ReadOnlyMapping):
    """The ``public-occupancy`` model's public facts (module doc); None: not given (Measurements
    built by hand for estimation need only ``criterion``).

    Attributes
    ----------
    plan : dpopt.plan.GridPlan
        The plan released.
    criterion : str
        Which error bound is published: "noise" or "worst_case".
    user_spend : ndarray
        Every user's exact spend (over the plan's users).
    mechanism : str
        "laplace" or "gaussian".
    summary : Mapping[str, Any]
        The model's public facts for summary.json (field → value).
    hierarchy : Mapping
        ``plan="hierarchy"``: the hierarchy's tables (nodes, finest grids, answers, ...).
    lower, timezone : float, str
        After formatting: L of values read in [L, U]; the zone slots were cut in.
    """

    plan: Any = None
    criterion: str = "noise"
    user_spend: np.ndarray | None = None
    mechanism: str | None = None
    summary: Mapping[str, Any] | None = None
    hierarchy: Mapping[str, Any] | None = None
    lower: float | None = None
    timezone: str | None = None


@dataclass(frozen=True, eq=False)
class EstimatesInfo(_ReadOnlyMapping):
    """The estimator's own facts (``Estimates.info``): one class for every estimator, each setting
    its own fields (None: not this estimator's). The hierarchical and crossed estimators share
    most of theirs (``target``, ``nodes_released``, ``z``, ``interval``) and the writers read them
    without asking which estimator ran.

    Attributes
    ----------
    summary : Mapping[str, Any] or None
        ``direct`` of ``public-occupancy``: the headline bounds for summary.json (field → value):
        ``error_bound`` (the largest E_g of a released grid), ``error_bound_released`` (the same
        with the sampler's exact E|noise|), ``criterion``, ``confidence`` and ``released_grids``.
    error_bounds : Mapping[str, numpy.ndarray] or None
        ``direct`` of ``public-occupancy``: per grid the bounds on |released − statistic| at the
        confidence, keys ``{mean,variance}_{noise,worst_case}``, NaN where not released
        (:func:`dpopt.estimation.direct.clip_error_bounds`).
    pooling : Mapping[str, float] or None
        ``pooled``: the map-wide values pooled toward, ``mean0``, ``var0``, and the between-grid
        variances ``tau2_mean``, ``tau2_var`` (:func:`dpopt.estimation.pooling.pool_estimates`).
    tau2_by_level : list of float or None
        ``hierarchical`` with shrinkage: τ² of the node means per level, finest first.
    target : float or None
        ``hierarchical``: τ, a node answers its finest grids when its direct half-width is ≤ τ;
        ``crossed``: NaN (every listed grid is answered).
    nodes_released : int or None
        ``hierarchical`` and ``crossed``: the number of nodes released.
    z : float or None
        ``hierarchical`` and ``crossed``: the normal quantile of the confidence the half-widths
        use (None: no node was measured).
    bias_allowance : float or None
        ``hierarchical``: κ, both half-widths grow by κ·σ̂ for the bias of contribution bounding.
    interval : str or None
        ``hierarchical`` and ``crossed``: how ``mean_error_bound`` is made, in words.
    components : Mapping[str, float] or None
        ``crossed``: the fitted variance component of each factor (factor name → σ²; empty when
        nothing was estimated).
    components_upper : Mapping[str, float] or None
        ``crossed``: the upper confidence end of each component (factor name → σ², "residual" too).
    spread_bound : float or None
        ``crossed``: the cap on the components (the smaller of the spread and between bounds; NaN
        when nothing was estimated).
    fit : str or None
        ``crossed``: the fit's status in words (and the factors left out for memory).
    """

    summary: Mapping[str, Any] | None = None
    error_bounds: Mapping[str, np.ndarray] | None = None
    pooling: Mapping[str, float] | None = None
    tau2_by_level: list[float] | None = None
    target: float | None = None
    nodes_released: int | None = None
    z: float | None = None
    bias_allowance: float | None = None
    interval: str | None = None
    components: Mapping[str, float] | None = None
    components_upper: Mapping[str, float] | None = None
    spread_bound: float | None = None
    fit: str | None = None


Mapping.register(UserInfo)
Mapping.register(PublicOccupancyInfo)
Mapping.register(EstimatesInfo)

#: the typed facts of each privacy model
INFO_CLASSES: Mapping[str, type] = {"user": UserInfo, "public-occupancy": PublicOccupancyInfo}


def _typed_info(privacy_model: str, info: Any) -> UserInfo | PublicOccupancyInfo:
    """``info`` as the model's typed facts: a typed object kept (it must be the model's class), a
    mapping converted (:meth:`UserInfo.from_mapping`, :meth:`PublicOccupancyInfo.from_mapping`)."""
    cls = INFO_CLASSES.get(privacy_model)
    if cls is None:
        raise ValueError(f"`privacy_model` must be one of {list(INFO_CLASSES)}; got {privacy_model!r}")
    if isinstance(info, (UserInfo, PublicOccupancyInfo)):
        if not isinstance(info, cls):
            raise ValueError(f"a {privacy_model!r} release's info must be a {cls.__name__}; got {type(info).__name__}")
        return info
    return cls.from_mapping({} if info is None else info)



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
    ``info`` public facts of the model, typed: :class:`UserInfo` or :class:`PublicOccupancyInfo`
    (a plain mapping of their field names is converted on construction, module doc).
    """

    privacy_model: str
    bound: float
    nodes: pd.DataFrame
    statistics: Mapping[str, Statistic]
    spend: BudgetSpend
    centre: float = 0.0
    public: pd.DataFrame = field(default_factory=pd.DataFrame)
    finest: pd.DataFrame = field(default_factory=pd.DataFrame)
    info: UserInfo | PublicOccupancyInfo = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "info", _typed_info(self.privacy_model, self.info))
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
    were computed from. ``info`` the estimator's own facts, typed: :class:`EstimatesInfo` (direct:
    ``summary``, ``error_bounds``; pooled: ``pooling``; hierarchical: ``target`` …; a plain mapping
    of its field names is converted on construction, module doc).
    """

    table: pd.DataFrame
    answers: pd.DataFrame
    confidence: float
    method: str
    measurements: Measurements
    info: EstimatesInfo = field(default_factory=EstimatesInfo)

    def __post_init__(self) -> None:
        if not isinstance(self.info, EstimatesInfo):
            object.__setattr__(self, "info", EstimatesInfo.from_mapping({} if self.info is None else self.info))
