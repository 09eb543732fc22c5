"""The layered front door: typed option groups, validation before any data is read,
idle options refused, the estimation registry, the folder's permissions."""

from __future__ import annotations

import dataclasses
import os
import stat

import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.cli import main
from dpopt.estimation import ESTIMATORS, estimate
from dpopt.release import (Budget, EstimationOptions, InputOptions, NoiseOptions, PerGridBudget,
                           PublicOccupancyOptions, UserOptions, austin_sample_path, release, write_release)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small records CSV: 30 users, 4 grids of the embedded sample's first rows."""
    frame = pd.read_csv(austin_sample_path()).head(3000)
    path = tmp_path_factory.mktemp("front") / "r.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def unreadable(tmp_path):
    """A file that fails as soon as anyone reads it as records."""
    path = tmp_path / "bad.csv"
    path.write_bytes(b"\x00\xff\xfe not records at all")
    return path


#: options both models take with one meaning: the hierarchy's recurring time windows (hour-of-day,
#: models/hierarchy.md §2), for the user model's adaptive release and public-occupancy's plan="hierarchy"
SHARED_OPTIONS = {"profile"}


def test_a_model_cannot_receive_the_other_models_options():
    fields = {f.name for f in dataclasses.fields(UserOptions)}
    other = {f.name for f in dataclasses.fields(PublicOccupancyOptions)}
    assert fields & other == SHARED_OPTIONS
    for bad in ("month", "Day", 1, ["day"]):  # a shared option is one validator's: the same refusal in both
        for build in (lambda: UserOptions(partitions="p.csv", profile=bad), lambda: PublicOccupancyOptions(profile=bad)):
            with pytest.raises(DpoptInputError, match="`profile` must be one of"):
                build()
    with pytest.raises(TypeError):
        UserOptions(plan="greedy")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        PublicOccupancyOptions(partitions="p.csv")  # type: ignore[call-arg]


@pytest.mark.parametrize("build", [
    lambda: Budget(epsilon_total=-1.0),
    lambda: Budget(epsilon_total=1e-9),  # below the floor the release's pieces can be drawn at
    lambda: Budget(rho=1e-9, mechanism="gaussian"),
    lambda: Budget(epsilon_total=1.0, rho=1.0, mechanism="gaussian"),
    lambda: Budget(rho=1.0),  # rho needs Gaussian noise
    lambda: Budget(epsilon_total=1.0, delta=2.0),
    lambda: UserOptions(bounds=(0, 3)),
    lambda: UserOptions(bounds_fraction=0.6, selection_fraction=0.5, resolution="fixed"),
    lambda: UserOptions(selection_fraction=1.0),  # private multi-resolution: the selection's share of epsilon
    lambda: PublicOccupancyOptions(plan="fastest"),
    lambda: EstimationOptions(method="oracle"),
    lambda: EstimationOptions(confidence=1.0),
    lambda: NoiseOptions(noise="cauchy"),
    lambda: InputOptions(backend="spark"),
])
def test_options_validate_themselves(build):
    with pytest.raises(DpoptInputError):
        build()


@pytest.mark.parametrize("kwargs", [
    {"budget": PerGridBudget(1.0)},  # the per-grid mode is public-occupancy's
    {"budget": Budget(epsilon_total=1.0)},  # private selection needs delta
    {"budget": Budget(epsilon_total=1.0, delta=1e-6), "model": UserOptions(partitions="p.csv")},  # idle delta
    {"budget": Budget(epsilon_total=1.0, delta=1e-6), "io": InputOptions(out_of_range="drop")},
    {"budget": Budget(epsilon_total=1.0), "model": PublicOccupancyOptions(plan="greedy", target=3.0)},
    {"budget": Budget(epsilon_total=1.0), "model": PublicOccupancyOptions(pseudo_users=True)},  # plan budget
    {"budget": Budget(epsilon_total=1.0), "model": PublicOccupancyOptions(),
     "estimation": EstimationOptions(method="pooled")},
    {"budget": Budget(epsilon_total=1.0, delta=1e-6), "model": UserOptions(resolution="fixed"),
     "estimation": EstimationOptions(method="hierarchical")},
    {"budget": Budget(epsilon_total=1.0, delta=1e-6), "estimation": EstimationOptions(method="direct")},
    {"budget": Budget(epsilon_total=1.0, delta=1e-6, mechanism="gaussian")},  # private multi-resolution: Laplace
])
def test_bad_combinations_fail_before_any_record_is_read(unreadable, kwargs):
    with pytest.raises(DpoptInputError):
        release(unreadable, bound=10.0, **kwargs)


