"""Demo section: the mechanisms on the ITMS data and a quick reproduction (< 3 s)."""

from __future__ import annotations

from typing import TextIO

import numpy as np


def demo(out: TextIO) -> None:
    """Print a short tour: mechanisms' MAE on ITMS at ε = 1 and the reproduce command."""
    from ..mechanisms import array_averaging, laplace_mean, levy, quantile
    from .seed003 import itms_dataset

    x, m = itms_dataset()
    rng = np.random.default_rng(0)
    f = x.mean()
    out.write("Mechanisms on the ITMS hexagon-hour (L = 217 buses, n = 17,166 speeds, U = 65), eps = 1, 2000 runs:\n")
    for name, mech, kw in (
        ("Laplace (baseline)", laplace_mean, {}),
        ("Array-Averaging, BestFit, m = 114", array_averaging, {"length": 114}),
        ("Levy, BestFit (eq. (9) m)", levy, {}),
        ("FixedQuantile, BestFit", quantile, {}),
    ):
        rel = mech(x, m, 65.0, 1.0, rng=rng, runs=2000, **kw)
        err = np.abs(rel.values - f)
        out.write(f"  {name:<36s} MAE {err.mean():6.3f} ± {err.std() / np.sqrt(err.size):.3f}  "
                  f"(sensitivity {np.mean(rel.sensitivity):.4f}, budget {rel.budget})\n")
    out.write("Reproduce any paper figure: dpopt reproduce 003-fig1 --out figures/  (or `all`)\n")
