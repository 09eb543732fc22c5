"""Tour of the array-length model (seed 003) on the shipped ITMS counts, for ``dpopt demo``."""

from __future__ import annotations

from typing import TextIO

__all__ = ["demo"]


def demo(out: TextIO) -> None:
    """Print a short (< 1 s) tour: grouping, the four choices of m, the surrogate's excess."""
    from ..datasets import ITMS_BOUND, load_itms_counts
    from .grouping import best_fit, wrap_around
    from .length import exact_length_path, optimal_array_length

    counts = load_itms_counts()
    U = ITMS_BOUND
    out.write("== Array length of pseudo-user Array-Averaging (seed 003), ITMS bus speeds ==\n")
    out.write(f"users L = {counts.size}, samples M = {int(counts.sum())}, "
              f"m_* = {int(counts.min())}, m^* = {int(counts.max())}, U = {U:g} km/h\n")
    m9 = optimal_array_length(counts, U, 1.0, method="heuristic").length
    wa, bf = wrap_around(counts, m9), best_fit(counts, m9)
    out.write(f"heuristic (9): m = {m9}; WrapAround {wa.num_arrays} arrays "
              f"({wa.discarded} samples discarded), BestFit {bf.num_arrays} arrays (fills <= {bf.fills.max()})\n")
    out.write("eps   method      m    worst-case error E(m)  excess over exact\n")
    for eps in (0.5, 1.0, 2.0):
        for method in ("exact", "surrogate", "heuristic", "median"):
            p = optimal_array_length(counts, U, eps, method=method)
            out.write(f"{eps:<5g} {method:<10s} {p.length:4d}  {p.error:10.3f}            {p.excess:8.3f}\n")
    eps = [0.001, 0.003, 0.01, 0.1, 0.5, 1.0]
    path = exact_length_path(counts, U, eps)
    out.write("exact m_UB(eps) (Figure 5): "
              + ", ".join(f"{e:g}->{m}" for e, m in zip(eps, path)) + "\n")
    out.write("The convex surrogate (19) bounds the noise with Gamma_m >= L*m_* = L (m_* = 1 here), "
              "so its m is far from the exact minimax length (ERRATA E7).\n")
