"""A short tour of the grid-suppression model for ``dpopt demo``."""

from __future__ import annotations

from typing import TextIO

import numpy as np

__all__ = ["demo"]


def demo(out: TextIO) -> None:
    """Print CLIP-USER vs the exact MILP on a small heavy-hitter occupancy (< 3 s)."""
    from .greedy import clip_user
    from .milp import solve_suppression
    from .pseudo import pseudo_user_clipping
    from .synthetic import heavy_hitter_occupancy

    occ = heavy_hitter_occupancy(np.random.default_rng(2), n_grids=6, q=0.05, gamma=6)
    U, eps = 65.0, 0.5
    out.write("Grid suppression (seed 002): lower K = max_l G_l with every grid error <= E\n")
    out.write(f"  synthetic heavy-hitter occupancy: {occ}\n")
    g = clip_user(occ, U, eps)
    m = solve_suppression(occ, U, eps)
    out.write(f"  E = max_g E_g of BASELINE = {g.error_bound:.1f}; original K = G_1 = {occ.degradation}\n")
    out.write(f"  CLIP-USER (greedy):   K = {g.degradation}  (loss {g.privacy_loss:.2f}), "
              f"{len(g.suppressed)} pairs suppressed\n")
    out.write(f"  exact MILP (HiGHS):   K = {m.degradation}  (loss {m.privacy_loss:.2f}), status "
              f"{m.status.value}, gap {m.gap:.0%}, {len(m.suppressed)} pairs, {m.suppressed_samples} samples\n")
    p = pseudo_user_clipping(occ, U, eps, m)
    out.write(f"  pseudo-user clipping after the MILP plan (eq. 15): worst error "
              f"{m.max_error:.1f} -> {p.max_error:.1f}\n")
