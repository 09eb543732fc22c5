"""Read a release as published (release.csv as a DataFrame, summary.json as a dict) into the few
things every human-facing writer needs: the released nodes with their intervals and time spans, the
unit, the privacy statement in words and numbers.

Everything here is post-processing of published data: the writers built on it (report.html, the
print figures, the console summary) cannot leak more than release.csv and summary.json already do.
Both privacy models are read (``public-occupancy``: :class:`dpopt.writers.public_occupancy_result.ReleaseSummary`;
``user``: :class:`dpopt.writers.user.UserReleaseSummary`), and the multi-resolution release's
columns (``h3_resolution``, ``slot_end``, ``method``, ``variance_released``,
``variance_withheld_reason``) are used when present.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..hierarchy.lattice import EVERY_PLACE
from ..records.grid import localize_wall, parse_slot, wall_clock

__all__ = ["PublishedView", "published_view", "read_release_table", "resolve_unit", "privacy_statement", "fmt_number",
           "released_count", "answers_vary_text", "nice_ticks", "slot_labels", "span_text", "time_steps", "active_at",
           "active_counts", "row_dicts"]

#: the unit said when nobody gave one
UNKNOWN_UNIT = "units of the value"


def read_release_table(path: Any) -> pd.DataFrame:
    """A published release.csv read back, one dtype per column however long (``repeat_every`` and
    ``repeat_until`` are empty in most rows and text in some); the contract's time columns are text
    even where every row is empty (GeoParquet stored an all-empty ``repeat_every`` as a float column)."""
    table = pd.read_csv(path, low_memory=False)
    for col in ("slot", "slot_end", "repeat_every", "repeat_until"):
        if col in table.columns and not pd.api.types.is_string_dtype(table[col]):
            table[col] = table[col].astype("string")
    return table


def row_dicts(table: pd.DataFrame, *, finite_or_none: bool = False) -> list[dict[str, Any]]:
    """Each row of ``table`` as a dict of Python scalars, as ``table.astype(object).to_dict("records")``
    gives them, without pandas' boxing of every value one by one (half a second of a report at 20,000
    published rows). ``finite_or_none``: a missing value, NaN or ±inf becomes None (JSON has none of
    them)."""
    cols = []
    for j in range(table.shape[1]):
        col = table.iloc[:, j]
        if finite_or_none:
            ok = np.isfinite(col.to_numpy(dtype=float, na_value=np.nan)) if pd.api.types.is_float_dtype(col) \
                else col.notna().to_numpy()
            cols.append([v if k else None for v, k in zip(col.tolist(), ok)])
        elif isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
            cols.append([None if v is pd.NA else v for v in col.tolist()])  # as to_dict boxes pd.NA
        else:
            cols.append(col.tolist())
    names = list(table.columns)
    return [dict(zip(names, vals)) for vals in zip(*cols)] if names else [{} for _ in range(len(table))]


def resolve_unit(summary: dict[str, Any], unit: str | None = None) -> tuple[str, bool]:
    """The unit of the released values and whether it is known: ``unit`` if given, else
    ``summary["unit"]``, else ("units of the value", False)."""
    u = unit if unit else summary.get("unit")
    if u:
        return str(u), True
    return UNKNOWN_UNIT, False


def fmt_number(x: Any, digits: int = 3) -> str:
    """A number for people: integers exact (below 10⁶), others to ``digits`` significant digits,
    no exponent from 10⁻⁴ to 10⁶ (values of a range in another unit, 1.4e-13 or 2.3e+09, keep one),
    "–" for missing."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    if v == 0:
        return "0"
    if not v.is_integer():  # counts stay exact; measurements get ``digits`` significant digits
        v = float(f"{v:.{digits}g}")
    if v.is_integer() and abs(v) < 1e6:
        return f"{int(v):,}"
    mag = math.floor(math.log10(abs(v)))
    if mag >= 6 or mag < -4:
        return f"{v:.{digits - 1}e}"
    dec = max(0, digits - 1 - mag)
    out = f"{v:,.{dec}f}"
    return out.rstrip("0").rstrip(".") if "." in out else out


def nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[float, float, list[float]]:
    """A scale [a, b] ⊇ [lo, hi] fitted to the data with round tick marks."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return 0.0, 1.0, [0.0, 1.0]
    if hi - lo < 1e-12:
        lo, hi = lo - 1.0, hi + 1.0
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=10 * mag)
    a, b = math.floor(lo / step) * step, math.ceil(hi / step) * step
    return a, b, [float(x) for x in np.arange(a, b + step / 2, step)]


def released_count(summary: dict[str, Any]) -> int | None:
    """Released grids/nodes of either model's summary."""
    for k in ("released_grids", "grids_released", "released_nodes"):
        if summary.get(k) is not None:
            return int(summary[k])
    return None


@dataclass(frozen=True)
class PublishedView:
    """The released nodes of a release, one row each (``nodes``: cell, res, t0, t1, cycle and until
    (NaT unless the node's window recurs: :func:`active_at`), slot_label, mean, bound, lo, hi and
    whatever optional columns were published), the withheld (cell, slot)
    rows when the table lists them (``withheld``), the time steps of the time control
    (``steps``, instants of the release's wall-clock slots; each finest slot when slot lengths mix, ends in
    ``step_ends``), the unit and the confidence of the intervals."""

    nodes: pd.DataFrame
    withheld: pd.DataFrame
    steps: tuple[pd.Timestamp, ...]
    unit: str
    unit_known: bool
    confidence: float
    #: the upper end U of the values' range [lower, bound] (None: not stated)
    bound: float | None
    slot: pd.Timedelta
    #: the end (exclusive) of each step of ``steps``
    step_ends: tuple[pd.Timestamp, ...] = ()
    #: the time control stops before the last published end (recurring windows over more than
    #: :data:`MAX_STEPS` finest slots): the end it reaches, else None
    steps_cut: pd.Timestamp | None = None
    #: the lower end L of the values' range (summary.json ``lower``; 0 when absent)
    lower: float = 0.0
    #: the zone the slots were cut in (summary.json ``timezone``; "UTC" without one): times are shown
    #: on its clock and recurring windows recur on it
    zone: str = "UTC"

    @property
    def span(self) -> float | None:
        """U − L, the width of the values' range (None when U is not stated)."""
        return None if self.bound is None else self.bound - self.lower

    @property
    def suffix(self) -> str:
        """" km/h" after a number, or "" when the unit is unknown (said once, not after every number)."""
        return f" {self.unit}" if self.unit_known else ""

    @property
    def label(self) -> str:
        """"(km/h)" after a heading, or "" when the unit is unknown."""
        return f" ({self.unit})" if self.unit_known else ""


def _slot_length(summary: dict[str, Any]) -> pd.Timedelta:
    """summary.json's ``slot`` ("1h", "1d", seconds) read as the release read it (:func:`parse_slot`;
    pandas' own reading of "1d" is deprecated); 1 h where there is none or it does not read."""
    from .._validation import DpoptInputError

    try:
        return pd.Timedelta(parse_slot(summary.get("slot") or "1h"), "ns")
    except (DpoptInputError, ValueError, TypeError):
        return pd.Timedelta("1h")


def _resolutions(cells: pd.Series, table: pd.DataFrame) -> np.ndarray:
    if "h3_resolution" in table.columns:
        return table["h3_resolution"].to_numpy(dtype=np.int64)
    import h3

    return np.array([h3.get_resolution(str(c)) for c in cells], dtype=np.int64)


def _times(table: pd.DataFrame, slot: pd.Timedelta) -> tuple[pd.Series, pd.Series]:
    t0 = pd.to_datetime(table["slot"], utc=True)
    if "slot_end" in table.columns:
        t1 = pd.to_datetime(table["slot_end"], utc=True)
        t1 = t1.where(t1.notna(), t0 + slot)
    else:
        t1 = t0 + slot
    return t0, t1


