"""Reading raw records (user, position, time, value) for a release, in chunks.

A record is one sample S_{g,ℓ}^{(j)} of seed 002 (§II-B): a user identifier, a latitude and
longitude (WGS84 degrees), a timestamp and a bounded value in [0, U]. Records are read from a CSV
file (optionally compressed), a Parquet file or directory, or a pandas DataFrame, in chunks of a
fixed number of rows so that inputs larger than memory stream through :mod:`dpopt.records.aggregate`.

Cleaning (counted in :class:`IngestReport`, never silent):

* a record with a missing or unparseable field (empty user, NaN coordinate, unparseable timestamp,
  NaN or infinite value) is dropped and counted under that field (a record missing several fields
  counts once in ``dropped_missing`` and once under each field in ``missing``);
* a record with a latitude outside [-90, 90] or a longitude outside [-180, 180] is dropped
  (``invalid_coordinates``);
* a value outside [0, U] is clipped to [0, U] (``out_of_range="clip"``, the default), dropped
  (``"drop"``) or stops the run with a :class:`~dpopt.DpoptInputError` (``"error"``). Clipping keeps
  the occupancy array independent of the values (seed 002's neighbours share it); dropping by value
  does not, so keep ``"drop"`` for sentinels that are invalid by definition.

Timestamps: ISO 8601 strings (an offset is converted to UTC; a naive time is taken as UTC), pandas
datetimes, or numbers (Unix time in ``timestamp_unit``, seconds by default). User identifiers are
kept as strings under dpopt's one label rule (:func:`dpopt._validation.label_parts`): an id that
is or reads as a whole number (``1``, ``1.0``, ``"1.0"``, ``" 001"``) is that integer's text
(``"1"``), so one vehicle written two ways is one user (never two, which would understate its
contribution); other text is stripped; empty ids are missing. Chunks and back-ends agree on the
labels.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_positive_int, label_parts

__all__ = [
    "FIELDS",
    "ColumnMap",
    "IngestReport",
    "CleanChunk",
    "iter_raw_chunks",
    "clean_chunk",
    "read_records",
    "count_rows",
    "DEFAULT_CHUNKSIZE",
]

#: canonical field names of a record
FIELDS: tuple[str, ...] = ("user_id", "latitude", "longitude", "timestamp", "value")

#: rows per chunk when reading files
DEFAULT_CHUNKSIZE = 500_000

OUT_OF_RANGE = ("clip", "drop", "error")
TIMESTAMP_UNITS = ("s", "ms", "us", "ns")


@dataclass(frozen=True)
class ColumnMap:
    """Names of the input columns holding each canonical field (identity by default)."""

    user_id: str = "user_id"
    latitude: str = "latitude"
    longitude: str = "longitude"
    timestamp: str = "timestamp"
    value: str = "value"

    @classmethod
    def from_any(cls, columns: ColumnMap | Mapping[str, str] | None) -> ColumnMap:
        """Build from ``None`` (defaults), a ColumnMap, or a mapping ``field -> input column``."""
        if columns is None:
            return cls()
        if isinstance(columns, ColumnMap):
            return columns
        if not isinstance(columns, Mapping):
            raise DpoptInputError(
                f"`columns` must be a mapping from {', '.join(FIELDS)} to input column names; "
                f"got {columns!r}"
            )
        unknown = sorted(set(columns) - set(FIELDS))
        if unknown:
            raise DpoptInputError(
                f"`columns` keys must be among {', '.join(FIELDS)}; got unknown {', '.join(map(repr, unknown))}"
            )
        for key, name in columns.items():
            if not isinstance(name, str) or not name:
                raise DpoptInputError(f"`columns[{key!r}]` must be a non-empty column name; got {name!r}")
        return replace(cls(), **dict(columns))

    def names(self) -> dict[str, str]:
        """``field -> input column``."""
        return {f: getattr(self, f) for f in FIELDS}


@dataclass(frozen=True)
class IngestReport:
    """What ingestion read, kept and dropped (all counts are records).

    ``records_read = records_kept + dropped_missing + invalid_coordinates + dropped_out_of_range``.
    """

    records_read: int = 0
    records_kept: int = 0
    dropped_missing: int = 0
    missing: dict[str, int] = field(default_factory=lambda: {f: 0 for f in FIELDS})
    invalid_coordinates: int = 0
    out_of_range: int = 0
    clipped: int = 0
    dropped_out_of_range: int = 0
    chunks: int = 0
    out_of_range_policy: str = "clip"

    @property
    def dropped_records(self) -> int:
        """All dropped records (missing fields, invalid coordinates, out-of-range values dropped)."""
        return self.dropped_missing + self.invalid_coordinates + self.dropped_out_of_range

    def __add__(self, other: IngestReport) -> IngestReport:
        return IngestReport(
            records_read=self.records_read + other.records_read,
            records_kept=self.records_kept + other.records_kept,
            dropped_missing=self.dropped_missing + other.dropped_missing,
            missing={f: self.missing.get(f, 0) + other.missing.get(f, 0) for f in FIELDS},
            invalid_coordinates=self.invalid_coordinates + other.invalid_coordinates,
            out_of_range=self.out_of_range + other.out_of_range,
            clipped=self.clipped + other.clipped,
            dropped_out_of_range=self.dropped_out_of_range + other.dropped_out_of_range,
            chunks=self.chunks + other.chunks,
            out_of_range_policy=other.out_of_range_policy if other.chunks else self.out_of_range_policy,
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output (adds ``dropped_records``)."""
        return {
            "records_read": self.records_read,
            "records_kept": self.records_kept,
            "dropped_records": self.dropped_records,
            "dropped_missing": self.dropped_missing,
            "missing": dict(self.missing),
            "invalid_coordinates": self.invalid_coordinates,
            "out_of_range": self.out_of_range,
            "clipped": self.clipped,
            "dropped_out_of_range": self.dropped_out_of_range,
            "out_of_range_policy": self.out_of_range_policy,
            "chunks": self.chunks,
        }


