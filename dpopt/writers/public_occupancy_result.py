"""A ``public-occupancy`` release as published: its table and summary (a
:class:`~dpopt.writers.result.Release` with a :class:`ReleaseSummary`), formatted by :func:`public_occupancy_release` from the privacy model's
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

from ..measurements import Estimates, Measurements
from ..mechanisms.grid import GridRelease
from ..privacy.model_text import VALUE_DEPENDENT_INGEST
from ..records.aggregate import Aggregate
from ..records.ingest import IngestReport
from .result import ANSWER_COLUMNS, Release, node_frame, own_answers, release_frame

__all__ = ["ReleaseSummary", "public_occupancy_release", "release_table"]

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


#: ingest facts about how the input was laid out, not about the data (the number of chunks read: one
#: file or four, --chunksize): diagnostics only, so that one data set gives one published folder
LAYOUT_INGEST: frozenset[str] = frozenset({"chunks"})


def public_occupancy_release(m: Measurements, est: Estimates, *, contributions: Aggregate,
                             grids: GridRelease | None = None, ingest: IngestReport | None = None,
                             diagnostics: dict[str, Any] | None = None) -> Release:
    """The release as published, from the model's Measurements ``m`` and their direct Estimates
    ``est`` (module doc). ``contributions``, ``grids`` and ``diagnostics`` are the data holder's
    (diagnostics/): they are carried, not read."""
    ingest = ingest or IngestReport()
    table = release_table(m, est)
    published_ingest = {k: v for k, v in ingest.as_dict().items()
                        if k not in VALUE_DEPENDENT_INGEST and k not in LAYOUT_INGEST}
    summary = ReleaseSummary(**m.info.summary, **est.info.summary, dropped_records=ingest.dropped_records,
                             ingest=published_ingest)
    return Release(table=table, summary=summary, answers=_answers(m, table), measurements=m, estimates=est,
                   diagnostics=dict(diagnostics or {}), aggregate=contributions, plan=m.info.plan, grids=grids,
                   ingest=ingest, error_bounds=est.info.error_bounds)


def release_table(m: Measurements, est: Estimates) -> pd.DataFrame:
    """release.csv (:data:`~dpopt.writers.result.RELEASE_COLUMNS` first): one row per measured
    grid (node) with its released values (post-processed into [0, U] and [0, U²/4]) and the error
    bounds of the published criterion; where a released grid's variance interval is not narrower
    than [0, U²/4] (the Estimates' ``variance_released``), ``variance``, its bound and
    ``variance_raw`` are blank and ``variance_withheld_reason`` says why. Then the model's columns:
    ``grid`` (row index), ``level`` (plan="hierarchy"), the public counts, the raw noisy values, the
    other criterion's bounds, budgets, sensitivities, noise scales, seed 002's worst-case error and
    the array length.

    Budget columns are named after the unit: ``epsilon``, ``epsilon_mean``, ``epsilon_variance``
    (Laplace) or ``rho``, ``rho_mean``, ``rho_variance`` (Gaussian, zCDP).
    """
    pub, t, nodes = m.public, est.table, m.nodes
    crit = est.info.summary["criterion"]
    other = "worst_case" if crit == "noise" else "noise"
    unit = m.spend.unit
    cycle = nodes["cycle_ns"].to_numpy(np.int64) if "cycle_ns" in nodes.columns else 0
    fin = m.finest
    period_end = int(fin["slot"].max()) + int(fin["slot_ns"].iloc[0]) if len(fin) else 0
    frame = node_frame(nodes["cell"].to_numpy(), nodes["slot"].to_numpy(), nodes["slot_ns"].to_numpy(),
                       nodes["h3_resolution"].to_numpy(), cycle_ns=cycle, period_end=period_end)
    shown = t["variance_released"].to_numpy(dtype=bool)
    withheld = pub["released"].to_numpy(dtype=bool) & ~shown

    def blank(values: Any) -> np.ndarray:
        return np.where(withheld, np.nan, np.asarray(values, dtype=float))

    columns: dict[str, Any] = {
        "released": pub["released"].to_numpy(),
        "mean": t["mean"].to_numpy(), "mean_error_bound": t[f"mean_error_bound_{crit}"].to_numpy(),
        "variance": blank(t["variance_in_range"]), "variance_error_bound": blank(t[f"variance_error_bound_{crit}"]),
        "variance_released": shown, "variance_withheld_reason": t["variance_withheld_reason"].to_numpy(),
        "grid": np.arange(m.n_nodes, dtype=np.int64),
        **({"level": m.info.hierarchy["nodes"]["level"].to_numpy()} if m.info.hierarchy is not None else {}),
        **{c: pub[c].to_numpy() for c in _COUNT_COLUMNS},
        "mean_raw": m.statistics["mean"].value, "variance_raw": blank(m.statistics["variance"].value),
        f"mean_error_bound_{other}": t[f"mean_error_bound_{other}"].to_numpy(),
        f"variance_error_bound_{other}": t[f"variance_error_bound_{other}"].to_numpy(),
        unit: pub["budget"].to_numpy(),
        "mean_sensitivity": pub["mean_sensitivity"].to_numpy(), "variance_sensitivity": pub["variance_sensitivity"].to_numpy(),
        f"{unit}_mean": pub["budget_mean"].to_numpy(), f"{unit}_variance": pub["budget_variance"].to_numpy(),
        "mean_noise_scale": m.statistics["mean"].law.scale, "variance_noise_scale": m.statistics["variance"].law.scale,
        "error_bound": t["error_bound"].to_numpy(), "array_length": pub["array_length"].to_numpy(),
    }
    return release_frame(frame, columns)


def _answers(m: Measurements, table: pd.DataFrame) -> pd.DataFrame:
    """answers.csv: plan="hierarchy", each finest grid → its answering published node (the public
    hierarchy's, empty where none answers), :data:`~dpopt.writers.result.ANSWER_COLUMNS` then the
    node's row in release.csv (``node``, −1: none) and its level; otherwise every grid answers itself."""
    tables = m.info.hierarchy
    if tables is None:
        return own_answers(table)
    ans = tables["answers"]
    node = ans["node"].to_numpy(np.int64)
    out = ans[["cell", "slot"]].copy()
    for col in ("cell", "slot", "slot_end", "repeat_every", "repeat_until"):  # the node's release.csv row
        out[f"node_{col}"] = np.append(table[col].to_numpy(dtype=object), "")[node]  # index -1: no answer
    res = np.append(table["h3_resolution"].to_numpy(), 0)[node]
    out["node_h3_resolution"] = pd.array(np.where(node >= 0, res, 0), dtype="Int64")
    out.loc[node < 0, "node_h3_resolution"] = pd.NA
    out["node"], out["node_level"] = node, ans["node_level"].to_numpy()
    return out[ANSWER_COLUMNS + ["node", "node_level"]].reset_index(drop=True)
