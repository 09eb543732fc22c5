"""A ``public-occupancy`` release as published: the table and summary (:class:`ReleaseResult`,
:class:`ReleaseSummary`), formatted by :func:`public_occupancy_release` from the privacy model's
:class:`~dpopt.measurements.Measurements` (:func:`dpopt.privacy.public_occupancy.measure_release`)
and the estimation layer's :class:`~dpopt.measurements.Estimates`
(:func:`dpopt.estimation.direct.direct`), like :func:`dpopt.writers.user.user_release` for the
``user`` model.

Nothing is computed here: every column and summary field is copied from the Measurements (noisy
statistics, the public counts, sensitivities, budgets and noise scales, the model's public facts and
its budget spend), the Estimates (values post-processed into range, error bounds, the headline
bounds) or the ingest report (value-independent counts), and formatted (H3 cells and slots as text,
cell centres). The files are written by :mod:`.public_occupancy`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..measurements import Estimates, Measurements
from ..mechanisms.grid import GridRelease
from ..plan import GridPlan
from ..privacy.model_text import VALUE_DEPENDENT_INGEST
from ..privacy.public_occupancy import pair_retained
from ..records.aggregate import Aggregate
from ..records.grid import cell_centres, cell_strings, repeat_strings, slot_strings
from ..records.ingest import IngestReport

__all__ = ["ReleaseSummary", "ReleaseResult", "public_occupancy_release", "release_table"]

#: the public per-node columns of the Measurements copied into the table, in table order
_COUNT_COLUMNS = ("n_users", "n_records", "max_user_records", "n_users_retained", "n_records_retained")


@dataclass(frozen=True)
class ReleaseSummary:
    """Headline numbers of a release (written to summary.json): all public by the privacy model or
    computed from DP outputs and public counts (no timings, no value-dependent counts).

    ``privacy_model`` "public-occupancy" with ``privacy_model_description`` in plain words.
    ``mechanism`` "laplace" (pure ε-DP) or "gaussian" (ρ-zCDP); ``budget_mode`` "per-grid" (the
    seeds' ε per grid) or "total"; ``budget`` the budget in words.
    ``degradation`` K = max_ℓ (released grids ℓ is kept in) after the plan.
    ``epsilon`` the per-grid ε (per-grid mode; else None). ``epsilon_total``: per-grid mode K·ε
    (seed 002 Thm II.3); total mode, Laplace: the largest exact spend of any user (the samplers'
    rounded budgets summed); Gaussian: the (ε, δ) that ``rho_total`` implies (CKS 2020 Cor. 13; None
    without δ). ``rho_total`` the largest ρ any user spends (Gaussian). ``delta`` δ (Gaussian).
    ``degradation_baseline`` G₁, ``epsilon_total_baseline`` = G₁·ε and ``epsilon_basic_composition``
    = G·ε (Thm II.2) in per-grid mode, for comparison.
    ``error_bound`` the largest per-grid worst-case error E = max_g E_g over released grids (bias +
    expected |noise| at the plan's budgets, eq. (11)-(13)); ``error_bound_target`` the E the plan
    had to meet; ``error_bound_released`` the same with the sampler's actual noise.
    ``criterion`` and ``confidence`` of the per-grid ``mean_error_bound``/``variance_error_bound``
    of release.csv; ``released_grids``; ``target`` τ, ``grids_within_target`` and ``frontier``
    (coverage against τ, from public counts only) of the budget plan.
    ``ingest`` the value-independent ingestion counts.
    """

    privacy_model: str
    privacy_model_description: str
    mechanism: str
    budget_mode: str
    budget: str
    users: int
    grids: int
    records: int
    pairs: int
    plan: str
    plan_status: str
    plan_gap: float
    pseudo_users: bool
    degradation: int
    degradation_baseline: int
    epsilon: float | None
    epsilon_total: float | None
    rho_total: float | None
    delta: float | None
    epsilon_total_baseline: float | None
    epsilon_basic_composition: float | None
    error_bound: float
    error_bound_target: float
    error_bound_released: float
    criterion: str
    confidence: float
    released_grids: int
    target: float | None
    grids_within_target: int | None
    frontier: dict[str, Any] | None
    suppressed_pairs: int
    suppressed_records: int
    truncated_records: int
    withheld_grids: int
    dropped_records: int
    bound: float
    h3_resolution: int
    slot: str
    split: str
    noise: str
    granularity: float
    seeded: bool
    ingest: dict[str, Any] = field(default_factory=dict)
    #: plan="hierarchy" only (None otherwise): occupied finest grids, those answered by a published
    #: node within τ, those answered by none, the levels [(H3 resolution, slot ns; 0 = period)],
    #: and the planner's fallback (least τ per level over the unanswered grids)
    finest_grids: int | None = None
    answered_grids: int | None = None
    uncovered_grids: int | None = None
    levels: list[Any] | None = None
    fallback: dict[str, Any] | None = None
    #: the lower end L of the values: they lie in [lower, bound] (0 unless a lower end was given)
    lower: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (summary.json)."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class ReleaseResult:
    """A DP release: per-grid ``table``, ``summary``, and what produced them.

    ``table`` columns: grid, cell, slot, cell_lat, cell_lng, n_users, n_records, max_user_records,
    n_users_retained, n_records_retained, mean, variance, released, mean_sensitivity,
    variance_sensitivity, epsilon_mean, epsilon_variance, mean_noise_scale, variance_noise_scale,
    error_bound, array_length. Grids whose retained set is empty are not released (NaN).
    Formatted by :func:`public_occupancy_release` from the model's ``measurements`` and the
    estimation layer's ``estimates`` (both kept). ``plan`` the :class:`GridPlan` released. For the
    data holder only, never published: ``aggregate`` the contributions measured (the published
    nodes' under plan="hierarchy"; the kept and suppressed pairs of diagnostics/ come from it),
    ``grids`` the mechanism's :class:`GridRelease` (it holds the statistics before noise) and
    ``diagnostics``: ``timings`` (s) and the full ``ingest`` counts (including value-dependent ones).
    """

    table: pd.DataFrame
    summary: ReleaseSummary
    ingest: IngestReport
    aggregate: Aggregate
    plan: GridPlan
    grids: GridRelease | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    #: per statistic and criterion, the half-widths of :func:`dpopt.estimation.direct.clip_error_bounds`
    error_bounds: dict[str, np.ndarray] = field(default_factory=dict)
    measured: Measurements | None = None
    estimates: Estimates | None = None

    def measurements(self) -> Measurements:
        """The model's :class:`Measurements` this release was estimated from: per grid the noisy
        (raw) ``mean`` and ``variance`` with their noise laws and worst-case clipping-bias bounds;
        ``public`` the public counts, sensitivities and budgets; ``info`` the plan and its facts."""
        if self.measured is None:
            raise DpoptInputError("this ReleaseResult was built without its Measurements")
        return self.measured

    def gamma(self) -> np.ndarray:
        """Retained count Γ of every pair of the aggregate."""
        return pair_retained(self.aggregate, self.plan)

    def suppressed(self) -> np.ndarray:
        """Indices of the pairs the plan suppressed (Γ = 0), in pair order."""
        return np.flatnonzero(self.gamma() == 0)

    def suppressed_frame(self) -> pd.DataFrame:
        """The suppressed (user, grid) pairs: user, grid, cell, slot, records."""
        agg = self.aggregate
        p = self.suppressed()
        g = agg.pair_grid[p]
        return pd.DataFrame({
            "user": agg.users[agg.pair_user[p]],
            "grid": g,
            "cell": self.table["cell"].to_numpy()[g] if len(p) else np.empty(0, object),
            "slot": self.table["slot"].to_numpy()[g] if len(p) else np.empty(0, object),
            "records": agg.count[p],
        })

    def user_grids(self) -> np.ndarray:
        """Grids each user keeps after the plan (Γ_{g,ℓ} > 0), per user."""
        return self.plan.user_grids()


def public_occupancy_release(m: Measurements, est: Estimates, *, contributions: Aggregate,
                             grids: GridRelease | None = None, ingest: IngestReport | None = None,
                             diagnostics: dict[str, Any] | None = None) -> ReleaseResult:
    """The release as published, from the model's Measurements ``m`` and their direct Estimates
    ``est`` (module doc). ``contributions``, ``grids`` and ``diagnostics`` are the data holder's
    (diagnostics/): they are carried, not read."""
    ingest = ingest or IngestReport()
    table = release_table(m, est)
    published_ingest = {k: v for k, v in ingest.as_dict().items() if k not in VALUE_DEPENDENT_INGEST}
    summary = ReleaseSummary(**m.info.summary, **est.info.summary, dropped_records=ingest.dropped_records,
                             ingest=published_ingest)
    return ReleaseResult(table=table, summary=summary, ingest=ingest, aggregate=contributions, plan=m.info.plan,
                         grids=grids, diagnostics=dict(diagnostics or {}), error_bounds=est.info.error_bounds,
                         measured=m, estimates=est)


def release_table(m: Measurements, est: Estimates) -> pd.DataFrame:
    """One row per measured grid (node): public counts, released values (post-processed into
    [0, U] and [0, U²/4], raw beside them), error bounds of both criteria, sensitivities, budgets,
    noise scales, seed 002's worst-case error; under plan="hierarchy" each node's ``slot_end``,
    ``h3_resolution`` and ``level``. The variance is not withheld here: release.csv is
    (:func:`dpopt.writers.public_occupancy.withhold_variance`, from the Estimates' columns).

    Budget columns are named after the unit: ``epsilon``, ``epsilon_mean``, ``epsilon_variance``
    (Laplace) or ``rho``, ``rho_mean``, ``rho_variance`` (Gaussian, zCDP).
    """
    pub, t, nodes = m.public, est.table, m.nodes
    crit = est.info.summary["criterion"]
    other = "worst_case" if crit == "noise" else "noise"
    unit = m.spend.unit
    cells = nodes["cell"].to_numpy()
    lat, lng = cell_centres(cells)
    table = pd.DataFrame({
        "grid": np.arange(m.n_nodes, dtype=np.int64), "cell": cell_strings(cells),
        "slot": slot_strings(nodes["slot"].to_numpy()), "cell_lat": lat, "cell_lng": lng,
        **{c: pub[c].to_numpy() for c in _COUNT_COLUMNS},
        "released": pub["released"].to_numpy(),
        "mean": t["mean"].to_numpy(), "variance": t["variance_in_range"].to_numpy(),
        "mean_raw": m.statistics["mean"].value, "variance_raw": m.statistics["variance"].value,
        "mean_error_bound": t[f"mean_error_bound_{crit}"].to_numpy(),
        "variance_error_bound": t[f"variance_error_bound_{crit}"].to_numpy(),
        f"mean_error_bound_{other}": t[f"mean_error_bound_{other}"].to_numpy(),
        f"variance_error_bound_{other}": t[f"variance_error_bound_{other}"].to_numpy(),
        unit: pub["budget"].to_numpy(),
        "mean_sensitivity": pub["mean_sensitivity"].to_numpy(), "variance_sensitivity": pub["variance_sensitivity"].to_numpy(),
        f"{unit}_mean": pub["budget_mean"].to_numpy(), f"{unit}_variance": pub["budget_variance"].to_numpy(),
        "mean_noise_scale": m.statistics["mean"].law.scale, "variance_noise_scale": m.statistics["variance"].law.scale,
        "error_bound": t["error_bound"].to_numpy(), "array_length": pub["array_length"].to_numpy(),
    })
    tables = m.info.hierarchy
    if tables is None:
        return table
    fin = tables["finest"]
    return _node_columns(table, tables["nodes"], int(fin["slot"].max()) + int(fin["slot_ns"].iloc[0]))


def _node_columns(table: pd.DataFrame, nodes: pd.DataFrame, period_end: int) -> pd.DataFrame:
    """plan="hierarchy": the table with ``slot_end``, ``repeat_every``/``repeat_until`` (a profile
    node's cycle as ISO 8601 and ``period_end``, the occupancy's last slot end; empty for contiguous
    slots: models/hierarchy.md §2), ``h3_resolution`` and ``level`` of every node."""
    out = table.copy()
    cycle = nodes["cycle_ns"].to_numpy(np.int64) if "cycle_ns" in nodes.columns else np.zeros(len(nodes), np.int64)
    out.insert(3, "slot_end", slot_strings(nodes["slot"].to_numpy() + nodes["slot_ns"].to_numpy()))
    every, until = repeat_strings(cycle, period_end)
    out.insert(4, "repeat_every", every)
    out.insert(5, "repeat_until", until)
    out.insert(6, "h3_resolution", nodes["h3_resolution"].to_numpy())
    out.insert(7, "level", nodes["level"].to_numpy())
    return out
