"""Array-Averaging with pseudo-users (seed 003 §III-C; WrapAround / BestFit grouping §III-A).

Each user keeps its first ``min(m_ℓ, m)`` samples; these are packed into arrays of length ``m`` by
:func:`dpopt.arrays.wrap_around` (Algorithm 1, ``K^WA = ⌊Γ_m/m⌋`` full arrays) or
:func:`dpopt.arrays.best_fit` (Algorithm 2, ``K^BF`` arrays, partial ones kept). With
``substitute_means=True`` (seed 003 §IV-A, the paper's experiments) every slot of user ℓ holds the
user's mean over all of its ``m_ℓ`` samples.

Estimator: ``f_m(D) = (1/K) Σ_k Ā_k`` (mean of the array means).

Sensitivity: one user's slots in array k move ``Ā_k`` by at most ``U·c_{ℓk}/n_k``.
* BestFit: a user lies in one array, ``c ≤ n_k``: ``Δ_BF = U/K`` (seed 003 eq. (4)).
* WrapAround: a user may be split over two *full* arrays, ``c_1 + c_2 ≤ m``: the sum of array
  means moves by at most ``U(c_1 + c_2)/m ≤ U``, so ``U/K`` also suffices. The paper's text states
  ``2U/K``; its 2023 experiment code (which produced Fig. 1) used ``U/K``
  (seed 003 §III-C). ``wrap_factor`` chooses (default 1, the exact value, checked by brute force
  in tests/mechanisms; pass 2 for the paper's conservative constant).

Budget: all of ε to ``Lap(Δ/ε)``. The array length ``m`` and the packing depend only on the public
counts, so a neighbouring dataset (same counts) is packed identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from .._validation import DpoptInputError, check_choice, check_positive_int
from ._common import BatchedEstimator, Release, laplace_release, prepare, user_means

if TYPE_CHECKING:  # pragma: no cover
    from ..arrays.grouping import ArrayGrouping

__all__ = ["Packing", "pack", "array_means", "array_averaging", "array_averaging_sensitivity",
           "median_array_length", "array_mean_estimator"]

Grouping = Literal["best_fit", "wrap_around"]
_GROUPINGS = ("best_fit", "wrap_around")


@dataclass(frozen=True, eq=False)
class Packing:
    """A pseudo-user grouping as linear maps from data to array means.

    Attributes
    ----------
    user_weights : scipy.sparse.csr_array, shape (K, L)
        ``Ā = W_u · x̄`` under per-user mean substitution (entry ``c_{ℓk}/n_k``).
    sample_weights : scipy.sparse.csr_array, shape (K, N)
        ``Ā = W_s · x`` on the raw samples (the first ``min(m_ℓ, m)`` samples of each user).
    source : ArrayGrouping
        The :class:`dpopt.arrays.grouping.ArrayGrouping` it was built from; ``grouping``,
        ``length``, ``num_arrays`` and ``influence`` are read from it.
    """

    user_weights: sp.csr_array
    sample_weights: sp.csr_array
    source: ArrayGrouping

    @property
    def grouping(self) -> str:
        """``"best_fit"`` or ``"wrap_around"``."""
        return self.source.method

    @property
    def length(self) -> int:
        """The array length m."""
        return self.source.length

    @property
    def num_arrays(self) -> int:
        """K."""
        return self.source.num_arrays

    @cached_property
    def influence(self) -> int:
        """φ, the largest number of arrays one user touches (1 BestFit, ≤ 2 WrapAround; at least 1)."""
        return max(int(np.max(self.source.arrays_per_user)), 1)


_PACK_CACHE: dict[tuple, Packing] = {}
_PACK_CACHE_SIZE = 64


def pack(counts: Any, length: int, grouping: Grouping = "best_fit", *, order: Any = "nonincreasing") -> Packing:
    """Pack users into arrays of length ``length`` with :mod:`dpopt.arrays` and build the maps.

    The packing depends only on the public counts; results for named orders are cached (Monte-Carlo
    sweeps call this once per ε and mechanism on the same counts).
    """
    key = None
    if isinstance(order, str) and isinstance(length, (int, np.integer)) and isinstance(grouping, str):
        arr = np.asarray(counts)
        if arr.dtype.kind in "iu" and arr.ndim == 1:
            key = (arr.astype(np.int64).tobytes(), int(length), grouping, order)
            hit = _PACK_CACHE.get(key)
            if hit is not None:
                return hit
    p = _pack(counts, length, grouping, order=order)
    if key is not None:
        if len(_PACK_CACHE) >= _PACK_CACHE_SIZE:
            _PACK_CACHE.pop(next(iter(_PACK_CACHE)))
        _PACK_CACHE[key] = p
    return p


def _pack(counts: Any, length: int, grouping: Grouping, *, order: Any) -> Packing:
    from ..arrays import best_fit, wrap_around

    check_choice(grouping, "grouping", _GROUPINGS)
    m_arr = np.asarray(counts)
    length = check_positive_int(length, "length")
    g = (best_fit if grouping == "best_fit" else wrap_around)(m_arr, length, order=order)
    m = np.asarray(m_arr, dtype=np.int64)
    K = int(g.num_arrays)
    if K == 0:
        raise DpoptInputError(
            f"`length` = {length} leaves no complete array (Σ min(m_ℓ, m) < m); choose a smaller length"
        )
    memb = sp.csr_array(g.membership())  # (L, K) counts c_{ℓk}
    fills = np.asarray(g.fills, dtype=float)
    wu = sp.csr_array(memb.T.multiply(1.0 / fills[:, None]))
    # sample-level map: the first retained samples of each user, in stream/array order
    offsets = np.concatenate(([0], np.cumsum(m)[:-1]))
    ret = np.asarray(g.retained, dtype=np.int64)
    users = np.repeat(np.arange(m.size), ret)
    rank = np.arange(users.size) - np.repeat(np.cumsum(ret) - ret, ret)
    col = offsets[users] + rank
    k = g.array_of(users, rank)  # slot -> array from the public counts; K marks a discarded slot
    keep = k < K
    ws = sp.csr_array(
        (1.0 / fills[k[keep]], (k[keep], col[keep])), shape=(K, int(m.sum()))
    )
    return Packing(wu, ws, g)


def grouping_label(grouping: str) -> str:
    """``"BestFit"`` or ``"WrapAround"`` (the series suffix of seed 003's figures)."""
    return "BestFit" if grouping == "best_fit" else "WrapAround"


def array_means(samples: np.ndarray, counts: np.ndarray, packing: Packing, *, substitute_means: bool = True) -> np.ndarray:
    """Array means ``Ā_k`` for stacked datasets: ``samples (B, N) -> (B, K)``."""
    x = np.atleast_2d(np.asarray(samples, dtype=float))
    if substitute_means:
        return np.asarray((packing.user_weights @ user_means(x, np.asarray(counts)).T).T)
    return np.asarray((packing.sample_weights @ x.T).T)


def array_averaging_sensitivity(bound: float, packing: Packing, *, wrap_factor: float = 1.0) -> float:
    """``Δ = U/K`` (BestFit) or ``wrap_factor·U/K`` (WrapAround; paper text: 2, exact: 1).

    ``wrap_factor < 1`` would understate the sensitivity of a split user and is refused.
    """
    if not np.isfinite(wrap_factor) or wrap_factor < 1.0:
        raise DpoptInputError(
            f"`wrap_factor` must be a finite number >= 1 (U/K is the exact WrapAround sensitivity); "
            f"got {wrap_factor!r}"
        )
    factor = wrap_factor if packing.grouping == "wrap_around" else 1.0
    return factor * float(bound) / packing.num_arrays


def median_array_length(counts: Any) -> int:
    """The median choice of seed 003 Lemma III.2 (:func:`dpopt.arrays.median_length`)."""
    from ..arrays import median_length

    return int(median_length(counts))


def array_mean_estimator(length: int, grouping: Grouping = "best_fit", *, substitute_means: bool = True,
                         order: Any = "nonincreasing") -> BatchedEstimator:
    """Batched ``samples (B, N), counts -> (B,)`` estimator ``f_m`` that packs from the counts it is given.

    The packing is recomputed from ``counts`` on every call, so a brute-force search over
    neighbours exercises the grouping too (for :mod:`dpopt.verify`).
    """

    def estimator(samples: Any, counts: Any) -> np.ndarray:
        p = pack(counts, length, grouping, order=order)
        return array_means(samples, np.asarray(counts), p, substitute_means=substitute_means).mean(axis=-1)

    return estimator


def array_averaging(
    samples: Any, counts: Any, bound: float, epsilon: float, *, length: int, grouping: Grouping = "best_fit",
    rng: np.random.Generator, runs: int | None = None, wrap_factor: float = 1.0,
    substitute_means: bool = True, clip_output: bool = False, order: Any = "nonincreasing",
) -> Release:
    """Release ``f_m(D) + Lap(Δ/ε)`` (seed 003 §III-C), user-level ε-DP.

    Parameters
    ----------
    samples, counts, bound, epsilon, rng, runs
        As for :func:`dpopt.mechanisms.laplace.laplace_mean` (all of ε to the Laplace draw).
    length : int
        Array length m (e.g. :func:`median_array_length`, :func:`dpopt.mechanisms.levy.levy_array_length`
        or ``dpopt.optimal_array_length(...).length`` for OPT-Array-Averaging).
    grouping : {"best_fit", "wrap_around"}
    wrap_factor : float
        Sensitivity multiplier under WrapAround (1 exact; 2 as printed in seed 003).
    substitute_means : bool
        Per-user mean substitution (seed 003 §IV-A).
    clip_output : bool
        Clip the release to ``[0, U]`` (post-processing; the authors' code does it).
    order : str or permutation
        User processing order for the grouping (:func:`dpopt.arrays.grouping.processing_order`).
        A permutation given here must not depend on the samples (it is treated as public).
    """
    inp = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    p = pack(inp.counts, length, grouping, order=order)
    sens = array_averaging_sensitivity(inp.bound, p, wrap_factor=wrap_factor)
    est = array_means(inp.samples, inp.counts, p, substitute_means=substitute_means).mean(axis=-1)
    return laplace_release(est, sens, inp.epsilon, rng=inp.rng, runs=inp.runs,
                           mechanism=f"AA-{grouping_label(grouping)}",
                           details={"length": p.length, "num_arrays": p.num_arrays, "influence": p.influence},
                           clip_to=inp.bound if clip_output else None)
