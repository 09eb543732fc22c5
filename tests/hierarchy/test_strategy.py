"""The measurement-strategy optimiser (dpopt.hierarchy.strategy, models/strategy.md) against
independent references on seeded random small instances: a cvxpy/Clarabel model of the same convex
problem, brute force over a fine simplex grid of shares (both noise families), a greedy choice, and a
dense GLS posterior where the surrogate is exact. Every reference evaluates the surrogate with its own
loops over levels and nodes (:func:`loop_mse`), never with the module's arrays."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

from dpopt._validation import DpoptInputError
from dpopt.hierarchy.strategy import (GAP_TOL, Candidate, StrategyProblem, greedy_strategy, predicted_mse,
                                      solve_strategy)
from dpopt.solve import Status

#: agreement of two solvers of the same convex problem: HiGHS stops at GAP_TOL = 1e-6 (relative),
#: Clarabel at its default 1e-8; 1e-5 leaves room for both
TOL_SOLVERS = 1e-5
#: the optimiser may not be worse than the best point of a 1/N simplex grid by more than this
TOL_GRID = 1e-6
N_GRID = 200


def instance(rng, *, n_cell=3, n_slot=4, options=1, noise="gaussian", floor=0.0, bias=0.0, budget=None,
             marginals=("cell x period", "map x slot", "cell x slot"), fine_noise=1.0):
    """Grids = a random subset of cell × slot; factors cell, slot, residual; candidate marginals whose
    node noise variance falls with the node's size (scale drawn per instance, so that optima range
    from one marginal to mixtures)."""
    pairs = [(c, s) for c in range(n_cell) for s in range(n_slot) if rng.random() < 0.75] or [(0, 0)]
    cell, slot = np.array(pairs).T
    g = cell.size
    factors = {"cell": cell, "slot": slot, "residual": np.arange(g)}
    sigma2 = {"cell": rng.uniform(0.2, 2.0), "slot": rng.uniform(0.2, 2.0), "residual": rng.uniform(0.05, 1.0)}
    spec = {"cell x period": (cell, {"cell": rng.uniform(0, 0.5)}),
            "map x slot": (slot, {"slot": rng.uniform(0, 0.5)}),
            "cell x slot": (np.arange(g), {"cell": rng.uniform(0, 2), "slot": rng.uniform(0, 2),
                                           "residual": rng.uniform(0, 2, size=g)}),
            "map x period": (np.zeros(g, int), {})}
    scale = rng.uniform(0.5, 30.0)
    cands = []
    for name in marginals:
        node, informs = spec[name]
        size = np.bincount(node)
        for o in range(options):
            v = rng.uniform(0.2, 2.0, size.size) * scale / size.clip(1) / (1 + o)
            v *= fine_noise if name == "cell x slot" else 1.0
            cands.append(Candidate(name, f"k{o}", node, v, informs, bias * o * rng.uniform(0, 1, g)))
    budget = rng.uniform(0.3, 3.0) if budget is None else budget
    return StrategyProblem(factors, sigma2, cands, budget, noise=noise, min_share=floor)


def loop_mse(pb: StrategyProblem, shares, measured=None) -> np.ndarray:
    """Per-grid surrogate MSE by plain loops: for each factor level, the prior precision plus
    b/(r b + v) of every measured node lying in it (models/strategy.md §2)."""
    shares = np.asarray(shares, float)
    measured = shares > 0 if measured is None else np.asarray(measured, bool)
    power = shares * pb.budget if pb.noise == "gaussian" else (shares * pb.budget) ** 2
    out = np.zeros(pb.num_grids)
    for f, codes in pb.factors.items():
        if pb.sigma2[f] == 0:
            continue
        for j in np.unique(codes):
            prec = 1.0 / pb.sigma2[f]
            for c, cand in enumerate(pb.candidates):
                if f not in cand.informs or power[c] == 0:
                    continue
                for n in np.unique(cand.node[codes == j]):
                    r = cand.informs[f][n]
                    prec += power[c] / (r * power[c] + cand.v[n])
            out[codes == j] += 1.0 / prec
    for c, cand in enumerate(pb.candidates):
        if measured[c]:
            out += cand.bias2
    return out


def total(pb, shares, measured=None) -> float:
    return float(pb.grid_weights @ loop_mse(pb, shares, measured))


# --- (1) cvxpy model of the same convex problem --------------------------------------------------

def cvxpy_optimum(pb: StrategyProblem) -> tuple[float, np.ndarray]:
    """min Σ_L W_L / (1/σ² + Σ b/(r b + v)) over shares s ≥ 0, Σ s ≤ 1 (Gaussian, one option each,
    no floor, no bias), written in DCP form: b/(r b + v) = 1/r − (v/r)·inv_pos(r b + v) for r > 0."""
    s = cp.Variable(len(pb.candidates), nonneg=True)
    terms = []
    for f, codes in pb.factors.items():
        for j in np.unique(codes):
            w = pb.grid_weights[codes == j].sum()
            prec = 1.0 / pb.sigma2[f]
            for c, cand in enumerate(pb.candidates):
                if f not in cand.informs:
                    continue
                b = pb.budget * s[c]
                for n in np.unique(cand.node[codes == j]):
                    r, v = cand.informs[f][n], cand.v[n]
                    prec = prec + (b / v if r == 0 else 1.0 / r - (v / r) * cp.inv_pos(r * b + v))
            terms.append(w * cp.inv_pos(prec))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms))), [cp.sum(s) <= 1])
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    return float(prob.value), np.clip(s.value, 0, None)


@pytest.mark.parametrize("seed", range(22))
def test_highs_cutting_planes_agree_with_cvxpy(seed):
    rng = np.random.default_rng(seed)
    pb = instance(rng, marginals=("cell x period", "map x slot", "cell x slot", "map x period")[: 2 + seed % 3])
    if seed % 2:  # weighted grids (some weight 0) on every other instance
        weights = rng.uniform(0, 3, pb.num_grids) * (rng.random(pb.num_grids) < 0.8)
        pb = StrategyProblem(pb.factors, pb.sigma2, pb.candidates, pb.budget, grid_weights=weights)
    plan = solve_strategy(pb)
    ref, ref_shares = cvxpy_optimum(pb)
    assert plan.status is Status.OPTIMAL and plan.gap <= GAP_TOL
    assert abs(plan.mse - ref) <= TOL_SOLVERS * ref
    assert plan.mse == pytest.approx(total(pb, plan.shares), rel=1e-12)  # the plan's MSE is its shares' MSE
    assert plan.bound <= ref * (1 + TOL_SOLVERS)
    assert total(pb, ref_shares) >= plan.mse * (1 - TOL_SOLVERS)
    assert plan.measured.any() and plan.shares.sum() == pytest.approx(1.0, abs=1e-7)  # MSE falls in every share


# --- (2) brute force over a simplex grid ---------------------------------------------------------

def simplex(k: int, n: int, floor: float):
    """Share vectors of k > 0 entries on the 1/n grid summing to 1, each ≥ floor."""
    if k == 1:
        yield (1.0,)
        return
    for head in itertools.product(range(1, n), repeat=k - 1):
        last = n - sum(head)
        if last >= 1:
            pt = tuple(h / n for h in head) + (last / n,)
            if min(pt) >= floor - 1e-12:
                yield pt


def brute_force(pb: StrategyProblem) -> float:
    """Best total MSE over every choice of at most one option per marginal and every grid point."""
    best = total(pb, np.zeros(len(pb.candidates)))
    by_marg: dict[str, list[int]] = {}
    for i, c in enumerate(pb.candidates):
        by_marg.setdefault(c.marginal, []).append(i)
    for pick in itertools.product(*[[None, *opts] for opts in by_marg.values()]):
        chosen = [i for i in pick if i is not None]
        if not chosen:
            continue
        for pt in simplex(len(chosen), N_GRID, pb.min_share):
            shares = np.zeros(len(pb.candidates))
            shares[chosen] = pt
            best = min(best, total(pb, shares))
    return best


#: per-instance noise multiplier of the finest marginal, so that the optima below include splits
FINE_NOISE = [8.0, 4.0, 20.0, 1.0, 10.0, 6.0]


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.slow
def test_no_worse_than_a_fine_simplex_grid(seed, noise):
    rng = np.random.default_rng(100 + seed)
    options, marginals = ((2, ("cell x period", "cell x slot")) if seed % 2 else
                          (1, ("cell x period", "map x slot", "cell x slot")))
    pb = instance(rng, n_cell=2, n_slot=3, options=options, noise=noise, bias=0.3 * (seed % 3),
                  floor=0.05 * (seed % 2), marginals=marginals, fine_noise=FINE_NOISE[seed])
    plan = solve_strategy(pb)
    grid_best = brute_force(pb)
    assert plan.mse <= grid_best * (1 + TOL_GRID)
    assert plan.bound <= grid_best * (1 + TOL_GRID)  # a valid lower bound
    assert plan.mse == pytest.approx(total(pb, plan.shares, plan.measured), rel=1e-12)
    if noise == "gaussian":
        assert plan.status is Status.OPTIMAL
    else:
        assert plan.status in (Status.OPTIMAL, Status.HEURISTIC)
    assert (plan.mse - plan.bound) / plan.mse == pytest.approx(plan.gap, abs=1e-12)


@pytest.mark.parametrize("seed", [400, 402])
def test_laplace_split_no_worse_than_a_fine_simplex_grid(seed):
    """Instances whose pure-ε optimum splits ε between two marginals (each informs its own factor and
    saturates: r > 0): the convex-concave plan is no worse than the best 1/200 grid point."""
    pb = instance(np.random.default_rng(seed), n_cell=3, n_slot=3, noise="laplace", budget=4.0,
                  marginals=("cell x period", "map x slot", "map x period"))
    plan = solve_strategy(pb)
    grid_best = brute_force(pb)
    assert np.count_nonzero(plan.measured) == 2
    assert plan.mse <= grid_best * (1 + TOL_GRID) and plan.bound <= grid_best
    assert plan.status is Status.HEURISTIC and plan.gap > 0.1  # the relaxation's bound is loose here


def test_laplace_prefers_concentration_that_gaussian_splits():
    """Two identical candidates informing the same level (r = 0): with ρ the precision is linear in
    the shares, so any split is optimal; with ε it is Σ s_c², so one candidate takes everything."""
    codes = np.zeros(4, int)
    cand = [Candidate(m, "k", codes, np.array([1.0]), {"cell": 0.0}) for m in ("a", "b")]
    pb = StrategyProblem({"cell": codes}, {"cell": 1.0}, cand, 1.0, noise="laplace")
    plan = solve_strategy(pb)
    assert sorted(plan.shares) == pytest.approx([0.0, 1.0])
    assert plan.mse == pytest.approx(4 / (1 + 1.0), rel=1e-9)
    # the relaxation b_c ≤ s_c ε² allows b_1 + b_2 ≤ ε², which one candidate alone attains: closed
    assert plan.status is Status.OPTIMAL and plan.bound == pytest.approx(plan.mse, rel=GAP_TOL)


# --- (3) greedy -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
@pytest.mark.slow
def test_optimum_matches_or_beats_greedy(seed):
    rng = np.random.default_rng(200 + seed)
    pb = instance(rng, options=2, bias=0.2 * (seed % 2), floor=0.02 * (seed % 3),
                  noise="laplace" if seed == 7 else "gaussian")
    plan, greedy = solve_strategy(pb), greedy_strategy(pb)
    assert greedy.status is Status.HEURISTIC
    assert plan.mse <= greedy.mse * (1 + GAP_TOL)
    assert greedy.mse == pytest.approx(total(pb, greedy.shares, greedy.measured), rel=1e-12)
    assert set(np.flatnonzero(greedy.measured)) <= set(range(len(pb.candidates)))
    marg = [pb.candidates[i].marginal for i in np.flatnonzero(greedy.measured)]
    assert len(marg) == len(set(marg))


# --- (4) the surrogate is the exact GLS posterior variance where it should be --------------------

def dense_posterior(pb: StrategyProblem, shares) -> np.ndarray:
    """One factor u (prior σ² I), every node n of a measured candidate observed as
    y_n = u_j(n) + w_n + noise, w_n ~ N(0, r_n) (dropped when r_n = 0), noise variance v_n / b_c:
    the GLS posterior covariance of (u, w), read at each grid's level."""
    (f, codes), = pb.factors.items()
    levels = np.unique(codes)
    rows, r_list, var = [], [], []
    power = shares * pb.budget if pb.noise == "gaussian" else (shares * pb.budget) ** 2
    for c, cand in enumerate(pb.candidates):
        if power[c] == 0:
            continue
        for n in np.unique(cand.node):
            j = np.unique(codes[cand.node == n])
            assert j.size == 1  # nested: the node lies inside one level
            rows.append(np.searchsorted(levels, j[0]))
            r_list.append(cand.informs[f][n])
            var.append(cand.v[n] / power[c])
    m, k = len(rows), levels.size
    r_arr = np.array(r_list)
    nuis = np.flatnonzero(r_arr > 0)
    a = np.zeros((m, k + nuis.size))
    a[np.arange(m), rows] = 1.0
    a[nuis, k + np.arange(nuis.size)] = 1.0
    prior = np.r_[np.full(k, pb.sigma2[f]), r_arr[nuis]]
    cov = np.linalg.inv(np.diag(1 / prior) + a.T @ np.diag(1 / np.array(var)) @ a)
    return np.diag(cov)[:k][np.searchsorted(levels, codes)]


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("seed", range(5))
def test_surrogate_is_the_dense_gls_posterior_for_one_factor_nested(seed, noise):
    rng = np.random.default_rng(300 + seed)
    g = 12
    cell = rng.integers(0, 3, g)
    day = cell * 2 + rng.integers(0, 2, g)  # cell x day nodes nest in cells
    with_r = seed % 2 == 1
    r = (lambda n: rng.uniform(0, 1, n) * with_r)
    cands = [Candidate("cell x period", "k", cell, rng.uniform(0.5, 2, 3), {"cell": r(3)}),
             Candidate("cell x day", "k", day, rng.uniform(0.5, 2, 6), {"cell": r(6)}),
             Candidate("cell x slot", "k", np.arange(g), rng.uniform(0.5, 2, g), {"cell": r(g)})]
    pb = StrategyProblem({"cell": cell}, {"cell": rng.uniform(0.5, 2)}, cands, rng.uniform(0.5, 2), noise=noise)
    shares = rng.dirichlet(np.ones(3)) * rng.uniform(0.5, 1)
    shares[seed % 3] = 0.0 if seed > 2 else shares[seed % 3]
    np.testing.assert_allclose(predicted_mse(pb, shares), dense_posterior(pb, shares), rtol=1e-10)
    np.testing.assert_allclose(predicted_mse(pb, shares), loop_mse(pb, shares), rtol=1e-12)


