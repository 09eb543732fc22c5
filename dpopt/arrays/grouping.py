"""Pseudo-user grouping of seed 003 (Rameshwar et al., arXiv 2401.15906, §III-A): WrapAround and BestFit.

Each user ℓ keeps its first ``min(m_ℓ, m)`` samples, and these are packed into arrays ("pseudo-users")
of length m:

* **WrapAround** (Algorithm 1): concatenate the kept samples of all users (in processing order) and cut
  the stream every m positions; the trailing partial block is discarded, so there are
  K^WA = ⌊Γ_m / m⌋ full arrays (eq. (3)), Γ_m = Σ_ℓ min{m_ℓ, m}. A user keeps at most m samples,
  so it touches at most two consecutive arrays (two when it straddles a block boundary).
* **BestFit** (Algorithm 2): each user's kept samples go, all together, into the fullest array that
  still has room for them (least index among equally full ones); a new array is opened when none has
  room. K^BF ≥ K^WA because m·K^BF ≥ Γ_m. Every user touches exactly one array.

Users are processed in non-increasing m_ℓ (the paper; ties in input order) unless ``order`` says
otherwise (the authors' code used the alphabetical user order, i.e. ``order="given"`` on counts listed
in ``numpy.unique`` order). See models/array_length.md.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from .._validation import DpoptInputError, as_counts, check_positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ArrayGrouping", "best_fit", "wrap_around", "processing_order"]

OrderLike = Literal["nonincreasing", "given"] | Any


def processing_order(counts: np.ndarray, order: OrderLike = "nonincreasing") -> np.ndarray:
    """The order in which users are grouped: a permutation of ``range(L)``.

    Parameters
    ----------
    counts : ndarray of int
        Validated per-user counts m_ℓ.
    order : {"nonincreasing", "given"} or array-like of int
        ``"nonincreasing"`` sorts by m_ℓ, largest first, ties in input order (seed 003, §III-A);
        ``"given"`` keeps the input order (the authors' code); an explicit permutation is used as is.
    """
    L = counts.shape[0]
    if isinstance(order, str):
        if order == "nonincreasing":
            return np.argsort(-counts, kind="stable")
        if order == "given":
            return np.arange(L, dtype=np.int64)
        raise DpoptInputError(
            f"`order` must be 'nonincreasing', 'given' or a permutation of range(len(counts)); got {order!r}"
        )
    perm = np.asarray(order)
    if perm.shape != (L,) or perm.dtype.kind not in "iu":
        raise DpoptInputError(
            f"`order` must be a permutation of range({L}) (integer array of length {L}); got shape {perm.shape}"
        )
    perm = perm.astype(np.int64)
    seen = np.zeros(L, dtype=bool)
    inside = (perm >= 0) & (perm < L)
    if not inside.all():
        raise DpoptInputError(f"`order` must be a permutation of range({L}); found entry {perm[~inside][0]}")
    seen[perm] = True
    if not seen.all():
        raise DpoptInputError(f"`order` must be a permutation of range({L}); user {int(np.argmin(seen))} is missing")
    return perm


@dataclass(frozen=True, eq=False)
class ArrayGrouping:
    """Result of :func:`best_fit` or :func:`wrap_around`.

    Attributes
    ----------
    method : {"best_fit", "wrap_around"}
    length : int
        Array length m.
    order : ndarray of int, shape (L,)
        Processing order: ``order[i]`` is the user placed i-th.
    retained : ndarray of int, shape (L,)
        Samples kept per user, ``min(m_ℓ, m)``.
    start, stop : ndarray of int, shape (L,)
        User ℓ's samples lie in arrays ``start[ℓ] <= k < stop[ℓ]`` (CSR-like). BestFit:
        ``stop = start + 1``. WrapAround: at most two consecutive arrays; ``start == stop`` when all
        of the user's kept samples fell into the discarded trailing block.
    fills : ndarray of int, shape (K,)
        Number of samples n_k in each array (all equal to m for WrapAround).
    num_arrays : int
        K (K^BF or K^WA = ⌊Γ_m/m⌋).
    discarded : int
        Kept samples that were not placed (WrapAround's trailing partial block; 0 for BestFit).
    """

    method: str
    length: int
    order: np.ndarray
    retained: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    fills: np.ndarray
    num_arrays: int
    discarded: int

    def __repr__(self) -> str:  # one line: never the per-user arrays
        return (f"ArrayGrouping(method={self.method!r}, length={self.length}, users={self.num_users}, "
                f"num_arrays={self.num_arrays}, fills={int(self.fills.min()) if self.fills.size else 0}.."
                f"{int(self.fills.max()) if self.fills.size else 0}, discarded={self.discarded})")

    def summary(self) -> dict[str, Any]:
        """The grouping in a few numbers: method, array length, users, arrays, samples kept and discarded."""
        return {"method": self.method, "length": self.length, "users": self.num_users, "arrays": self.num_arrays,
                "retained": int(np.sum(self.retained)), "discarded": int(self.discarded)}

    def to_frame(self) -> "pd.DataFrame":
        """One row per user (input order): samples kept, arrays ``[start, stop)`` and how many."""
        import pandas as pd

        pos = np.empty(self.num_users, dtype=np.int64)
        pos[self.order] = np.arange(self.num_users)
        return pd.DataFrame({"retained": self.retained, "start": self.start, "stop": self.stop,
                             "arrays": self.stop - self.start, "position": pos},
                            index=pd.RangeIndex(self.num_users, name="user"))

    @property
    def num_users(self) -> int:
        return int(self.retained.shape[0])

    @property
    def user_array(self) -> np.ndarray:
        """The array of each user (BestFit only; WrapAround users may touch two arrays)."""
        if self.method != "best_fit":
            raise DpoptInputError(
                "`user_array` is defined for BestFit groupings only (a WrapAround user may touch two "
                "arrays); use `start`/`stop` or `membership()`"
            )
        return self.start

    @property
    def arrays_per_user(self) -> np.ndarray:
        """How many arrays each user touches (the user's influence; ≤ 1 BestFit, ≤ 2 WrapAround)."""
        return self.stop - self.start

    def membership(self) -> sp.csr_array:
        """Sparse users × arrays matrix: entry (ℓ, k) = number of user ℓ's samples in array k."""
        L, K, m = self.num_users, self.num_arrays, self.length
        if self.method == "best_fit":
            return sp.csr_array(
                (self.retained.astype(np.int64), (np.arange(L), self.start)), shape=(L, K)
            )
        begin, end = self._stream_offsets()
        touches = self.stop - self.start
        rows = np.repeat(np.arange(L, dtype=np.int64), touches)
        first = np.repeat(self.start, touches)
        k = first + (np.arange(rows.size) - np.repeat(np.cumsum(touches) - touches, touches))
        lo = np.maximum(np.repeat(begin, touches), k * m)
        hi = np.minimum(np.repeat(end, touches), (k + 1) * m)
        return sp.csr_array((hi - lo, (rows, k)), shape=(L, K))

    def _stream_offsets(self) -> tuple[np.ndarray, np.ndarray]:
        """Per user, [begin, end) of its kept samples in the WrapAround stream."""
        c = self.retained[self.order]
        end_o = np.cumsum(c)
        begin = np.empty_like(self.retained)
        end = np.empty_like(self.retained)
        begin[self.order] = end_o - c
        end[self.order] = end_o
        return begin, end

    def array_means(
        self, values: Any, user_index: Any, *, substitute_user_mean: bool = False
    ) -> np.ndarray:
        """Array means Ā_k from the raw samples (seed 003, §III-C).

        Parameters
        ----------
        values : array-like of float, shape (N,)
            All samples, in any order.
        user_index : array-like of int, shape (N,)
            ``user_index[i]`` is the position (in ``counts``) of the user of sample i; user ℓ must
            have exactly m_ℓ samples.
        substitute_user_mean : bool, keyword-only
            Seed 003 §IV-A: every slot given to user ℓ holds the user's mean S̄_ℓ over *all* its m_ℓ
            samples. Otherwise the user's first ``min(m_ℓ, m)`` samples (in the given order) are used.

        Returns
        -------
        ndarray of float, shape (K,)
        """
        vals = np.asarray(values, dtype=float)
        users = np.asarray(user_index)
        L = self.num_users
        if vals.ndim != 1 or users.shape != vals.shape:
            raise DpoptInputError(
                f"`values` and `user_index` must be 1-D of equal length; got shapes {vals.shape}, {users.shape}"
            )
        if users.dtype.kind not in "iu" or (users.size and (users.min() < 0 or users.max() >= L)):
            raise DpoptInputError(f"`user_index` must hold integers in [0, {L}); got {users[:6]!r}...")
        users = users.astype(np.int64)
        counts = np.bincount(users, minlength=L)
        if substitute_user_mean:
            sums = np.bincount(users, weights=vals, minlength=L)
            with np.errstate(invalid="ignore", divide="ignore"):
                user_mean = sums / counts
        # rank of each sample within its user (stable: input order)
        by_user = np.argsort(users, kind="stable")
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.empty(users.size, dtype=np.int64)
        rank[by_user] = np.arange(users.size) - np.repeat(first, counts)
        if np.any(counts < self.retained):
            bad = int(np.flatnonzero(counts < self.retained)[0])
            raise DpoptInputError(
                f"`user_index` gives user {bad} {counts[bad]} samples, fewer than the {self.retained[bad]} it keeps"
            )
        keep = rank < self.retained[users]
        u = users[keep]
        v = user_mean[u] if substitute_user_mean else vals[keep]
        k = self.array_of(u, rank[keep])
        inside = k < self.num_arrays
        sums_k = np.bincount(k[inside], weights=v[inside], minlength=self.num_arrays)
        return sums_k / self.fills

    def array_of(self, user: Any, rank: Any) -> np.ndarray:
        """Array index of the ``rank``-th kept sample (0-based, ``rank < min(m_ℓ, m)``) of ``user``.

        BestFit: the user's array. WrapAround: position ``begin_ℓ + rank`` of the stream cut every m
        (Algorithm 1); ``num_arrays`` marks a sample of the discarded trailing block. Vectorised over
        equal-shaped ``user`` and ``rank``; depends on the public counts only.
        """
        u = np.asarray(user, dtype=np.int64)
        if self.method == "best_fit":
            return self.start[u]
        begin, _ = self._stream_offsets()
        return np.minimum((begin[u] + np.asarray(rank, dtype=np.int64)) // self.length, self.num_arrays)


class _SortedInts:
    """A sorted set of ints in chunks of at most ``2 * load`` (the layout of sortedcontainers).

    ``floor``, ``add`` and ``discard`` cost O(log n + load) instead of the O(n) memmove of one flat
    list, so BestFit stays O(L log L) (times a small constant) even with ~10^6 distinct fill levels.
    """

    __slots__ = ("chunks", "maxes", "load")

    def __init__(self, values: list[int], load: int = 256) -> None:
        self.load = load
        self.chunks = [values[i : i + load] for i in range(0, len(values), load)]
        self.maxes = [ch[-1] for ch in self.chunks]

    def floor(self, x: int) -> int:
        """Largest member ≤ x, or −1."""
        maxes = self.maxes
        i = bisect.bisect_right(maxes, x)
        if i < len(maxes):
            ch = self.chunks[i]
            j = bisect.bisect_right(ch, x)
            if j:
                return ch[j - 1]
        return maxes[i - 1] if i else -1

    def add(self, v: int) -> None:
        maxes = self.maxes
        if not maxes:
            self.chunks.append([v])
            maxes.append(v)
            return
        i = bisect.bisect_left(maxes, v)
        if i == len(maxes):
            i -= 1
            ch = self.chunks[i]
            ch.append(v)
            maxes[i] = v
        else:
            ch = self.chunks[i]
            bisect.insort(ch, v)
        if len(ch) > 2 * self.load:
            half = ch[self.load :]
            del ch[self.load :]
            self.chunks.insert(i + 1, half)
            maxes.insert(i + 1, half[-1])
            maxes[i] = ch[-1]

    def discard(self, v: int) -> None:
        """Remove a member ``v`` (which must be present)."""
        maxes = self.maxes
        i = bisect.bisect_left(maxes, v)
        ch = self.chunks[i]
        j = bisect.bisect_left(ch, v)
        del ch[j]
        if not ch:
            del self.chunks[i]
            del maxes[i]
        elif j == len(ch):
            maxes[i] = ch[-1]

    def __len__(self) -> int:
        return sum(len(ch) for ch in self.chunks)

    def __iter__(self) -> Iterator[int]:
        for ch in self.chunks:
            yield from ch


def _prepare(counts: Any, length: Any, order: OrderLike) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Validate; return m, the processing order, min(m_ℓ, m) per user and in processing order.

    Only the public counts enter: the grouping of user-level neighbours is identical.
    """
    m_l = as_counts(counts)
    m = check_positive_int(length, "length")
    perm = processing_order(m_l, order)
    retained = np.minimum(m_l, m)
    return m, perm, retained, retained[perm]


def _grouping(
    method: str, m: int, perm: np.ndarray, retained: np.ndarray,
    start_o: np.ndarray, stop_o: np.ndarray, fills: np.ndarray, discarded: int,
) -> ArrayGrouping:
    """The :class:`ArrayGrouping` of arrays ``[start_o, stop_o)`` given per user in processing order."""
    start = np.empty_like(retained)
    stop = np.empty_like(retained)
    start[perm] = start_o
    stop[perm] = stop_o
    return ArrayGrouping(method=method, length=m, order=perm, retained=retained, start=start, stop=stop,
                         fills=fills, num_arrays=int(fills.shape[0]), discarded=discarded)


def wrap_around(counts: Any, length: int, *, order: OrderLike = "nonincreasing") -> ArrayGrouping:
    """WrapAround grouping (seed 003, Algorithm 1); fully vectorised, O(L log L) for the sort.

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1.
    length : int
        Array length m ≥ 1.
    order : {"nonincreasing", "given"} or permutation, keyword-only
        User processing order (see :func:`processing_order`).

    Returns
    -------
    ArrayGrouping
        ``num_arrays = ⌊Γ_m / m⌋`` (eq. (3)); every array full; the trailing ``Γ_m mod m`` samples
        are ``discarded``.
    """
    m, perm, retained, c = _prepare(counts, length, order)
    end_o = np.cumsum(c)
    total = int(end_o[-1])
    K = total // m
    begin_o = end_o - c
    start_o = np.minimum(begin_o // m, K)
    stop_o = np.maximum(np.minimum(-(-end_o // m), K), start_o)  # ceil(end / m), capped at K
    return _grouping("wrap_around", m, perm, retained, start_o, stop_o, np.full(K, m, dtype=np.int64),
                     total - K * m)


def best_fit(counts: Any, length: int, *, order: OrderLike = "nonincreasing") -> ArrayGrouping:
    """BestFit grouping (seed 003, Algorithm 2) in O(L log L).

    User ℓ's ``c = min(m_ℓ, m)`` kept samples go to the fullest array with ``n_k + c ≤ m`` (the
    least-indexed among equally full ones), or to a new array if none has room.

    Implementation: arrays that are not full are kept in buckets by fill level; a chunked sorted set
    of the non-empty levels (bisect over chunk maxima, then within a chunk) gives the largest level
    ``≤ m − c`` in O(log L), and each bucket is a min-heap of array indices (the tie rule). When
    users arrive in non-increasing ``c`` (the default order), every user with ``2c > m`` must open a new array (all earlier arrays
    already hold ≥ c samples), so that prefix is placed without a loop.

    Parameters
    ----------
    counts, length, order
        As in :func:`wrap_around`.

    Returns
    -------
    ArrayGrouping
        ``user_array`` (= ``start``) is each user's array; ``fills[k] ≤ m``.
    """
    m, perm, retained, c = _prepare(counts, length, order)
    L = c.shape[0]
    # prefix that must open new arrays: with non-increasing c, users with 2c > m cannot share
    if L > 1 and bool(np.all(c[:-1] >= c[1:])):
        p = int(np.searchsorted(-c, -(m // 2), side="left"))  # first index with c <= m // 2
    else:
        p = 1
    assign = np.empty(L, dtype=np.int64)
    assign[:p] = np.arange(p)
    fills: list[int] = c[:p].tolist()
    assign[p:] = _best_fit_rest(c[p:].tolist(), m, fills, _open_buckets(c[:p], m))
    return _grouping("best_fit", m, perm, retained, assign, assign + 1, np.asarray(fills, dtype=np.int64), 0)


def _open_buckets(c: np.ndarray, m: int) -> dict[int, list[int]]:
    """The arrays ``0..len(c)−1`` (array k holds ``c[k]``) that are not full, by fill level: each
    level's array indices ascending (a valid min-heap)."""
    open_idx = np.flatnonzero(c < m)
    buckets: dict[int, list[int]] = {}
    if open_idx.size:
        lv = c[open_idx]
        srt = np.lexsort((open_idx, lv))
        lv_s, idx_s = lv[srt], open_idx[srt]
        cuts = np.flatnonzero(np.diff(lv_s)) + 1
        for level, members in zip(lv_s[np.r_[0, cuts]].tolist(), np.split(idx_s, cuts)):
            buckets[level] = members.tolist()  # ascending: a valid heap
    return buckets


def _best_fit_rest(rest: list[int], m: int, fills: list[int], buckets: dict[int, list[int]]) -> list[int]:
    """BestFit's loop over the users after the prefix: the array of each of ``rest`` (kept samples).

    ``fills`` (one per array opened so far) and ``buckets`` (:func:`_open_buckets`) are updated in place.
    """
    levels = _SortedInts(sorted(buckets))
    nk = len(fills)
    out = [0] * len(rest)
    heappop, heappush = heapq.heappop, heapq.heappush
    floor, add, discard = levels.floor, levels.add, levels.discard
    for i, ci in enumerate(rest):
        f0 = floor(m - ci)
        if f0 < 0:
            k = nk
            nk += 1
            fills.append(ci)
            f = ci
        else:
            h = buckets[f0]
            k = heappop(h)
            if not h:
                discard(f0)
                del buckets[f0]
            f = f0 + ci
            fills[k] = f
        out[i] = k
        if f < m:
            h2 = buckets.get(f)
            if h2 is None:
                buckets[f] = [k]
                add(f)
            else:
                heappush(h2, k)
    return out
