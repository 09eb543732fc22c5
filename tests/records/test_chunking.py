"""Streaming in chunks changes nothing: any chunk size gives the one-shot contributions table, and
the Parquet reader cuts files into exact chunks whatever their row groups."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from dpopt.records import GridOptions, InputOptions, contributions
from dpopt.records.ingest import iter_raw_chunks

from .conftest import BOUND, KEY, RES, random_records

GRID = GridOptions(RES, "1h")
EXACT = ("users", "cells", "slots", "pair_user", "pair_grid", "count")
MODULE = importlib.import_module("dpopt.records.contributions")  # the package re-exports a function of that name


def _run(source, c, rows):
    return contributions(source, GRID, InputOptions(chunksize=rows), bound=BOUND, first_records=c, sample_key=KEY)[0]


@pytest.mark.parametrize("seed", [21])
@pytest.mark.parametrize("c", [None, 1, 4])
def test_random_chunk_sizes_equal_the_one_shot_table(tmp_path, monkeypatch, seed, c):
    monkeypatch.setattr(MODULE, "SELECT_BLOCK", 11)  # the top-c selection runs in many blocks
    rng = np.random.default_rng(seed)
    frame = random_records(seed, n=1200)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    path = tmp_path / "r.parquet"
    frame.to_parquet(path, row_group_size=int(rng.integers(50, 700)))
    whole = _run(frame, c, len(frame))  # one chunk: no merge at all
    small, large = int(rng.integers(15, 20)), int(rng.integers(40, 400))  # 60-80 chunks: 3 tree levels
    for rows, source in ((small, frame), (large, frame), (large, path)):
        agg = _run(source, c, rows)
        for f in EXACT:
            assert np.array_equal(getattr(agg, f), getattr(whole, f)), (rows, f)
        np.testing.assert_allclose(agg.sum, whole.sum, rtol=1e-12)
        np.testing.assert_allclose(agg.sumsq, whole.sumsq, rtol=1e-12)
        if c is not None:
            assert np.array_equal(agg.samples.values, whole.samples.values)
            assert np.array_equal(agg.samples.offsets, whole.samples.offsets)
            assert np.array_equal(agg.samples.keys, whole.samples.keys)


@pytest.mark.parametrize("groups", [5, 1000])
@pytest.mark.parametrize("rows", [7, 100, 5000])
def test_parquet_chunks_are_exact_whatever_the_row_groups(tmp_path, groups, rows):
    frame = random_records(31, n=640)
    frame.to_parquet(tmp_path / "a.parquet", row_group_size=groups)
    frame.iloc[:101].to_parquet(tmp_path / "b.parquet", row_group_size=groups)
    (tmp_path / "dir").mkdir()
    frame.to_parquet(tmp_path / "dir" / "p0.parquet", row_group_size=groups)
    frame.iloc[:101].to_parquet(tmp_path / "dir" / "p1.parquet", row_group_size=groups)
    for source, want in ((tmp_path / "a.parquet", [frame]), (tmp_path / "dir", [frame, frame.iloc[:101]])):
        chunks = list(iter_raw_chunks(source, chunksize=rows))
        sizes = [len(ch) for ch in chunks]
        expected = [s for part in want for s in [rows] * (len(part) // rows) + [len(part) % rows] if s]
        assert sizes == expected  # full chunks, the last one of each file shorter
        got = pd.concat(chunks, ignore_index=True)
        truth = pd.concat(want, ignore_index=True)
        assert got["user_id"].tolist() == truth["user_id"].tolist()
        assert np.array_equal(got["value"].to_numpy(), truth["value"].to_numpy())


@pytest.mark.parametrize("keys", ["few", "uniform", "top"])
@pytest.mark.parametrize("per_pair", [False, True])
@pytest.mark.parametrize("block", [1, 5, 10**6])
def test_smallest_c_in_blocks_equals_brute_force(monkeypatch, block, per_pair, keys):
    """One limit c for all pairs, or one limit per pair (the second pass's Γ_p, zeros included);
    keys with many ties in (key, value), uniform 64-bit keys (the key-quantile prefilter drops most
    of a big pair's records before the sort), and keys bunched at the top (the prefilter leaves every
    big pair short of c and it keeps all its records)."""
    monkeypatch.setattr(MODULE, "SELECT_BLOCK", block)
    rng = np.random.default_rng(block + 10 * per_pair)
    n_pairs = 40
    c = rng.integers(0, 6, n_pairs) if per_pair else 3
    draw = {"few": lambda m: rng.integers(0, 5, m).astype(np.uint64),
            "uniform": lambda m: rng.integers(0, 2**64, m, dtype=np.uint64),
            "top": lambda m: np.uint64(2**64 - 1) - rng.integers(0, 5, m).astype(np.uint64)}[keys]
    pieces = [(rng.integers(0, n_pairs, m).astype(np.int32), draw(m), rng.integers(0, 3, m) / 2.0)
              for m in (0, 50, 1200, 7)]
    kept = MODULE.smallest_c(pieces, n_pairs, c)
    cap = np.broadcast_to(c, n_pairs)
    assert len(kept) == sum(min(sum(int((p == q).sum()) for p, _, _ in pieces), cap[q]) for q in range(n_pairs))
    for q in range(n_pairs):
        want = sorted((int(t), float(v)) for p, ts, vs in pieces for pp, t, v in zip(p, ts, vs) if pp == q)[:cap[q]]
        got = sorted(zip(kept.key[kept.p == q].tolist(), kept.value[kept.p == q].tolist()))
        assert got == want


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_threaded_map_yields_the_chunks_partials_in_input_order(monkeypatch, threads):
    """The local stream's map runs MAP_THREADS chunks at once: whatever the threads and however long
    each chunk takes, the partials come in input order (so the merge tree and the float sums are
    those of one thread), and an error in a chunk reaches the caller."""
    import time

    monkeypatch.setattr(MODULE, "MAP_THREADS", threads)
    frame = random_records(3, n=300)
    delays = np.random.default_rng(threads).random(30) / 200

    def step(raw):
        time.sleep(delays[raw.index[0] // 10])
        return int(raw.index[0])

    got = list(MODULE._local_partials(frame, InputOptions(chunksize=10), step))
    assert got == list(range(0, 300, 10))

    def failing(raw):
        if raw.index[0] == 120:
            raise ValueError("chunk 12")
        return int(raw.index[0])

    with pytest.raises(ValueError, match="chunk 12"):
        list(MODULE._local_partials(frame, InputOptions(chunksize=10), failing))
    many = contributions(frame, GRID, InputOptions(chunksize=37), bound=BOUND, first_records=3, sample_key=KEY)[0]
    monkeypatch.setattr(MODULE, "MAP_THREADS", 1)
    one = contributions(frame, GRID, InputOptions(chunksize=37), bound=BOUND, first_records=3, sample_key=KEY)[0]
    for f in EXACT + ("sum", "sumsq"):
        assert np.array_equal(getattr(one, f), getattr(many, f))
    assert np.array_equal(one.samples.values, many.samples.values) and np.array_equal(one.samples.keys, many.samples.keys)
