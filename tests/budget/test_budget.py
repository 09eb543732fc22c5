"""Budget planner (models/budget.md): error bounds, exactness against exhaustive search, the seed-002
special case, greedy ≤ MILP, accounting and validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpopt
from dpopt import Occupancy
from dpopt.budget import (
    GaussianNoise,
    LaplaceNoise,
    budget_frontier,
    knee_target,
    make_criterion,
    plan_budget,
    smallest_target,
    statistic_bounds,
)
from dpopt.budget.configs import budget_ladder
from dpopt.budget.errors import Criterion
from dpopt.calculus import mean_bias, variance_bias, variance_sensitivity

from ._reference import exhaustive_coverage

U = 10.0


def _random_occ(rng, n_users, n_grids, max_pairs, max_count=4):
    while True:
        dense = rng.integers(1, max_count + 1, size=(n_users, n_grids)) * (rng.random((n_users, n_grids)) < 0.6)
        if 0 < np.count_nonzero(dense) <= max_pairs and np.all(dense.sum(axis=0) > 0) and np.all(dense.sum(axis=1) > 0):
            return Occupancy.from_dense(dense)


# ------------------------------------------------------------------ noise models and bounds
def test_laplace_bound_is_the_tail_quantile(rng):
    noise = LaplaceNoise()
    t = float(noise.error(2.0, 0.5, 0.95))
    assert t == pytest.approx(2.0 / 0.5 * math.log(20))
    # P[|Lap(b)| > t] = exp(-t/b): empirical check with a seeded sample (NOT for a real release)
    x = rng.laplace(scale=4.0, size=200_000)
    assert abs(np.mean(np.abs(x) <= t) - 0.95) < 0.003
    assert float(noise.budget_for(2.0, t, 0.95)) == pytest.approx(0.5)


def test_gaussian_bound_and_inverse(rng):
    noise = GaussianNoise()
    t = float(noise.error(1.0, 0.5, 0.9))  # sigma = 1/sqrt(1) = 1
    assert t == pytest.approx(1.6448536269514722)
    x = rng.normal(size=200_000)
    assert abs(np.mean(np.abs(x) <= t) - 0.9) < 0.003
    assert float(noise.budget_for(1.0, t, 0.9)) == pytest.approx(0.5)


def test_statistic_bounds_match_the_calculus_per_partition():
    # one grid: counts (3, 2, 2), keep Γ = (2, 2, 0): R = 4, Γ* = 2 (R ≤ 2Γ*: capped case)
    m, gam = [3, 2, 2], [2, 2, 0]
    q = 0.9
    for crit in ("noise", "worst_case"):
        sb = statistic_bounds([7], [4], [2], [0.4], [0.6], U, criterion=crit, confidence=q)
        tq = math.log(10)
        dmu = U * 2 / 4
        dvar = variance_sensitivity(gam, U)
        exp_mu = dmu * tq / 0.4 + (mean_bias(gam, m, U) if crit == "worst_case" else 0)
        exp_var = dvar * tq / 0.6 + (variance_bias(gam, m, U) if crit == "worst_case" else 0)
        assert sb.mean[0] == pytest.approx(exp_mu)
        assert sb.variance[0] == pytest.approx(exp_var)


def test_variance_envelope_is_conservative_and_monotone():
    R = np.arange(3, 40)
    c = 3
    exact = statistic_bounds(np.full(R.size, 50), R, np.full(R.size, c), 1.0, 1.0, U,
                             criterion="noise", confidence=0.95).variance
    env = statistic_bounds(np.full(R.size, 50), R, np.full(R.size, c), 1.0, 1.0, U,
                           criterion="noise", confidence=0.95, envelope=True).variance
    assert np.all(env >= exact - 1e-12)
    assert np.all(np.diff(env) <= 1e-12)
    assert np.any(env > exact)  # odd R in [c, 2c-1]


# ------------------------------------------------------------------ exactness
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("criterion", ["noise", "worst_case"])
def test_milp_equals_exhaustive_search(seed, criterion):
    rng = np.random.default_rng(1000 + seed)
    occ = _random_occ(rng, 4, 3, 8)
    eps_total = float(rng.choice([2.0, 4.0, 8.0]))
    w = rng.integers(1, 4, size=occ.n_grids).astype(float)
    # a target near the scale of a few users' noise so that some, not all, configurations pass
    tau = float(rng.uniform(3, 9)) if criterion == "noise" else float(rng.uniform(6, 14))
    truncate = bool(seed % 2)
    bp = plan_budget(occ, U, eps_total, target=tau, criterion=criterion, weights=w, method="milp",
                     max_caps=None, ladder_ratio=2.0, truncate=truncate, confidence=0.8, time_limit=None)
    crit = make_criterion(occ, U, target=tau, criterion=criterion, confidence=0.8)
    ladder, _ = budget_ladder(eps_total, occ.degradation, ratio=2.0)
    ref = exhaustive_coverage(occ, crit, ladder, eps_total, w, truncate=truncate)
    assert bp.status == "optimal"
    assert bp.coverage == pytest.approx(ref)
    assert bp.greedy_coverage <= bp.coverage + 1e-9


def test_some_exhaustive_instances_are_not_trivial():
    """The exactness test must see instances where the optimum is neither 0 nor everything."""
    seen = set()
    for seed in range(6):
        rng = np.random.default_rng(1000 + seed)
        occ = _random_occ(rng, 4, 3, 8)
        eps_total = float(rng.choice([2.0, 4.0, 8.0]))
        w = rng.integers(1, 4, size=occ.n_grids).astype(float)
        tau = float(rng.uniform(3, 9))
        bp = plan_budget(occ, U, eps_total, target=tau, weights=w, max_caps=None, ladder_ratio=2.0,
                         truncate=bool(seed % 2), confidence=0.8)
        seen.add(0 < bp.coverage < w.sum())
    assert True in seen


class _Seed002(Criterion):
    """Seed 002's E_g ≤ E (eq. (11)-(13), ERRATA E1/E10): both biases + 2Δ_μ/ε + 2Δ_Var/ε."""

    def excess(self, grid, total, retained_total, cap, budget):
        sb = statistic_bounds(total, retained_total, cap, np.asarray(budget) / 2, np.asarray(budget) / 2,
                              self.bound, criterion="worst_case", confidence=1 - math.exp(-1),
                              envelope=True)
        return sb.mean + sb.variance - self.target[grid]


