"""BestFit (Algorithm 2) and WrapAround (Algorithm 1) of seed 003 against direct transcriptions."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.arrays import best_fit, heuristic_length, processing_order, wrap_around
from dpopt.datasets import load_itms, load_itms_counts

from .conftest import random_counts

N_RANDOM = 300


# --------------------------------------------------------------------------- references
def reference_best_fit(counts, m, order):
    """Algorithm 2 as in the notes' pseudo-code: scan every array for each user (O(L·K))."""
    fills: list[int] = []
    assign = np.empty(len(counts), dtype=np.int64)
    for user in order:
        c = min(int(counts[user]), m)
        best = -1
        for k, f in enumerate(fills):
            if f + c <= m and (best < 0 or f > fills[best]):
                best = k
        if best < 0:
            fills.append(c)
            best = len(fills) - 1
        else:
            fills[best] += c
        assign[user] = best
    return assign, np.array(fills)


def reference_wrap_around(counts, m, order):
    """Algorithm 1: one stream of (user, sample rank), cut every m positions, tail dropped."""
    stream = [(u, j) for u in order for j in range(min(int(counts[u]), m))]
    K = len(stream) // m
    arrays = [stream[k * m : (k + 1) * m] for k in range(K)]
    return arrays, K


def _orders(rng, L):
    return ["nonincreasing", "given", rng.permutation(L)]


# --------------------------------------------------------------------------- BestFit
def test_best_fit_matches_reference_on_random_instances(rng):
    for _ in range(N_RANDOM):
        counts = random_counts(rng, max_users=30, max_count=60)
        m = int(rng.integers(1, counts.max() + 3))
        for order in _orders(rng, counts.size):
            got = best_fit(counts, m, order=order)
            perm = processing_order(counts, order)
            assign, fills = reference_best_fit(counts, m, perm)
            np.testing.assert_array_equal(got.user_array, assign)
            np.testing.assert_array_equal(got.fills, fills)
            assert got.num_arrays == fills.size
            np.testing.assert_array_equal(got.array_of(np.arange(counts.size), np.zeros(counts.size)), assign)
            assert got.fills.max() <= m


def test_best_fit_invariants(rng):
    for _ in range(100):
        counts = random_counts(rng)
        m = int(rng.integers(1, counts.max() + 1))
        bf = best_fit(counts, m)
        wa = wrap_around(counts, m)
        gamma = int(np.minimum(counts, m).sum())
        assert bf.num_arrays >= wa.num_arrays == gamma // m  # eq. (3) and K^BF >= K^WA
        assert m * bf.num_arrays >= gamma
        memb = bf.membership().toarray()
        np.testing.assert_array_equal(memb.sum(axis=1), np.minimum(counts, m))
        np.testing.assert_array_equal(memb.sum(axis=0), bf.fills)
        assert np.all((memb > 0).sum(axis=1) == 1)  # one array per user
        assert np.all(bf.arrays_per_user == 1)
        assert bf.discarded == 0
        assert np.all((bf.fills >= 1) & (bf.fills <= m))


def test_best_fit_many_fill_levels_matches_reference():
    """Enough distinct fill levels (> 512) to split the chunks of the sorted level set."""
    rng = np.random.default_rng(77)
    counts = rng.integers(1, 10_000, size=1500)
    for order in ("nonincreasing", "given"):
        got = best_fit(counts, 10_000, order=order)
        assign, fills = reference_best_fit(counts, 10_000, processing_order(counts, order))
        np.testing.assert_array_equal(got.user_array, assign)
        np.testing.assert_array_equal(got.fills, fills)


def test_sorted_level_set_against_python_set(rng):
    from dpopt.arrays.grouping import _SortedInts

    levels = _SortedInts([], load=2)
    ref: set[int] = set()
    for _ in range(3000):
        v = int(rng.integers(0, 60))
        if v in ref and rng.random() < 0.5:
            levels.discard(v)
            ref.discard(v)
        elif v not in ref:
            levels.add(v)
            ref.add(v)
        x = int(rng.integers(-1, 62))
        below = [r for r in ref if r <= x]
        assert levels.floor(x) == (max(below) if below else -1)
        assert list(levels) == sorted(ref) and len(levels) == len(ref)


# --------------------------------------------------------------------------- WrapAround
def test_wrap_around_matches_reference_on_random_instances(rng):
    for _ in range(N_RANDOM):
        counts = random_counts(rng, max_users=25, max_count=40)
        m = int(rng.integers(1, counts.max() + 3))
        for order in _orders(rng, counts.size):
            got = wrap_around(counts, m, order=order)
            perm = processing_order(counts, order)
            arrays, K = reference_wrap_around(counts, m, perm)
            assert got.num_arrays == K
            expected = np.zeros((counts.size, K), dtype=np.int64)
            for k, arr in enumerate(arrays):
                for u, _ in arr:
                    expected[u, k] += 1
            np.testing.assert_array_equal(got.membership().toarray(), expected)
            # array_of: every placed (user, rank) slot, and the tail marked K
            placed = {(u, j): k for k, arr in enumerate(arrays) for u, j in arr}
            slots = [(u, j) for u in perm for j in range(min(int(counts[u]), m))]
            us, js = np.array(slots).T
            want = [placed.get(sl, K) for sl in slots]
            np.testing.assert_array_equal(got.array_of(us, js), want)
            touched = (expected > 0).sum(axis=1)
            np.testing.assert_array_equal(got.arrays_per_user, touched)
            assert touched.max(initial=0) <= 2
            assert got.discarded == int(np.minimum(counts, m).sum()) - K * m
            np.testing.assert_array_equal(got.fills, np.full(K, m))


