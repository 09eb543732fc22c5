"""Figure specifications, tidy results and small helpers shared by the figure modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_positive_int

__all__ = ["COLUMNS", "FigureSpec", "FigureResult", "Rows", "progress_bar", "as_epsilon_grid", "figure_inputs", "figure_title",
           "parameters_markdown", "dataset_unit_mean"]

#: columns of every reproduced figure's table
COLUMNS = ["figure", "series", "epsilon", "value", "stderr"]


@dataclass(frozen=True)
class FigureSpec:
    """How to compute and draw one figure of a seed paper."""

    figure: str
    #: may hold ``{name}`` fields filled from the figure's parameters (e.g. ``γ = {gamma:g}``)
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
    #: every parameter the figure was computed with (defaults included; see ``changed``)
    params: dict[str, Any] = field(default_factory=dict)
    #: the parameters the caller set to a value other than the figure's default
    changed: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # one screen: never the table
        series = ", ".join(map(str, self.frame["series"].unique())) if len(self.frame) else ""
        changed = f", changed={self.changed}" if self.changed else ""
        return f"FigureResult({self.figure!r}, {len(self.frame)} rows, series=[{series}]{changed})"

    def to_frame(self) -> pd.DataFrame:
        """The tidy table (columns figure, series, epsilon, value, stderr)."""
        return self.frame.copy()


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


def figure_inputs(runs: Any, bound: Any, epsilons: Any, default: Sequence[float]) -> tuple[int, float, np.ndarray]:
    """What every Monte-Carlo figure checks first: ``runs`` ≥ 1, the bound U and the ε grid
    (:func:`as_epsilon_grid`, ``None`` gives ``default``)."""
    return check_positive_int(runs, "runs"), check_bound(bound), as_epsilon_grid(epsilons, default)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = list(np.asarray(value).ravel())
        return "[" + ", ".join(_short(float(v)) for v in arr[:6]) + (", …]" if len(arr) > 6 else "]")
    return str(value)


def figure_title(spec: FigureSpec, params: dict[str, Any]) -> str:
    """``figure: title`` with the template fields filled from ``params``, then every changed parameter
    that the title does not already show (``params["_changed"]`` or the result's ``changed``)."""
    fields = {k: v for k, v in params.items() if not k.startswith("_")}
    try:
        title = spec.title.format(**fields)
    except (KeyError, IndexError, ValueError):
        title = spec.title.format_map(_Default(fields))
    changed = params.get("_changed", {})
    extra = [f"{k} = {_short(v)}" for k, v in changed.items() if "{" + k not in spec.title]
    line = f"{spec.figure}: {title}"
    return line + ("\n(changed: " + ", ".join(extra) + ")" if extra else "")


class _Default(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def parameters_markdown(params: dict[str, Any], changed: dict[str, Any]) -> str:
    """A markdown list of every parameter, changed ones marked."""
    lines = ["## Parameters", ""]
    for k, v in params.items():
        mark = " **(changed from the default)**" if k in changed else ""
        lines.append(f"- `{k}` = {_short(v)}{mark}")
    return "\n".join(lines) + "\n"


def dataset_unit_mean(per_dataset: Sequence[np.ndarray]) -> tuple[float, float]:
    """Mean error and its standard error with **datasets as the units**.

    ``per_dataset`` holds the errors of the runs on each random dataset. The value is the mean over
    all runs; with one dataset the standard error is ``sd/√runs``; with k ≥ 2 datasets it is
    ``sd(dataset means)/√k``: the runs on one dataset are not independent draws of the figure's
    quantity (which averages over datasets), so treating them as independent would understate it.
    """
    arrays = [np.asarray(a, float).ravel() for a in per_dataset if np.size(a)]
    if not arrays:
        raise DpoptInputError("no runs to average")
    allv = np.concatenate(arrays)
    value = float(allv.mean())
    if len(arrays) == 1:
        se = float(allv.std(ddof=1) / np.sqrt(allv.size)) if allv.size > 1 else 0.0
        return value, se
    means = np.array([a.mean() for a in arrays])
    return value, float(means.std(ddof=1) / np.sqrt(means.size))
