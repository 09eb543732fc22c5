"""The plans' consistency check (dpopt/privacy/user/engine.py ``_nodes_passing``,
``_predicted_passing``, ``_weakest``; models/engine.md §5): in the first plan, and in the re-plan
where the first round saw no factor, a marginal gets more budget only where, at the budget the plan
gives it, enough of its nodes would pass their count threshold to enter the fit on their own; else
it would feed only its pool, a map-wide mean that spends the noise of all its nodes.

Fakes stand in for the engine's private phase objects: only the public-by-construction fields the
two functions read (node counts, the count's noisy values and law, the budget reached)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpopt.hierarchy.node_means import BETWEEN_SDS, MIN_LEVELS, count_threshold
from dpopt.measurements import NoiseLaw
from dpopt.privacy.user.engine import _nodes_passing, _weakest


def _fake(snrs: list[np.ndarray], levels: list[float]):
    """(b, phase): marginals whose count noise sd is 1 (Laplace scale 1/√2) and counts equal the given
    SNRs; one listed grid per node of the largest."""
    G = max(len(s) for s in snrs)
    b = SimpleNamespace(cands=[SimpleNamespace(n_nodes=len(s), code=np.arange(G) % len(s)) for s in snrs],
                        clamp=60.0, cap=4)
    law = [NoiseLaw("laplace", np.full(len(s), 1.0 / np.sqrt(2.0))) for s in snrs]
    phase = SimpleNamespace(levels={("count", i): lv for i, lv in enumerate(levels)},
                            count=[np.asarray(s, dtype=float) for s in snrs], count_law=law)
    return b, phase


def test_nodes_passing_reads_the_lower_end_and_grows_with_the_budget():
    rng = np.random.default_rng(0)
    snr = rng.uniform(0, 6, 40)
    b, phase = _fake([snr], [0.1])
    t = count_threshold(40)
    assert _nodes_passing(b, phase, 0, 0.0) == int(np.sum(snr - BETWEEN_SDS >= t))
    counts = [_nodes_passing(b, phase, 0, more) for more in (0.0, 0.1, 0.5, 2.0, 1e9)]
    assert counts == sorted(counts)  # more budget never lifts fewer nodes
    assert counts[-1] == int(np.sum(snr > BETWEEN_SDS))  # in the limit every node above the margin passes
    # a marginal not yet measured, or of fewer than MIN_LEVELS nodes, projects nothing
    b2, phase2 = _fake([snr, np.full(MIN_LEVELS - 1, 50.0)], [0.0, 0.1])
    assert _nodes_passing(b2, phase2, 0, 1.0) == 0 and _nodes_passing(b2, phase2, 1, 1.0) == 0


def test_weakest_names_the_held_marginal_that_cannot_lift_its_nodes():
    strong = np.full(24, 12.0)  # passes at once
    weak = np.r_[np.full(3, 12.0), np.full(21, 0.5)]  # three nodes only, whatever the budget
    b, phase = _fake([strong, weak, strong], [0.1, 0.1, 0.0])
    held = np.array([0.1, 0.1, 0.0])
    more = np.array([0.5, 0.5, 0.5])
    busy = {"grid_n": np.full(24, 1e6), "unit": "epsilon"}  # the unmeasured third predicted to pass
    assert _weakest(b, phase, more, held, np.zeros(3), **busy) == 1
    # given no more than it holds, or already fixed, it is not asked about
    assert _weakest(b, phase, np.array([0.5, 0.1, 0.5]), held, np.zeros(3), **busy) is None
    assert _weakest(b, phase, more, held, np.array([0.0, 0.1, 0.0]), **busy) is None
    # of two weak ones, the one with fewer passing nodes first
    weaker = np.r_[np.full(1, 12.0), np.full(23, 0.5)]
    b, phase = _fake([weak, weaker], [0.1, 0.1])
    assert _weakest(b, phase, np.array([0.5, 0.5]), np.array([0.1, 0.1]), np.zeros(2), **busy) == 1


def test_weakest_reads_an_unmeasured_marginal_off_its_predicted_counts():
    """A marginal no earlier round measured (the first plan's every marginal) is read off the
    predicted kept counts: the PM2.5 check at ε = 1 (T = 256, B = 406.25; 42 day nodes of ≈ 3,400
    predicted records each) — the first plan gave the days 0.49 of ε, at which no node's count
    clears its threshold, and the release answered with a map-wide mean noisier than the map's own.
    The switch is exactly where the threshold times the count's noise sd meets the node count; a
    marginal of fewer than ``MIN_LEVELS`` nodes (the map) is never named: it has no factor to see."""
    from dpopt.privacy.user.split import split_budget

    days, per_day = 42, 10
    code_day = np.repeat(np.arange(days), per_day)
    b = SimpleNamespace(cands=[SimpleNamespace(n_nodes=days, code=code_day),
                               SimpleNamespace(n_nodes=1, code=np.zeros(days * per_day, dtype=np.int64)),
                               SimpleNamespace(n_nodes=2, code=code_day % 2)], clamp=406.25, cap=256)
    phase = SimpleNamespace(levels={}, count=[], count_law=[])
    grid_n = np.full(days * per_day, 340.0)
    zeros = np.zeros(3)
    # the budget at which sqrt(2)·T/ε_count · t(42) = 3,400 (Laplace; the count's part of the split)
    count_part = split_budget(1.0, bound=406.25, unit="epsilon", weight_mean=1.0, weight_variance=0.0).count
    switch = np.sqrt(2.0) * 256 * count_threshold(days) / (3400.0 * count_part)
    for eps in (0.49, 0.9 * switch):
        assert _weakest(b, phase, np.array([eps, 1e-3, 1e-3]), zeros, zeros, grid_n=grid_n, unit="epsilon") == 0
    assert _weakest(b, phase, np.array([1.1 * switch, 1e-3, 1e-3]), zeros, zeros, grid_n=grid_n,
                    unit="epsilon") is None
    # the same nodes measured once already: read off their counts, not the prediction
    phase = SimpleNamespace(levels={("count", 0): 0.1}, count=[np.full(days, 12.0)],
                            count_law=[NoiseLaw("laplace", np.full(days, 1.0 / np.sqrt(2.0)))])
    assert _weakest(b, phase, np.array([0.49, 1e-3, 1e-3]), np.array([0.1, 0.0, 0.0]), zeros, grid_n=grid_n,
                    unit="epsilon") is None


def test_the_first_round_is_grown_once_only_where_it_saw_nothing_and_the_rest_could_lift_a_marginal(monkeypatch):
    """``_grow_first_round`` (models/engine.md §5): seen a factor, or no marginal within reach of the
    rest: the round as it was; else one more measurement of the same plan, (ROUND1_GROWTH − 1) times
    each marginal's first budget (a solver's residue below TINY_STEP of the total not drawn)."""
    import dpopt.privacy.user.engine as eng

    first = np.array([0.3, 0.0, 1e-12, 0.6])
    calls = []
    def measure(b, mech, budgets, *, tag, prev):
        calls.append(budgets)
        return SimpleNamespace(spent={f"{tag} count x": float(budgets[0])})

    monkeypatch.setattr(eng, "_measure", measure)
    round1 = SimpleNamespace(spent={"round 1 count x": 0.3})
    for seen, reach in (({"cell × period"}, True), (set(), False)):
        monkeypatch.setattr(eng, "_pilot_components", lambda b, phase, names, s=seen: ({}, 0.0, s))
        monkeypatch.setattr(eng, "_within_reach", lambda b, phase, rest, r=reach: r)
        assert eng._grow_first_round(SimpleNamespace(names=[]), None, round1, first, 9.0) == (round1, first, "")
    assert calls == []
    monkeypatch.setattr(eng, "_pilot_components", lambda b, phase, names: ({}, 0.0, set()))
    monkeypatch.setattr(eng, "_within_reach", lambda b, phase, rest: True)
    phase, budgets, note = eng._grow_first_round(SimpleNamespace(names=[]), None, round1, first, 9.0)
    more = (eng.ROUND1_GROWTH - 1.0) * np.array([0.3, 0.0, 0.0, 0.6])
    assert np.array_equal(calls[0], more) and np.array_equal(budgets, first + more)
    assert phase.spent == {"round 1 count x": 0.3, "round 1, grown count x": 0.3}  # both rounds accounted
    assert "first round grown" in note


def test_a_grown_first_round_spends_the_total_once():
    """The embedded day at ε = 3, seed 1003 (its first round sees no factor): the strategy says the
    round was grown, and the pieces of the budget add up to the total (noise reduction: every
    marginal costs its final level, the grown round's step included)."""
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.release import GridOptions, contributions, load_austin_sample, release_user
    from dpopt.records.grid import cell_strings, slot_strings

    agg, _ = contributions(load_austin_sample(), bound=120.0, grid=GridOptions(7, "1h"), keep_samples=True)
    plist = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    r = release_user(agg, Budget(epsilon_total=3.0), UserOptions(partitions=plist), bound=agg.bound,
                     noise=NoiseOptions(seed=1003))
    eng = r.measurements.info.engine
    assert eng.strategy.startswith("first round grown")
    pieces = r.measurements.spend.pieces
    assert any(k.startswith("round 1, grown") for k in pieces)
    assert sum(pieces.values()) == pytest.approx(3.0, rel=1e-6)


def test_an_account_above_the_budget_stops_the_release():
    """``_check_account``: pure-ε pieces adding up to more than the budget stop the release; to the
    budget (less the sampler's rounding) or below (a plan that leaves some unspent) pass."""
    from dpopt.measurements import BudgetSpend
    from dpopt.privacy.options import Budget
    from dpopt.privacy.user.engine import _check_account

    for total in (9.999999991, 7.96, 10.0):
        _check_account(BudgetSpend(unit="epsilon", pieces={"a": total}, total=total), Budget(epsilon_total=10.0),
                       "epsilon")
    with pytest.raises(RuntimeError, match="accounting error"):
        _check_account(BudgetSpend(unit="epsilon", pieces={"a": 10.01}, total=10.01), Budget(epsilon_total=10.0),
                       "epsilon")


def _lattice(levels: list[tuple[int, int, int]]):
    """A stand-in for the bounded data's candidates: the names and marginals of ``levels``
    (resolution, slot_ns, cycle_ns), the finest first (resolution 8 × 1 h), the map at resolution 4."""
    from dpopt.hierarchy.lattice import Marginal

    marg = [Marginal(*lv) for lv in levels]
    names = [m.name(8, 3600 * 10**9) for m in marg]
    return SimpleNamespace(names=names, cands=[SimpleNamespace(marginal=m) for m in marg])


H, D = 3600 * 10**9, 24 * 3600 * 10**9
LEVELS = [(8, H, 0), (8, H, D), (8, D, 0), (8, 0, 0), (4, H, 0), (4, H, D), (4, D, 0), (4, 0, 0)]


def test_heredity_caps_an_unseen_interaction_at_its_smaller_parent():
    """An unseen place × time interaction's prior is at most min(place main, time main); a seen one,
    the mains, the map and the grids' residual keep their values."""
    from dpopt.privacy.user.engine import _heredity

    b = _lattice(LEVELS)
    assert b.names == ["cell × slot", "cell × hour-of-day", "cell × 1 d", "cell × period", "r4 × slot",
                       "r4 × hour-of-day", "r4 × 1 d", "r4 × period"]
    sigma2 = {"cell × hour-of-day": 300.0, "cell × 1 d": 300.0, "cell × period": 5.0, "r4 × slot": 360.0,
              "r4 × hour-of-day": 190.0, "r4 × 1 d": 360.0, "r4 × period": 160.0, "residual": 300.0}
    out = _heredity(b, sigma2, seen=set())
    assert out["cell × hour-of-day"] == 5.0 and out["cell × 1 d"] == 5.0
    assert {k: v for k, v in out.items() if k not in ("cell × hour-of-day", "cell × 1 d")} == \
        {k: v for k, v in sigma2.items() if k not in ("cell × hour-of-day", "cell × 1 d")}
    # the time parent the smaller one: the cap follows it
    out = _heredity(b, {**sigma2, "cell × period": 500.0, "r4 × hour-of-day": 40.0}, seen=set())
    assert out["cell × hour-of-day"] == 40.0 and out["cell × 1 d"] == 300.0
    # a fitted (seen) interaction is data, not prior: kept
    assert _heredity(b, sigma2, seen={"cell × 1 d"})["cell × 1 d"] == 300.0
    # equal priors (no vote): nothing changes
    even = {k: 100.0 for k in sigma2}
    assert _heredity(b, even, seen=set()) == even


def test_heredity_skips_an_interaction_whose_parent_is_not_a_candidate():
    from dpopt.privacy.user.engine import _heredity

    b = _lattice([lv for lv in LEVELS if lv != (4, D, 0)])  # no map × day
    sigma2 = {"cell × hour-of-day": 300.0, "cell × 1 d": 300.0, "cell × period": 5.0, "r4 × slot": 360.0,
              "r4 × hour-of-day": 190.0, "r4 × period": 160.0, "residual": 300.0}
    out = _heredity(b, sigma2, seen=set())
    assert out["cell × 1 d"] == 300.0 and out["cell × hour-of-day"] == 5.0


def test_an_unseen_factors_prior_is_the_grids_measured_spread_split_evenly_from_the_first_plan_on():
    """Where the fit saw no factor the prior's total is the DP upper end of the grids' means' variance
    (the between-grid statistic, measured in the pilot), not Popoviciu's B²/4: B²/4 = 900 here, and at
    U = 500 (an outside check's PM2.5) it was 35,000 against a true spread near 2,000 — every marginal
    promised more than any could show. Without the statistic B²/4 stands in; seen factors keep their
    fit and the rest share what they leave."""
    from dpopt.privacy.user.engine import _components

    b = _lattice(LEVELS)
    b.clamp = 60.0
    factors = {name: np.zeros(1) for name in b.names[1:]} | {"residual": np.zeros(1)}
    fitted = {f: 0.0 for f in factors}
    k = len(factors)
    measured = _components(b, factors, fitted, set(), spread=120.0, vote=None, cycle=None)
    assert measured == pytest.approx({f: 120.0 / (k + 1) for f in factors})
    public = _components(b, factors, fitted, set(), spread=None, vote=None, cycle=None)
    assert public == pytest.approx({f: b.clamp ** 2 / 4 / (k + 1) for f in factors})
    seen = _components(b, factors, {**fitted, "cell × period": 80.0}, {"cell × period"}, spread=120.0, vote=None,
                       cycle=None)
    assert seen["cell × period"] == 80.0
    assert seen["r4 × hour-of-day"] == pytest.approx(40.0 / k)  # what the seen factor leaves, over k − 1 + 1


def test_the_kept_count_read_off_the_record_histogram():
    """``_kept_from_histogram``: the plan's total kept count from the bounds' DP histogram of records
    per user. Noise-free counts: the estimate lies where every user's min(n, T) can, between the
    bins' lower and upper edges (each capped at T), as does the brute-force total; its variance is
    the histogram's Laplace noise carried through (a Monte-Carlo of 20,000 noisy histograms); and on
    the embedded day it is within 25 % of the kept count the cap T really keeps."""
    from dpopt.privacy.user.bounds import bin_representatives
    from dpopt.privacy.user.engine import _kept_from_histogram
    from dpopt.privacy.user.place_bounds import RECORD_BIN_EDGES, record_histogram_fields

    rng = np.random.default_rng(7)
    n_user = rng.integers(1, 6000, 300)
    T = 256
    edges = np.asarray(RECORD_BIN_EDGES)
    h = np.bincount(np.searchsorted(edges, n_user), minlength=edges.size + 1).astype(float)
    pb = SimpleNamespace(record_counts=h, cap=T, histogram=h, epsilon=0.15, low_histogram=None,
                         candidates=np.array([T]), cap_noise=np.array([1.0]))
    est, var = _kept_from_histogram(pb)
    lo = np.minimum(np.r_[0, edges] + 1, T) @ h
    hi = np.minimum(np.r_[edges, np.inf], T) @ h
    assert lo <= est <= hi and lo <= np.minimum(n_user, T).sum() <= hi
    eps_t = record_histogram_fields(pb)["epsilon"]
    k = np.minimum(bin_representatives(edges), T)
    draws = (h + rng.laplace(0.0, 1.0 / eps_t, (20000, h.size))) @ k
    assert np.var(draws) == pytest.approx(var, rel=0.05)
    assert _kept_from_histogram(SimpleNamespace(record_counts=None)) is None

    from dpopt.privacy.user.engine import _partition_list
    from dpopt.privacy.user.place_bounds import cap_candidates, choose_place_bounds, user_statistics
    from dpopt.noise.sources import SeededSource
    from dpopt.privacy.user import UserOptions
    from dpopt.release import GridOptions, contributions, load_austin_sample
    from dpopt.records.grid import cell_strings, slot_strings

    agg, _ = contributions(load_austin_sample(), bound=120.0, grid=GridOptions(7, "1h"), keep_samples=True)
    plist = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    _, _, eligible = _partition_list(agg, UserOptions(partitions=plist))
    pb = choose_place_bounds(agg, eligible, 1.5, bound=120.0, source=SeededSource(3),
                             candidates=cap_candidates(120.0, 16), two_sided=True)
    n_user, _ = user_statistics(agg, eligible, 120.0)
    kept = float(np.minimum(n_user, pb.cap).sum())
    assert _kept_from_histogram(pb)[0] == pytest.approx(kept, rel=0.25)


def test_unidentifiable_names_the_factors_of_fewer_than_min_levels_nodes():
    """``_unidentifiable``: a factor whose marginal has fewer than ``MIN_LEVELS`` nodes (the estimate's
    rule, ``node_means.identified``) and only those the plan holds as factors."""
    from dpopt.privacy.user.engine import _unidentifiable

    sizes = {"cell × slot": 40, "r3 × 1 d": MIN_LEVELS - 1, "r3 × period": 2, "r3 × slot": MIN_LEVELS,
             "cell × period": 12}
    b = SimpleNamespace(names=list(sizes), cands=[SimpleNamespace(n_nodes=n) for n in sizes.values()])
    factors = {name: np.zeros(1) for name in list(sizes)[1:]} | {"residual": np.zeros(1)}
    assert _unidentifiable(b, factors) == ["r3 × 1 d", "r3 × period"]
    assert _unidentifiable(b, {"cell × period": np.zeros(1)}) == []


def test_the_plan_credits_no_factor_the_estimate_cannot_identify(monkeypatch):
    """On one day of data the regions over the day (r3 × 1 d: two regions × two calendar days) and over
    the period have fewer than ``MIN_LEVELS`` nodes: the estimate fits no component for them
    (``node_means.identified``), so no plan's strategy problem holds them as factors, while every
    factor it does hold keeps the prior the split over all candidates gave it (their share stays in
    the split). Before, the first plan at ε = 1 put 0.12 of ε on r3 × 1 d for its factor and the
    release answered with a map-wide mean those four nodes' pool made noisier."""
    import dpopt.privacy.user.engine as eng
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.records.grid import cell_strings, slot_strings
    from dpopt.release import GridOptions, contributions, load_austin_sample, release_user

    problems, components = [], []
    solve, split = eng.solve_strategy, eng._components

    def recording_solve(problem, **kw):  # each problem with the prior split of the plan that posed it
        problems.append((problem, components[-1]))
        return solve(problem, **kw)

    def recording_split(b, factors, *a, **kw):
        out = split(b, factors, *a, **kw)
        components.append((dict(out), {name: mn.n_nodes for name, mn in zip(b.names, b.cands)}))
        return out

    monkeypatch.setattr(eng, "solve_strategy", recording_solve)
    monkeypatch.setattr(eng, "_components", recording_split)
    agg, _ = contributions(load_austin_sample(), bound=120.0, grid=GridOptions(7, "1h"), keep_samples=True)
    plist = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    release_user(agg, Budget(epsilon_total=1.0), UserOptions(partitions=plist), bound=agg.bound,
                 noise=NoiseOptions(seed=1000))
    assert problems and components
    sizes = components[0][1]
    few = {name for name, n in sizes.items() if n < MIN_LEVELS and n > 1}
    assert {"r3 × 1 d", "r3 × period"} <= few  # the case is there: the split did hold them
    assert all(few <= set(c) for c, _ in components)
    for problem, (prior, _) in problems:
        assert not few & set(problem.factors)
        held = {f: v for f, v in problem.sigma2.items() if f != "mean"}
        assert held == {f: v for f, v in prior.items() if f not in few}
        # their nodes stay candidates, informing the mean (and factors constant on them) only
        for c in problem.candidates:
            assert not few & set(c.informs)
