"""User-level DP release of every grid's mean and variance when occupancy is private.

Privacy model ``user`` (models/user_level.md): neighbouring datasets differ by adding or removing
all the records of one user; public are only the grid definition (H3 resolution, slot length), the
bound U, the parameters of this function and, if given, the partition list. The pipeline:

1. contribution bounding (:mod:`.bounding`): ≤ k grids per user (its own top-k by record count,
   ties at random), ≤ c first records per (user, grid), values on a lattice;
2. (k, c) chosen under DP (:mod:`.bounds`, ε_b) unless given;
3. which grids: a public list (all listed grids, empty ones as pure noise) or private Laplace
   thresholding of the user counts (:mod:`.partitions`, (ε_p, δ));
4. noisy count ñ, centred sum Ỹ and sum of squares Z̃ per released grid (:mod:`.mechanism`), the
   remaining budget split by :func:`.split.split_budget`;
5. μ̂ = U/2 + λỸ/max(ñ, 1), σ̂² = λZ̃/max(ñ, 1) + U²/8 − (λỸ/max(ñ, 1))², post-processed into
   [0, U] and [0, U²/4] (raw values kept), with 95 % error bounds computed from DP outputs;
   ``mean_pooled``/``variance_pooled``: empirical-Bayes shrinkage toward the map-wide values
   (:mod:`.pooling`, post-processing, not covered by the error bounds).

Accounting (models/user_level.md §8): ``mechanism="laplace"``: basic composition,
ε_total = ε_b + ε_p + ε_t + ε_n + ε_Y + ε_Z and δ (selection only). ``mechanism="gaussian"``:
zCDP, ρ_total = ε_b²/2 + ε_p²/2 (the pure-ε pieces, Bun & Steinke Prop. 1.4) + ρ_t + ρ_n + ρ_Y + ρ_Z
(Lemma 2.3); private selection is δ_p-approximately ε_p²/2-zCDP (Bun & Steinke §8), so the release
is (ε(ρ_total, δ − δ_p), δ)-DP with the tight conversion of CKS 2020 Corollary 13.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import (
    DpoptInputError,
    check_delta,
    check_bound,
    check_choice,
    check_epsilon,
    check_nonnegative_float,
    check_positive_int,
)
from ..records.aggregate import Aggregate
from ..records.grid import cell_centres, cell_strings, slot_strings, slot_text
from ..noise import epsilon_rational, integer_source
from .bounding import DEFAULT_GRANULARITY_BITS, bound_contributions, grid_ranks, lattice_values
from .bounds import BOUND_RULES, choose_bounds
from .mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation, NoiseMechanism
from .pooling import pool_estimates
from .predict import NoiseBudgets
from .partitions import PartitionList, match_partitions, read_partitions, selection_threshold
from .sensitivity import sensitivities
from .split import split_budget

__all__ = ["UserReleaseSummary", "UserRelease", "release_user", "release_user_records", "CONFIDENCE"]

#: confidence of the published error bounds
CONFIDENCE = 0.95
NOISES = ("discrete", "numpy")
MECHANISMS = ("laplace", "gaussian")
#: share of δ spent by private partition selection under mechanism="gaussian" (the rest converts ρ)
SELECTION_DELTA_SHARE = 0.5

TABLE_COLUMNS = ["cell", "slot", "released", "mean", "variance", "mean_raw", "variance_raw",
                 "noisy_count", "mean_error_bound", "variance_error_bound"]


@dataclass(frozen=True)
class UserReleaseSummary:
    """Headline numbers (summary.json): every field is public or a DP output."""

    privacy_model: str
    epsilon_total: float | None
    delta: float
    k: int
    c: int
    bounds_rule: str
    budget: dict[str, float]
    split_rule: str
    partitions: str
    grids_released: int
    selection_threshold: float | None
    pooling: dict[str, float]
    bound: float
    h3_resolution: int
    slot: str
    noise: str
    granularity: float
    confidence: float
    seeded: bool
    #: "laplace" (pure ε-DP) or "gaussian" (ρ-zCDP)
    mechanism: str = "laplace"
    #: Gaussian: the ρ of the whole release (every piece, pure-ε ones as ε²/2); None for Laplace
    rho_total: float | None = None
    #: Gaussian with private selection: the δ_p spent by the selection (part of ``delta``)
    delta_selection: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class UserRelease:
    """A ``user``-model release: ``table`` (one row per released grid, columns
    :data:`TABLE_COLUMNS` plus cell_lat, cell_lng and, with private selection, noisy_users) and
    ``summary``. Everything in both is publishable."""

    table: pd.DataFrame
    summary: UserReleaseSummary
    #: for the data holder only, never published: ``timings`` (s)
    diagnostics: dict[str, Any] = field(default_factory=dict)


def _mechanism(noise: str, seed: int | None, rng: np.random.Generator, kind: str = "laplace",
               source: Any = None) -> NoiseMechanism:
    if noise == "discrete":
        src = integer_source(seed) if source is None else source
        cls = DiscreteLaplace if kind == "laplace" else DiscreteGaussian
        return cls(src, seeded=seed is not None)
    return LaplaceSimulation(rng) if kind == "laplace" else GaussianSimulation(rng)


def _eps_from_rho(rho: float) -> float:
    """The largest float ε with ε²/2 ≤ ρ exactly (a pure ε-DP piece costs ε²/2 in zCDP)."""
    from fractions import Fraction

    if rho <= 0:
        return 0.0
    e = math.sqrt(2.0 * rho)
    while Fraction(e) ** 2 / 2 > Fraction(rho):
        e = math.nextafter(e, 0.0)
    return e


def _budget(mechanism: str, epsilon: Any, rho: Any, delta: Any, private: bool) -> tuple[float, float, float, float]:
    """(total budget in the mechanism's unit, δ total, δ of the selection, δ of the ρ → ε conversion)."""
    from ..accounting import check_rho, rho_from_epsilon

    if mechanism == "laplace":
        if rho is not None:
            raise DpoptInputError(f"`rho` is a zCDP budget: use it with mechanism='gaussian'; got rho={rho!r}")
        if epsilon is None:
            raise DpoptInputError("`epsilon` (the whole release's ε) is required with mechanism='laplace'; got None")
        eps = check_epsilon(epsilon)
        if private:
            if not isinstance(delta, (int, float, np.floating)) or isinstance(delta, bool) or not 0.0 < float(delta) < 1.0:
                raise DpoptInputError(
                    f"`delta` must be a number in (0, 1) for private partition selection (no `partitions`); got {delta!r}")
            return eps, float(delta), float(delta), 0.0
        return eps, 0.0, 0.0, 0.0
    if (epsilon is None) == (rho is None):
        raise DpoptInputError("mechanism='gaussian' needs exactly one of `epsilon` (with `delta`) and `rho`; got "
                              + ("both" if epsilon is not None else "neither"))
    if delta is None:
        if epsilon is not None or private:
            raise DpoptInputError("`delta` is required with mechanism='gaussian' and "
                                  + ("`epsilon`" if epsilon is not None else "private partition selection")
                                  + " (e.g. delta=1e-6); got None")
        return check_rho(rho), 0.0, 0.0, 0.0
    d = check_delta(delta)
    d_sel = SELECTION_DELTA_SHARE * d if private else 0.0
    d_conv = d - d_sel
    total = check_rho(rho) if rho is not None else rho_from_epsilon(check_epsilon(epsilon), d_conv)
    return total, d, d_sel, d_conv


def release_user(
    agg: Aggregate,
    *,
    bound: float,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    partitions: Any = None,
    bounds: str | tuple[int, int] = "histogram",
    priority: str = "own",
    bounds_fraction: float = 0.1,
    selection_fraction: float = 0.2,
    pool_fraction: float = 0.05,
    weight_mean: float = 1.0,
    weight_variance: float = 1.0,
    typical: tuple[float, float] | None = None,
    max_grids: int = 1024,
    max_records: int = 64,
    noise: str = "discrete",
    seed: int | None = None,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
    mechanism: str | NoiseMechanism | None = None,
    noise_mechanism: NoiseMechanism | None = None,
) -> UserRelease:
    """(ε, δ) user-level DP release of every grid's mean and variance (module doc).

    Parameters
    ----------
    agg : Aggregate
        From :func:`dpopt.release.aggregate_records` with ``keep_samples=True`` (private input).
    bound : float
        Public U: values in [0, U].
    epsilon : float
        Total ε of the whole release (bounds + selection + count + sum + sum of squares); with
        ``mechanism="gaussian"`` the ε of the (ε, δ)-DP the release must imply (converted to the
        largest ρ whose tight conversion stays ≤ ε, :func:`dpopt.accounting.rho_from_epsilon`).
    delta : float, optional
        Laplace: δ of private partition selection (required, in (0, 1), when ``partitions`` is
        None). Gaussian: the total δ of the (ε, δ) statement; with private selection half of it
        (:data:`SELECTION_DELTA_SHARE`) is the selection's δ_p and the rest converts ρ to ε.
    rho : float, optional
        ``mechanism="gaussian"``: the total ρ of zCDP (instead of ``epsilon``).
    partitions : CSV path or DataFrame (columns cell, slot), PartitionList, or None
        Public partition list; None selects grids privately.
    bounds : "histogram" | "select" | "quantile" | (k, c)
        Automatic rule (:mod:`.bounds`) or fixed public bounds.
    priority : "own" | "shared"
        Which grids a user keeps: its own top-k by record count (:func:`.bounding.grid_ranks`) or
        the first k in a public hash order of grid keys (:mod:`.priority`).
    bounds_fraction, selection_fraction, pool_fraction : float
        Shares of ε spent on the automatic bounds, on private partition selection and on the three
        map-wide totals that centre the pooled estimates (0: no totals, pool around the sums of
        the per-grid values).
    weight_mean, weight_variance, typical
        The split rule (:func:`.split.split_budget`).
    max_grids, max_records : int
        Public caps of the automatic bounds.
    noise : "discrete" | "numpy"
        Exact discrete Laplace (real releases) or numpy Laplace (simulation only).
    seed : int, optional
        Reproducible randomness: NOT for a real release. None: OS entropy / CSPRNG.
    granularity_bits : int
        λ = 2^-b of the lattice of sums.
    mechanism : {"laplace", "gaussian"}, optional
        Default "laplace" (or the unit of ``noise_mechanism``). Noise of the count, sum and sum of
        squares (and the pooling totals): Laplace at pure ε-DP or Gaussian at ρ-zCDP, calibrated to the ℓ1 resp. ℓ2 sensitivities of :mod:`.sensitivity`.
        The bounds choice (exponential mechanism / quantiles) and private selection (Laplace
        thresholding) are pure ε (resp. (ε, δ)) either way; under Gaussian they get shares of ρ
        and cost ε²/2 each. A :class:`NoiseMechanism` object here is read as ``noise_mechanism``
        (older keyword).
    noise_mechanism : NoiseMechanism, optional
        Replaces the sampler chosen by ``noise`` and ``mechanism`` (its ``unit`` decides the
        accounting: "epsilon" Laplace-like, "rho" Gaussian-like).
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    U = check_bound(bound)
    if mechanism is not None and not isinstance(mechanism, str):  # the older keyword: an object
        if noise_mechanism is not None:
            raise DpoptInputError("give the sampler once: `noise_mechanism` (or the older `mechanism=` object)")
        noise_mechanism, mechanism = mechanism, None
    if noise_mechanism is not None:
        unit = getattr(noise_mechanism, "unit", None)
        if unit not in ("epsilon", "rho"):
            raise DpoptInputError(f"`noise_mechanism.unit` must be 'epsilon' or 'rho'; got {unit!r}")
        kind = "laplace" if unit == "epsilon" else "gaussian"
        if mechanism is not None and check_choice(mechanism, "mechanism", MECHANISMS) != kind:
            raise DpoptInputError(f"`noise_mechanism` (unit {unit!r}) contradicts mechanism={mechanism!r}")
    else:
        kind = check_choice("laplace" if mechanism is None else mechanism, "mechanism", MECHANISMS)
    gaussian = kind == "gaussian"
    noise = check_choice(noise, "noise", NOISES)
    bf = check_nonnegative_float(bounds_fraction, "bounds_fraction")
    sf = check_nonnegative_float(selection_fraction, "selection_fraction")
    pf = check_nonnegative_float(pool_fraction, "pool_fraction")
    if isinstance(bounds, str):
        check_choice(bounds, "bounds", BOUND_RULES)
        if not 0.0 < bf < 1.0:
            raise DpoptInputError(f"`bounds_fraction` must be in (0, 1) with automatic bounds; got {bounds_fraction!r}")
        k_fixed = c_fixed = None
    else:
        try:
            pair = tuple(bounds)
        except TypeError:
            pair = ()
        if len(pair) != 2:
            raise DpoptInputError(f"`bounds` must be one of {BOUND_RULES} or a (k, c) pair; got {bounds!r}")
        k_fixed = check_positive_int(pair[0], "bounds[0] (k)")
        c_fixed = check_positive_int(pair[1], "bounds[1] (c)")
        bf = 0.0
    private = partitions is None
    total, delta_total, delta_v, delta_conv = _budget(kind, epsilon, rho, delta, private)
    eps = total  # the budget in the mechanism's unit (ε for Laplace, ρ for Gaussian)
    if private:
        if not 0.0 < sf < 1.0:
            raise DpoptInputError(f"`selection_fraction` must be in (0, 1); got {selection_fraction!r}")
    else:
        sf = 0.0
    if bf + sf + pf >= 1.0:
        raise DpoptInputError(
            f"`bounds_fraction` + `selection_fraction` + `pool_fraction` must be < 1; got {bf + sf + pf:g}")
    # numpy's generator only for simulation noise: every random choice of a real release (noise,
    # tie-break keys, selection) comes from the integer source (issue 22 item 10)
    simulated = noise == "numpy" or (noise_mechanism is not None and (
        getattr(noise_mechanism, "source", None) is None or not noise_mechanism.real_release))
    rng = np.random.default_rng(seed) if simulated else None
    mech = noise_mechanism if noise_mechanism is not None else _mechanism(noise, seed, rng, kind)
    # Laplace thresholding for private selection: the same sampler family as the statistics'
    sel_mech = mech if not gaussian else _mechanism(
        "discrete" if mech.real_release else "numpy", seed, rng, "laplace",
        source=getattr(mech, "source", None))

    if gaussian:
        # shares of ρ (a 2^-40 margin keeps the exact sum of the rounded pieces ≤ ρ); the pure-ε
        # pieces run at the ε with ε²/2 = their share
        avail = eps * (1.0 - 2.0**-40)
        rho_b, rho_p, eps_t = bf * avail, sf * avail, pf * avail
        eps_b, eps_p = _eps_from_rho(rho_b), _eps_from_rho(rho_p)
        split = split_budget(avail - rho_b - rho_p - eps_t, bound=U, unit="rho", weight_mean=weight_mean,
                             weight_variance=weight_variance, typical=typical)
        # the bounds utility's SNR cap: the ε at which Laplace noise of the sum equals this
        # Gaussian's at k = 1 (σ = Δ/√(2ρ_Y)); a public parameter, any value is DP
        sum_budget = math.sqrt(2.0 * split.sum)
    else:
        eps_b, eps_p, eps_t = bf * eps, sf * eps, pf * eps
        split = split_budget(eps - eps_b - eps_p - eps_t, bound=U, weight_mean=weight_mean,
                             weight_variance=weight_variance, typical=typical)
        sum_budget = split.sum

    # partitions and ranks (bounding is restricted to listed grids)
    if private:
        plist = None
        mask = None
    else:
        plist = partitions if isinstance(partitions, PartitionList) else read_partitions(
            partitions, h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns)
        idx, listed = match_partitions(agg, plist)
        mask = listed[agg.pair_grid]
    if check_choice(priority, "priority", ("own", "shared")) == "shared":
        from .priority import hash_priority, priority_ranks

        ranks = priority_ranks(agg, hash_priority(agg), mask=mask)
    else:
        source = getattr(mech, "source", None)  # issue 22 item 10: the OS CSPRNG in a real release
        ranks = grid_ranks(agg, rng if source is None else source, mask=mask)
    lattice = lattice_values(agg, U, granularity_bits=granularity_bits)
    timings["bounding"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if k_fixed is None:
        choice = choose_bounds(agg, ranks, eps_b, rule=str(bounds), rng=rng, source=getattr(mech, "source", None),
                               max_grids=max_grids,
                               max_records=max_records, sum_budget=sum_budget,
                               selection=(eps_p, delta_v) if private else None, bound=U, priority=priority,
                               budgets=NoiseBudgets(count=split.count, sum=split.sum, unit=split.unit,
                                                    selection=(eps_p, delta_v) if private else None))
        k, c, rule = choice.k, choice.c, choice.rule
    else:
        k, c, rule = int(k_fixed), int(c_fixed), "fixed"
    timings["bounds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    bg = bound_contributions(agg, k=k, c=c, ranks=ranks, lattice=lattice)
    sens = sensitivities(k, c, U, lam=lattice.lam)
    noisy_users = None
    threshold = None
    if private:
        cand = np.flatnonzero(bg.users > 0)
        rule_sel = selection_threshold(k, eps_p, delta_v, sel_mech)
        threshold = rule_sel.threshold
        lu = sel_mech.integer(bg.users[cand], l1=k, l2=sens.users_l2, budget=eps_p)
        keep = lu >= threshold
        rows = cand[keep]
        noisy_users = lu[keep]
        cells, slots = agg.cells[rows], agg.slots[rows]
        R, Y, Z = bg.records[rows], bg.sum_q[rows], bg.sumsq_q[rows]
    else:
        cells, slots = plist.cells, plist.slots
        have = idx >= 0
        R = np.zeros(len(plist), dtype=np.int64)
        Y = np.zeros(len(plist), dtype=bg.sum_q.dtype)  # exact: int64 or Python ints (bounding)
        Z = np.zeros(len(plist), dtype=bg.sumsq_q.dtype)
        R[have], Y[have], Z[have] = bg.records[idx[have]], bg.sum_q[idx[have]], bg.sumsq_q[idx[have]]
    n_t = mech.integer(R, l1=sens.count_l1, l2=sens.count_l2, budget=split.count)
    y_t = mech.integer(Y, l1=sens.sum_l1_units, l2=sens.sum_l2_units, budget=split.sum)
    z_t = mech.integer(Z, l1=sens.sumsq_l1_units, l2=sens.sumsq_l2_units, budget=split.sumsq)
    timings["noise"] = time.perf_counter() - t0

    lam = lattice.lam
    n_eff = np.maximum(n_t, 1.0)
    ybar = lam * y_t / n_eff
    mean_raw = U / 2.0 + ybar
    var_raw = lam * z_t / n_eff + U * U / 8.0 - ybar**2
    # 95 % error bounds from DP outputs (models/user_level.md §7): union over the three noises
    p = (1.0 - CONFIDENCE) / 3.0
    q_n = mech.abs_quantile(mech.scale(l1=sens.count_l1, l2=sens.count_l2, budget=split.count), p)
    q_y = lam * mech.abs_quantile(mech.scale(l1=sens.sum_l1_units, l2=sens.sum_l2_units, budget=split.sum), p)
    q_z = lam * mech.abs_quantile(mech.scale(l1=sens.sumsq_l1_units, l2=sens.sumsq_l2_units, budget=split.sumsq), p)
    ok = n_t >= 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        d_mean = np.where(ok, (q_y + U / 2.0 * q_n) / n_t, np.inf)
        d_var = np.where(ok, (q_z + U * U / 8.0 * q_n) / n_t + d_mean * (2.0 * np.abs(ybar) + d_mean), np.inf)
    err_mean = np.minimum(d_mean + lam / 2.0, U)
    err_var = np.minimum(d_var + lam / 2.0 * (1.0 + U), U * U / 4.0)
    scales = (mech.scale(l1=sens.count_l1, l2=sens.count_l2, budget=split.count),
              lam * mech.scale(l1=sens.sum_l1_units, l2=sens.sum_l2_units, budget=split.sum),
              lam * mech.scale(l1=sens.sumsq_l1_units, l2=sens.sumsq_l2_units, budget=split.sumsq))
    if gaussian:  # pool_estimates models noise variance as 2·scale² (Laplace): pass σ/√2
        scales = tuple(v / math.sqrt(2.0) for v in scales)
    totals = None
    if eps_t > 0:  # three scalars, each moved by ≤ k·c·(1, H_Y, H_Z) units by one user: ε_t/3 each
        tot = [mech.integer(np.asarray([int(v.sum())]), l1=l1, l2=l1, budget=eps_t / 3.0)[0]
               for v, l1 in ((R, sens.count_l1), (Y, sens.sum_l1_units), (Z, sens.sumsq_l1_units))]
        totals = (tot[0], lam * tot[1], lam * tot[2])
    mean_pool, var_pool, pool_info = pool_estimates(n_t, lam * y_t, lam * z_t, bound=U, scales=scales,
                                                    totals=totals)
    table = pd.DataFrame({
        "cell": cell_strings(cells),
        "slot": slot_strings(slots),
        "released": np.ones(cells.size, dtype=bool),
        "mean": np.clip(mean_raw, 0.0, U),
        "variance": np.clip(var_raw, 0.0, U * U / 4.0),
        "mean_raw": mean_raw,
        "variance_raw": var_raw,
        "noisy_count": n_t,
        "mean_error_bound": err_mean,
        "variance_error_bound": err_var,
        "mean_pooled": mean_pool,
        "variance_pooled": var_pool,
    })
    if noisy_users is not None:
        table["noisy_users"] = noisy_users
    lat, lng = cell_centres(cells)
    table.insert(2, "cell_lat", lat)
    table.insert(3, "cell_lng", lng)

    if mech.real_release:  # the budgets the sampler used (each rounded down to a multiple of 2^-30)
        used = {name: float(epsilon_rational(v)) for name, v in
                (("count", split.count), ("sum", split.sum), ("sumsq", split.sumsq))}
    else:
        used = {"count": split.count, "sum": split.sum, "sumsq": split.sumsq}
    if private:
        used["selection"] = float(epsilon_rational(eps_p)) if sel_mech.real_release else eps_p
    if k_fixed is None:
        used["bounds"] = eps_b
    if eps_t > 0:
        used["totals"] = 3 * float(epsilon_rational(eps_t / 3.0)) if mech.real_release else eps_t
    rho_total = None
    if gaussian:
        from fractions import Fraction

        from ..accounting import zcdp_epsilon

        # pure-ε pieces in ε (their zCDP cost ε²/2 enters rho_total); the rest in ρ
        pure = {name: used.pop(name) for name in ("selection", "bounds") if name in used}
        exact = sum((Fraction(v) for v in used.values()), Fraction(0)) + sum(
            (Fraction(v) ** 2 / 2 for v in pure.values()), Fraction(0))
        rho_total = float(exact)
        used = {**{f"{n}_rho": v for n, v in used.items()}, **{f"{n}_epsilon": v for n, v in pure.items()}}
        eps_total = zcdp_epsilon(rho_total, delta_conv) if delta_total > 0 else None
    else:
        eps_total = float(sum(used.values()))
    summary = UserReleaseSummary(
        privacy_model="user",
        epsilon_total=eps_total,
        delta=delta_total,
        k=k,
        c=c,
        bounds_rule=rule,
        budget=used,
        split_rule=split.rule,
        partitions=("private selection (Laplace thresholding" + (
            f", delta_p = {delta_v:g} of the total delta)" if gaussian else ")")) if private else "public list",
        grids_released=int(cells.size),
        selection_threshold=threshold,
        pooling=pool_info,
        bound=U,
        h3_resolution=agg.h3_resolution,
        slot=slot_text(agg.slot_ns),
        noise=mech.label,
        granularity=lam,
        confidence=CONFIDENCE,
        seeded=seed is not None,
        mechanism=kind,
        rho_total=rho_total,
        delta_selection=delta_v if gaussian else 0.0,
    )
    return UserRelease(table=table, summary=summary,
                       diagnostics={"timings": {key: round(v, 4) for key, v in timings.items()}})


def release_user_records(
    records: Any,
    *,
    bound: float,
    epsilon: float | None = None,
    h3_resolution: int = 7,
    slot: Any = "1h",
    columns: Any = None,
    timestamp_unit: str = "s",
    chunksize: int | None = None,
    **options: Any,
) -> UserRelease:
    """Ingest, grid and aggregate ``records`` (values outside [0, U] clipped), then
    :func:`release_user` with ``options``."""
    from ..release.release import aggregate_records

    agg, _ = aggregate_records(records, bound=bound, h3_resolution=h3_resolution, slot=slot,
                               columns=columns, out_of_range="clip", timestamp_unit=timestamp_unit,
                               chunksize=chunksize, keep_samples=True)
    return release_user(agg, bound=bound, epsilon=epsilon, **options)


