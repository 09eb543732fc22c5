"""Private selection over the levels (dpopt.privacy.user.select_levels) and the private multi-resolution
release (dpopt.privacy.user.strategies.private_adaptive): neighbour enumeration, threshold, accounting."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.hierarchy.tree import DAY_NS, Level
from dpopt.noise import SeededSource
from dpopt.privacy.options import NoiseOptions
from dpopt.estimation.hierarchical import estimate_hierarchical
from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires, selection_plan
from dpopt.privacy.user.mechanism import DiscreteLaplace
from dpopt.privacy.user.partitions import selection_threshold
from dpopt.privacy.user.select_levels import KeepRule, level_nodes, node_priority, select_level, user_node_counts

from .conftest import SLOT_NS, make_agg


def _counts(pairs, n_nodes, priority, k, own_top=0):
    users = np.array([p[0] for p in pairs], dtype=np.int64)
    nodes = np.array([p[1] for p in pairs], dtype=np.int64)
    records = np.array([p[2] if len(p) > 2 else 1 for p in pairs], dtype=np.int64)
    return user_node_counts(users, nodes, n_nodes, priority, KeepRule(k, own_top), records=records)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_one_added_user_moves_at_most_k_counts_by_one(k):
    """Every placement of an added user (any subset of 5 nodes, repeated pairs allowed) against a
    fixed base: the user-count vector moves by exactly 0 or 1 per node, on at most k nodes."""
    n_nodes = 5
    rng = np.random.default_rng(k)
    priority = rng.permutation(n_nodes)
    base = [(u, int(v)) for u in range(6) for v in rng.choice(n_nodes, size=rng.integers(1, 5))]
    before = _counts(base, n_nodes, priority, k)
    for r in range(1, n_nodes + 1):
        for subset in itertools.combinations(range(n_nodes), r):
            added = [(99, v) for v in subset] + [(99, subset[0])]  # a repeated pair: still one user
            diff = _counts(base + added, n_nodes, priority, k) - before
            assert set(np.unique(diff)) <= {0, 1}
            assert diff.sum() == min(k, len(subset))
            # the kept nodes are the user's first k by the public priority
            assert set(np.flatnonzero(diff)) == set(sorted(subset, key=lambda v: priority[v])[:k])


@pytest.mark.parametrize("k,own_top", [(1, 1), (2, 1), (3, 1), (3, 2), (2, 2)])
def test_own_top_keeps_the_shared_order_then_the_users_busiest_nodes(k, own_top):
    """The mixed rule (``own_top`` of k by the user's own record count, the rest in the shared
    order): every placement of an added user with random record counts, the same brute force. The
    user's record count in a node sums its pairs there (a repeated pair adds)."""
    n_nodes = 5
    rng = np.random.default_rng(10 * k + own_top)
    priority = rng.permutation(n_nodes)
    base = [(u, int(v), int(rng.integers(1, 9))) for u in range(6) for v in rng.choice(n_nodes, size=rng.integers(1, 5))]
    before = _counts(base, n_nodes, priority, k, own_top)
    for r in range(1, n_nodes + 1):
        for subset in itertools.combinations(range(n_nodes), r):
            recs = {v: int(rng.integers(1, 4)) for v in subset}
            added = [(99, v, recs[v]) for v in subset] + [(99, subset[0], 2)]  # a repeated pair adds records
            recs[subset[0]] += 2
            diff = _counts(base + added, n_nodes, priority, k, own_top) - before
            assert set(np.unique(diff)) <= {0, 1}
            assert diff.sum() == min(k, len(subset))
            shared = sorted(subset, key=lambda v: priority[v])[:k - own_top]
            rest = sorted(set(subset) - set(shared), key=lambda v: (-recs[v], priority[v]))[:own_top]
            assert set(np.flatnonzero(diff)) == set(shared) | set(rest)


def test_keep_rule_is_checked():
    for kw, word in ((dict(k=1, own_top=2), "own_top"), (dict(k=2, own_top=-1), "own_top"), (dict(k=2, own_top=True),
                     "own_top"), (dict(k=0), "k"), (dict(k=2, dwell=-1.0), "dwell"), (dict(k=2, dwell=float("nan")),
                     "dwell"), (dict(k=2, dwell="10"), "dwell")):
        with pytest.raises(DpoptInputError, match=word):
            KeepRule(**kw)
    with pytest.raises(DpoptInputError, match="records"):
        user_node_counts(np.zeros(2, np.int64), np.arange(2), 2, np.arange(2), KeepRule(2, 1))


