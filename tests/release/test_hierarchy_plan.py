"""public-occupancy --plan hierarchy: the hierarchy plan executed end to end (models/hierarchy.md).

Every expected value is recomputed from the records by brute force (h3 parents, slot arithmetic,
per-user kept records), not read from the code under test.
"""

from __future__ import annotations

import json
from fractions import Fraction

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.estimation import estimate
from dpopt.release import Budget, NoiseOptions, PublicOccupancyOptions, release, write_release
from dpopt.cli import main as cli_main

U, EPS, TAU = 100.0, 10.0, 15.0
NOISY = ["mean", "variance", "mean_raw", "variance_raw"]


def _records(seed: int = 0, n: int = 1200, users: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp("2021-06-01T00:00:00Z").value
    return pd.DataFrame({
        "user_id": rng.integers(0, users, n).astype(str),
        "latitude": 30.25 + 0.12 * rng.random(n),
        "longitude": -97.80 + 0.12 * rng.random(n),
        "timestamp": pd.to_datetime(t0 + rng.integers(0, 6 * 3600, n) * 1_000_000_000, utc=True),
        "value": np.round(U * rng.random(n), 3),
    })


def _release(df: pd.DataFrame, seed: int = 1, **kw):
    return release(df, bound=U, budget=Budget(epsilon_total=EPS),
                   model=PublicOccupancyOptions(plan="hierarchy", target=TAU, time_limit=20.0, **kw),
                   noise=NoiseOptions(seed=seed))


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return _records()


@pytest.fixture(scope="module")
def result(records):
    return _release(records)


@pytest.fixture(scope="module")
def written(result, tmp_path_factory):
    out = tmp_path_factory.mktemp("hier") / "out"
    write_release(result, out)
    return out


def _finest(records: pd.DataFrame) -> pd.DataFrame:
    """Records with their res-7 cell and 1 h slot start (ns), computed here with h3 directly."""
    d = records.copy()
    d["cell7"] = [h3.latlng_to_cell(a, b, 7) for a, b in zip(d["latitude"], d["longitude"])]
    ns = d["timestamp"].astype("int64").to_numpy()
    d["t"] = ns
    d["slot7"] = ns // (3600 * 10**9) * (3600 * 10**9)
    return d


def _in_node(d: pd.DataFrame, row: pd.Series) -> np.ndarray:
    """Which records lie in the node of release.csv row ``row`` (cell at its resolution, [slot, slot_end))."""
    res = int(row["h3_resolution"])
    par = np.asarray([h3.cell_to_parent(c, res) for c in d["cell7"]])
    lo, hi = pd.Timestamp(row["slot"]).value, pd.Timestamp(row["slot_end"]).value
    return (par == row["cell"]) & (d["t"].to_numpy() >= lo) & (d["t"].to_numpy() < hi)


@pytest.mark.slow
def test_mixed_resolutions_every_grid_answered(result):
    s = result.summary
    assert s.plan.startswith("hierarchy") and s.finest_grids == result.plan.info["hierarchy"]["answers"].shape[0]
    assert s.answered_grids == s.finest_grids  # this instance: every grid answered within tau
    assert result.table["h3_resolution"].nunique() >= 2 or result.table["level"].nunique() >= 2
    assert result.table["released"].all()
    assert not s.pseudo_users  # the caps are the plan's, not seed 002's pseudo-user clipping


def test_user_spend_recounted_from_release_csv(records, written):
    """Per user: the published nodes holding one of its records, their exact decimal budgets summed."""
    table = pd.read_csv(written / "release.csv", dtype={"epsilon": str})
    summary = json.loads((written / "summary.json").read_text())
    d = _finest(records)
    spend = {u: Fraction(0) for u in d["user_id"].unique()}
    for _, row in table.iterrows():
        for u in d.loc[_in_node(d, row), "user_id"].unique():
            spend[u] += Fraction(row["epsilon"])
    worst = max(spend.values())
    assert worst <= Fraction(EPS)
    assert float(worst) == pytest.approx(summary["epsilon_total"], rel=1e-12)
    assert summary["plan_status"] and summary["plan_gap"] is not None


def test_each_finest_grid_answered_by_its_finest_published_ancestor(records, written):
    table = pd.read_csv(written / "release.csv")
    answers = pd.read_csv(written / "answers.csv")
    d = _finest(records)
    grids = d.groupby(["cell7", "slot7"]).size().index
    assert len(answers) == len(grids)
    lo = np.asarray([pd.Timestamp(x).value for x in table["slot"]])
    hi = np.asarray([pd.Timestamp(x).value for x in table["slot_end"]])
    for _, a in answers.iterrows():
        t = pd.Timestamp(a["slot"]).value
        holds = [i for i, row in table.iterrows()
                 if h3.cell_to_parent(a["cell"], int(row["h3_resolution"])) == row["cell"] and lo[i] <= t < hi[i]]
        assert holds, f"grid {a['cell']} {a['slot']} lies in no published node"
        best = min(holds, key=lambda i: table.loc[i, "level"])
        assert a["node"] == best and a["node_cell"] == table.loc[best, "cell"]
        assert table.loc[best, "mean_error_bound"] <= TAU * (1 + 1e-6)


def test_node_statistics_keep_a_sample_of_c_records_of_each_user(records, result):
    """The exact (pre-noise) CLIP mean of every node from each user's min(m, c) records in the node —
    brute force: all records where no user is over the cap; elsewhere between the means that keep the
    c smallest and the c largest values of every user over it (the kept ones are a keyed sample; its
    law is tested in tests/records/test_sample.py)."""
    d = _finest(records)
    tab = result.table
    exact = 0
    for i, row in tab.iterrows():
        sel = d[_in_node(d, row)]
        cap = int(row["array_length"])
        assert row["n_records"] == len(sel) and row["n_users"] == sel["user_id"].nunique()
        assert row["n_records_retained"] == sel.groupby("user_id").size().clip(upper=cap).sum()
        by_value = sel.sort_values("value", kind="stable").groupby("user_id", sort=False)
        lo, hi = by_value.head(cap)["value"].mean(), by_value.tail(cap)["value"].mean()
        got = result.grids.estimate_mean[i]
        if sel.groupby("user_id").size().max() <= cap:
            assert got == pytest.approx(sel["value"].mean(), rel=1e-9)
            exact += 1
        assert lo * (1 - 1e-9) <= got <= hi * (1 + 1e-9)
    assert 0 < exact < len(tab)  # both kinds of node are checked


def test_plan_predicted_errors_match_the_stated_bounds(result):
    """The planner's predicted mean bound (criterion noise, q = 0.95) vs the mechanism's stated one:
    stated = predicted + the lattice slack of the exact sampler (λ for discrete Laplace), the
    sampler's scale rounded up from the planned one (rounded budgets; measured ≈ 1.5e-4 relative)."""
    hp = result.plan.info["hierarchy_plan"]
    pred = hp.predicted_error[np.flatnonzero(hp.plan.released)]
    stated = result.table["mean_error_bound"].to_numpy()
    lam = result.summary.granularity
    assert np.all(stated >= pred * (1 - 1e-9))
    assert np.all(stated <= pred * (1 + 1e-3) + lam)
    assert np.all(pred <= TAU * (1 + 1e-9))


@pytest.mark.slow
def test_neighbour_changes_only_noisy_outputs(records, result):
    """Change every value of one user: the public outputs (plan, nodes, counts, budgets, bounds,
    answers, summary) are identical; only the noisy statistics may differ."""
    other = records.copy()
    u = other["user_id"] == other["user_id"].iloc[0]
    other.loc[u, "value"] = U - other.loc[u, "value"]
    r2 = _release(other)
    a, b = result.table.drop(columns=NOISY), r2.table.drop(columns=NOISY)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(result.plan.info["hierarchy"]["answers"], r2.plan.info["hierarchy"]["answers"])
    assert result.summary == r2.summary


@pytest.mark.slow
def test_seeded_runs_reproduce_and_files_render(records, result, written):
    r2 = _release(records)
    pd.testing.assert_frame_equal(result.table, r2.table)
    assert (written / "report.html").stat().st_size > 0 and (written / "answers.csv").exists()
    table = pd.read_csv(written / "release.csv")
    assert {"slot_end", "h3_resolution", "mean", "mean_error_bound", "released"} <= set(table.columns)
    summary = json.loads((written / "summary.json").read_text())
    assert summary["answered_grids"] == summary["finest_grids"] and summary["target"] == TAU


def test_measurements_carry_the_node_table(result):
    m = result.measurements
    hp_nodes = result.plan.info["hierarchy"]["nodes"]
    assert list(m.nodes.columns) == ["cell", "h3_resolution", "slot", "slot_ns", "parent", "cycle_ns"]
    assert (m.nodes["cycle_ns"] == 0).all()  # no --profile: contiguous slots only (models/hierarchy.md §2)
    assert np.array_equal(m.nodes["h3_resolution"].to_numpy(), hp_nodes["h3_resolution"].to_numpy())
    par = m.nodes["parent"].to_numpy()
    lv = hp_nodes["level"].to_numpy()
    assert np.all((par == -1) | (lv[np.maximum(par, 0)] > lv))
    tab = result.table
    for i in np.flatnonzero(par >= 0):  # the parent node contains the child (space and time)
        p = tab.iloc[par[i]]
        assert h3.cell_to_parent(tab["cell"].iloc[i], int(p["h3_resolution"])) == p["cell"]
        assert p["slot"] <= tab["slot"].iloc[i] and tab["slot_end"].iloc[i] <= p["slot_end"]
    assert np.array_equal(m.finest["node"].to_numpy(), result.plan.info["hierarchy"]["answer"])
    est = estimate(m, method="direct", confidence=result.summary.confidence)  # the estimation layer agrees
    assert np.array_equal(est.table["mean_error_bound"].to_numpy(), result.table["mean_error_bound"].to_numpy())
    assert np.array_equal(est.table["h3_resolution"].to_numpy(), hp_nodes["h3_resolution"].to_numpy())


def test_options_refused_where_idle():
    with pytest.raises(DpoptInputError, match="split"):
        PublicOccupancyOptions(plan="hierarchy", split="optimal").for_plan("hierarchy")
    with pytest.raises(DpoptInputError, match="target_variance"):
        PublicOccupancyOptions(plan="hierarchy", target_variance=3.0).for_plan("hierarchy")


@pytest.mark.slow
def test_cli_runs_the_hierarchy_plan(records, tmp_path):
    path = tmp_path / "r.csv"
    records.to_csv(path, index=False)
    out = tmp_path / "out"
    code = cli_main(["release", str(path), "--bound", str(U), "--privacy", "public-occupancy", "--epsilon-total",
                     str(EPS), "--plan", "hierarchy", "--target", str(TAU), "--seed", "3", "--out", str(out)])
    assert code in (0, None)
    assert (out / "answers.csv").exists() and json.loads((out / "summary.json").read_text())["plan"].startswith("hier")
    # from a file the truncated pairs are re-read from the records: the same release as from samples
    same = _release(records, seed=3).table
    assert (same["array_length"] < same["max_user_records"]).any()  # some user is truncated to a cap
    csv = pd.read_csv(out / "release.csv")
    assert np.allclose(csv["mean_raw"], same["mean_raw"], rtol=1e-9)
    assert np.array_equal(csv["n_records_retained"], same["n_records_retained"])


@pytest.mark.slow
def test_gaussian_noise_spends_rho_within_the_total(records):
    """zCDP: the same plan in ρ; every user's recounted ρ ≤ the total the (ε, δ) budget gives."""
    from dpopt.privacy.public_occupancy import to_privacy_budget

    budget = Budget(epsilon_total=EPS, delta=1e-6, mechanism="gaussian")
    r = release(records, bound=U, budget=budget,
                model=PublicOccupancyOptions(plan="hierarchy", target=TAU, time_limit=20.0), noise=NoiseOptions(seed=2))
    total = to_privacy_budget(budget).total
    kept = r.plan.retained.toarray() > 0
    spend = kept @ (r.table["rho_mean"].to_numpy() + r.table["rho_variance"].to_numpy())
    assert 0 < r.summary.rho_total <= total and spend.max() <= total * (1 + 1e-12)
    assert np.all(r.table["mean_error_bound"] <= TAU + 1.5 * r.summary.granularity + 1e-9)