def test_wrap_around_user_array_is_refused():
    with pytest.raises(DpoptInputError, match="BestFit"):
        wrap_around([3, 3], 2).user_array


# --------------------------------------------------------------------------- array means
def _random_samples(rng, counts):
    users = np.repeat(np.arange(counts.size), counts)
    perm = rng.permutation(users.size)
    return rng.uniform(0, 65, size=users.size), users[perm]


@pytest.mark.parametrize("substitute", [False, True])
def test_array_means_match_explicit_construction(rng, substitute):
    for _ in range(60):
        counts = random_counts(rng, max_users=15, max_count=20)
        m = int(rng.integers(1, counts.max() + 2))
        values, users = _random_samples(rng, counts)
        per_user = [values[users == u] for u in range(counts.size)]  # input order kept
        slot = [np.full(c, v.mean()) if substitute else v for v, c in zip(per_user, counts)]
        # BestFit: mean of the kept slots of the users in each array
        bf = best_fit(counts, m)
        expect = np.zeros(bf.num_arrays)
        for u in range(counts.size):
            expect[bf.user_array[u]] += slot[u][: min(counts[u], m)].sum()
        expect /= bf.fills
        got = bf.array_means(values, users, substitute_user_mean=substitute)
        np.testing.assert_allclose(got, expect, rtol=1e-12)
        # WrapAround: the explicit stream
        wa = wrap_around(counts, m)
        arrays, K = reference_wrap_around(counts, m, wa.order)
        expect = np.array([np.mean([slot[u][j] for u, j in arr]) for arr in arrays])
        got = wa.array_means(values, users, substitute_user_mean=substitute)
        np.testing.assert_allclose(got, expect.reshape(K), rtol=1e-12)


def test_array_means_bad_input():
    g = best_fit([2, 1], 2)
    with pytest.raises(DpoptInputError, match="equal length"):
        g.array_means([1.0, 2.0], [0, 1, 0])
    with pytest.raises(DpoptInputError, match="user_index"):
        g.array_means([1.0, 2.0, 3.0], [0, 1, 5])
    with pytest.raises(DpoptInputError, match="fewer"):
        g.array_means([1.0, 2.0], [0, 1])


# --------------------------------------------------------------------------- scaling (Lemmas IV.1, IV.2)
def test_sample_and_user_scaling(rng):
    for _ in range(40):
        counts = random_counts(rng, max_users=20, max_count=30)
        m = int(rng.integers(1, counts.max() + 1))
        kappa = int(rng.integers(2, 6))
        # sample scaling: m -> kappa m, counts -> kappa counts: same arrays (Lemma IV.1)
        assert wrap_around(kappa * counts, kappa * m).num_arrays == wrap_around(counts, m).num_arrays
        assert best_fit(kappa * counts, kappa * m).num_arrays == best_fit(counts, m).num_arrays
        # user scaling: K^WA grows at least kappa-fold (Lemma IV.2)
        big = np.repeat(counts, kappa)
        assert wrap_around(big, m).num_arrays >= kappa * wrap_around(counts, m).num_arrays
        assert best_fit(big, m).num_arrays >= wrap_around(big, m).num_arrays


# --------------------------------------------------------------------------- ITMS (seed 003 §IV-B)
def test_itms_counts_and_groupings():
    counts = load_itms_counts()
    assert counts.size == 217 and int(counts.sum()) == 17166
    assert counts.max() == 417 and counts.min() == 1
    m = heuristic_length(counts)
    assert m == 114
    wa = wrap_around(counts, m)
    bf = best_fit(counts, m)
    assert wa.num_arrays == 110 == int(np.minimum(counts, m).sum()) // m
    assert bf.num_arrays >= wa.num_arrays
    assert bf.fills.max() <= m and np.all(wa.fills <= m)
    # the notes' counts: 111 in the paper's order, 113 in the authors' (alphabetical) order
    assert bf.num_arrays == 111
    assert best_fit(counts, m, order="given").num_arrays == 113
    assert wrap_around(counts, 46).num_arrays == 160
    assert best_fit(counts, 46, order="given").num_arrays == 164


def test_itms_samples_match_counts():
    df = load_itms()
    assert list(df.columns) == ["user", "value"]
    assert len(df) == 17166
    users, counts = np.unique(df["user"].to_numpy(), return_counts=True)
    np.testing.assert_array_equal(counts, load_itms_counts())
    assert abs(df["value"].mean() - 20.6677) < 1e-4
    assert df["value"].between(0, 65).all()
    # user-mean substitution on the real data: array means stay inside [0, U]
    _, inverse = np.unique(df["user"].to_numpy(), return_inverse=True)
    means = best_fit(counts, 114).array_means(df["value"].to_numpy(), inverse, substitute_user_mean=True)
    assert means.shape == (111,) and np.all((means >= 0) & (means <= 65))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("func", [best_fit, wrap_around])
@pytest.mark.parametrize(
    "counts, length, order, match",
    [
        ([1, 2], 0, "nonincreasing", "length"),
        ([1, 2], 1.5, "nonincreasing", "length"),
        ([1, 2], True, "nonincreasing", "length"),
        ([0, 2], 2, "nonincreasing", "counts"),
        ([], 2, "nonincreasing", "counts"),
        ([1.5, 2], 2, "nonincreasing", "counts"),
        ([1, 2], 2, "alphabetical", "order"),
        ([1, 2], 2, [0, 0], "order"),
        ([1, 2], 2, [0, 2], "order"),
        ([1, 2], 2, [0], "order"),
    ],
)
def test_bad_input(func, counts, length, order, match):
    with pytest.raises(ValueError, match=match):
        func(counts, length, order=order)
