"""The release's old keyword calls, mapped onto the layered API (issue 20) for the tests.

The public front door now takes options grouped by concern (``dpopt.release.release(records, *,
bound, budget, model, grid, estimation, noise, io)``); the tests written against the flat keyword
API call these adapters, which only sort the keywords into the typed option objects. A keyword that
belongs to the other privacy model cannot be expressed in that model's options: the adapter raises
the ``DpoptInputError`` a wrong type would.
"""

from __future__ import annotations

from typing import Any

from dpopt._validation import DpoptInputError
from dpopt.noise import DEFAULT_GRANULARITY_BITS
from dpopt.release import (Budget, EstimationOptions, GridOptions, InputOptions, NoiseOptions, PerGridBudget,
                           PublicOccupancyOptions, UserOptions, contributions)
from dpopt.release import release as _release
from dpopt.release import release_aggregate as _release_aggregate
from dpopt.release import release_user as _release_user

USER_KEYS = ("partitions", "bounds", "priority", "bounds_fraction", "selection_fraction", "pool_fraction", "weight_mean",
             "weight_variance", "typical", "max_grids", "max_records")
PUBLIC_KEYS = ("plan", "pseudo_users", "error_bound", "split", "time_limit", "target", "target_variance",
               "criterion")
PUBLIC_DEFAULTS = {"plan": None, "pseudo_users": False, "error_bound": None, "split": "equal", "time_limit": None,
                   "target": None, "target_variance": None, "criterion": "noise"}
#: the old flat ``release()`` defaulted to bounds="select" (its CLI still does); ``release_user`` to
#: "histogram" (issue 21.3), as ``UserOptions`` now does
USER_DEFAULTS = {"partitions": None, "bounds": "select"}


def _take(kw: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: kw.pop(k) for k in keys if k in kw}


def _budget(kw: dict[str, Any], *, user: bool) -> Any:
    eps, tot, rho = kw.pop("epsilon", None), kw.pop("epsilon_total", None), kw.pop("rho", None)
    delta, mech = kw.pop("delta", None), kw.pop("mechanism", "laplace")
    if eps is not None and (tot is not None or rho is not None or user):
        if user and tot is None and rho is None:  # release_user's `epsilon` is the whole release's
            return Budget(epsilon_total=eps, delta=delta, mechanism=mech)
        raise DpoptInputError("`epsilon` (per grid) is seed 002's mode of privacy='public-occupancy'; give "
                              f"`epsilon_total`; got epsilon={eps!r}")
    if eps is not None:
        if mech != "laplace" or delta is not None:
            raise DpoptInputError(f"`epsilon` is the seeds' per-grid Laplace budget; got mechanism={mech!r}, "
                                  f"delta={delta!r}")
        return PerGridBudget(eps)
    return Budget(epsilon_total=tot, rho=rho, delta=delta, mechanism=mech)


def _noise(kw: dict[str, Any]) -> NoiseOptions:
    return NoiseOptions(noise=kw.pop("noise", "discrete"), seed=kw.pop("seed", None),
                        granularity_bits=kw.pop("granularity_bits", DEFAULT_GRANULARITY_BITS))


def _foreign(given: dict[str, Any], defaults: dict[str, Any], model: str) -> None:
    on = [k for k, v in given.items() if k in defaults and v is not defaults[k] and v != defaults[k]]
    if on:
        raise DpoptInputError(f"`{on[0]}` is not an option of privacy={model!r}")


def release(records: Any, *, bound: float, privacy: str = "user", **kw: Any) -> Any:
    """The old ``dpopt.release.release(records, bound=…, privacy=…, <30 keywords>)``."""
    user = privacy == "user"
    if privacy not in ("user", "public-occupancy"):
        raise DpoptInputError(f"`privacy` must be one of ('user', 'public-occupancy'); got {privacy!r}")
    est = EstimationOptions(confidence=kw.pop("confidence", 0.95))
    if user:
        kw.setdefault("bounds", "select")
        _foreign(_take(kw, PUBLIC_KEYS), PUBLIC_DEFAULTS, "user")
        model: Any = UserOptions(resolution="fixed", **_take(kw, USER_KEYS))  # the old flat release
        if kw.get("epsilon") is not None:
            raise DpoptInputError("`epsilon` (per grid) is seed 002's mode of privacy='public-occupancy'")
    else:
        _foreign(_take(kw, USER_KEYS), USER_DEFAULTS, "public-occupancy")
        model = PublicOccupancyOptions(**_take(kw, PUBLIC_KEYS))
    budget = _budget(kw, user=False)
    grid = GridOptions(**_take(kw, ("h3_resolution", "slot")))
    noise = _noise(kw)
    io = InputOptions(**_take(kw, ("columns", "out_of_range", "timestamp_unit", "chunksize", "backend", "client",
                                   "progress", "sep", "max_dropped", "time_window", "timezone")))
    if kw:
        raise TypeError(f"unexpected keywords {sorted(kw)}")
    return _release(records, bound=bound, budget=budget, model=model, grid=grid, estimation=est, noise=noise, io=io)


def release_aggregate(agg: Any, ingest: Any = None, **kw: Any) -> Any:
    """The old ``release_aggregate(agg, ingest, bound=…, epsilon=…, plan=…, seed=…, …)``."""
    bound = kw.pop("bound", None)
    confidence = kw.pop("confidence", 0.95)
    extra = _take(kw, ("truncated_sums", "timings", "progress"))
    model = PublicOccupancyOptions(**_take(kw, PUBLIC_KEYS))
    budget = _budget(kw, user=False)
    noise = _noise(kw)
    if kw:
        raise TypeError(f"unexpected keywords {sorted(kw)}")
    return _release_aggregate(agg, budget, model, bound=bound, noise=noise, confidence=confidence, ingest=ingest,
                              **extra)


def release_user(agg: Any, *, bound: float, **kw: Any) -> Any:
    """The old ``dpopt.userdp.release_user(agg, bound=…, epsilon=…, delta=…, partitions=…, …)``."""
    sampler = kw.pop("noise_mechanism", None)
    mech = kw.get("mechanism")
    if mech is not None and not isinstance(mech, str):  # the older keyword: a sampler object
        if sampler is not None:
            raise DpoptInputError("give the sampler once: `noise_mechanism` (or the older `mechanism=` object)")
        sampler = kw.pop("mechanism")
    if sampler is not None and "mechanism" not in kw:
        kw["mechanism"] = "laplace" if getattr(sampler, "unit", None) == "epsilon" else "gaussian"
    elif kw.get("mechanism") is None:
        kw.pop("mechanism", None)
    model = UserOptions(resolution="fixed", **_take(kw, USER_KEYS))  # the old flat release
    budget = _budget(kw, user=True)
    noise = _noise(kw)
    if kw:
        raise TypeError(f"unexpected keywords {sorted(kw)}")
    return _release_user(agg, budget, model, bound=bound, noise=noise, sampler=sampler)


def release_user_records(records: Any, *, bound: float, epsilon: float | None = None, **kw: Any) -> Any:
    """The old ``dpopt.userdp.release_user_records``."""
    return release(records, bound=bound, privacy="user", epsilon_total=epsilon, **kw)


def aggregate_records(records: Any, *, bound: float, h3_resolution: int = 7, slot: Any = "1h",
                      keep_samples: bool = False, **io: Any) -> Any:
    """The old ``aggregate_records``: :func:`dpopt.release.contributions`."""
    return contributions(records, bound=bound, grid=GridOptions(h3_resolution, slot), io=InputOptions(**io),
                         keep_samples=keep_samples)
