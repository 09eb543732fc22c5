"""Exact minimax array length vs the convex surrogate (19) (ERRATA E7), each solved two ways.

The exact problem (13) is solved by enumeration over the distinct counts (Lemma V.2) and as a MILP in
HiGHS; the surrogate (19) by its closed form and as an LP in HiGHS. The surrogate replaces Γ_m by
L·m_* in the noise term, so it is loose when a few users have very few samples.

Run: python examples/arrays_surrogate_gap.py
"""

import tempfile
from pathlib import Path

import numpy as np

from dpopt.arrays import array_length_milp, optimal_array_length, surrogate_lp
from dpopt.solve import write_model

rng = np.random.default_rng(7)
instances = {
    "geometric, m_* = 1": rng.geometric(0.02, size=300),
    "uniform on [20, 200]": rng.integers(20, 201, size=300),
}
U = 1.0
print("instance               eps    exact m (enum/MILP)   surrogate m (closed/LP)   E exact   E surrogate  excess")
for name, counts in instances.items():
    for eps in (0.1, 0.5, 2.0):
        ex = optimal_array_length(counts, U, eps)
        mi = optimal_array_length(counts, U, eps, solver="milp")
        su = optimal_array_length(counts, U, eps, method="surrogate")
        lp = optimal_array_length(counts, U, eps, method="surrogate", solver="lp")
        print(
            f"{name:22s} {eps:<5g}  {ex.length:5d} / {mi.length:<5d}          {su.length:5d} / {lp.length:<5d}"
            f"            {ex.error:7.4f}   {su.error:9.4f}  {su.excess:7.4f}"
        )

# the explicit models can be exported for any other solver
counts = instances["uniform on [20, 200]"]
with tempfile.TemporaryDirectory() as tmp:
    for model, name in ((array_length_milp(counts, U, 0.5), "exact.mps"), (surrogate_lp(counts, U, 0.5), "surrogate.lp")):
        path = Path(tmp) / name
        write_model(model, path)
        print(f"wrote {name}: {model.num_cols} columns, {model.num_rows} rows, {path.stat().st_size} bytes")
