"""Never silently nothing: does a ``user`` release publish anything better than
the whole range, and what would? Post-processing of DP outputs only: the noisy (or GLS) counts and
the stated error bounds of the estimates, fed to :func:`dpopt.privacy.user.predict.release_outlook`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np

from .._validation import SCALE_LIMIT
from ..accounting import pure_epsilon
from ..measurements import Estimates, Measurements
from ..privacy.user.predict import Outlook, prior_only, release_outlook

__all__ = ["flat_outlook", "levels_outlook"]


def _epsilon(m: Measurements) -> float:
    """The release's total ε (Gaussian without δ: the ε with ε²/2 = ρ, the pure-ε equivalent)."""
    sp = m.spend
    eps = float(sp.epsilon) if sp.epsilon is not None else pure_epsilon(float(sp.total))
    return min(eps, SCALE_LIMIT)  # a float sum of pieces may end a few ulps above the validated limit


def flat_outlook(m: Measurements, est: Estimates) -> Outlook:
    """Outlook of the flat per-grid release: its released grids' noisy counts and bounds."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    n = t["noisy_count"].to_numpy(float)
    out = release_outlook({"finest": (n[on], t["mean_error_bound"].to_numpy(float)[on])},
                          bound=m.bound, epsilon=_epsilon(m))
    return _with_epsilon(out, m, est, n)


def levels_outlook(m: Measurements, est: Estimates) -> Outlook:
    """Outlook of the multi-resolution release: first its published nodes, then every measured
    level's published nodes (finest first), so the message names the finest level whose median
    published node would be useful — never a level whose nodes are not in release.csv (an outside
    check: the engine's cell × hour-of-day nodes were named, measured and never published)."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    n, b = t["count_estimate"].to_numpy(float), t["mean_error_bound"].to_numpy(float)
    levels = {"published": (n[on], b[on])}
    lev = t["level"].to_numpy()
    for li, (res, slot_ns, *cycle) in enumerate(m.info.levels or ()):
        rows = (lev == li) & on
        if not rows.any():
            continue
        name = f"H3 resolution {res} x {'the whole period' if slot_ns == 0 else _slot(slot_ns, *cycle)}"
        levels[name] = (n[rows], b[rows])
    out = release_outlook(levels, bound=m.bound, epsilon=_epsilon(m))
    if not on.any() and m.info.selection:
        return _selection_hint(out, m)
    return _with_epsilon(out, m, est, n)


#: the public reference size of a node the selection hint aims at (as release_outlook's ``users``)
HINT_USERS = 20.0


def _selection_hint(out: Outlook, m: Measurements) -> Outlook:
    """Private selection published no node: name the level with the lowest threshold T (noisy users
    a node needs) and the ε at which it would fall to :data:`HINT_USERS` users. T − 1 = (k/ε_ℓ)·ln(…)
    scales as 1/ε at fixed shares and δ, so ε' = ε·(T − 1)/(HINT_USERS − 1): a function of the
    public plan (thresholds, ε) only, never of the data."""
    thr = [(float(s["threshold"]), li) for li, s in enumerate(m.info.selection) if math.isfinite(s["threshold"])]
    if not thr:
        return out
    t, li = min(thr)
    res, slot_ns, *cycle = m.info.levels[li]
    eps = m.info.epsilon_budget  # the ε given (the spend omits unmeasured levels' value pieces)
    need = None if eps is None else eps * max(t - 1.0, 0.0) / (HINT_USERS - 1.0)
    text = (f" Private selection released no node: at level H3 resolution {res} x {_slot(slot_ns, *cycle)} a node needs "
            f"about {t:.3g} noisy users at this budget" + (
                f"; epsilon ≈ {math.ceil(need * 10) / 10:g} (same shares and delta) would lower that to "
                f"{HINT_USERS:g} users." if need is not None and need > eps else "."))
    return replace(out, epsilon_needed=need if need is not None and need > eps else out.epsilon_needed,
                   message=out.message + text)


def _with_epsilon(out: Outlook, m: Measurements, est: Estimates, counts: np.ndarray) -> Outlook:
    """Add the ε the best node's noise predicts when the outlook found none (every bound = U); not
    where every published bound is the midpoint ± U/2 of a node nothing was measured for (the
    outlook says so: a noise read off counts of nothing would mislead)."""
    if not out.empty or out.epsilon_needed is not None:
        return out
    t = est.table
    if prior_only(t["mean_error_bound"].to_numpy(float)[t["released"].to_numpy(dtype=bool)], m.bound):
        return out
    need, reference = _epsilon_needed(m, est, counts, U4=m.bound / 4.0)
    if need is None:
        return out
    if need <= _epsilon(m):  # the noise is not what makes the bounds wide: saying "raise epsilon" would mislead
        return replace(out, epsilon_needed=None, message=out.message + (
            f" The best measured node's noise alone is already below {m.bound / 4.0:g} at this epsilon: the bounds "
            "are wide because each grid's own deviation from what was measured is not seen (the model's variance "
            "components, integrated over what the data allow), and a larger budget narrows them only where it lets "
            "finer marginals be measured."))
    node = ("the best measured node's noise alone" if reference is None else
            f"the noise alone, for a node of {reference:g} records (a public reference size: {HINT_USERS:g} users x "
            "c records; no noisy count is readable at this budget),")
    return replace(out, epsilon_needed=need, message=out.message + (
        f" At this grid and these shares {node} would meet {m.bound / 4.0:g} at epsilon ≈ "
        f"{math.ceil(need * 10) / 10:g} (the bounding allowance not counted)."))


def _epsilon_needed(m: Measurements, est: Estimates, counts: np.ndarray, U4: float
                    ) -> tuple[float | None, float | None]:
    """(ε, reference size): the total ε at which the measured node with the smallest noise
    half-width z·sd(Ỹ)/n̂ would reach ``U4``: the half-width scales as 1/ε (Laplace scale Δ/ε;
    Gaussian σ ∝ 1/√ρ ∝ 1/ε). Uses the public noise laws and the GLS counts (DP) only; where no count
    reaches 1 (noise swamps every count), a public reference node of :data:`HINT_USERS` users × c
    records stands in for n̂ (reference size returned; None when the counts were used)."""
    sd = np.broadcast_to(np.sqrt(m.statistics["sum"].law.variance()), counts.shape)
    usable = np.isfinite(sd) & (sd > 0)
    ok = usable & (counts >= 1.0)
    z = NormalDist().inv_cdf(0.5 + est.confidence / 2.0)
    if ok.any():
        return _epsilon(m) * float(np.min(z * sd[ok] / counts[ok])) / U4, None
    c = m.info.c
    if not usable.any() or c is None:
        return None, None
    reference = HINT_USERS * float(c)
    return _epsilon(m) * float(np.min(z * sd[usable])) / reference / U4, reference


def _slot(slot_ns: int, cycle_ns: int = 0) -> str:
    from ..records.grid import level_time_text

    return level_time_text(int(slot_ns), int(cycle_ns)) + (" windows" if cycle_ns else " slots")

