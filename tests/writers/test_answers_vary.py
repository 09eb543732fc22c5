"""summary.json's ``answers_vary_by`` and the words every writer puts on it: a release whose crossed
fit found no factor answers every grid with one map-wide mean, and says so (console, report.md,
report.html, the example's sentence) with what would change it; one that found factors names them.
The claim is checked against the published answers themselves, not against the code that writes it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import release_user
from dpopt.writers._published import REWEIGHTING_SHOWN, answers_vary_text
from dpopt.writers.console import console_summary
from dpopt.writers.report_md import report_markdown
from tests.privacy.user.conftest import additive_rows, make_agg

SAME = "every grid is answered by the same map-wide mean"


def _release(eps: float, seed: int, n_users: int = 60):
    agg = make_agg(additive_rows(seed, n_users, noise_sd=1.0))
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    return release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=parts), bound=100.0,
                        noise=NoiseOptions(seed=seed))


def _answered_means(r) -> np.ndarray:
    """The mean of the release.csv row answers.csv names for each listed grid."""
    t, a = r.table, r.answers
    key = ["cell", "slot", "slot_end"]
    rows = a.rename(columns={"node_cell": "cell_n", "node_slot": "slot_n", "node_slot_end": "end_n"})
    joined = rows.merge(t[key + ["mean"]], left_on=["cell_n", "slot_n", "end_n"], right_on=key, how="left")
    assert len(joined) == len(a) and joined["mean"].notna().all()
    return joined["mean"].to_numpy(float)


def test_the_words_for_none_empty_and_named_factors() -> None:
    assert answers_vary_text({}) is None and answers_vary_text({"answers_vary_by": None}) is None
    same = answers_vary_text({"answers_vary_by": []})
    assert same.startswith(SAME) and "--strategy place" in same and "budget" in same
    named = answers_vary_text({"answers_vary_by": ["cell × period", "residual"]})
    assert named.startswith("the answers vary by cell × period, the grids' own measurements")
    assert " r" not in named  # no coarser level named, none glossed
    # a level named by its H3 resolution says what it is (an outside reader met "r4 × hour-of-day" unexplained)
    coarse = answers_vary_text({"answers_vary_by": ["r4 × hour-of-day", "r6 × 1 d", "r4 × period"]})
    assert coarse.count("the H3 cells of resolution 4 containing the grids") == 1
    assert "r6: the H3 cells of resolution 6" in coarse
    shared = answers_vary_text({"answers_vary_by": ["every place × day-of-week", "cell × period"]})
    assert "every place: one effect of that time shared by all places" in shared and "every place" not in coarse


@pytest.mark.parametrize("eps, seed", [(1.0, 4), (1.0, 8), (1e5, 2), (1e5, 5)])
def test_the_summary_says_one_mean_exactly_when_every_answer_is_one_mean(eps, seed) -> None:
    """ε = 1 over 60 users sees no factor (the map-wide mean); ε = 10⁵ over 120 sees the place and
    the time. Either way the summary's claim is read off the published answers."""
    r = _release(eps, seed, n_users=60 if eps < 1 else 120)
    means = _answered_means(r)
    one_value = bool(np.ptp(means) <= 1e-9 * max(1.0, float(np.abs(means).max())))
    vary = r.summary.answers_vary_by
    assert isinstance(vary, list)
    assert (vary == []) == one_value, (vary, np.ptp(means))
    assert eps > 1 or vary == []  # the small budget must not claim factors
    names = set(r.measurements.info["engine"].names) | {"residual"}
    assert set(vary) <= names
    console = console_summary(r.summary.as_dict(), table=r.table)
    report = report_markdown(r)
    for text in (console, report):
        assert (SAME in text) == one_value
        assert ("the answers vary by" in text) == (not one_value)


def test_nothing_measured_is_left_to_the_outlook() -> None:
    """ε = 0.02: no node above its noise, every grid gets the clamp's centre with the whole range;
    the outlook says nothing is worth reading, and no claim about a mean is made."""
    r = _release(0.02, 4)
    assert r.summary.answers_vary_by is None and r.summary.outlook
    assert SAME not in console_summary(r.summary.as_dict(), table=r.table)


def test_other_shapes_do_not_claim_anything() -> None:
    agg = make_agg(additive_rows(3, 60, noise_sd=1.0))
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    r = release_user(agg, Budget(epsilon_total=5.0), UserOptions(partitions=parts, strategy="place"), bound=100.0,
                     noise=NoiseOptions(seed=3))
    assert r.summary.answers_vary_by is None
    assert "map-wide mean" not in console_summary(r.summary.as_dict(), table=r.table)


def test_the_page_says_one_mean_first_and_names_factors_otherwise() -> None:
    from dpopt.writers.html import render_html

    for eps, seed, n_users in ((1.0, 4, 60), (1e5, 2, 120)):
        r = _release(eps, seed, n_users)
        page = render_html(r.table, r.summary.as_dict(), tiles=None)
        one = r.summary.answers_vary_by == []
        assert ("Every grid is answered by the same map-wide mean" in page) == one
        assert ("The answers vary by" in page) == (not one)
        if one:  # said before the accuracy line, so a map of one colour is not read as a finding
            assert page.index("same map-wide mean") < page.index("<b>Accuracy:</b>")


