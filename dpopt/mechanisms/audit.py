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

Vector releases (e.g. BASELINE's (mean, variance)) are tested coordinate by coordinate (each
marginal is ε-DP by post-processing), the Bonferroni correction covering all coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .._validation import DpoptInputError, check_epsilon, check_positive_int
from ._common import Release, check_rng

__all__ = ["AuditResult", "audit", "under_noised_laplace"]

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
    """

    passed: bool
    epsilon: float
    min_p_value: float
    threshold: float
    alpha: float
    tests: int
    worst_ratio: float
    samples: int


def _as_columns(values: Any) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v.reshape(v.shape[0], -1)


def audit(
    sampler: Sampler,
    dataset: Any,
    neighbour: Any,
    epsilon: float,
    *,
    rng: np.random.Generator,
    samples: int = 200_000,
    bins: int = 30,
    alpha: float = 0.01,
    pilot: int | None = None,
) -> AuditResult:
    """Test whether ``sampler`` looks ε-DP on the pair (``dataset``, ``neighbour``).

    Parameters
    ----------
    sampler : callable
        ``sampler(data, runs, rng) -> releases`` of shape ``(runs,)`` or ``(runs, d)``.
    dataset, neighbour : object
        Two user-level neighbouring datasets (passed to ``sampler`` unchanged).
    epsilon : float
        Claimed privacy level.
    rng : numpy.random.Generator
    samples : int
        Expected test releases per dataset (Poisson-distributed count).
    bins : int
        Number of histogram bins per coordinate (quantiles of the pilot sample).
    alpha : float
        Family-wise false-positive rate.
    pilot : int, optional
        Pilot releases per dataset for the bin edges (default ``samples // 10``).
    """
    eps = check_epsilon(epsilon)
    rng = check_rng(rng)
    samples = check_positive_int(samples, "samples")
    bins = check_positive_int(bins, "bins", minimum=2)
    if not 0.0 < alpha < 1.0:
        raise DpoptInputError(f"`alpha` must lie in (0, 1); got {alpha!r}")
    n_pilot = check_positive_int(pilot if pilot is not None else max(samples // 10, bins * 20), "pilot")
    pooled = np.vstack([_as_columns(sampler(dataset, n_pilot, rng)), _as_columns(sampler(neighbour, n_pilot, rng))])
    n1, n2 = (int(rng.poisson(samples)) for _ in range(2))
    x1 = _as_columns(sampler(dataset, max(n1, 1), rng))[:n1]
    x2 = _as_columns(sampler(neighbour, max(n2, 1), rng))[:n2]
    q = np.exp(eps) / (1.0 + np.exp(eps))
    pvals: list[np.ndarray] = []
    ratios: list[np.ndarray] = []
    for col in range(pooled.shape[1]):
        inner = np.unique(np.quantile(pooled[:, col], np.linspace(0, 1, bins + 1)[1:-1]))
        edges = np.concatenate(([-np.inf], inner, [np.inf]))
        c1 = np.histogram(x1[:, col], edges)[0]
        c2 = np.histogram(x2[:, col], edges)[0]
        s = c1 + c2
        for a, b in ((c1, c2), (c2, c1)):
            p = np.where(s > 0, stats.binom.sf(a - 1, s, q), 1.0)
            pvals.append(p)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios.append(np.where(b > 0, a / np.maximum(b, 1), np.where(a > 0, np.inf, 1.0)))
    p_all = np.concatenate(pvals)
    r_all = np.concatenate(ratios)
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
