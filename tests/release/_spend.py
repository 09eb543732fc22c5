"""Independent recount of a release's privacy spend from its published files (shared by tests)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from fractions import Fraction

import pandas as pd


def exact(text: str) -> Fraction:
    """An exact decimal text of release.csv as an exact rational ("" = 0)."""
    return Fraction(Decimal(text)) if text else Fraction(0)


def user_spend(text: pd.DataFrame, kept: pd.DataFrame, unit: str) -> dict[str, Fraction]:
    """Each user's spend: Σ over the user's kept (cell, slot) of the grid's two published shares,
    from release.csv read as text (``text``) and diagnostics/kept_pairs.csv (``kept``)."""
    share = {(c, s): exact(m) + exact(v)
             for c, s, m, v in zip(text["cell"], text["slot"], text[f"{unit}_mean"], text[f"{unit}_variance"])}
    spend: dict[str, Fraction] = defaultdict(Fraction)
    for user, cell, slot in zip(kept["user"], kept["cell"], kept["slot"]):
        spend[user] += share[(cell, slot)]
    return spend