def test_predicted_mse_sums_factors_and_bias_of_measured_candidates():
    rng = np.random.default_rng(7)
    pb = instance(rng, options=2, bias=0.5)
    shares = np.r_[0.3, 0.0, 0.2, 0.0, 0.5, 0.0]
    np.testing.assert_allclose(predicted_mse(pb, shares), loop_mse(pb, shares), rtol=1e-12)


# --- (5) bad input, infeasible and time-limited solves -------------------------------------------

def _base(**kw):
    codes = np.array([0, 0, 1])
    cand = Candidate("cell x period", "k", codes, np.array([1.0, 2.0]), {"cell": 0.1})
    args = dict(factors={"cell": codes}, sigma2={"cell": 1.0}, candidates=[cand], budget=1.0)
    args.update(kw)
    return StrategyProblem(**args)


def _cand(**kw):
    codes = np.array([0, 0, 1])
    args = dict(marginal="m", option="k", node=codes, v=np.array([1.0, 2.0]), informs={"cell": 0.1})
    args.update(kw)
    return Candidate(**args)


BAD = [
    (dict(noise="poisson"), "`noise` must be one of"),
    (dict(budget=-1.0), "`budget` must be a positive finite number"),
    (dict(budget=float("inf")), "`budget` must be a positive finite number"),
    (dict(min_share=1.5), "`min_share` must be a number in [0, 1]"),
    (dict(sigma2={"place": 1.0}), "`sigma2` must map each factor"),
    (dict(sigma2={"cell": -1.0}), "`sigma2['cell']` must be a finite number >= 0"),
    (dict(sigma2={"cell": "big"}), "`sigma2['cell']` must be a finite number >= 0"),
    (dict(budget=np.int64(0)), "`budget` must be a positive finite number"),
    (dict(factors={"cell": np.array([0.5, 1, 2])}), "`factors['cell']` must be a 1-D integer array"),
    (dict(factors={}), "`factors` must be a non-empty mapping"),
    (dict(candidates=[]), "`candidates` must be a non-empty sequence"),
    (dict(candidates=["cell"]), "`candidates[0]` must be a Candidate"),
    (dict(grid_weights=[1.0, -1.0, 1.0]), "`grid_weights` must be a finite number >= 0"),
    (dict(candidates=[_cand(node=np.array([0, 1]))]), "`candidates[0].node` must be a 1-D integer array of length 3"),
    (dict(candidates=[_cand(v=np.array([1.0, 0.0]))]), "`candidates[0].v` must be a 1-D array of finite numbers > 0"),
    (dict(candidates=[_cand(v=np.array([1.0]))]), "`candidates[0].v` must be a 1-D array"),
    (dict(candidates=[_cand(informs={"slot": 0.0})]), "`candidates[0].informs` must map some of the factors"),
    (dict(candidates=[_cand(informs={"cell": -0.5})]), "`candidates[0].informs['cell']` must be a finite number >= 0"),
    (dict(candidates=[_cand(bias2=np.array([0.0, -1.0, 0.0]))]), "`candidates[0].bias2` must be a finite number"),
    (dict(candidates=[_cand(must="maybe")]), "`candidates[0].must` must be one of"),
    (dict(candidates=[_cand(), _cand()]), "`candidates` must not repeat a (marginal, option) pair"),
    (dict(candidates=[_cand(), _cand(option="wide", node=np.array([0, 0, 0]), v=np.array([1.0]))]),
     "`candidates[1].informs` names factor 'cell', but node 0 of 'm/wide' spans two of its levels"),
]


