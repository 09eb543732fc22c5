"""``row_dicts``: the rows of a table as dicts of Python scalars, the same values and types as
pandas' ``astype(object).to_dict("records")`` (and, with ``finite_or_none``, as its ``where`` of the
finite values), over every dtype a published release's view holds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from dpopt.writers._published import row_dicts


def _table(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    x = rng.normal(size=n)
    x[::7], x[3], x[5] = np.nan, np.inf, -np.inf
    t0 = pd.Series(pd.date_range("2026-01-01", periods=n, freq="h", tz="UTC"))
    cycle = pd.Series(pd.to_timedelta(rng.integers(0, 3, n), unit="D")).where(rng.random(n) < 0.5)
    return pd.DataFrame({"x": x, "k": rng.integers(0, 9, n), "ok": rng.random(n) < 0.5,
                         "cell": pd.array([None if i % 5 == 0 else f"c{i}" for i in range(n)], dtype="string"),
                         "t0": t0, "cycle": cycle, "obj": [None if i % 4 else (i, "a") for i in range(n)]})


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and (a == b or (pd.isna(a) is True and pd.isna(b) is True))


def test_the_rows_are_pandas_records() -> None:
    t = _table()
    ours, theirs = row_dicts(t), t.astype(object).to_dict("records")
    assert len(ours) == len(theirs) == len(t)
    for r, s in zip(ours, theirs):
        assert list(r) == list(s)
        assert all(_same(r[k], s[k]) for k in r), (r, s)


def test_finite_or_none_is_json_ready() -> None:
    t = _table().drop(columns=["t0", "cycle", "obj"])
    finite = t.apply(lambda col: np.isfinite(col) if pd.api.types.is_float_dtype(col) else col.notna())
    theirs = t.astype(object).where(finite, None).to_dict("records")
    ours = row_dicts(t, finite_or_none=True)
    assert json.dumps(ours, allow_nan=False) == json.dumps(theirs, allow_nan=False)
    assert ours[3]["x"] is None and ours[0]["cell"] is None  # inf and a missing string both become None


def test_a_table_without_columns_or_rows() -> None:
    assert row_dicts(pd.DataFrame(index=range(3))) == [{}, {}, {}]
    assert row_dicts(_table().iloc[:0]) == []
