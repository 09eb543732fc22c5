"""Quantile mechanism on pseudo-user array means (seed 003 §III-E): FixedQuantile, ε-DependentQuantile.

Pipeline (BestFit by default, ``m`` from eq. (9)):

1. Array means ``Ā_1..Ā_K`` as for Levy.
2. With budget ``ε/2`` (``ε/4`` per end): two private quantiles by Smith's exponential mechanism
   (:func:`~dpopt.mechanisms.private_quantile.smith_quantile`) on ``[0, U]``, target gaps
   ``α(K+1)`` and ``(1−α)(K+1)`` as in the authors' code, rank-utility sensitivity φ;
   ``a = min``, ``b = max`` of the two draws.
   * FixedQuantile (III-E1): ``α = 0.1``.
   * ε-DependentQuantile (III-E2, "OptimizedQuantile"): ``α = r/K`` with ``r = ⌈2/ε⌉`` (the
     minimiser of clipping bias + noise, cf. Amin et al.), capped at 1/2. The authors' code used
     ``r = ⌊2/ε⌋`` and took α from the raw data (not private); here α depends on ε and K only,
     which is public. ``rank_rule`` selects ceil/floor.
3. With budget ``ε/2``: ``(1/K) Σ_k Π_[a,b](Ā_k) + Lap(φ(b − a)/(K·ε/2))``.

Sensitivity of step 3 given ``[a, b]``: ``φ(b − a)/K`` (φ = 1 BestFit, 2 WrapAround).
Total budget ``ε/4 + ε/4 + ε/2 = ε``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .._validation import DpoptInputError, check_choice
from ._common import Release
from .array_averaging import Grouping
from .levy import array_means_input, interval_release
from .private_quantile import smith_quantile

__all__ = ["quantile", "quantile_interval", "eps_dependent_alpha"]


def eps_dependent_alpha(num_arrays: int, epsilon: float, *, rank_rule: str = "ceil") -> float:
    """``α = r/K`` with ``r = ⌈2/ε⌉`` (or ``⌊2/ε⌋``, at least 1), capped at 1/2."""
    check_choice(rank_rule, "rank_rule", ("ceil", "floor"))
    raw = 2.0 / epsilon
    r = math.ceil(raw - 1e-9) if rank_rule == "ceil" else max(1, math.floor(raw + 1e-9))
    return min(r / num_arrays, 0.5)


def quantile_interval(
    means: Any, epsilon: float, *, alpha: float, bound: float, influence: int = 1, rng: np.random.Generator,
    runs: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Private ``(α, 1−α)`` inter-quantile interval with total budget ``epsilon`` (half per end)."""
    x = np.atleast_2d(np.asarray(means, dtype=float))
    K = x.shape[1]
    kw = dict(lower=0.0, upper=float(bound), sensitivity=float(influence), rng=rng, runs=runs)
    q1 = smith_quantile(x, alpha * (K + 1), epsilon / 2.0, **kw)
    q2 = smith_quantile(x, (1.0 - alpha) * (K + 1), epsilon / 2.0, **kw)
    return np.minimum(q1, q2), np.maximum(q1, q2)


def quantile(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None = None,
    variant: Literal["fixed", "eps_dependent"] = "fixed",
    alpha: float = 0.1,
    rank_rule: str = "ceil", length: int | None = None, grouping: Grouping = "best_fit", interval_share: float = 0.5,
    substitute_means: bool = True, clip_output: bool = False, order: Any = "nonincreasing",
) -> Release:
    """Quantile mechanism (seed 003 §III-E), user-level ε-DP.

    Parameters
    ----------
    variant : {"fixed", "eps_dependent"}
        FixedQuantile (``alpha``) or ε-DependentQuantile (``α = ⌈2/ε⌉/K``).
    alpha : float in (0, 1/2]
        Lower quantile level of FixedQuantile (authors' code: 0.1).
    rank_rule : {"ceil", "floor"}
        Rank rule of ε-DependentQuantile.
    Other parameters as for :func:`dpopt.mechanisms.levy.levy`.
    """
    check_choice(variant, "variant", ("fixed", "eps_dependent"))
    if not 0.0 < alpha <= 0.5:
        raise DpoptInputError(f"`alpha` must lie in (0, 0.5]; got {alpha!r}")
    inp = array_means_input(samples, counts, bound, epsilon, rng=rng, runs=runs, length=length, grouping=grouping,
                            interval_share=interval_share, substitute_means=substitute_means, order=order)
    p = inp.packing
    level = alpha if variant == "fixed" else eps_dependent_alpha(p.num_arrays, inp.epsilon, rank_rule=rank_rule)
    eps_q = inp.epsilon_interval / 2.0
    a, b = quantile_interval(inp.means, inp.epsilon_interval, alpha=level, bound=inp.bound, influence=p.influence,
                             rng=inp.rng, runs=inp.runs)
    return interval_release(inp, a, b, clip_output=clip_output,
                            mechanism="Quantile" if variant == "fixed" else "EpsDependentQuantile",
                            budget={"lower_quantile": eps_q, "upper_quantile": eps_q}, details={"alpha": level})
