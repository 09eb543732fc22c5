"""``dpopt demo``: a short tour of what dpopt does, one section per model.

Each model package contributes ``<package>.demo.demo(out)``; this module prints them in order.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TextIO

import numpy as np

SECTIONS: list[tuple[str, str]] = [
    ("Error calculus (seed 002, ERRATA E1)", "dpopt.demo:calculus_demo"),
    ("Clipping strategy (seeds 000/001)", "dpopt.clipping.demo:demo"),
    ("Array length (seed 003)", "dpopt.arrays.demo:demo"),
    ("Grid suppression (seed 002)", "dpopt.suppression.demo:demo"),
    ("Mechanisms and experiments", "dpopt.experiments.demo:demo"),
    ("Release pipeline", "dpopt.release.demo:demo"),
]


def calculus_demo(out: TextIO) -> None:
    from . import calculus, verify
    from .verify import estimators as est

    counts = np.array([6, 3, 2, 1])
    retained = np.array([3, 3, 2, 1])
    U = 65.0
    out.write(f"counts m = {counts.tolist()}, retained Gamma = {retained.tolist()}, U = {U:g}\n")
    out.write(f"  mean sensitivity      {calculus.mean_sensitivity(retained, U):10.4f}  (U*Gamma*/R)\n")
    out.write(f"  variance sensitivity  {calculus.variance_sensitivity(retained, U):10.4f}  (Prop. III.1 / Lemma III.3)\n")
    out.write(f"  mean bias             {calculus.mean_bias(retained, counts, U):10.4f}  (Thm IV.1)\n")
    out.write(f"  variance bias         {calculus.variance_bias(retained, counts, U):10.4f}  (Thm IV.2 corrected)\n")
    m, g = np.ones(4, int), np.array([1, 1, 1, 0])
    brute = verify.worst_case_error(est.clipped_variance(g), m, 1.0, target="variance", levels=5)
    out.write(
        "  ERRATA E1, N=4, R=3, U=1: brute force "
        f"{brute.value:.4f} = corrected {calculus.variance_bias(g, m, 1.0):.4f}; "
        f"seed text {calculus.variance_bias_seed_text(g, m, 1.0):.4f}\n"
    )


def _resolve(spec: str):  # type: ignore[no-untyped-def]
    module, func = spec.split(":")
    return getattr(importlib.import_module(module), func)


def demo(out: TextIO | None = None) -> None:
    out = out or sys.stdout
    for title, spec in SECTIONS:
        out.write(f"\n== {title} ==\n")
        try:
            func = _resolve(spec)
        except ModuleNotFoundError:
            out.write("  (not part of this build)\n")
            continue
        func(out)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="a short tour of dpopt's models on small built-in instances")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    demo()
    return 0
