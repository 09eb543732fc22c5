"""Never silently nothing (issue 21 item 4): does a ``user`` release publish anything better than
the whole range, and what would? Post-processing of DP outputs only: the noisy (or GLS) counts and
the stated error bounds of the estimates, fed to :func:`dpopt.userdp.predict.release_outlook`.
"""

from __future__ import annotations

import math

from ..measurements import Estimates, Measurements
from ..userdp.predict import Outlook, release_outlook

__all__ = ["flat_outlook", "levels_outlook"]


def _epsilon(m: Measurements) -> float:
    """The release's total ε (Gaussian without δ: the ε with ε²/2 = ρ, the pure-ε equivalent)."""
    sp = m.spend
    return float(sp.epsilon) if sp.epsilon is not None else math.sqrt(2.0 * float(sp.total))


def flat_outlook(m: Measurements, est: Estimates) -> Outlook:
    """Outlook of the flat per-grid release: its released grids' noisy counts and bounds."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    return release_outlook({"finest": (t["noisy_count"].to_numpy(float)[on], t["mean_error_bound"].to_numpy(float)[on])},
                           bound=m.bound, epsilon=_epsilon(m))


def levels_outlook(m: Measurements, est: Estimates) -> Outlook:
    """Outlook of the multi-resolution release: first its published nodes, then every measured
    level (finest first), so the message names the finest level whose median node would be useful."""
    t = est.table
    on = t["released"].to_numpy(dtype=bool)
    n, b = t["count_estimate"].to_numpy(float), t["mean_error_bound"].to_numpy(float)
    levels = {"published": (n[on], b[on])}
    lev = t["level"].to_numpy()
    for li, (res, slot_ns) in enumerate(m.info.get("levels", [])):
        rows = lev == li
        name = f"H3 resolution {res} x {'the whole period' if slot_ns == 0 else _slot(slot_ns)}"
        levels[name] = (n[rows], b[rows])
    return release_outlook(levels, bound=m.bound, epsilon=_epsilon(m))


def _slot(slot_ns: int) -> str:
    from ..records.grid import slot_text

    return slot_text(int(slot_ns)) + " slots"

