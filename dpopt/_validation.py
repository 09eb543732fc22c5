"""Input validation for every public entry point, in one place.

Each checker returns the cleaned value (a numpy array or a Python scalar) or raises
:class:`DpoptInputError`, a :class:`ValueError` whose message names the argument, states the rule
and shows the offending value, e.g. ``"`epsilon` must be a positive finite number; got -1.0"``
(the style of ``scipy.optimize._milp`` and scikit-learn's ``validate_params``).

Lists, tuples, numpy arrays and pandas Series are accepted wherever an array is expected.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "DpoptInputError",
    "check_delta",
    "as_counts",
    "as_retained",
    "as_interval_bounds",
    "check_bound",
    "check_lower",
    "value_range",
    "check_epsilon",
    "as_epsilons",
    "check_dim",
    "check_positive_int",
    "check_choice",
    "check_nonnegative_float",
    "normalise_labels",
    "label_parts",
    "MAX_COUNT",
]


class DpoptInputError(ValueError):
    """Bad input to a dpopt function (a :class:`ValueError`)."""


def _show(value: Any, limit: int = 80) -> str:
    """A short printable form of ``value`` for error messages."""
    try:
        if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):  # pandas: no multi-line repr
            value = value.to_numpy()
        if isinstance(value, np.ndarray):
            text = np.array2string(value, threshold=8, edgeitems=3)
        else:
            text = repr(value)
    except Exception:  # pragma: no cover - exotic objects
        text = object.__repr__(value)
    text = " ".join(text.split())  # messages are one line
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(name: str, rule: str, value: Any) -> DpoptInputError:
    return DpoptInputError(f"`{name}` {rule}; got {_show(value)}")


def _to_array(value: Any, name: str) -> np.ndarray:
    if isinstance(value, (str, bytes)):
        raise _fail(name, "must be array-like of numbers", value)
    if hasattr(value, "to_numpy"):  # pandas Series / Index
        value = value.to_numpy()
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists etc.
        raise _fail(name, "must be array-like of numbers", value) from exc
    if arr.dtype == object:
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError) as exc:
            raise _fail(name, "must be array-like of numbers", value) from exc
    if arr.dtype.kind not in "biuf":
        raise _fail(name, "must be array-like of numbers", value)
    return arr


#: largest count accepted anywhere (a sample count, a grid total): sums of up to 2^13 of them stay
#: exact in float64 and far from int64 overflow
MAX_COUNT = 2**40


def _integer_valued(arr: np.ndarray, name: str, original: Any) -> np.ndarray:
    if arr.dtype.kind == "b":
        raise _fail(name, "must hold integers, not booleans", original)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            bad = arr[~np.isfinite(arr)][0]
            raise _fail(name, f"must hold finite integers (found {bad})", original)
        if np.any(arr != np.round(arr)):
            bad = arr[arr != np.round(arr)][0]
            raise _fail(name, f"must hold whole numbers (found {bad})", original)
    # checked before the cast to int64, which would wrap (1e19 -> -9223372036854775808)
    big = np.abs(arr) > MAX_COUNT if arr.dtype.kind != "u" else arr > MAX_COUNT
    if np.any(big):
        bad = arr[big][0]
        raise _fail(name, f"must hold integers of at most 2^40 = {MAX_COUNT} in magnitude (found {bad:.6g})"
                    if arr.dtype.kind == "f" else
                    f"must hold integers of at most 2^40 = {MAX_COUNT} in magnitude (found {bad})", original)
    return arr.astype(np.int64, copy=False)


def as_counts(counts: Any, name: str = "counts", *, allow_zero: bool = False) -> np.ndarray:
    """Validate per-user sample counts m_ℓ: 1-D, non-empty, integer-valued, each ≥ 1.

    ``allow_zero=True`` admits zeros (users absent from a partition) but then needs one
    positive entry.
    """
    arr = _integer_valued(_to_array(counts, name), name, counts)
    if arr.ndim != 1:
        raise _fail(name, f"must be one-dimensional (shape {arr.shape})", counts)
    if arr.size == 0:
        raise _fail(name, "must not be empty", counts)
    floor = 0 if allow_zero else 1
    if np.any(arr < floor):
        bad = arr[arr < floor][0]
        raise _fail(name, f"must hold integers >= {floor} (found {bad})", counts)
    if allow_zero and not np.any(arr > 0):
        raise _fail(name, "must hold at least one positive count", counts)
    return arr


def as_retained(
    retained: Any,
    counts: np.ndarray | None = None,
    name: str = "retained",
    *,
    require_positive_total: bool = True,
) -> np.ndarray:
    """Validate retained counts Γ_ℓ: integers in 0..m_ℓ, the shape of ``counts``.

    With ``require_positive_total`` (every mean/variance estimator) not all may be zero.
    """
    arr = _integer_valued(_to_array(retained, name), name, retained)
    if arr.ndim != 1:
        raise _fail(name, f"must be one-dimensional (shape {arr.shape})", retained)
    if arr.size == 0:
        raise _fail(name, "must not be empty", retained)
    if np.any(arr < 0):
        raise _fail(name, f"must hold integers >= 0 (found {arr[arr < 0][0]})", retained)
    if counts is not None:
        if arr.shape != counts.shape:
            raise _fail(
                name, f"must have the shape of `counts` {counts.shape} (shape {arr.shape})", retained
            )
        over = arr > counts
        if np.any(over):
            i = int(np.flatnonzero(over)[0])
            raise _fail(
                name,
                f"must satisfy retained[i] <= counts[i] (index {i}: {arr[i]} > {counts[i]})",
                retained,
            )
    if require_positive_total and not np.any(arr > 0):
        raise _fail(name, "must keep at least one sample (all entries are zero)", retained)
    return arr


def reads_as_number(text: str) -> bool:
    """Does ``float(text)`` read ``text`` (command-line tokens and file fields)?"""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _finite_real(value: Any, name: str, rule: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _fail(name, rule, value)
    out = float(value)
    if not math.isfinite(out):
        raise _fail(name, rule, value)
    return out


#: U and ε above LIMIT are refused: then U², ε·2^30 and the sums of the release stay finite (no
#: OverflowError after the expensive steps). Tiny ε is allowed (noise scales become inf, handled).
SCALE_LIMIT = 1e100


def _in_scale(out: float, name: str, value: Any) -> float:
    if out <= 0:
        raise _fail(name, "must be a positive finite number", value)
    if out > SCALE_LIMIT:
        raise _fail(name, "must be a positive finite number <= 1e100 (no overflow later)", value)
    return out


def check_bound(bound: Any, name: str = "bound") -> float:
    """Validate the sample bound U: a finite number in (0, 1e100]."""
    return _in_scale(_finite_real(bound, name, "must be a positive finite number"), name, bound)


def check_lower(lower: Any, name: str = "lower") -> float:
    """Validate the lower end L of the values: a finite number with |L| <= 1e100 (-0.0 read as 0.0)."""
    out = _finite_real(lower, name, "must be a finite number")
    if abs(out) > SCALE_LIMIT:
        raise _fail(name, "must be a finite number within +-1e100 (no overflow later)", lower)
    return out + 0.0


def value_range(bound: Any = None, lower: Any = None, upper: Any = None) -> tuple[float, float]:
    """The range [L, U] of the released values from a release's ``bound``, ``lower`` and ``upper``.

    ``bound`` U or ``upper`` U alone: [0, U] (U > 0); ``lower`` L with ``upper`` (or ``bound``) U:
    [L, U] with L < U. Giving both ``bound`` and ``upper``, ``lower`` alone, a non-finite number or
    L >= U raises :class:`DpoptInputError` naming the arguments and their values.

    Returns
    -------
    (L, U) : tuple of float
        The width U - L (the bound every privacy model sees, values being shifted by -L when read)
        is a positive finite number <= 1e100.
    """
    if bound is not None and upper is not None:
        raise DpoptInputError(f"give `bound` or `upper`, not both (`bound` U is the range [0, U], the same as `upper` "
                              f"U alone); got bound={_show(bound)}, upper={_show(upper)}")
    name, top = ("upper", upper) if upper is not None else ("bound", bound)
    if top is None:
        if lower is not None:
            raise DpoptInputError(f"`lower` needs `upper` (or `bound`): the values lie in [L, U]; got "
                                  f"lower={_show(lower)} and no upper")
        raise DpoptInputError("`bound` (or `upper`) is required: the public upper end U of the values")
    if lower is None:
        return 0.0, check_bound(top, name)
    L = check_lower(lower)
    U = _finite_real(top, name, "must be a finite number")
    if not L < U:
        raise DpoptInputError(f"`lower` must be less than `{name}`; got lower={_show(lower)}, {name}={_show(top)}")
    if not U - L <= SCALE_LIMIT:
        raise DpoptInputError(f"`{name}` - `lower` must be at most 1e100 (no overflow later); got lower="
                              f"{_show(lower)}, {name}={_show(top)}")
    return L, U


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """Validate a privacy parameter ε: a finite number in (0, 1e100]."""
    return _in_scale(_finite_real(epsilon, name, "must be a positive finite number"), name, epsilon)


#: a model's noise terms must stay this far below a float's overflow: a plan sums them over up to
#: 10⁶ grids or users (a numeric margin, not a modelling choice)
NOISE_HEADROOM = 1e6


def check_noise_scale(scale: float, epsilon: float, what: str, name: str = "epsilon") -> None:
    """Refuse an ε so small that a model's largest noise term ``scale``/ε (e.g. 2(U + U²/4)/ε)
    overflows a float (within :data:`NOISE_HEADROOM`): the models would then compare and sum inf."""
    if not math.isfinite(scale / epsilon * NOISE_HEADROOM):
        raise DpoptInputError(f"`{name}` is too small: the noise term {what} overflows a float; got {epsilon!r}")


def as_epsilons(epsilon: Any, name: str = "epsilon", *, size: int | None = None) -> np.ndarray:
    """Validate a scalar ε or an array of ε (each finite > 0); return a float array.

    With ``size`` a scalar is broadcast to that length and an array must have it.
    """
    if np.isscalar(epsilon) or (isinstance(epsilon, np.ndarray) and epsilon.ndim == 0):
        value = check_epsilon(epsilon.item() if isinstance(epsilon, np.ndarray) else epsilon, name)
        return np.full(1 if size is None else size, value)
    arr = _to_array(epsilon, name).astype(float)
    if arr.ndim != 1 or arr.size == 0:
        raise _fail(name, "must be a number or a non-empty 1-D array", epsilon)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise _fail(name, "must hold positive finite numbers", epsilon)
    if np.any(arr > SCALE_LIMIT):
        raise _fail(name, "must hold positive finite numbers <= 1e100", epsilon)
    if size is not None and arr.size != size:
        raise _fail(name, f"must have length {size} (length {arr.size})", epsilon)
    return arr


def check_dim(dim: Any, name: str = "dim") -> int:
    """Validate the sample dimension d: an integer ≥ 1."""
    return check_positive_int(dim, name)


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Validate an integer ≥ ``minimum`` and ≤ 2^53 (booleans refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _fail(name, f"must be an integer >= {minimum}", value)
    if int(value) < minimum:
        raise _fail(name, f"must be an integer >= {minimum}", value)
    if int(value) > 2**53:  # numpy int64 / float exactness
        raise _fail(name, f"must be an integer >= {minimum} and <= 2^53", value)
    return int(value)


def check_nonnegative_float(value: Any, name: str) -> float:
    """Validate a finite number ≥ 0."""
    rule = "must be a finite number >= 0"
    out = _finite_real(value, name, rule)
    if out < 0:
        raise _fail(name, rule, value)
    return out


def solver_seconds(value: Any, name: str = "time_limit") -> float | None:
    """A solver's ``time_limit`` where a solve starts: None or +inf (no limit: internal callers pass
    the time left of an unlimited deadline as inf) → None, else a finite number of seconds ≥ 0."""
    if value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and value == math.inf):
        return None
    return check_nonnegative_float(value, name)


def solver_options(options: Any, name: str = "options") -> dict[str, Any]:
    """A solver's ``options`` as a dict: None → {}, a mapping with text keys → a copy of it; anything
    else a one-line error naming ``name`` (``{**dict(1.0)}`` raised TypeError deep in a solve)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise _fail(name, "must be a mapping of HiGHS option names to values (or None)", options)
    return dict(options)


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """Validate that ``value`` is one of ``choices``."""
    options = tuple(choices)
    # only a hashable scalar can be one of them: `in` on a numpy array raised numpy's "truth value of
    # an array is ambiguous", which names no argument (a fuzz run)
    if not isinstance(value, (str, numbers.Number, type(None))) or value not in options:
        raise _fail(name, f"must be one of {', '.join(repr(c) for c in options)}", value)
    return str(value)