def _repeats(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(cycle, until) of each row: a profile node's window recurs every ``repeat_every`` (ISO 8601)
    until ``repeat_until`` (models/hierarchy.md §2); NaT for contiguous slots."""
    none = pd.Series(pd.NaT, index=table.index, dtype="datetime64[ns, UTC]")
    if "repeat_every" not in table.columns:
        return pd.Series(pd.NaT, index=table.index, dtype="timedelta64[ns]"), none
    every = pd.to_timedelta(table["repeat_every"].where(table["repeat_every"].astype(str).str.startswith("P")),
                            errors="coerce")
    until = pd.to_datetime(table["repeat_until"], utc=True, errors="coerce") if "repeat_until" in table.columns \
        else none
    return every, until.where(every.notna())


def _window_labels(t0: pd.Series, t1: pd.Series, every: pd.Series, until: pd.Series) -> pd.Series:
    """A recurring window in words: "08:00–09:00 UTC every day from 2024-03-01 until 2024-03-04 00:00
    UTC" (weekday names for a weekly cycle)."""
    out = []
    zone = _zone_text(t0)
    for a, b, e, u in zip(t0, t1, every, until):
        fmt = "%a %H:%M" if e >= pd.Timedelta(days=7) else "%H:%M"
        each = "day" if e == pd.Timedelta(days=1) else "week" if e == pd.Timedelta(days=7) else span_text(e)
        out.append(f"{a:{fmt}}–{b:{fmt}} {zone} every {each} from {a:%Y-%m-%d} until {u:%Y-%m-%d %H:%M} {zone}")
    return pd.Series(out, index=t0.index, dtype=object)


def active_at(nodes: pd.DataFrame, t: pd.Timestamp, zone: str = "UTC") -> np.ndarray:
    """Which rows of a view's ``nodes`` cover the instant ``t``: t0 ≤ t < t1, or for a recurring
    window t0 ≤ t < until with (t − t0) mod cycle < t1 − t0 on the wall clock of ``zone`` (the one
    the release cut its windows in: an 08:00 window stays at 08:00 across a clock change)."""
    t0, t1, rep = _ns(nodes["t0"]), _ns(nodes["t1"]), _recurring(nodes)
    ti = np.int64(pd.Timestamp(t).value)
    on = (t0 <= ti) & (ti < t1)
    if rep.any():
        on[rep] = _recurring_on(nodes, rep, np.array([[ti]]), zone)[:, 0]
    return on


#: at most this many (recurring node, step) pairs are compared at once by :func:`active_counts`
_PAIRS = 4_000_000


def _ns(values: pd.Series) -> np.ndarray:
    """Instants or durations as int64 nanoseconds (NaT: the smallest int64, never inside a window)."""
    if isinstance(values.dtype, pd.DatetimeTZDtype) or values.dtype.kind == "M":
        return pd.DatetimeIndex(values).as_unit("ns").asi8
    return pd.TimedeltaIndex(values).as_unit("ns").asi8


def _recurring(nodes: pd.DataFrame) -> np.ndarray:
    """The rows whose window recurs (a ``cycle``)."""
    return nodes["cycle"].notna().to_numpy() if "cycle" in nodes.columns else np.zeros(len(nodes), dtype=bool)


def _recurring_on(nodes: pd.DataFrame, rep: np.ndarray, t: np.ndarray, zone: str = "UTC") -> np.ndarray:
    """(recurring rows × steps) booleans: t0 ≤ t < until and (t − t0) mod cycle < t1 − t0 on the wall
    clock of ``zone`` (``t``: int64 nanoseconds of instants, shape (1, steps))."""
    r0, r1, until = (wall_clock(_ns(nodes[c])[rep], zone)[:, None] for c in ("t0", "t1", "until"))
    cyc, w = _ns(nodes["cycle"])[rep][:, None], wall_clock(t.reshape(-1), zone).reshape(t.shape)
    return (r0 <= w) & (w < until) & (np.mod(w - r0, cyc) < r1 - r0)


def active_counts(nodes: pd.DataFrame, steps: Any, zone: str = "UTC") -> np.ndarray:
    """How many rows of a view's ``nodes`` cover each instant of ``steps``: ``active_at(nodes, t).sum()``
    for every t at once (the time control's busiest step), in int64 nanoseconds: contiguous rows by
    two sorted searches, recurring windows by blocks of (row, step) pairs."""
    t = np.array([pd.Timestamp(x).value for x in steps], dtype=np.int64)
    if not t.size or not len(nodes):
        return np.zeros(t.size, dtype=np.int64)
    t0, t1, rep = _ns(nodes["t0"]), _ns(nodes["t1"]), _recurring(nodes)
    a, b = np.sort(t0[~rep]), np.sort(t1[~rep])  # t0 ≤ t < t1: (#t0 ≤ t) − (#t1 ≤ t), as t0 < t1
    out = np.searchsorted(a, t, side="right") - np.searchsorted(b, t, side="right")
    if rep.any():
        step = max(1, _PAIRS // int(rep.sum()))
        for i in range(0, t.size, step):
            out[i:i + step] += _recurring_on(nodes, rep, t[None, i:i + step], zone).sum(axis=0)
    return out.astype(np.int64)


def _zone(summary: dict[str, Any]) -> str:
    """The zone times are shown in: summary.json's ``timezone`` (the one slots were cut in), else UTC."""
    zone = summary.get("timezone")
    if isinstance(zone, str) and zone:
        from ..records.ingest import check_timezone
        from .._validation import DpoptInputError

        try:
            return str(check_timezone(zone))
        except DpoptInputError:
            return "UTC"
    return "UTC"


def _zone_text(t: pd.Series) -> str:
    tz = t.dt.tz
    return "UTC" if tz is None or str(tz) in ("UTC", "utc") else str(tz)


def _normalise(table: pd.DataFrame, summary: dict[str, Any]) -> tuple[pd.DataFrame, pd.Timedelta]:
    slot = _slot_length(summary)
    zone = _zone(summary)
    df = table.reset_index(drop=True).copy()
    df["cell"] = df["cell"].astype(str)
    df["res"] = _resolutions(df["cell"], df)
    df["t0"], df["t1"] = _times(df, slot)  # instants (UTC); the labels in the zone the slots were cut in
    df["cycle"], df["until"] = _repeats(df)
    local = {c: df[c].dt.tz_convert(zone) for c in ("t0", "t1", "until")}
    df["slot_label"] = slot_labels(local["t0"], local["t1"])
    rep = df["cycle"].notna()
    if rep.any():
        df.loc[rep, "slot_label"] = _window_labels(local["t0"][rep], local["t1"][rep], df.loc[rep, "cycle"],
                                                   local["until"][rep])
    return _public_period(df, zone), slot


def _public_period(df: pd.DataFrame, zone: str = "UTC") -> pd.DataFrame:
    """Nodes over the private selection's fixed public bucket (3640 days, epoch-aligned: not the
    data's period) shown over the period of the other published slots, or as "the whole period"."""
    from ..privacy.user.strategies.private_adaptive import PERIOD_NS

    bucket = ((df["t1"] - df["t0"]) == pd.Timedelta(PERIOD_NS, "ns")).to_numpy()
    if not bucket.any():
        return df
    other = df[~bucket]
    if not len(other):
        df.loc[bucket, "slot_label"] = "the whole period"
        return df
    last = other["until"].where(other["cycle"].notna(), other["t1"])
    lo, hi = other["t0"].min(), last.max()
    df.loc[bucket, "t0"], df.loc[bucket, "t1"] = lo, hi
    label = slot_labels(pd.Series([lo]).dt.tz_convert(zone), pd.Series([hi]).dt.tz_convert(zone)).iloc[0]
    df.loc[bucket, "slot_label"] = f"the whole period (published slots: {label})"
    return df


def span_text(span: pd.Timedelta) -> str:
    """"24 h", "90 min", "3 d": a slot's length in words (days for whole days from 2 days, and for
    spans of a week or more, which a clock change makes an hour short of whole days)."""
    hours = span / pd.Timedelta(hours=1)
    if hours >= 48 and (float(hours / 24).is_integer() or hours >= 24 * 7):
        return f"{hours / 24:.4g} d"  # a long span crossing a clock change is days, not 87359 h
    return f"{hours:g} h" if hours >= 1 else f"{span / pd.Timedelta(minutes=1):g} min"


def slot_labels(t0: pd.Series, t1: pd.Series) -> pd.Series:
    """Each slot [t0, t1) in words: "2015-09-06 05:00–06:00 UTC" within one day, else
    "2015-09-06 05:00 → 2015-09-07 05:00 UTC (24 h)" (so a day-long node never reads "05:00–05:00").
    Written once per distinct slot (a release of 128,474 nodes has about 4,000) and mapped to the rows."""
    if len(t0) and not (t0.isna().any() or t1.isna().any()):
        codes, uniq = pd.MultiIndex.from_arrays([t0, t1]).factorize()
        if len(uniq) < len(t0):
            words = _slot_words(pd.Series(uniq.get_level_values(0)), pd.Series(uniq.get_level_values(1)))
            return pd.Series(words.to_numpy(dtype=object)[codes], index=t0.index, dtype=object)
    return _slot_words(t0, t1)


def _slot_words(t0: pd.Series, t1: pd.Series) -> pd.Series:
    """:func:`slot_labels` row by row."""
    zone = " " + _zone_text(t0)  # the series' own zone: UTC, or the one the slots were cut in
    start = t0.dt.strftime("%Y-%m-%d %H:%M").astype(object)
    # within one date and not "00:00–00:00" (a 23-hour day); dates compared as dates: normalize() would
    # build the midnight a clock change skips (São Paulo's 2018-11-04) and raise
    last = (t1 - pd.Timedelta(1, "ns")).dt.strftime("%Y-%m-%d")
    same_day = ((t1 - t0 < pd.Timedelta(days=1)) & (t0.dt.strftime("%Y-%m-%d") == last)
                & (t0.dt.strftime("%H:%M") != t1.dt.strftime("%H:%M")))
    short = start + "–" + t1.dt.strftime("%H:%M").astype(object) + zone
    length = pd.Series([span_text(x) for x in t1 - t0], index=t0.index, dtype=object)
    long = start + " → " + t1.dt.strftime("%Y-%m-%d %H:%M").astype(object) + zone + " (" + length + ")"
    out = short.where(same_day, long)
    return out.where(t1 > t0, start + zone)


#: more finest slots than this: the time control steps over the nodes' own start and end times
MAX_STEPS = 2000


def time_steps(t0: pd.Series, t1: pd.Series, slot: pd.Timedelta, *, recurring: bool = False, zone: str = "UTC"
               ) -> tuple[tuple[pd.Timestamp, ...], tuple[pd.Timestamp, ...]]:
    """:func:`_time_steps` on the wall clock of ``zone`` (the slots were cut there): the steps are the
    wall lattice's slots, each written as the instants it spans (a slot the clocks skip whole is no
    step; one that starts in a gap starts at the first instant after it)."""
    if zone == "UTC" or not len(t0):
        return _time_steps(t0, t1, slot, recurring=recurring)
    wall = [pd.Series(pd.to_datetime(wall_clock(_ns(x), zone), unit="ns")) for x in (t0, t1)]
    starts, ends = _time_steps(wall[0], wall[1], slot, recurring=recurring)
    a, b = (localize_wall(np.array([x.value for x in xs], dtype=np.int64), zone) for xs in (starts, ends))
    keep = np.asarray(a < b)
    return tuple(a[keep]), tuple(b[keep])


def _time_steps(t0: pd.Series, t1: pd.Series, slot: pd.Timedelta, *, recurring: bool = False
                ) -> tuple[tuple[pd.Timestamp, ...], tuple[pd.Timestamp, ...]]:
    """(starts, ends) of the time control's steps. One slot length everywhere: the slots that hold a node
    (as before). Mixed lengths (or ``recurring`` windows, given with ``t1`` their last end): every
    finest slot (length ``slot``) from the first start to the last end, so a coarse node answers
    each finest slot it spans; past :data:`MAX_STEPS` the distinct start and end times (each step
    then a span over which the same nodes answer) — except with recurring windows, whose nodes
    change within such a span: then the first :data:`MAX_STEPS` finest slots only
    (:attr:`PublishedView.steps_cut` says so)."""
    if not len(t0):
        return (), ()
    spans = set((t1 - t0).tolist())
    if len(spans) <= 1 and spans <= {slot} and not recurring:
        starts = tuple(sorted(set(t0.tolist())))
        return starts, tuple(t + slot for t in starts)
    first, last = min(t0), max(t1)
    if slot > pd.Timedelta(0) and (recurring or (last - first) / slot <= MAX_STEPS):
        # recurring windows change within any longer span: every finest slot, the first MAX_STEPS of them
        last_step = min(last, first + MAX_STEPS * slot)
        starts = tuple(pd.date_range(first, last_step, freq=slot, inclusive="left"))
        return starts, tuple(min(t + slot, last) for t in starts)
    cuts = sorted(set(t0.tolist()) | set(t1.tolist()))
    return tuple(cuts[:-1]), tuple(cuts[1:])


def published_view(table: pd.DataFrame, summary: dict[str, Any], *, unit: str | None = None
                   ) -> PublishedView:
    """Read release.csv (as published) and summary.json into a :class:`PublishedView`.

    Rows with ``released`` false (public-occupancy lists every grid) become ``withheld``; the
    interval of a released mean is ``mean ± mean_error_bound`` cut to the public range [lower, bound]
    (the release already post-processes the mean into it; ``lower`` 0 when summary.json has none).
    """
    from .._validation import DpoptInputError

    for col in ("cell", "slot"):
        if col not in table.columns:
            raise DpoptInputError(f"`table` must be release.csv with a {col!r} column; got columns "
                                  f"{list(table.columns)}")
    df, slot = _normalise(table, summary)
    rel = df["released"].astype(bool) if "released" in df.columns else pd.Series(True, index=df.index)
    nodes = df[rel.to_numpy()].reset_index(drop=True)
    withheld = df[~rel.to_numpy()][["cell", "res", "t0", "t1", "slot_label"]].reset_index(drop=True)
    bound = summary.get("bound")
    bound = float(bound) if bound is not None else None
    lower = float(summary.get("lower") or 0.0)
    mean = pd.to_numeric(nodes.get("mean"), errors="coerce") if "mean" in nodes else pd.Series(
        np.nan, index=nodes.index)
    err = (pd.to_numeric(nodes["mean_error_bound"], errors="coerce") if "mean_error_bound" in nodes
           else pd.Series(np.nan, index=nodes.index))
    lo, hi = mean - err, mean + err
    if bound is not None:
        lo, hi = lo.clip(lower=lower), hi.clip(upper=bound)
    nodes = nodes.assign(mean=mean, bound=err, lo=lo, hi=hi)
    last = nodes["until"].where(nodes["cycle"].notna(), nodes["t1"])  # a recurring window spans the period
    steps, ends = time_steps(pd.concat([nodes["t0"], withheld["t0"]]), pd.concat([last, withheld["t1"]]), slot,
                             recurring=bool(nodes["cycle"].notna().any()), zone=_zone(summary))
    u, known = resolve_unit(summary, unit)
    cut = ends[-1] if ends and ends[-1] < max(pd.concat([last, withheld["t1"]])) else None
    return PublishedView(nodes=nodes, withheld=withheld, steps=steps, unit=u, unit_known=known,
                         confidence=float(summary.get("confidence", 0.95)), bound=bound, slot=slot,
                         step_ends=ends, steps_cut=cut, lower=lower, zone=_zone(summary))


def _epsilon_words(summary: dict[str, Any]) -> str:
    eps, delta, rho = summary.get("epsilon_total"), summary.get("delta"), summary.get("rho_total")
    parts = []
    if summary.get("budget_mode") == "per-grid" and summary.get("epsilon") is not None:
        parts.append(f"ε = {fmt_number(summary['epsilon'])} per grid "
                     f"({fmt_number(eps)} in total for a user in the most grids)")
    elif eps is not None:
        parts.append(f"ε = {fmt_number(eps)}")
    if delta:
        parts.append(f"δ = {float(delta):.3g}")
    if rho is not None:
        parts.append(f"ρ = {fmt_number(rho)} (zCDP)")
    return ", ".join(parts) if parts else "see summary.json"


def accounting_lines(summary: dict[str, Any], pieces: dict[str, float] | None = None) -> list[str]:
    """report.md's privacy accounting, one builder for both privacy models: the guarantee in numbers
    (:func:`privacy_statement`'s), how the pieces compose into it, and each piece a user spends
    (``pieces``: the spend record's, in its unit; pure-ε pieces of a ρ budget are named ``*_epsilon``)."""
    nums = _epsilon_words(summary)
    scope = "" if summary.get("budget_mode") == "per-grid" else " for every user over the whole release"
    lines = [f"- guarantee: **{nums}**{scope}"]
    delta_sel = float(summary.get("delta_selection") or 0.0)
    if summary.get("mechanism") == "gaussian":
        lines.append("- composition: rho-zero-concentrated DP (Gaussian noise): the rho of every piece adds up, a "
                     "pure-epsilon piece costs epsilon^2/2; the total implies (epsilon, delta)-DP by Canonne, Kamath "
                     "& Steinke 2020 (Corollary 13)" + (f"; delta includes {delta_sel:g} of the private partition "
                                                  "selection" if delta_sel > 0 else ""))
    else:
        lines.append("- composition: basic composition of pure epsilon-DP pieces (Laplace noise)"
                     + ("; delta is the private partition selection's" if delta_sel > 0 else ""))
    if pieces:
        unit = "rho, or epsilon for the pure-epsilon ones" if summary.get("mechanism") == "gaussian" else "epsilon"
        lines += [f"- pieces ({unit}):", *[f"  - {name}: {v:.6g}" for name, v in pieces.items()]]
    return lines


#: ``reweighting`` is shown to two decimals: below half of the last one the histogram saw no group of
#: users above the cap (a display resolution, not a property of the data)
REWEIGHTING_SHOWN = 0.005


def reweighting_seen(summary: Any) -> bool:
    """Whether summary.json's ``reweighting`` shows a group of users above the cap (at two decimals)."""
    d = getattr(summary, "reweighting", None)
    return d is not None and bool(d >= REWEIGHTING_SHOWN)


def unseen_heavy_users_text(summary: Any) -> str:
    """Where ``reweighting`` reads 0: what the histogram cannot see, in words (public: ε of the histogram)."""
    return ("the histogram of records per user shows no group of users above the cap T = "
            f"{getattr(summary, 'record_cap', None)} (summary.json `reweighting` 0{_unseen_clause(summary)}); "
            "where such an unseen group holds many records and other values than the rest, a published mean weighs "
            "it less than the mean of all the records does and can sit far from that mean: the intervals leave this "
            "out")


def reweighting_caveat(summary: Any) -> str:
    """What summary.json's ``reweighting`` can and cannot see, in words: it is read off the DP histogram
    of records per user (``record_histogram``), whose bins are 4× wide, so users just above the cap
    count as holding about twice it, and a bin of fewer users than its noise threshold
    (:func:`dpopt.privacy.user.place_bounds.unseen_users`) is not counted — e.g. five users holding a
    quarter of the records read 0.00 against an exact 0.25, and users of 257–287 records under
    T = 256 read 0.16 against 0.008 (an outside-style check). Public: ε of the histogram only."""
    return ("a rough figure read off the noisy histogram of records per user, whose bins are 4× wide: users just "
            "above the cap count as holding about twice it" + _unseen_clause(summary))


def _unseen_clause(summary: Any) -> str:
    """"; a group of fewer than about N users is below the histogram's noise …" (N from the
    histogram's ε, public), or "" where the summary holds no histogram."""
    from ..privacy.user.place_bounds import unseen_users

    hist = getattr(summary, "record_histogram", None) or {}
    eps = hist.get("epsilon") if isinstance(hist, dict) else None
    return (f"; a group of fewer than about {math.ceil(unseen_users(float(eps)))} users is below the histogram's "
            "noise and not counted, however many records it holds") if eps and float(eps) > 0 else ""


def answers_vary_text(summary: dict[str, Any]) -> str | None:
    """What the answers vary by, in words, from summary.json's ``answers_vary_by`` (the engine's
    crossed fit: the factors whose components are above 0); None where the summary does not say.
    Where the list is empty every grid is answered by one map-wide mean, and the text says so and what
    would change it — a reader of a map of one colour should not have to guess why."""
    factors = summary.get("answers_vary_by")
    if factors is None:
        return None
    where = ("; without a public list a grid is answered only inside a selected cell or a map cell holding two of "
             "them (whose interval is the whole range), elsewhere not at all"
             if str(summary.get("partitions", "")).startswith("private selection") else "")
    if factors:
        named = ["the grids' own measurements" if str(f) == "residual" else str(f) for f in factors]
        levels = sorted({int(r) for f in named for r in re.findall(r"\br(\d+) ×", f)})
        gloss = "".join(f"; r{r}: the H3 cells of resolution {r} containing the grids" for r in levels)
        if any(f.startswith(f"{EVERY_PLACE} × ") for f in named):
            gloss += f"; {EVERY_PLACE}: one effect of that time shared by all places"
        return ("the answers vary by " + ", ".join(named) + " (the factors the model found above the noise"
                + gloss + ")" + where)
    return ("every grid is answered by the same map-wide mean: no place or time the release measured differed "
            "from the others beyond its noise at this budget, so the answers cannot tell places or hours apart "
            "(each grid's interval is sized for that grid's own mean at the stated confidence, not for the map-wide "
            "mean; a grid far from all the others — an airport among streets — and the cap's re-weighting of users "
            "with many records can still fall outside it). What can help: a larger epsilon, more users, or a "
            "coarser grid (--h3-resolution, --slot); or, where you know beforehand that the place sets the value, "
            "--strategy place (over a partition list). A second release spends its own budget: the two add up for "
            "every user" + where)


def privacy_statement(summary: dict[str, Any]) -> tuple[str, str]:
    """(numbers, words): the privacy guarantee as numbers ("ε = 10, δ = 1e-06") and in one or two
    plain sentences naming what is protected and what is treated as public."""
    nums = _epsilon_words(summary)
    model = summary.get("privacy_model", "")
    if model == "public-occupancy":
        words = ("Each user's values (e.g. a bus's speeds) are protected over the whole release. "
                 "Which user was in which hexagon and hour, and how many records they sent, are treated "
                 "as public — right for positions that are broadcast anyway, not for payments or phones.")
    elif model == "user":
        words = ("Everything one user contributed is protected over the whole release: whether they "
                 "are in the data at all, where and when, and their values. Counts are published "
                 "only with noise.")
    else:
        words = f"Privacy model: {model or 'not stated'}."
    return nums, words + " A smaller ε means stronger privacy."
