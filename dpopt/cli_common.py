"""Helpers shared by every ``dpopt`` sub-command: reading count files, printing text or JSON.

A sub-command module defines ``register(subparsers)``, which adds its parser and sets
``func=run`` with ``run(args) -> int``. Errors in user input are reported as one line on stderr
with exit code 2, never as a traceback (see :func:`dpopt.cli.main`).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ._validation import DpoptInputError

__all__ = ["read_numbers", "emit", "to_jsonable", "CliError", "add_partition_arguments", "add_partition_command"]


class CliError(DpoptInputError):
    """A bad command-line argument or file (reported without a traceback)."""


def read_numbers(path: str | Path, name: str) -> np.ndarray:
    """Read a 1-D column of numbers from a text/CSV file (one per line or comma/space separated).

    A first line that is not numeric is taken as a header and skipped. ``-`` reads stdin.
    """
    if str(path) == "-":
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        p = Path(path)
        if not p.is_file():
            raise CliError(f"`{name}` must be a readable file; got {str(path)!r} (not found)")
        raw = p.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"`{name}` file {str(path)!r} is not UTF-8 text (byte {raw[exc.start:exc.start + 1]!r} at offset "
            f"{exc.start}); write the numbers as plain text"
        ) from None
    tokens = text.replace(",", " ").replace(";", " ").split("\n")
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


def to_jsonable(obj: Any) -> Any:
    """Convert results (dataclasses, numpy, enums, sets of pairs) to JSON-ready values."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {k: to_jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [to_jsonable(v) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, slice):
        return [obj.start, obj.stop]
    return obj


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
    parser.add_argument("--counts", required=True, metavar="FILE", help="per-user sample counts m_l ('-' = stdin)")
    parser.add_argument("--bound", required=True, type=float, metavar="U", help="sample bound U > 0")
    parser.add_argument("--epsilon", required=True, type=float, metavar="E", help="privacy parameter epsilon > 0")


def add_partition_command(subparsers: Any, name: str, *, help: str, description: str, run: Any) -> Any:
    """A one-partition sub-command: its parser with :func:`add_partition_arguments`, dispatching to ``run``."""
    parser = subparsers.add_parser(name, help=help, description=description)
    add_partition_arguments(parser)
    parser.set_defaults(func=run)
    return parser