@pytest.mark.parametrize("kw, message", BAD)
def test_bad_input_is_a_one_line_error(kw, message):
    with pytest.raises(DpoptInputError) as err:
        _base(**kw)
    text = str(err.value)
    assert message in text and "\n" not in text


@pytest.mark.parametrize("kw, message", [
    (dict(time_limit=-1.0), "`time_limit` must be a number >= 0 or None"),
    (dict(gap_tol=0.0), "`gap_tol` must be a number in (0, 1)"),
])
def test_bad_solve_options_are_one_line_errors(kw, message):
    with pytest.raises(DpoptInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        solve_strategy(_base(), **kw)


def test_predicted_mse_rejects_shares_over_budget():
    with pytest.raises(DpoptInputError, match="`shares` must sum to at most 1"):
        predicted_mse(_base(), [1.5])


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_infeasible_floor_reports_status_and_no_plan(noise):
    codes = np.array([0, 1])
    cands = [Candidate(m, "k", codes, np.ones(2), {"cell": 0.0}, must="measure") for m in ("a", "b")]
    pb = StrategyProblem({"cell": codes}, {"cell": 1.0}, cands, 1.0, min_share=0.6, noise=noise)
    plan = solve_strategy(pb)
    assert plan.status is Status.INFEASIBLE and plan.gap == np.inf
    assert np.isnan(plan.shares).all() and np.isnan(plan.mse)
    assert "infeasible" in plan.summary()


def test_must_flags_are_obeyed():
    rng = np.random.default_rng(11)
    pb = instance(rng, options=2)
    free = solve_strategy(pb)
    banned = int(np.flatnonzero(free.measured)[0])
    forced = next(i for i in range(len(pb.candidates)) if not free.measured[i]
                  and pb.candidates[i].marginal != pb.candidates[banned].marginal)
    cands = [c if i not in (banned, forced) else
             Candidate(c.marginal, c.option, c.node, c.v, c.informs, c.bias2,
                       must="not" if i == banned else "measure") for i, c in enumerate(pb.candidates)]
    pb2 = StrategyProblem(pb.factors, pb.sigma2, cands, pb.budget, min_share=0.1)
    plan = solve_strategy(pb2)
    assert plan.status is Status.OPTIMAL
    assert not plan.measured[banned] and plan.measured[forced] and plan.shares[forced] >= 0.1 - 1e-9
    assert plan.mse >= free.mse * (1 - GAP_TOL)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_time_limit_reports_status_and_gap(noise):
    pb = instance(np.random.default_rng(5), options=2, noise=noise, bias=0.1)
    plan = solve_strategy(pb, time_limit=0.0)
    assert plan.status is Status.TIME_LIMIT and plan.gap == np.inf
    assert "time_limit" in plan.summary()


def test_plan_reports_one_line_and_a_frame():
    pb = instance(np.random.default_rng(3), options=2, bias=0.1)
    plan = solve_strategy(pb)
    assert "\n" not in plan.summary() and "\n" not in repr(plan)
    frame = plan.to_frame()
    assert list(frame.columns) == ["marginal", "option", "measured", "share", "rho"]
    assert frame["share"].sum() == pytest.approx(1.0, abs=1e-7)
    np.testing.assert_allclose(frame["rho"], plan.shares * pb.budget)
    for marg, opt in plan.chosen.items():
        rows = frame[(frame.marginal == marg) & frame.measured]
        assert (opt is None and rows.empty) or list(rows.option) == [opt]


def test_hand_computed_instance_and_degenerate_ones():
    """Two cells (2 grids and 1), one candidate, r = 0.1, v = (1, 2), bias 0.2 per grid, ρ = 1:
    V = 1/(1 + 1/1.1) twice and 1/(1 + 1/2.1) once, plus 3 × 0.2 = 2.32504 < 3 (not measuring)."""
    codes = np.array([0, 0, 1])
    cand = Candidate("m", "k", codes, np.array([1.0, 2.0]), {"cell": 0.1}, bias2=0.2)
    expect = 2 / (1 + 1 / 1.1) + 1 / (1 + 1 / 2.1) + 0.6
    for noise in ("gaussian", "laplace"):
        plan = solve_strategy(StrategyProblem({"cell": codes}, {"cell": 1.0}, [cand], 1.0, noise=noise))
        assert plan.status is Status.OPTIMAL and plan.mse == pytest.approx(expect, rel=1e-12)
        assert plan.chosen == {"m": "k"} and plan.shares == pytest.approx([1.0])
    no_prior = solve_strategy(StrategyProblem({"cell": codes}, {"cell": 0.0}, [cand], 1.0))
    assert no_prior.mse == 0.0 and not no_prior.measured.any()  # nothing to learn: bias would only hurt
    useless = Candidate("m", "k", codes, np.ones(2), {})
    plan = solve_strategy(StrategyProblem({"cell": codes}, {"cell": 1.0}, [useless], 1.0))
    assert plan.mse == pytest.approx(3.0) and not plan.measured.any()


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("seed", range(4))
def test_committed_shares_are_kept_and_the_rest_is_split_optimally(seed, noise):
    """A second round re-plans the whole budget with every candidate at least at the share an earlier
    round committed to it: the plan keeps them and is no worse than the best point of a 1/60 simplex
    grid restricted to those floors (brute force)."""
    rng = np.random.default_rng(700 + seed)
    pb0 = instance(rng, n_cell=2, n_slot=3, noise=noise, marginals=("cell x period", "map x slot", "cell x slot"))
    committed = rng.dirichlet(np.ones(3)) * 0.3
    pb = StrategyProblem(pb0.factors, pb0.sigma2, pb0.candidates, pb0.budget, noise=noise, committed=committed)
    plan = solve_strategy(pb)
    assert np.all(plan.shares >= committed - 1e-9) and np.all(plan.measured)
    best = min(total(pb, pt) for pt in simplex(3, 60, 0.0) if np.all(np.array(pt) >= committed))
    assert plan.mse <= best * (1 + TOL_GRID)
    free = solve_strategy(pb0)
    assert plan.mse >= free.mse * (1 - 1e-6)  # a floor can only cost


def test_committed_shares_are_validated():
    pb = instance(np.random.default_rng(1), marginals=("cell x period", "map x slot"))
    with pytest.raises(DpoptInputError, match="committed"):
        StrategyProblem(pb.factors, pb.sigma2, pb.candidates, pb.budget, committed=[0.7, 0.6])
    with pytest.raises(DpoptInputError, match="committed"):
        StrategyProblem(pb.factors, pb.sigma2, pb.candidates, pb.budget, committed=[0.1])


def test_a_badly_scaled_pure_epsilon_problem_is_not_declared_infeasible():
    """A recorded problem (aircraft A at ε = 1, the engine's first plan: 90,331 grids, three marginals
    excluded, node noise 83 to 2.9·10^10) that the master LP once called infeasible: its epigraph
    variables were bounded above by Ψ(0), and a tangent cut evaluated at the excluded candidates' zero
    shares overshot Ψ(0) by rounding. Feasible now, and the plan is the only candidate left, whole."""
    import json
    from pathlib import Path

    data = np.load(Path(__file__).parent / "fixtures" / "strategy_cut_overshoot.npz")
    meta = json.loads(data["meta"].tobytes())
    G = data["grid_weights"].size
    factors = {k: (data[f"factor/{k}"] if f"factor/{k}" in data else
                   np.arange(G) if k == "residual" else np.zeros(G, dtype=np.int64)) for k in meta["factors"]}
    cands = [Candidate(marginal=m, option=o, node=data[f"{i}/node"], v=data[f"{i}/v"],
                       informs={k[len(f"{i}/informs/"):]: data[k] for k in data.files if k.startswith(f"{i}/informs/")},
                       must=must)
             for i, (m, o, must) in enumerate(meta["candidates"])]
    pb = StrategyProblem(factors=factors, sigma2=meta["sigma2"], candidates=cands, budget=meta["budget"],
                         noise=meta["noise"], grid_weights=data["grid_weights"])
    plan = solve_strategy(pb, gap_tol=0.01)
    assert plan.status.value == "optimal", plan.summary()
    np.testing.assert_allclose(plan.shares, [0.0, 0.0, 0.0, 1.0], atol=1e-9)


@pytest.mark.parametrize("noise, budget", [("gaussian", 1e18), ("laplace", 1e9), ("laplace", 1e5)])
@pytest.mark.parametrize("seed", range(3))
def test_a_huge_budget_loads_and_its_bound_stays_valid(seed, noise, budget):
    """At a budget of 10⁹ (ε) or 10¹⁸ (ρ) the tangents at zero shares had slopes ≈ 10¹⁸ and HiGHS
    refused the master ("could not load model"); at ε = 10⁵ seed 0's master claimed "optimal" at 2.6×
    the grid's best (slopes ≈ 10⁹). With the node noise floored (NOISE_FLOOR: the model
    moves by a share of 10⁻⁶ of a node's budget, ≈ 10⁻⁵ of the objective here) it loads, its bound
    stays below the best point of a fine simplex grid of the exact surrogate up to that perturbation,
    and the plan is no worse than that point."""
    from dpopt.hierarchy.strategy import NOISE_FLOOR, _compile  # noqa: PLC0415

    rng = np.random.default_rng(700 + seed)
    pb = instance(rng, n_cell=2, n_slot=3, noise=noise, budget=budget,
                  marginals=("cell x period", "map x slot", "cell x slot"))
    g = _compile(pb).groups_at(np.zeros(len(pb.candidates)))[1]
    assert np.abs(g).max() > 0.1 / NOISE_FLOOR  # the floor binds: slopes of up to ≈ 1/NOISE_FLOOR
    plan = solve_strategy(pb)
    grid_best = brute_force(pb)
    assert plan.status.is_optimal or plan.status is Status.HEURISTIC, plan.summary()
    assert plan.bound <= grid_best * (1 + 1e-4)
    assert plan.mse <= grid_best * (1 + 1e-4)
    assert plan.mse == pytest.approx(total(pb, plan.shares, plan.measured), rel=1e-4)
