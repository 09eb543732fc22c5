"""Tour of the clipping-strategy model (seeds 000/001), for ``dpopt demo``."""

from __future__ import annotations

from typing import TextIO

import numpy as np

__all__ = ["demo", "geometric_counts", "extreme_counts"]


def geometric_counts(M: int = 6) -> np.ndarray:
    """Geometric collection (seed 000 §IV): for i = 0..M, 2^i users with 2^(M−i) samples each."""
    return np.concatenate([np.full(2**i, 2 ** (M - i), dtype=np.int64) for i in range(M + 1)])


def extreme_counts(L: int = 101, m_max: int = 10) -> np.ndarray:
    """Extreme-valued collection (seed 000 §IV): L − 1 users with 1 sample, one with m_max."""
    return np.concatenate([np.ones(L - 1, dtype=np.int64), [m_max]])


def demo(out: TextIO) -> None:
    """Print a short (< 1 s) tour: closed form, certificate, LP cross-check (no cvxpy import)."""
    from .closed_form import optimal_clipping, optimal_error
    from .lp import solve_clipping

    U = 65.0
    m = geometric_counts(6)
    out.write("== Optimal clipping strategy (seeds 000/001, Theorem III.1) ==\n")
    out.write(f"geometric collection M = 6: L = {m.size} users, n = {int(m.sum())} samples, U = {U:g}\n")
    eps = np.array([0.01, 0.1, 0.5, 1.0, 2.0])
    errs = optimal_error(m, U, eps)
    out.write("eps    T_eps   E^OPT    vanilla Laplace\n")
    for e, err in zip(eps, errs):
        plan = optimal_clipping(m, U, e)
        out.write(f"{e:<6g} {plan.threshold:6g}  {err:7.4f}  {U * m.max() / (e * m.sum()):9.3f}\n")
    plan = optimal_clipping(m, U, 0.5)
    rep = plan.certificate.report()
    out.write(f"eps = 0.5: KKT certificate (ERRATA E4) primal {rep.primal:.1e}, dual {rep.dual:.1e}, "
              f"compl. {rep.complementary:.1e}, stationarity {rep.stationarity:.1e} -> ok = {rep.ok}\n")
    for f in ("per-user", "per-sample"):
        lp = solve_clipping(m, U, 0.5, formulation=f)
        out.write(f"LP {f:<10s} (HiGHS): error {lp.error:.6f}, status {lp.status.value}, "
                  f"duals certify: {lp.check()}\n")
    p2 = optimal_clipping(m, U, 0.5, dim=2)
    out.write(f"d = 2 (ERRATA E3, l1-ball clipping, sensitivity 2T/n): error {p2.error:.4f} = 2 E^OPT\n")
    out.write("custom variants (per-user bounds U_l, a cap on one user's bias, fixed intervals, d >= 2): "
              "dpopt.clipping_problem(...) returns a cvxpy model; see examples/clipping_*.py\n")
