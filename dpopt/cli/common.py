"""Helpers shared by every ``dpopt`` sub-command: reading count files, printing text or JSON.

A sub-command module defines ``register(subparsers)``, which adds its parser and sets
``func=run`` with ``run(args) -> int``. Errors in user input are reported as one line on stderr
with exit code 2, never as a traceback (see :func:`dpopt.cli.main.main`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .._json import to_jsonable
from .._validation import DpoptInputError, reads_as_number

__all__ = ["read_numbers", "emit", "CliError", "add_partition_arguments", "add_partition_command",
           "add_solver_arguments", "solver_options"]

#: column names taken as the counts column of a CSV with a header (first match, case-insensitive)
COUNT_COLUMNS = ("count", "counts", "m", "samples", "n")


class CliError(DpoptInputError):
    """A bad command-line argument or file (reported without a traceback)."""


def read_numbers(path: str | Path, name: str, *, column: str | None = None) -> np.ndarray:
    """Read a 1-D column of numbers from a text/CSV file (one per line or comma/space separated).

    A first line that is not numeric is taken as a header and skipped; several lines of the same
    k ≥ 2 numbers (a table without a header) are refused. A CSV whose header names
    several columns (``user,count``; ``;`` or tab also delimit) is read by column: ``column``, else the first of
    :data:`COUNT_COLUMNS` present. ``-`` reads stdin.
    """
    text = _read_text(path, name)
    lines = text.splitlines()
    delimiter = _delimiter(lines[0]) if lines else ","
    header = lines[0].split(delimiter) if lines else []
    if column is not None or (len(header) > 1 and not reads_as_number(header[0].strip())):
        return _read_column(lines, path, name, column, delimiter)
    tokens = text.replace(",", " ").replace(";", " ").split("\n")
    _refuse_headerless_table(tokens, path, name)
    values: list[float] = []
    for i, line in enumerate(tokens):
        for tok in line.split():
            try:
                values.append(float(tok))
            except ValueError:
                if i == 0 and not values:
                    break  # header line
                raise CliError(f"`{name}` file {str(path)!r} line {i + 1}: not a number: {tok!r}") from None
    if not values:
        raise CliError(f"`{name}` file {str(path)!r} holds no numbers")
    return np.asarray(values)


def _refuse_headerless_table(lines: list[str], path: str | Path, name: str) -> None:
    """Refuse several lines of the same k ≥ 2 numbers: a table without a header (``user,count``
    rows), whose numbers would otherwise all be read as one column."""
    widths = {len(line.split()) for line in lines if line.strip()}
    rows = sum(1 for line in lines if line.strip())
    if rows > 1 and len(widths) == 1 and min(widths) > 1:
        raise CliError(
            f"`{name}` file {str(path)!r} is a table of {min(widths)} columns without a header; "
            "give a header naming the counts column (e.g. user,count) or one number per line"
        )


def _read_text(path: str | Path, name: str) -> str:
    if str(path) == "-":
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        p = Path(path)
        if not p.is_file():
            raise CliError(f"`{name}` must be a readable file; got {str(path)!r} "
                           f"({'a directory' if p.is_dir() else 'not found'})")
        raw = p.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"`{name}` file {str(path)!r} is not UTF-8 text (byte {raw[exc.start:exc.start + 1]!r} at offset "
            f"{exc.start}); write the numbers as plain text"
        ) from None


def _delimiter(first_line: str) -> str:
    """The CSV delimiter a header line uses: ``,`` unless it holds none and holds ``;`` or a tab."""
    if "," in first_line:
        return ","
    return next((d for d in (";", "\t") if d in first_line), ",")


def _read_column(lines: list[str], path: str | Path, name: str, column: str | None,
                 delimiter: str = ",") -> np.ndarray:
    """The numbers of one named column of a CSV with a header row (standard library csv)."""
    import csv

    rows = [r for r in csv.reader(lines, delimiter=delimiter) if r]
    header = [h.strip() for h in rows[0]] if rows else []
    lower = [h.lower() for h in header]
    wanted = [column.lower()] if column is not None else list(COUNT_COLUMNS)
    hit = next((lower.index(w) for w in wanted if w in lower), None)
    if hit is None:
        want = repr(column) if column is not None else " or ".join(COUNT_COLUMNS)
        raise CliError(f"`{name}` file {str(path)!r} has no column {want}; got columns {header}")
    values = []
    for i, row in enumerate(rows[1:], start=2):
        tok = row[hit].strip() if hit < len(row) else ""
        if not reads_as_number(tok):
            raise CliError(f"`{name}` file {str(path)!r} line {i}, column {header[hit]!r}: not a number: {tok!r}")
        values.append(float(tok))
    if not values:
        raise CliError(f"`{name}` file {str(path)!r} holds no numbers in column {header[hit]!r}")
    return np.asarray(values)


def emit(payload: dict[str, Any], as_json: bool, out: TextIO | None = None) -> None:
    """Print ``payload`` as JSON (``--json``) or as aligned ``key: value`` lines."""
    out = out or sys.stdout
    data = to_jsonable(payload)
    if as_json:
        json.dump(data, out, indent=2)
        out.write("\n")
        return
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        elif isinstance(value, list) and len(value) > 12:
            value = f"[{', '.join(map(str, value[:6]))}, ... ({len(value)} items)]"
        out.write(f"{key:<{width}}  {value}\n")


def add_partition_arguments(parser: Any) -> None:
    """The flags every one-partition command shares: ``--counts FILE --bound U --epsilon E``."""
    parser.add_argument("--counts", required=True, metavar="FILE",
                        help="per-user sample counts m_l ('-' = stdin): one per line, or a CSV with a header "
                             "and a column count (or --counts-column)")
    parser.add_argument("--counts-column", default=None, metavar="NAME",
                        help="the column of the counts CSV holding m_l (default: count, counts, m, samples or n)")
    parser.add_argument("--bound", required=True, type=float, metavar="U", help="sample bound U > 0")
    parser.add_argument("--epsilon", required=True, type=float, metavar="E", help="privacy parameter epsilon > 0")


def add_partition_command(subparsers: Any, name: str, *, help: str, description: str, run: Any) -> Any:
    """A one-partition sub-command: its parser with :func:`add_partition_arguments`, dispatching to ``run``."""
    parser = subparsers.add_parser(name, help=help, description=description)
    add_partition_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def add_solver_arguments(parser: Any, *, tie_break: bool = False, default_note: str = "none") -> None:
    """``--time-limit S`` (total seconds of the command's solves, a hard bound),
    ``--solver-option KEY=VALUE`` (repeatable, passed to HiGHS) and, for models with a tie-break
    stage, ``--no-tie-break``."""
    parser.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help=f"total seconds for the command's solves, a hard bound (default: {default_note})")
    parser.add_argument("--solver-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a HiGHS option, e.g. presolve=off or mip_rel_gap=0.01 (repeatable)")
    if tie_break:
        parser.add_argument("--no-tie-break", dest="tie_break", action="store_false",
                            help="skip the second solve that minimises the suppressed samples at the optimal K")


def _option_value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def solver_options(args: Any) -> dict[str, Any] | None:
    """The ``--solver-option KEY=VALUE`` pairs as a dict of typed values (``None`` when there are none);
    ``--time-limit`` is checked to be a non-negative number."""
    from .._validation import check_nonnegative_float

    if getattr(args, "time_limit", None) is not None:
        check_nonnegative_float(args.time_limit, "--time-limit")
    out: dict[str, Any] = {}
    for item in getattr(args, "solver_option", []) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"`--solver-option` must be KEY=VALUE; got {item!r}")
        out[key.strip()] = _option_value(value)
    if getattr(args, "json", False) and out.get("output_flag") is True and out.get("log_to_console") is not False:
        raise CliError("`--solver-option output_flag=true` prints HiGHS's log on stdout, which --json keeps for "
                       "the JSON result: add --solver-option log_to_console=false --solver-option log_file=PATH, "
                       "or drop --json")
    return out or None
