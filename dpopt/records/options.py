"""The typed options of the records layer: how to grid (:class:`GridSpec`) and how to read
(:class:`ReadOptions`), each a small frozen object validated when built.

Both are public configuration (no private data): they may be printed, logged and published.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._validation import DpoptInputError, check_choice, check_positive_int
from .grid import check_resolution, parse_slot, slot_text
from .ingest import DEFAULT_CHUNKSIZE, OUT_OF_RANGE, TIMESTAMP_UNITS, ColumnMap, check_timezone

__all__ = ["GridSpec", "ReadOptions", "DEFAULT_TIME_WINDOW", "DEFAULT_MAX_DROPPED", "read_options_from_args"]

#: timestamps outside [start, end) are implausible by default (a wrong --timestamp-unit lands in 1970)
DEFAULT_TIME_WINDOW: tuple[str, str] = ("1990-01-01", "2100-01-01")

#: refuse a run that drops more than this share of the rows read
DEFAULT_MAX_DROPPED = 0.01


@dataclass(frozen=True)
class GridSpec:
    """The finest grid g = (H3 cell at ``h3_resolution``, UTC time slot of length ``slot``).

    ``slot`` is a duration (``"1h"``, ``"15min"``, seconds); it is normalised to text and
    :attr:`slot_ns` gives its length in nanoseconds.
    """

    h3_resolution: int = 7
    slot: Any = "1h"

    def __post_init__(self) -> None:
        object.__setattr__(self, "h3_resolution", check_resolution(self.h3_resolution))
        object.__setattr__(self, "slot", slot_text(parse_slot(self.slot)))

    @property
    def slot_ns(self) -> int:
        """Slot length in nanoseconds."""
        return parse_slot(self.slot)


def _timestamp(value: Any, name: str) -> pd.Timestamp:
    """A UTC timestamp from a year (``1990``), an ISO date/time string or a Timestamp."""
    text = str(value).strip()
    try:
        if isinstance(value, bool):
            raise ValueError
        if text.isdigit() and len(text) <= 4:
            ts = pd.Timestamp(year=int(text), month=1, day=1)
        else:
            ts = pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        raise DpoptInputError(f"`{name}` must be a year or an ISO date such as '1990-01-01'; got {value!r}") from None
    if ts is pd.NaT:
        raise DpoptInputError(f"`{name}` must be a year or an ISO date; got {value!r}")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


@dataclass(frozen=True)
class ReadOptions:
    """How records are read and cleaned (see :mod:`dpopt.records.ingest`).

    Parameters
    ----------
    columns : mapping ``{dpopt_name: your_column}`` (dpopt names: user_id, latitude, longitude,
        timestamp, value), or a :class:`ColumnMap`; None: the dpopt names themselves.
    sep : CSV field separator (default ``","``).
    timestamp_unit : unit of numeric (Unix) timestamps: s, ms, us, ns.
    out_of_range : values outside [0, U] (±inf included): ``"clip"`` (default), ``"drop"``, ``"error"``.
    chunk_rows : rows per chunk when streaming (default :data:`DEFAULT_CHUNKSIZE`).
    max_dropped : the run is refused when more than this share of the rows read is dropped
        (default 0.01; 1 disables the check).
    time_window : (start, end) of plausible timestamps, years or ISO dates (default 1990 to 2100);
        records outside are dropped (counted) and count towards ``max_dropped``; None: no window.
    timezone : IANA zone ("America/Chicago") in which times without a UTC offset were written;
        None (default): such times are refused.
    """

    columns: Any = None
    sep: str = ","
    timestamp_unit: str = "s"
    out_of_range: str = "clip"
    chunk_rows: int = DEFAULT_CHUNKSIZE
    max_dropped: float = DEFAULT_MAX_DROPPED
    time_window: tuple[Any, Any] | None = field(default=DEFAULT_TIME_WINDOW)
    timezone: str | None = None

    def __post_init__(self) -> None:
        check_timezone(self.timezone)
        object.__setattr__(self, "columns", ColumnMap.from_any(self.columns))
        if self.sep == "\\t":  # the CLI's --sep '\t'
            object.__setattr__(self, "sep", "\t")
        if not isinstance(self.sep, str) or len(self.sep) != 1 or self.sep in "\r\n\"":
            raise DpoptInputError(f"`sep` must be one character such as ',' or ';' (CLI --sep); got {self.sep!r}")
        check_choice(self.timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
        check_choice(self.out_of_range, "out_of_range", OUT_OF_RANGE)
        object.__setattr__(self, "chunk_rows", check_positive_int(self.chunk_rows, "chunk_rows"))
        share = self.max_dropped
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= float(share) <= 1.0:
            raise DpoptInputError(f"`max_dropped` (CLI --max-dropped) must be a share in [0, 1]; got {share!r}")
        object.__setattr__(self, "max_dropped", float(share))
        if self.time_window is not None:
            object.__setattr__(self, "time_window", self._window(self.time_window))

    @staticmethod
    def _window(window: Any) -> tuple[str, str]:
        if isinstance(window, str):
            window = tuple(window.split(","))
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise DpoptInputError(
                f"`time_window` (CLI --time-window) must be two years or dates START,END; got {window!r}")
        lo = _timestamp(window[0], "time_window")
        hi = _timestamp(window[1], "time_window")
        if not lo < hi:
            raise DpoptInputError(f"`time_window` (CLI --time-window) must have START < END; got {window!r}")
        return lo.strftime("%Y-%m-%dT%H:%M:%SZ"), hi.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def window_ns(self) -> tuple[int, int] | None:
        """The time window as int64 ns since the epoch [start, end), or None."""
        if self.time_window is None:
            return None
        return pd.Timestamp(self.time_window[0]).value, pd.Timestamp(self.time_window[1]).value

    def column_map(self) -> ColumnMap:
        """The columns as a :class:`ColumnMap`."""
        return self.columns  # type: ignore[return-value]


def read_options_from_args(args: Any) -> ReadOptions:
    """:class:`ReadOptions` from the flags of ``_add_input_arguments`` (dpopt/cli/release.py)."""
    columns: Mapping[str, str] = {"user_id": args.user_col, "latitude": args.lat_col, "longitude": args.lng_col,
                                  "timestamp": args.time_col, "value": args.value_col}
    return ReadOptions(
        columns=columns, sep=args.sep, timestamp_unit=args.timestamp_unit, out_of_range=args.out_of_range,
        chunk_rows=args.chunksize if args.chunksize is not None else DEFAULT_CHUNKSIZE,
        max_dropped=DEFAULT_MAX_DROPPED if getattr(args, "max_dropped", None) is None else args.max_dropped,
        time_window=None if str(args.time_window).lower() == "none" else args.time_window,
        timezone=getattr(args, "timezone", None),
    )