@pytest.mark.parametrize("argv, needle", [
    (["--epsilon-total", "-1"], "--epsilon-total"),
    (["--epsilon-total", "1e-9"], "--epsilon-total"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--partitions", "{p}"], "--delta"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--plan", "greedy"], "--plan"),
    (["--privacy", "public-occupancy", "--epsilon-total", "1", "--bounds", "2,2"], "--bounds"),
    (["--privacy", "public-occupancy", "--epsilon-total", "1", "--plan", "greedy", "--target", "3"], "--target"),
    (["--privacy", "public-occupancy", "--epsilon-total", "1", "--strategy", "place"],
     "`--strategy` does nothing under --privacy public-occupancy"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--backend", "dask", "--chunksize", "1000"],
     "`--chunksize` does nothing with --backend dask"),
    (["--epsilon-totl", "1"], "did you mean --epsilon-total"),
    (["--epsilon-t", "1"], "did you mean --epsilon"),  # no abbreviations
])
def test_cli_refuses_before_reading(unreadable, tmp_path, capsys, argv, needle):
    argv = [a.replace("{p}", str(unreadable)) for a in argv]
    with pytest.raises(SystemExit) if "did you mean" in needle else _nothing():
        code = main(["release", str(unreadable), "--bound", "10", "--out", str(tmp_path / "o"), *argv])
        assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "UTF-8" not in err and len(err.strip().splitlines()) >= 1
    assert not (tmp_path / "o").exists()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("mask, mode", [(0o022, 0o755), (0o027, 0o750)])
