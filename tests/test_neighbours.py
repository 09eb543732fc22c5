"""Neighbouring datasets publish identical non-noisy outputs, for both privacy models,
through the public front door :func:`dpopt.release.release`.

* ``user`` (add/remove one user): D vs D minus a user, D plus a heavy user (many grids, many
  records), D plus a user with 10^5 records. With a public partition list and fixed bounds
  everything that is not a noisy value — the released grids and their order, k and c, the budget
  and every summary field — is identical; only the noisy columns differ.
* ``public-occupancy`` (one user's values change, the occupancy is public): the same three users
  (an ordinary one, the heavy one, the 10^5-record one) change all their values; the plan, the
  suppression, the released grids, every public column and summary field are identical.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.release import Budget, NoiseOptions, PerGridBudget, PublicOccupancyOptions, UserOptions, release

U = 50.0
T0 = pd.Timestamp("2020-01-01T10:00:00Z")
LATS = 30.20 + 0.05 * np.arange(4)  # four res-7 cells, two hourly slots: 8 grids


def _frame(users, lat_idx, seconds, values) -> pd.DataFrame:
    return pd.DataFrame({"user_id": users, "latitude": LATS[lat_idx], "longitude": -97.75,
                         "timestamp": T0 + pd.to_timedelta(seconds, unit="s"), "value": values})


def _base(seed: int = 0, n: int = 1500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return _frame(np.char.add("u", rng.integers(0, 60, n).astype(str)), rng.integers(0, 4, n),
                  rng.integers(0, 7200, n), rng.uniform(0, U, n))


def _user(name: str, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return _frame(np.full(n, name), rng.integers(0, 4, n), rng.integers(0, 7200, n), rng.uniform(0, U, n))


BASE = _base()
HEAVY = _user("heavy", 3000, 1)  # every grid, ~375 records each
BIG = _user("big", 100_000, 2)  # 10^5 records
def _partitions() -> pd.DataFrame:
    import h3

    cells = [h3.latlng_to_cell(lat, -97.75, 7) for lat in LATS]
    slots = [(T0 + pd.Timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ") for h in range(2)]
    # a ninth grid with no record at all: released as pure noise in every neighbour
    extra = h3.latlng_to_cell(31.0, -97.75, 7)
    return pd.DataFrame({"cell": [c for c in cells for _ in slots] + [extra],
                         "slot": slots * len(cells) + [slots[0]]})


USER_PUBLIC = ["cell", "slot", "slot_end", "repeat_every", "repeat_until", "h3_resolution", "cell_lat", "cell_lng",
               "released"]
USER_NOISY = {"mean", "variance", "mean_raw", "variance_raw", "noisy_count", "mean_error_bound",
              "variance_error_bound", "mean_pooled", "variance_pooled",
              "variance_released", "variance_withheld_reason"}  # the withholding rule reads noisy values (23.4)


def _user_release(df: pd.DataFrame, mechanism: str):
    budget = Budget(rho=0.5, mechanism="gaussian") if mechanism == "gaussian" else Budget(epsilon_total=2.0)
    model = UserOptions(partitions=_partitions(), bounds=(2, 3), strategy="fixed")
    return release(df, bound=U, budget=budget, model=model, noise=NoiseOptions(seed=5))


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_user_model_neighbours(mechanism):
    gone = BASE["user_id"].iloc[0]
    datasets = {"D": BASE, "D-user": BASE[BASE.user_id != gone], "D+heavy": pd.concat([BASE, HEAVY]),
                "D+1e5": pd.concat([BASE, BIG])}
    rel = {name: _user_release(df, mechanism) for name, df in datasets.items()}
    ref = rel["D"]
    assert len(ref.table) == 9 and set(USER_NOISY) <= set(ref.table.columns)
    for name, r in rel.items():
        assert list(r.table.columns) == list(ref.table.columns), name
        for col in USER_PUBLIC:
            assert r.table[col].tolist() == ref.table[col].tolist(), (name, col)
        assert set(r.table.columns) - set(USER_PUBLIC) <= USER_NOISY, name
        a, b = ref.summary.as_dict(), r.summary.as_dict()
        assert a.keys() == b.keys()
        for key in a:
            if key not in ("pooling", "outlook", "outlook_epsilon_needed"):  # post-processing of the noisy values
                assert a[key] == b[key], (name, key)
        assert (r.summary.k, r.summary.c) == (2, 3)
    # the noisy columns do move (the test can fail): the big user changes the counts
    assert not np.allclose(rel["D+1e5"].table["noisy_count"], ref.table["noisy_count"]) or \
        not np.allclose(rel["D+1e5"].table["mean_raw"], ref.table["mean_raw"])


PO_NOISY = {"mean", "variance", "mean_raw", "variance_raw"}


def _po_release(df: pd.DataFrame):
    # the per-grid ε mode with the greedy CLIP-USER plan: fast (the total-budget MILP takes ~10 s)
    return release(df, bound=U, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                   noise=NoiseOptions(seed=5))


def _revalue(df: pd.DataFrame, user: str, seed: int) -> pd.DataFrame:
    out = df.copy()
    mine = out.user_id == user
    out.loc[mine, "value"] = np.random.default_rng(seed).uniform(0, U, int(mine.sum()))
    return out


@pytest.mark.parametrize(("extra", "who"), [(None, "u7"), ("heavy", "heavy"), ("big", "big")])
def test_public_occupancy_neighbours(extra, who):
    df = BASE if extra is None else pd.concat([BASE, HEAVY if extra == "heavy" else BIG])
    a, b = _po_release(df), _po_release(_revalue(df, who, 9))
    assert list(a.table.columns) == list(b.table.columns)
    public = [c for c in a.table.columns if c not in PO_NOISY]
    pd.testing.assert_frame_equal(a.table[public], b.table[public])
    sa, sb = a.summary, b.summary
    for key in sa.__dataclass_fields__:
        x, y = getattr(sa, key), getattr(sb, key)
        assert x == y or (x != x and y != y), key  # NaN (no MILP gap) on both sides
    assert not np.allclose(a.table["mean_raw"].fillna(0), b.table["mean_raw"].fillna(0))


def _dropped_user(kind: str) -> pd.DataFrame:
    """A user every record of which cleaning drops: invalid fields, or a clock reset to 1970."""
    n = 672
    frame = _user(f"gone-{kind}", n, 11)
    if kind == "invalid":
        frame["latitude"] = np.where(np.arange(n) % 2, 123.0, frame["latitude"])  # bad coordinates
        frame["value"] = np.where(np.arange(n) % 2, frame["value"], np.nan)  # or a missing value
    else:
        frame["timestamp"] = pd.Timestamp("1970-01-01T00:00:00Z") + pd.to_timedelta(np.arange(n), unit="min")
    return frame


@pytest.mark.parametrize("kind", ["invalid", "outside-window"])
def test_user_model_neighbour_whose_records_are_all_dropped_publishes_the_same_files(tmp_path, kind):
    """Through the Python door: D vs D + a user whose every record is dropped. The same seed draws
    the same noise on the same contributions table: the published files are equal byte for byte (a
    refusal by --max-dropped would name the user's count)."""
    from dpopt.release import write_release

    model = UserOptions(partitions=_partitions(), bounds=(2, 3), resolution="fixed")
    files = []
    for name, frame in (("a", BASE), ("b", pd.concat([BASE, _dropped_user(kind)], ignore_index=True))):
        r = release(frame, bound=U, budget=Budget(epsilon_total=2.0), model=model, noise=NoiseOptions(seed=5))
        write_release(r, tmp_path / name / "out")
        files.append({p.name: p.read_bytes() for p in sorted((tmp_path / name / "out").iterdir())})
    assert files[0] == files[1] and "release.csv" in files[0]