@dataclass(frozen=True)
class CleanChunk:
    """Clean records of one chunk as column arrays (canonical fields).

    ``user`` object array of str; ``latitude``/``longitude``/``value`` float64;
    ``timestamp`` int64 nanoseconds since the Unix epoch (UTC).
    """

    user: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray
    timestamp: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return int(self.value.shape[0])


# ----------------------------------------------------------------------------------------------
# sources


def _source_kind(source: Any) -> str:
    if isinstance(source, pd.DataFrame):
        return "frame"
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise DpoptInputError(f"`records` must be an existing CSV or Parquet path; got {str(source)!r} (not found)")
        name = path.name.lower()
        if path.is_dir() or name.endswith((".parquet", ".pq", ".parq")):
            return "parquet"
        return "csv"
    raise DpoptInputError(
        f"`records` must be a pandas DataFrame or a path to a CSV/Parquet file; got {type(source).__name__}"
    )


def _check_columns(available: list[str], cmap: ColumnMap, where: str) -> None:
    missing = [(f, c) for f, c in cmap.names().items() if c not in available]
    if missing:
        wanted = ", ".join(f"{f} -> {c!r}" for f, c in missing)
        shown = ", ".join(map(repr, available[:20])) + (" ..." if len(available) > 20 else "")
        raise DpoptInputError(
            f"`records` ({where}) lacks the column(s) {wanted}; available columns: {shown}. "
            "Map names with `columns={...}` (CLI: --user-col, --lat-col, --lng-col, --time-col, --value-col)"
        )


def count_rows(source: Any) -> int | None:
    """Number of rows when known cheaply (DataFrame, Parquet metadata), else ``None``."""
    kind = _source_kind(source)
    if kind == "frame":
        return int(len(source))
    if kind == "parquet":
        try:
            import pyarrow.dataset as ds

            return int(ds.dataset(str(source), format="parquet").count_rows())
        except Exception:  # pragma: no cover - metadata unreadable; reading will report it
            return None
    return None


