"""Total-budget releases under privacy="public-occupancy" (models/budget.md): the published files are
checked against what they promise, recounted here from the files and the records, never from the
code under test.

* every user's spend, recounted in exact decimals from diagnostics/kept_pairs.csv and the budget
  columns of release.csv, is ≤ ``epsilon_total``, and the largest is summary.json's epsilon_total;
* withheld grids publish nothing; values are post-processed into [0, U] and [0, U²/4];
* the error-bound columns are ordered, switch with the criterion, grow with the confidence, and
  the noise bound covers the kept records' mean at least as often as it says (numpy sampler, many
  seeds, a binomial tolerance);
* bad combinations of budget options are refused before any data is read, naming the argument.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from ._spend import exact, user_spend

from dpopt import DpoptInputError
from dpopt.release import (Budget, EstimationOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions,
                           austin_sample_path, contributions, release, release_aggregate, write_release)

from .conftest import P1, P2

U = 120.0
EPS_TOTAL = 10.0
PLANS = ("baseline", "greedy", "milp", "budget")


def _release(plan: str, *, criterion: str = "noise", confidence: float = 0.95):
    return release(austin_sample_path(), bound=U, budget=Budget(epsilon_total=EPS_TOTAL),
                   model=PublicOccupancyOptions(plan=plan, time_limit=5, criterion=criterion),
                   estimation=EstimationOptions(confidence=confidence), noise=NoiseOptions(seed=7))


@pytest.fixture(scope="module", params=PLANS)
def written(request, tmp_path_factory):
    """(result, release.csv read as text, summary.json, kept_pairs.csv) of one plan."""
    res = _release(request.param)
    out = tmp_path_factory.mktemp(f"total-{request.param}") / "out"
    write_release(res, out, make_map=False)
    text = pd.read_csv(out / "release.csv", dtype=str, keep_default_na=False)
    numbers = pd.read_csv(out / "release.csv")
    summary = json.loads((out / "summary.json").read_text())
    kept = pd.read_csv(out.with_name(out.name + ".diagnostics") / "kept_pairs.csv", dtype={"user": str})
    return res, text, numbers, summary, kept




@pytest.mark.slow
def test_every_users_exact_spend_is_within_the_total(written):
    res, text, _, summary, kept = written
    spend = user_spend(text, kept, "epsilon")
    assert spend, "nothing kept"
    worst = max(spend.values())
    assert worst <= Fraction(EPS_TOTAL)
    assert summary["budget_mode"] == "total" and summary["mechanism"] == "laplace"
    # summary.json's epsilon_total is the exact largest spend (a multiple of 2^-30: exact in a float)
    assert Fraction(summary["epsilon_total"]) == worst
    assert summary["epsilon"] is None


def test_budget_columns_never_exceed_the_grids_budget(written):
    res, text, _, _, _ = written
    plan = res.plan
    on = text["released"] == "True"
    for g in np.flatnonzero(on.to_numpy()):
        mu, var, tot = (exact(text.loc[g, k]) for k in ("epsilon_mean", "epsilon_variance", "epsilon"))
        assert mu > 0 and var > 0
        assert mu + var == tot  # the grid column is the exact sum of the published shares
        # the grid's budget in the plan (one B/K for all grids, or the budget planner's own)
        b = Fraction(plan.info["budget"]) if "budget" in plan.info else Fraction(float(plan.budget[g]))
        assert Fraction(tot) <= b
        assert float(text.loc[g, "epsilon_mean"]) + float(text.loc[g, "epsilon_variance"]) <= float(b)
    off = ~on
    assert (text.loc[off, ["epsilon", "epsilon_mean", "epsilon_variance"]] == "").all().all()


def test_seed_planners_spend_the_total_as_b_over_k(written):
    """K (summary.degradation) recounted from kept_pairs.csv over released grids; for baseline,
    greedy and milp every released grid's budget is then b = ⌊B·2^30/K⌋/2^30 (the largest multiple of
    2^-30 with K·b ≤ B), up to the two shares' rounding down to 2^-30 (< 2 units)."""
    res, text, _, summary, kept = written
    on = {(c, s) for c, s, r in zip(text["cell"], text["slot"], text["released"]) if r == "True"}
    per_user = kept[[(c, s) in on for c, s in zip(kept["cell"], kept["slot"])]].groupby("user").size()
    K = int(per_user.max())
    assert summary["degradation"] == K
    if res.plan.method.startswith("budget"):
        return  # non-uniform budgets: covered by the exact recount of every user's spend
    b = Fraction(math.floor(Fraction(EPS_TOTAL) * 2**30 / K), 2**30)
    assert K * b <= EPS_TOTAL < K * (b + Fraction(1, 2**30))
    unit = Fraction(1, 2**30)
    for m, v in zip(text.loc[text["released"] == "True", "epsilon_mean"],
                    text.loc[text["released"] == "True", "epsilon_variance"]):
        total = exact(m) + exact(v)
        assert b - 2 * unit <= total <= b


