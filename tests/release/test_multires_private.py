"""The private multi-resolution release through the front doors (models/hierarchy.md §15):
``dpopt release RECORDS --privacy user --epsilon-total E --delta D --strategy adaptive`` (no
``--partitions``) and ``release(records, budget=Budget(E, delta=D), model=UserOptions(strategy="adaptive"))``:
the named strategy; the default without a list is the engine (tests/release/test_engine_nolist.py).

Checked: the files and their contract columns, the budget recount (ε as exact Fractions of the
pieces, δ = the selected levels' δ/L each, from the public plan recomputed here), seeded
reproducibility, neighbours (D vs D minus a user: every output that is not a DP output identical),
the outlook when nothing is published, and the refusals before any record is read.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main
from dpopt.records.grid import parse_slot
from dpopt.release import Budget, NoiseOptions, UserOptions, contributions, release
from dpopt.writers import ANSWER_COLUMNS, RELEASE_COLUMNS
from dpopt.writers.user import MULTIRES_EXTRA_COLUMNS

MULTIRES_COLUMNS = RELEASE_COLUMNS + MULTIRES_EXTRA_COLUMNS

U = 50.0
T0 = pd.Timestamp("2020-01-01T10:00:00Z")
LATS = 30.20 + 0.01 * np.arange(6)  # six res-7 cells in one res-4 parent, four hourly slots


def _records(seed: int = 0, n_users: int = 120, n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user_id": np.char.add("u", rng.integers(0, n_users, n).astype(str)),
                         "latitude": LATS[rng.integers(0, LATS.size, n)], "longitude": -97.75,
                         "timestamp": T0 + pd.to_timedelta(rng.integers(0, 4 * 3600, n), unit="s"),
                         "value": rng.uniform(0, U, n)})


DF = _records()


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("mrp") / "records.csv"
    DF.to_csv(p, index=False)
    return p


def _run(tmp_path, csv_path, *extra, out="out"):
    argv = ["release", str(csv_path), "--privacy", "user", "--bound", str(U), "--out", str(tmp_path / out),
            "--quiet", "--strategy", "adaptive", *extra]
    return main(argv)


def _py(df=DF, eps=20.0, seed=3, **model):
    model = {"strategy": "adaptive", **model} if "resolution" not in model else model
    return release(df, bound=U, budget=Budget(epsilon_total=eps, delta=1e-6), model=UserOptions(**model),
                   noise=NoiseOptions(seed=seed))


def test_cli_runs_private_multires_as_named_strategy(tmp_path, csv_path, capsys):
    assert _run(tmp_path, csv_path, "--epsilon-total", "20", "--delta", "1e-6", "--seed", "3", "--no-map") == 0
    out = tmp_path / "out"
    table, answers = pd.read_csv(out / "release.csv"), pd.read_csv(out / "answers.csv")
    s = json.loads((out / "summary.json").read_text())
    assert list(table.columns) == MULTIRES_COLUMNS and list(answers.columns) == ANSWER_COLUMNS
    assert s["resolution"] == "adaptive" and s["method"] == "hierarchical" and s["partitions"].startswith("private")
    assert "nothing about occupancy" in s["public"] and "hash order" in s["public"]
    assert len(table) == s["grids_released"] > 0 and table["released"].all()
    # cell at the node's own resolution, slot_end = slot + the node's level slot
    import h3

    assert [h3.get_resolution(c) for c in table["cell"]] == table["h3_resolution"].tolist()
    lengths = pd.to_datetime(table["slot_end"]) - pd.to_datetime(table["slot"])
    want = {lv["level"]: pd.Timedelta(parse_slot(lv["slot"]), unit="ns") for lv in s["levels"]}
    assert [lengths.iloc[i] == want[lv] for i, lv in enumerate(table["level"])] == [True] * len(table)
    assert table["mean"].between(0, U).all() and (table["mean_error_bound"] > 0).all()
    # every answering node is a published row (the reader's rule)
    keys = set(zip(table["cell"], table["slot"], table["slot_end"]))
    assert set(zip(answers["node_cell"], answers["node_slot"], answers["node_slot_end"])) <= keys
    assert "hash order" in (out / "report.md").read_text()
    # no sum of squares is measured here: no variance is published, and each row says why (a node
    # whose variance interval came out narrow used to be flagged released with an empty value)
    assert not table["variance_released"].any() and table["variance"].isna().all()
    assert (table["variance_withheld_reason"] == "sum of squares not measured").all()


def _plan_delta(s: dict, delta: float) -> float:
    """δ of the release from the public plan: δ/L for every level that ran a selection."""
    L = len(s["levels"])
    selected = [lv for lv in range(L) if f"level{lv}_selection" in s["budget"]]
    return len(selected) * delta / L


@pytest.mark.parametrize("eps", [0.05, 20.0])
def test_budget_recount_is_exact(eps):
    r = _py(eps=eps)
    s = r.summary
    total = sum((Fraction(v) for v in s.budget.values()), Fraction(0))
    assert total <= Fraction(eps) and float(total) == s.epsilon_total
    assert s.delta == pytest.approx(_plan_delta(s.as_dict(), 1e-6), rel=1e-12) and 0 < s.delta <= 1e-6
    assert s.delta_selection == s.delta
    # selection pieces: 0.6 of ε, shares of the public plan; the clamp's histogram 0.05 of ε;
    # measurement pieces: the other 0.35 over the measured levels (count 0.4, sum 0.6 of it), each
    # rounded down by the exact sampler
    sel = sum(v for k, v in s.budget.items() if k.endswith("_selection"))
    assert sel <= 0.6 * eps and sel == pytest.approx(0.6 * eps, rel=1e-6)
    assert s.budget["clamp"] <= 0.05 * eps and s.budget["clamp"] == pytest.approx(0.05 * eps, rel=1e-6)
    measured = {k.split("_")[0] for k in s.budget if k.endswith("_count")}
    for lv in measured:
        assert s.budget[f"{lv}_count"] == pytest.approx(0.35 * 0.4 * eps / len(measured), rel=1e-6)
        assert s.budget[f"{lv}_sum"] == pytest.approx(0.35 * 0.6 * eps / len(measured), rel=1e-6)
    assert sum(lv["budget"] for lv in s.levels) + s.budget["clamp"] == pytest.approx(s.epsilon_total, rel=1e-12)


@pytest.mark.slow
def test_seeded_reproducibility_and_the_seed_matters(tmp_path, csv_path):
    for out in ("a", "b"):
        assert _run(tmp_path, csv_path, "--epsilon-total", "20", "--delta", "1e-6", "--seed", "4", "--no-map",
                    out=out) == 0
    a, b = ((tmp_path / o / "release.csv").read_bytes() for o in ("a", "b"))
    assert a == b
    assert (tmp_path / "a" / "summary.json").read_text() == (tmp_path / "b" / "summary.json").read_text()
    other = _py(seed=5).table
    assert not other["mean"].equals(pd.read_csv(tmp_path / "a" / "release.csv")["mean"])


#: summary fields that are public (options, plan, formatting) rather than functions of DP outputs
PUBLIC_SUMMARY = ("privacy_model", "k", "c", "bounds_rule", "split_rule", "partitions", "bound", "h3_resolution",
                  "slot", "noise", "granularity", "confidence", "seeded", "mechanism", "resolution", "method",
                  "target", "public", "delta", "delta_selection", "selection_threshold", "pooling", "rho_total")


@pytest.mark.slow
def test_neighbours_differ_only_in_dp_outputs():
    gone = DF["user_id"].iloc[0]
    ref, nb = _py(seed=7), _py(DF[DF.user_id != gone], seed=7)
    a, b = ref.summary.as_dict(), nb.summary.as_dict()
    assert a.keys() == b.keys()
    assert {k: a[k] for k in PUBLIC_SUMMARY} == {k: b[k] for k in PUBLIC_SUMMARY}
    # the levels and the selection pieces are the public plan; measurement pieces follow the DP selection
    assert [(lv["level"], lv["h3_resolution"], lv["slot"]) for lv in a["levels"]] == \
        [(lv["level"], lv["h3_resolution"], lv["slot"]) for lv in b["levels"]]
    assert {k: v for k, v in a["budget"].items() if k.endswith("_selection")} == \
        {k: v for k, v in b["budget"].items() if k.endswith("_selection")}
    assert list(ref.table.columns) == list(nb.table.columns) == MULTIRES_COLUMNS
    assert list(ref.answers.columns) == list(nb.answers.columns)
    # the test can fail: the outputs that are DP outputs do move
    assert not (ref.table["mean"].tolist() == nb.table["mean"].tolist()
                and ref.table["count_estimate"].tolist() == nb.table["count_estimate"].tolist())


def test_nothing_published_says_so(tmp_path, csv_path, capsys):
    code = _run(tmp_path, csv_path, "--epsilon-total", "0.01", "--delta", "1e-6", "--seed", "1")
    err = capsys.readouterr().err
    assert code == 0
    out = tmp_path / "out"
    s = json.loads((out / "summary.json").read_text())
    table = pd.read_csv(out / "release.csv")
    assert len(table) == 0 and list(table.columns) == MULTIRES_COLUMNS and s["grids_released"] == 0
    assert "publishes nothing worth reading" in s["outlook"] and "noisy users" in s["outlook"]
    # the hint: ε at which the lowest threshold falls to 20 users, from the public plan (threshold ∝ 1/ε)
    assert s["outlook_epsilon_needed"] > 0.01
    assert "warning: this release publishes nothing" in err and "Private selection released no node" in err
    assert "Outlook: nothing worth reading" in (out / "report.md").read_text()


@pytest.mark.parametrize(("extra", "word"), [
    (["--epsilon-total", "1"], "--delta"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--mechanism", "gaussian"], "--strategy 'fixed'"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--bounds", "select"], "--bounds"),
    (["--epsilon-total", "1", "--delta", "1e-6", "--coarsest-resolution", "3"], "--coarsest-resolution"),
])
def test_refusals_before_reading(tmp_path, capsys, extra, word):
    missing = tmp_path / "empty.csv"
    missing.write_text("user_id,latitude,longitude,timestamp,value\n")  # never read: refused first
    code = _run(tmp_path, missing, *extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and word in err[0], err
    assert not (tmp_path / "out").exists()


def test_fixed_keeps_the_flat_private_release():
    r = release(DF, bound=U, budget=Budget(epsilon_total=20.0, delta=1e-6),
                model=UserOptions(resolution="fixed", bounds=(2, 3)), noise=NoiseOptions(seed=3))
    assert r.summary.resolution == "fixed" and "noisy_count" in r.table.columns
    # a flat release's grid is answered by its own row
    assert (r.answers["node_cell"] == r.answers["cell"]).all() and (r.answers["node_slot"] == r.answers["slot"]).all()
    assert len(r.answers) == len(r.table)


@pytest.mark.slow
def test_front_door_publishes_the_library_release():
    """One implementation: the front door's table is the library's measure_private_multires +
    estimate_hierarchical (what tests/benchmarks/bench_multires.py scores), released rows only."""
    from dpopt.estimation.hierarchical import estimate_hierarchical
    from dpopt.privacy.contributions import contributions
    from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires

    r = _py(seed=9)
    from dpopt.records import SampleKey

    agg, _ = contributions(DF, bound=U, first_records=8, sample_key=SampleKey.from_seed(9))  # the release's key
    m = measure_private_multires(agg, epsilon=20.0, delta=1e-6, bound=U, noise=NoiseOptions(seed=9))
    t = estimate_hierarchical(m, confidence=0.95).table
    t = t[t["released"]]
    np.testing.assert_array_equal(r.table["mean"].to_numpy(), t["mean"].to_numpy())
    np.testing.assert_array_equal(r.table["mean_error_bound"].to_numpy(), t["mean_error_bound"].to_numpy())
    assert r.summary.budget == dict(m.spend.pieces)


def test_clamp_is_chosen_under_dp_and_recomputable():
    """The DP clamp (models/hierarchy.md §15): values mostly under 0.4·U give a clamp B < U, chosen from the published
    noisy clamp-vote histogram (recomputed here from summary.json's fields); the means are of values
    clamped at B and every variance says why it is withheld. With clamp_fraction = 0 the release
    measures on [0, U] and spends nothing on a clamp; a fraction outside [0, 1 − selection) is
    refused before any draw."""
    from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires
    from dpopt.privacy.user.place_bounds import choose_clamp

    low = DF.assign(value=np.minimum(DF["value"] * 0.4, U))
    r = _py(df=low, eps=20.0)
    s = r.summary
    assert s.clamp is not None and 0 < s.clamp < U and s.bound == U
    ch = s.clamp_histogram
    assert ch["clamps"] == [U * j / 16 for j in range(1, 17)]
    assert choose_clamp(np.array(ch["noisy_users"], float), s.budget["clamp"], U) == s.clamp
    t = r.table
    assert t["mean"].between(0, s.clamp).all()
    assert t["variance_withheld_reason"].str.contains("clamped").all()
    assert r.measurements.bound == s.clamp and r.measurements.centre == s.clamp / 2
    # no clamp: the previous measurement on [0, U]
    agg, _ = contributions(low, bound=U, keep_samples=True)
    m = measure_private_multires(agg, epsilon=20.0, delta=1e-6, clamp_fraction=0.0,
                                 noise=NoiseOptions("numpy", seed=1))
    assert m.bound == U and "clamp" not in m.spend.pieces and "clamp" not in m.info
    for bad in (-0.1, 0.4, float("nan")):
        with pytest.raises(ValueError, match="`clamp_fraction` must be in"):
            measure_private_multires(agg, epsilon=20.0, delta=1e-6, clamp_fraction=bad)


def test_a_budget_too_small_for_the_sampler_is_refused_before_any_draw(monkeypatch):
    """An ε whose smallest piece (here the count of a measured level, 0.35·0.4/3 of ε) is under the
    exact sampler's 2^-30 is refused on public facts before the clamp's or the selection's draw."""
    import dpopt.privacy.user.mechanism as mech_mod
    from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires

    draws = []
    real = mech_mod.DiscreteLaplace.integer
    monkeypatch.setattr(mech_mod.DiscreteLaplace, "integer",
                        lambda self, values, **k: draws.append(k["budget"]) or real(self, values, **k))
    agg, _ = contributions(DF, bound=U, keep_samples=True)
    with pytest.raises(ValueError, match="too small for the private multi-resolution release"):
        measure_private_multires(agg, epsilon=2.0**-30 / 0.048, delta=1e-6)
    assert draws == []