def _seed002_case(seed):
    """Least K with every E_g ≤ E (solve_suppression) = least K at which the planner, with the fixed
    per-grid budget ε, suppression only and seed 002's error, releases every grid within E.
    Counts are even so every retained total is even and the variance envelope is exact."""
    rng = np.random.default_rng(2000 + seed)
    occ = _random_occ(rng, 6, 4, 16)
    occ = Occupancy.from_dense(occ.to_dense() * 2)
    eps = 1.0
    from dpopt.suppression._kernel import least_grid_errors

    base = float(dpopt.grid_errors(occ, U, eps).max())
    floor = float(least_grid_errors(occ, U, eps).max())
    E = floor + float(rng.uniform(0.0, 1.0)) * (base - floor)
    sup = dpopt.solve_suppression(occ, U, eps, error_bound=E, tie_break=False)
    assert sup.status == "optimal"
    crit = _Seed002(bound=U, criterion="worst_case", confidence=0.5, target=np.full(occ.n_grids, E),
                    target_variance=None, mean_share=0.5, noise=LaplaceNoise())
    least = None
    for K in range(1, occ.degradation + 1):
        bp = plan_budget(occ, U, K * eps, target=E, budget_levels=[eps], truncate=False, max_caps=None,
                         _criterion=crit, time_limit=None)
        if bp.coverage == occ.n_grids:
            least = K
            assert bp.plan.total_cost <= K * eps + 1e-9
            break
    return least, sup.degradation, occ.degradation


def test_seed002_least_degradation_is_a_special_case():
    out = [_seed002_case(s) for s in range(12)]
    for least, k_sup, _ in out:
        assert least == k_sup
    assert any(k < k0 for k, _, k0 in out)  # some instance needs suppression