def test_withheld_grids_publish_nothing(written):
    res, _, numbers, summary, _ = written
    t = numbers
    off = ~t["released"].astype(bool)
    cols = ["mean", "variance", "mean_raw", "variance_raw", "mean_error_bound", "variance_error_bound",
            "mean_error_bound_worst_case", "variance_error_bound_worst_case"]
    assert t.loc[off, cols].isna().all().all()
    # a released variance is blank exactly where its interval is the whole range
    vcols = ["variance", "variance_raw", "variance_error_bound"]
    shown = t["variance_released"].astype(bool)
    assert t.loc[~off & shown, cols].notna().all().all()
    assert t.loc[~off & ~shown, [c for c in cols if c not in vcols]].notna().all().all()
    assert t.loc[~off & ~shown, vcols].isna().all().all()
    from dpopt.estimation.direct import VARIANCE_NEGATIVE_REASON

    v, e = res.estimates.table["variance_in_range"], res.estimates.table["variance_error_bound_noise"]
    whole = (v - e <= 0) & (v + e >= U * U / 4)
    negative = t["variance_withheld_reason"].astype(str) == VARIANCE_NEGATIVE_REASON  # never a clipped 0
    assert (shown == (~off & ~whole & ~negative)).all()
    assert summary["released_grids"] == int((~off).sum())
    assert summary["withheld_grids"] == int(off.sum())
    if res.plan.method == "baseline":
        assert not off.any()  # baseline keeps everything, every grid has a record
    if res.plan.method.startswith("budget"):
        assert off.any()  # at ε = 10 in total the planner withholds most of the 1449 grids


@pytest.mark.parametrize("source", ["table", "csv"])
def test_values_are_post_processed_into_their_ranges(written, source):
    res, _, numbers, _, _ = written
    t = res.table if source == "table" else numbers
    on = t["released"].astype(bool)
    mean = t.loc[on, "mean"]
    assert mean.between(0, U).all()
    assert (mean == t.loc[on, "mean_raw"].clip(0, U)).all()
    on = on & t["variance_released"].astype(bool)  # withheld variances are blank (the table is release.csv)
    var = t.loc[on, "variance"]
    assert var.between(0, U * U / 4).all()
    assert (var == t.loc[on, "variance_raw"].clip(0, U * U / 4)).all()


def test_error_bound_columns(written):
    res, _, _, summary, _ = written
    t = res.table
    on = t["released"].astype(bool).to_numpy()
    assert summary["criterion"] == "noise" and summary["confidence"] == 0.95
    for stat in ("mean", "variance"):
        noise, worst = t[f"{stat}_error_bound"].to_numpy(), t[f"{stat}_error_bound_worst_case"].to_numpy()
        if stat == "variance":  # a variance whose interval is the whole range is withheld with its bound
            noise = res.estimates.table["variance_error_bound_noise"].to_numpy()
            assert np.isnan(t["variance_error_bound"].to_numpy()[~t["variance_released"].to_numpy(bool)]).all()
        assert np.isfinite(noise[on]).all() and np.isfinite(worst[on]).all()
        assert np.isnan(noise[~on]).all() and np.isnan(worst[~on]).all()
        assert (noise[on] > 0).all() and (noise[on] <= worst[on]).all()


def test_criterion_switch_swaps_columns_and_confidence_is_monotone():
    base = _release("baseline")
    swapped = _release("baseline", criterion="worst_case")
    low = _release("baseline", confidence=0.5)
    assert swapped.summary.criterion == "worst_case"
    a, b, c = base.table, swapped.table, low.table
    for stat in ("mean", "variance"):
        shown = a["variance_released"].to_numpy(bool) if stat == "variance" else np.ones(len(a), bool)
        pd.testing.assert_series_equal(a[f"{stat}_error_bound"][shown], b[f"{stat}_error_bound_noise"][shown],
                                       check_names=False)
        shown_b = b["variance_released"].to_numpy(bool) if stat == "variance" else np.ones(len(b), bool)
        pd.testing.assert_series_equal(a[f"{stat}_error_bound_worst_case"][shown_b], b[f"{stat}_error_bound"][shown_b],
                                       check_names=False)
        assert (c[f"{stat}_error_bound"][shown] < a[f"{stat}_error_bound"][shown]).all()
        assert (c[f"{stat}_error_bound_worst_case"] < a[f"{stat}_error_bound_worst_case"]).all()
    # same seed, same plan: the released values do not depend on the reported bounds
    pd.testing.assert_series_equal(a["mean_raw"], b["mean_raw"])


