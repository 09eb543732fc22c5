"""A user's kept records are a keyed uniform sample (dpopt.records.sample_key): the key is the
reference SipHash-2-4, each record of a pair or of a (user, node) is kept with probability c/m, and
the kept sets do not depend on the input's order, chunking or back-end."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpopt import DpoptInputError
from dpopt.records import (GridOptions, PairSamples, InputOptions, SampleKey, contributions, node_sample_counts,
                           node_split_counts)
from dpopt.records.aggregate import prefix_sums
from dpopt.records.contributions import pair_key_order, smallest_c
from dpopt.records.sample_key import record_keys, siphash24_words

from .conftest import BOUND, KEY, key_ref, random_records, siphash24_ref

GRID = GridOptions(7, "1h")
#: a generous significance: the tests are deterministic (fixed seeds), a failure means a real bias
ALPHA = 1e-6
#: records of one user in one place: equal timestamps and equal values on purpose (ties in time)
M = 7


def test_reference_siphash_reproduces_the_papers_test_vector():
    """Aumasson & Bernstein (2012), appendix A: key 00..0f, message 00..0e → a129ca6149be45e5."""
    assert siphash24_ref(bytes(range(16)), bytes(range(15))) == 0xA129CA6149BE45E5


@pytest.mark.parametrize("n_words", [1, 2, 5])
def test_vectorised_siphash_equals_the_reference(n_words):
    rng = np.random.default_rng(n_words)
    secret = rng.bytes(16)
    words = [rng.integers(0, 2**64, 200, dtype=np.uint64, endpoint=False) for _ in range(n_words)]
    got = siphash24_words(secret, words)
    want = [siphash24_ref(secret, b"".join(int(w[i]).to_bytes(8, "little") for w in words)) for i in range(200)]
    assert got.tolist() == want


def test_record_keys_equal_the_row_by_row_definition():
    frame = random_records(3, n=50)
    t = pd.to_datetime(frame["timestamp"], utc=True).dt.as_unit("ns").astype("int64").to_numpy()
    x = frame["value"].clip(0, BOUND).to_numpy()
    words = KEY.user_words(frame["user_id"].to_numpy(object))
    got = record_keys(KEY, words, t, x, frame["latitude"].to_numpy(), frame["longitude"].to_numpy())
    want = [key_ref(KEY, u, int(a), float(b), la, lo) for u, a, b, la, lo in
            zip(frame["user_id"], t, x, frame["latitude"], frame["longitude"])]
    assert got.tolist() == want
    assert record_keys(KEY, words[:1], t[:1], np.array([-0.0]), [1.0], [2.0]) == \
        record_keys(KEY, words[:1], t[:1], np.array([0.0]), [1.0], [2.0])  # −0.0 is 0.0


def _one_user(n: int = M) -> tuple[np.ndarray, ...]:
    """n distinct records of one user: three share a timestamp, two share a value."""
    t = 10**18 + np.array([0, 0, 0, 60, 120, 180, 240, 300, 360][:n], dtype=np.int64) * 10**9
    x = np.array([10.0, 10.0, 30.0, 40.0, 45.0, 47.0, 49.0, 20.0, 25.0][:n])  # inside [0, BOUND]: no clipping
    lat = np.linspace(30.26, 30.27, n)
    return t, x, lat, np.full(n, -97.74)


def _sample(key: SampleKey, c: int, t, x, lat, lng) -> np.ndarray:
    """Which of the records one pair keeps under ``key`` (indicator per record)."""
    keys = record_keys(key, key.user_words(np.array(["bus 1"], object))[np.zeros(t.size, int)], t, x, lat, lng)
    kept = smallest_c([(np.zeros(t.size, np.int32), keys, np.arange(t.size, dtype=float))], 1, c)
    out = np.zeros(t.size, dtype=bool)
    out[kept.value.astype(int)] = True
    return out


@pytest.mark.parametrize("c", [1, 3])
def test_each_record_of_a_pair_is_kept_with_probability_c_over_m(c):
    """Over 3000 release secrets every record is kept ~ Binomial(N, c/m); the kept c-subsets are
    uniform over the C(m, c) subsets (chi-square)."""
    rng = np.random.default_rng(2026 + c)
    rec = _one_user()
    n = 3000
    kept = np.array([_sample(SampleKey.from_generator(rng), c, *rec) for _ in range(n)])
    assert np.all(kept.sum(axis=1) == c)
    p = c / M
    for k in kept.sum(axis=0):  # two-sided binomial test per record, Bonferroni over the M records
        assert stats.binomtest(int(k), n, p).pvalue > ALPHA / M
    assert stats.binomtest(n, n, p).pvalue < ALPHA  # the old rule (the earliest always kept) fails the test
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(M), c))}
    counts = np.bincount([subsets[tuple(np.flatnonzero(r))] for r in kept], minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > ALPHA


@pytest.mark.slow
def test_first_records_in_time_are_not_favoured_through_contributions():
    """The full path (contributions with a release key): the earliest record is kept ~ c/m."""
    rng = np.random.default_rng(7)
    t, x, lat, lng = _one_user()
    frame = pd.DataFrame({"user_id": "bus 1", "latitude": lat, "longitude": lng,
                          "timestamp": pd.to_datetime(t, utc=True).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "value": x})
    c, n, hits = 2, 300, np.zeros(M)
    for _ in range(n):
        agg, _ = contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=c,
                               sample_key=SampleKey.from_generator(rng))
        assert agg.n_pairs == 1 and agg.samples.values.size == c
        hits += np.isin(x, agg.samples.values) & ~np.isin(x, [10.0])  # value 10 is on two records
        hits[0] += 10.0 in agg.samples.values  # "one of the two 10s" counted once, on record 0
    for k, share in zip(hits, [None, None, *[c / M] * (M - 2)]):
        if share is not None:
            assert stats.binomtest(int(k), n, share).pvalue > ALPHA


@pytest.mark.slow
def test_a_users_records_in_a_node_are_a_uniform_sample_of_the_node():
    """node_sample_counts: the user's m = 3 + 5 + 2 records in three finest pairs of one node; the c
    smallest keys over the node keep each record with probability c/m, whatever pair it is in."""
    rng = np.random.default_rng(11)
    sizes, c, n = np.array([3, 5, 2]), 4, 3000
    m = int(sizes.sum())
    t, x, lat, lng = _one_user(9)
    t, x, lat, lng = (np.concatenate([a, a[:1] + 10**12]) for a in (t, x, lat, lng))  # 10 records
    pair = np.repeat(np.arange(3), sizes)
    hits = np.zeros(m)
    for _ in range(n):
        key = SampleKey.from_generator(rng)
        keys = record_keys(key, key.user_words(np.array(["bus"], object))[np.zeros(m, int)], t, x, lat, lng)
        order = np.lexsort((x, keys, pair))  # each pair's records in (key, value) order, as stored
        samples = PairSamples(values=x[order], offsets=np.r_[0, np.cumsum(sizes)], keys=keys[order])
        gamma = node_sample_counts(samples, np.zeros(3, np.int64), c)
        assert gamma.sum() == c and np.all(gamma <= sizes)
        for p in range(3):
            hits[order[np.flatnonzero(pair[order] == p)[:gamma[p]]]] += 1
    for k in hits:
        assert stats.binomtest(int(k), n, c / m).pvalue > ALPHA / m


def test_node_counts_equal_brute_force_and_refuse_without_keys():
    rng = np.random.default_rng(5)
    frame = random_records(5, n=900)
    agg, _ = contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=4, sample_key=KEY)
    group = np.where(rng.random(agg.n_pairs) < 0.8, agg.pair_user * 3 + rng.integers(0, 3, agg.n_pairs), -1)
    gamma = node_sample_counts(agg.samples, group, 4)
    s = agg.samples
    for gid in np.unique(group[group >= 0]):
        recs = sorted((int(s.keys[i]), float(s.values[i]), p) for p in np.flatnonzero(group == gid)
                      for i in range(s.offsets[p], min(s.offsets[p + 1], s.offsets[p] + 4)))
        want = np.bincount([p for _, _, p in recs[:4]], minlength=agg.n_pairs)
        assert np.array_equal(gamma[group == gid], want[group == gid])
    assert np.all(gamma[group < 0] == 0)
    bare = PairSamples(values=s.values, offsets=s.offsets)
    with pytest.raises(DpoptInputError, match="no sample keys"):
        node_sample_counts(bare, group, 4)
    drawn = node_sample_counts(bare, group, 4, fallback_keys=lambda k: rng.integers(0, 2**63, k).astype(np.uint64))
    assert np.array_equal(np.bincount(np.maximum(group, 0), weights=(group >= 0) * drawn),
                          np.bincount(np.maximum(group, 0), weights=(group >= 0) * gamma))  # c (or all) per group


@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.slow
def test_order_chunking_and_dask_keep_bit_identical_samples(c):
    """Shuffled rows, exact duplicate records, chunks of 9 (3 merge levels), 37, 200 and all rows, and Dask:
    the same kept values, keys and offsets, the same node counts and kept sums (bit for bit)."""
    pytest.importorskip("dask.dataframe")
    frame = random_records(17, n=1000)
    frame = pd.concat([frame, frame.iloc[::50]], ignore_index=True)  # exact duplicates
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    runs = [contributions(src, GRID, InputOptions(chunksize=rows), bound=BOUND, first_records=c, sample_key=KEY)[0]
            for src, rows in ((frame, len(frame)), (shuffled, 9), (shuffled, 37), (frame, 200))]
    runs.append(contributions(shuffled, GRID, InputOptions(), bound=BOUND, first_records=c, sample_key=KEY,
                              backend="dask")[0])
    ref = runs[0]
    group = ref.pair_user * 7 + ref.pair_grid % 7
    g_ref = node_sample_counts(ref.samples, group, c + 1)
    for agg in runs[1:]:
        for f in ("users", "cells", "slots", "pair_user", "pair_grid", "count"):
            assert np.array_equal(getattr(agg, f), getattr(ref, f)), f
        for f in ("values", "keys", "offsets"):
            assert np.array_equal(getattr(agg.samples, f), getattr(ref.samples, f)), f
        assert np.array_equal(node_sample_counts(agg.samples, group, c + 1), g_ref)
        gamma = np.minimum(agg.count, c)  # the kept records' sums are exact; the pairs' float sums to rounding
        pairs = np.arange(agg.n_pairs)
        assert all(np.array_equal(u, v) for u, v in zip(prefix_sums(agg.samples, pairs, gamma),
                                                        prefix_sums(ref.samples, pairs, gamma)))
        np.testing.assert_allclose(agg.sum, ref.sum, rtol=1e-12)


def test_another_key_keeps_another_sample_and_bad_keys_are_refused():
    frame = random_records(4, n=800)
    a, _ = contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=1, sample_key=KEY)
    b, _ = contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=1,
                         sample_key=SampleKey.from_seed(1))
    assert not np.array_equal(a.samples.values, b.samples.values)
    assert SampleKey.from_seed(1) == SampleKey.from_seed(1) != SampleKey.from_seed(2)
    assert "secret" not in repr(KEY) and KEY.secret.hex() not in repr(KEY)
    with pytest.raises(DpoptInputError, match="`secret` must be 16 bytes"):
        SampleKey(b"short")
    with pytest.raises(DpoptInputError, match="`sample_key` must be a dpopt.records.SampleKey"):
        contributions(frame, GRID, InputOptions(), bound=BOUND, first_records=1, sample_key=b"0" * 16)


@pytest.mark.slow
def test_kept_means_on_the_embedded_day_lose_the_arrival_order_bias():
    """Embedded Austin day, busy grids (≥ 10 buses): the kept mean of a grid (≤ c records per bus) is
    unbiased for its target, the Γ-weighted mean of the buses' own means (what any sample of min(m, c)
    records per bus estimates); the first c by timestamp, computed here row by row, sat above it
    (+4.8 km/h at c = 1, +0.8 at c = 4)."""
    from dpopt.records.data import EXAMPLE_BOUND, austin_sample_path
    from dpopt.records.grid import h3_cells

    raw = pd.read_csv(austin_sample_path())
    t = pd.to_datetime(raw["timestamp"].astype(str), utc=True).dt.as_unit("ns").astype("int64").to_numpy()
    d = pd.DataFrame({"u": raw["user_id"].astype(str), "slot": t // (3600 * 10**9) * (3600 * 10**9), "t": t,
                      "cell": h3_cells(raw["latitude"].to_numpy(), raw["longitude"].to_numpy(), 7),
                      "x": raw["value"].clip(0, EXAMPLE_BOUND)}).sort_values(["u", "cell", "slot", "t", "x"])
    pair = d.groupby(["u", "cell", "slot"]).x.agg(["mean", "size"])
    busy = d.groupby(["cell", "slot"]).u.nunique().loc[lambda n: n >= 10].index
    aggs = [contributions(austin_sample_path(), GRID, InputOptions(), bound=EXAMPLE_BOUND, first_records=4,
                          sample_key=SampleKey.from_seed(s))[0] for s in range(3)]
    for c, before in ((1, 3.0), (4, 0.5)):
        g = np.minimum(pair["size"], c)
        target = ((pair["mean"] * g).groupby(level=["cell", "slot"]).sum() / g.groupby(level=["cell", "slot"]).sum())
        first = d[d.groupby(["u", "cell", "slot"]).cumcount() < c].groupby(["cell", "slot"]).x.mean()
        assert (first - target).reindex(busy).mean() > before  # the old rule's bias is there to remove
        errors = []
        for agg in aggs:
            gamma = np.minimum(agg.count, c)
            kept = agg.retained_stats(gamma)
            mean = pd.Series(kept.sum / kept.retained, index=pd.MultiIndex.from_arrays([agg.cells, agg.slots]))
            errors.append((mean.reindex(busy) - target.reindex(busy).to_numpy()).mean())
        assert abs(np.mean(errors)) < 0.3, (c, errors)  # sd of the mean over 3 keys ≈ 0.07 km/h at c = 1


def test_split_of_a_nodes_kept_records_has_the_hypergeometric_law():
    """node_split_counts (counts only, e.g. public-occupancy's second pass): the joint counts kept in
    the members of a group are those of a uniform sample of ``want`` of its records (chi-square over
    every outcome against the multivariate hypergeometric pmf), and Σ = want, 0 ≤ Γ ≤ m always."""
    rng = np.random.default_rng(99)
    count = np.array([3, 5, 2, 4, 1, 1, 6])
    group = np.array([0, 0, 0, 1, 2, 2, 3])
    want = np.array([4, 4, 4, 2, 2, 2, 6])  # group 1 keeps 2 of 4 (one member), 3 keeps all
    n = 4000
    draws = np.array([node_split_counts(count, group, want, rng) for _ in range(n)])
    assert np.all(draws <= count) and np.all(draws >= 0)
    assert np.all(draws[:, :3].sum(axis=1) == 4) and np.all(draws[:, 3] == 2) and np.all(draws[:, 6] == 6)
    assert np.all(draws[:, 4:6] == 1)
    outcomes = [o for o in itertools.product(range(4), range(6), range(3)) if sum(o) == 4]
    pmf = np.array([math.comb(3, a) * math.comb(5, b) * math.comb(2, c) for a, b, c in outcomes]) / math.comb(10, 4)
    index = {o: i for i, o in enumerate(outcomes)}
    observed = np.bincount([index[tuple(r)] for r in draws[:, :3]], minlength=len(outcomes))
    assert stats.chisquare(observed, pmf * n).pvalue > ALPHA
    with pytest.raises(DpoptInputError, match="`want` must be in 0..the group's record count"):
        node_split_counts(count, group, want + 10, rng)


@pytest.mark.parametrize("runs", [False, True])
@pytest.mark.parametrize("tied", [False, True])
def test_pair_key_order_is_the_three_key_lexsort(tied, runs):
    """The fast path (distinct top 32 bits within a pair) and the exact repair of tied runs both
    give the (pair, key, value) order, stable like lexsort — with pairs in random order and in runs."""
    rng = np.random.default_rng(int(tied) + 2 * int(runs))
    n = 5000
    pair = rng.integers(0, 300, n).astype(np.int32)
    if runs:
        pair = np.sort(pair)
    key = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    if tied:  # equal top bits, and equal keys with other values
        key[::7] = key[1::7][: key[::7].size] & np.uint64(0xFFFFFFFF00000000) | np.uint64(5)
        key[3::11] = key[3]
    value = rng.integers(0, 4, n) / 2.0
    assert np.array_equal(pair_key_order(pair, key, value), np.lexsort((value, key, pair)))


@pytest.mark.parametrize("c", [1, 3])
def test_a_level_bounded_on_its_own_sums_each_users_c_smallest_keys_per_node(c):
    """The user model's per-level bounding (dpopt.privacy.user.levels.bounded_level) with every node kept:
    node n's (R, Y) are, by brute force over the stored records, the sums over users of the c
    records with the smallest (key, value) among the user's records in n."""
    from dpopt.privacy.user.bounding import lattice_values
    from dpopt.privacy.user.levels import bounded_level

    frame = random_records(8, n=1200)
    agg, _ = contributions(frame, GRID, InputOptions(chunksize=200), bound=BOUND, first_records=8, sample_key=KEY)
    pair_node = np.where(agg.pair_grid % 7 == 6, -1, agg.pair_grid % 4)  # a public grouping, some grids unlisted
    lat = lattice_values(agg, BOUND)
    R, Y, _ = bounded_level(agg, pair_node, 4, 4, c, lat, np.random.default_rng(0))  # k = 4: every node kept
    s = agg.samples
    want_r, want_y = np.zeros(4, np.int64), np.zeros(4, np.int64)
    for u in range(agg.n_users):
        for node in range(4):
            recs = sorted((int(s.keys[i]), float(s.values[i]), int(lat.y[i])) for p in
                          np.flatnonzero((agg.pair_user == u) & (pair_node == node))
                          for i in range(s.offsets[p], s.offsets[p + 1]))[:c]
            want_r[node] += len(recs)
            want_y[node] += sum(y for _, _, y in recs)
    assert np.array_equal(R, want_r) and np.array_equal(Y, want_y)
