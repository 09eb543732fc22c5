"""Reading raw records (user, position, time, value) for a release, in chunks.

A record is one sample S_{g,ℓ}^{(j)} of seed 002 (§II-B): a user identifier, a latitude and
longitude (WGS84 degrees), a timestamp and a bounded value in [0, U]. Records are read from a CSV
file (optionally compressed), a Parquet file or directory, or a pandas DataFrame, in chunks of a
fixed number of rows so that inputs larger than memory stream through :mod:`dpopt.records.aggregate`.

Cleaning (counted in :class:`IngestReport`, never silent):

* a record with a missing or unparseable field (empty user, NaN coordinate, unparseable timestamp,
  NaN value) is dropped and counted under that field (a record missing several fields counts once
  in ``dropped_missing`` and once under each field in ``missing``; ``unparseable`` counts the
  entries that were present but did not parse);
* with a time window (:class:`dpopt.records.InputOptions`, 1990–2100 by default) a record
  timestamped outside it is dropped (``outside_time_window``);
* a record with a latitude outside [-90, 90] or a longitude outside [-180, 180] is dropped
  (``invalid_coordinates``);
* a value outside [0, U], ±inf included (a number out of range), is clipped to [0, U] (``out_of_range="clip"``, the default), dropped
  (``"drop"``) or stops the run with a :class:`~dpopt.DpoptInputError` (``"error"``). Clipping keeps
  the occupancy array independent of the values (seed 002's neighbours share it); dropping by value
  does not, so keep ``"drop"`` for sentinels that are invalid by definition.
* with a lower end L (``lower``, values in [L, L + U]) every value x is read as x − L before the
  range check, so everything downstream sees values in [0, U]; L = 0 (the default) subtracts
  nothing (no float changes).

Timestamps, row by row: ISO 8601 strings (an offset is converted to UTC; a time without one,
compact dates such as ``20150906`` included, is read in ``timezone`` and refused without one), pandas
datetimes (naive ones likewise), or numbers and digit strings (Unix time in ``timestamp_unit``,
seconds by default); one column may mix them. User identifiers are
kept as strings under dpopt's one label rule (:func:`dpopt._validation.label_parts`): text is
kept exactly as written ("0123" and "123" are two users), a number is its value (7 and 7.0 from one
numeric column are one user), so no two distinct ids of a column ever merge; a column
mixing numbers and text is refused, within a chunk and across chunks and files. Only an empty field
is missing: ``NA``, ``null``, ``None``, ``nan`` ... are ids like any other text. Chunks and back-ends
agree on the labels.

Sources: a DataFrame (pandas; polars and GeoPandas converted by :func:`as_frame`), a CSV or Parquet
file, or a folder read by suffix (:func:`is_csv_name`, :func:`parquet_files`); a column the release
reads twice (two fields, one column; a duplicated name) is refused before any record is read.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_lower, check_positive_int, label_texts

__all__ = [
    "FIELDS",
    "ColumnMap",
    "IngestReport",
    "CleanChunk",
    "iter_raw_chunks",
    "clean_chunk",
    "read_records",
    "count_rows",
    "check_dropped",
    "decimal_points",
    "DEFAULT_CHUNKSIZE",
    "parse_times",
    "check_timezone",
    "as_frame",
    "input_files",
    "is_csv_name",
    "parquet_files",
    "csv_options",
    "check_id_kinds",
]

#: canonical field names of a record
FIELDS: tuple[str, ...] = ("user_id", "latitude", "longitude", "timestamp", "value")

#: the CLI flag naming each field's column (for one-line errors)
_FLAG = {"user_id": "--user-col", "latitude": "--lat-col", "longitude": "--lng-col", "timestamp": "--time-col",
         "value": "--value-col"}

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
        values = [v for v in columns.values() if isinstance(v, str)]
        if unknown and values and set(values) <= set(FIELDS):
            pairs = ", ".join(f"{k!r}: {v!r}" for k, v in columns.items())
            flipped = ", ".join(f"{v!r}: {k!r}" for k, v in columns.items())
            raise DpoptInputError(
                f"`columns` maps {{dpopt_name: your_column}} (the other way round from pandas' rename); got "
                f"{{{pairs}}}, which looks like {{your_column: dpopt_name}}: pass {{{flipped}}}"
            )
        if unknown:
            raise DpoptInputError(
                f"`columns` keys must be among {', '.join(FIELDS)}; got unknown {', '.join(map(repr, unknown))}"
            )
        for key, name in columns.items():
            if not isinstance(name, str) or not name:
                raise DpoptInputError(f"`columns[{key!r}]` must be a non-empty column name; got {name!r}")
        return replace(cls(), **dict(columns))

    def __post_init__(self) -> None:
        names = self.names()
        for name in dict.fromkeys(names.values()):
            fields = [f for f, c in names.items() if c == name]
            if len(fields) > 1:
                flags = ", ".join(f"{_FLAG[f]} {name}" for f in fields)
                raise DpoptInputError(
                    f"`columns` reads {' and '.join(fields)} from one column {name!r} ({flags}); each field needs "
                    "its own column")

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
    unparseable: dict[str, int] = field(default_factory=lambda: {f: 0 for f in FIELDS})
    outside_time_window: int = 0
    time_window: tuple[str, str] | None = None
    #: up to two raw timestamp texts that did not parse (console diagnostics only, never published)
    timestamp_examples: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: kinds of the user ids read ("text", "number"): two kinds across chunks or files are refused
    id_kinds: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: the files read, in order (none for a DataFrame)
    files: tuple[str, ...] = field(default=(), compare=False)

    @property
    def dropped_records(self) -> int:
        """All dropped records (missing or unparseable fields, invalid coordinates, out-of-range
        values dropped, timestamps outside the time window)."""
        return self.dropped_missing + self.invalid_coordinates + self.dropped_out_of_range + self.outside_time_window

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
            unparseable={f: self.unparseable.get(f, 0) + other.unparseable.get(f, 0) for f in FIELDS},
            outside_time_window=self.outside_time_window + other.outside_time_window,
            time_window=other.time_window if other.chunks else self.time_window,
            timestamp_examples=(self.timestamp_examples + other.timestamp_examples)[:2],
            id_kinds=check_id_kinds(self.id_kinds | other.id_kinds),
            files=self.files + tuple(f for f in other.files if f not in self.files),
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
            "unparseable": dict(self.unparseable),
            "outside_time_window": self.outside_time_window,
            "time_window": None if self.time_window is None else list(self.time_window),
            "chunks": self.chunks,
        }

    def for_diagnostics(self) -> dict[str, Any]:
        """:meth:`as_dict` with the files read: for the data holder's diagnostics only (the paths are
        the holder's own, never published)."""
        return {**self.as_dict(), "files": list(self.files)}

    def dropped_by_cause(self) -> dict[str, int]:
        """Dropped records by cause (a record missing several fields counts under each)."""
        causes = {f"missing {f}": self.missing.get(f, 0) - self.unparseable.get(f, 0) for f in FIELDS}
        causes.update({f"unparseable {f}": self.unparseable.get(f, 0) for f in FIELDS})
        if "unparseable timestamp" in causes:  # _localize: a wall time a clock change makes ambiguous or absent
            causes["unparseable timestamp (or a local wall time that a clock change makes occur twice or never)"] = \
                causes.pop("unparseable timestamp")
        causes["invalid coordinates"] = self.invalid_coordinates
        causes["value out of range (dropped)"] = self.dropped_out_of_range
        causes["timestamp outside the time window"] = self.outside_time_window
        return {k: v for k, v in causes.items() if v}


