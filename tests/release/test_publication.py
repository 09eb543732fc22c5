"""What a release publishes: no value-dependent counts or timings, diagnostics in
their own folder, budgets that never exceed ε when read back, atomic writes, the privacy model."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.release import NoiseOptions, PerGridBudget, PublicOccupancyOptions, load_austin_sample, release, write_release
from dpopt.writers import public_occupancy as report_module
from dpopt.writers import report_md
from dpopt.writers import figures as figures_module
from dpopt.writers.geo import GEO_FILES
from dpopt.release.noise import epsilon_rational

PUBLISHED = {"release.csv", "answers.csv", "summary.json", "map.png", "report.md", "report.html", *GEO_FILES}


def _neighbours(tiny_records: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One user's value 100 vs 130 with U = 120: same occupancy, 0 vs 1 clipped value."""
    lo = tiny_records.copy()
    lo.loc[0, "value"] = 100.0
    hi = tiny_records.copy()
    hi.loc[0, "value"] = 130.0
    return lo, hi


def test_neighbours_publish_identical_summary_and_counts(tmp_path, tiny_records):
    """Neighbours (one value 100 vs 130 at U = 120) publish identical summary.json: no value-dependent count
    such as `ingest.clipped`."""
    lo, hi = _neighbours(tiny_records)
    texts = []
    for name, df in (("lo", lo), ("hi", hi)):
        r = release(df, bound=120, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                    noise=NoiseOptions(seed=4))
        paths = write_release(r, tmp_path / name, make_map=False)
        texts.append((paths["summary"].read_text(), paths["report"].read_text()))
        summary = json.loads(texts[-1][0])
        assert "timings" not in summary
        assert "clipped" not in summary["ingest"] and "out_of_range" not in summary["ingest"]
        assert summary["privacy_model"] == "public-occupancy"
        diag = json.loads((tmp_path / f"{name}.diagnostics" / "diagnostics.json").read_text())
        assert diag["ingest"]["clipped"] == (name == "hi") and "timings" in diag
    assert texts[0][0] == texts[1][0]  # seeded: the same draws; nothing value-dependent left
    # report.md differs only in the released (noisy) numbers of the largest-grids table
    strip = [re.sub(r"\n\|[^\n]*", "", t[1]) for t in texts]
    assert strip[0] == strip[1]
    assert "Timings" not in texts[0][1]


def test_cli_neighbours_print_identical_json(tmp_path, capsys, tiny_records):
    """`dpopt release --json` prints the same for neighbours: no `clipped_values`."""
    outs = []
    for name, df in zip(("lo", "hi"), _neighbours(tiny_records)):
        path = tmp_path / f"{name}.csv"
        df.to_csv(path, index=False)
        code = main(["release", str(path), "--privacy", "public-occupancy", "--bound", "120", "--epsilon", "1", "--seed", "2", "--quiet",
                     "--no-map", "--json", "--out", str(tmp_path / "out")])
        out, err = capsys.readouterr()
        assert code == 0, err
        payload = json.loads(out)
        assert "clipped_values" not in payload
        payload.pop("out")
        outs.append(payload)
        for p in (tmp_path / "out").rglob("*"):
            if p.is_file():
                p.unlink()
        for p in sorted((tmp_path / "out").rglob("*"), reverse=True):
            p.rmdir()
        (tmp_path / "out").rmdir()
    assert outs[0] == outs[1]


@pytest.mark.slow
def test_diagnostics_folder_and_kept_pairs_recount_K(tmp_path):
    frame = load_austin_sample()
    r = release(frame, bound=120, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                noise=NoiseOptions(seed=1))
    paths = write_release(r, tmp_path / "out")
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == PUBLISHED
    assert paths["suppressed"] == tmp_path / "out.diagnostics" / "suppressed.csv"
    assert {p.name for p in (tmp_path / "out.diagnostics").iterdir()} >= {"suppressed.csv", "kept_pairs.csv",
                                                                          "diagnostics.json"}
    kept = pd.read_csv(paths["kept_pairs"], dtype={"user": str})
    assert list(kept.columns) == ["user", "cell", "slot", "records_kept"]
    # K recounted from kept_pairs.csv alone: the grids each user keeps
    assert kept.groupby("user").size().max() == r.summary.degradation
    # the kept and suppressed pairs together are the occupancy read from the raw records
    sup = pd.read_csv(paths["suppressed"], dtype={"user": str})
    assert kept["records_kept"].sum() + sup["records"].sum() == len(frame)
    assert len(kept) + len(sup) == r.summary.pairs