def as_interval_bounds(
    lower: Any, upper: Any, size: int, bound: float, *, names: tuple[str, str] = ("lower", "upper")
) -> tuple[np.ndarray, np.ndarray]:
    """Validate per-user clipping bounds 0 ≤ lower_ℓ ≤ upper_ℓ ≤ U (scalars broadcast)."""
    out = []
    for value, name in zip((lower, upper), names):
        arr = _to_array(value, name).astype(float)
        if arr.ndim == 0:
            arr = np.full(size, float(arr))
        if arr.shape != (size,):
            raise _fail(name, f"must be a number or have the shape of `counts` ({size},)", value)
        if not np.all(np.isfinite(arr)):
            raise _fail(name, "must hold finite numbers", value)
        if np.any(arr < 0) or np.any(arr > bound):
            raise _fail(name, f"must lie in [0, bound] = [0, {bound:g}]", value)
        out.append(arr)
    lo, hi = out
    if np.any(lo > hi):
        i = int(np.flatnonzero(lo > hi)[0])
        raise _fail(names[0], f"must not exceed `{names[1]}` (index {i}: {lo[i]:g} > {hi[i]:g})", lower)
    return lo, hi


def label_texts(values: Any, name: str = "user") -> tuple[np.ndarray, np.ndarray]:
    """Labels of :func:`label_parts` as ``str`` (the records layer keys users by text), and the
    missing mask. A column that mixes numbers and text is refused: ``str`` would make the number 1
    and the text "1" one label, a merge :func:`label_parts` never makes. Refusals name the column."""
    try:
        labels, missing = label_parts(values)
    except DpoptInputError as exc:
        raise DpoptInputError(f"the `{name}` column: {exc}") from None
    kinds = {isinstance(v, str) for v in labels[~missing]} if labels.size else set()
    if len(kinds) > 1:
        raise DpoptInputError(
            f"the `{name}` column mixes numbers and text; convert it to one type (e.g. all text) so no two "
            "distinct ids can become one user")
    out = np.empty(labels.shape, dtype=object)
    out[:] = ["" if v is None else str(v) for v in labels]
    return out, missing


