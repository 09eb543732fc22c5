"""A ``user``-model release as published: its table, answers and summary (a
:class:`~dpopt.writers.result.Release` with a :class:`UserReleaseSummary`), formatted from the
model's Measurements and the estimation layer's Estimates by :func:`user_release` (the flat
release) and :func:`multires_release` (the engine and the other multi-resolution shapes).

Nothing here is computed and nothing is un-noised data: the table holds DP outputs and
post-processing of them (formatted: H3 cells and slots as text, cell centres); the summary holds
public parameters and DP outputs (k, c, the number of grids released). The files are written by
:func:`dpopt.writers.release_folder.write_release`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..measurements import Estimates, Measurements, UserInfo
from ..privacy.user.place_bounds import record_counts, reweighting_distance
from ..records.grid import cell_strings, parse_slot, iso_duration, level_time_text, slot_strings, slot_text
from .result import ANSWER_COLUMNS, RELEASE_COLUMNS, Release, node_frame, own_answers, release_frame

__all__ = ["UserReleaseSummary", "MULTIRES_EXTRA_COLUMNS", "user_release", "multires_release"]


@dataclass(frozen=True)
class UserReleaseSummary:
    """Headline numbers (summary.json): every field is public or a DP output."""

    privacy_model: str
    epsilon_total: float | None
    delta: float
    #: the contribution bounds: k grids per user and c records per user and grid (fixed/adaptive);
    #: under one record cap (the engine, place) k = 1 and c = T, the cap on one user's records over all
    #: the listed grids together (``record_cap``)
    k: int
    c: int
    bounds_rule: str
    budget: dict[str, float]
    split_rule: str
    partitions: str
    grids_released: int
    selection_threshold: float | None
    pooling: dict[str, float]
    bound: float
    h3_resolution: int
    slot: str
    noise: str
    granularity: float
    confidence: float
    seeded: bool
    #: "laplace" (pure ε-DP) or "gaussian" (ρ-zCDP)
    mechanism: str = "laplace"
    #: Gaussian: the ρ of the whole release (every piece, pure-ε ones as ε²/2); None for Laplace
    rho_total: float | None = None
    #: Gaussian with private selection: the δ_p spent by the selection (part of ``delta``)
    delta_selection: float = 0.0
    #: "fixed" (flat per-grid release) or "adaptive" (any multi-resolution release: the engine, `place`
    #: and the adaptive levels; not the ``--resolution`` flag, whose values are now :attr:`strategy`'s)
    resolution: str = "fixed"
    #: the strategy that ran, as ``--strategy`` names it: "optimised" (the engine), "place",
    #: "adaptive" or "fixed" (public: the options chose it)
    strategy: str = "fixed"
    #: the estimation method of ``mean``
    method: str = "direct"
    #: adaptive: the levels (H3 resolution, slot text), finest first, and each level's budget (the
    #: sum of its pieces, in the unit of the accounting)
    levels: list[dict[str, Any]] | None = None
    #: adaptive: the error target tau a node's noise half-width must meet to answer its finest grids
    target: float | None = None
    #: adaptive: what the privacy model treats as public, in words ('' for the flat release: see report.md)
    public: str = ""
    #: '' when some published node is better than the range, else what would be
    outlook: str = ""
    #: the total epsilon the outlook predicts would make the release useful (None: not needed / unknown)
    outlook_epsilon_needed: float | None = None
    #: multi-resolution: "place" (models/hierarchy.md §14), "levels" (§3–§13) or "private selection" (§15)
    shape: str = ""
    #: place: the DP-chosen clamp B ≤ U the values were measured on, and the per-user record cap T
    clamp: float | None = None
    record_cap: int | None = None
    #: place: the map's own record cap T_map ≥ T (least predicted noise + re-weighting error of the
    #: map's mean on the same histogram; ``record_histogram`` ``map_error``, models/hierarchy.md §14.2)
    map_record_cap: int | None = None
    #: place: how T was chosen: the ε_T-DP histogram of records per user (``upper_edges`` of the bins
    #: (lo, hi], then the overflow; ``noisy_users`` per bin) and the predicted noise factor T/S(T) of
    #: each candidate (post-processing of the histogram; models/hierarchy.md §14.2)
    record_histogram: dict[str, Any] | None = None
    #: place: how B was chosen: the ε_B-DP histogram of users' clamp votes (``clamps`` the B each bin
    #: stands for, ``noisy_users`` per bin; B is its quantile ``place_bounds.clamp_quantile`` of
    #: ``record_histogram`` over the bins that clear the noise, models/hierarchy.md §14.2)
    clamp_histogram: dict[str, Any] | None = None
    #: the lower end L of the values: they lie in [lower, bound] (0 unless a lower end was given;
    #: then ``clamp`` and the histogram's ``clamps`` are upper ends too, values clamped to [lower, clamp])
    lower: float = 0.0
    #: the engine: the DP-chosen lower clamp A < B (values measured on [clamp_low, clamp]) and the
    #: ε-DP histogram of users' lower votes it was chosen from (``clamps`` the A each bin stands for,
    #: ``noisy_users`` per bin; ``place_bounds.choose_low_clamp``, models/engine.md §2)
    clamp_low: float | None = None
    clamp_low_histogram: dict[str, Any] | None = None
    #: the engine: the factors (measured marginals, and ``residual`` for grids measured on their own)
    #: whose effects the answers carry — the crossed fit's components above 0, post-processing of DP
    #: outputs; [] where every grid is answered by one map-wide mean (nothing measured differed beyond
    #: its noise); None for the other shapes (:func:`dpopt.writers._published.answers_vary_text`)
    answers_vary_by: list[str] | None = None
    #: engine and place: D(T), the total-variation distance between the records' weights in a mean
    #: capped at T records per user and in the all-records mean, from the DP ``record_histogram``
    #: denoised as the cap rule reads it (:func:`dpopt.privacy.user.place_bounds.record_counts` and
    #: :func:`~dpopt.privacy.user.place_bounds.reweighting_distance`, post-processing); a capped mean
    #: can sit up to 2·D × the spread of users' own means from the all-records mean, which the
    #: intervals leave out (models/engine.md §4). None where no cap was chosen
    reweighting: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _table(m: Measurements, est: Estimates, pooled: Estimates) -> pd.DataFrame:
    """release.csv of the flat release (:data:`~dpopt.writers.result.RELEASE_COLUMNS` first; a node
    is a listed or selected grid), then ``mean_raw``, ``variance_raw`` (before post-processing into
    range), ``noisy_count``, ``mean_pooled``, ``variance_pooled`` and, with private selection,
    ``noisy_users``. The variance is withheld (NaN) where its interval is the whole range."""
    t, info = est.table, m.info
    slot_ns = info.slot_ns if info.slot_ns is not None else parse_slot(info.slot)
    nodes = node_frame(m.nodes["cell"].to_numpy(), m.nodes["slot"].to_numpy(), slot_ns, int(info.h3_resolution))
    columns = {name: t[name].to_numpy() for name in ("released", "mean", "mean_error_bound", "variance",
                                                     "variance_error_bound", "variance_released",
                                                     "variance_withheld_reason", "mean_raw", "variance_raw",
                                                     "noisy_count")}
    columns.update(mean_pooled=pooled.table["mean"].to_numpy(), variance_pooled=pooled.table["variance"].to_numpy())
    if info.noisy_users is not None:
        columns["noisy_users"] = info.noisy_users
    return release_frame(nodes, columns)


def user_release(m: Measurements, est: Estimates, pooled: Estimates, *,
                 diagnostics: dict[str, Any] | None = None, outlook: Any = None) -> Release:
    """The published table and summary of a ``user`` release from its measurements, direct
    estimates ``est`` and pooled estimates ``pooled`` (formatting only)."""
    info, sp = m.info, m.spend
    summary = UserReleaseSummary(
        privacy_model="user", epsilon_total=sp.epsilon, delta=sp.delta, k=info.k, c=info.c,
        bounds_rule=info.bounds_rule, budget=dict(sp.pieces), split_rule=info.split_rule,
        partitions=info.partitions, grids_released=m.n_nodes, selection_threshold=info.selection_threshold,
        pooling=pooled.info.pooling, bound=m.bound, h3_resolution=info.h3_resolution, slot=info.slot,
        noise=info.noise, granularity=info.lattice, confidence=est.confidence, seeded=info.seeded,
        mechanism=info.mechanism, rho_total=sp.total if sp.unit == "rho" else None,
        delta_selection=info.delta_selection, **_outlook_fields(outlook),
    )
    table = _table(m, est, pooled)
    return Release(table=table, summary=summary, answers=own_answers(table), measurements=m, estimates=est,
                   diagnostics=dict(diagnostics or {}))


def _outlook_fields(outlook: Any) -> dict[str, Any]:
    if outlook is None or not outlook.empty:
        return {}
    return {"outlook": outlook.message, "outlook_epsilon_needed": outlook.epsilon_needed}


#: release.csv's columns of the multi-resolution release after :data:`~dpopt.writers.result.RELEASE_COLUMNS`
MULTIRES_EXTRA_COLUMNS = ["mean_direct", "mean_direct_error_bound", "method", "level", "count_estimate"]


def _multires_table(m: Measurements, est: Estimates) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(release.csv: the published nodes, answers.csv): formatting only. ``slot_end`` = start + the
    node's slot length; a profile node's window recurs every ``repeat_every`` until ``repeat_until``,
    the end of the list's period (public: the hierarchy over the public list)."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    cycle = t["cycle_ns"].to_numpy(dtype="int64")
    # the list's period end (public): every recurring window stops there
    engine = m.info.engine
    if engine is not None and engine.period is not None:  # no list: the windows recur over the selected period
        period_end = int(engine.period[1])
    else:
        period_end = int(m.finest["slot"].max()) + int(m.info.slot_ns) if (cycle > 0).any() else 0
    every = node_frame(t["cell"].to_numpy(), t["slot"].to_numpy(), t["slot_ns"].to_numpy(),
                       t["h3_resolution"].to_numpy(), cycle_ns=cycle, period_end=period_end)
    names = [c for c in RELEASE_COLUMNS[8:] if c in t.columns] + MULTIRES_EXTRA_COLUMNS
    table = release_frame(every[on], {c: t[c].to_numpy()[on] for c in names})
    node = est.answers["node"].to_numpy()
    answers = pd.DataFrame({"cell": cell_strings(m.finest["cell"].to_numpy()),
                            "slot": slot_strings(m.finest["slot"].to_numpy()),
                            **{f"node_{c}": every[c].to_numpy()[node]
                               for c in ("cell", "slot", "slot_end", "repeat_every", "repeat_until", "h3_resolution")}})
    return table, answers[ANSWER_COLUMNS]


def _levels(m: Measurements) -> list[dict[str, Any]]:
    """Each level's grid and budget: the sum of its pieces (``level{l}_…``; the engine's pieces end
    with the marginal's name, e.g. ``main count cell × period``)."""
    out = []
    engine = m.info.engine
    for li, (res, slot_ns, *cycle) in enumerate(m.info.levels):
        mine = (lambda name: name.endswith(f" {engine.names[li]}")) if engine is not None else \
            (lambda name: name.startswith(f"level{li}_"))
        spent = sum(v for name, v in m.spend.pieces.items() if mine(name))
        cycle_ns = int(cycle[0]) if cycle else 0
        out.append({"level": li, "h3_resolution": int(res), "slot": "period" if slot_ns == 0 else slot_text(slot_ns),
                    "repeat_every": iso_duration(cycle_ns) if cycle_ns else None,
                    "time": level_time_text(int(slot_ns), cycle_ns), "budget": float(spent)})
    return out


