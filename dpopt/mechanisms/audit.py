"""Statistical privacy audit: a likelihood-ratio histogram test on neighbouring datasets.

For an ε-DP mechanism M and neighbours D ~ D', every event S satisfies
``P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S]`` (and symmetrically). The audit, in the spirit of the
histogram testers of OpenDP and of Google's differential-privacy library (Ding et al. 2018,
"Detecting violations of differential privacy"), checks this on the bins of a histogram:

1. Bin edges are quantiles of a separate pilot sample (pooled from both datasets), so they do not
   depend on the test sample.
2. **Poissonised** test samples: ``N₁, N₂ ~ Poisson(n)`` releases from D and D'. The bin counts
   are then independent Poisson variables with means ``n·p₁(S)``, ``n·p₂(S)``, and given
   ``c₁ + c₂ = s``, ``c₁ ~ Binomial(s, p₁/(p₁ + p₂))`` exactly.
3. Under ε-DP, ``p₁/(p₁ + p₂) ≤ e^ε/(1 + e^ε)``; the one-sided binomial p-value
   ``P[Bin(s, e^ε/(1+e^ε)) ≥ c₁]`` is computed for every bin and both directions.
4. The mechanism **fails** when the smallest p-value is below ``α/(number of tests)``
   (Bonferroni): the false-positive rate of a truly ε-DP mechanism is at most ``α``.

Vector releases (e.g. BASELINE's (mean, variance)) are tested **jointly**: besides every
coordinate's histogram, the releases are binned on a product grid (``joint_bins`` quantile bins per
coordinate), whose cells are events of the joint output. A release giving the full ε to the mean and
to the variance is only 2ε-DP although each marginal is ε-DP; its corner cells (both coordinates in
the tails) show the ratio e^{2ε} and fail. The Bonferroni correction covers every test.

Neighbours: the caller's pair is tested, and with ``counts`` and ``bound`` (the flat data layout of
:mod:`dpopt.mechanisms._common`) the audit also searches a small family of user-level neighbours
itself (:func:`neighbour_family`): every user moved from all 0 to all U with the others at 0, U/2 or
U or as in ``dataset``, plus random pairs. A mechanism fails if any pair fails (Bonferroni over all
pairs), so an under-noised mechanism is caught even when the pair passed is not its worst.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .._validation import DpoptInputError, check_epsilon, check_positive_int
from ._common import Release, check_rng

__all__ = ["AuditResult", "audit", "neighbour_family", "under_noised_laplace"]

Sampler = Callable[[Any, int, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes
    ----------
    passed : bool
        No bin showed a significant violation of the ε-DP likelihood-ratio bound.
    epsilon : float
        The ε tested.
    min_p_value : float
        Smallest one-sided p-value over bins, directions and coordinates.
    threshold : float
        ``α / tests``; failing means ``min_p_value < threshold``.
    alpha : float
        Family-wise false-positive rate.
    tests : int
        Number of (bin, direction, coordinate) tests.
    worst_ratio : float
        Empirical ``c₁/c₂`` ratio (or its inverse) of the worst bin (∞ if one count is 0).
    samples : int
        Expected number of test releases per dataset.
    pairs : int
        Number of neighbouring pairs tested (1: only the caller's pair).
    worst_pair : str
        Which pair gave ``min_p_value`` (``"given"`` or a description from :func:`neighbour_family`).
    """

    passed: bool
    epsilon: float
    min_p_value: float
    threshold: float
    alpha: float
    tests: int
    worst_ratio: float
    samples: int
    pairs: int = 1
    worst_pair: str = "given"


def _as_columns(values: Any) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v.reshape(v.shape[0], -1)


