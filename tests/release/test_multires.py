"""The multi-resolution ``user`` release through the front doors (the contract outside checks rely
on): ``dpopt release RECORDS --privacy user --epsilon-total E --partitions
FINEST.csv --h3-resolution R --slot 1h`` runs it by default."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main

R = 7
CONTRACT = ["cell", "slot", "slot_end", "h3_resolution", "released", "mean", "mean_error_bound", "mean_direct",
            "mean_direct_error_bound", "variance", "variance_error_bound", "variance_released",
            "variance_withheld_reason", "method", "cell_lat", "cell_lng"]


def _records(tmp: Path) -> tuple[Path, Path]:
    """60 users over 7 res-7 cells (one hexagon ring) x 6 hours; the list: every grid with a record
    plus one empty listed grid in a far cell."""
    rng = np.random.default_rng(0)
    centre = h3.latlng_to_cell(30.27, -97.74, R)
    cells = sorted(h3.grid_disk(centre, 1))
    rows = []
    for u in range(60):
        for _ in range(int(rng.integers(3, 15))):
            cell = cells[int(rng.integers(len(cells)))] if u % 3 else cells[0]
            lat, lng = h3.cell_to_latlng(cell)
            hour = int(rng.integers(6))
            rows.append((f"u{u}", lat, lng, f"2024-03-01T{8 + hour:02d}:{int(rng.integers(60)):02d}:00Z",
                         float(np.clip(rng.normal(40 + 5 * (cell == cells[0]), 10), 0, 120))))
    df = pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])
    df.to_csv(tmp / "records.csv", index=False)
    grids = {(h3.latlng_to_cell(a, b, R), pd.Timestamp(t).floor("1h").strftime("%Y-%m-%dT%H:%M:%SZ"))
             for a, b, t in zip(df.latitude, df.longitude, df.timestamp)}
    grids.add((h3.latlng_to_cell(30.5, -97.5, R), "2024-03-01T09:00:00Z"))  # listed, no record
    pd.DataFrame(sorted(grids), columns=["cell", "slot"]).to_csv(tmp / "parts.csv", index=False)
    return tmp / "records.csv", tmp / "parts.csv"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("multires"))


def _run(capsys, records: Path, parts: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
                 "--partitions", str(parts), "--h3-resolution", str(R), "--slot", "1h", "--quiet", "--json",
                 "--out", str(out), *extra])
    o, e = capsys.readouterr()
    return code, o, e


def _check_contract(out: Path, parts: Path, epsilon: float) -> None:
    t = pd.read_csv(out / "release.csv", keep_default_na=False, na_values=[""])
    s = json.loads((out / "summary.json").read_text())
    assert list(t.columns[:len(CONTRACT)]) == CONTRACT or set(CONTRACT) <= set(t.columns)
    assert len(t) > 0 and t["released"].astype(str).eq("True").all()
    res = t["h3_resolution"].to_numpy()
    assert (res <= R).all() and all(h3.get_resolution(c) == r for c, r in zip(t["cell"], res))
    t0, t1 = pd.to_datetime(t["slot"], utc=True), pd.to_datetime(t["slot_end"], utc=True)
    assert (t1 > t0).all()
    # every listed finest grid is answered by exactly one published node containing it
    plist = pd.read_csv(parts)
    ans = pd.read_csv(out / "answers.csv")
    assert len(ans) == len(plist) and set(zip(ans.cell, ans.slot)) == set(zip(plist.cell, plist.slot))
    nodes = set(zip(t["cell"], t["slot"], t["slot_end"]))
    for row in ans.itertuples():
        assert (row.node_cell, row.node_slot, row.node_slot_end) in nodes
        assert h3.cell_to_parent(row.cell, int(row.node_h3_resolution)) == row.node_cell
        s0, e0 = pd.Timestamp(row.node_slot), pd.Timestamp(row.node_slot_end)
        assert s0 <= pd.Timestamp(row.slot) and pd.Timestamp(row.slot) + pd.Timedelta("1h") <= e0
        # the answer is the smallest published node containing the grid (what a reader would pick)
        containing = [n for n in nodes if h3.cell_to_parent(row.cell, h3.get_resolution(n[0])) == n[0]
                      and pd.Timestamp(n[1]) <= pd.Timestamp(row.slot) < pd.Timestamp(n[2])]
        smallest = min(containing, key=lambda n: (-h3.get_resolution(n[0]), pd.Timestamp(n[2]) - pd.Timestamp(n[1])))
        assert smallest == (row.node_cell, row.node_slot, row.node_slot_end)
    assert not ans.duplicated(["cell", "slot"]).any()
    # the budget recount: the pieces sum exactly to the total, within epsilon_total
    total = sum((Fraction(v) for v in s["budget"].values()), Fraction(0))
    assert total <= Fraction(epsilon) and float(total) == pytest.approx(s["epsilon_total"], abs=1e-12)
    assert s["resolution"] == "adaptive" and s["shape"] == "place" and s["method"] == "hierarchical"
    assert 0.5 <= s["confidence"] < 1 and s["bound"] == 120 and 60 <= s["clamp"] <= 120
    # the default with a list is the place release (models/hierarchy.md §14): k = 1 node, c = T records
    assert s["k"] == 1 and s["c"] in (1, 4, 16, 64, 256, 1024, 4096) and s["bounds_rule"].startswith("place")
    assert "bounds" in s["budget"]
    # T is post-processing of a published DP output: the rule applied to summary.json's noisy histogram
    from dpopt.privacy.user.place_bounds import CAP_SHARE, choose_cap, record_counts

    rh = s["record_histogram"]
    assert rh["upper_edges"] == [1, 4, 16, 64, 256, 1024, 4096] and len(rh["noisy_users"]) == 8
    eps_t = float(s["budget"]["bounds"]) * CAP_SHARE
    assert choose_cap(record_counts(np.array(rh["noisy_users"], float), eps_t))[0] == s["record_cap"]
    # and so is the map's cap T_map, from the published ε_T, noise constant and spread
    from dpopt.privacy.user.place_bounds import choose_map_cap

    assert rh["epsilon"] == pytest.approx(eps_t, rel=1e-6)
    assert choose_map_cap(np.array(rh["noisy_users"], float), rh["epsilon"], s["record_cap"], noise=rh["map_noise"],
                          spread=rh["map_spread"], candidates=np.array(rh["candidates"]))[0] == s["map_record_cap"]
    assert s["map_record_cap"] >= s["record_cap"]
    # so is B: the clamp rule applied to summary.json's noisy clamp-vote histogram at ε_B = ε_b − ε_T
    from dpopt.privacy.user.place_bounds import choose_clamp, clamp_quantile

    ch = s["clamp_histogram"]
    assert ch["clamps"] == [120 * j / 16 for j in range(1, 17)] and len(ch["noisy_users"]) == 16
    eps_b = float(s["budget"]["bounds"])
    q = clamp_quantile(record_counts(np.array(rh["noisy_users"], float), eps_t))
    assert choose_clamp(np.array(ch["noisy_users"], float), eps_b - eps_t, 120.0, quantile=q) == s["clamp"]
    lev_total = sum((Fraction(lv["budget"]) for lv in s["levels"]), Fraction(0))
    assert lev_total + Fraction(s["budget"]["bounds"]) == pytest.approx(total, abs=1e-12)
    assert s["levels"][0]["h3_resolution"] == R and s["levels"][0]["slot"] == "1h"
    # interval half-widths: finite, positive, at most the range
    assert ((t["mean_error_bound"] > 0) & (t["mean_error_bound"] <= 120)).all()
    assert ((t["mean"] >= 0) & (t["mean"] <= 120)).all()
    assert (out / "report.html").exists() and (out / "map.png").exists()
    html = (out / "report.html").read_text()
    assert "place release" in html and "chosen from the data under differential privacy" in html
    md = (out / "report.md").read_text()
    assert f"T = {s['record_cap']}" in md and f"B = {s['clamp']:g}" in md


@pytest.mark.slow
def test_the_contract_command_runs_the_engine_and_answers_every_grid_by_its_own_row(data, tmp_path, capsys):
    """`dpopt release RECORDS --privacy user --epsilon-total E --partitions FINEST.csv --h3-resolution R
    --slot S`: the optimised engine; answers.csv maps each listed grid to its own release.csv row."""
    records, parts = data
    code, out, err = _run(capsys, records, parts, tmp_path / "e", "--seed", "3")
    assert code == 0, err
    s = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert s["shape"] == "optimised marginals" and s["privacy_model"] == "user"
    listed = pd.read_csv(parts, dtype=str)
    ans = pd.read_csv(tmp_path / "e" / "answers.csv", dtype=str)
    t = pd.read_csv(tmp_path / "e" / "release.csv", dtype={"cell": str, "slot": str, "slot_end": str})
    assert len(ans) == len(listed) and (ans["node_cell"] == ans["cell"]).all() and (ans["node_slot"] == ans["slot"]).all()
    rows = ans.merge(t, left_on=["node_cell", "node_slot", "node_slot_end"], right_on=["cell", "slot", "slot_end"])
    assert len(rows) == len(ans)
    assert np.isfinite(rows["mean_error_bound"]).all() and (rows["mean_error_bound"] > 0).all()
    assert ((rows["mean"] >= 0) & (rows["mean"] <= 120)).all()
    total = sum((Fraction(v) for v in s["budget"].values()), Fraction(0))
    assert total <= 10
    _bounds_recompute_from_summary(s, 120.0)
    # the report states the engine's bound (T records per user over the listed grids), not (k, c)
    md = (tmp_path / "e" / "report.md").read_text()
    assert f"keeps at most **T = {s['record_cap']}** of its records in the listed grids" in md
    line = next(x for x in md.splitlines() if x.startswith("- contribution bounds"))
    assert "k = " not in line and "records per user and grid" not in line
    html = (tmp_path / "e" / "report.html").read_text()
    assert "optimised release (the engine)" in html and "k cells and c records per cell" not in html


def _bounds_recompute_from_summary(s: dict, U: float) -> None:
    """T, B (and the engine's A) are post-processing of the DP histograms summary.json publishes: the
    rules applied to the published noisy counts at the published ε give the published cap and clamps."""
    from dpopt.privacy.user.place_bounds import (CAP_SHARE, TWO_SIDED_CAP_SHARE, choose_cap, choose_clamp,
                                                 choose_low_clamp, clamp_quantile, record_counts)

    rh, ch, lh = s["record_histogram"], s["clamp_histogram"], s.get("clamp_low_histogram")
    eps_b = float(Fraction(s["budget"]["bounds"]))
    assert rh["epsilon"] == pytest.approx(eps_b * (CAP_SHARE if lh is None else TWO_SIDED_CAP_SHARE), rel=1e-12)
    assert rh["upper_edges"] == [1, 4, 16, 64, 256, 1024, 4096] and len(rh["noisy_users"]) == 8
    counts = record_counts(np.array(rh["noisy_users"], float), rh["epsilon"])
    T, factors = choose_cap(counts, candidates=np.array(rh["candidates"]))
    assert T == s["record_cap"] and len(rh["noise_factor"]) == len(rh["candidates"])
    assert ch["clamps"] == [U * j / 16 for j in range(16 - len(ch["noisy_users"]) + 1, 17)]
    eps_clamp = (eps_b - rh["epsilon"]) / (1.0 if lh is None else 2.0)
    eps_upper = eps_clamp
    if ch.get("unseen_first") is not None:  # the engine's clamp re-measured: the first showed nothing
        first = ch["unseen_first"]
        assert first["epsilon"] == pytest.approx(eps_clamp, rel=1e-12)
        assert choose_clamp(np.array(first["noisy_users"], float), first["epsilon"], U) == U
        eps_upper = float(Fraction(s["budget"]["bounds, clamp re-measured"]))
    if "epsilon" in ch:  # the ε the rule read (the budget's piece is it rounded down to the sampler's grid)
        assert ch["epsilon"] == pytest.approx(eps_upper, rel=1e-6)
        eps_upper = ch["epsilon"]
    B = choose_clamp(np.array(ch["noisy_users"], float), eps_upper, U, quantile=clamp_quantile(counts))
    assert B == s["clamp"]
    if lh is not None:  # the engine's lower clamp: the mirrored rule on its own histogram (ε_b/4)
        assert lh["clamps"] == [U - U * j / 16 for j in range(16 - len(lh["noisy_users"]) + 1, 17)]
        eps_low = lh.get("epsilon", eps_clamp)
        if lh.get("unseen_first") is not None:  # A measured again: the first showed nothing
            assert lh["unseen_first"]["epsilon"] == pytest.approx(eps_clamp, rel=1e-12)
            assert eps_low == pytest.approx(float(Fraction(s["budget"]["bounds, clamp re-measured"])), rel=1e-6)
        else:
            assert eps_low == pytest.approx(eps_clamp, rel=1e-12)
        low = choose_low_clamp(np.array(lh["noisy_users"], float), eps_low, U, B)
        assert low == s["clamp_low"] and 0.0 <= low < B


@pytest.mark.slow
def test_contract_command_on_synthetic_records(data, tmp_path, capsys):
    records, parts = data
    code, out, err = _run(capsys, records, parts, tmp_path / "a", "--seed", "3", "--strategy", "place")
    assert code == 0, err
    _check_contract(tmp_path / "a", parts, 10.0)
    payload = json.loads(out)
    assert payload["resolution"] == "adaptive" and payload["grids_released"] == len(
        pd.read_csv(tmp_path / "a" / "release.csv"))


@pytest.mark.slow
def test_seeded_runs_reproduce_and_bounds_can_be_given(data, tmp_path, capsys):
    records, parts = data
    texts = []
    for name in ("a", "b"):
        code, _, err = _run(capsys, records, parts, tmp_path / name, "--seed", "5", "--strategy", "adaptive", "--bounds", "3,4")
        assert code == 0, err
        texts.append(((tmp_path / name / "release.csv").read_text(), (tmp_path / name / "answers.csv").read_text()))
    assert texts[0] == texts[1]
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (s["k"], s["c"], s["bounds_rule"]) == (3, 4, "fixed") and "bounds" not in s["budget"]
    total = sum((Fraction(v) for v in s["budget"].values()), Fraction(0))
    assert total <= 10


@pytest.mark.slow
def test_contract_on_the_embedded_austin_day(tmp_path, capsys):
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import austin_sample_path, contributions

    agg, _ = contributions(austin_sample_path(), bound=120)
    parts = tmp_path / "parts.csv"
    pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)}).to_csv(parts, index=False)
    code, _, err = _run(capsys, Path(austin_sample_path()), parts, tmp_path / "o", "--seed", "1", "--strategy", "place")
    assert code == 0, err
    _check_contract(tmp_path / "o", parts, 10.0)


@pytest.mark.slow
def test_fixed_shape_is_the_flat_release(data, tmp_path, capsys):
    """--resolution fixed: one row per listed grid at R, the flat columns, no answers.csv; the same
    as the Python door's UserOptions(resolution='fixed')."""
    from dpopt.privacy.options import Budget, GridOptions, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.release import release

    records, parts = data
    code, _, err = _run(capsys, records, parts, tmp_path / "f", "--seed", "3", "--resolution", "fixed",
                        "--bounds", "2,3")
    assert code == 0, err
    t = pd.read_csv(tmp_path / "f" / "release.csv")
    assert len(t) == len(pd.read_csv(parts)) and "noisy_count" in t.columns
    # one schema: a flat row is a node of one slot, answering its own grid
    assert (pd.to_datetime(t["slot_end"]) - pd.to_datetime(t["slot"]) == pd.Timedelta("1h")).all()
    a = pd.read_csv(tmp_path / "f" / "answers.csv")
    assert (a["node_cell"] == a["cell"]).all() and (a["node_slot"] == a["slot"]).all() and len(a) == len(t)
    r = release(str(records), bound=120, budget=Budget(epsilon_total=10.0),
                model=UserOptions(partitions=str(parts), bounds=(2, 3), resolution="fixed"),
                grid=GridOptions(R, "1h"), noise=NoiseOptions(seed=3))
    assert r.summary.resolution == "fixed"
    np.testing.assert_allclose(r.table["mean"].to_numpy(), t["mean"].to_numpy(), rtol=1e-9)  # csv: %.10g


@pytest.mark.parametrize("extra, flag", [
    (("--resolution", "bogus"), "--resolution"),
    (("--coarsest-resolution", "9"), "--coarsest-resolution"),
    (("--bounds", "nope"), "--bounds"),
    # the default engine chooses its own bounds: another rule is refused, not run as another strategy
    (("--bounds", "4,8"), "--bounds` = (4, 8) is an option of --strategy 'adaptive' or 'fixed'"),
    (("--bounds", "quantile", "--strategy", "place"), "--strategy 'place' chooses its record cap"),
    (("--resolution", "fixed", "--coarsest-resolution", "4"), "--coarsest-resolution"),
])
def test_bad_values_are_one_line_errors(data, tmp_path, capsys, extra, flag):
    records, parts = data
    code, out, err = _run(capsys, records, parts, tmp_path / "x", *extra)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "error" in lines[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("shape", ["adaptive", "fixed"])
@pytest.mark.slow
def test_nothing_useful_says_so(data, tmp_path, capsys, shape):
    """A tiny epsilon publishes nothing better than the range: one stderr line and
    the summary's outlook say so, with an epsilon that would do."""
    records, parts = data
    code = main(["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "0.01",
                 "--partitions", str(parts), "--resolution", shape, "--seed", "2", "--quiet", "--json",
                 "--out", str(tmp_path / "t")])
    _, err = capsys.readouterr()
    assert code == 0
    warn = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "nothing worth reading" in warn[0] and "epsilon" in warn[0]
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["outlook"] and s["outlook_epsilon_needed"] is not None and s["outlook_epsilon_needed"] > 0.01
    assert "nothing worth reading" in (tmp_path / "t" / "report.md").read_text()


@pytest.mark.slow
def test_useful_release_has_no_outlook(data, tmp_path, capsys):
    records, parts = data
    code, _, err = _run(capsys, records, parts, tmp_path / "u", "--seed", "3", "--epsilon-total", "50")
    assert code == 0 and "warning" not in err
    assert json.loads((tmp_path / "u" / "summary.json").read_text())["outlook"] == ""


def test_python_door_gaussian_spend_recounts(data):
    """The Python door, Gaussian noise: the summary's rho is the exact recount of its pieces
    (bounds as epsilon^2/2) and within the budget."""
    from dpopt.accounting import rho_from_epsilon
    from dpopt.privacy.options import Budget, GridOptions, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.release import release

    records, parts = data
    r = release(str(records), bound=120, budget=Budget(epsilon_total=5.0, delta=1e-6, mechanism="gaussian"),
                model=UserOptions(partitions=str(parts), strategy="adaptive"), grid=GridOptions(R, "1h"),
                noise=NoiseOptions(seed=1))
    s = r.summary
    assert s.resolution == "adaptive" and s.mechanism == "gaussian"
    pieces = dict(s.budget)
    eps_b = Fraction(pieces.pop("bounds_epsilon"))
    rho = sum((Fraction(v) for v in pieces.values()), Fraction(0)) + eps_b**2 / 2
    assert float(rho) == s.rho_total and rho <= Fraction(rho_from_epsilon(5.0, 1e-6))
    assert s.epsilon_total <= 5.0


@pytest.mark.slow
def test_report_html_says_nothing_useful(data, tmp_path, capsys):
    records, parts = data
    main(["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "0.01",
          "--partitions", str(parts), "--seed", "2", "--quiet", "--out", str(tmp_path / "t")])
    capsys.readouterr()
    assert "Nothing worth reading:</b> this release publishes nothing" in (tmp_path / "t" / "report.html").read_text()


@pytest.mark.slow
def test_console_summary_names_the_unit_and_the_report(data, tmp_path, capsys):
    """Without --json the CLI prints the people's summary: the unit from --unit, no
    field that does not apply ("None"), and where report.html is; summary.json carries the unit."""
    records, parts = data
    code = main(["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
                 "--partitions", str(parts), "--quiet", "--unit", "km/h", "--out", str(tmp_path / "o")])
    out, _err = capsys.readouterr()
    assert code == 0
    assert "km/h" in out and "None" not in out
    assert f"open {tmp_path / 'o' / 'report.html'}" in out or "report.html in a browser" in out
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["unit"] == "km/h"
    assert "km/h" in (tmp_path / "o" / "report.html").read_text()


def test_no_interval_is_wider_than_the_declared_range(data, tmp_path, capsys):
    """At a small budget, half-widths stop where [mean ± h] holds the whole range [0, U] (every truth
    lies in it); wider would say nothing more. Without the cap this seed's widest row is 23 beyond."""
    records, parts = data
    code, _, err = _run(capsys, records, parts, tmp_path / "w", "--seed", "3", "--epsilon-total", "0.5")
    assert code == 0, err
    t = pd.read_csv(tmp_path / "w" / "release.csv")
    reach = np.maximum(t["mean"], 120.0 - t["mean"])
    assert (t["mean_error_bound"] <= reach + 1e-9).all()
    assert np.isclose(t["mean_error_bound"], reach).any()
