"""Records on Dask: the heavy part of a city-scale release (billions of records).

The models and the noise run on the contributions table (one row per occupied (user, grid) pair),
so only reading and reducing the records needs a cluster. :func:`dask_map_reduce` runs the local
map step of :mod:`.contributions` (or of :mod:`.kept`) on every partition and merges the partials
with the local reduce step in the same tree (:mod:`._tree`): counts, keys and kept records equal the
local path's (the kept records are the smallest keyed sample keys of :mod:`.sample_key`, functions of
the records and the release's secret only, so any partitioning keeps the same ones), the float sums
agree up to the order of additions.

Install: ``pip install 'dask[dataframe,distributed]'`` (the ``dask`` extra of dpopt). Point it at a
cluster with ``distributed.Client("tcp://scheduler:8786")`` (``--scheduler`` on the command line);
with no client the threaded scheduler of this process is used. Paths must be readable by every
worker (a shared file system, or ``s3://``/``gs://`` URLs with the matching fsspec package).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .._validation import DpoptInputError
from ._tree import COMPACT_EVERY
from .ingest import FIELDS, ColumnMap, _check_columns, _check_unique, _csv_files, as_frame, csv_options, \
    is_csv_name, parquet_files

__all__ = ["read_dask", "dask_map_reduce", "tree"]

_TREE = 8


def _require_dask() -> Any:
    try:
        import dask
        import dask.dataframe  # noqa: F401
    except ImportError:
        raise DpoptInputError(
            "backend='dask' needs Dask: pip install 'dask[dataframe,distributed]' (the dpopt[dask] extra)"
        ) from None
    return dask


def _is_remote(path: Any) -> bool:
    """A URL (``s3://...``) or a glob pattern: read by Dask/fsspec, not checked locally."""
    return isinstance(path, str) and ("://" in path or "*" in path)


def _is_csv(name: str) -> bool:
    return is_csv_name(name)


def read_dask(records: Any, columns: ColumnMap | Mapping[str, str] | None = None,
              *, blocksize: str | int | None = "64MB", npartitions: int | None = None, sep: str = ",") -> Any:
    """A Dask DataFrame of the five canonical fields from a DataFrame, CSV or Parquet source.

    CSV options are those of the local reader (ids and times as text, numbers inferred); a gzip
    file is one partition (not splittable): split big inputs into many files or use Parquet.
    Partitions hold about ``blocksize`` bytes (CSV) or row groups adding up to about ``blocksize``
    (Parquet; a row group is never split).
    """
    _require_dask()
    import dask.dataframe as dd

    cmap = ColumnMap.from_any(columns)
    rename = {c: f for f, c in cmap.names().items()}
    usecols = list(rename)
    records = as_frame(records, cmap)
    if hasattr(records, "to_delayed") and hasattr(records, "npartitions"):  # a Dask DataFrame
        _check_columns([str(c) for c in records.columns], cmap, "Dask DataFrame")
        return records[usecols].rename(columns=rename)[list(FIELDS)]
    if isinstance(records, pd.DataFrame):
        _check_unique([str(c) for c in records.columns], cmap, "DataFrame")
        _check_columns([str(c) for c in records.columns], cmap, "DataFrame")
        frame = records[usecols].rename(columns=rename)
        n = npartitions or max(1, min(32, len(frame) // 100_000 + 1))
        return dd.from_pandas(frame, npartitions=n, sort=False)
    if not isinstance(records, (str, Path)):
        raise DpoptInputError(
            f"`records` must be a pandas DataFrame or a path to CSV/Parquet; got {type(records).__name__}"
        )
    name = str(records)
    if not _is_remote(name) and not Path(name).exists():
        raise DpoptInputError(f"`records` must be an existing CSV or Parquet path; got {name!r} (not found)")
    lower = name.lower()
    try:
        local_dir = not _is_remote(name) and Path(name).is_dir()
        csv_dir = local_dir and bool(_csv_files(Path(name)))
        if (local_dir and not csv_dir) or lower.endswith((".parquet", ".pq", ".parq")) or (
                _is_remote(name) and not _is_csv(name)):
            # partitions of about ``blocksize`` (Dask's default made one partition of a 10^7-row file)
            source = [str(p) for p in parquet_files(Path(name))] if local_dir else name
            ddf = dd.read_parquet(source, columns=usecols, blocksize=blocksize)
        else:
            ddf = _read_csv(records, cmap, blocksize=blocksize, sep=sep, csv_dir=csv_dir)
    except DpoptInputError:
        raise
    except Exception as exc:
        raise DpoptInputError(f"`records` {name!r} could not be opened with Dask: {exc}") from None
    return ddf.rename(columns=rename)[list(FIELDS)]


def _read_csv(records: Any, cmap: ColumnMap, *, blocksize: Any, sep: str, csv_dir: bool) -> Any:
    """A CSV file, URL or glob, or a directory's CSV files (by suffix), as a Dask DataFrame with the
    local reader's options; the header is checked first when local."""
    import dask.dataframe as dd

    name = str(records)
    source: Any = name
    if csv_dir:  # a directory of CSV files (by suffix): one input
        files = _csv_files(Path(records))
        source, first = [str(f) for f in files], files[0]
    else:
        first = None if _is_remote(name) else name
    if first is not None:
        head = pd.read_csv(first, nrows=1, header=None, sep=sep, dtype=str, keep_default_na=False)
        names = [str(c) for c in head.iloc[0]] if len(head) else []
        _check_unique(names, cmap, f"file {str(first)!r}")
        _check_columns(names, cmap, f"file {str(first)!r}", sep=sep)
    zipped = any(str(f).lower().endswith((".gz", ".bz2", ".xz", ".zip", ".zst"))
                 for f in (source if isinstance(source, list) else [name]))
    return dd.read_csv(source, usecols=list(cmap.names().values()), blocksize=None if zipped else blocksize,
                       compression="infer", sep=sep, **csv_options(cmap, numbers_as_text=True))


def _compute(obj: Any, client: Any) -> Any:
    import dask

    if client is not None:
        return client.compute(obj).result()
    return dask.compute(obj, scheduler="threads")[0]


def dask_map_reduce(records: Any, read: Any, step: Any, merge: Any, client: Any = None,
                    blocksize: str | int | None = "64MB") -> Any:
    """``merge`` over ``step(partition)`` of every partition of ``records`` read with ``read``
    (tree of :func:`tree`), computed on ``client`` (None: threads); None without partitions."""
    dask = _require_dask()
    ddf = read_dask(records, read.column_map(), blocksize=blocksize, sep=read.sep)
    mapped = dask.delayed(step, pure=True)
    parts = [mapped(p) for p in ddf.to_delayed()]
    if not parts:
        return None
    try:
        return _compute(tree(parts, merge), client)
    except DpoptInputError:
        raise
    except ValueError as exc:
        raise DpoptInputError(f"`records` could not be read by Dask: {exc}") from None


def tree(parts: list[Any], merge: Any) -> Any:
    """Delayed merge of delayed partials in groups of ``COMPACT_EVERY``, level by level (the tree
    of :func:`dpopt.records.contributions.tree_stream`)."""
    import dask

    step = dask.delayed(lambda *ps: merge(list(ps)), pure=True)
    while len(parts) > 1:
        parts = [step(*parts[i : i + COMPACT_EVERY]) for i in range(0, len(parts), COMPACT_EVERY)]
    return parts[0]
