"""The outlook names only levels whose nodes the release publishes.

Found by an outside-style check (session 54): an engine release at ε = 1 warned "The nodes of level
'H3 resolution 7 x 1h of the day windows' reach a median error bound below 25.8 …: read those", a
level the plan gave no budget and whose nodes were never written to release.csv (every row there was
a listed grid)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from dpopt.estimation.outlook import levels_outlook

HOUR, DAY = 3600 * 10**9, 86400 * 10**9


def _release(hour_of_day_published: bool):
    table = pd.DataFrame({"released": [True] * 4 + [hour_of_day_published] * 3 + [True] * 2,
                          "count_estimate": 50.0,
                          "mean_error_bound": [60.0] * 4 + [5.0] * 3 + [40.0] * 2,
                          "level": [0] * 4 + [1] * 3 + [2] * 2})
    info = SimpleNamespace(levels=[(7, HOUR), (7, HOUR, DAY), (3, 0)], selection=None)
    m = SimpleNamespace(bound=100.0, spend=SimpleNamespace(epsilon=1.0, total=1.0), info=info)
    return m, SimpleNamespace(table=table, confidence=0.95)


def test_an_unpublished_level_is_never_named_and_a_published_useful_node_ends_the_warning():
    out = levels_outlook(*_release(hour_of_day_published=False))
    assert out.empty and "nothing worth reading" in out.message
    assert "The nodes of level" not in out.message and "read those" not in out.message
    assert "epsilon ≈" in out.message  # what would help is still said
    published = levels_outlook(*_release(hour_of_day_published=True))
    assert not published.empty and published.message == ""  # its 3 published nodes of bound 5 are read
