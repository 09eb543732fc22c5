"""The merge tree of partial results, shared by the local stream (:func:`tree_stream`) and the Dask
partitions (:func:`dpopt.records.dask_backend.tree`): groups of :data:`COMPACT_EVERY`, level by level,
so both back-ends add the same partials in the same order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["COMPACT_EVERY", "tree_stream"]

#: partials merged at once (stream compaction and Dask tree fan-in)
COMPACT_EVERY = 8


def tree_stream(parts: Iterable[Any], merge: Callable[[list[Any]], Any]) -> Any:
    """Merge a stream of partials in groups of :data:`COMPACT_EVERY`, level by level: the same tree
    as :func:`dpopt.records.dask_backend.tree` builds over partitions, holding ≤ 8 partials per
    level; None for an empty stream."""
    levels: list[list[Any]] = [[]]
    for part in parts:
        levels[0].append(part)
        lvl = 0
        while len(levels[lvl]) >= COMPACT_EVERY:
            merged = merge(levels[lvl])
            levels[lvl] = []
            if lvl + 1 == len(levels):
                levels.append([])
            levels[lvl + 1].append(merged)
            lvl += 1
    for lvl in range(len(levels)):
        if sum(len(x) for x in levels[lvl:]) <= 1:
            break
        if levels[lvl]:
            if lvl + 1 == len(levels):
                levels.append([])
            levels[lvl + 1].append(merge(levels[lvl]))
            levels[lvl] = []
    rest = [p for lv in levels for p in lv]
    return rest[0] if rest else None