def neighbour_family(
    dataset: Any, counts: Any, bound: float, *, random_pairs: int = 4, rng: np.random.Generator
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """A small family of user-level neighbouring pairs (D, D') in the flat data layout.

    For every user ℓ (samples contiguous, ``counts`` m_ℓ): ℓ's samples all 0 in D and all U in D'
    with the others' samples at 0, at U/2, at U, or as in ``dataset``; then ``random_pairs`` pairs
    with uniform samples in [0, U] where one random user's samples are redrawn. These contain the
    worst cases of the mean (a whole user from 0 to U) and of the variance (others concentrated).
    Returns ``(description, D, D')`` triples.
    """
    from .._validation import as_counts, check_bound

    m = as_counts(counts)
    U = check_bound(bound)
    base = np.asarray(dataset, dtype=float)
    if base.ndim != 1 or base.size != int(m.sum()):
        raise DpoptInputError(
            f"`dataset` must be a flat array of sum(counts) = {int(m.sum())} samples to search neighbours; "
            f"got shape {base.shape}"
        )
    starts = np.concatenate(([0], np.cumsum(m)[:-1]))
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    for user, (a, k) in enumerate(zip(starts, m)):
        block = slice(int(a), int(a + k))
        for name, others in (("0", np.zeros_like(base)), ("U/2", np.full_like(base, U / 2)),
                             ("U", np.full_like(base, U)), ("dataset", base)):
            d1, d2 = others.copy(), others.copy()
            d1[block], d2[block] = 0.0, U
            out.append((f"user {user}: 0 -> U, others {name}", d1, d2))
    for i in range(check_positive_int(random_pairs, "random_pairs", minimum=0)):
        user = int(rng.integers(m.size))
        block = slice(int(starts[user]), int(starts[user] + m[user]))
        d1 = rng.uniform(0.0, U, base.size)
        d2 = d1.copy()
        d2[block] = rng.uniform(0.0, U, int(m[user]))
        out.append((f"random pair {i} (user {user})", d1, d2))
    return out


def _pair_tests(
    sampler: Sampler, d1: Any, d2: Any, eps: float, *, rng: np.random.Generator, samples: int, bins: int,
    n_pilot: int, joint_bins: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """One-sided p-values and empirical ratios of every (event, direction) test on one pair."""
    pooled = np.vstack([_as_columns(sampler(d1, n_pilot, rng)), _as_columns(sampler(d2, n_pilot, rng))])
    n1, n2 = (int(rng.poisson(samples)) for _ in range(2))
    x1 = _as_columns(sampler(d1, max(n1, 1), rng))[:n1]
    x2 = _as_columns(sampler(d2, max(n2, 1), rng))[:n2]
    if x1.shape[1] != pooled.shape[1] or x2.shape[1] != pooled.shape[1]:
        raise DpoptInputError("`sampler` must return releases of one dimension for every call")
    q = np.exp(eps) / (1.0 + np.exp(eps))
    counts: list[tuple[np.ndarray, np.ndarray]] = []
    codes1, codes2, sizes = [], [], []
    d = pooled.shape[1]
    jb = joint_bins if joint_bins is not None else max(2, min(6, int(round(bins ** (1.0 / d)))))
    for col in range(d):
        inner = np.unique(np.quantile(pooled[:, col], np.linspace(0, 1, bins + 1)[1:-1]))
        edges = np.concatenate(([-np.inf], inner, [np.inf]))
        counts.append((np.histogram(x1[:, col], edges)[0], np.histogram(x2[:, col], edges)[0]))
        if d > 1:  # product grid of the joint release
            jinner = np.unique(np.quantile(pooled[:, col], np.linspace(0, 1, jb + 1)[1:-1]))
            codes1.append(np.searchsorted(jinner, x1[:, col], side="right"))
            codes2.append(np.searchsorted(jinner, x2[:, col], side="right"))
            sizes.append(jinner.size + 1)
    if d > 1:
        cells = int(np.prod(sizes))
        k1 = np.ravel_multi_index(tuple(codes1), sizes) if n1 else np.zeros(0, dtype=np.int64)
        k2 = np.ravel_multi_index(tuple(codes2), sizes) if n2 else np.zeros(0, dtype=np.int64)
        counts.append((np.bincount(k1, minlength=cells), np.bincount(k2, minlength=cells)))
    pvals: list[np.ndarray] = []
    ratios: list[np.ndarray] = []
    for c1, c2 in counts:
        s = c1 + c2
        for a, b in ((c1, c2), (c2, c1)):
            pvals.append(np.where(s > 0, stats.binom.sf(a - 1, s, q), 1.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios.append(np.where(b > 0, a / np.maximum(b, 1), np.where(a > 0, np.inf, 1.0)))
    return np.concatenate(pvals), np.concatenate(ratios)


def audit(sampler: Sampler, dataset: Any, neighbour: Any, epsilon: float, *, rng: np.random.Generator,
          samples: int = 200_000, bins: int = 30, alpha: float = 0.01, pilot: int | None = None,
          counts: Any = None, bound: float | None = None, random_pairs: int = 4,
          joint_bins: int | None = None) -> AuditResult:
    """Test whether ``sampler`` looks ε-DP on (``dataset``, ``neighbour``) and, with ``counts`` and
    ``bound``, on a family of neighbours it builds itself (:func:`neighbour_family`).

    Parameters
    ----------
    sampler : callable
        ``sampler(data, runs, rng) -> releases`` of shape ``(runs,)`` or ``(runs, d)``; a vector
        release is tested jointly (module doc).
    dataset, neighbour : object
        Two user-level neighbouring datasets (passed to ``sampler`` unchanged). ``neighbour`` may be
        None when ``counts`` and ``bound`` are given (only the searched family is tested).
    epsilon : float
        Claimed privacy level.
    rng : numpy.random.Generator
    samples : int
        Expected test releases per dataset of each pair (Poisson-distributed count).
    bins : int
        Number of histogram bins per coordinate (quantiles of the pilot sample).
    alpha : float
        Family-wise false-positive rate (over every pair, event and direction).
    pilot : int, optional
        Pilot releases per dataset for the bin edges (default ``samples // 10``).
    counts : array_like of int, optional
        m_ℓ of the users when ``dataset`` is a flat sample array (users contiguous): turns on the
        neighbour search.
    bound : float, optional
        U of the samples (needed with ``counts``).
    random_pairs : int
        Random pairs added to the searched family.
    joint_bins : int, optional
        Bins per coordinate of the joint (product-grid) test of vector releases (default
        ``round(bins^(1/d))`` clipped to 2..6).
    """
    eps = check_epsilon(epsilon)
    rng = check_rng(rng)
    if not callable(sampler):
        raise DpoptInputError(f"`sampler` must be callable as sampler(data, runs, rng); got {type(sampler).__name__}")
    samples = check_positive_int(samples, "samples")
    bins = check_positive_int(bins, "bins", minimum=2)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0.0 < alpha < 1.0:
        raise DpoptInputError(f"`alpha` must lie in (0, 1); got {alpha!r}")
    if joint_bins is not None:
        joint_bins = check_positive_int(joint_bins, "joint_bins", minimum=2)
    n_pilot = check_positive_int(pilot if pilot is not None else max(samples // 10, bins * 20), "pilot")
    pairs = _audit_pairs(dataset, neighbour, counts, bound, random_pairs=random_pairs, rng=rng)
    return _run_audit(sampler, pairs, eps, rng=rng, samples=samples, bins=bins, n_pilot=n_pilot,
                      joint_bins=joint_bins, alpha=alpha)


def _audit_pairs(dataset: Any, neighbour: Any, counts: Any, bound: float | None, *, random_pairs: int,
                 rng: np.random.Generator) -> list[tuple[str, Any, Any]]:
    """The named pairs :func:`audit` tests: the given one and, with ``counts`` and ``bound``, the
    searched family (:func:`neighbour_family`)."""
    if (counts is None) != (bound is None):
        raise DpoptInputError("`counts` and `bound` must be given together (they turn on the neighbour search)")
    pairs: list[tuple[str, Any, Any]] = []
    if neighbour is not None:
        pairs.append(("given", dataset, neighbour))
    if counts is not None:
        pairs += neighbour_family(dataset, counts, bound, random_pairs=random_pairs, rng=rng)
    if not pairs:
        raise DpoptInputError("`neighbour` must be given unless `counts` and `bound` are (neighbour search)")
    return pairs


def _run_audit(sampler: Sampler, pairs: list[tuple[str, Any, Any]], eps: float, *, rng: np.random.Generator,
               samples: int, bins: int, n_pilot: int, joint_bins: int | None, alpha: float) -> AuditResult:
    """Every pair's tests (:func:`_pair_tests`), judged at the Bonferroni threshold ``alpha``/tests."""
    p_parts, r_parts, names = [], [], []
    for name, d1, d2 in pairs:
        p, r = _pair_tests(sampler, d1, d2, eps, rng=rng, samples=samples, bins=bins, n_pilot=n_pilot,
                           joint_bins=joint_bins)
        p_parts.append(p)
        r_parts.append(r)
        names += [name] * p.size
    p_all = np.concatenate(p_parts)
    r_all = np.concatenate(r_parts)
    tests = p_all.size
    threshold = alpha / tests
    worst = int(np.argmin(p_all))
    return AuditResult(
        passed=bool(p_all[worst] >= threshold),
        epsilon=eps,
        min_p_value=float(p_all[worst]),
        threshold=threshold,
        alpha=alpha,
        tests=tests,
        worst_ratio=float(r_all[worst]),
        samples=samples,
        pairs=len(pairs),
        worst_pair=names[worst],
    )


def under_noised_laplace(noise_factor: float = 0.5) -> Callable[..., Release]:
    """A deliberately broken control: vanilla Laplace with its noise scale multiplied by ``noise_factor``.

    With ``noise_factor = 1/2`` it is only 2ε-DP; :func:`audit` must reject it.
    Returns a function with the signature of :func:`dpopt.mechanisms.laplace.laplace_mean`.
    """
    from .laplace import laplace_mean

    def broken(samples: Any, counts: Any, bound: float, epsilon: float, **kw: Any) -> Release:
        return laplace_mean(samples, counts, bound, epsilon / noise_factor, **kw)

    return broken
