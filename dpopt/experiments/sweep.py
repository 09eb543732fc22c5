"""Sweeps: run the models over instances × ε into one tidy table (:func:`sweep`).

One row per (instance, model, ε), with the model's :meth:`summary` as columns (``status``,
``error``, ``solve_time`` and the model's own numbers: ``threshold``, ``length``, ``degradation``, …),
so that ``df.pivot_table(index="epsilon", columns="model", values="error")`` or a seaborn plot is one
line. The models:

* ``"clipping"`` — :func:`dpopt.optimal_clipping` (closed form, Theorem III.1) on the user totals;
* ``"array_length"`` — :func:`dpopt.optimal_array_length` (exact, Lemma V.2) on the user totals;
* ``"suppression"`` — :func:`dpopt.solve_suppression` (exact MILP) on the occupancy, without the
  tie-break by default: it changes which pairs are suppressed, never K nor the grid errors a sweep
  compares, and it can cost as much as the main solve;
* any callable ``f(counts, occ, bound, epsilon) -> result`` whose result has ``summary()``
  (e.g. a :func:`dpopt.clipping_problem` with your constraints, re-solved with ``set_epsilon``).

An instance is an :class:`~dpopt.Occupancy` (the counts models use its per-user totals) or a 1-D
array of per-user counts (the suppression model then sees one grid).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_epsilons, check_bound

__all__ = ["sweep", "SWEEP_MODELS"]

#: the built-in models of :func:`sweep`
SWEEP_MODELS = ("clipping", "array_length", "suppression")


def _clipping(counts: np.ndarray, occ: Any, bound: float, epsilon: float, **_: Any) -> Any:
    from ..clipping import optimal_clipping

    return optimal_clipping(counts, bound, epsilon)


def _array_length(counts: np.ndarray, occ: Any, bound: float, epsilon: float, **_: Any) -> Any:
    from ..arrays import optimal_array_length

    return optimal_array_length(counts, bound, epsilon)


def _suppression(counts: np.ndarray, occ: Any, bound: float, epsilon: float, *, time_limit: float | None = None,
                 tie_break: bool = False, **_: Any) -> Any:
    from ..suppression import solve_suppression

    return solve_suppression(occ, bound, epsilon, time_limit=time_limit, tie_break=tie_break)


_BUILT_IN: dict[str, Callable[..., Any]] = {"clipping": _clipping, "array_length": _array_length,
                                            "suppression": _suppression}


def _instance(value: Any, name: Any) -> tuple[np.ndarray, Any]:
    """(per-user counts, occupancy) of one instance."""
    from ..occupancy import Occupancy

    if isinstance(value, Occupancy):
        return np.asarray(value.matrix.sum(axis=1)).ravel().astype(np.int64), value
    counts = np.asarray(value)
    if counts.ndim != 1 or counts.size == 0:
        raise DpoptInputError(f"`instances[{name!r}]` must be an Occupancy or a 1-D array of counts; "
                              f"got shape {counts.shape}")
    return counts, Occupancy.from_dense(counts.reshape(-1, 1))


def _models(models: Any) -> dict[str, Callable[..., Any]]:
    if isinstance(models, Mapping):
        out = {str(k): (_BUILT_IN[v] if isinstance(v, str) and v in _BUILT_IN else v) for k, v in models.items()}
        for k, fn in out.items():
            if not callable(fn):
                raise DpoptInputError(f"`models[{k!r}]` must be a built-in model's name {SWEEP_MODELS} or a "
                                      f"callable; got {type(fn).__name__}")
        return out
    if isinstance(models, str):  # one name, not its letters
        models = (models,)
    out = {}
    for m in models:
        if not isinstance(m, str) or m not in _BUILT_IN:
            raise DpoptInputError(f"`models` must name built-in models {SWEEP_MODELS} (or be a mapping "
                                  f"name -> callable); got {m!r}")
        out[m] = _BUILT_IN[m]
    return out


def sweep(
    instances: Iterable[Any] | Mapping[Any, Any],
    epsilons: Any,
    *,
    bound: float,
    models: Iterable[str] | Mapping[str, Any] = SWEEP_MODELS,
    time_limit: float | None = None,
    tie_break: bool = False,
) -> Any:
    """Run ``models`` on every instance at every ε; return a tidy pandas DataFrame (module docstring).

    Parameters
    ----------
    instances : iterable or mapping
        Occupancies or 1-D count arrays; a mapping names them (else they are numbered from 0).
    epsilons : float or array_like
        The ε values.
    bound : float
        U.
    models : iterable of str or mapping name -> callable
        Built-in names (:data:`SWEEP_MODELS`) or your own ``f(counts, occ, bound, epsilon, **kw)``.
    time_limit : float, optional
        Per suppression solve (a hard bound, :func:`dpopt.solve.solve_bounded`).
    tie_break : bool
        The suppression tie-break (off by default: module docstring).

    Returns
    -------
    pandas.DataFrame
        Columns ``instance``, ``model``, ``epsilon``, ``seconds`` (wall time of the call), then the
        result's ``summary()`` (``error`` is the worst-case error; for suppression its ``max_error``).
    """
    from .._frames import frame

    U = check_bound(bound)
    eps_values = as_epsilons(epsilons)
    if isinstance(instances, (str, bytes)) or not isinstance(instances, (Mapping, Iterable)):
        raise DpoptInputError("`instances` must be an iterable (or a mapping name -> instance) of occupancies or "
                              f"count arrays; got {type(instances).__name__}")
    named = instances.items() if isinstance(instances, Mapping) else enumerate(instances)
    fns = _models(models)
    rows = []
    for name, value in named:
        counts, occ = _instance(value, name)
        for model, fn in fns.items():
            for eps in np.atleast_1d(eps_values).tolist():
                t0 = time.perf_counter()
                result = fn(counts, occ, U, float(eps), time_limit=time_limit, tie_break=tie_break)
                seconds = time.perf_counter() - t0
                if not callable(getattr(result, "summary", None)):
                    raise DpoptInputError(f"`models[{model!r}]` must return a result with a summary() (a dpopt "
                                          f"plan); got {type(result).__name__}")
                summary = {k: v for k, v in result.summary().items() if k != "epsilon"}
                if "error" not in summary and "max_error" in summary:  # suppression: the largest grid error
                    summary["error"] = summary["max_error"]
                rows.append({"instance": name, "model": model, "epsilon": float(eps), "seconds": seconds,
                             **summary})
    return frame(rows)