def label_parts(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Labels under dpopt's ONE label rule, and a mask of missing labels.

    The rule (README, ``--help``; models/release.md), for every input type (lists, numpy, pandas;
    CSV text, Parquet and DataFrame columns):

    1. **text is an exact string**: a label read as text is kept character for character, never
       parsed or stripped: ``"0123"``, ``"123"``, ``"1e3"`` and ``" 123"`` are four labels;
    2. **a number is its value**: a finite whole number (int, or a float with no fractional part,
       any magnitude) is that Python ``int``, any other finite float stays that float. So 1 and
       1.0 from one numeric column are one label (the same value), and two distinct numbers are
       never one label;
    3. missing labels (None, NaN, NaT, pd.NA, ±inf, empty or blank text) are flagged in the mask;
       booleans are refused (True would equal the label 1);
    4. tuples (composite labels such as (cell, slot)) and other objects are kept as given.

    No rule merges two distinct values of one column: a merge puts two real users under
    one label, and removing one of them then changes the other's bounded records, beyond the
    sensitivity the noise is calibrated to.
    Returns (object array of labels, boolean mask of missing ones).
    """
    pd = _optional_pandas()
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        values = values.to_numpy()
    if isinstance(values, np.ndarray):
        arr = values
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
    if arr.ndim != 1:
        raise DpoptInputError(f"labels must be one-dimensional; got shape {arr.shape}")
    if arr.dtype.kind == "b" or (arr.dtype == object and any(isinstance(v, (bool, np.bool_)) for v in arr)):
        raise DpoptInputError("labels must not be booleans (True would equal the label 1); got a boolean label")
    if arr.dtype.kind in "iuf":
        return _number_labels(arr)
    if pd is not None and arr.dtype == object and arr.size > 64:  # each distinct label once (ids repeat)
        codes, uniq = pd.factorize(arr, use_na_sentinel=True)
        if uniq.size < arr.size:
            labels, missing = label_parts(np.asarray(uniq, dtype=object))
            na = codes < 0
            safe = np.where(na, 0, codes)
            res = labels[safe] if labels.size else np.full(arr.size, None, dtype=object)
            res[na] = None
            return res, na | (missing[safe] if labels.size else True)
    parts = [_one_label(v) for v in arr.tolist()]
    res = np.empty(arr.size, dtype=object)
    res[:] = [p[0] for p in parts]
    return res, np.fromiter((p[1] for p in parts), dtype=bool, count=arr.size)


def _number_labels(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rule 2 on a numeric array: whole finite values as Python ints, other finite floats as floats."""
    res = np.empty(arr.size, dtype=object)
    if arr.dtype.kind in "iu":
        res[:] = arr.tolist()
        return res, np.zeros(arr.size, dtype=bool)
    x = arr.astype(float)
    missing = ~np.isfinite(x)
    whole = ~missing & (x == np.floor(np.where(missing, 0.0, x)))
    res[:] = [int(v) if w else (None if m else float(v)) for v, w, m in zip(x.tolist(), whole, missing)]
    return res, missing


def _one_label(v: Any) -> tuple[Any, bool]:
    """(label, missing) of one value under :func:`label_parts`' rule."""
    if v is None:
        return None, True
    if isinstance(v, str):
        return (None, True) if v.strip() == "" else (v, False)
    if isinstance(v, tuple):
        return v, False
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v), False
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if not math.isfinite(x):
            return None, True
        return (int(x), False) if x == math.floor(x) else (x, False)
    pd = _optional_pandas()
    try:
        if pd is not None and pd.isna(v):
            return None, True
    except (TypeError, ValueError):  # array-like objects: not missing
        pass
    return v, False