def check_id_kinds(kinds: frozenset[str]) -> frozenset[str]:
    """Refuse user ids of two kinds across chunks or files (the integer 7 in one Parquet file and
    the text "7" in another would become one user); returns ``kinds``."""
    if len(kinds) > 1:
        raise DpoptInputError(
            f"the `user` ids are {' in some chunks or files and '.join(sorted(kinds))} in others; convert them to one "
            "type (e.g. all text) so no two distinct ids can become one user")
    return kinds


def _id_kinds(col: pd.Series) -> frozenset[str]:
    """The kind of a raw user column's ids: text, number, or none (no id present)."""
    kind = pd.api.types.infer_dtype(col, skipna=True)
    if kind == "empty":
        return frozenset()
    if kind in ("string", "unicode"):
        return frozenset({"text"})
    if kind in ("integer", "floating", "mixed-integer-float", "decimal", "integer-na"):
        return frozenset({"number"})
    return frozenset({kind})


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
        if path.is_dir():
            if _csv_files(path):
                return "csvdir"
            if not parquet_files(path):
                raise DpoptInputError(f"`records` folder {str(source)!r} holds no CSV ({', '.join(_CSV)}, optionally "
                                      f"compressed) or Parquet ({', '.join(_PARQUET)}) file")
            return "parquet"
        return "parquet" if path.name.lower().endswith(_PARQUET) else "csv"
    raise DpoptInputError(
        "`records` must be a DataFrame (pandas, polars or GeoPandas) or a path to a CSV/Parquet file; got "
        f"{type(source).__module__.split('.')[0]}.{type(source).__name__}")


_PARQUET = (".parquet", ".pq", ".parq")
_CSV = (".csv", ".tsv", ".txt")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst")


def is_csv_name(name: str) -> bool:
    """Whether a file name ends in a CSV suffix (.csv, .tsv, .txt), optionally with a compression
    suffix (.gz, .bz2, .xz, .zip, .zst): ``day.csv.gz`` is, ``day.csv.bak`` is not."""
    lower = name.lower()
    for z in _COMPRESSED:
        if lower.endswith(z):
            lower = lower[: -len(z)]
            break
    return lower.endswith(_CSV)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith((".", "_")) for part in path.relative_to(root).parts)


def _csv_files(path: Path) -> list[Path]:
    """The CSV files directly in a directory, by suffix (:func:`is_csv_name`; sorted by name,
    hidden files skipped); [] if it holds Parquet. A directory mixing CSV and Parquet is refused."""
    files = sorted(p for p in path.iterdir() if p.is_file() and not _hidden(p, path))
    parquet = [p for p in files if p.name.lower().endswith(_PARQUET)]
    csv = [p for p in files if is_csv_name(p.name)]
    if parquet and csv:
        raise DpoptInputError(f"`records` directory {str(path)!r} mixes CSV and Parquet files; keep one format")
    return csv