def multires_release(m: Measurements, est: Estimates, *, diagnostics: dict[str, Any] | None = None,
                     outlook: Any = None) -> Release:
    """The published table, answers and summary of the multi-resolution ``user`` release from its
    measurements and hierarchical estimates (formatting only)."""
    info, sp = m.info, m.spend
    table, answers = _multires_table(m, est)
    summary = UserReleaseSummary(
        privacy_model="user", epsilon_total=sp.epsilon, delta=sp.delta, k=info.k, c=info.c,
        bounds_rule=info.bounds_rule, budget=dict(sp.pieces), split_rule=info.split_rule,
        partitions=info.partitions, grids_released=len(table), selection_threshold=info.selection_threshold, pooling={},
        bound=float(m.bound if info.declared_bound is None else info.declared_bound),
        h3_resolution=info.h3_resolution, slot=info.slot, noise=info.noise,
        granularity=info.lattice, confidence=est.confidence, seeded=info.seeded, mechanism=info.mechanism,
        rho_total=sp.total if sp.unit == "rho" else None, resolution="adaptive", method=est.method,
        levels=_levels(m), target=float(est.info.target), delta_selection=float(info.delta_selection),
        public=str(info.public or ""), shape=_shape(info), strategy=_strategy(info), clamp=info.clamp,
        record_cap=info.record_cap, map_record_cap=info.map_record_cap,
        record_histogram=info.record_histogram,
        clamp_histogram=info.clamp_histogram, clamp_low=info.clamp_low,
        clamp_low_histogram=info.clamp_low_histogram, answers_vary_by=_varies_by(est),
        reweighting=_reweighting(info), **_outlook_fields(outlook))
    return Release(table=table, summary=summary, answers=answers, measurements=m, estimates=est,
                   diagnostics=dict(diagnostics or {}))


