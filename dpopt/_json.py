"""JSON-ready values of dpopt's results, for the command line's ``--json`` and the writers' JSON files.

Standard library and numpy only, so the light install (no ``release`` extra) can print JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import Any

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """Convert results (dataclasses, numpy, enums, sets of pairs) to JSON-ready values.

    Parameters
    ----------
    obj
        Any result: a dataclass, dict, list/tuple/set, numpy array or scalar, enum, float or slice.

    Returns
    -------
    Any
        The same data as dicts, lists, str, int, float, bool and None: dict keys as text, sets
        sorted, enums by value, NaN as ``None`` and ±inf as ``"inf"``/``"-inf"``, slices as
        ``[start, stop]``.
    """
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