def parquet_files(path: Path) -> list[Path]:
    """The Parquet files of a directory and its sub-folders (partitioned datasets), by suffix
    (.parquet, .pq, .parq), sorted; hidden files and folders (``.x``, ``_x``) skipped."""
    return sorted(p for p in Path(path).rglob("*")
                  if p.is_file() and p.name.lower().endswith(_PARQUET) and not _hidden(p, Path(path)))


def input_files(source: Any) -> tuple[str, ...]:
    """The files :func:`iter_raw_chunks` reads from ``source`` (none for a DataFrame), in order."""
    if not isinstance(source, (str, Path)) or not Path(source).exists():
        return ()
    path = Path(source)
    if not path.is_dir():
        return (str(path),)
    return tuple(str(p) for p in (_csv_files(path) or parquet_files(path)))


def as_frame(source: Any, columns: ColumnMap | Mapping[str, str] | None = None) -> Any:
    """A polars DataFrame or LazyFrame, or a GeoDataFrame, as a pandas DataFrame; anything else
    unchanged. Detected by module name, so neither polars nor GeoPandas is needed to import dpopt.

    A GeoDataFrame whose columns lack the ones named for latitude and longitude gives them from its
    point geometry (y, x), in WGS84 (a projected CRS is converted to EPSG:4326 first)."""
    module = type(source).__module__.split(".")[0]
    if module == "polars":
        frame = source.collect() if hasattr(source, "collect") else source
        try:
            return frame.to_pandas()
        except Exception as exc:  # polars raises its own types (e.g. a missing pyarrow)
            raise DpoptInputError(f"`records` polars frame could not be converted to pandas: {exc}") from None
    if module == "geopandas" and isinstance(source, pd.DataFrame) and hasattr(source, "geometry"):
        return _geo_frame(source, ColumnMap.from_any(columns))
    return source


def _geo_frame(gdf: Any, cmap: ColumnMap) -> pd.DataFrame:
    """A GeoDataFrame's point geometry as the latitude/longitude columns (:func:`as_frame`)."""
    name = gdf.geometry.name
    if cmap.latitude in gdf.columns and cmap.longitude in gdf.columns:
        return pd.DataFrame(gdf.drop(columns=name))
    geo = gdf.geometry
    if geo.crs is not None and not geo.crs.is_geographic:
        geo = geo.to_crs(4326)
    kinds = set(geo.geom_type.dropna())
    if not kinds <= {"Point"}:
        raise DpoptInputError(f"`records` GeoDataFrame geometry must be points (one position per record); got "
                              f"{', '.join(sorted(kinds))}")
    frame = pd.DataFrame(gdf.drop(columns=name))
    frame[cmap.latitude] = geo.y.to_numpy()
    frame[cmap.longitude] = geo.x.to_numpy()
    return frame


def _check_unique(names: list[str], cmap: ColumnMap, where: str) -> None:
    """Refuse an input holding a column the release reads twice (pandas would pick one copy)."""
    twice = sorted({c for c in cmap.names().values() if names.count(c) > 1})
    if twice:
        raise DpoptInputError(f"`records` ({where}) has the column {twice[0]!r} more than once; rename the copies "
                              "so the one to read is unambiguous")


def _check_columns(available: list[str], cmap: ColumnMap, where: str, sep: str | None = None) -> None:
    missing = [(f, c) for f, c in cmap.names().items() if c not in available]
    if missing:
        wanted = ", ".join(f"{f} -> {c!r}" for f, c in missing)
        shown = ", ".join(map(repr, available[:20])) + (" ..." if len(available) > 20 else "")
        hint = ""
        if sep is not None and len(available) <= 2:
            found = [d for d in (";", "\t", "|", ",") if d != sep and any(d in c for c in available)]
            if found:
                text = "\\t" if found[0] == "\t" else found[0]
                hint = f" The header looks '{text}'-separated: pass sep='{text}' (CLI: --sep '{text}')."
        raise DpoptInputError(
            f"`records` ({where}) lacks the column(s) {wanted}; available columns: {shown}.{hint} "
            "Map names with `columns={dpopt_name: your_column}` (CLI: --user-col, --lat-col, --lng-col, "
            "--time-col, --value-col)"
        )


def count_rows(source: Any) -> int | None:
    """Number of rows when known cheaply (DataFrame, Parquet metadata), else ``None``."""
    source = as_frame(source)
    kind = _source_kind(source)
    if kind == "frame":
        return int(len(source))
    if kind == "parquet":
        try:
            import pyarrow.dataset as ds

            return int(ds.dataset(_parquet_source(source), format="parquet").count_rows())
        except Exception:  # pragma: no cover - metadata unreadable; reading will report it
            return None
    return None


