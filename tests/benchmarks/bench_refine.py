"""Benchmark of the exact Laplace noise reduction (dpopt.noise.reduction.refine_discrete_laplace), the
engine's second round. Run: PYTHONPATH=$PWD python tests/benchmarks/bench_refine.py [--n 20000]

For each pair of scales (s_from, s_to): n exact draws Z_from ~ L(s_from) (seeded), then the refine to
s_to, timed (CPU of this process, ``time.process_time``, and wall), with the proposal the sampler
picks per entry ("chosen": the near proposal L(s_to) or the far one L(1/γ), whichever accepts more at
that c) and with the near proposal forced for every entry ("near only", the sampler before the far
proposal existed; same law). Proposals per refined entry counted by wrapping the scalar sampler.
The law itself is tested in tests/noise/test_reduction.py. Writes tests/benchmarks/results/refine.md.
"""

from __future__ import annotations

import argparse
import platform
import time
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np

import dpopt.noise.reduction as reduction
from dpopt.noise.discrete_laplace import discrete_laplace_array
from dpopt.noise.sources import SeededSource

#: (label, s_from, s_to): lattice-unit sums (the engine's sums: scales of 2^40 and more), and small scales
PAIRS = [("sums in lattice units", Fraction(2**40, 3), Fraction(2**40, 5)),
         ("counts, ε 0.1 → 0.3", Fraction(30), Fraction(10)),
         ("counts, a small step", Fraction(10), Fraction(9)),
         ("counts, ε 1 → 10", Fraction(1), Fraction(1, 10))]


def _run(s_from: Fraction, s_to: Fraction, n: int, near_only: bool) -> dict[str, float]:
    src = SeededSource(11)
    c = discrete_laplace_array(s_from, n, src)
    calls = [0]
    real_draw, real_rejoin = reduction.discrete_laplace, reduction._rejoin

    def counted(scale, source):
        calls[0] += 1
        return real_draw(scale, source)

    def rejoin(c, s_to, gamma, inv_from, *, far, source):
        return real_rejoin(c, s_to, gamma, inv_from, far=False if near_only else far, source=source)

    reduction.discrete_laplace, reduction._rejoin = counted, rejoin
    try:
        t0, w0 = time.process_time(), time.perf_counter()
        a = reduction.refine_discrete_laplace(c, scale_from=s_from, scale_to=s_to, source=src)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    finally:
        reduction.discrete_laplace, reduction._rejoin = real_draw, real_rejoin
    moved = int(np.sum(a != c))
    return {"cpu_us": 1e6 * cpu / n, "wall_us": 1e6 * wall / n, "kept": 1 - moved / n,
            "proposals": calls[0] / max(moved, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args()
    lines = [f"## Exact noise reduction (`bench_refine.py`), {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", "",
             f"{args.n:,} entries per row, one process ({platform.python_implementation()} "
             f"{platform.python_version()}, a shared 2-core machine). µs per entry, CPU (wall); kept = share "
             "of entries whose noise the refine keeps (Z_to = Z_from, the identity's B = 0 branch); proposals "
             "per moved entry.", "",
             "| scales (s_from → s_to) | sampler | µs/entry CPU (wall) | kept | proposals per moved entry |",
             "|---|---|---|---|---|"]
    for label, s_from, s_to in PAIRS:
        for near_only in (True, False):
            r = _run(s_from, s_to, args.n, near_only)
            name = "near only (before)" if near_only else "chosen per entry"
            lines.append(f"| {label}: {float(s_from):.4g} → {float(s_to):.4g} | {name} | {r['cpu_us']:.0f} "
                         f"({r['wall_us']:.0f}) | {r['kept']:.3f} | {r['proposals']:.2f} |")
            print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "refine.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
