"""``public-occupancy`` estimation reads Measurements only.

A :class:`~dpopt.measurements.Measurements` is built by hand — made-up noisy CLIP means and
variances, their noise laws, the public columns, nothing else (no plan, no records, no bounds of the
model) — and :func:`dpopt.estimation.estimate` must give the closed-form estimates and bounds of
models/release.md ("Error-bound columns"), computed here from the formulas with the standard
library (``statistics.NormalDist``, ``math.log``), not with dpopt's code:

* mean = clip(μ̃, 0, U), variance = clip(Ṽ, 0, U²/4) (post-processing);
* ``noise`` bound: Laplace b·ln(1/(1 − q)) (+ λ for the discrete law), Gaussian σ·Φ⁻¹((1 + q)/2)
  (+ 1.5λ); ``worst_case``: plus the clipping bias U(1 − R/N) of the mean (seed 002 Thm IV.1) and
  U²k(N − k)/N², k = min(N − R, ⌊N/2⌋) of the variance (Thm IV.2, ERRATA E1);
* seed 002's E_g (eq. (11)-(13)): biases + Δ_μ/ε_μ + Δ_Var/ε_Var (Laplace), biases +
  √(2/π)(Δ_μ/√(2ρ_μ) + Δ_Var/√(2ρ_Var)) (Gaussian); ∞ on a grid not released.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from dpopt.estimation import estimate
from dpopt.measurements import BudgetSpend, Measurements, NoiseLaw, Statistic

U = 10.0
N = np.array([40.0, 7.0, 12.0])  # records per grid (public)
R = np.array([30.0, 7.0, 3.0])  # records kept by the plan (public)
MU = np.array([4.25, 11.5, -0.75])  # noisy CLIP means (the third grid is not released: NaN below)
VAR = np.array([3.5, -1.25, 30.0])
SCALE_MU = np.array([0.5, 2.0, 0.0])
SCALE_VAR = np.array([1.5, 6.0, 0.0])
D_MU, D_VAR = np.array([0.8, 3.0, np.nan]), np.array([2.4, 9.0, np.nan])
B_MU, B_VAR = np.array([0.4, 0.25, np.nan]), np.array([0.6, 0.75, np.nan])
NOISE_ABS = np.array([2.25, 8.5, np.inf])
RELEASED = np.array([True, True, False])


def _mean_bias(n: float, r: float, u: float = U) -> float:
    return u * (1 - r / n)  # seed 002 Thm IV.1


def _variance_bias(n: float, r: float, u: float = U) -> float:
    k = min(n - r, math.floor(n / 2))  # seed 002 Thm IV.2 as corrected by ERRATA E1
    return u * u * k * (n - k) / n**2


def _measurements(family: str, lattice: float, criterion: str) -> Measurements:
    nan = np.where(RELEASED, 1.0, np.nan)
    bias_mu = np.array([_mean_bias(n, r) for n, r in zip(N, R)])
    bias_var = np.array([_variance_bias(n, r) for n, r in zip(N, R)])
    nodes = pd.DataFrame({"cell": np.arange(3, dtype=np.int64), "h3_resolution": 7, "slot": np.zeros(3, np.int64),
                          "slot_ns": 3600 * 10**9, "parent": -np.ones(3, np.int64)})
    public = pd.DataFrame({"released": RELEASED, "mean_sensitivity": D_MU, "variance_sensitivity": D_VAR,
                           "budget_mean": B_MU, "budget_variance": B_VAR, "noise_abs": NOISE_ABS})
    stats = {"mean": Statistic("mean", MU * nan, NoiseLaw(family, SCALE_MU, lattice), bias_mu),
             "variance": Statistic("variance", VAR * nan, NoiseLaw(family, SCALE_VAR, lattice), bias_var)}
    unit = "epsilon" if family.endswith("laplace") else "rho"
    return Measurements(privacy_model="public-occupancy", bound=U, nodes=nodes, statistics=stats,
                        spend=BudgetSpend(unit, 1.0), public=public, info={"criterion": criterion})


CASES = [("discrete_laplace", 2.0**-10, 1.0), ("laplace", 0.0, 1.0),
         ("discrete_gaussian", 2.0**-10, 1.5), ("gaussian", 0.0, 1.5)]


@pytest.mark.parametrize("family,lattice,slack", CASES)
@pytest.mark.parametrize("criterion", ["noise", "worst_case"])
@pytest.mark.parametrize("q", [0.9, 0.95])
def test_hand_built_measurements_give_the_closed_form(family, lattice, slack, criterion, q):
    m = _measurements(family, lattice, criterion)
    est = estimate(m, confidence=q)
    t = est.table
    laplace = family.endswith("laplace")
    f = math.log(1 / (1 - q)) if laplace else NormalDist().inv_cdf((1 + q) / 2)
    for i in range(2):  # the released grids
        n, r = N[i], R[i]
        noise_mu = SCALE_MU[i] * f + slack * lattice
        noise_var = SCALE_VAR[i] * f + slack * lattice
        wc_mu, wc_var = noise_mu + _mean_bias(n, r), noise_var + _variance_bias(n, r)
        assert t["mean"][i] == min(max(MU[i], 0.0), U) and t["mean_raw"][i] == MU[i]
        assert t["variance_in_range"][i] == min(max(VAR[i], 0.0), U * U / 4)
        assert t["mean_error_bound_noise"][i] == pytest.approx(noise_mu, rel=1e-12)
        assert t["variance_error_bound_noise"][i] == pytest.approx(noise_var, rel=1e-12)
        assert t["mean_error_bound_worst_case"][i] == pytest.approx(wc_mu, rel=1e-12)
        assert t["variance_error_bound_worst_case"][i] == pytest.approx(wc_var, rel=1e-12)
        want = noise_mu if criterion == "noise" else wc_mu
        assert t["mean_error_bound"][i] == pytest.approx(want, rel=1e-12)
        if laplace:
            noise_e = D_MU[i] / B_MU[i] + D_VAR[i] / B_VAR[i]
        else:
            noise_e = math.sqrt(2 / math.pi) * (D_MU[i] / math.sqrt(2 * B_MU[i]) + D_VAR[i] / math.sqrt(2 * B_VAR[i]))
        bias = _mean_bias(n, r) + _variance_bias(n, r)
        assert t["error_bound"][i] == pytest.approx(bias + noise_e, rel=1e-12)
        assert t["error_bound_released"][i] == pytest.approx(bias + NOISE_ABS[i], rel=1e-12)
    # the grid not released: no value, no bound, E = inf
    assert not t["released"][2] and np.isnan(t["mean_error_bound"][2]) and t["error_bound"][2] == np.inf
    s = est.info["summary"]
    assert s["released_grids"] == 2 and s["criterion"] == criterion and s["confidence"] == q
    assert s["error_bound"] == pytest.approx(max(t["error_bound"][:2]), rel=1e-12)


def test_variance_withheld_where_its_interval_is_the_whole_range():
    """Grid 1: Ṽ = −1.25 clips to 0, and its bound (scale 6) exceeds U²/4 = 25 at q = 0.99: the
    interval [0, U²/4] says nothing, so the variance is withheld; grid 0 keeps it."""
    t = estimate(_measurements("laplace", 0.0, "noise"), confidence=0.99).table
    assert 6.0 * math.log(100) >= U * U / 4
    assert not t["variance_released"][1] and np.isnan(t["variance"][1]) and t["variance_in_range"][1] == 0.0
    assert t["variance_released"][0] and t["variance"][0] == 3.5


def test_public_occupancy_estimation_imports_no_records_and_no_model():
    """The estimation modules never reach the records or the model's mechanism: their imports
    (module level and inside functions) name neither records, the mechanisms nor the model."""
    root = Path(__file__).resolve().parents[2] / "dpopt" / "estimation"
    banned = ("records", "mechanisms", "public_occupancy", "contributions")
    for path in (root / "direct.py", root / "__init__.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(b in part.split(".") for b in banned for part in names), (path.name, names)


def test_a_release_is_its_measurements_estimated():
    """The published table's bounds are the estimation of the Measurements alone: stripped of
    everything the model keeps for the report (plan, summary facts), they estimate to the same."""
    from dpopt.release import NoiseOptions, PerGridBudget, PublicOccupancyOptions, contributions, release_aggregate
    from dpopt.records.data import austin_sample_path

    agg, _ = contributions(austin_sample_path(), bound=120.0)
    r = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy", criterion="worst_case"),
                          noise=NoiseOptions(seed=5), confidence=0.9)
    m = r.measurements
    bare = Measurements(privacy_model=m.privacy_model, bound=m.bound, nodes=m.nodes, statistics=m.statistics,
                        spend=m.spend, public=m.public[["released", "mean_sensitivity", "variance_sensitivity",
                                                        "budget_mean", "budget_variance", "noise_abs"]],
                        info={"criterion": "worst_case"})
    t = estimate(bare, confidence=0.9).table
    np.testing.assert_array_equal(t["mean_error_bound"], r.table["mean_error_bound"])
    np.testing.assert_array_equal(t["variance_error_bound_noise"], r.table["variance_error_bound_noise"])
    np.testing.assert_array_equal(t["error_bound"], r.table["error_bound"])
    # the model states the clipping bias from the public counts by seed 002's formulas
    n, kept = r.table["n_records"].to_numpy(float), r.table["n_records_retained"].to_numpy(float)
    on = kept > 0
    want = [_mean_bias(a, b, 120.0) for a, b in zip(n[on], kept[on])]
    np.testing.assert_allclose(m.statistics["mean"].bias_bound[on], want, rtol=1e-12, atol=1e-12)
    want = [_variance_bias(a, b, 120.0) for a, b in zip(n[on], kept[on])]
    np.testing.assert_allclose(m.statistics["variance"].bias_bound[on], want, rtol=1e-12, atol=1e-9)
