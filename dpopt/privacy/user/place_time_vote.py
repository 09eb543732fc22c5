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
slots it visited within one cell. Its vote is p_u = MS_place / (MS_place + MS_time) ∈ [0, 1], each
sum of squares over its degrees of freedom (MS_place = SS_place/(its grids − its slots), MS_time =
SS_time/(its grids − its cells)), where it has evidence on both sides: some slot in which it visited
two cells *and* some cell it visited in two slots. A bus that meets the same cells at several hours
and several cells within an hour votes by what moves its speed. *Mean squares, not sums of squares:*
a user's grid means carry its own records' noise in every degree of freedom alike, and a user who
stays in one district meets far more slots of one cell than cells of one slot, so sums of squares
read that noise as the time's whatever moves the value. Users who roam within one place of many
(the kind ``biglist_mobile`` of tests/benchmarks/bench_engine_kinds.py: the place sets the value,
the users see none of it) voted 0.18 by sums of squares, 0.50 by mean squares (the noise-free mean
of 400 votes), and users whose own level sets the value (``user``: neither place nor time) 0.15 and
0.49; the benchmark sets' means moved by 0.02 or less but for aircraft A (0.19 → 0.10; models/engine.md
§5).

*Its own noise.* Where the user has a grid of two records, its records' noise is taken out of both
mean squares: max(MS − s²_w,u, 0), s²_w,u the pooled variance of its records about their grid's mean
(Σ_g (Q_g − S_g²/n_g) / Σ_g (n_g − 1), Q_g the sum of its squared values in grid g). For independent
records about their grid's mean that is exactly what the noise puts in each degree of freedom of a
record-weighted mean square (E[SS] = σ²_rec·df + the spread), as :func:`one_sided_shares` already
takes it out. Without it a user whose grid means are mostly its records' noise votes near ½ whatever
moves the value (a pure-noise user: E[F/(F + 1)]), and a crowd of such users pulls the mean vote
toward ½. A user with no grid of two records keeps it, alike on both sides. Noise-free mean votes
(every two-sided user, the public list the occupied grids), before → after, beside the place's share
of the additive (place + time) fit of the exact grid means: the embedded day 0.72 → 0.95 (0.97),
full Austin 0.63 → 0.86 (0.94), the time-set day 0.11 → 0.02 (0.00), the day-set 0.27 → 0.09 (0.00);
payments and amounts, whose users have one record per grid, unchanged (models/engine.md §5).

