"""A release of records over their own occupied grids (res 7), each listed grid with its truth and the
row answers.csv names for it (shared by tests)."""

from __future__ import annotations

import h3
import pandas as pd

from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.release import GridOptions, UserOptions, release


def answered_grids(frame: pd.DataFrame, *, bound: float, slot: str, seed: int, epsilon: float = 10.0
                   ) -> tuple[object, pd.DataFrame]:
    """(the release, one row per occupied grid: cell, slot, truth — the exact mean of its records —,
    users, and the ``mean`` and ``mean_error_bound`` of the row that answers it) of ``frame`` released
    with its occupied grids as the public list."""
    cells = [h3.latlng_to_cell(a, b, 7) for a, b in zip(frame["latitude"], frame["longitude"])]
    keyed = frame.assign(cell=cells, slot=frame["timestamp"].dt.floor(slot))
    grids = keyed.groupby(["cell", "slot"]).agg(truth=("value", "mean"), users=("user_id", "nunique")).reset_index()
    parts = pd.DataFrame({"cell": grids["cell"], "slot": grids["slot"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")})
    r = release(frame, bound=bound, budget=Budget(epsilon_total=epsilon), model=UserOptions(partitions=parts),
                grid=GridOptions(h3_resolution=7, slot=slot), noise=NoiseOptions(seed=seed))
    key = ["node_cell", "node_slot", "node_slot_end"]
    rows = r.table.rename(columns={"cell": "node_cell", "slot": "node_slot", "slot_end": "node_slot_end"})
    answered = r.answers.merge(rows[key + ["mean", "mean_error_bound"]], on=key, how="left")
    assert len(answered) == len(grids) and answered["mean"].notna().all()  # every listed grid answered
    return r, grids.assign(slot=parts["slot"]).merge(answered, on=["cell", "slot"], how="left")