@pytest.mark.parametrize("seed", range(5))
def test_milp_never_worse_than_greedy(seed):
    rng = np.random.default_rng(3000 + seed)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    w = rng.random(occ.n_grids) + 0.5
    kw = dict(target=float(rng.uniform(10, 40)), weights=w, confidence=0.9)
    g = plan_budget(occ, U, 6.0, method="greedy", **kw)
    m = plan_budget(occ, U, 6.0, method="milp", time_limit=20, **kw)
    assert m.coverage >= g.coverage - 1e-9
    assert m.greedy_coverage == pytest.approx(g.coverage)
    assert g.status == "heuristic"


# ------------------------------------------------------------------ the plan contract
def test_plan_contract_accounting_and_bounds():
    rng = np.random.default_rng(7)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    bp = plan_budget(occ, U, 5.0, target=15.0, criterion="worst_case", confidence=0.9)
    plan = bp.plan
    plan.check(occ.matrix)
    assert plan.unit == "epsilon" and plan.method == "budget-milp"
    assert plan.total_cost <= 5.0 + 1e-9
    rel = plan.released
    assert np.all(plan.budget[~rel] == 0)
    # retained counts respect the caps; the bound of every released grid meets the target
    R = plan.retained.toarray()
    assert np.all(R <= plan.array_length[None, :])
    assert np.all(bp.bounds["worst_case"].mean[rel] <= 15.0 * (1 + 1e-9))
    assert np.all(bp.bounds["noise"].mean[rel] <= bp.bounds["worst_case"].mean[rel] + 1e-12)
    assert np.all(np.isinf(bp.bounds["noise"].mean[~rel]))
    assert bp.within_target.sum() == rel.sum()
    # the reported bounds are recomputed from the plan by the calculus
    for g in np.flatnonzero(rel)[:3]:
        gam = R[:, g][R[:, g] > 0]
        dmu = U * gam.max() / gam.sum()
        assert bp.bounds["noise"].mean[g] == pytest.approx(dmu * math.log(10) / plan.budget_mean[g])


def test_variance_target_splits_the_failure_probability():
    rng = np.random.default_rng(8)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    bp = plan_budget(occ, U, 20.0, target=30.0, target_variance=80.0, confidence=0.9)
    rel = bp.plan.released
    assert np.all(bp.bounds["noise"].variance[rel] <= 80.0 * (1 + 1e-9))
    # both targets: each bound at confidence 1 − (1 − 0.9)/2 = 0.95, so jointly ≥ 0.9
    R = bp.plan.retained.toarray()
    g = int(np.flatnonzero(rel)[0])
    gam = R[:, g][R[:, g] > 0]
    assert bp.bounds["noise"].mean[g] == pytest.approx(U * gam.max() / gam.sum() * math.log(20) / bp.plan.budget_mean[g])


