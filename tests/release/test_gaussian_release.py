"""Gaussian (ρ-zCDP) releases under privacy="public-occupancy": budgets given as ``rho`` or as
``epsilon_total`` with ``delta``; the spend recounted from the published files, the (ε, δ) claim
checked against the classic conversion, the noise actually drawn against the reported scale."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from ._spend import exact, user_spend

from dpopt import DpoptInputError
from dpopt.accounting import zcdp_epsilon
from dpopt.cli import main
from dpopt.release import (Budget, EstimationOptions, NoiseOptions, PublicOccupancyOptions, austin_sample_path,
                           contributions, release, release_aggregate, write_release)

from .test_total_budget import small_records

U = 120.0
BUDGETS = {"rho": {"rho": 0.5}, "epsilon_delta": {"epsilon_total": 10.0, "delta": 1e-6}}




@pytest.fixture(scope="module", params=[(b, p) for b in BUDGETS for p in ("baseline", "greedy", "budget")],
                ids=lambda bp: f"{bp[0]}-{bp[1]}")
def written(request, tmp_path_factory):
    budget, plan = request.param
    res = release(austin_sample_path(), bound=U, budget=Budget(mechanism="gaussian", **BUDGETS[budget]),
                  model=PublicOccupancyOptions(plan=plan, time_limit=2), noise=NoiseOptions(seed=11))
    out = tmp_path_factory.mktemp("gauss") / "out"
    write_release(res, out, make_map=False)
    text = pd.read_csv(out / "release.csv", dtype=str, keep_default_na=False)
    summary = json.loads((out / "summary.json").read_text())
    kept = pd.read_csv(out.with_name(out.name + ".diagnostics") / "kept_pairs.csv", dtype={"user": str})
    return budget, res, text, summary, kept


@pytest.mark.slow
def test_table_has_rho_columns_not_epsilon_columns(written):
    _, res, text, _, _ = written
    for t in (res.table, text):
        assert {"rho", "rho_mean", "rho_variance"} <= set(t.columns)
        assert not {"epsilon", "epsilon_mean", "epsilon_variance"} & set(t.columns)
    on = text["released"] == "True"
    assert on.any()
    assert (text.loc[on, "rho"] != "").all() and (text.loc[~on, "rho"] == "").all()
    for g in np.flatnonzero(on.to_numpy()):  # the grid's ρ is the exact sum of its published shares
        assert exact(text.loc[g, "rho_mean"]) + exact(text.loc[g, "rho_variance"]) == exact(text.loc[g, "rho"])


def test_rho_spend_recounted_and_epsilon_implied(written):
    budget, res, text, summary, kept = written
    spend = user_spend(text, kept, "rho")
    worst = max(spend.values())
    assert summary["mechanism"] == "gaussian" and summary["budget_mode"] == "total"
    assert Fraction(summary["rho_total"]) == worst  # the exact largest spend
    if budget == "rho":
        assert worst <= Fraction(BUDGETS["rho"]["rho"])
        assert summary["delta"] is None and summary["epsilon_total"] is None
        return
    delta, eps = BUDGETS[budget]["delta"], BUDGETS[budget]["epsilon_total"]
    assert summary["delta"] == delta
    assert summary["epsilon_total"] == pytest.approx(zcdp_epsilon(summary["rho_total"], delta), rel=1e-12)
    assert summary["epsilon_total"] <= eps
    # the tight conversion is never looser than the classic ε = ρ + 2√(ρ ln(1/δ)) (Bun–Steinke 2016 Prop. 1.3)
    rho = summary["rho_total"]
    assert summary["epsilon_total"] <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
    # and spends most of what was allowed (ρ is the largest the conversion permits)
    assert summary["epsilon_total"] > 0.99 * eps


def test_noise_label_says_discrete_gaussian(written):
    _, _, _, summary, _ = written
    assert "discrete gaussian" in summary["noise"].lower()


@pytest.mark.parametrize("plan", ["greedy", "milp"])
def test_optimal_split_refused_for_the_seed_planners(tiny_records, plan):
    with pytest.raises(DpoptInputError, match="`split`"):
        release(tiny_records, bound=100.0, budget=Budget(rho=1.0, mechanism="gaussian"),
                model=PublicOccupancyOptions(plan=plan, split="optimal"))


@pytest.mark.slow
def test_empirical_noise_matches_the_reported_scale():
    """Over many seeded numpy-sampler releases, std(mean_raw − kept mean) ≈ mean_noise_scale (σ)."""
    records = small_records(np.random.default_rng(3))
    agg, ingest = contributions(records, bound=100.0)
    truth = records.assign(value=records["value"].clip(0, 100.0))
    runs = [release_aggregate(agg, Budget(rho=0.02, mechanism="gaussian"), PublicOccupancyOptions(plan="baseline"),
                              noise=NoiseOptions("numpy", seed=s), ingest=ingest)
            for s in range(400)]
    cells, slots = agg.grid_labels()
    import h3

    lab = truth.assign(cell=[h3.latlng_to_cell(a, b, 7) for a, b in zip(truth["latitude"], truth["longitude"])],
                       slot=pd.to_datetime(truth["timestamp"], utc=True).dt.floor("1h")
                       .dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    means = lab.groupby(["cell", "slot"])["value"].mean()
    exact = np.asarray([means[(c, s)] for c, s in zip(cells, slots)])
    errs = np.stack([r.table["mean_raw"].to_numpy() - exact for r in runs])
    scale = runs[0].table["mean_noise_scale"].to_numpy()
    assert np.all(scale > 0) and all(np.array_equal(r.table["mean_noise_scale"].to_numpy(), scale) for r in runs)
    # 400 draws: the sample std is within ±15 % of σ with overwhelming probability (rel. s.e. ≈ 3.5 %)
    np.testing.assert_allclose(errs.std(axis=0, ddof=1), scale, rtol=0.15)
    np.testing.assert_allclose(errs.mean(axis=0), 0.0, atol=4 * scale.max() / math.sqrt(400))
    # the 95 % noise bound: the normal quantile at the drawn σ (no output grid with numpy), and it covers
    from scipy.stats import norm

    bound = runs[0].table["mean_error_bound"].to_numpy()
    np.testing.assert_allclose(bound, scale * norm.ppf(0.975), rtol=1e-12)
    rate = float((np.abs(errs) <= bound).mean())
    assert rate >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / errs.size), rate


def test_seed_planners_spend_rho_as_b_over_k(written):
    """baseline/greedy: K recounted from kept_pairs.csv, every released grid's ρ is b = ⌊ρ·2^30/K⌋/2^30
    up to the shares' rounding down to 2^-30."""
    budget, res, text, summary, kept = written
    on = {(c, s) for c, s, r in zip(text["cell"], text["slot"], text["released"]) if r == "True"}
    K = int(kept[[(c, s) in on for c, s in zip(kept["cell"], kept["slot"])]].groupby("user").size().max())
    assert summary["degradation"] == K
    if res.plan.method.startswith("budget"):
        return  # non-uniform budgets: covered by the exact recount of every user's spend
    from dpopt.accounting import rho_from_epsilon

    rho = BUDGETS[budget].get("rho") or rho_from_epsilon(BUDGETS[budget]["epsilon_total"], BUDGETS[budget]["delta"])
    unit = Fraction(1, 2**30)
    b = Fraction(math.floor(Fraction(rho) * 2**30 / K), 2**30)
    assert K * b <= Fraction(rho) < K * (b + unit)
    rel = text[text["released"] == "True"]
    for m, v in zip(rel["rho_mean"], rel["rho_variance"]):
        assert b - 2 * unit <= exact(m) + exact(v) <= b


