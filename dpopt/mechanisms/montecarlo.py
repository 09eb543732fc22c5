"""Monte-Carlo estimation of average errors, vectorised over repetitions.

A mechanism run ``R`` times is one call with noise arrays of shape ``(R, …)``; :func:`monte_carlo`
only splits very large ``R`` into batches to bound memory, so there is no Python loop per run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import check_positive_int
from ._common import check_rng

__all__ = ["MCEstimate", "mean_abs_error", "monte_carlo", "summarise"]


@dataclass(frozen=True)
class MCEstimate:
    """Mean of ``R`` i.i.d. values with its standard error ``sd/√R``."""

    value: float
    stderr: float
    runs: int


def summarise(values: Any) -> MCEstimate:
    """Mean and standard error of a sample (``ddof=1``; stderr 0 for one value)."""
    v = np.asarray(values, dtype=float).ravel()
    n = v.size
    sd = float(v.std(ddof=1)) if n > 1 else 0.0
    return MCEstimate(float(v.mean()), sd / np.sqrt(n), n)


def mean_abs_error(values: Any, truth: Any) -> MCEstimate:
    """MAE ``(1/R) Σ_r |values_r − truth_r|`` with its standard error (seed 003 §IV-A)."""
    return summarise(np.abs(np.asarray(values, dtype=float) - np.asarray(truth, dtype=float)))


def monte_carlo(
    run: Callable[[int, np.random.Generator], tuple[np.ndarray, Any]],
    *,
    runs: int,
    rng: np.random.Generator,
    batch: int = 100_000,
) -> MCEstimate:
    """Average absolute error of ``run`` over ``runs`` repetitions.

    Parameters
    ----------
    run : callable
        ``run(r, rng) -> (values, truth)`` performs ``r`` repetitions at once (values shape
        ``(r,)``; truth scalar or ``(r,)``).
    runs : int
    rng : numpy.random.Generator
    batch : int
        Largest number of repetitions per call.
    """
    rng = check_rng(rng)
    runs = check_positive_int(runs, "runs")
    batch = check_positive_int(batch, "batch")
    errs = []
    done = 0
    while done < runs:
        r = min(batch, runs - done)
        values, truth = run(r, rng)
        errs.append(np.abs(np.asarray(values, float) - np.asarray(truth, float)).reshape(r, -1).sum(axis=1))
        done += r
    return summarise(np.concatenate(errs))