def test_frontier_is_monotone_and_knee_rule():
    rng = np.random.default_rng(9)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    fr = budget_frontier(occ, U, 8.0, taus=[2.0, 5.0, 10.0, 20.0, 40.0], method="milp",
                         epsilon_totals=[1.0, 8.0, 64.0])
    assert np.all(np.diff(fr.coverage) >= -1e-9)
    assert np.all(np.diff(fr.coverage_vs_budget) >= -1e-9)
    assert fr.knee in fr.taus
    assert knee_target([1, 10, 100], [0, 9, 10]) == 10
    assert knee_target([1, 10, 100], [0, 0, 0]) == 100
    # a convex curve (coverage grows fast with tau, as on real data): the elbow below the chord, never
    # a tau with zero coverage (the earlier rule returned the smallest tau here: nothing released)
    taus = np.geomspace(0.6, 60, 16)
    cov = [0, 0, 0, 1, 2, 3, 4, 8, 10, 16, 22, 28, 38, 57, 76, 108]
    assert knee_target(taus, cov) == taus[11]
    assert knee_target([1, 2, 4, 8], [0, 1, 1, 1]) == 2
    bp = plan_budget(occ, U, 8.0, method="greedy")  # no target: the knee
    assert "knee" in bp.info["target_rule"]
    tau, best = smallest_target(occ, U, 8.0, coverage=2.0, method="milp")
    assert best.coverage >= 2.0
    assert plan_budget(occ, U, 8.0, target=tau / 1.05, method="milp").coverage < 2.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(epsilon_total=0.0), "epsilon_total"),
        (dict(target=-1.0), "target"),
        (dict(criterion="median"), "criterion"),
        (dict(confidence=1.0), "confidence"),
        (dict(method="lp"), "method"),
        (dict(weights=[1.0]), "weights"),
        (dict(budget_levels=[100.0]), "budget_levels"),
        (dict(mean_share=1.0), "mean_share"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    occ = Occupancy.from_dense([[1, 2], [3, 0]])
    args = dict(epsilon_total=1.0, target=5.0)
    args.update(kwargs)
    eps = args.pop("epsilon_total")
    with pytest.raises(dpopt.DpoptInputError, match=name):
        plan_budget(occ, U, eps, **args)


def test_progress_bar_and_gaussian_variant(capsys):
    rng = np.random.default_rng(11)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    bp = plan_budget(occ, U, 4.0, target=20.0, progress=True)
    assert "budget plan" in capsys.readouterr().err
    # zCDP variant: same planner, unit rho, Gaussian bounds t = Δ·z/√(2ρ)
    gz = plan_budget(occ, U, 4.0, target=20.0, noise=GaussianNoise())
    assert gz.plan.unit == "rho" and gz.plan.total_cost <= 4.0 + 1e-9
    rel = gz.plan.released
    assert np.all(gz.bounds["noise"].mean[rel] <= 20.0 * (1 + 1e-9))
    R = gz.plan.retained.toarray()
    for g in np.flatnonzero(rel)[:3]:
        gam = R[:, g][R[:, g] > 0]
        expect = U * gam.max() / gam.sum() * 1.959963984540054 / math.sqrt(2 * gz.plan.budget_mean[g])
        assert gz.bounds["noise"].mean[g] == pytest.approx(expect)
    assert bp.plan.unit == "epsilon"


@pytest.mark.parametrize("seed", range(6))
def test_aggregate_bound_is_an_upper_bound(seed):
    """The solver-free knapsack bound is ≥ the exhaustive optimum."""
    from dpopt.budget.configs import config_table
    from dpopt.budget.milp import build_budget_model

    rng = np.random.default_rng(1000 + seed)
    occ = _random_occ(rng, 4, 3, 8)
    eps_total = float(rng.choice([2.0, 4.0, 8.0]))
    w = rng.integers(1, 4, size=occ.n_grids).astype(float)
    crit = make_criterion(occ, U, target=float(rng.uniform(3, 9)), confidence=0.8)
    ladder, _ = budget_ladder(eps_total, occ.degradation, ratio=2.0)
    bm = build_budget_model(occ, config_table(occ, crit, ladder, max_caps=None), eps_total, w)
    ref = exhaustive_coverage(occ, crit, ladder, eps_total, w)
    assert bm.aggregate_bound(w, eps_total) >= ref - 1e-9


def test_the_milp_is_exportable(tmp_path):
    """models/budget.md §4: the built model is kept and written by dpopt.solve.write_model."""
    import highspy

    from dpopt.solve import write_model

    occ = Occupancy.from_dense([[3, 1, 0], [2, 2, 1], [1, 0, 4]])
    bp = plan_budget(occ, 10.0, 4.0, target=6.0, method="milp", time_limit=10)
    path = write_model(bp.info["model"], tmp_path / "budget.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    # the exported MILP, solved again, reaches the coverage the planner proved optimal
    assert bp.status == "optimal"
    assert h.getInfo().objective_function_value == pytest.approx(bp.coverage) and bp.coverage >= 1


def test_frontier_refuses_a_target_it_would_ignore():
    """budget_frontier(target=…) was silently dropped (each point sets its own τ); now one line. A
    plan's own frontier (which carries the plan's target in its settings) still works."""
    rng = np.random.default_rng(9)
    occ = _random_occ(rng, 12, 6, 60, max_count=6)
    with pytest.raises(dpopt.DpoptInputError, match="`target` is not an argument of budget_frontier"):
        budget_frontier(occ, U, 8.0, taus=[2.0, 5.0], target=5.0)
    plan = plan_budget(occ, U, 8.0, target=5.0, method="greedy")
    assert len(plan.frontier(taus=[2.0, 5.0]).taus) == 2