def _optional_pandas() -> Any:
    """pandas, or ``None`` on the light install (no ``release`` extra: labels are then read without it)."""
    try:
        import pandas
    except ImportError:
        return None
    return pandas


def normalise_labels(values: Any, name: str) -> np.ndarray:
    """Labels normalised by :func:`label_parts`; a missing label raises naming ``name``."""
    try:
        labels, missing = label_parts(values)
    except DpoptInputError as exc:
        raise DpoptInputError(f"`{name}`: {exc}") from None
    if np.any(missing):
        i = int(np.flatnonzero(missing)[0])
        raw = values.iloc[i] if hasattr(values, "iloc") else values[i]
        raise DpoptInputError(
            f"`{name}` must not hold missing labels (None, NaN, empty text); got {_show(raw)} at index {i}"
        )
    return labels


def check_delta(delta: Any, name: str = "delta") -> float:
    """Validate a failure probability δ ∈ (0, 1) ((ε, δ)-DP, tail bounds)."""
    rule = "must lie in (0, 1)"
    out = _finite_real(delta, name, rule)
    if not 0.0 < out < 1.0:
        raise _fail(name, rule, delta)
    return out


def check_confidence(confidence: Any) -> float:
    """q of the stated error bounds and intervals: a number in (0, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, numbers.Real)) \
            or not 0.0 < float(confidence) < 1.0:
        raise DpoptInputError(f"`confidence` must be a number in (0, 1), e.g. 0.95; got {confidence!r}")
    return float(confidence)