**One side only.** A sensor that never moves sees its time move its value and never a second cell
in a slot: its SS_place is 0 for want of a second cell, not of spread, and as p_u it would vote 0
(time) whatever the data — on fixed sensors whose place sets the value (the benchmark's
``sensors_placeset``, ε = 10) every sensor did, the plan starved the cells, and the release erred as
one constant does (median 9.54 over thirty seeds, the constant 9.60; models/engine.md §5). Such a
user reads its one side against the grids' variance instead (:func:`one_sided_shares`): with V the
DP estimate V̂ of the variance of the listed grids' means (the release's between-grid statistic,
published before the vote; its point estimate, not its upper end, whose noise a sensor's vote handed
to the place: 0.43 against 0.25 for households whose hour alone sets the value, models/engine.md §5)
and σ̂²_time,u its own records' spread between the slots of its cell (an ANOVA estimate, its records'
noise taken out), it votes 1 − min(σ̂²_time,u/V, 1): the share of V its
time does not explain goes to the place. A user seen in one slot at several cells votes
min(σ̂²_place,u/V, 1). One with no grid of two records cannot tell its records' noise from its
side's spread (a payer of one purchase per shop and hour) and does not vote, nor does one whose grids
share neither a slot nor a cell, nor a two-sided one whose grid means do not vary. Without a
reference (the research API's default) only the two-sided users vote.

**Sensitivity.** Each user contributes at most one vote, a function of its own records and of V, a
DP output published before the vote (adaptive composition); p_u − ½ is
quantised to the lattice 2^-:data:`VOTE_BITS` (round half away from 0), so the centred sum
Q = Σ_u round((p_u − ½)·2^b) moves by at most 2^(b−1) when a user is added or removed (ℓ1 = ℓ2),
and the number of voters N by at most 1. Two queries (pure ε: Laplace; ρ: Gaussian), half the vote's
budget each, by the release's exact sampler. The estimate p̂ = ½ + Q̃·2^-b/Ñ (clipped to [0, 1]) and
its sd (delta method) are post-processing.

What it measures is the users' own mix, not the grids' variance components (a user's grid means
carry its own records' noise, and users who never move say of the place only what their time leaves
of V), so the
strategy uses it only for the split of the main effects' prior between place and time
(:func:`main_effect_split`), shrunk toward the even split by its noise.

**The time's own vote: the hour of the day or the day?** Where the lattice holds both a recurring
time level (hour-of-day: a window of a cycle C) and a contiguous one of one cycle's length (1 d),
the time's share is split between them by a second vote of the same form (:func:`cycle_votes`),
holding the place fixed: with the user's records in the grids of one cell,

    SS_cycle = Σ_g S_g²/n_g − Σ_(c, day) S²/n,   SS_calendar = Σ_g S_g²/n_g − Σ_(c, window) S²/n,

the spread of its grid means between the windows of one day in one cell (the hour of the day moving
the value) against between the days at one window in one cell (the day moving it); its vote is
q_u = MS_cycle/(MS_cycle + MS_calendar), each sum of squares over its degrees of freedom (the
user's grids less its (cell, day) or (cell, window) groups). A user's grid means carry its records'
noise in every degree of freedom alike, and a bus meets far more hours of one day in a cell than
days at one hour, so the sums of squares alone read that noise as the hour's: on the full Austin data
the users' mean q was 0.76 by sums of squares and 0.56 by mean squares, on the synthetic sensors
(whose rush hours set the value) 0.81 and 0.79 — the same correction as the place-or-time vote's.
The time main effects then share the time's part in the
proportion q (recurring levels) to 1 − q (contiguous levels: the slot, the day), shrunk toward the
even split by the vote's noise. Without it the plan has no way to tell an hour-of-day profile from
day-to-day change before it has measured either well, and where the hour of the day sets the value
its first round measured the day (more records per node), saw nothing, and answered every grid
with one constant (hourly values 50 + 30·sin(hour) of 300 users over 14 days at ε = 10: 5 of 28
seeds, coverage 0.67; models/engine.md §5). Same sensitivity, same two queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..._validation import DpoptInputError
from ...records.aggregate import Aggregate
from .levels import used_budget

__all__ = ["VOTE_BITS", "PlaceShare", "VoteDraw", "place_votes", "one_sided_shares", "cycle_votes", "vote_sums",
           "measure_place_share", "measure_votes", "draw_votes", "raise_votes", "vote_share", "vote_pieces",
           "main_effect_split"]

#: the votes' lattice: p_u − ½ in multiples of 2^-16 (a resolution far below any vote's meaning)
VOTE_BITS = 16


@dataclass(frozen=True)
class PlaceShare:
    """The DP estimate of the users' mean vote: ``value`` p̂ in [0, 1], ``sd`` its noise sd (delta
    method), ``voters`` the noisy number of users who voted."""

    value: float
    sd: float
    voters: float


def shares_apart(user: np.ndarray, grid: np.ndarray, across_x: np.ndarray, across_y: np.ndarray, n: np.ndarray,
                 S: np.ndarray, *, per_df: bool = False, Q: np.ndarray | None = None) -> np.ndarray:
    """Per user with evidence (user order), SS_x/(SS_x + SS_y) from its (user, grid) pairs' record
    counts ``n`` and sums ``S``: SS_x = Σ_g S_g²/n_g − Σ_k S_k²/n_k over the groups k of ``across_x``
    (grids grouped so that only x varies inside a group: the spread x explains at everything else
    fixed), SS_y likewise over ``across_y``. ``per_df``: mean squares instead, each SS over its
    degrees of freedom (the user's grids less its groups), so that its records' noise, which enters
    every degree of freedom alike, weighs the two sides alike however its grids fall into groups
    (module doc). ``Q`` (with ``per_df``): the pairs' sums of squared values; a user with a grid of
    two records then takes its records' noise out of both mean squares, max(MS − s²_w, 0), s²_w the
    pooled variance of its records inside its grids (module doc, "Its own noise"). Users with
    evidence on one side only (no group of ``across_x``, or none of ``across_y``, holds two of their
    grids: SS_x or SS_y is 0 for want of degrees of freedom, not of spread) or with SS_x + SS_y = 0
    (their grid means do not vary beyond their noise) are left out. Private."""
    frame = pd.DataFrame({"u": user, "g": grid, "x": across_x, "y": across_y,
                          "n": np.asarray(n, dtype=float), "S": np.asarray(S, dtype=float)})
    if frame.empty:
        return np.zeros(0)

    def squares(keys: list[str]) -> tuple[pd.Series, pd.Series]:
        g = frame.groupby(["u", *keys], sort=True)[["n", "S"]].sum()
        return (g["S"] ** 2 / g["n"]).groupby(level=0).sum(), g.groupby(level=0).size()

    (within, grids), (sq_x, groups_x), (sq_y, groups_y) = squares(["g"]), squares(["x"]), squares(["y"])
    ss_x = (within - sq_x).clip(lower=0.0).to_numpy()
    ss_y = (within - sq_y).clip(lower=0.0).to_numpy()
    df_x, df_y = (grids - groups_x).to_numpy(dtype=float), (grids - groups_y).to_numpy(dtype=float)
    if per_df:
        noise = 0.0 if Q is None else _records_noise(frame.assign(Q=np.asarray(Q, dtype=float)))
        ss_x = np.where(df_x > 0, np.maximum(ss_x / np.maximum(df_x, 1.0) - noise, 0.0), 0.0)
        ss_y = np.where(df_y > 0, np.maximum(ss_y / np.maximum(df_y, 1.0) - noise, 0.0), 0.0)
    den = ss_x + ss_y
    scale = within.to_numpy() / (np.maximum(grids.to_numpy(dtype=float), 1.0) if per_df else 1.0)
    # evidence on both sides: a user none of whose groups holds two of its grids on one side (a sensor
    # that never moves has no two cells in one slot) cannot tell that side's spread from none (module doc)
    varies = den > 1e-12 * np.maximum(scale, 1e-300)  # rounding: a sum of squares of 0
    evidence = varies & (df_x > 0) & (df_y > 0)
    return ss_x[evidence] / den[evidence]


def _records_noise(frame: pd.DataFrame) -> np.ndarray:
    """Per user (user order), s²_w = Σ_g (Q_g − S_g²/n_g) / Σ_g (n_g − 1), the pooled variance of
    its records about their grid's mean — the variance its records' own noise puts in each degree of
    freedom of a record-weighted mean square of its grid means — and 0 for a user with no grid of
    two records (nothing to tell its noise from its spread by)."""
    per = frame.assign(w=frame["Q"] - frame["S"] ** 2 / frame["n"], r=frame["n"] - 1.0).groupby(
        "u", sort=True)[["w", "r"]].sum()
    reps = per["r"].to_numpy()
    return np.where(reps > 0, per["w"].clip(lower=0.0).to_numpy() / np.maximum(reps, 1.0), 0.0)


def _pairs(agg: Aggregate, pairs: np.ndarray | None) -> np.ndarray:
    return np.ones(agg.n_pairs, dtype=bool) if pairs is None else np.asarray(pairs, dtype=bool)


def place_votes(agg: Aggregate, pairs: np.ndarray | None = None, *, reference: float | None = None) -> np.ndarray:
    """The votes p_u (module doc) of the users with evidence, from their (user, grid) pairs in
    ``pairs`` (bool per pair; None: all): first the users with evidence on both sides, in user order
    (the place apart within each slot, the time apart within each cell, in mean squares less the
    user's own records' noise: :func:`shares_apart` with ``per_df`` and ``Q``), then,
    where a ``reference`` variance is given, the users with evidence on one side only
    (:func:`one_sided_shares`, in user order). Private: never published."""
    keep = _pairs(agg, pairs)
    grid = np.asarray(agg.pair_grid)[keep]
    parts = (np.asarray(agg.pair_user)[keep], grid, np.asarray(agg.slots)[grid], np.asarray(agg.cells)[grid],
             np.asarray(agg.count)[keep], np.asarray(agg.sum)[keep])
    sumsq = np.asarray(agg.sumsq)[keep]
    both = shares_apart(*parts, per_df=True, Q=sumsq)
    if reference is None or not (np.isfinite(reference) and reference > 0):
        return both
    return np.concatenate([both, one_sided_shares(*parts, sumsq, reference=float(reference))])


def one_sided_shares(user: np.ndarray, grid: np.ndarray, slot: np.ndarray, cell: np.ndarray, n: np.ndarray,
                     S: np.ndarray, Q: np.ndarray, *, reference: float) -> np.ndarray:
    """Per user with evidence on one side only and records to spare (user order), its vote read
    against ``reference`` V, the variance of the grids' means the release measured (a DP output):
    a user with no slot holding two of its grids but some cell holding two (a sensor, a payer of one
    shop) votes 1 − min(σ̂²_time,u / V, 1), one with the reverse (seen in one slot at several cells)
    min(σ̂²_place,u / V, 1). Its side's
    spread σ̂² is the ANOVA estimate from its own records: the mean square of its grid means about
    their group's (unweighted; the groups its cells, or its slots) over the degrees of freedom (its
    grids less its groups), less what its records' own noise puts there, s²_w·mean(1/n_g), s²_w the
    pooled variance of its records inside its grids (E[mean square] = σ² + σ²_rec·mean(1/n_g) for
    independent records). A user with no grid of two records cannot tell its records' noise from its
    side's spread and does not vote. Each vote lies in [0, 1] and reads the user's own records and a
    published number only (module doc: the same sensitivity). Private."""
    frame = pd.DataFrame({"u": user, "g": grid, "x": slot, "y": cell, "n": np.asarray(n, dtype=float),
                          "S": np.asarray(S, dtype=float), "Q": np.asarray(Q, dtype=float)})
    if frame.empty:
        return np.zeros(0)
    frame["m"] = frame["S"] / frame["n"]
    frame["inv"] = 1.0 / frame["n"]
    per = frame.groupby("u", sort=True).agg(grids=("g", "size"), slots=("x", "nunique"), cells=("y", "nunique"),
                                            reps=("n", "sum"), inv=("inv", "mean"))
    per["reps"] -= per["grids"]  # the within-grid degrees of freedom
    per["s2"] = _records_noise(frame)  # the pooled variance of its records about their grid's mean
    out = []
    # one side only (shares_apart's evidence rule): no slot holds two of its grids but some cell does
    # (the time side), or the reverse (the place side)
    time_side = per[(per["grids"] == per["slots"]) & (per["grids"] > per["cells"]) & (per["reps"] > 0)]
    place_side = per[(per["grids"] == per["cells"]) & (per["grids"] > per["slots"]) & (per["reps"] > 0)]
    for rows, key, groups, place in ((time_side, "y", "cells", False), (place_side, "x", "slots", True)):
        if rows.empty:
            continue
        f = frame[frame["u"].isin(rows.index)]
        centred = f["m"] - f.groupby(["u", key])["m"].transform("mean")
        ss = (centred ** 2).groupby(f["u"]).sum()
        df = rows["grids"] - rows[groups]
        noise = rows["s2"] * rows["inv"]
        share = ((ss / df - noise).clip(lower=0.0) / reference).clip(upper=1.0).to_numpy()
        out.append(share if place else 1.0 - share)
    return np.concatenate(out) if out else np.zeros(0)


def cycle_votes(agg: Aggregate, pairs: np.ndarray, grid_of_pair: np.ndarray, calendar_code: np.ndarray,
                cycle_code: np.ndarray) -> np.ndarray:
    """The time's votes q_u (module doc) of the users with evidence, in user order: the windows of
    the cycle apart within each (cell, day) node — ``calendar_code``, the finest place × one cycle's
    span, per listed grid — and the days apart within each (cell, window) node — ``cycle_code``, the
    finest place × the recurring window, per listed grid; ``grid_of_pair`` the listed grid of each
    pair in ``pairs`` (bool per pair of the aggregate). Private: never published."""
    keep = np.asarray(pairs, dtype=bool)
    grid = np.asarray(grid_of_pair, dtype=np.int64)[keep]
    return shares_apart(np.asarray(agg.pair_user)[keep], grid, np.asarray(calendar_code)[grid],
                        np.asarray(cycle_code)[grid], np.asarray(agg.count)[keep], np.asarray(agg.sum)[keep],
                        per_df=True)


def vote_sums(votes: np.ndarray) -> tuple[int, int, int]:
    """(Q, N, the ℓ1 = ℓ2 sensitivity of Q): the votes' centred lattice sum and their number (module
    doc). Exact integers."""
    q = np.sign(votes - 0.5) * np.floor(np.abs(votes - 0.5) * 2 ** VOTE_BITS + 0.5)
    return int(np.sum(q.astype(np.int64))), int(np.size(votes)), 2 ** (VOTE_BITS - 1)


@dataclass(frozen=True)
class VoteDraw:
    """One vote's two noisy sums at a level, kept so that the vote can be raised to a higher one
    (:func:`raise_votes`): the exact centred sum ``q`` and voters ``n`` (never published), the
    sensitivity of ``q``, each query's budget ``level`` in the sampler's unit, the noisy values and
    their noise variances, and (Laplace) the noise draws that noise reduction refines."""

    q: int
    n: int
    sens: int
    level: float
    value_q: float
    value_n: float
    var_q: float
    var_n: float
    noise_q: np.ndarray | None
    noise_n: np.ndarray | None


def _noise(mech: Any, l1: int, budget: float) -> np.ndarray:
    """One draw of the mechanism's noise for an integer query of sensitivity ``l1`` (exact samplers:
    an integer; simulations: a float), the draw :meth:`integer` adds."""
    if mech.real_release:
        return np.asarray(mech.draws(1, l1=l1, l2=float(l1), budget=budget))
    return np.asarray(mech.integer(np.zeros(1), l1=l1, l2=float(l1), budget=budget), dtype=float)


def _var(mech: Any, l1: int, budget: float) -> float:
    """The noise variance at ``budget``: 2b² (Laplace), σ² (Gaussian)."""
    s = float(mech.scale(l1=l1, l2=float(l1), budget=budget))
    return 2.0 * s * s if mech.unit == "epsilon" else s * s


def _exact_sum(exact: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """exact + noise, as floats (an integer draw is added exactly first)."""
    if noise.dtype.kind == "f":
        return np.asarray(exact, dtype=float) + noise
    return np.array([float(int(e) + int(z)) for e, z in zip(np.ravel(exact), np.ravel(noise))])


def _check_budget(budget: Any) -> None:
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise DpoptInputError(f"`budget` must be a finite number > 0; got {budget!r}")


def draw_votes(votes: np.ndarray, mech: Any, budget: float, *, with_noise: Any = _exact_sum) -> VoteDraw:
    """The noisy centred sum and number of ``votes`` (module doc), half of ``budget`` (in the
    mechanism's unit) to each query. ``with_noise(exact, noise)`` adds a query's exact value and its
    draw (the engine passes its own, the one place a release's statistics meet their noise)."""
    _check_budget(budget)
    q, n, sens = vote_sums(votes)
    half = used_budget(budget / 2.0, mech)
    zq, zn = _noise(mech, sens, half), _noise(mech, 1, half)
    value_q, value_n = (float(with_noise(np.array([x], dtype=np.int64), z)[0]) for x, z in ((q, zq), (n, zn)))
    return VoteDraw(q=q, n=n, sens=sens, level=half, value_q=value_q, value_n=value_n,
                    var_q=_var(mech, sens, half), var_n=_var(mech, 1, half), noise_q=zq, noise_n=zn)


def raise_votes(draw: VoteDraw, mech: Any, budget: float, *, with_noise: Any = _exact_sum) -> VoteDraw:
    """``draw`` raised to ``budget`` in all (half to each query; at least its present level): under
    pure ε by noise reduction (:meth:`refine`, :mod:`dpopt.noise.reduction`; the earlier answers are
    post-processing of the new ones, so the vote costs its final level only and is as precise as one
    draw there), under ρ by a fresh draw at the added budget combined by inverse variance (ρ adds, and
    so does the precision) — the engine's rounds' rule (models/engine.md §2). ``with_noise``: as
    :func:`draw_votes`."""
    _check_budget(budget)
    half = used_budget(budget / 2.0, mech)
    if half <= draw.level:
        return draw
    if mech.unit == "epsilon":
        zq = mech.refine(draw.noise_q, l1=draw.sens, budget_from=draw.level, budget_to=half)
        zn = mech.refine(draw.noise_n, l1=1, budget_from=draw.level, budget_to=half)
        value_q, value_n = (float(with_noise(np.array([x], dtype=np.int64), z)[0]) for x, z in ((draw.q, zq), (draw.n, zn)))
        return replace(draw, level=half, value_q=value_q, value_n=value_n,
                       var_q=_var(mech, draw.sens, half), var_n=_var(mech, 1, half), noise_q=zq, noise_n=zn)
    step = half - draw.level
    vq, vn = _var(mech, draw.sens, step), _var(mech, 1, step)
    fq, fn = (float(with_noise(np.array([x], dtype=np.int64), _noise(mech, l1, step))[0])
              for x, l1 in ((draw.q, draw.sens), (draw.n, 1)))
    both = lambda a, va, b, vb: ((a / va + b / vb) / (1 / va + 1 / vb), 1 / (1 / va + 1 / vb))  # noqa: E731
    (value_q, var_q), (value_n, var_n) = both(draw.value_q, draw.var_q, fq, vq), both(draw.value_n, draw.var_n, fn, vn)
    return replace(draw, level=half, value_q=value_q, value_n=value_n, var_q=var_q, var_n=var_n,
                   noise_q=None, noise_n=None)


def vote_share(draw: VoteDraw) -> PlaceShare:
    """The estimate p̂ = ½ + Q̃·2^-b/Ñ (clipped to [0, 1]) of a draw and its sd (delta method):
    post-processing."""
    voters = max(draw.value_n, 1.0)
    centred = draw.value_q / 2 ** VOTE_BITS / voters
    sd = math.sqrt(draw.var_q / 4 ** VOTE_BITS + centred ** 2 * draw.var_n) / voters
    return PlaceShare(value=float(min(max(0.5 + centred, 0.0), 1.0)), sd=sd, voters=draw.value_n)


def vote_pieces(draw: VoteDraw, what: str = "place-or-time") -> dict[str, float]:
    """The budget pieces of a vote at its level, named by ``what``."""
    return {f"pilot {what} vote (centred sum)": draw.level, f"pilot {what} vote (voters)": draw.level}


def measure_votes(votes: np.ndarray, mech: Any, budget: float, what: str = "place-or-time"
                  ) -> tuple[PlaceShare | None, dict[str, float]]:
    """The noisy mean of ``votes`` (module doc) with ``budget`` (in the mechanism's unit, half to each
    query), and its budget pieces named by ``what``; (None, {}) with no budget."""
    if budget <= 0:
        return None, {}
    draw = draw_votes(votes, mech, budget)
    return vote_share(draw), vote_pieces(draw, what)


def measure_place_share(agg: Aggregate, pairs: np.ndarray | None, mech: Any, budget: float, *,
                        reference: float | None = None) -> tuple[PlaceShare | None, dict[str, float]]:
    """The noisy place-or-time vote (:func:`place_votes` with ``reference``, :func:`measure_votes`)."""
    if budget <= 0:
        return None, {}
    return measure_votes(place_votes(agg, pairs, reference=reference), mech, budget)


def _weighted(share: PlaceShare, p0: float) -> float:
    """w·p̂ + (1 − w)·p₀, w = (1/12)/((1/12) + sd²): a noisy estimate weighed against the uniform law
    on [0, 1] (variance 1/12)."""
    w = (1.0 / 12.0) / (1.0 / 12.0 + share.sd ** 2)
    return w * share.value + (1.0 - w) * p0


def _usable(share: PlaceShare | None) -> bool:
    return share is not None and bool(np.isfinite(share.sd))


def main_effect_split(sigma2: dict[str, float], kinds: dict[str, str], share: PlaceShare | None,
                      cycle: PlaceShare | None = None) -> dict[str, float]:
    """The main effects' components of ``sigma2`` re-split by the votes, their total kept. Place
    mains (``kinds[f] == "place"``) and time mains (``"cycle"``: a recurring window; ``"calendar"``:
    a contiguous time level) share it by the place-or-time vote ``share``: the place mains get
    w·p̂ + (1 − w)·p₀ of it, p₀ the even split by number of factors (what the strategy assumes without
    a vote), w = (1/12)/((1/12) + sd²) the weight of a noisy estimate against the uniform law on
    [0, 1]. The time mains' part is shared by the time's vote ``cycle`` the same way (recurring
    against contiguous levels, q₀ their even split by number), and evenly within each kind. Other
    factors unchanged; a split is skipped where either of its sides has no main effect or its vote
    is missing (models/engine.md §5)."""
    place = [f for f, k in kinds.items() if k == "place" and f in sigma2]
    recurring = [f for f, k in kinds.items() if k == "cycle" and f in sigma2]
    contiguous = [f for f, k in kinds.items() if k == "calendar" and f in sigma2]
    time = recurring + contiguous
    out = dict(sigma2)
    if _usable(share) and place and time:
        total = float(sum(sigma2[f] for f in place + time))
        p = _weighted(share, len(place) / (len(place) + len(time)))
        out.update({f: total * p / len(place) for f in place})
        out.update({f: total * (1.0 - p) / len(time) for f in time})
    if _usable(cycle) and recurring and contiguous:
        total = float(sum(out[f] for f in time))
        q = _weighted(cycle, len(recurring) / len(time))
        out.update({f: total * q / len(recurring) for f in recurring})
        out.update({f: total * (1.0 - q) / len(contiguous) for f in contiguous})
    return out
