"""Figures 1–3 of seed 000 (Rameshwar & Tandon, arXiv 2502.04749v1; Figs. 2–3 = seed 001 Figs. 2–3).

* Fig. 1: worst-case dataset (all samples = U): ``E^OPT(ε)`` (analytic, Thm III.1 + Lemma III.1,
  ERRATA E5) against the Monte-Carlo estimate of ``E_AKMV = (1/n)Σ_ℓ E(U m_ℓ − T)^+ + 2E[T]/(εn)``.
* Fig. 2: average-case error, geometric collection (M = 6: L = 127, n = 448, m* = 64), samples
  i.i.d. uniform on (0, U]: vanilla Laplace, OPT-worst-case, AKMV.
* Fig. 3: the same for the extreme-valued collection (L = 101, m* = 10) with "projected Gaussian"
  samples (rejection sampling of N(U/2, U/4) into (0, U]); error axis on a log scale.

Protocol (seed 000 §IV; models/mechanisms.md): U = 65, 10^4 runs; each run draws a fresh dataset and replaces every
user's samples by the user's mean (which changes only OPT-wc); the three mechanisms see the same
draws (common random numbers across mechanisms and ε); MAE ``E|M(D) − f(D)|`` with its standard
error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_choice, check_positive_int
from ..mechanisms import akmv, laplace_mean, opt_worst_case
from ..mechanisms._common import substitute_user_means
from ..mechanisms.akmv import akmv_rank, akmv_threshold
from .base import FigureResult, Rows, figure_inputs, progress_bar

__all__ = ["geometric_collection", "extreme_collection", "uniform_samples", "projected_gaussian_samples",
           "fig1", "fig2", "fig3", "DEFAULT_EPSILONS"]

#: ε grid (the papers do not state theirs; all interesting behaviour is below ε = 2)
DEFAULT_EPSILONS = tuple(np.round(np.arange(0.05, 2.0001, 0.05), 2))
DEFAULT_RUNS = 10_000
#: ``draw(rng, shape, U) -> samples`` in (0, U]
Sampler = Callable[[np.random.Generator, tuple[int, ...], float], np.ndarray]
U_DEFAULT = 65.0


def geometric_collection(M: int = 6) -> np.ndarray:
    """``2^i`` users with ``2^{M−i}`` samples each, i = 0..M (L = 2^{M+1} − 1, n = (M+1)2^M)."""
    M = check_positive_int(M, "M", minimum=0)
    return np.concatenate([np.full(2**i, 2 ** (M - i), dtype=np.int64) for i in range(M + 1)])


def extreme_collection(L: int = 101, m_max: int = 10) -> np.ndarray:
    """``L − 1`` users with one sample and one user with ``m_max`` samples."""
    L = check_positive_int(L, "L", minimum=2)
    m_max = check_positive_int(m_max, "m_max", minimum=2)
    return np.concatenate([[m_max], np.ones(L - 1, dtype=np.int64)])


def _collection(name: str) -> np.ndarray:
    check_choice(name, "collection", ("geometric", "extreme"))
    return geometric_collection() if name == "geometric" else extreme_collection()


def uniform_samples(rng: np.random.Generator, shape: tuple[int, ...], bound: float) -> np.ndarray:
    """i.i.d. Unif((0, U])."""
    return bound * (1.0 - rng.random(shape))


def projected_gaussian_samples(
    rng: np.random.Generator, shape: tuple[int, ...], bound: float, *, sd: float | None = None
) -> np.ndarray:
    """i.i.d. N(U/2, sd²) conditioned on (0, U] by rejection (seed 000 §IV-D).

    ``sd=None`` reads N(U/2, U/4) with the papers' convention (second argument = variance):
    ``sd = sqrt(U/4)``. Pass ``sd=U/4`` for the other reading (models/mechanisms.md).
    """
    s = np.sqrt(bound / 4.0) if sd is None else float(sd)
    out = rng.normal(bound / 2.0, s, size=shape)
    bad = (out <= 0) | (out > bound)
    while np.any(bad):
        out[bad] = rng.normal(bound / 2.0, s, size=int(bad.sum()))
        bad = (out <= 0) | (out > bound)
    return out


def fig1(
    *,
    runs: int = DEFAULT_RUNS,
    seed: int = 0,
    progress: bool = False,
    collection: str = "geometric",
    epsilons: Any = None,
    bound: float = U_DEFAULT,
) -> FigureResult:
    """Seed 000 Fig. 1: worst-case errors of OPT (analytic) and AKMV (Monte Carlo) on the all-U dataset."""
    from ..clipping import optimal_error

    runs, U, eps = figure_inputs(runs, bound, epsilons, DEFAULT_EPSILONS)
    m = _collection(collection)
    n = float(m.sum())
    rng = np.random.default_rng(seed)
    rows = Rows("000-fig1")
    rows.add_many("OPT-worst-case", eps, optimal_error(m, U, eps), 0.0)
    sums = (U * m).astype(float)
    with progress_bar(len(eps), progress, "000-fig1") as bar:
        for e in eps:
            k = akmv_rank(e / 2.0)
            T = akmv_threshold(sums, U * float(m.max()), e / 2.0, k, rng=rng, runs=runs)
            err = np.maximum(sums[None, :] - T[:, None], 0.0).sum(axis=1) / n + 2.0 * T / (e * n)
            rows.add("AKMV", e, err.mean(), err.std(ddof=1) / np.sqrt(runs))
            bar.update(1)
    notes = (
        f"Collection: {collection} (the paper does not say which collection Fig. 1 uses; parameter "
        "`collection`).\n"
        "E^OPT is the corrected closed form of seed 001 with d = 1 (ERRATA E5), not seed 000 eq. (12).\n"
        "AKMV: T from Smith's quantile on the per-user sums U*m_l with bounds [0, U*m*], budget eps/2, "
        "rank ceil(2/eps) from the top (ERRATA E6), target gap L-k+1; E_AKMV uses E[T] inside the "
        "noise term (the paper's typo puts the random T outside).\n"
        f"Epsilon grid: {list(map(float, eps))} (not stated in the paper).\n"
        f"Runs per point: {runs}; seed {seed}."
    )
    return FigureResult("000-fig1", rows.frame(), notes, {"collection": collection, "runs": runs, "seed": seed})


def _average_case(
    figure: str,
    counts: np.ndarray,
    draw: Sampler,
    *,
    runs: int,
    seed: int,
    progress: bool,
    epsilons: Any,
    bound: float,
    batch: int,
) -> tuple[Rows, np.ndarray]:
    """Laplace, OPT-worst-case and AKMV on ``runs`` fresh datasets drawn by ``draw``; the rows and the ε grid."""
    runs, U, eps = figure_inputs(runs, bound, epsilons, DEFAULT_EPSILONS)
    batch = check_positive_int(batch, "batch")
    rng = np.random.default_rng(seed)
    n_tot = int(counts.sum())
    names = ("Laplace", "OPT-worst-case", "AKMV")
    errs = {(s, e): [] for s in names for e in eps}
    n_batches = -(-runs // batch)
    with progress_bar(n_batches * len(eps), progress, figure) as bar:
        done = 0
        while done < runs:
            r = min(batch, runs - done)
            raw = draw(rng, (r, n_tot), U)
            x = substitute_user_means(raw, counts)
            truth = x.mean(axis=1)
            for e in eps:
                for name, mech, kw in (
                    ("Laplace", laplace_mean, {}),
                    ("OPT-worst-case", opt_worst_case, {}),
                    ("AKMV", akmv, {}),
                ):
                    rel = mech(x, counts, U, e, rng=rng, runs=r, **kw)
                    errs[(name, e)].append(np.abs(rel.values - truth))
                bar.update(1)
            done += r
    rows = Rows(figure)
    for (name, e), chunks in errs.items():
        v = np.concatenate(chunks)
        rows.add(name, e, v.mean(), v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0)
    return rows, eps


def _average_notes(head: str, eps: np.ndarray, runs: int, seed: int) -> str:
    """The notes of an average-case figure: its own ``head``, then what Fig. 2 and Fig. 3 share."""
    return (head + _COMMON_NOTES
            + f"Epsilon grid (not stated in the paper): {list(map(float, eps))}.\nRuns: {runs}; seed {seed}.")


_COMMON_NOTES = (
    "Each run draws a fresh dataset; every user's samples are replaced by the user's mean (changes only "
    "OPT-worst-case, whose sensitivity is unchanged). The three mechanisms and all eps share the same "
    "draws. Value = MAE E|M(D) - f(D)|, stderr = sd/sqrt(runs).\n"
    "AKMV: eps/2 to Smith's private quantile of the per-user sums on [0, U*m*], rank ceil(2/eps) from the "
    "top (ERRATA E6), target gap L-k+1; eps/2 to Lap(2T/(eps*n)).\n"
    "OPT-worst-case: T_eps = ceil(2/eps)-th largest of U*m_l (0 below 2/L), bounds of Thm III.1 from "
    "dpopt.clipping.optimal_clipping, Lap(T/(n*eps)).\n"
)


def fig2(
    *,
    runs: int = DEFAULT_RUNS,
    seed: int = 0,
    progress: bool = False,
    epsilons: Any = None,
    bound: float = U_DEFAULT,
    M: int = 6,
    batch: int = 5_000,
) -> FigureResult:
    """Seed 000/001 Fig. 2: average-case errors, geometric collection, uniform samples."""
    m = geometric_collection(M)
    rows, eps = _average_case("000-fig2", m, uniform_samples, runs=runs, seed=seed, progress=progress,
                              epsilons=epsilons, bound=bound, batch=batch)
    notes = _average_notes(
        f"Geometric collection M={M}: L={m.size}, n={m.sum()}, m*={m.max()}; samples Unif((0, U]), U={bound}.\n",
        eps, runs, seed)
    return FigureResult("000-fig2", rows.frame(), notes, {"runs": runs, "seed": seed, "M": M})


def fig3(
    *,
    runs: int = DEFAULT_RUNS,
    seed: int = 0,
    progress: bool = False,
    epsilons: Any = None,
    bound: float = U_DEFAULT,
    L: int = 101,
    m_max: int = 10,
    sd: float | None = None,
    batch: int = 5_000,
) -> FigureResult:
    """Seed 000/001 Fig. 3: average-case errors, extreme-valued collection, projected-Gaussian samples."""
    if sd is not None and not sd > 0:
        raise DpoptInputError(f"`sd` must be a positive number; got {sd!r}")
    m = extreme_collection(L, m_max)

    def draw(rng: np.random.Generator, shape: tuple[int, ...], U: float) -> np.ndarray:
        return projected_gaussian_samples(rng, shape, U, sd=sd)

    rows, eps = _average_case("000-fig3", m, draw, runs=runs, seed=seed, progress=progress,
                              epsilons=epsilons, bound=bound, batch=batch)
    s = np.sqrt(bound / 4.0) if sd is None else sd
    notes = _average_notes(
        f"Extreme-valued collection: L={L}, m*={m_max} (n={m.sum()}).\n"
        f"Samples: N(U/2, U/4) conditioned on (0, U] by rejection, read with the papers' convention that "
        f"the second argument is the variance: sd = {s:.4g} (parameter `sd`; sd = U/4 = {bound / 4:g} is the "
        "other reading).\n", eps, runs, seed)
    return FigureResult("000-fig3", rows.frame(), notes, {"runs": runs, "seed": seed, "sd": s})
