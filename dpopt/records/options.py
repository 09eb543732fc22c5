"""The typed options of the records layer: how to grid (:class:`GridOptions`, also the front door's
``grid=``) and how to read (:class:`InputOptions`, also the front door's ``io=``), each a small frozen object validated when built.

Both are public configuration (no private data): they may be printed, logged and published.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from .._validation import DpoptInputError, check_choice, check_positive_int
from .grid import check_resolution, parse_slot, slot_text
from .ingest import DEFAULT_CHUNKSIZE, OUT_OF_RANGE, TIMESTAMP_UNITS, ColumnMap, check_timezone

__all__ = ["GridOptions", "InputOptions", "BACKENDS", "DEFAULT_TIME_WINDOW", "DEFAULT_MAX_DROPPED", "read_options_from_args"]

#: timestamps outside [start, end) are implausible by default (a wrong --timestamp-unit lands in 1970)
DEFAULT_TIME_WINDOW: tuple[str, str] = ("1990-01-01", "2100-01-01")

#: refuse a run that drops more than this share of the rows read
DEFAULT_MAX_DROPPED = 0.01


@dataclass(frozen=True)
class GridOptions:
    """The finest grid g = (H3 cell at ``h3_resolution``, UTC time slot of length ``slot``): one class
    for the records layer and the front door (:func:`dpopt.release.release`'s ``grid``).

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


#: record backends: streamed in chunks in this process, or on a Dask cluster
BACKENDS = ("local", "dask")


#: the decimal marks a CSV's numbers may be written with (InputOptions.decimal)
DECIMAL_MARKS = (".", ",")


@dataclass(frozen=True)
class InputOptions:
    """How records are read and cleaned (see :mod:`dpopt.records.ingest`): one class for the records
    layer and the front door (:func:`dpopt.release.release`'s ``io``).

    Parameters
    ----------
    columns : mapping ``{dpopt_name: your_column}`` (dpopt names: user_id, latitude, longitude,
        timestamp, value), or a :class:`ColumnMap`; None: the dpopt names themselves.
    out_of_range : values outside [0, U] (±inf included): ``"clip"`` (default), ``"drop"``, ``"error"``.
    timestamp_unit : unit of numeric (Unix) timestamps: s, ms, us, ns.
    chunksize : rows per chunk when streaming (default :data:`DEFAULT_CHUNKSIZE`).
    backend : "local" (streamed in chunks) or "dask" (``client`` a ``distributed.Client``; default a
        local cluster).
    client : a ``distributed.Client`` (backend "dask" only).
    progress : progress bars on stderr.
    sep : CSV field separator (default ``","``).
    decimal : the decimal mark of numbers written as text (CSV): ``"."`` (default) or ``","`` (a
        semicolon-separated export of a spreadsheet set to a European or Brazilian locale, 77,11);
        must differ from ``sep``.
    max_dropped : the run is refused when more than this share of the rows read is dropped (None:
        :data:`DEFAULT_MAX_DROPPED`, :attr:`dropped_limit`; 1 disables the check). The ``user`` model
        refuses it (how many records were dropped is private there).
    time_window : (start, end) of plausible timestamps, years or ISO dates (default 1990 to 2100);
        records outside are dropped (counted) and count towards ``max_dropped``; None: no window.
    timezone : IANA zone ("America/Chicago") in which times without a UTC offset were written;
        None (default): such times are refused (``naive_times`` "refuse"), or dropped and counted
        ("drop": the ``user`` model's front door sets it, since whether a release happens must not
        depend on one user's rows; a column of naive datetimes, naive by its type, stays refused).
    naive_times : "refuse" (default) or "drop", as above.
    """

    columns: Any = None
    out_of_range: str = "clip"
    timestamp_unit: str = "s"
    chunksize: int = DEFAULT_CHUNKSIZE
    backend: str = "local"
    client: Any = None
    progress: bool = False
    sep: str = ","
    decimal: str = "."
    max_dropped: float | None = None
    time_window: tuple[Any, Any] | None = field(default=DEFAULT_TIME_WINDOW)
    timezone: str | None = None
    naive_times: str = "refuse"

    def __post_init__(self) -> None:
        check_timezone(self.timezone)
        check_choice(self.naive_times, "naive_times", ("refuse", "drop"))
        object.__setattr__(self, "columns", ColumnMap.from_any(self.columns))
        if self.sep == "\\t":  # the CLI's --sep '\t'
            object.__setattr__(self, "sep", "\t")
        if not isinstance(self.sep, str) or len(self.sep) != 1 or self.sep in "\r\n\"":
            raise DpoptInputError(f"`sep` must be one character such as ',' or ';' (CLI --sep); got {self.sep!r}")
        check_choice(self.decimal, "decimal", DECIMAL_MARKS)
        if self.decimal == self.sep:
            raise DpoptInputError(f"`decimal` (CLI --decimal) must differ from `sep` (--sep); both are {self.sep!r}: "
                                  "a file with decimal commas is separated by ';' (--sep ';')")
        check_choice(self.timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
        check_choice(self.out_of_range, "out_of_range", OUT_OF_RANGE)
        check_choice(self.backend, "backend", BACKENDS)
        if self.client is not None and self.backend != "dask":
            raise DpoptInputError("`client` is a Dask client: it needs backend='dask'")
        chunks = DEFAULT_CHUNKSIZE if self.chunksize is None else self.chunksize
        object.__setattr__(self, "chunksize", check_positive_int(chunks, "chunksize"))
        share = self.max_dropped
        if share is not None:
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= float(share) <= 1.0:
                raise DpoptInputError(f"`max_dropped` (CLI --max-dropped) must be a share in [0, 1]; got {share!r}")
            object.__setattr__(self, "max_dropped", float(share))
        if isinstance(self.time_window, str) and self.time_window == "default":
            object.__setattr__(self, "time_window", DEFAULT_TIME_WINDOW)
        if self.time_window is not None:
            object.__setattr__(self, "time_window", self._window(self.time_window))

    @property
    def dropped_limit(self) -> float:
        """The share of dropped rows above which a run is refused: ``max_dropped`` or the default."""
        return DEFAULT_MAX_DROPPED if self.max_dropped is None else self.max_dropped

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

    def for_workers(self) -> "InputOptions":
        """These options without the Dask ``client``: what a step shipped to a worker may carry (a
        client cannot be pickled, and a worker has no use for it)."""
        return replace(self, client=None, backend="local") if self.client is not None else self

    def column_map(self) -> ColumnMap:
        """The columns as a :class:`ColumnMap`."""
        return self.columns  # type: ignore[return-value]


def read_options_from_args(args: Any) -> InputOptions:
    """:class:`InputOptions` from the flags of ``_add_input_arguments`` (dpopt/cli/release.py)."""
    columns: Mapping[str, str] = {"user_id": args.user_col, "latitude": args.lat_col, "longitude": args.lng_col,
                                  "timestamp": args.time_col, "value": args.value_col}
    return InputOptions(
        columns=columns, sep=args.sep, decimal=getattr(args, "decimal", "."), timestamp_unit=args.timestamp_unit,
        out_of_range=args.out_of_range,
        chunksize=args.chunksize, max_dropped=getattr(args, "max_dropped", None),
        time_window=None if str(args.time_window).lower() == "none" else args.time_window,
        timezone=getattr(args, "timezone", None),
    )
