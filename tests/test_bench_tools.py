"""The benchmarks' tools: two runs paired seed by seed (tests/benchmarks/compare_engine.py, models/engine.md
§5), a results page's hand-written notes kept when its benchmark rewrites it (collect_results.kept_notes),
and a release's route (bench_engine_routes.route, models/engine.md §7)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tests.benchmarks.collect_results import kept_notes
from tests.benchmarks.compare_engine import compare, paired


def test_the_paired_log_ratio_and_its_standard_error_by_hand() -> None:
    before, after = [2.0, 4.0, 1.0, 3.0], [1.0, 4.0, 2.0, 1.5]
    d = [math.log(0.5), 0.0, math.log(2.0), math.log(0.5)]  # log(after/before), seed by seed
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    p = paired(before, after)
    assert (p["better"], p["worse"], p["same"], p["seeds"]) == (2, 1, 1, 4)
    assert p["median_before"] == pytest.approx(2.5) and p["median_after"] == pytest.approx(1.75)
    assert p["log_ratio"] == pytest.approx(mean) and p["se"] == pytest.approx(sd / 2)


def test_a_reseeding_is_not_a_change_a_shift_is() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    draws = lambda: rng.choice([1.5, 9.0], size=30) * rng.uniform(0.8, 1.2, size=30)  # noqa: E731  bimodal
    same_law = paired(draws(), draws())
    assert abs(same_law["log_ratio"]) < 2.5 * same_law["se"]
    base = draws()
    shifted = paired(base, base * 0.9)
    assert shifted["log_ratio"] == pytest.approx(math.log(0.9)) and shifted["se"] == pytest.approx(0.0, abs=1e-12)


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="`before` and `after` must hold the same seeds"):
        paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired([1.0, 0.0], [1.0, 2.0])


def test_rows_pair_by_strategy_and_epsilon_on_the_same_seeds_only() -> None:
    row = lambda s, e, xs: {"strategy": s, "eps": e, "per_seed": [[x, 0.95] for x in xs]}  # noqa: E731
    before = {"rows": [row("optimised", 1.0, [1, 2, 3]), row("optimised", 10.0, [1, 2]), row("place", 1.0, [4, 4, 4])]}
    after = {"rows": [row("optimised", 1.0, [1, 2, 4]), row("optimised", 10.0, [1, 2, 3]), row("oracle plan", 1.0, [1])]}
    out = compare(before, after)
    assert [(s, e) for s, e, _ in out] == [("optimised", 1.0)]
    assert out[0][2]["worse"] == 1 and out[0][2]["same"] == 2


def test_a_pages_bold_notes_before_its_first_section_are_kept_and_nothing_else(tmp_path) -> None:
    page = tmp_path / "engine.md"
    assert kept_notes(page) == []
    page.write_text("# engine\n\nScore: generated.\n\n**Rerun on day 2** (what changed).\nSecond line.\n\n"
                    "**Rerun on day 1**.\n\n## day\n\n**a bold line inside a section**\n", encoding="utf-8")
    assert kept_notes(page) == ["**Rerun on day 2** (what changed).\nSecond line.", "", "**Rerun on day 1**.", ""]


def test_a_releases_route_names_its_largest_marginal_and_what_its_answers_rest_on() -> None:
    from tests.benchmarks.bench_engine_routes import MAP_ONLY, route

    names = ("cell × slot", "cell × period", "r3 × slot", "r3 × period")
    bought = SimpleNamespace(names=names, main=[0.0, 5.9, 0.7, 0.1], first=[0.0, 1.8, 0.2, 0.0], strategy="heuristic")
    assert route(bought, {"cell × period": 13.1, "r3 × slot": 0.0}, 34) == ("cell × period", "cell × period")
    assert route(bought, {"r3 × slot": 0.0}, 1) == ("cell × period", "the map-wide mean")
    assert route(bought, {}, 5) == ("cell × period", "nodes, no factor")
    # the re-plan sent the rest to the map (the engine's own summary text): the first round's largest, then the map
    from dpopt.privacy.user.engine import _map_only

    assert MAP_ONLY in _map_only(SimpleNamespace(cands=[None] * 4, smallest=3), list(names), 1.0, "why")[1]
    to_map = SimpleNamespace(names=names, main=[0.0, 1.8, 0.2, 4.7], first=[0.0, 1.8, 0.2, 0.0],
                             strategy=f"the rest to r3 × period (the first round saw no factor: {MAP_ONLY})")
    assert route(to_map, {}, 1) == ("cell × period, then the map", "the map-wide mean")
