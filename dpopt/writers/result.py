"""One release result for both privacy models, and the one release.csv / answers.csv schema.

:class:`Release` is what :func:`dpopt.release.release` returns under either privacy model: the
published ``table`` (release.csv, one row per published node, columns :data:`RELEASE_COLUMNS` then
the model's own), ``answers`` (answers.csv: each listed finest grid and the row that answers it,
columns :data:`ANSWER_COLUMNS`), ``summary`` (summary.json: the model's typed summary), and what they
were formatted from (the model's Measurements and the estimation layer's Estimates), with the data
holder's own diagnostics, never published.

release.csv's first columns are the same for every release (a contract for outside checks): a row
is a node, an H3 ``cell`` at resolution ``h3_resolution`` × the window [``slot``, ``slot_end``)
(recurring every ``repeat_every`` until ``repeat_until`` for a profile node; empty otherwise:
models/hierarchy.md §2), its centre, whether it is ``released``, the published ``mean`` and
``variance`` with the half-widths of their intervals (``mean_error_bound``,
``variance_error_bound``), and whether the variance is published (``variance_released``,
``variance_withheld_reason``: withheld where its interval is the whole range). A flat release's
node is a finest grid: ``slot_end`` = slot + the slot length, and answers.csv maps each grid to its
own row. The model's columns follow (counts, raw noisy values, budgets, sensitivities, the
estimator's own columns), documented by the functions that build each table.

Nothing here is computed: every value is copied from DP outputs, their post-processing, or public
parameters; see :mod:`dpopt.writers.user` and :mod:`dpopt.writers.public_occupancy_result`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from ..records.grid import cell_centres, cell_strings, repeat_strings, slot_strings

__all__ = ["Release", "RELEASE_COLUMNS", "ANSWER_COLUMNS", "node_frame", "release_frame", "own_answers"]

#: release.csv's first columns, in order, under both privacy models (module doc)
RELEASE_COLUMNS = ["cell", "slot", "slot_end", "repeat_every", "repeat_until", "h3_resolution", "cell_lat",
                   "cell_lng", "released", "mean", "mean_error_bound", "variance", "variance_error_bound",
                   "variance_released", "variance_withheld_reason"]

#: answers.csv's first columns: each listed finest grid and the published node (release.csv row) that
#: answers it (a model may add its own after them)
ANSWER_COLUMNS = ["cell", "slot", "node_cell", "node_slot", "node_slot_end", "node_repeat_every", "node_repeat_until",
                  "node_h3_resolution"]


@dataclass(frozen=True, eq=False)
class Release:
    """A DP release of either privacy model.

    Attributes
    ----------
    table : pandas.DataFrame
        release.csv: :data:`RELEASE_COLUMNS`, then the model's columns. Published.
    summary : UserReleaseSummary or ReleaseSummary
        summary.json: the model's public facts and DP headline numbers (``summary.privacy_model``
        names the model). Published.
    answers : pandas.DataFrame or None
        answers.csv (:data:`ANSWER_COLUMNS`): each listed finest grid → its answering row. Published.
    measurements, estimates : Measurements, Estimates
        What the table was formatted from (:mod:`dpopt.measurements`).
    diagnostics : dict
        For the data holder only, never published: ``timings`` (s; they correlate with the drawn
        noise) and what reading dropped, by cause (``ingest``; value-dependent counts).
    aggregate, plan, grids, ingest, error_bounds
        ``public-occupancy`` only, for the data holder (never published): the contributions
        measured (the kept and suppressed pairs of the diagnostics folder come from it), the
        :class:`~dpopt.plan.GridPlan` released, the mechanism's
        :class:`~dpopt.mechanisms.grid.GridRelease` (statistics before noise), the ingest report,
        and per statistic and criterion the half-widths of
        :func:`dpopt.estimation.direct.clip_error_bounds`.
    """

    table: pd.DataFrame
    summary: Any
    answers: pd.DataFrame | None = None
    measurements: Any = None
    estimates: Any = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    aggregate: Any = None
    plan: Any = None
    grids: Any = None
    ingest: Any = None
    error_bounds: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def privacy_model(self) -> str:
        """"user" or "public-occupancy"."""
        return str(self.summary.privacy_model)

    def __repr__(self) -> str:
        return (f"Release(privacy_model={self.privacy_model!r}, rows={len(self.table)}, "
                f"released={int(np.sum(self.table['released'])) if 'released' in self.table else 0})")

    # -- public-occupancy: the plan's kept and suppressed pairs (diagnostics, never published) --

    def _planned(self) -> tuple[Any, Any]:
        if self.aggregate is None or self.plan is None:
            raise DpoptInputError(f"this {self.privacy_model} release has no occupancy plan: kept and suppressed "
                                  "(user, grid) pairs belong to the public-occupancy model")
        return self.aggregate, self.plan

    def gamma(self) -> np.ndarray:
        """Retained count Γ of every (user, grid) pair of the aggregate (public-occupancy)."""
        from ..privacy.public_occupancy import pair_retained

        return pair_retained(*self._planned())

    def suppressed(self) -> np.ndarray:
        """Indices of the pairs the plan suppressed (Γ = 0), in pair order."""
        return np.flatnonzero(self.gamma() == 0)

    def suppressed_frame(self) -> pd.DataFrame:
        """The suppressed (user, grid) pairs: user, grid, cell, slot, records."""
        agg, _ = self._planned()
        p = self.suppressed()
        g = agg.pair_grid[p]
        return pd.DataFrame({
            "user": agg.users[agg.pair_user[p]], "grid": g,
            "cell": self.table["cell"].to_numpy()[g] if len(p) else np.empty(0, object),
            "slot": self.table["slot"].to_numpy()[g] if len(p) else np.empty(0, object),
            "records": agg.count[p],
        })

    def user_grids(self) -> np.ndarray:
        """Grids each user keeps after the plan (Γ_{g,ℓ} > 0), per user."""
        return self._planned()[1].user_grids()


def node_frame(cells: np.ndarray, start_ns: np.ndarray, slot_ns: Any, h3_resolution: Any, *,
               cycle_ns: Any = 0, period_end: int = 0) -> pd.DataFrame:
    """release.csv's node columns (``cell`` … ``cell_lng`` of :data:`RELEASE_COLUMNS`) of nodes given
    as H3 cells (int64), window starts and lengths (ns) and resolutions; ``cycle_ns`` > 0 marks a
    profile node recurring until ``period_end`` (the list's period end, public)."""
    cells = np.asarray(cells, dtype=np.int64)
    start = np.asarray(start_ns, dtype=np.int64)
    n = len(cells)
    end = start + np.broadcast_to(np.asarray(slot_ns, dtype=np.int64), (n,))
    every, until = repeat_strings(np.broadcast_to(np.asarray(cycle_ns, dtype=np.int64), (n,)), period_end)
    lat, lng = cell_centres(cells)
    return pd.DataFrame({"cell": cell_strings(cells), "slot": slot_strings(start), "slot_end": slot_strings(end),
                         "repeat_every": every, "repeat_until": until,
                         "h3_resolution": np.broadcast_to(np.asarray(h3_resolution, dtype=np.int64), (n,)),
                         "cell_lat": lat, "cell_lng": lng})


def release_frame(nodes: pd.DataFrame, columns: dict[str, Any]) -> pd.DataFrame:
    """release.csv: the node columns, then ``columns`` — every one of :data:`RELEASE_COLUMNS` first,
    in order, then the model's own in the order given. A missing contract column is a bug here."""
    missing = [c for c in RELEASE_COLUMNS[8:] if c not in columns]
    if missing:
        raise ValueError(f"release table lacks the contract columns {missing}")
    out = nodes.reset_index(drop=True).copy()
    for name in RELEASE_COLUMNS[8:]:
        out[name] = np.asarray(columns[name])
    for name, values in columns.items():
        if name not in out.columns:
            out[name] = np.asarray(values) if not np.isscalar(values) else values
    return out


def own_answers(table: pd.DataFrame) -> pd.DataFrame:
    """answers.csv of a flat release: every row's grid answered by its own row."""
    return pd.DataFrame({"cell": table["cell"].to_numpy(), "slot": table["slot"].to_numpy(),
                         "node_cell": table["cell"].to_numpy(), "node_slot": table["slot"].to_numpy(),
                         "node_slot_end": table["slot_end"].to_numpy(),
                         "node_repeat_every": table["repeat_every"].to_numpy(),
                         "node_repeat_until": table["repeat_until"].to_numpy(),
                         "node_h3_resolution": table["h3_resolution"].to_numpy()})
