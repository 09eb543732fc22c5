"""The files of a reproduced figure: ``FIGURE.csv``, ``FIGURE.png`` and ``FIGURE.notes.md``.

:func:`write_outputs` writes one :class:`~dpopt.experiments.base.FigureResult`;
:func:`reproduce_family` reproduces and writes every figure of a family (used by
``examples/figures_*.py``). The command line ``dpopt reproduce`` calls :func:`write_outputs`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["write_outputs", "reproduce_family"]


def write_outputs(result: Any, out: Path) -> dict[str, Path]:
    """Write the CSV, PNG and notes of a figure into a folder.

    Parameters
    ----------
    result
        A :class:`~dpopt.experiments.base.FigureResult` (its ``params`` and ``changed`` name the
        parameters used and those changed from the figure's defaults).
    out
        The folder; created if missing.

    Returns
    -------
    dict of str to Path
        ``"csv"``, ``"png"`` and ``"notes"``: the paths written.
    """
    from . import FIGURES
    from .base import figure_title, parameters_markdown
    from .plotting import save_figure

    out.mkdir(parents=True, exist_ok=True)
    spec = FIGURES[result.figure]
    params = dict(getattr(result, "params", {}) or {})
    changed = dict(getattr(result, "changed", {}) or {})
    title_params = {**params, "_changed": changed}
    csv = out / f"{result.figure}.csv"
    result.frame.to_csv(csv, index=False)
    png = save_figure(result.frame, spec, out / f"{result.figure}.png", params=title_params)
    notes = out / f"{result.figure}.notes.md"
    title = figure_title(spec, title_params).replace("\n", " ")
    notes.write_text(
        f"# {title}\n\nPaper: {spec.paper}. Claim: {spec.claim}\n\n"
        "## Choices and ambiguities\n\n" + result.notes.strip() + "\n\n"
        + parameters_markdown(params, changed)
    )
    return {"csv": csv, "png": png, "notes": notes}


def reproduce_family(prefix: str, out: str | Path, *, runs: int | None = None, seed: int = 0) -> list[Path]:
    """Reproduce every figure whose id starts with ``prefix`` into a folder.

    Prints, per figure, the wall time, the PNG path and the first, middle and last rows of the
    table.

    Parameters
    ----------
    prefix
        The start of the figure ids, e.g. ``"003-"``; ``""`` for every figure.
    out
        The folder (see :func:`write_outputs`).
    runs
        Monte-Carlo runs per point; ``None`` for the paper's.
    seed
        The random seed.

    Returns
    -------
    list of Path
        The PNG paths, in figure order.
    """
    from . import FIGURES, reproduce

    pngs = []
    for fig in [f for f in FIGURES if f.startswith(prefix)]:
        t0 = time.perf_counter()
        result = reproduce(fig, runs=runs, seed=seed)
        paths = write_outputs(result, Path(out))
        table = result.frame.pivot(index="epsilon", columns="series", values="value")
        print(f"{fig} ({time.perf_counter() - t0:.1f} s) -> {paths['png']}")
        print(table.iloc[[0, len(table) // 2, -1]].round(4).to_string(), "\n")
        pngs.append(paths["png"])
    return pngs
