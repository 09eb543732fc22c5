"""Fuzz every public entry point with bad input (issue 12): NaN, ±inf, zero/negative bounds and
budgets, empty and mismatched inputs, wrong types, huge values, non-UTF-8 and malformed files.

API: each call must raise a :class:`ValueError` (``DpoptInputError``) whose message is ONE line and
names the argument in backticks. CLI (in process, ``dpopt.cli.main``): exit status 2, one line on
stderr starting ``dpopt CMD: error:``, no traceback. Seeded and fast (a few seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt.cli import main
from tests._legacy import release

NAN, INF = float("nan"), float("inf")
RNG = np.random.default_rng(20261123)

#: bad scalars for any positive finite number (U, ε)
BAD_POSITIVE = [NAN, INF, -INF, 0.0, -1.0, 1e308, "1", None, True, [1.0, 2.0], object()]
#: bad per-user count arrays (each m_ℓ an integer >= 1)
BAD_COUNTS = [[], [NAN], [INF], [0, 1], [-1, 2], [1.5, 2], "abc", None, [[1, 2], [3, 4]],
              [1e19], [2**63], np.array([1, 2], dtype=np.uint64) * 2**62, {"a": 1}, np.array([True, False])]
#: bad retained arrays for counts [3, 1, 2]
BAD_RETAINED = [[], [NAN, 1, 1], [INF, 1, 1], [-1, 1, 1], [0.5, 1, 1], "x", None, [[1, 1, 1]], [0, 0, 0],
                [1e19, 1, 1], np.array([True, True, True]), {"a": 1}, [4, 1, 1], [1, 1]]
#: the last two are bad only against counts [3, 1, 2]
NO_COUNTS = BAD_RETAINED[:-2] + [[0, 0]]
COUNTS = [3, 1, 2]
RETAINED = [2, 1, 1]


def _check_error(call: Callable[[], Any], name: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert isinstance(info.value, dpopt.DpoptInputError), f"{type(info.value).__name__}: {msg}"
    assert "\n" not in msg, msg
    assert f"`{name}" in msg, f"argument {name!r} not named in: {msg}"
    assert "-9223372036854775808" not in msg, msg


def _cases(entry: str, base: dict[str, Any], bad: dict[str, list[Any]], call: Callable[..., Any],
           names: dict[str, str] | None = None) -> list[Any]:
    out = []
    for arg, values in bad.items():
        for i, v in enumerate(values):
            out.append(pytest.param(entry, call, {**base, arg: v}, (names or {}).get(arg, arg),
                                    id=f"{entry}-{arg}-{i}"))
    return out


def _occ() -> dpopt.Occupancy:
    return dpopt.Occupancy.from_triples([1, 1, 2, 3, 3], ["a", "b", "a", "a", "b"], [2, 1, 3, 1, 1])


API_CASES: list[Any] = []
API_CASES += _cases("mean_sensitivity", {"retained": RETAINED, "bound": 1.0},
                    {"retained": NO_COUNTS, "bound": BAD_POSITIVE},
                    lambda retained, bound: dpopt.mean_sensitivity(retained, bound))
API_CASES += _cases("variance_sensitivity", {"retained": RETAINED, "bound": 1.0},
                    {"retained": NO_COUNTS, "bound": BAD_POSITIVE},
                    lambda retained, bound: dpopt.variance_sensitivity(retained, bound))
API_CASES += _cases("mean_bias", {"retained": RETAINED, "counts": COUNTS, "bound": 1.0},
                    {"retained": BAD_RETAINED, "counts": BAD_COUNTS, "bound": BAD_POSITIVE},
                    lambda retained, counts, bound: dpopt.mean_bias(retained, counts, bound))
API_CASES += _cases("variance_bias", {"retained": RETAINED, "counts": COUNTS, "bound": 1.0},
                    {"retained": BAD_RETAINED, "counts": BAD_COUNTS, "bound": BAD_POSITIVE},
                    lambda retained, counts, bound: dpopt.variance_bias(retained, counts, bound))
API_CASES += _cases("clipping_error",
                    {"counts": COUNTS, "bound": 1.0, "epsilon": 1.0, "lower": 0.0, "upper": 1.0},
                    {"counts": BAD_COUNTS, "bound": BAD_POSITIVE, "epsilon": BAD_POSITIVE,
                     "lower": [NAN, -1.0, 2.0, [0, 0]], "upper": [NAN, INF, 2.0, "x"]},
                    lambda counts, bound, epsilon, lower, upper: dpopt.clipping_error(counts, bound, epsilon,
                                                                                      lower, upper))
API_CASES += _cases("optimal_clipping", {"counts": COUNTS, "bound": 1.0, "epsilon": 1.0, "dim": 1},
                    {"counts": BAD_COUNTS, "bound": BAD_POSITIVE, "epsilon": BAD_POSITIVE,
                     "dim": [0, -1, 1.5, NAN, "2", None]},
                    lambda counts, bound, epsilon, dim: dpopt.optimal_clipping(counts, bound, epsilon, dim=dim))
API_CASES += _cases("solve_clipping", {"counts": COUNTS, "bound": 1.0, "epsilon": 1.0},
                    {"counts": BAD_COUNTS, "bound": BAD_POSITIVE[:6], "epsilon": BAD_POSITIVE[:6]},
                    lambda counts, bound, epsilon: dpopt.solve_clipping(counts, bound, epsilon))
API_CASES += _cases("best_fit", {"counts": COUNTS, "length": 3},
                    {"counts": BAD_COUNTS, "length": [0, -1, 1.5, NAN, INF, "3", None, 2**70]},
                    lambda counts, length: dpopt.best_fit(counts, length))
API_CASES += _cases("wrap_around", {"counts": COUNTS, "length": 3},
                    {"counts": BAD_COUNTS, "length": [0, -1, 1.5, NAN, INF, "3", None]},
                    lambda counts, length: dpopt.wrap_around(counts, length))
API_CASES += _cases("array_averaging_error", {"counts": COUNTS, "bound": 1.0, "epsilon": 1.0, "length": 3},
                    {"counts": BAD_COUNTS, "bound": BAD_POSITIVE, "epsilon": BAD_POSITIVE,
                     "length": [0, -1, 1.5, NAN, None]},
                    lambda counts, bound, epsilon, length: dpopt.array_averaging_error(counts, bound, epsilon,
                                                                                       length))
API_CASES += _cases("optimal_array_length", {"counts": COUNTS, "bound": 1.0, "epsilon": 1.0, "method": "exact"},
                    {"counts": BAD_COUNTS, "bound": BAD_POSITIVE, "epsilon": BAD_POSITIVE,
                     "method": ["best", None, 3]},
                    lambda counts, bound, epsilon, method: dpopt.optimal_array_length(counts, bound, epsilon,
                                                                                      method=method))
API_CASES += _cases("Occupancy.from_triples", {"users": [1, 2], "grids": ["a", "b"], "counts": [1, 2]},
                    {"users": [[1, NAN], [1, None], [1, ""], [True, 2], 5, "ab", [1]],
                     "grids": [[NAN, "b"], [None, "b"], ["a"], 3],
                     "counts": [[1, NAN], [1, INF], [1, -1], [1, 1.5], [0, 0], [], ["a", "b"], [1, 1e19],
                                [1]]},
                    lambda users, grids, counts: dpopt.Occupancy.from_triples(users, grids, counts),
                    names={"counts": "counts"})
API_CASES += _cases("grid_error_terms",
                    {"totals": [3, 2], "retained_totals": [3, 2], "retained_max": [2, 1], "bound": 1.0,
                     "epsilon": 1.0},
                    {"totals": [[NAN, 2], [3.5, 2], [-1, 2], [3], "x", [1e19, 2]],
                     "retained_totals": [[NAN, 2], [4, 2], [2.5, 2], [3, 2, 1]],
                     "retained_max": [[0, 1], [NAN, 1], [4, 1], [1.5, 1]],
                     "bound": BAD_POSITIVE[:6], "epsilon": BAD_POSITIVE[:6]},
                    lambda **kw: dpopt.grid_error_terms(kw["totals"], kw["retained_totals"], kw["retained_max"],
                                                        kw["bound"], kw["epsilon"]))
API_CASES += _cases("grid_errors", {"occ": "OCC", "bound": 1.0, "epsilon": 1.0, "split": "equal"},
                    {"occ": [None, "occ", [[1, 2]], 3.0], "bound": BAD_POSITIVE,
                     "epsilon": BAD_POSITIVE[:9] + [[1.0, 2.0, 3.0]],
                     "split": ["half", None]},
                    lambda occ, bound, epsilon, split: dpopt.grid_errors(_occ() if occ == "OCC" else occ, bound,
                                                                         epsilon, split=split))
API_CASES += _cases("clip_user", {"occ": "OCC", "bound": 1.0, "epsilon": 1.0, "error_bound": None},
                    {"occ": [None, "occ", 3.0], "bound": BAD_POSITIVE, "epsilon": BAD_POSITIVE,
                     "error_bound": [NAN, -1.0, 0.0, "x"]},
                    lambda occ, bound, epsilon, error_bound: dpopt.clip_user(
                        _occ() if occ == "OCC" else occ, bound, epsilon, error_bound=error_bound))
API_CASES += _cases("solve_suppression",
                    {"occ": "OCC", "bound": 1.0, "epsilon": 1.0, "error_bound": None, "time_limit": None},
                    {"occ": [None, "occ", 3.0], "bound": BAD_POSITIVE[:7], "epsilon": BAD_POSITIVE[:7],
                     "error_bound": [NAN, -1.0, "x"], "time_limit": [NAN, -1.0, INF, "x"]},
                    lambda occ, bound, epsilon, error_bound, time_limit: dpopt.solve_suppression(
                        _occ() if occ == "OCC" else occ, bound, epsilon, error_bound=error_bound,
                        time_limit=time_limit))


@pytest.mark.parametrize("entry,call,kwargs,name", API_CASES)
def test_api_bad_input_is_one_clean_line(entry, call, kwargs, name):
    _check_error(lambda: call(**kwargs), name)


def test_every_api_entry_point_has_15_cases():
    per = pd.Series([p.values[0] for p in API_CASES]).value_counts()
    assert per.min() >= 15, per.to_dict()


# ---------------------------------------------------------------------------------------------- release


def _records(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({
        "user_id": RNG.integers(0, 5, n).astype(str),
        "latitude": 30.26 + 0.02 * RNG.random(n),
        "longitude": -97.74 + 0.02 * RNG.random(n),
        "timestamp": pd.Timestamp("2021-06-01T00:00:00Z") + pd.to_timedelta(RNG.integers(0, 7200, n), unit="s"),
        "value": 100 * RNG.random(n),
    })


RELEASE_BAD: dict[str, list[Any]] = {
    "bound": BAD_POSITIVE,
    "epsilon": BAD_POSITIVE,
    "error_bound": [NAN, INF, -1.0, "x"],
    "time_limit": [NAN, -1.0, "x"],
    "h3_resolution": [-1, 16, 2.5, "x", None],
    "slot": ["often", "-1h", 0, None],
    "plan": ["best", 3.5],
    "split": ["half"],
    "seed": ["x", 1.5],
    "out_of_range": ["ignore"],
    "timestamp_unit": ["days"],
    "chunksize": [0, -5, "x"],
    "columns": [{"user": "x"}, "user_id", {"user_id": ""}],
    "records": [None, 3, "/nonexistent/x.csv", [1, 2, 3], pd.DataFrame({"a": [1]})],
    "granularity_bits": [-1, 41, "x"],
    "noise": ["gauss"],
}


@pytest.mark.parametrize("arg,value", [pytest.param(a, v, id=f"{a}-{i}") for a, vs in RELEASE_BAD.items()
                                       for i, v in enumerate(vs)])
def test_release_bad_input_is_one_clean_line(arg, value):
    kwargs: dict[str, Any] = {"bound": 100.0, "epsilon": 1.0, "seed": 1}
    records = _records()
    if arg == "records":
        records = value
    else:
        kwargs[arg] = value
    _check_error(lambda: release(records, privacy="public-occupancy", **kwargs), arg)


def test_release_records_that_clean_to_nothing_or_mismatch():
    df = _records(10)
    for bad in (df.assign(value=NAN), df.assign(latitude=200.0), df.iloc[:0], df.assign(timestamp="no"),
                df.assign(user_id=None)):
        with pytest.raises(ValueError) as info:
            release(bad, privacy="public-occupancy", bound=100.0, epsilon=1.0, seed=1)
        # one line naming the argument: the records, or the share of them dropped (issue 22)
        assert "\n" not in str(info.value) and ("`records`" in str(info.value) or "`max_dropped`" in str(info.value))


# ---------------------------------------------------------------------------------------------- CLI


def _cli(capsys, argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: type errors of flags
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(f"dpopt {argv[0]}: error:"), err
    if not err.startswith("usage:"):  # our own errors: exactly one line
        assert len(lines) == 1, err
    return lines[-1]


@pytest.fixture
def files(tmp_path):
    p = {}
    for name, content in {
        "m": b"3\n1\n2\n",
        "g": b"2\n1\n1\n",
        "latin1": "3\n1\n\xe9\n".encode("latin-1"),
        "utf16": "3\n1\n2\n".encode("utf-16"),
        "empty": b"",
        "header_only": b"counts\n",
        "text": b"3\nabc\n",
        "nan": b"3\nnan\n2\n",
        "inf": b"3\ninf\n",
        "zero": b"3\n0\n",
        "neg": b"3\n-2\n",
        "frac": b"3\n1.5\n",
        "huge": b"3\n1e19\n",
        "huge2": b"1e400\n",
        "bin": bytes(range(256)),
        "occ": b"user,grid,count\n1,a,2\n1,b,1\n2,a,3\n3,a,1\n3,b,1\n",
        "occ_latin1": "user,grid,count\n\xe9,a,2\n".encode("latin-1"),
        "occ_nan": b"user,grid,count\n1,a,nan\n",
        "occ_neg": b"user,grid,count\n1,a,-2\n",
        "occ_cols": b"who,where,n\n1,a,2\n",
        "occ_empty": b"",
        "occ_huge": b"user,grid,count\n1,a,1e19\n",
        "occ_frac": b"user,grid,count\n1,a,1.5\n",
        "occ_user_nan": b"user,grid,count\n,a,1\n2,a,1\n",
    }.items():
        path = tmp_path / f"{name}.txt"
        path.write_bytes(content)
        p[name] = str(path)
    p["dir"] = str(tmp_path)
    p["missing"] = str(tmp_path / "missing.txt")
    return p


BAD_COUNT_FILES = ["latin1", "utf16", "empty", "header_only", "text", "nan", "inf", "zero", "neg", "frac",
                   "huge", "huge2", "bin", "missing", "dir"]
BAD_NUMBERS = [("--bound", "nan"), ("--bound", "inf"), ("--bound", "0"), ("--bound", "-1"), ("--bound", "1e308"),
               ("--epsilon", "nan"), ("--epsilon", "-inf"), ("--epsilon", "0"), ("--epsilon", "1e300"),
               ("--bound", "abc")]


def _partition_cases(cmd: str, extra: list[str] | None = None) -> list[Any]:
    extra = extra or []
    cases = [pytest.param([cmd, "--counts", "{%s}" % f, "--bound", "1", "--epsilon", "1", *extra],
                          id=f"{cmd}-counts-{f}") for f in BAD_COUNT_FILES]
    for flag, value in BAD_NUMBERS:
        numbers = {"--bound": "1", "--epsilon": "1", flag: value}
        cases.append(pytest.param([cmd, "--counts", "{m}", "--bound", numbers["--bound"], "--epsilon",
                                   numbers["--epsilon"], *extra], id=f"{cmd}-{flag}-{value}"))
    return cases


CLI_CASES = (
    _partition_cases("errors")
    + [pytest.param(["errors", "--counts", "{m}", "--retained", "{%s}" % f, "--bound", "1", "--epsilon", "1"],
                    id=f"errors-retained-{f}") for f in ("latin1", "nan", "frac", "huge", "neg")]
    + [pytest.param(["errors", "--counts", "{m}", "--retained", "{occ}", "--bound", "1", "--epsilon", "1"],
                    id="errors-retained-mismatch")]
    + _partition_cases("clipping")
    + [pytest.param(["clipping", "--counts", "{m}", "--bound", "1", "--epsilon", "1", "--dim", v], id=f"clipping-dim-{v}")
       for v in ("0", "-3")]
    + _partition_cases("arrays")
    + [pytest.param(["arrays", "--counts", "{m}", "--bound", "1", "--epsilon", "1", "--solver", "magic"],
                    id="arrays-solver")]
    + [pytest.param(["suppress", "--occupancy", "{%s}" % f, "--bound", "1", "--epsilon", "1"], id=f"suppress-occ-{f}")
       for f in ("occ_latin1", "occ_nan", "occ_neg", "occ_cols", "occ_empty", "occ_huge", "occ_frac", "occ_user_nan",
                 "bin", "missing", "dir")]
    + [pytest.param(["suppress", "--occupancy", "{occ}", "--bound", b, "--epsilon", e], id=f"suppress-num-{b}-{e}")
       for b, e in (("nan", "1"), ("inf", "1"), ("0", "1"), ("-1", "1"), ("1e308", "1"), ("1", "nan"), ("1", "0"),
                    ("1", "1e300"))]
    + [pytest.param(["suppress", "--occupancy", "{occ}", "--bound", "1", "--epsilon", "1", "--error-bound", v],
                    id=f"suppress-error-bound-{v}") for v in ("nan", "-1")]
    + [pytest.param(["suppress", "--occupancy", "{occ}", "--bound", "1", "--epsilon", "1", "--method", "milp",
                     "--time-limit", v], id=f"suppress-time-limit-{v}") for v in ("nan", "-1")]
    + [pytest.param(["reproduce", *argv], id=f"reproduce-{i}") for i, argv in enumerate([
        ["nofig", "--out", "{dir}/r"],
        ["000-fig2", "--out", "{m}"],
        ["000-fig2", "--out", "{dir}/r", "--param", "unknown=1"],
        ["000-fig2", "--out", "{dir}/r", "--param", "novalue"],
        ["000-fig2", "--out", "{dir}/r", "--param", "seed=3"],
        ["000-fig2", "--out", "{dir}/r", "--runs", "0"],
        ["000-fig2", "--out", "{dir}/r", "--runs", "-4"],
        ["000-fig2", "--out", "{dir}/r", "--runs", "x"],
        ["000-fig2", "--out", "{dir}/r", "--seed", "x"],
        ["002-fig1", "--out", "{m}"],
        ["002-fig1", "--out", "{dir}/r", "--param", "bogus=2"],
        ["003-fig1", "--out", "{dir}/r", "--param", "x=1"],
        ["003-fig1", "--out", "{m}", "--runs", "1"],
        ["all", "--out", "{m}"],
        ["000-fig1", "--out", "{dir}/r", "--param", "=1"],
    ])]
)


@pytest.mark.parametrize("argv", CLI_CASES)
def test_cli_bad_input_exit_2_one_line(argv, files, capsys):
    _cli(capsys, [a.format(**files) for a in argv])


RELEASE_CLI = [
    ["{csv}", "--bound", "nan", "--epsilon", "1"],
    ["{csv}", "--bound", "inf", "--epsilon", "1"],
    ["{csv}", "--bound", "0", "--epsilon", "1"],
    ["{csv}", "--bound", "-5", "--epsilon", "1"],
    ["{csv}", "--bound", "1e9", "--epsilon", "1"],
    ["{csv}", "--bound", "100", "--epsilon", "nan"],
    ["{csv}", "--bound", "100", "--epsilon", "0"],
    ["{csv}", "--bound", "100", "--epsilon", "1e300"],
    ["{csv}", "--bound", "100", "--epsilon", "1e101"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--error-bound", "inf"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--error-bound", "nan"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--error-bound", "-1"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--time-limit", "-1"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--chunksize", "0"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--slot", "0min"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--h3-resolution", "-1"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--out", "{csv}"],
    ["{csv}", "--bound", "100", "--epsilon", "1", "--out", "{full}"],
    ["{latin1}", "--bound", "100", "--epsilon", "1"],
    ["{extra}", "--bound", "100", "--epsilon", "1"],
    ["{extra_first}", "--bound", "100", "--epsilon", "1"],
    ["{empty}", "--bound", "100", "--epsilon", "1"],
    ["{nothing}", "--bound", "100", "--epsilon", "1"],
    ["{bin}", "--bound", "100", "--epsilon", "1"],
    ["{dir}/missing.csv", "--bound", "100", "--epsilon", "1"],
]


@pytest.mark.parametrize("argv", RELEASE_CLI, ids=lambda a: "-".join(a[1:]).replace("/", "_")[:60])
def test_release_cli_bad_input_exit_2_one_line(argv, tmp_path, capsys):
    df = _records(30)
    csv = tmp_path / "r.csv"
    df.to_csv(csv, index=False)
    text = csv.read_text()
    header, first, rest = text.split("\n", 2)
    paths = {"csv": str(csv), "dir": str(tmp_path), "full": str(tmp_path / "full")}
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.csv").write_text("x")
    for name, content in {
        "latin1": (header + "\n" + first + "\n" + "\xe9" + rest).encode("latin-1"),
        "extra": (header + "\n" + first + "\n" + rest.replace("\n", ",1\n", 1)).encode(),
        "extra_first": (header + "\n" + first + ",9\n" + rest).encode(),
        "empty": b"",
        "nothing": (header + "\n").encode(),
        "bin": bytes(range(256)) * 3,
    }.items():
        path = tmp_path / f"{name}.csv"
        path.write_bytes(content)
        paths[name] = str(path)
    argv = [a.format(**paths) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "o")]
    line = _cli(capsys, ["release", *argv, "--quiet", "--no-map", *([] if "--privacy" in argv else ["--privacy", "public-occupancy"])])
    assert not (tmp_path / "o").exists(), line  # nothing half-written


def test_cli_entry_points_have_15_cases():
    per = pd.Series([p.values[0][0] for p in CLI_CASES]).value_counts().to_dict()
    per["release"] = len(RELEASE_CLI)
    assert min(per.values()) >= 15 and set(per) == {"errors", "clipping", "arrays", "suppress", "reproduce",
                                                    "release"}, per


def test_demo_takes_no_input():
    """`dpopt demo` has no input flags: unknown flags are argparse's one error (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--counts", "x"])
    assert exc.value.code == 2


@pytest.mark.parametrize("huge", [1e19, 2.0**63, np.uint64(2**63), 2**64, -1e19])
def test_message_shows_the_value_not_int64_min(huge):
    """Regression: a huge count was cast to int64 first and the message showed -9223372036854775808."""
    with pytest.raises(ValueError) as info:
        dpopt.mean_bias([1, 1], np.array([huge, 2], dtype=object), 1.0)
    msg = str(info.value)
    assert "-9223372036854775808" not in msg and "`counts`" in msg and "2^40" in msg