@pytest.mark.parametrize("k,dwell", [(2, 1.5), (2, 3.0), (1, 1.5), (1, 3.0)])
def test_dwell_keeps_a_busiest_node_only_where_the_user_dwells(k, dwell):
    """``KeepRule(k, own_top=1, dwell)``: the first k − 1 nodes in the shared order, then the node
    with the most records among those holding ≥ dwell × the user's mean records per node, else the
    shared order fills up to k; brute force over an added user's placements and record counts, its
    records on a node split over two pairs (a node holding two of its grids), its id between the
    base users' (the same neighbour properties; the rule written out here independently)."""
    n_nodes = 5
    rng = np.random.default_rng(int(10 * dwell) + k)
    priority = rng.permutation(n_nodes)
    rule = KeepRule(k, own_top=1, dwell=dwell)
    base = [(2 * u, int(v), int(rng.integers(1, 30))) for u in range(6) for v in rng.choice(n_nodes, size=rng.integers(1, 5))]
    users = np.array([p[0] for p in base]); nodes = np.array([p[1] for p in base]); recs = np.array([p[2] for p in base])
    before = user_node_counts(users, nodes, n_nodes, priority, rule, records=recs)
    seen = set()
    for r in range(1, n_nodes + 1):
        for subset in itertools.combinations(range(n_nodes), r):
            held = {v: int(rng.choice([1, 1, 2, 60, 200])) for v in subset}
            split = subset[0]  # its records on this node come in two pairs
            a_users = np.append(users, [5] * (r + 1))
            a_nodes = np.append(nodes, list(subset) + [split])
            a_recs = np.append(recs, [held[v] - (v == split) * (held[v] // 2) for v in subset] + [held[split] // 2])
            diff = user_node_counts(a_users, a_nodes, n_nodes, priority, rule, records=a_recs) - before
            assert set(np.unique(diff)) <= {0, 1} and diff.sum() == min(k, r)
            order = sorted(subset, key=lambda v: priority[v])
            first = order[:k - 1]
            mean = sum(held.values()) / r
            busy = sorted((v for v in order if v not in first and held[v] >= dwell * mean),
                          key=lambda v: (-held[v], priority[v]))
            want = set(first) | set(busy[:1])
            want |= set([v for v in order if v not in want][:k - len(want)])
            assert set(np.flatnonzero(diff)) == want
            seen.add(bool(busy))
    assert seen == {True, False}  # both branches were exercised


def test_nodes_nobody_kept_are_never_candidates():
    """A user with many nodes of its own keeps k of them; the others (u_v = 0) must be neither noised
    nor released, else each is a chance of release that exists only with that user (unbounded in
    number: the δ bound would fail). Checked with a mechanism whose noise passes any threshold: the
    released set is then exactly the nodes someone kept."""

    class Huge(DiscreteLaplace):
        def integer(self, values, **kw):
            return np.asarray(values, dtype=np.int64) + 10**6

    recs = [("loner", g, 0, 50.0) for g in range(12)]  # 12 grids nobody else visits
    recs += [(f"u{u}", 0, 1, 40.0) for u in range(5)]
    agg = make_agg(recs)
    node, cells, slots = level_nodes(agg, Level(7, SLOT_NS))
    for keep in (1, 2, KeepRule(1, own_top=1, dwell=10.0)):
        s = select_level(agg, Level(7, SLOT_NS), keep=keep, epsilon=1.0, delta=1e-6, mechanism=Huge(SeededSource(0)))
        counts = user_node_counts(agg.pair_user, node[agg.pair_grid], cells.size,
                                  node_priority(cells, slots, Level(7, SLOT_NS)), keep, records=agg.count)
        kept = {(c, t) for c, t, n in zip(cells, slots, counts) if n > 0}
        assert set(zip(s.cells.tolist(), s.slots.tolist())) == kept
        assert len(kept) <= 1 + (keep if isinstance(keep, int) else keep.k)  # grid 0 (shared) + the loner's k


@pytest.mark.parametrize("k", [1, 3])
def test_flat_private_selection_has_the_same_candidates(k):
    """The flat private release (``resolution="fixed"``, :func:`dpopt.privacy.user.strategies.fixed._select_private`):
    with a selection noise that passes any threshold, exactly the grids some user kept after
    bounding are released — the loner's k, not its 12 (the candidates are not every grid)."""
    from dpopt.privacy.options import Budget
    from dpopt.privacy.user import UserOptions, measure
    from dpopt.privacy.user.mechanism import LaplaceSimulation

    class Huge(LaplaceSimulation):
        def integer(self, values, **kw):
            return np.asarray(values, dtype=float) + 1e6

    recs = [("loner", g, 0, 50.0) for g in range(12)] + [(f"u{u}", 0, 1, 40.0) for u in range(5)]
    m = measure(make_agg(recs), Budget(epsilon_total=1.0, delta=1e-6), UserOptions(bounds=(k, 1), resolution="fixed"),
                bound=100.0, sampler=Huge(np.random.default_rng(0)))
    assert 1 <= m.n_nodes <= 1 + k  # grid 0 (the five users and maybe the loner) and the loner's k


def test_a_node_only_the_added_user_holds_is_released_with_probability_at_most_delta_over_k():
    mech = DiscreteLaplace(SeededSource(1), seeded=True)
    for k, eps, delta in ((1, 1.0, 1e-6), (4, 2.0, 1e-6), (4, 0.3, 1e-5)):
        rule = selection_threshold(k, eps, delta, mech)
        assert rule.release_probability(1, mech) <= delta / k * (1 + 1e-9)


def _day_agg(n_users=40, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for u in range(n_users):
        for g in rng.choice(12, size=rng.integers(1, 5), replace=False):
            recs += [(f"u{u}", int(g), t, float(rng.uniform(0, 100))) for t in range(int(rng.integers(1, 6)))]
    return make_agg(recs)


def test_level_nodes_and_priority_are_functions_of_the_keys():
    agg = _day_agg()
    node, cells, slots = level_nodes(agg, Level(6, 2 * SLOT_NS))
    assert np.all(slots % (2 * SLOT_NS) == 0) and node.max() == cells.size - 1
    a = node_priority(cells, slots, Level(6, 2 * SLOT_NS))
    b = node_priority(cells[::-1], slots[::-1], Level(6, 2 * SLOT_NS))
    # the rank of a node is a function of its key, not of the order (or the data) it came with
    pos = {(c, s): r for c, s, r in zip(cells, slots, a)}
    pos_rev = {(c, s): r for c, s, r in zip(cells[::-1], slots[::-1], b)}
    assert pos == pos_rev


def test_select_level_releases_only_counts_above_the_threshold():
    agg = _day_agg(n_users=60)
    mech = DiscreteLaplace(SeededSource(3), seeded=True)
    s = select_level(agg, Level(7, SLOT_NS), keep=2, epsilon=50.0, delta=1e-6, mechanism=mech)
    assert np.all(s.noisy_users >= s.threshold)
    node, cells, slots = level_nodes(agg, Level(7, SLOT_NS))
    exact = user_node_counts(agg.pair_user, node[agg.pair_grid], cells.size,
                             node_priority(cells, slots, Level(7, SLOT_NS)), 2)
    big = {(c, t) for c, t, n in zip(cells, slots, exact) if n >= s.threshold + 3}
    assert big <= set(zip(s.cells.tolist(), s.slots.tolist()))  # at ε = 50 the noise is ≲ 1 user


def test_private_multires_accounting_and_rows():
    agg = _day_agg(n_users=80, seed=2)
    levels = ((Level(7, SLOT_NS), 2), (Level(6, 2 * SLOT_NS), 2), (Level(5, DAY_NS), 1))
    m = measure_private_multires(agg, epsilon=20.0, delta=1e-6, bound=100.0, levels=levels,
                                 noise=NoiseOptions(seed=5),
                                 selection_shares=(0.5, 0.25, 0.25))
    total = sum((Fraction(v) for v in m.spend.pieces.values()), Fraction(0))
    assert total <= Fraction(20) and float(total) == pytest.approx(m.spend.total)
    assert m.spend.delta == pytest.approx(1e-6)
    released = m.nodes["released"].to_numpy()
    assert released.sum() == sum(d["released"] for d in m.info["selection"]) > 0
    # only released nodes are measured; placeholders (public ancestors) are not
    assert np.isfinite(m.statistics["count"].value[released]).all()
    assert np.isnan(m.statistics["count"].value[~released]).all()
    t = estimate_hierarchical(m).table
    np.testing.assert_array_equal(t["released"].to_numpy(), released)
    assert t["mean"].between(0, 100).all() and (t["mean_error_bound"] > 0).all()


def test_nothing_released_gives_no_node():
    agg = _day_agg(n_users=5)
    m = measure_private_multires(agg, epsilon=0.5, delta=1e-6, bound=100.0, noise=NoiseOptions(seed=1),
                                 levels=((Level(7, SLOT_NS), 4), (Level(5, DAY_NS), 2)))
    assert m.n_nodes == 0 and m.spend.total <= 0.5


def test_selection_plan_drops_a_finest_level_that_needs_too_many_users():
    mech = DiscreteLaplace(SeededSource(0), seeded=True)
    lv = ((Level(7, SLOT_NS), 4), (Level(5, 3 * SLOT_NS), 4), (Level(4, DAY_NS), 2))
    low = selection_plan(lv, 0.6, 1e-6, np.array([0.8, 0.1, 0.1]), mech)
    high = selection_plan(lv, 6.0, 1e-6, np.array([0.8, 0.1, 0.1]), mech)
    np.testing.assert_allclose(low, [0.0, 0.1, 0.9])
    np.testing.assert_allclose(high, [0.8, 0.1, 0.1])
    # with a root above the map the finest share goes to the map (receiver), never the root
    lv4 = lv + ((Level(0, DAY_NS), 1),)
    np.testing.assert_allclose(selection_plan(lv4, 0.6, 1e-6, np.array([0.8, 0.1, 0.05, 0.05]), mech, 2),
                               [0.0, 0.1, 0.85, 0.05])
    with pytest.raises(DpoptInputError, match="receiver"):
        selection_plan(lv4, 0.6, 1e-6, np.array([0.8, 0.1, 0.05, 0.05]), mech, 0)
    # the rule reads (ε, δ, k) only: T at the finest share is 1 + (4/0.48)·ln(4·3/(2·1e-6)) > 20
    assert selection_threshold(4, 0.48, 1e-6 / 3, mech).threshold > 20


def test_bad_inputs_are_refused_before_any_noise():
    agg = _day_agg()
    with pytest.raises(DpoptInputError, match="contiguous"):  # a recurring window under private selection
        measure_private_multires(agg, epsilon=1.0, delta=1e-6, bound=100.0, noise=NoiseOptions(seed=0),
                                 levels=((Level(7, SLOT_NS), 4), (Level(6, SLOT_NS, DAY_NS), 2)))
    for kw, word in ((dict(delta=0.0), "delta"), (dict(bounds=(0, 2)), "k"), (dict(selection_fraction=1.0),
                     "selection_fraction"), (dict(selection_shares=(0.5, 0.6, 0.1)), "selection_shares")):
        args = {**dict(epsilon=1.0, delta=1e-6, bound=100.0, noise=NoiseOptions(seed=0)), **kw}
        with pytest.raises(DpoptInputError, match=word):
            measure_private_multires(agg, **args)


def test_default_levels_and_shares_follow_the_grid():
    from types import SimpleNamespace

    from dpopt.privacy.user.strategies.private_adaptive import PERIOD_NS, SELECTION_SHARES, private_levels

    assert PERIOD_NS == 3640 * DAY_NS
    lv, sh, to = private_levels(SimpleNamespace(h3_resolution=7, slot_ns=SLOT_NS))
    assert [(x.h3_resolution, x.slot_ns, k) for x, k in lv] == [(7, SLOT_NS, 1), (7, PERIOD_NS, 8), (3, PERIOD_NS, 1),
                                                                (0, PERIOD_NS, 1)]
    assert sh == pytest.approx(SELECTION_SHARES) and SELECTION_SHARES == (0.8, 0.1, 0.05, 0.05)
    assert to == 2  # a dropped finest share goes to the map, not the root
    lv, sh, to = private_levels(SimpleNamespace(h3_resolution=7, slot_ns=PERIOD_NS))  # the cells' level is the grid's
    assert [(x.h3_resolution, x.slot_ns) for x, _ in lv] == [(7, PERIOD_NS), (3, PERIOD_NS), (0, PERIOD_NS)]
    assert sum(sh) == pytest.approx(1.0) and sh[0] == pytest.approx(0.8 / 0.9) and to == 1
    lv, _, to = private_levels(SimpleNamespace(h3_resolution=7, slot_ns=11 * SLOT_NS))  # 11 h does not divide the period
    assert [(x.h3_resolution, x.slot_ns) for x, _ in lv] == [(7, 11 * SLOT_NS)] and to == 0
    lv, _, to = private_levels(SimpleNamespace(h3_resolution=2, slot_ns=SLOT_NS))  # no map: the root plays it
    assert [x.h3_resolution for x, _ in lv] == [2, 2, 0] and to == 2
    lv, _, to = private_levels(SimpleNamespace(h3_resolution=4, slot_ns=SLOT_NS))  # the map is the root: no second
    assert [x.h3_resolution for x, _ in lv] == [4, 4, 0] and to == 2


def test_level_deltas_add_up_to_at_most_delta():
    """δ split over L levels: the float sum of the L pieces never exceeds δ (δ/3 summed three times
    is one ulp above δ for some δ)."""
    from dpopt.privacy.user.strategies.private_adaptive import level_delta

    rng = np.random.default_rng(0)
    over = 0
    for delta in rng.uniform(1e-9, 1e-3, 2000):
        for L in (1, 2, 3, 4, 5):
            d = level_delta(delta, L)
            assert sum([d] * L) <= delta and d > 0.999999 * delta / L
            over += sum([delta / L] * L) > delta
    assert over > 0  # the naive split does exceed δ: the test would catch it


def _dwell_agg(n_users=60, seed=4):
    """Every user passes through 14 grids once and dwells (200 records, > 10× its mean per grid) in
    one of two busy grids: the shared order alone spreads them, their own record counts pile them up."""
    rng = np.random.default_rng(seed)
    recs = []
    for u in range(n_users):
        for g in rng.choice(np.arange(2, 40), size=14, replace=False):
            recs.append((f"u{u}", int(g), 0, float(rng.uniform(0, 100))))
        busy = int(rng.integers(0, 2))
        recs += [(f"u{u}", busy, t, float(rng.uniform(0, 100))) for t in range(1, 201)]
    return make_agg(recs)


def test_finest_rule_piles_users_where_they_dwell():
    """``finest=KeepRule(1, own_top=1)`` (own records, dwell 0) and the default ``FINEST_RULE``
    (dwell 10): the two dwell grids (each ~30 users) hold every user's kept node and pass the
    threshold; in the shared order alone (k = 1) a user keeps one of its 15 grids by hash and the
    dwell grids fall short. Same ε, δ, seed."""
    from dpopt.privacy.user.strategies.private_adaptive import FINEST_RULE, measure_private_multires

    agg = _dwell_agg()
    node, cells, slots = level_nodes(agg, Level(7, SLOT_NS))
    dwell = {(cells[i], slots[i]) for i in node[agg.pair_grid[agg.count == 200]]}
    assert len(dwell) == 2 and FINEST_RULE == KeepRule(1, own_top=1, dwell=10.0)
    lv = Level(7, SLOT_NS)
    pr = node_priority(cells, slots, lv)
    for rule, want in ((KeepRule(1, 1), True), (FINEST_RULE, True), (KeepRule(1), False)):
        counts = user_node_counts(agg.pair_user, node[agg.pair_grid], cells.size, pr, rule, records=agg.count)
        at_dwell = sum(int(counts[i]) for i in range(cells.size) if (cells[i], slots[i]) in dwell)
        assert (at_dwell == agg.n_users) == want
        m = measure_private_multires(agg, epsilon=40.0, delta=1e-6, bound=100.0, noise=NoiseOptions(seed=2),
                                     finest=rule, selection_fraction=0.9, clamp_fraction=0.0)
        fin = m.nodes[(m.nodes["level"] == 0) & m.nodes["released"]]
        assert (dwell <= set(zip(fin["cell"], fin["slot"]))) == want


def test_finest_options_are_checked_before_any_noise():
    from dpopt.privacy.user.strategies.private_adaptive import measure_private_multires, private_levels

    agg = _day_agg()
    base = dict(epsilon=1.0, delta=1e-6, bound=100.0, noise=NoiseOptions(seed=0))
    for kw, word in ((dict(finest=2), "finest"), (dict(finest=KeepRule(3), levels=((Level(7, SLOT_NS), 2),)),
                                                  "finest.k"), (dict(levels=()), "levels")):
        with pytest.raises(DpoptInputError, match=word):
            measure_private_multires(agg, **base, **kw)
    assert private_levels(agg, 3)[0][0][1] == 3
