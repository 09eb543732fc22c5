"""End-to-end neighbour enumeration of the level measurements: the noise is calibrated to sensitivities
that hold for every placement of one added user.

Through :func:`dpopt.privacy.user.levels._bounded_levels` — the function :func:`measure_levels` calls,
returning the exact node sums AND the sensitivities it calibrates the noise to — for every
placement of one added user (0–2 records at an extreme value in each of the 5 finest grids of a
5-level tree): the change of every level's (R, Y, Z) vector is within the ℓ1 / ℓ2 sensitivities
the code uses for that level, and for the shared bounding the maximum over placements equals them
(so a smaller sensitivity in the code fails here). The base users hold one record each, so no
bounding rule or tie key can change their kept records: D' − D is the added user's contribution
exactly, whatever the keys (the keys' coupling argument is models/user_level.md §2).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpopt.records.aggregate import Aggregate, PairSamples
from dpopt.privacy.user.levels import _bounded_levels
from dpopt.privacy.user.partitions import PartitionList

from .test_level_sensitivity import tiny_hierarchy

U = 4.0


def _agg(H, added: np.ndarray, value: float) -> Aggregate:
    """Two base users (one record each in finest grids 0 and 3) plus, if any, user 'zz' with
    ``added[g]`` records of ``value`` in finest grid g."""
    fin = H.nodes.iloc[H.finest_node]
    cells, slots = fin["cell"].to_numpy(), fin["slot"].to_numpy()
    pu, pg, cnt = [0, 1], [0, 3], [1, 1]
    vals = [1.0, 3.0]
    for g in np.flatnonzero(added):
        pu.append(2)
        pg.append(int(g))
        cnt.append(int(added[g]))
        vals += [value] * int(added[g])
    users = np.array(["a", "b", "zz"][: 3 if added.any() else 2], dtype=object)
    cnt = np.array(cnt, dtype=np.int64)
    v = np.array(vals)
    sums = np.add.reduceat(v, np.r_[0, np.cumsum(cnt)[:-1]])
    sq = np.add.reduceat(v * v, np.r_[0, np.cumsum(cnt)[:-1]])
    return Aggregate(users=users, cells=cells, slots=slots, pair_user=np.array(pu, dtype=np.int64),
                     pair_grid=np.array(pg, dtype=np.int64), count=cnt, sum=sums, sumsq=sq, h3_resolution=8,
                     slot_ns=int(H.levels[0].slot_ns), samples=PairSamples(values=v, offsets=np.r_[0, np.cumsum(cnt)]))


def _run(H, agg, k, c, level_bounds, seed):
    fin = H.nodes.iloc[H.finest_node]
    plist = PartitionList.from_grids(fin["cell"].to_numpy(), fin["slot"].to_numpy())
    sums, sens, lat, lb = _bounded_levels(agg, plist, H, bounds=(k, c), bound=U, bits=0,
                                          rng=np.random.default_rng(seed), priority="random",
                                          level_bounds=level_bounds)
    return np.array(sums, dtype=float), sens, lat


@pytest.mark.parametrize("k,c,level_bounds", [
    (1, 1, None), (2, 1, None), (2, 2, None), (3, 2, None), (5, 2, None),
    (2, 2, [None, None, (1, 3), (2, 1), (1, 2)]),
    (1, 2, [None, (2, 2), None, (1, 4), None]),
])
def test_every_placement_of_one_added_user_is_within_the_sensitivity_used(k, c, level_bounds):
    H = tiny_hierarchy()
    lev = H.nodes["level"].to_numpy()
    base, sens, lat = _run(H, _agg(H, np.zeros(5, dtype=int), 0.0), k, c, level_bounds, 0)
    L = H.n_levels
    worst = np.zeros((L, 6))  # per level: ℓ1 of R, Y, Z and ℓ2² of R, Y, Z
    for value in (U,):  # an extreme record: |y| = H_Y, |z| = H_Z (value 0 gives the same magnitudes)
        for added in itertools.product(range(3), repeat=5):
            added = np.array(added)
            if not added.any():
                continue
            seed = int(added @ [1, 3, 9, 27, 81])
            sums, sens2, _ = _run(H, _agg(H, added, value), k, c, level_bounds, seed)
            assert [(s.count_l1, s.merge) for s in sens2] == [(s.count_l1, s.merge) for s in sens]  # public
            d = sums - base
            for li in range(L):
                dl = d[:, lev == li]
                worst[li] = np.maximum(worst[li], np.r_[np.abs(dl).sum(axis=1), (dl ** 2).sum(axis=1)])
    for li, s in enumerate(sens):
        l1 = np.array([s.count_l1, s.sum_l1_units, s.sumsq_l1_units], dtype=float)
        l2sq = np.array([s.count_l2, s.sum_l2_units, s.sumsq_l2_units]) ** 2
        assert np.all(worst[li][:3] <= l1) and np.all(worst[li][3:] <= l2sq * (1 + 1e-12)), (li, worst[li], l1, l2sq)
        if level_bounds is None or level_bounds[li] is None:  # shared bounding: c ≤ 2 records suffice to attain
            np.testing.assert_array_equal(worst[li][:3], l1)
            np.testing.assert_allclose(worst[li][3:], np.round(l2sq))


def _truncated(H, counts, limit):
    """One user with ``counts[g]`` records in finest grid g, contributions keeping the first ``limit``."""
    fin = H.nodes.iloc[H.finest_node]
    g = np.flatnonzero(counts)
    cnt = np.asarray(counts)[g].astype(np.int64)
    kept = np.minimum(cnt, limit)
    return Aggregate(users=np.array(["a"], dtype=object), cells=fin["cell"].to_numpy(), slots=fin["slot"].to_numpy(),
                     pair_user=np.zeros(g.size, dtype=np.int64), pair_grid=g.astype(np.int64), count=cnt,
                     sum=2.0 * cnt, sumsq=4.0 * cnt, h3_resolution=8, slot_ns=int(H.levels[0].slot_ns),
                     samples=PairSamples(values=np.full(int(kept.sum()), 2.0), offsets=np.r_[0, np.cumsum(kept)],
                                         limit=limit))


@pytest.mark.parametrize("level_bounds,bounds", [([None, None, (1, 4), None, None], (1, 2)), (None, (1, 3))])
def test_bounds_above_the_kept_records_are_refused_whatever_the_data(level_bounds, bounds):
    """With contributions keeping the first 2 records per pair, a c (or c_l) of 3–4 is refused for
    both data sets, before any noise: refusing only when some pair held more than 2 records would be
    a data-dependent refusal (whether anything is released would reveal it)."""
    from dpopt import DpoptInputError
    from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels

    H = tiny_hierarchy()
    fin = H.nodes.iloc[H.finest_node]
    plist = PartitionList.from_grids(fin["cell"].to_numpy(), fin["slot"].to_numpy())
    for counts in ([1, 2, 0, 1, 0], [5, 0, 0, 1, 0]):
        with pytest.raises(DpoptInputError, match="first 2 records"):
            measure_levels(_truncated(H, counts, 2), plist, bound=U, bounds=bounds, epsilon=1.0,
                           plan=LevelPlan(levels=H.levels, level_bounds=level_bounds),
                           sampling=LevelNoise(noise="numpy", seed=0))
    m = measure_levels(_truncated(H, [5, 0, 0, 1, 0], 2), plist, bound=U, bounds=(1, 2), epsilon=1.0,
                       plan=LevelPlan(levels=H.levels), sampling=LevelNoise(noise="numpy", seed=0))
    assert m.info["c"] == 2


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_spend_recount_matches_every_draw(mechanism):
    """Accounting: with the exact samplers every (statistic, level) drawn has a
    piece and vice versa, the piece is the budget the sampler ran at (its law's scale is
    Δ1/piece, resp. √(⌊Δ2²⌋/(2·piece)) with the Δ of that level, recomputed here), and the exact
    sum of the pieces equals ``spend.total`` and never exceeds the budget asked for."""
    import itertools
    import math
    from fractions import Fraction

    from dpopt.privacy.user.bounding import lattice_halves
    from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels

    H = tiny_hierarchy()
    fin = H.nodes.iloc[H.finest_node]
    plist = PartitionList.from_grids(fin["cell"].to_numpy(), fin["slot"].to_numpy())
    agg = _agg(H, np.array([2, 1, 0, 2, 1]), U)
    lev = H.nodes["level"].to_numpy()
    _, hy, hz = lattice_halves(U, 12)
    rng = np.random.default_rng(7)
    for trial in range(8):
        tot = float(rng.uniform(0.01, 5))
        lb = None if trial % 2 else [None, None, (1, 3), None, (1, 1)]
        m = measure_levels(agg, plist, bound=U, bounds=(2, 2), plan=LevelPlan(levels=H.levels, level_bounds=lb),
                           sampling=LevelNoise(mechanism=mechanism, noise="discrete", seed=trial),
                           **({"epsilon": tot} if mechanism == "laplace" else {"rho": tot}))
        spent = sum((Fraction(v) for v in m.spend.pieces.values()), Fraction(0))
        assert Fraction(m.spend.total) == spent and spent <= Fraction(tot)
        assert spent > Fraction(tot) * (1 - 1e-6)  # nothing left unspent either
        for li in range(H.n_levels):
            rows = lev == li
            # Δ of the level from scratch: ℓ1 = k·c·h, ℓ2² = (c·h)²·max Σ m_i² (m_i ≤ nodes' grids, Σ m_i ≤ k)
            k, c = lb[li] if lb and lb[li] else (2, 2)
            caps = [1] * int(rows.sum()) if lb and lb[li] else H.leaves_under[rows].tolist()
            merge = max(sum(x * x for x in ms) for ms in itertools.product(*[range(a + 1) for a in caps])
                        if sum(ms) <= k)
            for name, h, unit in (("count", 1, 1.0), ("count_pilot", 1, 1.0), ("sum", hy, m.info["granularity"]),
                                  ("sumsq", hz, m.info["granularity"])):
                key = f"level{li}_{name}"
                drawn = np.isfinite(m.statistics[name].value[rows])
                assert drawn.all() == (key in m.spend.pieces) and (drawn.all() or not drawn.any())
                if key in m.spend.pieces:
                    used = m.spend.pieces[key]
                    want = k * c * h / used if mechanism == "laplace" else math.sqrt((c * h) ** 2 * merge / (2 * used))
                    np.testing.assert_allclose(m.statistics[name].law.scale[rows] / unit, want, rtol=1e-12)


def test_real_release_sampler_without_a_source_is_refused():
    """The tie keys of a real release come from the sampler's integer source; a real-release
    sampler without one is refused (it must not fall back to numpy's generator)."""
    from dpopt import DpoptInputError
    from dpopt.noise import SeededSource
    from dpopt.privacy.user.levels import LevelNoise, LevelPlan, measure_levels
    from dpopt.privacy.user.mechanism import DiscreteLaplace

    class NoSource:
        unit, real_release, label = "epsilon", True, "test"

        def __init__(self):
            self._m = DiscreteLaplace(SeededSource(1), seeded=True)

        def integer(self, values, **kw):
            return self._m.integer(values, **kw)

        def scale(self, **kw):
            return self._m.scale(**kw)

    H = tiny_hierarchy()
    fin = H.nodes.iloc[H.finest_node]
    plist = PartitionList.from_grids(fin["cell"].to_numpy(), fin["slot"].to_numpy())
    with pytest.raises(DpoptInputError, match="source"):
        measure_levels(_agg(H, np.array([1, 0, 0, 1, 0]), U), plist, bound=U, bounds=(1, 1), epsilon=1.0,
                       plan=LevelPlan(levels=H.levels), sampling=LevelNoise(noise_mechanism=NoSource()))
