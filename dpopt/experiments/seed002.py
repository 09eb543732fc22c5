"""Figures 1–8 of seed 002 (Rameshwar & Tandon, arXiv 2405.06261 §VI): CLIP-USER and pseudo-users.

Only the occupancy array ``{m_{g,ℓ}}`` matters (worst-case errors), so nothing here is noisy:

* Fig. 1: privacy loss under composition ``P_ε = K_ε·ε`` after CLIP-USER vs the original
  ``G_1·ε`` (real data; ε ∈ [0.1, 2], log ε axis).
* Fig. 2: the worst-case error across grids after CLIP-USER and the pseudo-user clipping of
  eq. (15), ``Ē_ε``, vs the original ``E_ε`` (real data).
* Figs. 3–5: ``P̂_ε`` (mean over 10 synthetic heavy-hitter occupancy arrays, §VI-A2) vs ``G·ε``, for
  γ = 3, 6, 9 and q = 0.01, ε ∈ [0.1, 1].
* Figs. 6–8: ``Ê_ε`` vs ``E_ε`` for the same draws (log–log axes).

Real data: the paper's ITMS multi-grid data are not public; the Austin Capital Metro bus positions
stand in: 9–10 AM local time on the day with the most buses in that hour, H3 resolution 7, the 50
(cell, hour) grids with the most records. By default the one-day sample embedded in dpopt
(``dpopt/datasets/austin_sample.csv.gz``, 2015-09-06); ``data=`` points at the full merge (there the
busiest day 2017-03-21 gives 284 buses and G_1 = 12, against the paper's 223 and 11).
The algorithms come from :mod:`dpopt.suppression` (CLIP-USER with ERRATA E1/E2; the synthetic
experiments skip the grid of smallest initial error as the paper's implementation does).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_positive_int
from .base import FigureResult, Rows, as_epsilon_grid, progress_bar

if TYPE_CHECKING:
    from ..occupancy import Occupancy

__all__ = ["austin_occupancy", "fig1", "fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "fig8",
           "REAL_EPSILONS", "SYNTHETIC_EPSILONS"]

REAL_EPSILONS = tuple(np.round(np.geomspace(0.1, 2.0, 16), 4))
SYNTHETIC_EPSILONS = tuple(np.round(np.geomspace(0.1, 1.0, 10), 4))
U_DEFAULT = 65.0
DEFAULT_DRAWS = 10

_AUSTIN_SAMPLE = "austin_sample.csv.gz"
#: accepted column layouts: dpopt's canonical fields (the embedded sample) or the raw CapMetrics merge
_AUSTIN_LAYOUTS = (("user_id", "timestamp"), ("vehicle_id", "timestamp_utc"))


def _austin_source(path: str | Path | None) -> Path:
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise DpoptInputError(f"`data` must be a readable CSV file of bus positions; got {str(path)!r}")
        return p
    from importlib import resources

    ref = resources.files("dpopt.datasets").joinpath(_AUSTIN_SAMPLE)
    if ref.is_file():
        return Path(str(ref))
    raise DpoptInputError(
        "the embedded Austin sample dpopt/datasets/austin_sample.csv.gz is not available; pass `data` "
        "(the full capmetrics_vehicle_positions_clean.csv.gz) instead"
    )


def austin_occupancy(
    data: str | Path | None = None,
    *,
    day: str | None = None,
    hour: int = 9,
    resolution: int = 7,
    n_grids: int = 50,
    timezone: str = "America/Chicago",
) -> tuple[Occupancy, dict[str, Any]]:
    """Occupancy array of the Austin bus data in seed 002's ITMS setup.

    Records of one local hour (``hour``..``hour+1``) on ``day`` (default: the day with the most
    distinct buses in that hour) are binned into H3 cells at ``resolution``; the ``n_grids`` cells
    with the most records are kept; user = bus (``vehicle_id``), count = records.

    Returns
    -------
    (Occupancy, dict)
        The occupancy and a summary (day, L, G, G_1, records).
    """
    import h3

    from ..occupancy import Occupancy

    src = _austin_source(data)
    header = pd.read_csv(src, nrows=0).columns
    layout = next((lay for lay in _AUSTIN_LAYOUTS if set(lay) <= set(header)), None)
    if layout is None or not {"latitude", "longitude"} <= set(header):
        raise DpoptInputError(
            f"`data` must have columns user_id,timestamp,latitude,longitude (or vehicle_id,timestamp_utc,...); "
            f"got {list(header)}"
        )
    user_col, time_col = layout
    df = pd.read_csv(src, usecols=[user_col, time_col, "latitude", "longitude"], dtype={user_col: str})
    df = df.rename(columns={user_col: "vehicle_id", time_col: "timestamp_utc"})
    local = pd.to_datetime(df["timestamp_utc"], utc=True, format="ISO8601").dt.tz_convert(timezone)
    in_hour = local.dt.hour.to_numpy() == int(hour)
    days = local.dt.date.astype(str).to_numpy()
    if day is None:
        sub = pd.DataFrame({"day": days[in_hour], "user": df["vehicle_id"].to_numpy()[in_hour]})
        if sub.empty:
            raise DpoptInputError(f"no records in hour {hour} of the Austin data")
        day = str(sub.groupby("day")["user"].nunique().idxmax())
    keep = in_hour & (days == day)
    if not keep.any():
        raise DpoptInputError(f"no Austin records on day {day!r} in hour {hour}")
    sel = df.loc[keep]
    cells = np.array([h3.latlng_to_cell(a, b, int(resolution)) for a, b in
                      zip(sel["latitude"].to_numpy(), sel["longitude"].to_numpy())])
    frame = pd.DataFrame({"user": sel["vehicle_id"].astype(str).to_numpy(), "grid": cells})
    top = frame["grid"].value_counts().nlargest(int(n_grids)).index
    frame = frame[frame["grid"].isin(top)]
    counts = frame.groupby(["user", "grid"]).size().reset_index(name="count")
    occ = Occupancy.from_triples(counts["user"].to_numpy(), counts["grid"].to_numpy(), counts["count"].to_numpy())
    info = {"day": day, "hour": int(hour), "resolution": int(resolution), "users": occ.n_users,
            "grids": occ.n_grids, "G1": int(occ.user_occupancy.max()), "records": int(counts["count"].sum()),
            "source": str(src)}
    return occ, info


def _real(figure: str, *, seed: int, progress: bool, epsilons: Any, bound: float, data: Any, day: Any,
          hour: int, resolution: int, n_grids: int) -> FigureResult:
    """Figure 1 or 2 of seed 002 on the Austin stand-in (one body; ``figure`` picks the series)."""
    from ..suppression import clip_user, pseudo_user_clipping

    U = check_bound(bound)
    eps = as_epsilon_grid(epsilons, REAL_EPSILONS)
    occ, info = austin_occupancy(data, day=day, hour=hour, resolution=resolution, n_grids=n_grids)
    info = dict(info, bound=U, epsilons=list(map(float, eps)))
    rows = Rows(figure)
    with progress_bar(len(eps), progress, figure) as bar:
        for e in eps:
            plan = clip_user(occ, U, e)
            if figure.endswith("fig1"):
                rows.add("CLIP-USER (K*eps)", e, plan.degradation * e)
                rows.add("Original (G1*eps)", e, plan.original_degradation * e)
            else:
                res = pseudo_user_clipping(occ, U, e, plan)
                rows.add("Pseudo-user after CLIP-USER", e, res.max_error)
                rows.add("Original (BASELINE)", e, plan.error_bound)
            bar.update(1)
    return FigureResult(figure, rows.frame(), _real_notes(info, eps), info)


def _real_notes(info: dict, eps: np.ndarray) -> str:
    return (
        "Stand-in for the paper's (non-public) ITMS multi-grid data: Austin Capital Metro bus positions "
        f"({info['source']}), day {info['day']}, {info['hour']}:00-{info['hour'] + 1}:00 local time, H3 "
        f"resolution {info['resolution']}, the {info['grids']} (cell, hour) grids with the most records: "
        f"L = {info['users']} buses, G_1 = {info['G1']}, {info['records']} records (paper's ITMS: G = 50, "
        "L = 223, G_1 = 11). Parameters `data`, `day`, `hour`, `resolution`, `n_grids`.\n"
        f"U = {info['bound']:g} (paper: 65); CLIP-USER with the corrected variance bias (ERRATA E1) and arg min "
        "(ERRATA E2); E = max_g E_g of BASELINE; equal eps/2 split between mean and variance.\n"
        f"eps grid (log-spaced, the paper's range 0.1..2): {list(map(float, eps))}. Deterministic: "
        "`--runs`/`--seed` are ignored."
    )


def fig1(*, runs: int | None = None, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, data: Any = None, day: Any = None, hour: int = 9, resolution: int = 7,
         n_grids: int = 50) -> FigureResult:
    """Seed 002 Fig. 1: ``P_ε = K_ε·ε`` after CLIP-USER vs ``G_1·ε`` (Austin stand-in for ITMS)."""
    return _real("002-fig1", seed=seed, progress=progress, epsilons=epsilons, bound=bound, data=data, day=day,
                 hour=hour, resolution=resolution, n_grids=n_grids)


def fig2(*, runs: int | None = None, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, data: Any = None, day: Any = None, hour: int = 9, resolution: int = 7,
         n_grids: int = 50) -> FigureResult:
    """Seed 002 Fig. 2: ``Ē_ε`` after CLIP-USER + pseudo-users vs the original ``E_ε`` (Austin)."""
    return _real("002-fig2", seed=seed, progress=progress, epsilons=epsilons, bound=bound, data=data, day=day,
                 hour=hour, resolution=resolution, n_grids=n_grids)


def synthetic_curves(
    *, gamma: float, q: float = 0.01, draws: int = DEFAULT_DRAWS, seed: int = 0, epsilons: Any = None,
    bound: float = U_DEFAULT, n_grids: int = 12, skip_min_error_grid: bool = True, progress: bool = False,
    desc: str = "",
) -> dict[str, np.ndarray]:
    """Per draw and ε: ``K_ε·ε``, ``G·ε``, ``Ē_ε`` and ``E_ε`` on heavy-hitter occupancies (§VI-A2).

    Returns arrays of shape ``(draws, len(epsilons))`` under keys ``P``, ``P0``, ``Ebar``, ``E``.
    """
    from ..suppression import clip_user, heavy_hitter_occupancy, pseudo_user_clipping

    U = check_bound(bound)
    draws = check_positive_int(draws, "draws")
    eps = as_epsilon_grid(epsilons, SYNTHETIC_EPSILONS)
    rng = np.random.default_rng(seed)
    out = {k: np.zeros((draws, eps.size)) for k in ("P", "P0", "Ebar", "E")}
    with progress_bar(draws * eps.size, progress, desc) as bar:
        for i in range(draws):
            occ = heavy_hitter_occupancy(rng, n_grids=n_grids, q=q, gamma=gamma)
            for j, e in enumerate(eps):
                plan = clip_user(occ, U, e, skip_min_error_grid=skip_min_error_grid)
                out["P"][i, j] = plan.degradation * e
                out["P0"][i, j] = plan.original_degradation * e
                out["E"][i, j] = plan.error_bound
                out["Ebar"][i, j] = pseudo_user_clipping(occ, U, e, plan).max_error
                bar.update(1)
    return out


_CURVES: dict[tuple, dict[str, np.ndarray]] = {}


def _se(a: np.ndarray) -> np.ndarray:
    return a.std(axis=0, ddof=1) / np.sqrt(a.shape[0]) if a.shape[0] > 1 else np.zeros(a.shape[1])


def _synthetic(figure: str, gamma: float, kind: str, *, runs: int | None, seed: int, progress: bool,
               epsilons: Any, bound: float, q: float, n_grids: int, skip_min_error_grid: bool) -> FigureResult:
    draws = DEFAULT_DRAWS if runs is None else check_positive_int(runs, "runs")
    eps = as_epsilon_grid(epsilons, SYNTHETIC_EPSILONS)
    key = (float(gamma), float(q), draws, int(seed), tuple(map(float, eps)), float(bound), int(n_grids),
           bool(skip_min_error_grid))
    if key not in _CURVES:  # Figs. 3/6, 4/7, 5/8 share their draws
        if len(_CURVES) > 16:
            _CURVES.clear()
        _CURVES[key] = synthetic_curves(gamma=gamma, q=q, draws=draws, seed=seed, epsilons=eps, bound=bound,
                                        n_grids=n_grids, skip_min_error_grid=skip_min_error_grid,
                                        progress=progress, desc=figure)
    c = {k: v.copy() for k, v in _CURVES[key].items()}
    rows = Rows(figure)
    if kind == "P":
        rows.add_many("CLIP-USER (mean K*eps)", eps, c["P"].mean(axis=0), _se(c["P"]))
        rows.add_many("Original (G*eps)", eps, c["P0"].mean(axis=0), _se(c["P0"]))
    else:
        rows.add_many("Pseudo-user after CLIP-USER", eps, c["Ebar"].mean(axis=0), _se(c["Ebar"]))
        rows.add_many("Original (BASELINE)", eps, c["E"].mean(axis=0), _se(c["E"]))
    notes = (
        f"Synthetic heavy-hitter occupancy (seed 002 §VI-A2): G = {n_grids} grids, L = 2^G - 1 users, user l in "
        f"[2^j, 2^(j+1)) occupies G - j random grids, counts Geo(q = {q}), the largest count of each grid "
        f"scaled by (1 + gamma), gamma = {gamma} (dpopt.suppression.heavy_hitter_occupancy; the scaled count is "
        "rounded).\n"
        f"{draws} independent draws (`--runs`; the paper: 10), seed {seed}; value = mean over draws, stderr = "
        "sd/sqrt(draws).\n"
        f"CLIP-USER skips the grid of smallest initial error: {skip_min_error_grid} (the paper's "
        f"implementation, §VI-A3); corrected variance bias (ERRATA E1), arg min (ERRATA E2); U = {bound:g}.\n"
        f"eps grid (log-spaced, the paper's range 0.1..1): {list(map(float, eps))}."
    )
    return FigureResult(figure, rows.frame(), notes, {"gamma": gamma, "q": q, "draws": draws, "seed": seed,
                                                      "bound": bound, "epsilons": list(map(float, eps))})


def _make(figure: str, gamma_default: float, kind: str) -> Callable[..., FigureResult]:
    def fig(*, runs: int | None = None, seed: int = 0, progress: bool = False, epsilons: Any = None,
            bound: float = U_DEFAULT, q: float = 0.01, n_grids: int = 12,
            skip_min_error_grid: bool = True, gamma: float = gamma_default) -> FigureResult:
        return _synthetic(figure, float(gamma), kind, runs=runs, seed=seed, progress=progress,
                          epsilons=epsilons, bound=bound, q=q, n_grids=n_grids,
                          skip_min_error_grid=skip_min_error_grid)

    what = "privacy loss P̂_ε vs G·ε" if kind == "P" else "worst-case error Ê_ε vs E_ε"
    fig.__doc__ = (f"Seed 002 Fig. {figure[-1]}: {what} on synthetic data (paper: γ = {gamma_default:g}, "
                   "q = 0.01; both can be set).")
    fig.__name__ = f"fig{figure[-1]}"
    return fig


fig3 = _make("002-fig3", 3.0, "P")
fig4 = _make("002-fig4", 6.0, "P")
fig5 = _make("002-fig5", 9.0, "P")
fig6 = _make("002-fig6", 3.0, "E")
fig7 = _make("002-fig7", 6.0, "E")
fig8 = _make("002-fig8", 9.0, "E")