def iter_raw_chunks(
    source: Any, *, columns: ColumnMap | Mapping[str, str] | None = None, chunksize: int | None = None,
    sep: str = ",",
) -> Iterator[pd.DataFrame]:
    """Yield the raw input in chunks with canonical column names (only the five fields).

    Parameters
    ----------
    source : DataFrame, or path to a CSV (``.csv``, ``.csv.gz``, ...) or Parquet file, or a
        directory of CSV files or of Parquet files (one input; files in name order).
    columns : mapping ``{dpopt_name: your_column}`` for names other than the canonical ones.
    chunksize : rows per chunk (files default to :data:`DEFAULT_CHUNKSIZE`; a DataFrame is one chunk
        unless given).
    sep : CSV field separator.
    """
    cmap = ColumnMap.from_any(columns)
    if chunksize is not None:
        chunksize = check_positive_int(chunksize, "chunksize")
    rename = {c: f for f, c in cmap.names().items()}
    usecols = list(rename)
    source = as_frame(source, cmap)
    kind = _source_kind(source)
    if kind == "frame":
        _check_unique([str(c) for c in source.columns], cmap, "DataFrame")
        _check_columns([str(c) for c in source.columns], cmap, "DataFrame")
        frame = source[usecols].rename(columns=rename)
        step = chunksize or max(len(frame), 1)
        for start in range(0, max(len(frame), 1), step):
            yield frame.iloc[start : start + step]
        return
    if kind in ("csv", "csvdir"):
        files = _csv_files(Path(source)) if kind == "csvdir" else [Path(source)]
        if files and all(p.stat().st_size == 0 for p in files):  # one empty part among others holds no record
            what = "every CSV file 0 bytes" if kind == "csvdir" else "0 bytes"
            raise DpoptInputError(f"`records` {str(source)!r} is empty ({what}): no header row names the columns "
                                  f"{sorted(usecols)}")
        for path in files:
            yield from _csv_chunks(path, cmap, chunksize or DEFAULT_CHUNKSIZE, sep)
        return
    yield from _parquet_chunks(source, cmap, chunksize or DEFAULT_CHUNKSIZE)


def _parquet_chunks(source: Any, cmap: ColumnMap, chunksize: int) -> Iterator[pd.DataFrame]:
    """Parquet file or directory (files in the dataset's order) in chunks of ``chunksize`` rows
    (the last chunk of each file shorter).

    Memory is bounded by a chunk and a row group: each file is read one row group at a time
    (``ParquetFile.read_row_group``) and cut into chunks. pyarrow's streaming readers
    (``Dataset.to_batches``, ``ParquetFile.iter_batches``) were measured to keep ≈ 13 MiB of Arrow
    memory per 500,000-row batch alive until the end of the file (2.6 GiB at 10^8 records,
    tests/benchmarks/results/scale.md); reading whole row groups keeps one at a time.
    """
    rename = {c: f for f, c in cmap.names().items()}
    try:
        import pyarrow.dataset as ds

        dataset = ds.dataset(_parquet_source(source), format="parquet")
        _check_unique(list(dataset.schema.names), cmap, f"Parquet {str(source)!r}")
        _check_columns(list(dataset.schema.names), cmap, f"Parquet {str(source)!r}")
        files = list(dataset.files)
    except DpoptInputError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DpoptInputError(f"`records` path {str(source)!r} is not readable Parquet: {exc}") from None
    for path in files:
        for table in _parquet_file_chunks(path, list(rename), chunksize):
            yield table.to_pandas().rename(columns=rename)[list(FIELDS)]


def _parquet_source(source: Any) -> Any:
    """A Parquet path for pyarrow: a file, or a directory's Parquet files by suffix (:func:`parquet_files`)."""
    path = Path(source)
    return [str(p) for p in parquet_files(path)] if path.is_dir() else str(path)


