"""The ``public-occupancy`` model's own files and texts: the exact budgets written to release.csv,
the kept (user, grid) pairs of the diagnostics folder, and the spend in words.

Everything the model publishes (release.csv, answers.csv, summary.json, report.md, map.png,
report.html) is either a DP output (noisy means and variances), a function of the public
occupancy array under the public-occupancy model (counts, sensitivities, noise scales, error
bounds; see :mod:`dpopt.privacy.model_text`) or a public parameter (U, ε, the budgets used); the
map and the per-cell averages are post-processing of DP outputs (models/release.md, "What is
published, and why it may be"). The folder is written by
:func:`dpopt.writers.release_folder.write_release`, for both privacy models.

Not for publication (``<out>.diagnostics/``): suppressed.csv and kept_pairs.csv (raw user ids and
their record counts per grid: anyone holding the data can recount the privacy loss K from them) and
diagnostics.json (counts that depend on values, e.g. how many values were clipped, and timings,
which correlate with the drawn noise).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from .result import Release

__all__ = ["published_budgets", "published_budget_columns", "kept_pairs_frame", "spend_text", "value_drop_caveat"]


def spend_text(s: Any) -> str:
    """What the whole release costs every user, in one line."""
    if s.mechanism == "gaussian":
        text = f"rho-zCDP with rho = {s.rho_total:.6g} for every user"
        if s.epsilon_total is not None:
            text += f" (implies ({s.epsilon_total:.6g}, {s.delta:g})-DP)"
        return text
    if s.budget_mode == "per-grid":
        return f"user-level DP with total epsilon = K*eps = {s.degradation}*{s.epsilon:g} = {s.epsilon_total:g}"
    return f"user-level DP with total epsilon = {s.epsilon_total:.6g} for every user"


def value_drop_caveat(ing: dict[str, Any]) -> list[str]:
    """A warning line when records may be dropped because of their value (policy drop, or missing
    values): the occupancy then depends on values, outside the neighbour relation unless validity is
    public. Decided by the policy and the (published) missing-value count, not by how many values
    were out of range (a value-dependent count, never published)."""
    missing_value = int(ing.get("missing", {}).get("value", 0))
    if ing.get("out_of_range_policy", "clip") != "drop" and not missing_value:
        return []
    return [
        "- **caveat:** records are dropped because of their value (out of range with policy drop, or a "
        "missing value), so the public counts depend on values: the guarantee covers only neighbours "
        "that agree on which records are valid (use --out-of-range clip to avoid this for out-of-range "
        "values)"
    ]


def _decimal_text(x: Fraction) -> str:
    """The exact decimal expansion of a dyadic rational (k/2^j has at most j decimals)."""
    if x == 0:
        return "0"
    den = x.denominator
    j = den.bit_length() - 1
    if den != 1 << j:  # pragma: no cover - only dyadic rationals reach here
        raise ValueError("not a dyadic rational")
    digits = str(x.numerator * 5**j).rjust(j + 1, "0")  # x = digits · 10^-j, exactly
    whole, frac = digits[: len(digits) - j], digits[len(digits) - j :].rstrip("0")
    return whole + ("." + frac if frac else "")


def _floor_text(x: Fraction, digits: int) -> tuple[str, Fraction]:
    """x ≥ 0 rounded DOWN to ``digits`` significant decimal digits: (text, exact value)."""
    if x <= 0:
        return "0", Fraction(0)
    s = digits - 1 - math.floor(math.log10(float(x)))
    while math.floor(x * Fraction(10) ** s) >= 10**digits:  # log10 rounded up near a power of 10
        s -= 1
    while math.floor(x * Fraction(10) ** s) < 10 ** (digits - 1):
        s += 1
    n = math.floor(x * Fraction(10) ** s)
    return format(Decimal(n).scaleb(-s).normalize(), "f"), Fraction(n) / Fraction(10) ** s


def published_budgets(
    epsilon_mean: Any, epsilon_variance: Any, epsilon: Any, *, discrete: bool, digits: int = 12
) -> tuple[list[str], list[str]]:
    """Per grid, the texts written to release.csv for ε_μ and ε_Var (empty where not released).

    ``epsilon`` is the budget each grid's two shares must stay within: the per-grid ε (a scalar)
    or one budget per grid (total-budget plans); the same holds for ρ of a Gaussian release.

    ``discrete``: the sampler spends ε' = ε rounded down to a multiple of 2^-30 (noise.epsilon_rational);
    these are written exactly (a dyadic rational has a finite decimal expansion), and their sum is
    ≤ ε by construction of the release. Otherwise (numpy simulation) the float budgets are capped at
    ε − ε_μ in exact rationals and rounded DOWN to ``digits`` significant digits.

    Guarantee (checked here, per grid): read back as decimals (exact) and as doubles (float sum),
    ε_μ + ε_Var ≤ ε. A float read-back of each text rounds to a double ≤ the exact value used
    (the used value being a double ≥ the decimal), so the float sum cannot exceed it either.
    """
    from ..noise import epsilon_rational

    emu = np.asarray(epsilon_mean, dtype=float)
    evar = np.asarray(epsilon_variance, dtype=float)
    caps = np.broadcast_to(np.asarray(epsilon, dtype=float), emu.shape)
    out_mu: list[str] = []
    out_var: list[str] = []
    for a, b, cap in zip(emu, evar, caps):
        total = Fraction(float(cap)) if np.isfinite(cap) else Fraction(0)
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(cap)):
            out_mu.append("")
            out_var.append("")
            continue
        if discrete:
            fa = epsilon_rational(float(a)) if a > 0 else Fraction(0)
            fb = epsilon_rational(float(b)) if b > 0 else Fraction(0)
            ta, tb = _decimal_text(fa), _decimal_text(fb)
        else:
            ta, fa = _floor_text(Fraction(float(a)), digits)
            tb, fb = _floor_text(min(Fraction(float(b)), total - fa), digits)
        while fa + fb > total or float(ta) + float(tb) > float(cap):  # safety net: float read-back
            tb, fb = _floor_text(fb * (1 - Fraction(1, 10**digits)), digits)
        out_mu.append(ta)
        out_var.append(tb)
    return out_mu, out_var


def published_budget_columns(result: Release) -> pd.DataFrame:
    """release.csv's budget columns as text (:func:`published_budgets`): each grid's two shares
    exactly as the samplers spend them, and the grid's budget as their exact decimal sum (never
    above them); the rest of the table unchanged."""
    table = result.table.copy()
    unit = result.plan.unit
    cap = result.summary.epsilon if result.summary.epsilon is not None else table[unit].to_numpy(dtype=float)
    mu, var = published_budgets(table[f"{unit}_mean"], table[f"{unit}_variance"], cap,
                                discrete=result.summary.granularity > 0)
    table[f"{unit}_mean"] = pd.Series(mu, index=table.index, dtype=object)
    table[f"{unit}_variance"] = pd.Series(var, index=table.index, dtype=object)
    with localcontext(prec=200):  # exact: the shares have at most ~60 significant digits
        total = [format(Decimal(a) + Decimal(b), "f") if a else "" for a, b in zip(mu, var)]
    table[unit] = pd.Series(total, index=table.index, dtype=object)
    return table


def kept_pairs_frame(result: Release) -> pd.DataFrame:
    """The kept (user, grid) pairs: user, cell, slot, records_kept (Γ_{g,ℓ} > 0).

    Diagnostics for the data holder: with it anyone holding the data recounts
    K = max_ℓ |{g : Γ_{g,ℓ} > 0}| (seed 002 Thm II.3), the rows per user.
    """
    agg = result.aggregate
    gamma = result.gamma()
    p = np.flatnonzero(gamma > 0)
    g = agg.pair_grid[p]
    return pd.DataFrame(
        {
            "user": agg.users[agg.pair_user[p]],
            "cell": result.table["cell"].to_numpy()[g],
            "slot": result.table["slot"].to_numpy()[g],
            "records_kept": gamma[p].astype(np.int64),
        }
    )
