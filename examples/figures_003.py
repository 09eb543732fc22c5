"""Seed 003 (Rameshwar et al.): pseudo-user mechanisms on the ITMS bus speeds, Figures 1-5.

Recomputes every figure of the family with the papers' run counts and writes, for each, a tidy CSV
(figure, series, epsilon, value, stderr), a PNG and the notes on ambiguous choices into
a fresh folder under the current directory (or --out DIR;
`--out examples/gallery` refreshes the gallery). Equivalent to `dpopt reproduce 003-figN --out DIR` for each N.

    python examples/figures_003.py [--runs N] [--seed S] [--out DIR]
"""

from __future__ import annotations

from _driver import figure_family_main

if __name__ == "__main__":
    figure_family_main("003-", __doc__, __file__)