def _parquet_file_chunks(path: str, columns: list[str], chunksize: int) -> Iterator[Any]:
    """One Parquet file as pyarrow Tables of ``chunksize`` rows (the last one shorter), read one
    row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
        held: list[Any] = []
        rows = 0
        for i in range(reader.num_row_groups):
            group = reader.read_row_group(i, columns=columns)
            held.append(group)
            rows += group.num_rows
            if rows < chunksize:
                continue
            table = pa.concat_tables(held)
            held, rows = [], 0
            start = 0
            while table.num_rows - start >= chunksize:
                yield table.slice(start, chunksize)
                start += chunksize
            if start < table.num_rows:
                held, rows = [table.slice(start)], table.num_rows - start
            del table
        if rows:
            yield pa.concat_tables(held)
    except DpoptInputError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DpoptInputError(f"`records` path {str(path)!r} is not readable Parquet: {exc}") from None


def _csv_chunks(source: Path, cmap: ColumnMap, chunksize: int, sep: str) -> Iterator[pd.DataFrame]:
    """One CSV file in chunks (pandas); ids and times as text, numbers inferred."""
    rename = {c: f for f, c in cmap.names().items()}
    usecols = list(rename)
    kind = None if source.suffix.lower() in _COMPRESSED else _binary_kind(source)
    if kind is not None:
        raise DpoptInputError(f"`records` file {str(source)!r} is not a CSV: {kind}")
    try:
        header = pd.read_csv(source, nrows=1, header=None, sep=sep, dtype=str, keep_default_na=False)
    except UnicodeDecodeError:
        raise DpoptInputError(f"`records` file {str(source)!r} is not UTF-8 text; convert it to UTF-8") from None
    except pd.errors.EmptyDataError:
        return  # an empty file holds no record
    except (pd.errors.ParserError, OSError, EOFError) as exc:
        raise DpoptInputError(f"`records` file {str(source)!r} is not a readable CSV: {exc}") from None
    names = [str(c) for c in header.iloc[0]] if len(header) else []
    _check_unique(names, cmap, f"file {str(source)!r}")
    _check_columns(names, cmap, f"file {str(source)!r}", sep=sep)
    # ids and times as text; numbers inferred (a column with a bad entry stays text and
    # clean_chunk counts the entry). The Dask back-end passes the same options.
    # every column is read (``usecols`` would hide rows with more fields than the header, and a
    # first row with one extra field would shift the columns); such rows stop the run
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            reader = pd.read_csv(source, chunksize=chunksize, index_col=False, sep=sep, **csv_options(cmap))
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


#: suffixes pandas reads as compressed CSV (their first bytes are the compressor's)
_COMPRESSED = frozenset({".gz", ".bz2", ".zip", ".xz", ".zst", ".tar"})
#: the first bytes of binary files a CSV reader may be handed under another name, and what to do
_MAGIC = ((b"PAR1", "it is a Parquet file (it starts with PAR1): give it the suffix .parquet"),
          (b"\x1f\x8b", "it is gzip-compressed: give it the suffix .csv.gz"),
          (b"PK\x03\x04", "it is a ZIP archive (a spreadsheet?): export or unpack it as a UTF-8 CSV"))


def _binary_kind(source: Path) -> str | None:
    """What a binary file handed to the CSV reader is, from its first bytes (:data:`_MAGIC`); None
    for anything else."""
    try:
        with open(source, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    return next((what for magic, what in _MAGIC if head.startswith(magic)), None)


def csv_options(cmap: ColumnMap, *, numbers_as_text: bool = False) -> dict[str, Any]:
    """pandas ``read_csv`` options of both back-ends: ids and times as text, numbers inferred, and
    only an empty field missing (``NA``, ``null``, ``None``, ``nan`` ... are text: user ids such as
    "NA" are users, and such text in a number column is counted as unparseable). ``numbers_as_text``
    (the Dask reader): every column as text, converted by :func:`clean_chunk` as a chunk whose number
    column holds text is: Dask fixes a column's dtype from its first rows, and one "n/a" further down
    stopped the whole read (the same values: to_numeric of the text is read_csv's float)."""
    text = cmap.names().values() if numbers_as_text else (cmap.user_id, cmap.timestamp)
    return {"dtype": {c: str for c in text}, "keep_default_na": False,
            "na_values": {c: [""] for c in cmap.names().values()}}


# ----------------------------------------------------------------------------------------------
# cleaning


#: the years pandas' nanosecond timestamps can hold (1677-09-21 .. 2262-04-11)
_YEAR_RANGE = (1678, 2261)


def _iso_text(col: pd.Series) -> pd.Series:
    """ISO 8601 text with years outside pandas' range (1677-2262) made missing."""
    text = col.astype("string")
    year = pd.to_numeric(text.str.extract(r"^\s*([+-]?\d{4,})-", expand=False), errors="coerce")
    inside = ~((year < _YEAR_RANGE[0]) | (year > _YEAR_RANGE[1])).fillna(False).to_numpy(dtype=bool)
    return text.where(inside)


def _iso(col: pd.Series, utc: bool = True) -> pd.Series:
    """ISO 8601 text -> UTC timestamps (``utc``) or naive ones (text without an offset);
    unparseable or outside pandas' range (1677-2262) -> NaT."""
    text = _iso_text(col)
    dtype = "datetime64[ns, UTC]" if utc else "datetime64[ns]"
    try:
        return pd.to_datetime(text, utc=utc, errors="coerce", format="ISO8601").astype(dtype)
    except (pd.errors.OutOfBoundsDatetime, OverflowError):  # a boundary date: one by one
        return pd.Series([_one_iso(v, utc) for v in text], index=col.index, dtype=dtype)


def _one_iso(value: Any, utc: bool = True) -> Any:
    try:
        return pd.to_datetime(value, utc=utc, errors="coerce", format="ISO8601")
    except (pd.errors.OutOfBoundsDatetime, OverflowError, ValueError, TypeError):
        return pd.NaT


#: ISO 8601 text that ends in a UTC offset after a time (``...T05:00:47Z``, ``... 05:00+05:30``)
_AWARE = r"[Tt\s]\d{2}(?::?\d{2}){0,2}(?:[.,]\d+)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)\s*$"
#: Unix times written as text (a compact ISO date, 8 digits such as 20150906, is a date, not one)
_UNIX = r"\s*[+-]?(?:\d{1,7}|\d{9,})(?:\.\d*)?\s*"


def check_timezone(timezone: Any) -> str | None:
    """``timezone``: None, or an IANA zone name ("America/Chicago", "UTC") known to zoneinfo."""
    if timezone is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        if not isinstance(timezone, str) or not timezone:
            raise ValueError
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise DpoptInputError(f"`timezone` must be an IANA time zone such as 'America/Chicago' or 'UTC' (CLI: "
                              f"--timezone Area/City); got {timezone!r}") from None
    return timezone


#: what reading does with a text time without a UTC offset when no zone is given
NAIVE_TIMES = ("refuse", "drop")


def _naive_refused(column: str) -> DpoptInputError:
    return DpoptInputError(
        f"`records` column {column!r} holds times without a UTC offset (ISO text without Z or +hh:mm, or a datetime "
        "column without a zone); say in which zone they were written with timezone='Area/City' (CLI: --timezone "
        "Area/City, e.g. --timezone America/Chicago or --timezone UTC)")


def _localize(ts: pd.Series, timezone: str | None, column: str, naive_times: str = "refuse") -> pd.Series:
    """Naive datetimes read in ``timezone`` as UTC; without one refused, or with ``naive_times``
    "drop" NaT (counted as unparseable); times that do not exist or are ambiguous there (DST
    changes) become NaT (counted as unparseable)."""
    if timezone is None:
        if naive_times == "drop":
            return pd.Series(pd.NaT, index=ts.index, dtype="datetime64[ns, UTC]")
        if ts.notna().any():
            raise _naive_refused(column)
        return ts.dt.tz_localize("UTC")
    return ts.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")


def _unix(num: pd.Series, unit: str) -> pd.Series:
    out = _unix_float(num, unit)
    if unit in ("us", "ns"):  # integer epochs exactly: float64 rounds an epoch in ns by up to 256 ns
        ns, whole = _epoch_integers(num, 1000 if unit == "us" else 1)
        out = out.where(~whole, pd.to_datetime(pd.Series(ns, index=num.index), unit="ns", utc=True))
    return out


def _epoch_integers(num: pd.Series, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """(ns, mask): the entries of ``num`` that are whole numbers (an integer dtype, or text of digits)
    times ``scale`` as exact int64 nanoseconds, where they lie in pandas' range; 0 elsewhere."""
    lo, hi = pd.Timestamp.min.value, pd.Timestamp.max.value
    if pd.api.types.is_integer_dtype(num.dtype):  # vectorised: |v| < 2^63/scale is checked before the product
        approx = num.to_numpy(dtype=float, na_value=np.nan)
        ok = (approx > lo / scale * (1 - 1e-9)) & (approx < hi / scale * (1 - 1e-9))  # NaN (missing): False
        exact = num.to_numpy(dtype=np.uint64 if num.dtype.kind == "u" else np.int64, na_value=0)
        ns = np.where(ok, exact, 0).astype(np.int64) * scale
        ok &= (ns > lo) & (ns < hi)
        return np.where(ok, ns, 0), ok
    text = num.astype("string").str.strip()
    whole = text.str.fullmatch(r"[+-]?\d+").fillna(False).to_numpy(dtype=bool)
    vals = [int(t) if w else None for t, w in zip(text.to_numpy(dtype=object), whole)]
    ns = [None if v is None or not lo < v * scale < hi else v * scale for v in vals]
    mask = np.array([v is not None for v in ns], dtype=bool)
    return np.array([v or 0 for v in ns], dtype=np.int64), mask


def _unix_float(num: pd.Series, unit: str) -> pd.Series:
    num = pd.to_numeric(num, errors="coerce").astype(float)
    per_unit = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}[unit]
    lo, hi = pd.Timestamp.min.value / per_unit, pd.Timestamp.max.value / per_unit
    num = num.where(np.isfinite(num) & (num > lo) & (num < hi))
    if unit in ("s", "ms"):  # whole microseconds: "1441515647.123" and its float are the instant of "…47.123Z"
        us = np.rint(num.to_numpy(dtype=float) * (per_unit / 1e3))  # exact below 2^53 µs (year 2255)
        return pd.to_datetime(pd.Series(us, index=num.index), unit="us", utc=True, errors="coerce")
    return pd.to_datetime(num, unit=unit, utc=True, errors="coerce")


def _text_times(col: pd.Series, unit: str, timezone: str | None, column: str, naive_times: str = "refuse"
                ) -> pd.Series:
    """Text times row by row: Unix numbers (``unit``), ISO 8601 with an offset (to UTC), ISO 8601
    without one (compact dates such as 20150906 included) read in ``timezone``."""
    text = col.astype("string")
    zulu = text.str.endswith("Z").fillna(False).to_numpy(dtype=bool)  # the common case, without a regex
    if zulu.all():
        return _iso(text)
    out = pd.Series(pd.NaT, index=col.index, dtype="datetime64[ns, UTC]")
    unix = ~zulu & text.str.fullmatch(_UNIX).fillna(False).to_numpy(dtype=bool)
    aware = zulu | (~unix & text.str.contains(_AWARE, regex=True).fillna(False).to_numpy(dtype=bool))
    naive = ~unix & ~aware & text.notna().to_numpy(dtype=bool)
    if unix.any():
        out[unix] = _unix(text[unix], unit)
    if aware.any():
        out[aware] = _iso(text[aware])
    if naive.any():
        out[naive] = _localize(_iso(text[naive], utc=False), timezone, column, naive_times)
    return out


def parse_times(col: pd.Series, *, unit: str = "s", timezone: str | None = None, column: str = "timestamp") -> np.ndarray:
    """A column of times as int64 ns since the epoch (UTC), read as record timestamps are: ISO 8601
    with an offset, naive ISO 8601 in ``timezone`` (refused without one), Unix times in ``unit``;
    INT64 min where a time does not parse."""
    return _parse_time(pd.Series(col), unit, check_timezone(timezone), column)


def _parse_time(col: pd.Series, unit: str, timezone: str | None = None, column: str = "timestamp",
                naive_times: str = "refuse") -> np.ndarray:
    """Timestamps -> int64 ns since epoch UTC; unparseable or outside pandas' range -> INT64 min (NaT).
    Naive times are read in ``timezone``; without one a text time without an offset is refused, or
    with ``naive_times`` "drop" NaT (a column of naive datetimes, naive by its type, stays refused)
    (``column`` names the input's column)."""
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        ts = col.dt.tz_convert("UTC")
    elif pd.api.types.is_datetime64_dtype(col):
        ts = _localize(col, timezone, column)
    elif pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        ts = _unix(col, unit)
    else:
        ts = _text_times(col, unit, timezone, column, naive_times)
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


def decimal_points(raw: pd.DataFrame, decimal: str = ".") -> pd.DataFrame:
    """``raw`` (canonical columns) with the decimal mark ``decimal`` of the numbers read as text
    (latitude, longitude, value) written as a point: "," reads 77,11 as 77.11 (a ';'-separated export
    in a European or Brazilian locale; :class:`dpopt.records.options.InputOptions` ``decimal``). Columns
    already numeric, and ``decimal`` ".", are left as they are; both back-ends call it before
    :func:`clean_chunk`."""
    if decimal == ".":
        return raw
    text = [c for c in ("latitude", "longitude", "value") if not pd.api.types.is_numeric_dtype(raw[c])]
    return raw.assign(**{c: raw[c].astype("string").str.replace(decimal, ".", regex=False) for c in text})


def _user_strings(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """User ids as str objects under dpopt's one label rule (:func:`dpopt._validation.label_texts`);
    returns (labels, missing mask)."""
    return label_texts(col)


def _unparseable(raw: pd.DataFrame, miss: dict[str, np.ndarray]) -> tuple[dict[str, int], tuple[str, ...]]:
    """Per field, the missing entries that were present in the input (did not parse), and up to
    two raw timestamps that did not parse (console diagnostics)."""
    present = {f: raw[f].notna().to_numpy(dtype=bool) for f in FIELDS if f != "user_id"}
    counts = {f: int((miss[f] & present[f]).sum()) if f in present else 0 for f in FIELDS}
    examples: tuple[str, ...] = ()
    if counts["timestamp"]:
        examples = tuple(str(v) for v in raw["timestamp"][miss["timestamp"] & present["timestamp"]].iloc[:2])
    return counts, examples


def _into_range(val: np.ndarray, ok: np.ndarray, bound: float,
                policy: str, lower: float = 0.0) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """Values of kept records (already shifted by −``lower``) outside [0, U] (±inf included)
    clipped, dropped or refused: (values, kept mask, out of range, clipped, dropped)."""
    with np.errstate(invalid="ignore"):
        oor = ok & ((val < 0.0) | (val > bound))
    n_oor = int(oor.sum())
    if not n_oor:
        return val, ok, 0, 0, 0
    if policy == "error":  # no value, count or position: the records are private
        where = (f"[0, bound] = [0, {bound:g}]" if lower == 0 else
                 f"[lower, upper] = [{lower:g}, {lower + bound:g}]")
        raise DpoptInputError(
            f"`records` hold values outside {where}; use out_of_range='clip' or 'drop' "
            "(CLI: --out-of-range clip|drop) or a wider range"
        )
    if policy == "clip":
        return np.clip(val, 0.0, bound), ok, n_oor, n_oor, 0
    return val, ok & ~oor, n_oor, 0, n_oor


def clean_chunk(
    raw: pd.DataFrame,
    *,
    bound: float,
    lower: float = 0.0,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
    time_window: tuple[int, int] | None = None,
    users: Any = None,
    timezone: str | None = None,
    time_column: str = "timestamp",
    naive_times: str = "refuse",
) -> tuple[CleanChunk, IngestReport]:
    """Clean one raw chunk (canonical columns); count what was dropped or clipped (module doc).

    ``bound`` U and ``lower`` L: a value x is kept as x − L, brought into [0, U] by
    ``out_of_range`` (the values' range is [L, L + U]; L = 0 subtracts nothing).
    ``time_window`` (int64 ns [start, end)): records outside are dropped and counted. ``users``:
    raw user column -> (labels, missing mask) (default :func:`_user_strings`, a str per row).
    ``timezone`` (IANA) reads naive times; without it they are refused (naming ``time_column``) or,
    with ``naive_times`` "drop" (the ``user`` model), dropped and counted."""
    bound = check_bound(bound)
    lower = check_lower(lower)
    out_of_range = check_choice(out_of_range, "out_of_range", OUT_OF_RANGE)
    timestamp_unit = check_choice(timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
    n = len(raw)
    user, miss_user = (users or _user_strings)(raw["user_id"])
    lat = _float(raw["latitude"])
    lng = _float(raw["longitude"])
    ts = _parse_time(raw["timestamp"], timestamp_unit, check_timezone(timezone), time_column,
                     check_choice(naive_times, "naive_times", NAIVE_TIMES))
    val = _float(raw["value"])
    miss = {
        "user_id": miss_user,
        "latitude": np.isnan(lat),
        "longitude": np.isnan(lng),
        "timestamp": ts == np.iinfo(np.int64).min,
        "value": np.isnan(val),  # ±inf is a number out of range (clipped by default), not missing
    }
    unparseable, examples = _unparseable(raw, miss)
    any_missing = np.logical_or.reduce(list(miss.values()))
    bad_coord = ~any_missing & ((np.abs(lat) > 90.0) | (np.abs(lng) > 180.0))
    ok = ~any_missing & ~bad_coord
    outside = np.zeros(n, dtype=bool)
    if time_window is not None:
        outside = ok & ((ts < time_window[0]) | (ts >= time_window[1]))
        ok &= ~outside
    if lower != 0.0:  # the one shift of the values: everything downstream sees [0, U]
        val = val - lower
    val, ok, n_oor, clipped, dropped_oor = _into_range(val, ok, bound, out_of_range, lower)
    report = IngestReport(
        records_read=n, records_kept=int(ok.sum()), dropped_missing=int(any_missing.sum()),
        missing={f: int(m.sum()) for f, m in miss.items()}, invalid_coordinates=int(bad_coord.sum()),
        out_of_range=n_oor, clipped=clipped, dropped_out_of_range=dropped_oor, chunks=1,
        out_of_range_policy=out_of_range, unparseable=unparseable, outside_time_window=int(outside.sum()),
        timestamp_examples=examples, id_kinds=_id_kinds(raw["user_id"]),
    )
    chunk = CleanChunk(user=user[ok], latitude=lat[ok], longitude=lng[ok], timestamp=ts[ok], value=val[ok])
    return chunk, report


def read_records(
    source: Any,
    *,
    bound: float,
    lower: float = 0.0,
    columns: ColumnMap | Mapping[str, str] | None = None,
    out_of_range: str = "clip",
    timestamp_unit: str = "s",
    chunksize: int | None = None,
    timezone: str | None = None,
) -> Iterator[tuple[CleanChunk, IngestReport]]:
    """Stream ``(clean chunk, its ingest counts)`` from a DataFrame, CSV or Parquet source.

    Sum the reports (``sum(reports, IngestReport())``) for the totals; see :func:`clean_chunk`
    (``lower`` L: values kept as x − L in [0, ``bound``]).
    """
    bound = check_bound(bound)
    lower = check_lower(lower)
    check_choice(out_of_range, "out_of_range", OUT_OF_RANGE)
    check_choice(timestamp_unit, "timestamp_unit", TIMESTAMP_UNITS)
    timezone = check_timezone(timezone)
    time_column = ColumnMap.from_any(columns).timestamp
    for raw in iter_raw_chunks(source, columns=columns, chunksize=chunksize):
        yield clean_chunk(raw, bound=bound, lower=lower, out_of_range=out_of_range, timestamp_unit=timestamp_unit,
                          timezone=timezone, time_column=time_column)


def check_dropped(report: IngestReport, read: Any) -> None:
    """Refuse the run when more than ``read.dropped_limit`` of the rows read were dropped.

    The message (for the data holder's console only; see :mod:`dpopt.records.contributions`)
    names the flag and the causes; a timestamp column that parsed to nothing is named with two of
    its raw values, and timestamps outside the time window point at ``--timestamp-unit`` and
    ``--time-window``. No rows read: nothing to refuse.
    """
    n, dropped = report.records_read, report.dropped_records
    if n == 0 or dropped <= read.dropped_limit * n:
        return
    cmap = read.column_map()
    if report.unparseable["timestamp"] and report.missing["timestamp"] == n:
        shown = ", ".join(repr(v) for v in report.timestamp_examples)
        raise DpoptInputError(
            f"`records` column {cmap.timestamp!r} (the timestamp) parses to no timestamp (e.g. {shown}); "
            "give ISO 8601 text (2015-09-06T05:00:47Z) or Unix times with --timestamp-unit, or name "
            "another column with --time-col"
        )
    causes = "; ".join(f"{k}: {v}" for k, v in report.dropped_by_cause().items())
    hint = ""
    if report.outside_time_window * 2 >= dropped and report.time_window is not None:
        hint = (f" Timestamps outside the time window {report.time_window[0]}..{report.time_window[1]}: check "
                f"--timestamp-unit (now {read.timestamp_unit!r}) or widen --time-window.")
    raise DpoptInputError(
        f"`max_dropped` (--max-dropped {read.dropped_limit:g}): {dropped} of {n} records "
        f"({100.0 * dropped / n:.2f} %) were dropped ({causes}).{hint} Fix the input or raise --max-dropped"
    )