def iter_raw_chunks(
    source: Any, *, columns: ColumnMap | Mapping[str, str] | None = None, chunksize: int | None = None
) -> Iterator[pd.DataFrame]:
    """Yield the raw input in chunks with canonical column names (only the five fields).

    Parameters
    ----------
    source : DataFrame, or path to a CSV (``.csv``, ``.csv.gz``, ...) or Parquet file/directory.
    columns : mapping ``field -> input column`` for names other than the canonical ones.
    chunksize : rows per chunk (files default to :data:`DEFAULT_CHUNKSIZE`; a DataFrame is one chunk
        unless given).
    """
    cmap = ColumnMap.from_any(columns)
    if chunksize is not None:
        chunksize = check_positive_int(chunksize, "chunksize")
    rename = {c: f for f, c in cmap.names().items()}
    usecols = list(rename)
    kind = _source_kind(source)
    if kind == "frame":
        _check_columns([str(c) for c in source.columns], cmap, "DataFrame")
        frame = source[usecols].rename(columns=rename)
        step = chunksize or max(len(frame), 1)
        for start in range(0, max(len(frame), 1), step):
            yield frame.iloc[start : start + step]
        return
    if kind == "csv":
        try:
            header = pd.read_csv(source, nrows=0)
        except UnicodeDecodeError:
            raise DpoptInputError(f"`records` file {str(source)!r} is not UTF-8 text; convert it to UTF-8") from None
        except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError, EOFError) as exc:
            raise DpoptInputError(f"`records` file {str(source)!r} is not a readable CSV: {exc}") from None
        _check_columns([str(c) for c in header.columns], cmap, f"file {str(source)!r}")
        # ids and times as text; numbers inferred (a column with a bad entry stays text and
        # clean_chunk counts the entry). The Dask back-end passes the same options.
        # every column is read (``usecols`` would hide rows with more fields than the header, and a
        # first row with one extra field would shift the columns); such rows stop the run
        dtype = {cmap.user_id: str, cmap.timestamp: str}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", pd.errors.ParserWarning)
                reader = pd.read_csv(source, dtype=dtype, chunksize=chunksize or DEFAULT_CHUNKSIZE,
                                     keep_default_na=True, index_col=False)
            with reader:
                while True:
                    with warnings.catch_warnings():
                        warnings.simplefilter("error", pd.errors.ParserWarning)
                        chunk = next(reader, None)
                    if chunk is None:
                        break
                    yield chunk[usecols].rename(columns=rename)[list(FIELDS)]
        except pd.errors.ParserWarning:
            raise DpoptInputError(
                f"`records` file {str(source)!r} has a row with more fields than its header (the first "
                "data row); fix the file (quote fields holding commas)"
            ) from None
        except UnicodeDecodeError as exc:
            raise DpoptInputError(
                f"`records` file {str(source)!r} is not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} "
                f"at offset {exc.start} of a block); convert it to UTF-8"
            ) from None
        except (pd.errors.ParserError, OSError, EOFError, ValueError) as exc:
            text = " ".join(str(exc).split())
            raise DpoptInputError(f"`records` file {str(source)!r} could not be parsed as CSV: {text}") from None
        return
    # parquet
    try:
        import pyarrow.dataset as ds

        dataset = ds.dataset(str(source), format="parquet")
        _check_columns(list(dataset.schema.names), cmap, f"Parquet {str(source)!r}")
        for batch in dataset.to_batches(columns=usecols, batch_size=chunksize or DEFAULT_CHUNKSIZE):
            yield batch.to_pandas().rename(columns=rename)[list(FIELDS)]
    except DpoptInputError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DpoptInputError(f"`records` path {str(source)!r} is not readable Parquet: {exc}") from None


# ----------------------------------------------------------------------------------------------
# cleaning


#: the years pandas' nanosecond timestamps can hold (1677-09-21 .. 2262-04-11)
_YEAR_RANGE = (1678, 2261)


def _iso(col: pd.Series) -> pd.Series:
    """ISO 8601 text -> UTC timestamps; unparseable or outside pandas' range (1677-2262) -> NaT."""
    text = col.astype("string")
    year = pd.to_numeric(text.str.extract(r"^\s*([+-]?\d{4,})", expand=False), errors="coerce")
    inside = ~((year < _YEAR_RANGE[0]) | (year > _YEAR_RANGE[1])).fillna(False).to_numpy(dtype=bool)
    text = text.where(inside)
    try:
        return pd.to_datetime(text, utc=True, errors="coerce", format="ISO8601")
    except (pd.errors.OutOfBoundsDatetime, OverflowError):  # a boundary date: one by one
        return pd.Series([_one_iso(v) for v in text], index=col.index, dtype="datetime64[ns, UTC]")


def _one_iso(value: Any) -> Any:
    try:
        return pd.to_datetime(value, utc=True, errors="coerce", format="ISO8601")
    except (pd.errors.OutOfBoundsDatetime, OverflowError, ValueError, TypeError):
        return pd.NaT


def _parse_time(col: pd.Series, unit: str) -> np.ndarray:
    """Timestamps -> int64 ns since epoch UTC; unparseable or outside pandas' range -> INT64 min (NaT)."""
    if not pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_datetime64_any_dtype(col):
        # text: ISO 8601, or Unix times written as text ("1441515647") when nothing parses as ISO
        iso = _iso(col)
        if iso.notna().any() or not col.notna().any():
            return _as_ns(iso)
        col = pd.to_numeric(col, errors="coerce")
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        num = pd.to_numeric(col, errors="coerce").astype(float)
        per_unit = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}[unit]
        lo, hi = pd.Timestamp.min.value / per_unit, pd.Timestamp.max.value / per_unit
        num = num.where(np.isfinite(num) & (num > lo) & (num < hi))
        ts = pd.to_datetime(num, unit=unit, utc=True, errors="coerce")
    elif isinstance(col.dtype, pd.DatetimeTZDtype):
        ts = col.dt.tz_convert("UTC")
    elif pd.api.types.is_datetime64_dtype(col):
        ts = col.dt.tz_localize("UTC")
    else:
        ts = _iso(col)
    return _as_ns(ts)