def test_release_folder_honours_the_umask(tiny, tmp_path, mask, mode):
    r = release(tiny, bound=120, budget=Budget(epsilon_total=5.0, delta=1e-6), model=UserOptions(strategy="adaptive", bounds=(1, 1)),
                noise=NoiseOptions(seed=1))
    old = os.umask(mask)
    try:
        paths = write_release(r, tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == mode
    for key in ("release", "html", "summary"):
        assert stat.S_IMODE(os.stat(paths[key]).st_mode) == 0o666 & ~mask, key


def _user(tiny, **est):
    return release(tiny, bound=120, budget=Budget(epsilon_total=20.0, delta=1e-6), model=UserOptions(bounds=(2, 4), resolution="fixed"),
                   noise=NoiseOptions(seed=5), estimation=EstimationOptions(**est))


def test_estimation_entry_and_registry(tiny, monkeypatch):
    r = _user(tiny)
    m = r.measurements
    assert m is not None and m.privacy_model == "user" and set(m.statistics) == {"count", "sum", "sumsq"}
    direct = estimate(m, method="direct", confidence=0.95)
    np.testing.assert_array_equal(direct.table["mean"], r.table["mean"])
    np.testing.assert_array_equal(direct.table["mean_error_bound"], r.table["mean_error_bound"])
    pooled = estimate(m, method="pooled")
    np.testing.assert_array_equal(pooled.table["mean"], r.table["mean_pooled"])
    # a new method is one registry entry; the front door then accepts it
    monkeypatch.setitem(ESTIMATORS, "halves", lambda mm, *, confidence: dataclasses.replace(
        estimate(mm, confidence=confidence), method="halves"))
    assert estimate(m, method="halves").method == "halves"
    assert EstimationOptions(method="halves").method == "halves"


def test_user_model_honours_the_confidence(tiny):
    """A wider confidence gives wider bounds from the same noisy measurements (same seed)."""
    lo, hi = _user(tiny, confidence=0.8), _user(tiny, confidence=0.99)
    np.testing.assert_array_equal(lo.table["mean_raw"], hi.table["mean_raw"])
    assert (hi.table["mean_error_bound"] >= lo.table["mean_error_bound"]).all()
    assert (hi.table["mean_error_bound"] > lo.table["mean_error_bound"]).any()
    assert hi.summary.confidence == 0.99


def test_public_occupancy_measurements_estimate_to_the_published_table(tiny):
    r = release(tiny, bound=120, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                noise=NoiseOptions(seed=2))
    m = r.measurements
    est = estimate(m)
    np.testing.assert_array_equal(est.table["mean"], r.table["mean"])
    # the estimate withholds a variance whose interval is the whole range [0, U²/4]
    shown = est.table["variance_released"].to_numpy(bool) | ~r.table["released"].to_numpy(bool)
    np.testing.assert_array_equal(est.table["variance_error_bound"][shown], r.table["variance_error_bound"][shown])
    from dpopt.estimation.direct import VARIANCE_WITHHELD_REASON

    whole = ~shown & (est.table["variance_withheld_reason"].to_numpy() == VARIANCE_WITHHELD_REASON)
    v = est.table["variance_in_range"].to_numpy(float)[whole]
    e = est.table["variance_error_bound_noise"].to_numpy(float)[whole]
    assert ((v - e <= 0) & (v + e >= 120.0**2 / 4)).all() and est.table["variance"][~shown].isna().all()
    assert r.table["variance"][~shown].isna().all()  # release.csv withholds them too
    np.testing.assert_array_equal(m.statistics["mean"].value, r.table["mean_raw"])


def _empty_table():
    from dpopt.records.aggregate import Aggregate, PairSamples

    e, f = np.empty(0, np.int64), np.empty(0, float)
    return Aggregate(users=np.empty(0, object), cells=e, slots=e, pair_user=e, pair_grid=e, count=e, sum=f,
                     sumsq=f, h3_resolution=7, slot_ns=3600 * 10**9, samples=PairSamples(f, np.zeros(1, np.int64)),
                     bound=10.0, out_of_range="clip")


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_user_model_releases_an_empty_contributions_table(mechanism):
    """Empty input and a one-user input are neighbours; the model measures both
    (the records layer delivers the empty table). Public list: every listed grid as noise, the same
    public columns as with one user; private selection: no grid."""
    from dpopt.release import release_user
    from tests.privacy.user.conftest import make_agg

    one = make_agg([("u0", 0, 0, 3.0), ("u0", 0, 1, 4.0)])
    plist = pd.DataFrame({"cell": [h3_str(one.cells[0])], "slot": ["1970-01-01T00:00:00Z"]})
    delta = 1e-6 if mechanism == "gaussian" else None
    opts = UserOptions(partitions=plist, strategy="adaptive", bounds=(1, 2))
    out = [release_user(t, Budget(epsilon_total=1.0, delta=delta, mechanism=mechanism), opts, bound=10.0,
                        noise=NoiseOptions(seed=4)) for t in (_empty_table(), one)]
    for col in ("cell", "slot", "cell_lat", "cell_lng", "released"):
        assert out[0].table[col].tolist() == out[1].table[col].tolist()
    assert out[0].summary.k == out[1].summary.k and out[0].summary.epsilon_total == out[1].summary.epsilon_total
    private = release_user(_empty_table(), Budget(epsilon_total=1.0, delta=1e-6), UserOptions(), bound=10.0,
                           noise=NoiseOptions(seed=4))
    assert len(private.table) == 0 and private.summary.grids_released == 0


def h3_str(cell: int) -> str:
    import h3

    return h3.int_to_str(int(cell))


def test_nothing_released_names_the_planners_limit_where_it_stopped():
    """public-occupancy publishing no grid: where the planner stopped at its limit (`--time-limit 0`
    publishes nothing), the warning says so and what would change it, not the budget or the target."""
    from types import SimpleNamespace

    from dpopt.cli.release import _nothing_released

    empty = pd.DataFrame({"released": [False, False]})
    stopped = _nothing_released(SimpleNamespace(table=empty, summary=SimpleNamespace(plan_status="time_limit")))
    assert "stopped at its limit (time_limit)" in stopped and "--time-limit" in stopped
    plain = _nothing_released(SimpleNamespace(table=empty, summary=SimpleNamespace(plan_status="optimal")))
    assert "--epsilon-total" in plain and "limit" not in plain
    assert _nothing_released(SimpleNamespace(table=pd.DataFrame({"released": [True]}), summary=None)) == ""


def test_option_objects_of_the_wrong_type_and_partitions_as_int_or_polars(unreadable):
    """`noise`, `io`, `estimation` given as something else fail in one line naming them (were
    AttributeErrors deep inside); a partitions frame whose cells are h3's integer form, or a polars
    frame, is read as its text form would be; PublicOccupancyOptions checks its targets when built."""
    import h3

    from dpopt.privacy.user.partitions import read_partitions
    from dpopt.release import PublicOccupancyOptions

    for kw, name in (({"noise": 1}, "noise"), ({"io": {"timezone": "UTC"}}, "io"), ({"estimation": 0.9}, "estimation")):
        with pytest.raises(DpoptInputError, match=f"`{name}` must be") as err:
            release(unreadable, bound=10.0, budget=Budget(epsilon_total=1.0), **kw)
        assert "\n" not in str(err.value)
    cell = h3.latlng_to_cell(30.27, -97.74, 7)
    text = pd.DataFrame({"cell": [cell], "slot": ["2024-03-05T08:00:00Z"]})
    want = read_partitions(text, h3_resolution=7, slot_ns=3_600 * 10**9)
    as_int = read_partitions(text.assign(cell=[h3.str_to_int(cell)]), h3_resolution=7, slot_ns=3_600 * 10**9)
    assert as_int.cells.tolist() == want.cells.tolist() and as_int.slots.tolist() == want.slots.tolist()
    with pytest.raises(DpoptInputError, match="H3"):
        read_partitions(text.assign(cell=[12345]), h3_resolution=7, slot_ns=3_600 * 10**9)
    import polars as pl  # the test extra's

    assert read_partitions(pl.from_pandas(text), h3_resolution=7, slot_ns=3_600 * 10**9).cells.tolist() == \
        want.cells.tolist()
    for bad in (-1, "x", True):
        with pytest.raises(DpoptInputError, match="`target`"):
            PublicOccupancyOptions(plan="budget", target=bad)