def test_budget_plan_publishes_a_frontier(written):
    res, _, _, summary, _ = written
    if not res.plan.method.startswith("budget"):
        assert summary["frontier"] is None and summary["target"] is None
        assert summary["grids_within_target"] is None
        return
    fr = summary["frontier"]
    assert fr is not None
    tau, cov = np.asarray(fr["tau"], dtype=float), np.asarray(fr["coverage"], dtype=float)
    assert tau.size >= 2 and tau.size == cov.size
    assert (np.diff(tau) > 0).all()
    assert (np.diff(cov) >= 0).all()
    assert summary["target"] is not None and summary["grids_within_target"] is not None
    assert 0 <= summary["grids_within_target"] <= summary["released_grids"]


# ----------------------------------------------------------------------------------------------
# empirical coverage of the noise bound


def small_records(rng: np.random.Generator, users: int = 10, *, hours: int = 2, roamer: bool = False) -> pd.DataFrame:
    """Grids (2 cells × ``hours`` hours); each user has 1-6 records in a random subset of them,
    values in [0, 110] (some clipped to U = 100). ``roamer``: plus one user with one record in every
    grid, whom CLIP-USER suppresses somewhere to lower K."""
    rows = []
    t0 = pd.Timestamp("2020-01-01T10:00:00Z")
    for u in range(users):
        for g in np.flatnonzero(rng.random(2 * hours) < 0.7):
            for _ in range(int(rng.integers(1, 7))):
                t = t0 + pd.Timedelta(hours=int(g // 2), seconds=int(rng.integers(3600)))
                rows.append((f"u{u}", *(P1, P2)[g % 2], t, float(np.round(110 * rng.random(), 3))))
    for g in range(2 * hours if roamer else 0):
        t = t0 + pd.Timedelta(hours=int(g // 2), seconds=int(rng.integers(3600)))
        rows.append(("roamer", *(P1, P2)[g % 2], t, float(np.round(110 * rng.random(), 3))))
    return pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])


def _kept_record_means(records: pd.DataFrame, res, *, everyone: bool = False) -> np.ndarray:
    """Mean of the (clipped) records of the kept (user, grid) pairs — or of all records with
    ``everyone`` — per grid of ``res``, from the records themselves."""
    kept = set()
    agg = res.aggregate
    gamma = res.gamma()
    cells, slots = agg.grid_labels()
    for p in np.flatnonzero(gamma > 0):
        assert gamma[p] == agg.count[p]  # no truncation without pseudo-users
        g = agg.pair_grid[p]
        kept.add((str(agg.users[agg.pair_user[p]]), cells[g], slots[g]))
    import h3

    lab = pd.DataFrame({
        "user": records["user_id"].astype(str),
        "cell": [h3.latlng_to_cell(a, b, 7) for a, b in zip(records["latitude"], records["longitude"])],
        "slot": pd.to_datetime(records["timestamp"], utc=True).dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "value": records["value"].clip(0, 100.0),
    })
    mask = np.asarray([everyone or k in kept for k in zip(lab["user"], lab["cell"], lab["slot"])])
    means = lab[mask].groupby(["cell", "slot"])["value"].mean()
    return np.asarray([means.get((c, s), np.nan) for c, s in zip(cells, slots)])


@pytest.mark.parametrize("plan", ["baseline", "greedy"])
@pytest.mark.slow
def test_noise_bound_covers_the_kept_mean_at_its_confidence(plan):
    """numpy sampler, 300 seeds: `noise` bounds cover the kept records' mean, `worst_case` bounds
    the mean of all records, each at least a fraction q of the time (binomial tolerance, 4 s.d.)."""
    records = small_records(np.random.default_rng(5), hours=4, roamer=True)
    agg, ingest = contributions(records, bound=100.0)
    q = 0.8
    first = release_aggregate(agg, Budget(epsilon_total=4.0), PublicOccupancyOptions(plan=plan),
                              noise=NoiseOptions("numpy", seed=0), confidence=q, ingest=ingest)
    truth = _kept_record_means(records, first)
    everyone = _kept_record_means(records, first, everyone=True)
    on = first.table["released"].to_numpy(dtype=bool)
    assert on.sum() >= 3
    if plan == "greedy":
        assert first.summary.suppressed_pairs > 0  # kept mean ≠ all-records mean somewhere
    hits = hits_wc = trials = 0
    for seed in range(300):
        r = release_aggregate(agg, Budget(epsilon_total=4.0), PublicOccupancyOptions(plan=plan),
                              noise=NoiseOptions("numpy", seed=seed), confidence=q, ingest=ingest)
        released = r.table["mean_raw"].to_numpy()[on]
        hits += int((np.abs(released - truth[on]) <= r.table["mean_error_bound"].to_numpy()[on]).sum())
        hits_wc += int((np.abs(released - everyone[on])
                        <= r.table["mean_error_bound_worst_case"].to_numpy()[on]).sum())
        trials += int(on.sum())
    tol = 4 * math.sqrt(q * (1 - q) / trials)
    rate, rate_wc = hits / trials, hits_wc / trials
    assert rate >= q - tol, (rate, trials)
    assert rate_wc >= q - tol, (rate_wc, trials)
    # not vacuous: at q = 0.8 the noise bound must also miss now and then (a bound far too wide fails)
    assert rate <= 1 - (1 - q) / 4, (rate, trials)


# ----------------------------------------------------------------------------------------------
# refused combinations: one line naming the argument, before any data is read


@pytest.mark.parametrize("options, name", [
    (lambda: {"budget": PerGridBudget(1.0), "model": PublicOccupancyOptions(plan="budget")}, "epsilon"),
    (lambda: {"budget": Budget(epsilon_total=10.0), "model": PublicOccupancyOptions(plan="baseline", target=5.0)},
     "target"),
    (lambda: {"budget": Budget(epsilon_total=10.0, rho=0.5)}, "rho"),
    (lambda: {"budget": Budget(rho=0.5)}, "rho"),
    (lambda: {"budget": Budget(epsilon_total=10.0, delta=1e-6)}, "delta"),
    (lambda: {"budget": Budget(epsilon_total=10.0), "estimation": EstimationOptions(confidence=0.0)}, "confidence"),
    (lambda: {"budget": Budget(epsilon_total=10.0), "estimation": EstimationOptions(confidence=1.0)}, "confidence"),
    (lambda: {"budget": Budget(epsilon_total=10.0), "estimation": EstimationOptions(confidence=float("nan"))},
     "confidence"),
])
def test_bad_combinations_are_refused(tiny_records, options, name):
    with pytest.raises(DpoptInputError) as exc:
        release(tiny_records, bound=100.0, **{"model": PublicOccupancyOptions(), **options()})
    msg = str(exc.value)
    assert f"`{name}`" in msg and "\n" not in msg


@pytest.mark.parametrize("eps_total", [200.0, 400.0, 1000.0, 3000.0])
def test_noise_bound_of_the_discrete_laplace_holds_exactly(tiny_records, eps_total):
    """The `noise` bound B of the exact sampler: released = round(f/λ)·λ + λ·Z with Z discrete
    Laplace of scale s = noise_scale/λ on ℤ (P[Z = z] ∝ r^|z|, r = e^{-1/s}), so the error exceeds B
    with probability at most P(|Z| > (B − λ/2)/λ) = 2r^{⌊x⌋+1}/(1 + r), computed here exactly; it
    must be ≤ 1 − q. A coarse output grid (λ = 1) makes the discreteness visible."""
    q = 0.95
    res = release(tiny_records, bound=100.0, budget=Budget(epsilon_total=eps_total),
                  model=PublicOccupancyOptions(plan="baseline"), estimation=EstimationOptions(confidence=q),
                  noise=NoiseOptions(seed=1, granularity_bits=0))
    lam = res.summary.granularity
    assert lam == 1.0
    t = res.table[res.table["released"]]
    for stat in ("mean", "variance"):
        s = t[f"{stat}_noise_scale"].to_numpy() / lam
        x = (t[f"{stat}_error_bound"].to_numpy() - lam / 2) / lam
        r = np.exp(-1.0 / s)
        miss = 2 * r ** (np.floor(x) + 1) / (1 + r)
        assert (miss <= 1 - q + 1e-12).all(), (stat, s, x, miss)


@pytest.mark.parametrize("plan", ["budget", "greedy"])
def test_neighbours_in_values_publish_the_same_plan_and_summary(plan):
    """public-occupancy neighbours (one user's values changed, same occupancy) publish identical
    summary.json (frontier, spend, bounds) and identical non-value columns: the plan, the budgets
    and the error bounds come from public counts only."""
    from dpopt.writers.release_folder import published_summary

    records = small_records(np.random.default_rng(8))
    other = records.copy()
    one = other["user_id"] == other["user_id"].iloc[0]
    other.loc[one, "value"] = 100.0 - other.loc[one, "value"].clip(0, 100)
    assert not np.allclose(records["value"], other["value"])
    a, b = (release(r, bound=100.0, budget=Budget(epsilon_total=4.0),
                    model=PublicOccupancyOptions(plan=plan, time_limit=5), noise=NoiseOptions(seed=3))
            for r in (records, other))
    assert a.summary.released_grids >= 1
    assert published_summary(a) == published_summary(b)
    # the values, and whether a noisy variance is withheld (post-processing of it, with its bound)
    values = ["mean", "variance", "mean_raw", "variance_raw", "variance_released", "variance_withheld_reason",
              "variance_error_bound"]
    pd.testing.assert_frame_equal(a.table.drop(columns=values), b.table.drop(columns=values))
    assert not a.table["mean_raw"].equals(b.table["mean_raw"])