@pytest.mark.slow
def test_cli_gaussian_example(tmp_path, capsys):
    out = tmp_path / "g"
    code = main(["release", "--example", "--privacy", "public-occupancy", "--mechanism", "gaussian", "--epsilon-total", "10", "--delta", "1e-6",
                 "--quiet", "--json", "--no-map", "--time-limit", "5", "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(stdout)["mechanism"] == "gaussian"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mechanism"] == "gaussian" and summary["delta"] == 1e-6
    assert 0 < summary["rho_total"] and summary["epsilon_total"] <= 10.0
    assert summary["epsilon_total"] == pytest.approx(zcdp_epsilon(summary["rho_total"], 1e-6), rel=1e-12)
    table = pd.read_csv(out / "release.csv")
    assert "rho" in table.columns and "epsilon" not in table.columns


@pytest.mark.parametrize("rho", [2000.0, 8000.0, 30000.0])
def test_noise_bound_of_the_discrete_gaussian_holds_exactly(tiny_records, rho):
    """The `noise` bound B of the exact sampler: released = round(f/λ)·λ + λ·Z with Z discrete
    Gaussian on ℤ, P[Z = z] ∝ exp(−z²/(2s²)), s = noise_scale/λ (CKS 2020), so the error exceeds B
    with probability at most P(|Z| > (B − λ/2)/λ), summed here from the pmf; it must be ≤ 1 − q.
    A coarse output grid (λ = 1) makes the discreteness visible."""
    q = 0.8
    res = release(tiny_records, bound=100.0, budget=Budget(rho=rho, mechanism="gaussian"),
                  model=PublicOccupancyOptions(plan="baseline"), estimation=EstimationOptions(confidence=q),
                  noise=NoiseOptions(seed=1, granularity_bits=0))
    lam = res.summary.granularity
    assert lam == 1.0
    t = res.table[res.table["released"]]
    z = np.arange(-2000, 2001)
    for stat in ("mean", "variance"):
        for scale, bound in zip(t[f"{stat}_noise_scale"], t[f"{stat}_error_bound"]):
            s, x = scale / lam, (bound - lam / 2) / lam
            w = np.exp(-(z / s) ** 2 / 2)
            miss = w[np.abs(z) > x].sum() / w.sum()
            assert miss <= 1 - q + 1e-12, (stat, s, x, miss)
