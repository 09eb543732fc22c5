"""`dpopt.sweep`: models over instances × ε into a tidy table, each row the model's own answer."""

from __future__ import annotations

import numpy as np
import pytest

import dpopt


def _instances(seed, k=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        M = np.where(rng.random((12, 4)) < 0.6, rng.integers(1, 15, (12, 4)), 0)
        M[:, 0] += 1
        out.append(dpopt.Occupancy.from_dense(M))
    return out


def test_every_row_is_the_models_own_answer():
    inst = _instances(0)
    eps = [0.5, 2.0]
    df = dpopt.sweep(inst, eps, bound=1.0)
    assert len(df) == 3 * 3 * 2 and set(df["model"]) == {"clipping", "array_length", "suppression"}
    for i, occ in enumerate(inst):
        totals = np.asarray(occ.matrix.sum(axis=1)).ravel()
        for e in eps:
            row = df[(df.instance == i) & (df.epsilon == e)].set_index("model")
            assert row.loc["clipping", "error"] == dpopt.optimal_clipping(totals, 1.0, e).error
            assert row.loc["array_length", "length"] == dpopt.optimal_array_length(totals, 1.0, e).length
            plan = dpopt.solve_suppression(occ, 1.0, e, tie_break=False)
            assert row.loc["suppression", "degradation"] == plan.degradation
            assert row.loc["suppression", "error"] == plan.max_error
    assert (df["seconds"] >= 0).all() and (df["status"] == "optimal").all()


def test_named_instances_counts_and_a_custom_model():
    p = dpopt.clipping_problem([3, 9, 1, 4], 1.0, 1.0, objective="mse")

    def mse(counts, occ, bound, epsilon, **_):
        return p.set_epsilon(epsilon).solve_plan()

    df = dpopt.sweep({"a": [3, 9, 1, 4]}, [0.3, 1.0, 3.0], bound=1.0, models={"mse": mse, "closed": "clipping"})
    assert list(df["instance"].unique()) == ["a"] and len(df) == 6
    for e in (0.3, 1.0, 3.0):
        fresh = dpopt.clipping_problem([3, 9, 1, 4], 1.0, e, objective="mse").solve_plan()
        got = df[(df.model == "mse") & (df.epsilon == e)]["error"].item()
        assert got == pytest.approx(fresh.error, rel=1e-7)  # the DPP re-solve equals a fresh model


def test_bad_models_and_instances_are_refused():
    with pytest.raises(dpopt.DpoptInputError, match="`models`"):
        dpopt.sweep([[1, 2]], 1.0, bound=1.0, models=["anneal"])
    with pytest.raises(dpopt.DpoptInputError, match="instances"):
        dpopt.sweep([np.ones((2, 2))], 1.0, bound=1.0)


def test_every_result_has_summary_and_to_frame():
    occ = _instances(1, 1)[0]
    plan = dpopt.solve_suppression(occ, 1.0, 1.0)
    results = [dpopt.optimal_clipping([1, 2, 3], 1.0, 1.0), dpopt.optimal_array_length([1, 2, 3], 1.0, 1.0),
               plan, dpopt.pseudo_user_clipping(occ, 1.0, 1.0, plan),
               dpopt.suppression_frontier(occ, 1.0, 1.0, time_limit=60)]
    for r in results:
        assert isinstance(r.summary(), dict) and len(r.to_frame()) >= 0
        assert "\n" not in repr(r) or isinstance(r, dpopt.SuppressionFrontier)
    assert len(plan.to_frame()) == len(plan.suppressed)