@pytest.mark.parametrize("noise", ["discrete", "numpy"])
@pytest.mark.parametrize("epsilon", [1.0, 0.3, 7.1])
@pytest.mark.slow
def test_budgets_read_back_never_exceed_epsilon(tmp_path, noise, epsilon):
    """With split="optimal", ε_mean + ε_variance read back from release.csv never exceed ε (a float
    read-back once gave 1.00000000005)."""
    frame = load_austin_sample().head(20000)
    r = release(frame, bound=120, budget=PerGridBudget(epsilon), model=PublicOccupancyOptions(split="optimal"),
                noise=NoiseOptions(noise, seed=3))
    paths = write_release(r, tmp_path / "out", make_map=False)
    raw = pd.read_csv(paths["release"], dtype={"epsilon_mean": str, "epsilon_variance": str})
    rel = raw[raw["released"]]
    sums_float = rel["epsilon_mean"].astype(float) + rel["epsilon_variance"].astype(float)
    assert np.all(sums_float <= epsilon)
    sums_exact = [Decimal(a) + Decimal(b) for a, b in zip(rel["epsilon_mean"], rel["epsilon_variance"])]
    assert max(sums_exact) <= Decimal(epsilon)
    if noise == "discrete":  # the exact budgets the sampler spent (multiples of 2^-30)
        ok = r.table["released"].to_numpy()
        for col in ("epsilon_mean", "epsilon_variance"):
            used = [epsilon_rational(e) if e > 0 else Fraction(0) for e in r.table[col][ok]]
            assert [Fraction(Decimal(x)) for x in rel[col]] == used
    else:  # rounded down, at most 1e-11 relative
        for col in ("epsilon_mean", "epsilon_variance"):
            written = rel[col].astype(float).to_numpy()
            want = r.table.loc[r.table["released"], col].to_numpy()
            assert np.all(written <= want) and np.allclose(written, want, rtol=1e-11, atol=0)


def test_published_budgets_floor_and_cap():
    # a float split whose sum exceeds ε by an ulp (0.1 + 0.9 style) is capped and rounded down
    a, b = 0.1, np.nextafter(0.9, 2.0)
    assert Fraction(a) + Fraction(b) > 1
    mu, var = report_module.published_budgets([a], [b], 1.0, discrete=False)
    assert Decimal(mu[0]) + Decimal(var[0]) <= 1 and float(mu[0]) + float(var[0]) <= 1.0
    mu, var = report_module.published_budgets([np.nan, 0.0], [np.nan, 1.0], 1.0, discrete=True)
    assert mu == ["", "0"] and var == ["", "1"]


def test_failure_while_writing_map_leaves_nothing(tmp_path, tiny_records, monkeypatch):
    """A failure in map.png leaves nothing behind (no release.csv, suppressed.csv or summary.json)."""
    r = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=1))

    def boom(*a, **k):
        raise RuntimeError("plot failed")

    monkeypatch.setattr(figures_module, "write_figures", boom)  # map.png and frontier.png
    with pytest.raises(RuntimeError, match="plot failed"):
        write_release(r, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_non_empty_out_refused_unless_overwrite(tmp_path, tiny_records, monkeypatch):
    r = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=1))
    out = tmp_path / "out"
    write_release(r, out, make_map=False)
    first = (out / "release.csv").read_text()
    with pytest.raises(DpoptInputError, match=r"`out` must be an empty or new folder.*overwrite"):
        write_release(r, out, make_map=False)
    # a failing overwrite leaves the previous complete release untouched, and no temporary folder
    monkeypatch.setattr(report_md, "report_markdown", lambda result: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write_release(r, out, make_map=False, overwrite=True)
    assert (out / "release.csv").read_text() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.diagnostics"]
    monkeypatch.undo()
    r2 = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                 noise=NoiseOptions(seed=2))
    write_release(r2, out, make_map=False, overwrite=True)
    assert (out / "release.csv").read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.diagnostics"]
    # an empty existing folder is fine
    (tmp_path / "empty").mkdir()
    write_release(r, tmp_path / "empty", make_map=False)


def test_cli_refuses_non_empty_out_before_reading(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "old.txt").write_text("x")
    code = main(["release", str(tmp_path / "missing-but-irrelevant.csv"), "--privacy", "public-occupancy", "--bound", "1", "--epsilon", "1",
                 "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2  # not found is reported first; with --example the out check
    code = main(["release", "--example", "--privacy", "public-occupancy", "--epsilon", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "not empty" in err and err.count("\n") == 1


def test_privacy_model_where_the_user_meets_it(tmp_path, tiny_records, capsys):
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    help_text = capsys.readouterr().out
    assert "public-occupancy" in help_text and "payments" in help_text
    r = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=1))
    md = report_md.report_markdown(r)
    assert "## Privacy model" in md and "public-occupancy" in md and "payments" in md
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "public-occupancy" in readme


def test_no_published_file_holds_an_infinity(tmp_path):
    """An infinite bound means "none" (a node with no direct measurement, a bound nothing limits): the
    published files write it as missing — release.csv empty, release.parquet null, as the GeoJSON's
    null — never the token ``inf``, which a CSV reader takes for a number. The engine's table itself
    has no direct bound where no direct measurement was made."""
    from dpopt.writers.release_folder import _without_infinities

    table = pd.DataFrame({"a": [1.0, np.inf, -np.inf, np.nan], "b": ["x", "inf", "y", "z"], "c": [1, 2, 3, 4]})
    out = _without_infinities(table)
    assert out["a"].isna().tolist() == [False, True, True, True] and out["a"][0] == 1.0
    assert out["b"].tolist() == table["b"].tolist() and out["c"].tolist() == table["c"].tolist()
    assert np.isinf(table["a"]).sum() == 2  # the caller's table is not changed
    code = main(["release", "--example", "--seed", "3", "--quiet", "--no-map", "--out", str(tmp_path / "o")])
    assert code == 0
    text = (tmp_path / "o" / "release.csv").read_text()
    assert not re.search(r"(^|,)-?inf(,|$)", text, flags=re.M | re.I)
    rel = pd.read_csv(tmp_path / "o" / "release.csv")
    assert rel["mean_direct_error_bound"].isna().eq(rel["mean_direct"].isna()).all()
    par = pd.read_parquet(tmp_path / "o" / "release.parquet")
    assert not any(np.isinf(par[c]).any() for c in par.columns if par[c].dtype.kind == "f")
