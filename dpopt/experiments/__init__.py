"""Reproductions of every figure of seeds 000, 002 and 003: one function per figure -> tidy table.

>>> from dpopt.experiments import reproduce
>>> result = reproduce("003-fig1", runs=1000, seed=0)      # doctest: +SKIP
>>> result.frame.columns.tolist()                           # doctest: +SKIP
['figure', 'series', 'epsilon', 'value', 'stderr']

:data:`FIGURES` maps each figure id to its :class:`~dpopt.experiments.base.FigureSpec` (function,
axis labels and scales, the paper's claim). Drawing lives in :mod:`dpopt.experiments.plotting`;
the files of a figure (CSV, PNG, notes) in :mod:`dpopt.experiments.outputs`; the command line
``dpopt reproduce FIGURE --out DIR`` in :mod:`dpopt.cli.reproduce`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import DpoptInputError
from . import seed000, seed002, seed003
from .base import COLUMNS, FigureResult, FigureSpec

__all__ = ["FIGURES", "COLUMNS", "FigureResult", "FigureSpec", "reproduce", "figure_ids", "figure_parameters"]

_EPS = "privacy parameter ε"


def _spec(figure: str, title: str, ylabel: str, func: Callable[..., FigureResult], runs: int | None, *,
          xscale: str = "linear", yscale: str = "linear", paper: str = "", claim: str = "") -> FigureSpec:
    """The :class:`FigureSpec` of a figure drawn against ε (every figure here): its id, title, y
    label, function and default run count; the axes' scales, the paper's figure and its claim."""
    return FigureSpec(figure, title, _EPS, ylabel, func, runs, xscale, yscale, paper, claim)


#: every reproducible figure, by id
FIGURES: dict[str, FigureSpec] = {s.figure: s for s in [
    _spec("000-fig1", "worst-case dataset: OPT (exact) vs AKMV (Monte Carlo)", "worst-case error",
          seed000.fig1, 10_000, paper="seed 000 Fig. 1",
          claim="OPT's worst-case error is much lower than AKMV's for a large range of ε; both decrease."),
    _spec("000-fig2", "average-case error, geometric collection, uniform samples", "mean absolute error",
          seed000.fig2, 10_000, paper="seed 000/001 Fig. 2",
          claim="OPT-worst-case far below Laplace and AKMV for ε < 2; AKMV similar to, a little worse than, Laplace."),
    _spec("000-fig3", "average-case error, extreme-valued collection, projected Gaussian", "mean absolute error",
          seed000.fig3, 10_000, yscale="log", paper="seed 000/001 Fig. 3",
          claim="Same ordering as Fig. 2, on a log error axis."),
    _spec("002-fig1", "privacy loss after CLIP-USER (Austin stand-in for ITMS)", "privacy loss under composition",
          seed002.fig1, None, xscale="log", paper="seed 002 Fig. 1",
          claim="Clear improvement of the privacy loss K·ε over G_1·ε for most ε."),
    _spec("002-fig2", "worst-case error after CLIP-USER + pseudo-users (Austin)", "worst-case error across grids",
          seed002.fig2, None, xscale="log", yscale="log", paper="seed 002 Fig. 2",
          claim="Little to no improvement of the worst-case error on the real data."),
    *[_spec(f"002-fig{i}", "expected privacy loss, synthetic, γ = {gamma:g}, q = {q:g}", "privacy loss under composition",
            getattr(seed002, f"fig{i}"), 10, xscale="log", paper=f"seed 002 Fig. {i}",
            claim="For fixed q, larger γ gives a larger improvement of the privacy loss.")
      for i, g in ((3, 3), (4, 6), (5, 9))],
    *[_spec(f"002-fig{i}", "expected worst-case error, synthetic, γ = {gamma:g}, q = {q:g}", "worst-case error across grids",
            getattr(seed002, f"fig{i}"), 10, xscale="log", yscale="log", paper=f"seed 002 Fig. {i}",
            claim="For fixed q, larger γ gives a larger drop of the worst-case error after pseudo-user clipping.")
      for i, g in ((6, 3), (7, 6), (8, 9))],
    _spec("003-fig1", "ITMS: WrapAround vs BestFit", "mean absolute error (km/h)", seed003.fig1, 10_000,
          paper="seed 003 Fig. 1",
          claim="Array-Averaging similar under both groupings; Levy and Quantile much better with BestFit."),
    _spec("003-fig2", "ITMS: BestFit mechanisms vs Baseline", "mean absolute error (km/h)", seed003.fig2, 10_000,
          paper="seed 003 Fig. 2", claim="All clipping mechanisms far below Baseline and close to each other."),
    _spec("003-fig3", "sample scaling (κ = {kappa}), synthetic", "mean absolute error (km/h)", seed003.fig3, 10_000,
          paper="seed 003 Fig. 3", claim="Levy is best when users contribute many samples."),
    _spec("003-fig4", "user scaling (κ = {kappa}), synthetic", "mean absolute error (km/h)", seed003.fig4, 10_000,
          paper="seed 003 Fig. 4", claim="FixedQuantile best, Array-Averaging second, when there are many users."),
    _spec("003-fig5", "minimax array length m_UB(ε) on ITMS", "array length m_UB", seed003.fig5, None,
          xscale="log", paper="seed 003 Fig. 5",
          claim="Non-decreasing staircase from m_* = 1 (small ε) to m* = 417 (ε near 1)."),
]}


def figure_ids() -> list[str]:
    """All figure ids in order."""
    return list(FIGURES)


def figure_parameters(figure: str) -> dict[str, Any]:
    """Every parameter of a figure's function with its default (``runs``, ``seed``, ``epsilons``,
    ``bound`` and the experiment's own, e.g. ``gamma`` and ``q`` for seed 002's synthetic figures)."""
    if figure not in FIGURES:
        raise DpoptInputError(f"`figure` must be one of {', '.join(FIGURES)}; got {figure!r}")
    sig = inspect.signature(FIGURES[figure].func)
    return {name: p.default for name, p in sig.parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "progress"}


def reproduce(figure: str, *, runs: int | None = None, seed: int = 0, progress: bool = False,
              **params: Any) -> FigureResult:
    """Compute one figure; ``runs=None`` uses the paper's run count.

    Extra ``params`` go to the figure function; an unknown name raises :class:`DpoptInputError`
    listing the valid ones (:func:`figure_parameters`). The result records every parameter used
    (``params``, defaults included) and those set to a non-default value (``changed``), which the
    plot's title and the notes show.
    """
    defaults = figure_parameters(figure)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise DpoptInputError(
            f"`param` {', '.join(unknown)} is not a parameter of {figure}; valid: {', '.join(defaults)}")
    spec = FIGURES[figure]
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DpoptInputError(f"`seed` must be an integer >= 0 (numpy's SeedSequence); got {seed!r}")
    kw = dict(params, seed=seed, progress=progress)
    r = runs if runs is not None else spec.default_runs
    if r is not None:
        kw["runs"] = r
    result = spec.func(**kw)
    used = {k: kw.get(k, v) for k, v in defaults.items()}
    used["runs"] = r
    changed = {k: v for k, v in used.items() if k in {*params, "runs", "seed"} and not _same(v, defaults[k])}
    if runs is None:
        changed.pop("runs", None)
    full = dict(used)
    for k, v in result.params.items():  # what the function resolved (e.g. the default ε grid)
        if k not in full or full[k] is None:
            full[k] = v
    return dataclasses.replace(result, params=full, changed=changed)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
    except (TypeError, ValueError):
        return a == b