def _reweighting(info: UserInfo) -> float | None:
    """:attr:`UserReleaseSummary.reweighting` from the DP histogram of records per user and the cap T."""
    hist = info.record_histogram
    if not hist or info.record_cap is None or "noisy_users" not in hist or "epsilon" not in hist:
        return None
    # denoised as the cap rule reads it: a phantom "user of 8,192 records" in an empty top bin would
    # otherwise outweigh every real user (D = 0.55 on a test of 200 users of 20 records each)
    counts = record_counts(np.asarray(hist["noisy_users"], dtype=float), float(hist["epsilon"]))
    return float(reweighting_distance(counts, np.array([float(info.record_cap)]))[0])


def _varies_by(est: Estimates) -> list[str] | None:
    """The crossed fit's factors above 0, in the fit's order (:attr:`UserReleaseSummary.answers_vary_by`);
    None for the other estimators, whose answers are nodes' own estimates."""
    components = est.info.components if est.method == "crossed" else None
    if components is None or (not components and not math.isfinite(float(est.info.z))):
        return None  # nothing estimated (no node above its noise): the outlook says so
    return [str(name) for name, value in components.items() if float(value) > 0.0]


def _strategy(info: UserInfo) -> str:
    """The ``--strategy`` name of a multi-resolution release (public: the options chose it)."""
    return {"engine": "optimised", "place": "place"}.get(str(info.shape), "adaptive")


def _shape(info: UserInfo) -> str:
    """The multi-resolution shape in words for summary.json (public: the options chose it)."""
    if info.shape in ("place", "engine"):
        return "optimised marginals" if info.shape == "engine" else "place"
    return "private selection" if str(info.partitions or "").startswith("private") else "levels"
