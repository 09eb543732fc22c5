"""Distinct user ids never merge (text ids are exact strings; numbers by value).

The neighbour measurement: with k = 1, c = 3, removing one real user may move the
bounded record counts R by at most k·c = 3 in total. When "0123" and "123" were one user, removing
"0123" moved R by 6 (the merged user's kept grid switched).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpopt._validation import label_parts
from dpopt.release import GridOptions, contributions
from dpopt.privacy.user.bounding import bound_contributions, grid_ranks, lattice_values

GRID_A = "30.2672,-97.7431,2020-01-01T10:{m:02d}:00Z,10\n"
GRID_B = "30.3500,-97.7000,2020-01-01T10:{m:02d}:00Z,20\n"
HEADER = "user_id,latitude,longitude,timestamp,value\n"


def _csv(tmp_path, users: dict[str, tuple[str, int]], name: str):
    rows = [HEADER]
    for uid, (grid, n) in users.items():
        rows += [uid + "," + grid.format(m=m) for m in range(n)]
    path = tmp_path / name
    path.write_text("".join(rows))
    return path


def _records_by_grid(path) -> dict[tuple[int, int], int]:
    agg, _ = contributions(path, bound=100.0, grid=GridOptions(7, "1h"), keep_samples=True)
    bg = bound_contributions(agg, k=1, c=3, ranks=grid_ranks(agg, np.random.default_rng(0)),
                             lattice=lattice_values(agg, 100.0))
    return {(int(c), int(s)): int(r) for c, s, r in zip(agg.cells, agg.slots, bg.records)}


@pytest.mark.parametrize(("removed", "other"), [("0123", "123"), ("1e3", "1000"), ("10e2", "1000"), (" 7", "7")])
def test_removing_one_text_id_moves_only_its_own_records(tmp_path, removed, other):
    # `removed` holds 5 records in grid A, `other` 4 in grid B: merged, the pair would keep A only
    both = _csv(tmp_path, {removed: (GRID_A, 5), other: (GRID_B, 4)}, "d.csv")
    less = _csv(tmp_path, {other: (GRID_B, 4)}, "d_minus.csv")
    r1, r0 = _records_by_grid(both), _records_by_grid(less)
    keys = set(r1) | set(r0)
    moved = sum(abs(r1.get(g, 0) - r0.get(g, 0)) for g in keys)
    assert moved <= 3  # k·c: the calibration of the count noise
    assert sorted(r1.values()) == [3, 3]  # two users, one grid each, c = 3 records each


def test_the_label_rule():
    labels, missing = label_parts(["0123", "123", "1e3", "10e2", "1000", " 1", "1", "", "  ", None])
    assert labels[:7].tolist() == ["0123", "123", "1e3", "10e2", "1000", " 1", "1"]
    assert missing.tolist() == [False] * 7 + [True] * 3
    # numbers by value: 1 and 1.0 of one numeric column are one label; distinct numbers never merge
    labels, missing = label_parts(np.array([1.0, 1.5, 2.0**60, 2.0**60 + 2**8, np.nan, np.inf]))
    assert labels[:4].tolist() == [1, 1.5, 2**60, 2**60 + 2**8] and type(labels[0]) is int
    assert missing.tolist() == [False] * 4 + [True] * 2
    assert label_parts(np.array([2**62, 2**62 + 1]))[0].tolist() == [2**62, 2**62 + 1]
    # the factorised path (more than 64 labels) agrees with the direct one
    many = np.array(["0123", "123", 5, 5.0, None] * 20, dtype=object)
    labels, missing = label_parts(many)
    assert labels[:5].tolist() == ["0123", "123", 5, 5, None] and missing[:5].tolist() == [False] * 4 + [True]


def test_a_user_column_mixing_numbers_and_text_is_refused_not_merged():
    """str() would make the number 1 and the text "1" one user; the records layer refuses the column."""
    import pandas as pd

    from dpopt import DpoptInputError
    from dpopt.records import GridOptions, InputOptions, contributions

    frame = pd.DataFrame({
        "user_id": pd.Series([1, "1", 2], dtype=object),
        "timestamp": ["2020-01-01T00:00:00Z"] * 3,
        "latitude": [30.27] * 3, "longitude": [-97.74] * 3, "value": [1.0, 2.0, 3.0],
    })
    with pytest.raises(DpoptInputError, match="mixes numbers and text"):
        contributions(frame, GridOptions(7, "1h"), InputOptions(), bound=10.0)


@pytest.mark.parametrize("ids", [[True, False, True], [True, "a", "b"]])
def test_a_user_column_of_booleans_is_refused_naming_the_column(ids):
    """A boolean id was refused as "labels must not be booleans" without naming the column (a fuzz find)."""
    import pandas as pd

    from dpopt import DpoptInputError
    from dpopt.records import GridOptions, InputOptions, contributions

    frame = pd.DataFrame({
        "user_id": pd.Series(ids, dtype=object if isinstance(ids[1], str) else bool),
        "timestamp": ["2020-01-01T00:00:00Z"] * 3,
        "latitude": [30.27] * 3, "longitude": [-97.74] * 3, "value": [1.0, 2.0, 3.0],
    })
    with pytest.raises(DpoptInputError, match=r"^the `user` column: labels must not be booleans"):
        contributions(frame, GridOptions(7, "1h"), InputOptions(), bound=10.0)


def test_the_user_id_rule_is_stated_in_help_and_readme(capsys):
    """The one rule for ids is stated where a user meets it (README and --help)."""
    from pathlib import Path

    from dpopt.cli import main
    from dpopt.privacy.model_text import USER_ID_RULE

    def flat(text: str) -> str:
        return " ".join(text.split())

    with pytest.raises(SystemExit):
        main(["release", "--help"])
    assert flat(USER_ID_RULE) in flat(capsys.readouterr().out)
    readme = Path(__file__).resolve().parents[3] / "README.md"
    assert flat(USER_ID_RULE.split(": ", 1)[1]) in flat(readme.read_text(encoding="utf-8"))
