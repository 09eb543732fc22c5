"""Figure specifications, tidy results and small helpers shared by the figure modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError

__all__ = ["COLUMNS", "FigureSpec", "FigureResult", "Rows", "progress_bar", "as_epsilon_grid"]

#: columns of every reproduced figure's table
COLUMNS = ["figure", "series", "epsilon", "value", "stderr"]


@dataclass(frozen=True)
class FigureSpec:
    """How to compute and draw one figure of a seed paper."""

    figure: str
    title: str
    xlabel: str
    ylabel: str
    func: Callable[..., "FigureResult"]
    default_runs: int | None
    xscale: str = "linear"
    yscale: str = "linear"
    paper: str = ""
    claim: str = ""


@dataclass(frozen=True)
class FigureResult:
    """A reproduced figure: the tidy table and the notes on choices made where the paper is silent."""

    figure: str
    frame: pd.DataFrame
    notes: str
    params: dict[str, Any] = field(default_factory=dict)


class Rows:
    """Accumulates ``(series, epsilon, value, stderr)`` rows of one figure."""

    def __init__(self, figure: str) -> None:
        self.figure = figure
        self._rows: list[tuple[str, str, float, float, float]] = []

    def add(self, series: str, epsilon: float, value: float, stderr: float = 0.0) -> None:
        self._rows.append((self.figure, series, float(epsilon), float(value), float(stderr)))

    def add_many(self, series: str, epsilons: Sequence[float], values: Sequence[float], stderr: Any = 0.0) -> None:
        se = np.broadcast_to(np.asarray(stderr, float), (len(epsilons),))
        for e, v, s in zip(epsilons, values, se):
            self.add(series, e, v, s)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._rows, columns=COLUMNS)


def progress_bar(total: int, enabled: bool, desc: str) -> Any:
    """A tqdm progress bar (disabled when ``enabled`` is False)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, leave=False)


def as_epsilon_grid(epsilons: Any, default: Sequence[float]) -> np.ndarray:
    """Validated 1-D array of positive ε (``None`` gives ``default``)."""
    arr = np.asarray(default if epsilons is None else epsilons, dtype=float).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise DpoptInputError(f"`epsilons` must be a non-empty list of positive numbers; got {epsilons!r}")
    return arr
