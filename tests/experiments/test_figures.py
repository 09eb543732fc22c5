"""Every figure reproduces with small run counts; the papers' qualitative claims hold; numbers agree
with the notes (exact values, independent re-runs, the authors' result files) within MC error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import os

import pytest

from dpopt import DpoptInputError
from dpopt.experiments import COLUMNS, FIGURES, reproduce
from dpopt.experiments.outputs import write_outputs

AUSTIN = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "austin_bus" / \
    "capmetrics_vehicle_positions_clean.csv.gz"
#: relative tolerance against numbers from independent implementations (notes) at reduced runs
NOTES_RTOL = 0.06
#: relative tolerance against the authors' result files (003-fig1 at 4000 runs; their user order differs)
AUTHORS_RTOL = 0.12
#: relative tolerance for the synthetic scaling figure (200 runs over 2 redrawn datasets)
SCALING_RTOL = 0.2
#: Monte-Carlo checks: allowed deviation in standard errors
MC_SIGMAS = 5.0


SMALL = {"000-fig1": 200, "000-fig2": 200, "000-fig3": 200, "003-fig1": 4000, "003-fig2": 2000,
         "003-fig3": 200, "003-fig4": 200}


def _pivot(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.pivot(index="epsilon", columns="series", values="value")


@pytest.fixture(scope="module")
def small_results():
    out = {}
    for fig in FIGURES:
        runs = SMALL.get(fig, 2 if fig.startswith("002-fig") and fig not in ("002-fig1", "002-fig2") else None)
        kw = {}
        if fig == "003-fig5":
            kw = {"epsilons": [0.001, 0.003, 0.01, 0.05, 0.1, 0.2, 0.5, 0.98, 1.5]}
        if fig.startswith("000"):
            kw = {"epsilons": [0.1, 0.5, 1.0, 2.0]}
        if fig in ("003-fig3", "003-fig4"):
            kw = {"epsilons": [0.5, 2.0], "datasets": 2}
        if fig.startswith("002-fig") and fig not in ("002-fig1", "002-fig2"):
            kw = {"epsilons": [0.1, 0.3, 1.0]}
        out[fig] = reproduce(fig, runs=runs, seed=1, **kw)
    return out


def test_registry_has_every_figure():
    expected = [f"000-fig{i}" for i in (1, 2, 3)] + [f"002-fig{i}" for i in range(1, 9)] + \
        [f"003-fig{i}" for i in range(1, 6)]
    assert list(FIGURES) == expected


@pytest.mark.slow
def test_tables_are_tidy(small_results):
    for fig, res in small_results.items():
        f = res.frame
        assert list(f.columns) == COLUMNS, fig
        assert (f["figure"] == fig).all()
        assert np.isfinite(f["value"]).all() and (f["stderr"] >= 0).all()
        assert res.notes.strip()


def test_series_names_are_the_papers_method_names(small_results):
    for fig in ("000-fig2", "000-fig3"):
        assert set(small_results[fig].frame["series"]) == {"Laplace", "OPT-worst-case", "AKMV"}
    assert set(small_results["003-fig1"].frame["series"]) == {
        "AA-WrapAround", "AA-BestFit", "Levy-WrapAround", "Levy-BestFit", "Quantile-WrapAround", "Quantile-BestFit"}


def test_000_claims_opt_below_laplace_and_akmv(small_results):
    for fig in ("000-fig2", "000-fig3"):
        p = _pivot(small_results[fig].frame)
        below2 = p.index < 2
        assert (p.loc[below2, "OPT-worst-case"] < p.loc[below2, "Laplace"]).all()
        assert (p.loc[below2, "OPT-worst-case"] < p.loc[below2, "AKMV"]).all()
        # OPT-wc coincides with Laplace at ε = 2 (T = U m*) up to MC error
        assert p.loc[2.0, "OPT-worst-case"] == pytest.approx(p.loc[2.0, "Laplace"], rel=0.2)


def test_000_claim_akmv_similar_to_and_a_little_worse_than_laplace(small_results):
    # seeds 000/001 §IV: AKMV "quite similar to, and a little worse than" vanilla Laplace
    for fig in ("000-fig2", "000-fig3"):
        f = small_results[fig].frame.set_index(["series", "epsilon"])
        ak, lap = f.loc["AKMV"], f.loc["Laplace"]
        se = np.hypot(ak["stderr"], lap["stderr"])
        assert (ak["value"] > lap["value"] - MC_SIGMAS * se).all(), fig
        assert (ak["value"] < 1.5 * lap["value"]).all(), fig


@pytest.mark.parametrize("fig,expected", [
    # independent re-run of notes-001 §5.8 at ε = 0.5 (2000 iterations there, rounded to 0.1)
    ("000-fig2", {"OPT-worst-case": 4.6, "AKMV": 19.0, "Laplace": 18.6}),
    ("000-fig3", {"OPT-worst-case": 1.17, "AKMV": 12.5, "Laplace": 11.8}),
])
def test_000_average_case_numbers_of_the_notes(small_results, fig, expected):
    f = small_results[fig].frame.set_index(["series", "epsilon"])
    for series, value in expected.items():
        got = f.loc[(series, 0.5)]
        # our MC error plus that of the 2000-run reference (same relative size) and the rounding
        tol = MC_SIGMAS * got["stderr"] * np.sqrt(1 + small_results[fig].params["runs"] / 2000) + 0.05
        assert abs(got["value"] - value) < tol, (fig, series, got["value"], value)


def test_000_fig1_numbers(small_results):
    p = _pivot(small_results["000-fig1"].frame)
    # exact E^OPT (notes-001 §7 regression values)
    np.testing.assert_allclose(p["OPT-worst-case"].to_numpy(), [20.02232, 10.44643, 6.96429, 4.64286], atol=1e-4)
    # E_AKMV of an independent implementation (notes-001 §5.8): ≈99.9, 26.5, 16.1, 9.7
    np.testing.assert_allclose(p["AKMV"].to_numpy(), [99.9, 26.5, 16.1, 9.7], rtol=NOTES_RTOL)
    assert (p["OPT-worst-case"] < p["AKMV"]).all()


def test_000_laplace_average_error_is_analytic(small_results):
    # E|Lap(U m*/(n ε))| = 9.2857/ε (geometric) and 5.9091/ε (extreme); notes-001 §5.5
    for fig, c in (("000-fig2", 9.2857), ("000-fig3", 5.9091)):
        f = small_results[fig].frame
        lap = f[f["series"] == "Laplace"]
        dev = np.abs(lap["value"] - c / lap["epsilon"]) / lap["stderr"]
        assert (dev < 5).all()


def test_003_fig1_bestfit_beats_wraparound(small_results):
    p = _pivot(small_results["003-fig1"].frame)
    assert (p["Levy-BestFit"] < p["Levy-WrapAround"]).all()
    assert (p["Quantile-BestFit"] < p["Quantile-WrapAround"]).all()
    # AA similar under both groupings (within 10 %)
    np.testing.assert_allclose(p["AA-BestFit"], p["AA-WrapAround"], rtol=0.1)
    # the authors' result files (notes-003 §IV-B), ε = 0.5 -> 2: their runs use the alphabetical
    # user order and a WrapAround factor of 1, ours the paper's non-increasing order
    authors = {"AA-WrapAround": (1.19, 0.37), "AA-BestFit": (1.19, 0.41), "Levy-WrapAround": (2.55, 0.65),
               "Levy-BestFit": (1.23, 0.43), "Quantile-WrapAround": (3.97, 0.65),
               "Quantile-BestFit": (1.35, 0.48)}
    for series, (lo_eps, hi_eps) in authors.items():
        assert p.loc[0.5, series] == pytest.approx(lo_eps, rel=AUTHORS_RTOL), series
        assert p.loc[2.0, series] == pytest.approx(hi_eps, rel=AUTHORS_RTOL), series


def test_003_fig2_clipping_far_below_baseline(small_results):
    p = _pivot(small_results["003-fig2"].frame)
    np.testing.assert_allclose(p["Baseline"], 65 * 417 / 17166 / p.index.to_numpy())
    for s in ("AA-BestFit", "Levy-BestFit", "Quantile-BestFit", "EpsDependentQuantile-BestFit"):
        assert (p[s] < p["Baseline"]).all(), s


def test_003_fig3_numbers_of_the_authors(small_results):
    # sample scaling, repository MAE at ε = 0.5 and 2 (notes-003 §IV-C); synthetic data redrawn
    p = _pivot(small_results["003-fig3"].frame)
    for series, (lo_eps, hi_eps) in {"Levy-BestFit": (0.386, 0.095), "AA-BestFit": (1.157, 0.291),
                                     "Quantile-BestFit": (1.25, 0.276)}.items():
        assert p.loc[0.5, series] == pytest.approx(lo_eps, rel=SCALING_RTOL), series
        assert p.loc[2.0, series] == pytest.approx(hi_eps, rel=SCALING_RTOL), series


def test_003_scaling_claims(small_results):
    p3 = _pivot(small_results["003-fig3"].frame)
    assert (p3["Levy-BestFit"] < p3["AA-BestFit"]).all() and (p3["Levy-BestFit"] < p3["Quantile-BestFit"]).all()
    p4 = _pivot(small_results["003-fig4"].frame)
    assert (p4["Quantile-BestFit"] < p4["AA-BestFit"]).all() and (p4["AA-BestFit"] < p4["Levy-BestFit"]).all()


def test_003_fig5_staircase(small_results):
    f = small_results["003-fig5"].frame
    v = f["value"].to_numpy()
    assert np.all(np.diff(v) >= 0)
    got = dict(zip(f["epsilon"], v))
    # notes-003 §V (with (11) as written): 1 up to 0.00305, 78, 235, 265, 315, 342, 417 from 0.98
    assert got[0.001] == 1 and got[0.003] == 1
    for e, m in ((0.01, 78), (0.05, 235), (0.1, 265), (0.2, 315), (0.5, 342), (0.98, 417), (1.5, 417)):
        assert got[e] == m


def test_002_claims(small_results):
    for fig in ("002-fig3", "002-fig4", "002-fig5"):
        p = _pivot(small_results[fig].frame)
        assert (p["CLIP-USER (mean K*eps)"] <= p["Original (G*eps)"] + 1e-12).all()
        assert (p["CLIP-USER (mean K*eps)"] < p["Original (G*eps)"]).any()
    for fig in ("002-fig6", "002-fig7", "002-fig8"):
        p = _pivot(small_results[fig].frame)
        assert (p["Pseudo-user after CLIP-USER"] <= p["Original (BASELINE)"] * (1 + 1e-12)).all()
    p = _pivot(small_results["002-fig1"].frame)
    assert (p["CLIP-USER (K*eps)"] <= p["Original (G1*eps)"] + 1e-12).all()
    assert (p["CLIP-USER (K*eps)"] < p["Original (G1*eps)"]).any()
    p = _pivot(small_results["002-fig2"].frame)
    assert (p["Pseudo-user after CLIP-USER"] <= p["Original (BASELINE)"] * (1 + 1e-12)).all()


def test_002_claim_larger_gamma_helps_more(small_results):
    # seed 002 §VI-A2: for fixed q, a larger γ gives a larger improvement (Figs. 3–5 and 6–8)
    loss = [_pivot(small_results[f].frame)["CLIP-USER (mean K*eps)"] for f in ("002-fig3", "002-fig4", "002-fig5")]
    assert (loss[0] >= loss[1]).all() and (loss[1] >= loss[2]).all() and (loss[0] > loss[2]).any()
    gain = []
    for f in ("002-fig6", "002-fig7", "002-fig8"):
        p = _pivot(small_results[f].frame)
        gain.append(p["Original (BASELINE)"] / p["Pseudo-user after CLIP-USER"])
    assert (gain[0] < gain[1]).all() and (gain[1] < gain[2]).all()


def test_000_fig1_claim_both_curves_decrease(small_results):
    p = _pivot(small_results["000-fig1"].frame)
    assert (np.diff(p["OPT-worst-case"].to_numpy()) < 0).all()
    assert (np.diff(p["AKMV"].to_numpy()) < 0).all()


def test_003_fig2_claim_clipping_mechanisms_close_to_each_other(small_results):
    p = _pivot(small_results["003-fig2"].frame).drop(columns="Baseline")
    # "close to each other": within 25 % of one another at every ε, while Baseline is > 2x above
    assert (p.max(axis=1) / p.min(axis=1) < 1.25).all()


@pytest.mark.skipif(
    not AUSTIN.is_file() and not os.environ.get("CI"),
    reason="full Austin merge (../shared) not available; CI always runs this test",
)
@pytest.mark.slow
def test_002_fig1_on_the_full_austin_file():
    from dpopt.experiments.seed002 import austin_occupancy

    occ, info = austin_occupancy(AUSTIN)
    assert info["day"] == "2017-03-21" and info["grids"] == 50 and info["G1"] == 12
    res = reproduce("002-fig1", data=AUSTIN, epsilons=[0.1, 1.0])
    p = _pivot(res.frame)
    assert (p["CLIP-USER (K*eps)"] < p["Original (G1*eps)"]).all()


def test_seeded_runs_are_reproducible():
    a = reproduce("003-fig1", runs=50, seed=7, epsilons=[1.0]).frame
    b = reproduce("003-fig1", runs=50, seed=7, epsilons=[1.0]).frame
    pd.testing.assert_frame_equal(a, b)


def test_write_outputs(tmp_path, small_results):
    paths = write_outputs(small_results["003-fig5"], tmp_path)
    assert paths["png"].stat().st_size > 1000
    back = pd.read_csv(paths["csv"])
    assert list(back.columns) == COLUMNS
    assert "Choices and ambiguities" in paths["notes"].read_text()


def test_bad_input():
    with pytest.raises(DpoptInputError, match="`figure`"):
        reproduce("003-fig9")
    with pytest.raises(DpoptInputError, match="`runs`"):
        reproduce("003-fig1", runs=0)
    with pytest.raises(DpoptInputError, match="`epsilons`"):
        reproduce("000-fig2", runs=10, epsilons=[-1.0])
    with pytest.raises(DpoptInputError, match="`collection`"):
        reproduce("000-fig1", runs=10, collection="poisson")
    with pytest.raises(DpoptInputError, match="`data`"):
        reproduce("002-fig1", data="/nonexistent.csv")