def test_the_example_sentence_says_when_it_is_the_map_wide_mean() -> None:
    from types import SimpleNamespace

    from dpopt.cli.release import _example_answer

    r = _release(1.0, 4)
    assert r.summary.answers_vary_by == []
    # the example's grid: put one listed grid's answer under its cell and 17:00 (the sentence's lookup)
    import h3

    from dpopt.records.data import EXAMPLE_PLACE

    lat, lng, hour = EXAMPLE_PLACE
    cell = h3.latlng_to_cell(lat, lng, 7)
    row = r.table.iloc[[0]].assign(cell=cell, slot=f"2015-09-06T{hour:02d}:00:00-05:00")
    answers = pd.DataFrame({"cell": [cell], "slot": row["slot"], "node_cell": [cell], "node_slot": row["slot"],
                            "node_slot_end": row["slot_end"]})
    for vary, said in (([], True), (["cell × period"], False)):
        fake = SimpleNamespace(table=row, answers=answers, summary=SimpleNamespace(answers_vary_by=vary))
        text = _example_answer(fake, "km/h")
        assert text.startswith("Congress Ave at 6th St") and ("the map-wide mean" in text) == said


def _heavy(seed: int, n_heavy: int, heavy_records: int = 2000) -> list:
    """200 light users (20 records each over random grids) and ``n_heavy`` heavy ones."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(200 + n_heavy):
        n = 20 if u < 200 else heavy_records
        for g, t in zip(rng.integers(0, 48, n), range(n)):
            rows.append((f"u{u}", int(g), t, 36.0 if u < 200 else 96.0))
    return rows


def _exact_tv(rows: list, cap: int) -> float:
    """½·Σ_ℓ |min(n_ℓ, T)/S(T) − n_ℓ/N| over the users' true record counts (brute force)."""
    n = pd.Series([r[0] for r in rows]).value_counts().to_numpy(float)
    kept = np.minimum(n, cap)
    return 0.5 * float(np.abs(kept / kept.sum() - n / n.sum()).sum())


@pytest.mark.parametrize("n_heavy", [0, 15])
def test_the_reweighting_said_is_the_caps_distance_from_the_record_weights(n_heavy) -> None:
    """summary.json `reweighting` (from the DP histogram of records per user) against the exact total
    variation between capped and all-records weights: ≈ 0 without heavy users, large with 15 users
    holding 88 % of the records (within the histogram's factor-4 bins and its noise)."""
    rows = _heavy(11, n_heavy)
    agg = make_agg(rows)
    parts = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    r = release_user(agg, Budget(epsilon_total=10.0), UserOptions(partitions=parts), bound=100.0,
                     noise=NoiseOptions(seed=5))
    exact = _exact_tv(rows, int(r.summary.record_cap))
    said = r.summary.reweighting
    assert said is not None and 0.0 <= said <= 1.0
    assert abs(said - exact) <= 0.15, (said, exact)
    assert (exact > 0.5) == (n_heavy > 0)
    report = report_markdown(r)
    # what the figure cannot see is said with it: the histogram's bins and the users below its noise;
    # a figure that rounds to 0 is not read as "no re-weighting" (an outside check: 2 users of 90 %)
    if said >= REWEIGHTING_SHOWN:
        assert f"by about **{said:.2g}**" in report and "bins are 4× wide" in report
    else:
        assert "shows no group of users above the cap" in report and "× the spread" not in report
    assert (said >= REWEIGHTING_SHOWN) == (n_heavy > 0)
    eps = float(r.summary.record_histogram["epsilon"])
    assert f"fewer than about {math.ceil(math.log(8 / 0.02) / eps)} users" in report


def test_a_bin_of_fewer_users_than_unseen_users_is_not_read() -> None:
    """unseen_users(ε) is the threshold record_counts applies: a bin at it is read, one just below is
    zeroed (the other bins large enough that no projection steps in)."""
    from dpopt.privacy.user.place_bounds import record_counts, unseen_users

    for eps in (0.1, 0.5, 2.0):
        t = unseen_users(eps)
        noisy = np.array([1000.0, 900.0, 0.0, 0.0, t, 0.0, 0.0, 0.0])
        assert record_counts(noisy, eps)[4] == t
        noisy[4] = t * (1 - 1e-9)
        assert record_counts(noisy, eps)[4] == 0.0


def test_without_a_list_the_words_say_where_grids_have_no_answer():
    """An outside check: one selected cell, no map row, and the console said every grid is answered by
    the map-wide mean. Without a public list the text says where a grid has an answer at all."""
    from dpopt.writers._published import answers_vary_text

    private = {"partitions": "private selection: H3 cells over the period, ...", "answers_vary_by": []}
    listed = {"partitions": "public list", "answers_vary_by": []}
    assert answers_vary_text(private).endswith("elsewhere not at all")
    assert "elsewhere not at all" in answers_vary_text({**private, "answers_vary_by": ["cell × period"]})
    assert "elsewhere" not in answers_vary_text(listed)
