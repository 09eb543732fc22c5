"""Does the place or the time set the value? One DP vote per user (models/engine.md §5).

The strategy needs, before it has measured anything well, a prior for the variance components of
the place and the time main effects. Node statistics cannot tell them apart at a pilot's budget:
one user can move a node's sum by T·B/2, so every factor's spread reads as noise (models/engine.md
§6–§7). This module asks each user instead, once, with a bounded answer computed from its own
records alone.

For user u with records in the listed grids (``n_g`` records of sum ``S_g`` in grid g of cell c(g)
and slot s(g)), the place's sum of squares *at a fixed time* and the time's *at a fixed place* are

    SS_place = Σ_g S_g²/n_g − Σ_s S_s²/n_s,   SS_time = Σ_g S_g²/n_g − Σ_c S_c²/n_c

(S_s, n_s: its records' sum and count in slot s over every cell; S_c, n_c: in cell c over every
slot): the spread of its grid means between the cells it visited within one slot, and between the
slots it visited within one cell. Its vote is p_u = SS_place / (SS_place + SS_time) ∈ [0, 1]. A user
whose grids share neither a slot nor a cell (one grid, or one record per place and time) has no
evidence and does not vote; nor does one whose grid means do not vary. A bus that meets the same
cells at several hours and several cells within an hour votes by what moves its speed; a sensor
that never moves votes 0 (its time varies within its one cell, its place never within a slot).

**Sensitivity.** Each user contributes at most one vote, a function of its own records; p_u − ½ is
quantised to the lattice 2^-:data:`VOTE_BITS` (round half away from 0), so the centred sum
Q = Σ_u round((p_u − ½)·2^b) moves by at most 2^(b−1) when a user is added or removed (ℓ1 = ℓ2),
and the number of voters N by at most 1. Two queries (pure ε: Laplace; ρ: Gaussian), half the vote's
budget each, by the release's exact sampler. The estimate p̂ = ½ + Q̃·2^-b/Ñ (clipped to [0, 1]) and
its sd (delta method) are post-processing.

What it measures is the users' own mix, not the grids' variance components (a user's grid means
carry its own records' noise, and users who never move say nothing of how places differ), so the
strategy uses it only for the split of the main effects' prior between place and time
(:func:`main_effect_split`), shrunk toward the even split by its noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...records.aggregate import Aggregate
from .levels import used_budget

__all__ = ["VOTE_BITS", "PlaceShare", "place_votes", "vote_sums", "measure_place_share", "main_effect_split"]

#: the votes' lattice: p_u − ½ in multiples of 2^-16 (a resolution far below any vote's meaning)
VOTE_BITS = 16


@dataclass(frozen=True)
class PlaceShare:
    """The DP estimate of the users' mean vote: ``value`` p̂ in [0, 1], ``sd`` its noise sd (delta
    method), ``voters`` the noisy number of users who voted."""

    value: float
    sd: float
    voters: float


def place_votes(agg: Aggregate, pairs: np.ndarray | None = None) -> np.ndarray:
    """The votes p_u (module doc) of the users with evidence, from their (user, grid) pairs in
    ``pairs`` (bool per pair; None: all), in user order. Private: never published."""
    keep = np.ones(agg.n_pairs, dtype=bool) if pairs is None else np.asarray(pairs, dtype=bool)
    frame = pd.DataFrame({"u": np.asarray(agg.pair_user)[keep], "c": np.asarray(agg.cells)[agg.pair_grid[keep]],
                          "s": np.asarray(agg.slots)[agg.pair_grid[keep]],
                          "n": np.asarray(agg.count, dtype=float)[keep], "S": np.asarray(agg.sum, dtype=float)[keep]})
    if frame.empty:
        return np.zeros(0)
    grids = frame.groupby(["u", "c", "s"], sort=True)[["n", "S"]].sum()
    within = (grids["S"] ** 2 / grids["n"]).groupby(level=0).sum()

    def margin(key: str) -> pd.Series:
        g = frame.groupby(["u", key], sort=True)[["n", "S"]].sum()
        return (g["S"] ** 2 / g["n"]).groupby(level=0).sum()

    place = (within - margin("s")).clip(lower=0.0).to_numpy()
    time = (within - margin("c")).clip(lower=0.0).to_numpy()
    den = place + time
    evidence = den > 1e-12 * np.maximum(within.to_numpy(), 1e-300)  # rounding: a sum of squares of 0
    return place[evidence] / den[evidence]


def vote_sums(votes: np.ndarray) -> tuple[int, int, int]:
    """(Q, N, the ℓ1 = ℓ2 sensitivity of Q): the votes' centred lattice sum and their number (module
    doc). Exact integers."""
    q = np.sign(votes - 0.5) * np.floor(np.abs(votes - 0.5) * 2 ** VOTE_BITS + 0.5)
    return int(np.sum(q.astype(np.int64))), int(np.size(votes)), 2 ** (VOTE_BITS - 1)


def measure_place_share(agg: Aggregate, pairs: np.ndarray | None, mech: Any, budget: float
                        ) -> tuple[PlaceShare | None, dict[str, float]]:
    """The noisy vote (module doc) with ``budget`` (in the mechanism's unit, half to each query), and
    its budget pieces; (None, {}) with no budget."""
    if budget <= 0:
        return None, {}
    q, n, sens = vote_sums(place_votes(agg, pairs))
    half = used_budget(budget / 2.0, mech)
    q_noisy = float(np.asarray(mech.integer(np.array([q], dtype=np.int64), l1=sens, l2=float(sens), budget=half),
                               dtype=float)[0])
    n_noisy = float(np.asarray(mech.integer(np.array([n], dtype=np.int64), l1=1, l2=1.0, budget=half),
                               dtype=float)[0])
    sd_of = lambda l1: float(mech.scale(l1=l1, l2=float(l1), budget=half)) * (  # noqa: E731
        math.sqrt(2.0) if mech.unit == "epsilon" else 1.0)
    sd_q, sd_n = sd_of(sens) / 2 ** VOTE_BITS, sd_of(1)
    voters = max(n_noisy, 1.0)
    centred = q_noisy / 2 ** VOTE_BITS / voters
    sd = math.sqrt(sd_q ** 2 + (centred * sd_n) ** 2) / voters
    share = PlaceShare(value=float(min(max(0.5 + centred, 0.0), 1.0)), sd=sd, voters=n_noisy)
    return share, {"pilot place-or-time vote (centred sum)": half, "pilot place-or-time vote (voters)": half}


def main_effect_split(sigma2: dict[str, float], kinds: dict[str, str], share: PlaceShare | None
                      ) -> dict[str, float]:
    """The main effects' components of ``sigma2`` re-split between place and time by the vote:
    their total kept, the place mains (``kinds[f] == "place"``) getting the share w·p̂ + (1 − w)·p₀ of
    it and the time mains the rest, evenly within each dimension, with p₀ the even split by number
    of factors (what the strategy assumes without a vote) and w = (1/12)/((1/12) + sd²) the weight
    of a noisy estimate against the uniform law on [0, 1] (variance 1/12). Other factors unchanged;
    ``sigma2`` unchanged where either dimension has no main effect or there is no vote."""
    place = [f for f, k in kinds.items() if k == "place" and f in sigma2]
    time = [f for f, k in kinds.items() if k == "time" and f in sigma2]
    if share is None or not place or not time or not np.isfinite(share.sd):
        return dict(sigma2)
    total = float(sum(sigma2[f] for f in place + time))
    p0 = len(place) / (len(place) + len(time))
    w = (1.0 / 12.0) / (1.0 / 12.0 + share.sd ** 2)
    p = w * share.value + (1.0 - w) * p0
    out = dict(sigma2)
    for f in place:
        out[f] = total * p / len(place)
    for f in time:
        out[f] = total * (1.0 - p) / len(time)
    return out