def _as_ns(ts: pd.Series) -> np.ndarray:
    try:
        ts = ts.dt.as_unit("ns")
    except (pd.errors.OutOfBoundsDatetime, OverflowError):  # datetime64[s/ms/us] beyond 1677-2262
        lo = pd.Timestamp.min.tz_localize("UTC") if ts.dt.tz is not None else pd.Timestamp.min
        hi = pd.Timestamp.max.tz_localize("UTC") if ts.dt.tz is not None else pd.Timestamp.max
        ts = ts.where((ts >= lo) & (ts <= hi)).dt.as_unit("ns")
    return ts.array.asi8.copy() if hasattr(ts.array, "asi8") else ts.to_numpy().view("int64")


def _float(col: pd.Series) -> np.ndarray:
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _user_strings(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """User ids as str objects under dpopt's one label rule (:func:`dpopt._validation.label_parts`:
    ``1``, ``1.0``, ``"1.0"`` and ``" 001"`` are all user ``"1"``, text is stripped, missing ids are
    flagged); returns (labels, missing mask)."""
    labels, missing = label_parts(col)
    out = np.empty(labels.shape, dtype=object)
    out[:] = [str(v) if v is not None else "" for v in labels]
    return out, missing


def clean_chunk(
    raw: pd.DataFrame,
    *,
    bound: float,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
) -> tuple[CleanChunk, IngestReport]:
    """Clean one raw chunk (canonical columns) and count what was dropped or clipped.

    Values outside [0, U] are clipped, dropped or refused (``out_of_range``); see the module doc.
    """
    bound = check_bound(bound)
    out_of_range = check_choice(out_of_range, "out_of_range", OUT_OF_RANGE)
    timestamp_unit = check_choice(timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
    n = len(raw)
    user, miss_user = _user_strings(raw["user_id"])
    lat = _float(raw["latitude"])
    lng = _float(raw["longitude"])
    ts = _parse_time(raw["timestamp"], timestamp_unit)
    val = _float(raw["value"])
    nat = np.iinfo(np.int64).min
    miss = {
        "user_id": miss_user,
        "latitude": np.isnan(lat),
        "longitude": np.isnan(lng),
        "timestamp": ts == nat,
        "value": ~np.isfinite(val),
    }
    any_missing = np.zeros(n, dtype=bool)
    for m in miss.values():
        any_missing |= m
    bad_coord = ~any_missing & ((np.abs(lat) > 90.0) | (np.abs(lng) > 180.0))
    ok = ~any_missing & ~bad_coord
    with np.errstate(invalid="ignore"):
        oor = ok & ((val < 0.0) | (val > bound))
    n_oor = int(oor.sum())
    clipped = dropped_oor = 0
    if n_oor:
        if out_of_range == "error":
            bad = val[oor]
            raise DpoptInputError(
                f"`records` hold {n_oor} value(s) outside [0, bound] = [0, {bound:g}] in this chunk "
                f"(e.g. {bad[0]:g}; min {bad.min():g}, max {bad.max():g}); use out_of_range='clip' or 'drop' "
                "(CLI: --out-of-range clip|drop) or a larger bound"
            )
        if out_of_range == "clip":
            val = np.clip(val, 0.0, bound)
            clipped = n_oor
        else:
            ok &= ~oor
            dropped_oor = n_oor
    report = IngestReport(
        records_read=n,
        records_kept=int(ok.sum()),
        dropped_missing=int(any_missing.sum()),
        missing={f: int(m.sum()) for f, m in miss.items()},
        invalid_coordinates=int(bad_coord.sum()),
        out_of_range=n_oor,
        clipped=clipped,
        dropped_out_of_range=dropped_oor,
        chunks=1,
        out_of_range_policy=out_of_range,
    )
    chunk = CleanChunk(
        user=user[ok], latitude=lat[ok], longitude=lng[ok], timestamp=ts[ok], value=val[ok]
    )
    return chunk, report


def read_records(
    source: Any,
    *,
    bound: float,
    columns: ColumnMap | Mapping[str, str] | None = None,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
    chunksize: int | None = None,
) -> Iterator[tuple[CleanChunk, IngestReport]]:
    """Stream ``(clean chunk, its ingest counts)`` from a DataFrame, CSV or Parquet source.

    Sum the reports (``sum(reports, IngestReport())``) for the totals; see :func:`clean_chunk`.
    """
    bound = check_bound(bound)
    check_choice(out_of_range, "out_of_range", OUT_OF_RANGE)
    check_choice(timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
    for raw in iter_raw_chunks(source, columns=columns, chunksize=chunksize):
        yield clean_chunk(raw, bound=bound, out_of_range=out_of_range, timestamp_unit=timestamp_unit)
