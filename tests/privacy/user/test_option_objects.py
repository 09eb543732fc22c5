"""The typed option objects of the user model's library (they keep functions small):
:class:`~dpopt.privacy.user.bounds.BoundsRule` for ``choose_bounds`` and
:class:`~dpopt.privacy.user.levels.LevelPlan` / :class:`~dpopt.privacy.user.levels.LevelNoise` for
``measure_levels`` give the same seeded outputs as the keywords they group (still accepted), and
mixing both forms is refused."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.hierarchy.tree import HOUR_NS, Level
from dpopt.privacy.user.bounding import grid_ranks
from dpopt.privacy.user.bounds import BoundsRule, choose_bounds
from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels
from dpopt.privacy.user.partitions import PartitionList

from .conftest import make_agg


def _agg():
    rng = np.random.default_rng(0)
    recs = [(f"u{u}", int(g), int(t), float(rng.uniform(0, 1))) for u in range(40)
            for g, t in zip(rng.integers(0, 6, 5), rng.integers(0, 3, 5))]
    return make_agg(recs)


@pytest.mark.parametrize("rule", ["histogram", "select", "quantile"])
def test_bounds_rule_object_equals_keywords(rule):
    agg = _agg()
    ranks = grid_ranks(agg, np.random.default_rng(1))
    kw = dict(rule=rule, max_grids=8, max_records=4, sum_budget=0.4)
    a = choose_bounds(agg, ranks, 1.0, rng=np.random.default_rng(2), **kw)
    b = choose_bounds(agg, ranks, 1.0, rng=np.random.default_rng(2), options=BoundsRule(**kw))
    assert (a.k, a.c, a.rule, a.epsilon) == (b.k, b.c, b.rule, b.epsilon)
    with pytest.raises(DpoptInputError, match="not both"):
        choose_bounds(agg, ranks, 1.0, rng=np.random.default_rng(2), options=BoundsRule(**kw), rule=rule)
    with pytest.raises(DpoptInputError, match="bounds"):
        BoundsRule(rule="median")


def test_level_options_objects_equal_keywords():
    agg = _agg()
    plist = PartitionList(cells=agg.cells, slots=agg.slots)
    levels = (Level(int(agg.h3_resolution), int(agg.slot_ns)), Level(max(int(agg.h3_resolution) - 1, 0), 0))
    kw_plan = dict(levels=levels, level_split="equal", weight_variance=0.5)
    kw_noise = dict(noise="discrete", seed=4)
    a = measure_levels(agg, plist, bound=1.0, bounds=(2, 2), epsilon=2.0, **kw_plan, **kw_noise)
    b = measure_levels(agg, plist, bound=1.0, bounds=(2, 2), epsilon=2.0, plan=LevelPlan(**kw_plan),
                       sampling=LevelNoise(**kw_noise))
    for s in ("count", "sum", "sumsq"):
        np.testing.assert_array_equal(a.statistics[s].value, b.statistics[s].value)
    assert a.spend == b.spend
    with pytest.raises(DpoptInputError, match="not both"):
        measure_levels(agg, plist, bound=1.0, bounds=(2, 2), epsilon=2.0, plan=LevelPlan(**kw_plan), target=3.0)
    with pytest.raises(TypeError, match="unexpected"):
        measure_levels(agg, plist, bound=1.0, bounds=(2, 2), epsilon=2.0, colour="red")
