"""Values in [L, U]: the published means moved back to the data's own range.

A release with a lower end L reads every value x as x − L (:func:`dpopt.records.ingest.clean_chunk`),
so both privacy models, every sensitivity and every noise draw see values in [0, U − L] with bound
U − L: the models need no case of their own. The centred sums of the ``user`` model then have
sensitivity (U − L)/2, which is right for values clamped to [L, U].

Moving the estimates back is post-processing of DP outputs: :func:`with_value_range` adds L to every
mean-like column (:data:`MEAN_COLUMNS` of the published table and of the Estimates) and states the
range [L, U] in the summary (``lower``, ``bound``; the ``user`` model's DP-chosen clamp B becomes
its upper end L + B, values being clamped to [L, L + B]). Variances, error bounds and interval
half-widths are unchanged by a shift and are left alone. With L = 0 the result is returned as it is
(no float changes). The Measurements stay in the shifted units (``info.lower`` records L).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

__all__ = ["MEAN_COLUMNS", "with_value_range", "shift_means", "with_info"]

#: the columns that hold a mean (or a noisy mean) of the values; everything else is shift-invariant
MEAN_COLUMNS = ("mean", "mean_raw", "mean_direct", "mean_pooled")


def shift_means(table: pd.DataFrame | None, lower: float) -> pd.DataFrame | None:
    """A copy of ``table`` with ``lower`` added to each of its :data:`MEAN_COLUMNS` (NaN stays NaN)."""
    if table is None:
        return None
    cols = [c for c in MEAN_COLUMNS if c in table.columns]
    if not cols:
        return table
    out = table.copy()
    for c in cols:
        out[c] = out[c].to_numpy(dtype=float) + lower
    return out


def _clamp_fields(summary: Any, lower: float) -> dict[str, Any]:
    """The ``user`` summary's clamp (and the clamps of its histogram's bins) as upper ends of the
    values' range, L + B, and the engine's lower clamp (and its histogram's) as L + A."""
    out: dict[str, Any] = {}
    for name in ("clamp", "clamp_low"):
        if getattr(summary, name, None) is not None:
            out[name] = lower + float(getattr(summary, name))
        hist = getattr(summary, f"{name}_histogram", None)
        if isinstance(hist, dict) and "clamps" in hist:
            out[f"{name}_histogram"] = {**hist, "clamps": [lower + float(b) for b in hist["clamps"]]}
    return out


def with_value_range(result: Any, lower: float, upper: float | None = None) -> Any:
    """``result`` (a :class:`~dpopt.writers.result.Release` computed on values shifted by
    −``lower``) with its means in the data's range [``lower``, ``upper``].

    Parameters
    ----------
    result : the release as formatted from the shifted values.
    lower : L, added to every mean-like column of ``result.table`` and of its Estimates.
    upper : U, the declared upper end written to the summary's ``bound`` (None: L + the bound the
        models saw).

    Returns
    -------
    The same kind of result; unchanged when ``lower`` is 0.
    """
    lower = float(lower)
    if lower == 0.0:
        return result
    s = result.summary
    upper = lower + float(s.bound) if upper is None else float(upper)
    summary = replace(s, lower=lower, bound=upper, **_clamp_fields(s, lower))
    est = result.estimates
    if est is not None:
        est = replace(est, table=shift_means(est.table, lower))
    result = replace(result, table=shift_means(result.table, lower), summary=summary, estimates=est)
    return with_info(result, lower=lower)  # the Measurements stay in the shifted units


def with_info(result: Any, **changes: Any) -> Any:
    """``result`` (a :class:`~dpopt.writers.result.Release`) with ``changes`` made to its
    Measurements' facts (the frozen ``info`` replaced, in a new Measurements held by the release and
    by its Estimates); unchanged without Measurements."""
    m = result.measurements
    if m is None:
        return result
    new = replace(m, info=replace(m.info, **changes))
    est = result.estimates
    if est is not None and est.measurements is m:
        est = replace(est, measurements=new)
    return replace(result, measurements=new, estimates=est)
