"""Statistical check of the exact samplers on tail events, at a resolution of 1 % relative bias.

Run: python tests/benchmarks/bench_sampler_exactness.py (about a minute; not part of the default run).

For each law and parameter, one event E (a tail or the atom at 0) whose probability is computed
independently of the code (closed form or a sum of decimal-module exps, 60 digits), and n draws
from the OS CSPRNG (``SecureRandom``, what a release uses) with n chosen so that 5 binomial
standard errors are below 1 % of P(E): a relative bias of 1 % would show as |z| ≥ 5. Writes
tests/benchmarks/results/sampler_exactness.md (models/samplers.md, "Review").
"""

from __future__ import annotations

import math
import platform
import time
from datetime import date
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np

from dpopt.noise import SecureRandom
from dpopt.noise.discrete_gaussian import discrete_gaussian_array, grid_sigma2
from dpopt.noise.discrete_laplace import discrete_laplace_array


def dexp(x: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp()


def laplace_tail(scale: Fraction, y: int) -> float:
    """P(|Z| ≥ y) = 2r^y/(1 + r), r = e^{-1/scale} (y ≥ 1)."""
    r = dexp(1 / scale)
    return float(2 * r**y / (1 + r))


def gaussian_tail(s2: Fraction, y: int) -> float:
    """P(|Z| ≥ y) for N_ℤ(0, σ²): decimal sums over |z| < 40σ + 40 (the rest < e^{-800})."""
    top = 40 * math.isqrt(s2.numerator // s2.denominator + 1) + 40
    with localcontext() as ctx:
        ctx.prec = 60
        w = [dexp(Fraction(z * z) / (2 * s2)) for z in range(top)]
        norm = w[0] + 2 * sum(w[1:])
        return float(2 * sum(w[y:]) / norm)


def n_for_one_percent(p: float) -> int:
    """n with 5·sqrt(p(1 − p)/n) ≤ 0.01·p."""
    return math.ceil(25 * (1 - p) / (p * 1e-4))


CASES = [  # (law, label, parameter, event threshold y: E = {|Z| ≥ y})
    ("laplace", "scale 1/2", Fraction(1, 2), 2),
    ("laplace", "release t/ε' = 4097·2^30/858993459", Fraction(4097 * 2**30, 858993459), 15_000),
    ("gaussian", "σ² = 1/4 (all-integer path)", Fraction(1, 4), 1),
    ("gaussian", "release σ² = grid_sigma2(4097, 0.5) (float filter)", grid_sigma2(4097, 0.5), 8194),
    ("gaussian", "σ² = 1 + 2^-80 (every decision exact)", 1 + Fraction(1, 2**80), 1),
]
#: the all-exact case costs ~70 µs per draw: capped (its resolution is given in the table)
CAP = {"σ² = 1 + 2^-80 (every decision exact)": 200_000}


def main() -> None:
    rows = []
    for law, label, par, y in CASES:
        p = laplace_tail(par, y) if law == "laplace" else gaussian_tail(par, y)
        n = min(n_for_one_percent(p), CAP.get(label, 10**8))
        draw = discrete_laplace_array if law == "laplace" else discrete_gaussian_array
        t0 = time.perf_counter()
        z = draw(par, n, SecureRandom())
        sec = time.perf_counter() - t0
        hits = int((np.abs(z) >= y).sum())
        se = math.sqrt(p * (1 - p) / n)
        zscore = (hits / n - p) / se
        rows.append((law, label, y, p, n, hits / n, zscore, 5 * se / p, sec))
        print(rows[-1], flush=True)
    out = [
        f"## Sampler exactness on tail events ({date.today()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, OS CSPRNG)",
        "",
        "Event E = {|Z| ≥ y}; P(E) from closed forms or 60-digit decimal sums, independent of the code; "
        "n draws from `SecureRandom`. 'resolution' = 5 standard errors relative to P(E): a relative bias "
        "that large would give |z| ≥ 5. Written by tests/benchmarks/bench_sampler_exactness.py.",
        "",
        "| law | parameter | y | P(E) exact | n | frequency | z | resolution | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for law, label, y, p, n, f, zs, res, sec in rows:
        out.append(f"| {law} | {label} | {y} | {p:.6f} | {n:,} | {f:.6f} | {zs:+.2f} | {100 * res:.2f} % | {sec:.1f} |")
    path = Path(__file__).parent / "results" / "sampler_exactness.md"
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
